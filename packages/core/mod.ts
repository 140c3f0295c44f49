/**
 * `@nrt/core`: the nrt runtime kernel.
 *
 * @module
 */
export * from "./status.ts";
export * from "./error.ts";
export * from "./state.ts";
