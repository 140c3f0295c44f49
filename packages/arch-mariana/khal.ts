/**
 * The Mariana (NC-v4) `Khal`: the spec-driven HAL of `@nrt/core` plus Mariana's per-arch behaviours.
 *
 * Seed: runtime-synthesis §2.1 — "release run-stall: Cayman/Mariana clear host CSR 0x3000 (0xFF->0x00, all 8 at
 * once)": `KhalBase.q7HoldRunStall` writes 0xFF before the image install, {@linkcode MarianaKhal.q7ReleaseRunStall}
 * writes 0x00 after it; lifecycle-error-model §4.5 (the subtype decoder and text table).
 *
 * @module
 */
import { type HalTarget, KhalBase, ncBlock, NrtError, NrtStatus, type SiliconSpec, type UcodeImage } from "@nrt/core";
import { marianaErrorSubtype, marianaIsaErrorText } from "./error_tables.ts";
import { MARIANA_SPEC } from "./spec.ts";
import { marianaStockPoolUcode } from "./stock_ucode.ts";

/**
 * The Mariana HAL.
 *
 * @example The decoder and the run-stall path
 * ```ts
 * import { MarianaKhal } from "@nrt/arch-mariana";
 * const khal = new MarianaKhal();
 * console.log(khal.spec.runStallRelease, khal.errorSubtype(0x0a_00_0cn)); // "host-csr" 0
 * ```
 */
export class MarianaKhal extends KhalBase {
  /** The Mariana spec. */
  readonly spec: SiliconSpec = MARIANA_SPEC;

  /** Clears the run-stall CSR (0x3000): all 8 Q7 cores leave stall at once. */
  async q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void> {
    this.assertArch();
    const runStall = this.spec.csr.runStall;
    if (runStall === null) throw new NrtError(NrtStatus.NRT_HW_ERROR, "Cannot release run-stall: the mariana spec has no run-stall CSR");
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + runStall, 0x00);
  }

  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number {
    this.assertArch();
    return marianaErrorSubtype(record);
  }

  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string {
    this.assertArch();
    return marianaIsaErrorText(errorId);
  }

  /** The stock Pool image. */
  stockPoolUcode(): UcodeImage {
    return marianaStockPoolUcode();
  }
}
