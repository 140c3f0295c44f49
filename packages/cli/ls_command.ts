/**
 * `nrt ls [--output-format table|json] [-j] [-w] [-a] [--device ADDRESS] [--arch A]`: the devices and the processes
 * holding their NeuronCores, in neuron-ls's table and JSON shapes (Neuron LS User Guide; the shapes are
 * `neuron/neuron_ls.ts`). Where the listing comes from is ours:
 *
 * - with a device daemon (`--device`, or the first `nrt device-sim` announced on this machine that answers,
 *   `neuron_discovery.ts`): the daemon's devices, and every client process holding NeuronCores with the cores it
 *   holds (the daemon's core grants; the command is the name the client gave, which is its command line unless it
 *   chose another). An announced daemon that cannot be reached (a stale announcement, its pid reused) is skipped
 *   with a line on stderr, as `nrt monitor` skips it; a `--device` that cannot be reached fails;
 * - without one: the devices the embedded simulator makes for `--arch` (else `NRT_ARCH`, else Cayman), and the
 *   `nrt serve` processes announced on this machine that run their own embedded simulator, each holding the cores
 *   it announced on device 0.
 *
 * No EC2 metadata is read (ours): `instance-type` is the simulated generation's first instance family and
 * `instance-id` is empty. `logical-neuroncore-config` is printed for NC-v3 and later, as neuron-ls prints it on
 * Trn2. The simulator has no PCI address, CPU affinity or NUMA node, so those columns are left out.
 *
 * @module
 */
import { resolveRuntimeConfig } from "@nrt/core";
import process from "node:process";
import type { PortalDeviceInfo } from "@nrt/core/portal";
import type { SiliconSpec } from "@nrt/core/hal";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { createNrtContainer, PortalToken, SHIPPED_ARCH_PACKS } from "./container.ts";
import { formatNeuronLs, type NeuronLsFormat, type NeuronLsSnapshot, type NeuronProcess } from "./neuron/neuron_ls.ts";
import { discover, NRT_RUNTIME_VERSION } from "./neuron_discovery.ts";
import { connectDeviceDaemon, parseAddress } from "./transports.ts";

