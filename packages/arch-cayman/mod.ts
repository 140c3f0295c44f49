/**
 * `@nrt/arch-cayman`: the NC-v3 (Trn2) arch pack — silicon spec, HAL, error tables, stock Pool ucode and its
 * registration function.
 *
 * @module
 */
export { CAYMAN_SPEC } from "./spec.ts";
export { CaymanKhal } from "./khal.ts";
export { CAYMAN_ERROR_SUBTYPES, CAYMAN_ISA_ERRORS, errorSubtype, isaErrorText } from "./error_tables.ts";
export { stockPoolUcode } from "./stock_ucode.ts";
export { registerCayman } from "./register.ts";
