/**
 * The Cayman (NC-v3) `Khal`: the spec-driven HAL of `@nrt/core` plus Cayman's per-arch behaviours.
 *
 * Seed: runtime-synthesis §2.1 — Cayman releases run-stall by clearing host CSR 0x3000 (0xFF → 0x00), all 8 Q7 cores
 * at once; lifecycle-error-model §4.5 (subtype decoder, text table).
 *
 * @module
 */
import { type HalTarget, KhalBase, ncBlock, type SiliconSpec, type UcodeImage } from "@nrt/core";
import { errorSubtype, isaErrorText } from "./error_tables.ts";
import { CAYMAN_SPEC } from "./spec.ts";
import { stockPoolUcode } from "./stock_ucode.ts";

/** The Cayman HAL. */
export class CaymanKhal extends KhalBase {
  /** The Cayman spec. */
  readonly spec: SiliconSpec = CAYMAN_SPEC;

  /** Clears the run-stall CSR: all 8 Q7 cores leave stall at once. */
  async q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.runStall!, 0x00);
  }

  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number {
    return errorSubtype(record);
  }

  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string {
    return isaErrorText(errorId);
  }

  /** The stock Pool image. */
  stockPoolUcode(): UcodeImage {
    return stockPoolUcode();
  }
}
