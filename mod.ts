/**
 * nrt: a TypeScript runtime for AWS Neuron accelerators, for Deno and Bun. This root module re-exports the
 * application API of `@nrt/core`, the three shipped arch packs (as data), the simulated device and the composition
 * root of `@nrt/cli`. Plug-in authors import `@nrt/core/hal`, `@nrt/core/portal`, `@nrt/core/isa`,
 * `@nrt/core/neff` and `@nrt/core/testing` directly.
 *
 * @module
 */
export * from "@nrt/core";
export { cayman } from "@nrt/arch-cayman";
export { sunda } from "@nrt/arch-sunda";
export { mariana } from "@nrt/arch-mariana";
export { DeviceSimPortal } from "@nrt/device-sim";
export { createNrtContainer, createNrtRuntime } from "@nrt/cli";
