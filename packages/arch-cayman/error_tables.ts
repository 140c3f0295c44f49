/**
 * Cayman's error-record decode: `v2_error_get_infer_error_subtype` and the 12-entry ISA error text table.
 *
 * Seed: lifecycle-error-model §4.5 — `error_id = rec & 0xff`, `mask = rec >> 8`; ids above 0x0b → 0; id 4 →
 * `(mask & 0xfd6b) ? 3 : 2`; id 1 → a per-arch DVE-spurious mask branch; otherwise the per-arch subtype table
 * (indexed `mov (%rax,%rcx,4)`); the text helper bounds the id at 0x0b and falls back to a default string. The
 * seed reads out the Sunda instances; the Cayman table contents below are ours (documented, not reverse-engineered).
 *
 * @module
 */

/** Cayman's DVE-spurious mask for error_id 1 (ours: the seed names only the Sunda constant). */
export const CAYMAN_DVE_SPURIOUS_ERROR_MASK = 0x0180;

/** Subtype per error_id 0..11. */
export const CAYMAN_ERROR_SUBTYPES: readonly number[] = [0, 1, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12];

/** ISA error text per error_id 0..11. */
export const CAYMAN_ISA_ERRORS: readonly string[] = [
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
];

/** The text for ids outside the table. */
export const DEFAULT_ISA_ERROR_TEXT = "unknown error";

/** `v2_error_get_infer_error_subtype` for Cayman. */
export function errorSubtype(rec: bigint): number {
  const errorId = Number(rec & 0xffn);
  const mask = Number((rec >> 8n) & 0xffffn);
  if (errorId > 0x0b) return 0;
  if (errorId === 4) return (mask & 0xfd6b) !== 0 ? 3 : 2;
  if (errorId === 1) return (mask & ~(CAYMAN_DVE_SPURIOUS_ERROR_MASK | 0x7e00) & 0xffff) !== 0 ? 1 : 0;
  return CAYMAN_ERROR_SUBTYPES[errorId];
}

/** `v2_infer_error_get_isa_error_text` for Cayman. */
export function isaErrorText(errorId: number): string {
  return errorId >= 0 && errorId <= 0x0b ? CAYMAN_ISA_ERRORS[errorId] : DEFAULT_ISA_ERROR_TEXT;
}
