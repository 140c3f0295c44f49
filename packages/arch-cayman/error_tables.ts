/**
 * Cayman's error-record decode: `v2_error_get_infer_error_subtype` and `v2_infer_error_get_isa_error_text` for NC-v3.
 *
 * Seed: lifecycle-error-model §4.5 — `error_id = rec & 0xff`, `mask = (uint16_t)(rec >> 8)`; ids above 0x0b → 0;
 * id 4 → `(mask & 0xfd6b) ? 3 : 2`; id 1 → a per-arch DVE-spurious mask branch (the seed elides the Cayman branch as
 * "... cayman/mariana branches ..."); otherwise the per-arch subtype table (indexed `mov (%rax,%rcx,4)`); the text
 * helper bounds the id at 0x0b and falls back to a default string.
 *
 * Ours: the seed reads out only the Sunda instances, so the Cayman id 1 branch takes the Sunda branch's shape with
 * Cayman's own mask, and the mask value, both tables and the default string are ours — documented here and pinned by
 * `tests/arch_error_tables_test.ts`.
 *
 * @module
 */
import { decodeInferErrorSubtype, type ErrorTables, isaErrorTextFrom } from "@nrt/core/hal";

/**
 * Cayman's counterpart of the seed's `SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK` (spelling kept so the three packs'
 * names line up). Ours: bits 7 and 8 (0x0180).
 */
export const CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK = 0x0180;

/** Subtype per error_id 0..11. Entries 1 and 4 are never read (both ids branch before the table). Ours. */
export const CAYMAN_ERROR_SUBTYPES: readonly number[] = Object.freeze([0, 1, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12]);

/** ISA error text per error_id 0..11. Ours. */
export const CAYMAN_ISA_ERRORS: readonly string[] = Object.freeze([
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

/** The text for ids above 0x0b. Ours. */
export const CAYMAN_DEFAULT_ISA_ERROR_TEXT = "unknown error";

/** The Cayman error-decode data, in the shape the shared decoder of `@nrt/core` reads. */
export const CAYMAN_ERROR_TABLES: ErrorTables = Object.freeze({
  dveSpuriousMask: CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
  subtypes: CAYMAN_ERROR_SUBTYPES,
  isaErrors: CAYMAN_ISA_ERRORS,
  defaultText: CAYMAN_DEFAULT_ISA_ERROR_TEXT,
});

/**
 * `v2_error_get_infer_error_subtype` for Cayman.
 *
 * @param rec The low 64 bits of a 16-byte TPB_ERROR record (`notificationWord` of `@nrt/core`).
 * @returns The subtype: 0 for ids above 11, 2 or 3 for id 4, 0 or 1 for id 1, else the table entry.
 *
 * @example Decode an error_id 4 record without any bit of 0xfd6b
 * ```ts
 * import { caymanErrorSubtype } from "@nrt/arch-cayman";
 * console.log(caymanErrorSubtype(0x0094_04n)); // 2
 * ```
 */
export function caymanErrorSubtype(rec: bigint): number {
  return decodeInferErrorSubtype(rec, CAYMAN_ERROR_TABLES);
}

/**
 * `v2_infer_error_get_isa_error_text` for Cayman.
 *
 * @param errorId A TPB_ERROR error_id.
 * @returns The table entry for 0..11, {@linkcode CAYMAN_DEFAULT_ISA_ERROR_TEXT} otherwise.
 */
export function caymanIsaErrorText(errorId: number): string {
  return isaErrorTextFrom(errorId, CAYMAN_ERROR_TABLES);
}
