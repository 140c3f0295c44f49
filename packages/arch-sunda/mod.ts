/**
 * `@nrt/arch-sunda`: the NC-v2 (Trn1, Inf2) arch pack, as data — its silicon spec and error tables, which
 * `@nrt/core/hal`'s `createKhal` turns into the HAL.
 * The files and exported names mirror `@nrt/arch-cayman` and `@nrt/arch-mariana` one for one.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1, §4.5; lifecycle-error-model §2.6, §4.5.
 *
 * @example The spec as plain data
 * ```ts
 * import { SUNDA_SPEC } from "@nrt/arch-sunda";
 * console.log(SUNDA_SPEC.arch, SUNDA_SPEC.ncPerDevice, SUNDA_SPEC.csr.runStall); // 2 2 null
 * ```
 *
 * @module
 */
export { SUNDA_SPEC } from "./spec.ts";
export { sunda } from "./pack.ts";
export {
  SUNDA_DEFAULT_ISA_ERROR_TEXT,
  SUNDA_ERROR_SUBTYPES,
  SUNDA_ERROR_TABLES,
  SUNDA_ISA_ERRORS,
  SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
  sundaErrorSubtype,
  sundaIsaErrorText,
} from "./error_tables.ts";
