/**
 * `@nrt/arch-mariana`: the NC-v4 arch pack, as data — its silicon spec and error tables, which
 * `@nrt/core/hal`'s `createKhal` turns into the HAL.
 * The files and exported names mirror `@nrt/arch-sunda` and `@nrt/arch-cayman` one for one.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1, §4.5; lifecycle-error-model §2.6, §4.5.
 *
 * @example The spec as plain data
 * ```ts
 * import { MARIANA_SPEC } from "@nrt/arch-mariana";
 * console.log(MARIANA_SPEC.arch, MARIANA_SPEC.ncPerDevice, MARIANA_SPEC.csr.runStall); // 4 8 12288 (0x3000)
 * ```
 *
 * @module
 */
export { MARIANA_SPEC } from "./spec.ts";
export { mariana } from "./pack.ts";
export {
  MARIANA_DEFAULT_ISA_ERROR_TEXT,
  MARIANA_ERROR_SUBTYPES,
  MARIANA_ERROR_TABLES,
  MARIANA_ISA_ERRORS,
  MARIANA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
  marianaErrorSubtype,
  marianaIsaErrorText,
} from "./error_tables.ts";
