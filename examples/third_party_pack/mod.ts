/**
 * A third-party arch pack for nrt, kept outside the workspace packages: it uses only the public APIs of
 * `@nrt/core` (the `Khal` token, `KhalBase`, `SiliconSpec`) and `@nrt/device-sim`. See `README.md` and `main.ts`.
 *
 * @module
 */
export { MAVERICK_ARCH, MAVERICK_SPEC } from "./spec.ts";
export { MaverickKhal } from "./khal.ts";
export { registerMaverick } from "./register.ts";
