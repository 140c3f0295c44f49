/**
 * nrt: a TypeScript runtime for AWS Neuron accelerators, for Deno and Bun. This root module re-exports the public
 * API of the workspace packages.
 *
 * @module
 */
export * from "@nrt/core";
export { CaymanKhal, registerCayman } from "@nrt/arch-cayman";
export { registerSunda, SundaKhal } from "@nrt/arch-sunda";
export { MarianaKhal, registerMariana } from "@nrt/arch-mariana";
export { DeviceSimPortal, registerDeviceSim } from "@nrt/device-sim";
export { createNrtContainer } from "@nrt/cli";
