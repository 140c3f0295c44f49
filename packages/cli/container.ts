/**
 * The composition root: the one place a DI container (tsyringe) assembles the plug-ins by name — the arch packs
 * side by side under {@linkcode ArchPackToken}, and one device backend under {@linkcode PortalToken} (the embedded
 * simulator by default; `nrt serve --device` puts the remote daemon there). Library packages take their
 * dependencies as arguments; only this file and the entry points resolve from a container.
 *
 * The runtime picks the pack matching the arch the portal reports (seed: runtime-synthesis §1.2, "per-arch
 * fn-pointers filled at init"); what the simulator simulates is chosen here, from `spec`, `arch`, or `NRT_ARCH`,
 * resolved against the registered packs' names and instance families.
 *
 * @module
 */
import "reflect-metadata";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";
import { sunda } from "@nrt/arch-sunda";
import {
  type ArchPack,
  DEFAULT_EXEC_TIMEOUT_SECONDS,
  NrtError,
  NrtStatus,
  type Portal,
  resolveRuntimeConfig,
  Runtime,
  type RuntimeInitOptions,
} from "@nrt/core";
import type { SiliconSpec } from "@nrt/core/hal";
import { type DeviceAgentMode, DeviceSimPortal, type Q7ClusterFactory } from "@nrt/device-sim";
import { container as root } from "tsyringe";

/** A registration name that carries the type registered under it (a string, as tsyringe's tokens may be). */
export type PluginToken<T> = string & { readonly __plugin?: T };

/**
 * The part of a tsyringe `DependencyContainer` the composition root uses: plug-ins register values by token, the
 * root resolves them. A tsyringe container satisfies it; so does any container with these four calls.
 */
export interface NrtContainer {
  /** Registers `provider.useValue` under `token` (several registrations of one token add up). */
  register<T>(token: PluginToken<T>, provider: { useValue: T }): unknown;
  /** The value last registered under `token`; throws when there is none. */
  resolve<T>(token: PluginToken<T>): T;
  /** Every value registered under `token`. */
  resolveAll<T>(token: PluginToken<T>): T[];
  /** Whether `token` has a registration (here or, with `recursive`, in a parent container). */
  isRegistered<T>(token: PluginToken<T>, recursive?: boolean): boolean;
}

/** Token of the device backend. */
export const PortalToken: PluginToken<Portal> = "Portal";
/** Token of the arch packs (one registration per pack). */
export const ArchPackToken: PluginToken<ArchPack> = "ArchPack";

/** The generations this distribution ships, oldest first. */
export const SHIPPED_ARCH_PACKS: readonly ArchPack[] = Object.freeze([sunda, cayman, mariana]);

/** Options of {@linkcode createNrtContainer}. */
export interface NrtContainerOptions {
  /** The silicon the simulator models; wins over {@linkcode NrtContainerOptions.arch} and `NRT_ARCH`. */
  readonly spec?: SiliconSpec;
  /** The generation the simulator models: a pack name or instance family (`cayman`, `trn2`); wins over `NRT_ARCH`. */
  readonly arch?: string;
  /**
   * The environment to read `NRT_ARCH` and `NEURON_RT_EXEC_TIMEOUT` from (pass `envFromProcess()` at an entry point,
   * the same record the runtime gets).
   */
  readonly env?: Record<string, string | undefined>;
  /**
   * `NEURON_RT_EXEC_TIMEOUT` as an option (whole seconds), as {@linkcode Runtime.init} takes it; wins over `env`.
   * The embedded simulator's watchdog gets this budget.
   */
  readonly execTimeoutSeconds?: number;
  /** Override of the simulated HBM size (out-of-memory tests). */
  readonly hbmBytes?: number;
  /** Where the simulated device runs: its own agent Worker (default), one per NeuronCore, or inline on the host thread. */
  readonly agents?: DeviceAgentMode;
  /** Creates the simulated Q7 clusters of an inline device (tests substitute fakes; implies `agents: "inline"`). */
  readonly q7Factory?: Q7ClusterFactory;
  /** Arch packs beside the shipped ones (a fourth generation, say). */
  readonly archPacks?: readonly ArchPack[];
  /** A device backend instead of the embedded simulator (the remote daemon). */
  readonly portal?: Portal;
}

/**
 * The pack whose spec name or instance family is `name` (case-insensitive), among `packs`.
 *
 * @throws {NrtError} `NRT_INVALID` listing the names the packs answer to.
 */
