/**
 * The shape of `v2_error_get_infer_error_subtype` and `v2_infer_error_get_isa_error_text`, shared by every arch pack:
 * the control flow is the seed's, the tables and the DVE-spurious mask are per-arch data (each pack's
 * `error_tables.ts`).
 *
 * Seed: lifecycle-error-model §4.5 — `error_id = rec & 0xff` (cmp $0xb @0x321768: ids above 0x0b → 0), `mask =
 * (uint16_t)(rec >> 8)`; `error_id == 4` → `(mask & 0xfd6b) ? 3 : 2` (test $0xfd6b,%ax; setne; +2 @0x321790);
 * `error_id == 1` → `(mask & ~(DVE_SPURIOUS_MASK | 0x7e00)) != 0`; otherwise `subtypes[error_id]`
 * (`mov (%rax,%rcx,4)`). The text helper (@0x321740) indexes a 12-entry table for ids ≤ 0x0b and falls back to a
 * default string.
 *
 * @module
 */

/** One generation's error-decode data. */
export interface ErrorTables {
  /** The `*_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK` of the generation (bits of an error_id 1 mask that are not errors). */
  readonly dveSpuriousMask: number;
  /** Subtype per error_id 0..11. */
  readonly subtypes: readonly number[];
  /** ISA error text per error_id 0..11. */
  readonly isaErrors: readonly string[];
  /** The text for ids above 0x0b. */
  readonly defaultText: string;
}

/** `v2_error_get_infer_error_subtype` over a generation's tables. `rec` is the record's low 64 bits. */
export function decodeInferErrorSubtype(rec: bigint, t: ErrorTables): number {
  const errorId = Number(rec & 0xffn);
  const mask = Number((rec >> 8n) & 0xffffn);
  if (errorId > 0x0b) return 0;
  if (errorId === 4) return (mask & 0xfd6b) !== 0 ? 3 : 2;
  if (errorId === 1) return (mask & ~(t.dveSpuriousMask | 0x7e00) & 0xffff) !== 0 ? 1 : 0;
  return t.subtypes[errorId];
}

/** `v2_infer_error_get_isa_error_text` over a generation's table. */
export function isaErrorTextFrom(errorId: number, t: ErrorTables): string {
  return Number.isInteger(errorId) && errorId >= 0 && errorId <= 0x0b ? t.isaErrors[errorId] : t.defaultText;
}
