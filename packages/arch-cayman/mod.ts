/**
 * `@nrt/arch-cayman`: the NC-v3 (Trn2) arch pack, as data — its silicon spec and error tables, which
 * `@nrt/core/hal`'s `createKhal` turns into the HAL.
 * The files and exported names mirror `@nrt/arch-sunda` and `@nrt/arch-mariana` one for one.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1, §4.5; lifecycle-error-model §2.6, §4.5.
 *
 * @example The spec as plain data
 * ```ts
 * import { CAYMAN_SPEC } from "@nrt/arch-cayman";
 * console.log(CAYMAN_SPEC.arch, CAYMAN_SPEC.ncPerDevice, CAYMAN_SPEC.csr.runStall); // 3 8 12288 (0x3000)
 * ```
 *
 * @module
 */
export { CAYMAN_SPEC } from "./spec.ts";
export { cayman } from "./pack.ts";
export {
  CAYMAN_DEFAULT_ISA_ERROR_TEXT,
  CAYMAN_ERROR_SUBTYPES,
  CAYMAN_ERROR_TABLES,
  CAYMAN_ISA_ERRORS,
  CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
  caymanErrorSubtype,
  caymanIsaErrorText,
} from "./error_tables.ts";
