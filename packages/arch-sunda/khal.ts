/**
 * The Sunda (NC-v2) `Khal`: the spec-driven HAL of `@nrt/core` plus Sunda's per-arch behaviours.
 *
 * Seed: runtime-synthesis §2.1 — "release run-stall: … Sunda is a no-op — its Q7s come online under SEQ/SP via the
 * EVT_SEM fabric", so {@linkcode SundaKhal.q7ReleaseRunStall} writes nothing (and `KhalBase.q7HoldRunStall` writes
 * nothing either, as `csr.runStall` is `null`); lifecycle-error-model §4.5 (the subtype decoder and text table, with
 * the Sunda DVE-spurious branch for error_id 1).
 *
 * @module
 */
import { type HalTarget, KhalBase, type SiliconSpec, type UcodeImage } from "@nrt/core";
import { sundaErrorSubtype, sundaIsaErrorText } from "./error_tables.ts";
import { SUNDA_SPEC } from "./spec.ts";
import { sundaStockPoolUcode } from "./stock_ucode.ts";

/**
 * The Sunda HAL.
 *
 * @example The decoder and the run-stall path
 * ```ts
 * import { SundaKhal } from "@nrt/arch-sunda";
 * const khal = new SundaKhal();
 * console.log(khal.spec.runStallRelease, khal.errorSubtype(0x0a_00_0cn)); // "evt-sem" 0
 * ```
 */
export class SundaKhal extends KhalBase {
  /** The Sunda spec. */
  readonly spec: SiliconSpec = SUNDA_SPEC;

  /** A no-op on the host: the sequencer brings the Q7 cores online through the EVT_SEM fabric on its first run. */
  q7ReleaseRunStall(_t: HalTarget, _nc: number): Promise<void> {
    this.assertArch();
    return Promise.resolve();
  }

  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number {
    this.assertArch();
    return sundaErrorSubtype(record);
  }

  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string {
    this.assertArch();
    return sundaIsaErrorText(errorId);
  }

  /** The stock Pool image. */
  stockPoolUcode(): UcodeImage {
    return sundaStockPoolUcode();
  }
}
