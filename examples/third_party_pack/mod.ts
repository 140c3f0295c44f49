/**
 * A third-party arch pack for nrt, kept outside the workspace packages: plain data that `@nrt/core/hal`'s
 * `createKhal` turns into a HAL, passed to `Runtime.init` beside the shipped packs. See `README.md` and `main.ts`.
 *
 * @module
 */
export { MAVERICK_ARCH, MAVERICK_SPEC } from "./spec.ts";
export { maverick } from "./pack.ts";
