/**
 * Sunda's error-record decode: `v2_error_get_infer_error_subtype` and `v2_infer_error_get_isa_error_text`, the NC-v2
 * instances the seed reads out byte for byte (lifecycle-error-model §4.5).
 *
 * The decoder's control flow is the seed's reconstruction of `v2_error_get_infer_error_subtype @0x321760`:
 * `error_id = rec & 0xff`, `mask = (uint16_t)(rec >> 8)`; `error_id > 0x0b` → 0; `error_id == 4` →
 * `(mask & 0xfd6b) ? 3 : 2`; `error_id == 1` on Sunda → `(mask & ~(SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK |
 * 0x7e00)) != 0`; otherwise `sunda_error_subtypes[error_id]` (table @0x9e0fa0). The text helper
 * (`@0x321740`) returns `sunda_isa_errors[id]` (table @0xbf3840) for ids ≤ 0x0b and a default string above.
 *
 * Ours, where the seed gives only names and addresses: the value of the mask constant (@0x9e0420), the contents of the
 * two tables and the default string — documented below and pinned by `tests/arch_error_tables_test.ts`.
 *
 * @module
 */
import { decodeInferErrorSubtype, type ErrorTables, isaErrorTextFrom } from "@nrt/core/hal";

/**
 * `SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK` (@0x9e0420; the seed's spelling is kept so the name can be found). The
 * DVE status bits that are reported but are not errors on NC-v2. Ours: bits 0 and 7 (0x0081). Together with the
 * seed's literal 0x7e00 (bits 9–14) they are the bits an error_id 1 record may carry and still decode to subtype 0.
 */
export const SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK = 0x0081;

/**
 * `sunda_error_subtypes[12]` (@0x9e0fa0): subtype per error_id 0..11. Entries 1 and 4 are never read (both ids take
 * a branch before the table); they hold the branch's "no bit set" answer so the table reads whole. Ours.
 */
export const SUNDA_ERROR_SUBTYPES: readonly number[] = Object.freeze([0, 0, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12]);

/** `sunda_isa_errors[12]` (@0xbf3840): ISA error text per error_id 0..11. Ours. */
export const SUNDA_ISA_ERRORS: readonly string[] = Object.freeze([
  "no error",
  "DVE error",
  "invalid instruction",
  "instruction fetch error",
  "semaphore/event error",
  "DMA descriptor error",
  "address out of range",
  "arithmetic error",
  "pool engine error",
  "sequencer non-fatal error",
  "sequencer fatal error",
  "timeout",
]);

/** The text for ids above 0x0b (the default string @0x83edbd). Ours. */
export const SUNDA_DEFAULT_ISA_ERROR_TEXT = "unknown ISA error";

/** The Sunda error-decode data, in the shape the shared decoder of `@nrt/core` reads. */
export const SUNDA_ERROR_TABLES: ErrorTables = Object.freeze({
  dveSpuriousMask: SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
  subtypes: SUNDA_ERROR_SUBTYPES,
  isaErrors: SUNDA_ISA_ERRORS,
  defaultText: SUNDA_DEFAULT_ISA_ERROR_TEXT,
});

/**
 * `v2_error_get_infer_error_subtype` for Sunda.
 *
 * @param rec The low 64 bits of a 16-byte TPB_ERROR record (`notificationWord` of `@nrt/core`).
 * @returns The subtype: 0 for ids above 11, 2 or 3 for id 4, 0 or 1 for id 1, else the table entry.
 *
 * @example Decode an error_id 4 record
 * ```ts
 * import { sundaErrorSubtype } from "@nrt/arch-sunda";
 * console.log(sundaErrorSubtype(0x0001_04n)); // 3: mask 0x0001 has a bit of 0xfd6b
 * ```
 */
export function sundaErrorSubtype(rec: bigint): number {
  return decodeInferErrorSubtype(rec, SUNDA_ERROR_TABLES);
}

/**
 * `v2_infer_error_get_isa_error_text` for Sunda.
 *
 * @param errorId A TPB_ERROR error_id.
 * @returns The table entry for 0..11, {@linkcode SUNDA_DEFAULT_ISA_ERROR_TEXT} otherwise.
 */
export function sundaIsaErrorText(errorId: number): string {
  return isaErrorTextFrom(errorId, SUNDA_ERROR_TABLES);
}