export function archPackNamed(name: string, packs: readonly ArchPack[] = SHIPPED_ARCH_PACKS): ArchPack {
  const n = name.trim().toLowerCase();
  const pack = packs.find((p) =>
    p.spec.name.toLowerCase() === n || p.spec.instances.some((i) => i.toLowerCase() === n)
  );
  if (pack === undefined) {
    const names = packs.flatMap((p) => [p.spec.name, ...p.spec.instances]).join(", ");
    throw new NrtError(NrtStatus.NRT_INVALID, `Unknown architecture "${name}": expected one of ${names}`);
  }
  return pack;
}

/**
 * The spec the simulator should model: `options.spec`, else `options.arch`, else the environment's `NRT_ARCH`, else
 * Cayman.
 *
 * @throws {NrtError} `NRT_INVALID` when `arch` or `NRT_ARCH` names no registered generation.
 */
export function simulatedSpec(options: NrtContainerOptions = {}): SiliconSpec {
  if (options.spec !== undefined) return options.spec;
  const arch = resolveRuntimeConfig({ arch: options.arch }, { NRT_ARCH: options.env?.NRT_ARCH }).arch ?? "cayman";
  return archPackNamed(arch, [...SHIPPED_ARCH_PACKS, ...(options.archPacks ?? [])]).spec;
}

/**
 * The runtime's execution budget in ms, resolved as {@linkcode Runtime.init} resolves it: the `execTimeoutSeconds`
 * option, else `NEURON_RT_EXEC_TIMEOUT` of `options.env`, else libnrt's default (30 s). The simulated device's
 * watchdog gets it (docs/faults.md: "Give the watchdog the runtime's budget"), so a run the runtime gave up on is
 * dropped by the device when the runtime reports `NRT_TIMEOUT`, not 30 s later, and a run within a longer budget is
 * not dropped at 30 s. A value the runtime would refuse gives the default here: `Runtime.init` reports it.
 */
export function resolvedExecTimeoutMs(
  options: Pick<NrtContainerOptions, "env" | "execTimeoutSeconds"> = {},
): number {
  try {
    return resolveRuntimeConfig(
      options.execTimeoutSeconds === undefined ? {} : { execTimeoutSeconds: options.execTimeoutSeconds },
      { NEURON_RT_EXEC_TIMEOUT: options.env?.NEURON_RT_EXEC_TIMEOUT },
    ).execTimeoutMs;
  } catch (e) {
    if (e instanceof NrtError) return DEFAULT_EXEC_TIMEOUT_SECONDS * 1000;
    throw e;
  }
}

/**
 * A child container with every arch pack and a device backend registered: the embedded simulator (modelling
 * {@linkcode simulatedSpec}, its watchdog on the runtime's budget, {@linkcode resolvedExecTimeoutMs}) unless
 * `options.portal` is given.
 *
 * @example Simulate a Trn1 (Sunda) device
 * ```ts ignore
 * import { createNrtContainer, nrtPlugins } from "@nrt/cli";
 * import { Runtime } from "@nrt/core";
 * await using rt = await Runtime.init(nrtPlugins(createNrtContainer({ arch: "trn1" })));
 * console.log(rt.spec.name); // "sunda"
 * ```
 */
export function createNrtContainer(options: NrtContainerOptions = {}): NrtContainer {
  const c = root.createChildContainer();
  for (const pack of [...SHIPPED_ARCH_PACKS, ...(options.archPacks ?? [])]) {
    c.register(ArchPackToken, { useValue: pack });
  }
  const portal = options.portal ??
    new DeviceSimPortal({
      spec: simulatedSpec(options),
      hbmBytes: options.hbmBytes,
      agents: options.agents,
      q7Factory: options.q7Factory,
      watchdogMs: resolvedExecTimeoutMs(options),
    });
  c.register(PortalToken, { useValue: portal });
  return c;
}

/** The runtime's plug-ins as {@linkcode Runtime.init} takes them: the container's portal and all its arch packs. */
export function nrtPlugins(container: NrtContainer): Pick<RuntimeInitOptions, "portal" | "archPacks"> {
  return {
    portal: container.resolve(PortalToken),
    archPacks: container.isRegistered(ArchPackToken, true) ? container.resolveAll(ArchPackToken) : [],
  };
}

/**
 * A runtime on the composition root's plug-ins (by default the embedded simulator and the shipped packs). It owns
 * the portal: `close()` (or `await using`) closes it.
 *
 * @example
 * ```ts ignore
 * await using rt = await createNrtRuntime({ arch: "mariana" });
 * ```
 */
export async function createNrtRuntime(
  options: NrtContainerOptions & Omit<RuntimeInitOptions, "portal" | "archPacks"> = {},
): Promise<Runtime> {
  return await Runtime.init({ ...options, ...nrtPlugins(createNrtContainer(options)) });
}
