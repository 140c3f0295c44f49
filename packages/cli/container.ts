/**
 * The composition root's container: the embedded simulator as the portal and every arch pack side by side. The
 * runtime picks the pack matching the arch the portal reports (seed: runtime-synthesis §1.2, "per-arch fn-pointers
 * filled at init"); what the simulator simulates is chosen here, from `spec`, `arch`, or `NRT_ARCH`.
 *
 * @module
 */
import "reflect-metadata";
import { CAYMAN_SPEC, registerCayman } from "@nrt/arch-cayman";
import { MARIANA_SPEC, registerMariana } from "@nrt/arch-mariana";
import { registerSunda, SUNDA_SPEC } from "@nrt/arch-sunda";
import { type NrtArch, type NrtArchName, resolveRuntimeConfig, type SiliconSpec } from "@nrt/core";
import { type DeviceAgentMode, type Q7ClusterFactory, registerDeviceSim } from "@nrt/device-sim";
import { container as root, type DependencyContainer } from "tsyringe";

/** The silicon spec of each architecture the simulator can model. */
export const SIMULATED_SPECS: Readonly<Record<NrtArch, SiliconSpec>> = Object.freeze({
  sunda: SUNDA_SPEC,
  cayman: CAYMAN_SPEC,
  mariana: MARIANA_SPEC,
});

/** Options of {@linkcode createNrtContainer}. */
export interface NrtContainerOptions {
  /** The silicon the simulator models; wins over {@linkcode NrtContainerOptions.arch} and `NRT_ARCH`. */
  readonly spec?: SiliconSpec;
  /** The architecture the simulator models (`sunda`, `cayman`, `mariana`, or `trn1`/`inf2`/`trn2`); wins over `NRT_ARCH`. */
  readonly arch?: NrtArchName;
  /** The environment to read `NRT_ARCH` from (pass `envFromProcess()` at an entry point). */
  readonly env?: Record<string, string | undefined>;
  /** Override of the simulated HBM size (out-of-memory tests). */
  readonly hbmBytes?: number;
  /** Where the simulated device runs: its own agent Worker (default), one per NeuronCore, or inline on the host thread. */
  readonly agents?: DeviceAgentMode;
  /** Creates the simulated Q7 clusters of an inline device (tests substitute fakes; implies `agents: "inline"`). */
  readonly q7Factory?: Q7ClusterFactory;
}

/**
 * The spec the simulator should model: `options.spec`, else `options.arch`, else the environment's `NRT_ARCH`, else
 * Cayman.
 *
 * @param options The container options.
 * @returns The chosen spec.
 * @throws {NrtError} `NRT_INVALID` when `arch` or `NRT_ARCH` names no architecture.
 */
export function simulatedSpec(options: NrtContainerOptions = {}): SiliconSpec {
  if (options.spec !== undefined) return options.spec;
  const arch = resolveRuntimeConfig({ arch: options.arch }, { NRT_ARCH: options.env?.NRT_ARCH }).arch ?? "cayman";
  return SIMULATED_SPECS[arch];
}

/**
 * A child container with the device simulator and the three arch packs registered.
 *
 * @param options What to simulate.
 * @returns The container; the caller closes its `Portal` when done.
 *
 * @example Simulate a Trn1 (Sunda) device
 * ```ts ignore
 * import { createNrtContainer } from "@nrt/cli";
 * import { Runtime } from "@nrt/core";
 * const rt = await Runtime.init({ container: createNrtContainer({ arch: "trn1" }) });
 * console.log(rt.khal.spec.name); // "sunda"
 * ```
 */
export function createNrtContainer(options: NrtContainerOptions = {}): DependencyContainer {
  const c = root.createChildContainer();
  registerSunda(c);
  registerCayman(c);
  registerMariana(c);
  registerDeviceSim(c, { spec: simulatedSpec(options), hbmBytes: options.hbmBytes, agents: options.agents, q7Factory: options.q7Factory });
  return c;
}
