/**
 * `@nrt/core`: the nrt runtime kernel.
 *
 * @module
 */
export * from "./status.ts";
export * from "./error.ts";
export * from "./state.ts";
export * from "./silicon_spec.ts";
export * from "./portal.ts";
export * from "./khal.ts";
export * from "./isa.ts";
