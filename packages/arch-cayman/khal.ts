/**
 * The Cayman (NC-v3) `Khal`: the spec-driven HAL of `@nrt/core` plus Cayman's per-arch behaviours.
 *
 * Seed: runtime-synthesis §2.1 — "release run-stall: Cayman/Mariana clear host CSR 0x3000 (0xFF->0x00, all 8 at
 * once)": `KhalBase.q7HoldRunStall` writes 0xFF before the image install, {@linkcode CaymanKhal.q7ReleaseRunStall}
 * writes 0x00 after it; lifecycle-error-model §4.5 (the subtype decoder and text table).
 *
 * @module
 */
import { type HalTarget, KhalBase, ncBlock, NrtError, NrtStatus, type SiliconSpec, type UcodeImage } from "@nrt/core";
import { caymanErrorSubtype, caymanIsaErrorText } from "./error_tables.ts";
import { CAYMAN_SPEC } from "./spec.ts";
import { caymanStockPoolUcode } from "./stock_ucode.ts";

/**
 * The Cayman HAL.
 *
 * @example The decoder and the run-stall path
 * ```ts
 * import { CaymanKhal } from "@nrt/arch-cayman";
 * const khal = new CaymanKhal();
 * console.log(khal.spec.runStallRelease, khal.errorSubtype(0x0a_00_0cn)); // "host-csr" 0
 * ```
 */
export class CaymanKhal extends KhalBase {
  /** The Cayman spec. */
  readonly spec: SiliconSpec = CAYMAN_SPEC;

  /** Clears the run-stall CSR (0x3000): all 8 Q7 cores leave stall at once. */
  async q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void> {
    this.assertArch();
    const runStall = this.spec.csr.runStall;
    if (runStall === null) throw new NrtError(NrtStatus.NRT_HW_ERROR, "Cannot release run-stall: the cayman spec has no run-stall CSR");
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + runStall, 0x00);
  }

  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number {
    this.assertArch();
    return caymanErrorSubtype(record);
  }

  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string {
    this.assertArch();
    return caymanIsaErrorText(errorId);
  }

  /** The stock Pool image. */
  stockPoolUcode(): UcodeImage {
    return caymanStockPoolUcode();
  }
}