/** How `nrt ls` is called. */
export const LS_COMMAND = {
  name: "ls",
  usage: "nrt ls [--output-format table|json] [-j] [-w] [-a] [--device ADDRESS] [--arch A]",
  summary:
    "List the Neuron devices, their NeuronCores and memory, and the processes holding cores, as neuron-ls does\n" +
    "(docs/neuron-tools.md). With a device daemon (--device, or one found on this machine) every client process is\n" +
    "listed with its cores.",
  options: {
    "output-format": { type: "string", value: "F", description: "table (default) or json" },
    "json-output": { type: "boolean", short: "j", description: "the older per-device JSON array (neuron-ls -j)" },
    wide: { type: "boolean", short: "w", description: "commands up to 80 characters instead of 40" },
    "show-all-procs": { type: "boolean", short: "a", description: "also processes that do not run the Neuron runtime" },
    device: {
      type: "string",
      value: "ADDRESS",
      description: "a device daemon: unix:PATH, HOST:PORT or PORT (default: the first one announced)",
    },
    arch: {
      type: "string",
      value: "A",
      description: "without a daemon, the generation to simulate (default: NRT_ARCH, else cayman)",
    },
  },
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

/** Where `nrt ls` reads. */
export interface LsOptions {
  /** A device daemon's address; absent: the first one announced, else the embedded simulator. */
  readonly device?: string;
  /** The generation of the embedded simulator. */
  readonly arch?: string;
  /** The environment (announcement folder, `NRT_ARCH`). */
  readonly env?: Record<string, string | undefined>;
  /** Where the line about a skipped announced daemon goes (default: stderr). */
  readonly warn?: (line: string) => void;
}

function specOf(arch: number): SiliconSpec | undefined {
  return SHIPPED_ARCH_PACKS.find((p) => p.spec.arch === arch)?.spec;
}

/** Logical NeuronCore config of a generation: its virtual core size from NC-v3 on, none before (neuron-ls). */
function lncOf(spec: SiliconSpec | undefined): number | undefined {
  if (spec === undefined || spec.generation === "NC-v2") return undefined;
  return spec.forcedVirtualCoreSize ?? spec.defaultVirtualCoreSize;
}

function instanceOf(spec: SiliconSpec | undefined): NeuronLsSnapshot["instance"] {
  return { instanceType: spec?.instances[0] ?? "", instanceId: "" };
}

/** Global logical NeuronCore id of physical core `nc` of `device`, numbered as neuron-ls numbers them. */
function logicalId(devices: readonly PortalDeviceInfo[], lnc: number, device: number, nc: number): number {
  let base = 0;
  for (const d of devices) {
    if (d.index === device) return base + Math.floor(nc / lnc);
    base += Math.floor(d.ncCount / lnc);
  }
  return base + Math.floor(nc / lnc);
}

function lsDevices(devices: readonly PortalDeviceInfo[]): NeuronLsSnapshot["devices"] {
  return devices.map((d) => ({ index: d.index, physicalCores: d.ncCount, hbmBytes: d.hbmBytes, connectedDevices: [] }));
}

/** What a device daemon serves: its devices and, per client process, the cores it holds. */
async function fromDaemon(address: string): Promise<NeuronLsSnapshot> {
  let parsed;
  try {
    parsed = parseAddress(address);
  } catch (e) {
    throw usageError(LS_COMMAND, `--device ${address}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const portal = await connectDeviceDaemon(parsed, { name: "nrt ls" });
  try {
    const devices = await portal.devices();
    const stats = await portal.stats();
    const spec = specOf(devices[0]?.arch ?? -1);
    const lnc = lncOf(spec) ?? 1;
    const byPid = new Map<number, { name: string; grants: Array<{ device: number; nc: number }> }>();
    for (const g of stats.grants) {
      const p = byPid.get(g.pid) ?? { name: g.name, grants: [] };
      p.grants.push({ device: g.device, nc: g.nc });
      byPid.set(g.pid, p);
    }
    const processes: NeuronProcess[] = [...byPid].map(([pid, p]) => ({
      pid,
      command: p.name,
      runtimeVersion: NRT_RUNTIME_VERSION,
      devices: [...new Set(p.grants.map((g) => g.device))].sort((a, b) => a - b),
      neuroncoreIds: [...new Set(p.grants.map((g) => logicalId(devices, lnc, g.device, g.nc)))].sort((a, b) => a - b),
    }));
    return { instance: instanceOf(spec), logicalNeuronCoreConfig: lncOf(spec), devices: lsDevices(devices), processes };
  } finally {
    await portal.close();
  }
}

/** The embedded simulator's devices and the announced servers that run one. */
async function fromEmbedded(
  arch: string | undefined,
  env: Record<string, string | undefined>,
): Promise<NeuronLsSnapshot> {
  const config = resolveRuntimeConfig(arch === undefined ? {} : { arch }, env);
  const portal = createNrtContainer({ arch: config.arch, env }).resolve(PortalToken);
  let devices: PortalDeviceInfo[];
  try {
    devices = await portal.devices();
  } finally {
    await portal.close();
  }
  const spec = specOf(devices[0]?.arch ?? -1);
  const lnc = lncOf(spec) ?? 1;
  const processes: NeuronProcess[] = [];
  for (const a of await discover(env)) {
    if (a.kind !== "serve" || a.device !== undefined) continue;
    processes.push({
      pid: a.pid,
      command: a.command,
      runtimeVersion: a.runtimeVersion,
      devices: [0],
      ...(a.ncs === undefined
        ? {}
        : { neuroncoreIds: [...new Set(a.ncs.map((nc) => logicalId(devices, lnc, 0, nc)))] }),
    });
  }
  return { instance: instanceOf(spec), logicalNeuronCoreConfig: lncOf(spec), devices: lsDevices(devices), processes };
}

/**
 * Collects what `nrt ls` lists.
 *
 * @param options The daemon or the generation, and the environment.
 * @returns Devices and processes.
 * @throws {UsageError} For a `--device` that is not an address, or `--device` with `--arch`.
 * @throws {Error} When the `--device` daemon cannot be reached (an announced one that cannot be reached is skipped:
 * the next one announced is read, else the embedded simulator).
 */
export async function collectLs(options: LsOptions = {}): Promise<NeuronLsSnapshot> {
  // The whole environment: the announcement folder's variables are not the runtime's (envFromProcess keeps only those).
  const env = options.env ?? process.env;
  if (options.device !== undefined && options.arch !== undefined) {
    throw usageError(
      LS_COMMAND,
      "--arch and --device exclude each other (the device daemon simulates its own generation)",
    );
  }
  if (options.device !== undefined) return await fromDaemon(options.device);
  if (options.arch === undefined) {
    const warn = options.warn ?? ((line: string) => console.error(line));
    for (const daemon of await discover(env)) {
      if (daemon.kind !== "device-sim") continue;
      try {
        return await fromDaemon(daemon.address);
      } catch (e) {
        // A daemon that stopped after announcing, or a stale announcement whose pid was reused: nrt monitor skips it.
        warn(
          `nrt ls: skipping the device daemon announced by process ${daemon.pid} at ${daemon.address}: ${
            e instanceof Error ? e.message : String(e)
          }`,
        );
      }
    }
  }
  return await fromEmbedded(options.arch, env);
}

/**
 * `nrt ls`.
 *
 * @param args The arguments after `ls`.
 * @param log Where the listing goes.
 * @returns 0.
 * @throws {UsageError} For an unknown option, an `--output-format` other than table or json, or a bad `--device`.
 */
export async function runLs(
  args: readonly string[],
  log: (s: string) => void = (s) => console.log(s.replace(/\n$/, "")),
): Promise<number> {
  const { help, values } = parseCommandArgs(LS_COMMAND, args);
  if (help) {
    log(formatHelp(LS_COMMAND));
    return 0;
  }
  let format: NeuronLsFormat = "table";
  const of = values["output-format"];
  if (of !== undefined) {
    if (of !== "table" && of !== "json") throw usageError(LS_COMMAND, `--output-format ${of} is not table or json`);
    if (values["json-output"] === true) {
      throw usageError(LS_COMMAND, "--output-format and -j/--json-output exclude each other");
    }
    format = of;
  } else if (values["json-output"] === true) format = "legacy-json";
  const snap = await collectLs({ device: values.device, arch: values.arch });
  log(formatNeuronLs(snap, { format, wide: values.wide === true, showAllProcs: values["show-all-procs"] === true }));
  return 0;
}
