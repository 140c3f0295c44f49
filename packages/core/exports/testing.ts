/**
 * `@nrt/core/testing`: the conformance suites a third-party arch pack or portal backend runs to show it behaves as
 * the shipped ones do, a portal with no device behind it, and small test helpers. The suites take the test
 * framework's `describe`/`test`/`expect` as an argument, so this module depends on no test runner.
 *
 * @example Run the pack suite for a pack (in a `*_test.ts` file)
 * ```ts ignore
 * import { describe, expect, test } from "bun:test";
 * import { khalContract } from "@nrt/core/testing";
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * khalContract({ describe, test, expect }, "my-pack", () => myPack, async (spec) => {
 *   const sim = new DeviceSimPortal({ spec });
 *   return { portal: sim, spec, close: () => sim.close() };
 * });
 * ```
 *
 * @module
 */
export {
  KHAL_CONTRACT_CASES,
  khalContract,
  type KhalContractOptions,
  type KhalContractQ7Event,
  type KhalContractSubject,
} from "../khal_contract.ts";
export {
  type ContractSkip,
  PORTAL_CONTRACT_CASES,
  portalContract,
  type PortalContractSubject,
} from "../portal_contract.ts";
export { NullPortal } from "../null_portal.ts";
export type { Expect, TestApi } from "../test_api.ts";

/** mulberry32: a small seeded PRNG returning floats in [0, 1), so a failing fuzz or campaign replays exactly. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
