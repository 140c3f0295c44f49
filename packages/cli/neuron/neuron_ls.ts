/**
 * neuron-ls's outputs for a {@linkcode NeuronSnapshot}: the table, the per-device JSON array of `-j/--json-output`,
 * and a JSON document for `--output-format json` (Neuron LS User Guide, "Examples" and "Field Definitions").
 *
 * The table follows the guide's Trn2 examples and recorded output of aws-neuronx-tools 2.32:
 * - a preamble `instance-type:`, `instance-id:`, then `logical-neuroncore-config:` (Trn2 only);
 * - `+`/`-`/`|` borders, two header lines centred (extra space on the right), cells left-aligned with one space
 *   of padding;
 * - one row per process on a device, the device's cells only on its first row; a border between devices once any
 *   device spans several rows (`--show-all-procs` example);
 * - commands cut to 40 characters, 80 with `--wide`, ending in `...` when cut; `NA` as the runtime version of a
 *   process without the Neuron runtime; only processes running the runtime unless `--show-all-procs`;
 * - `NEURON MEMORY` in whole GiB written `GB` (96 GiB prints `96 GB`); `NEURON CORE IDS` as a range `0-3`.
 *
 * Ours (inferred from recorded output, not stated by the guide): the column order DEVICE, CORES, CORE IDS, MEMORY,
 * CONNECTED DEVICES, PCI BDF, PID, COMMAND, CPU AFFINITY, NUMA NODE, RUNTIME VERSION; a column whose cells are all
 * empty is left out (recorded: CONNECTED DEVICES on a one-device instance, COMMAND when no command is readable,
 * the process columns when no process is shown; ours: PCI BDF, CPU AFFINITY, NUMA NODE when the simulator has
 * none); processes sorted by pid; a list `0, 2` for non-contiguous core ids.
 *
 * JSON (`-j`) follows the guide's example and field list, with `instance_type` and `instance_id` first as recorded
 * output of 2.32 has them; 4-space indentation as printed; `command` cut as in the table (the guide's example
 * shows the cut form). Ours: `""` for an unknown `bdf`, `cpu_affinity` or `numa_node`, `[]` for no process.
 *
 * `--output-format json` replaces `-j` from Neuron 2.34 with "top-level fields for information that applies to more
 * than one device, such as instance and UltraServer details" (announcement, October 2026); the guide does not
 * show it. Ours: `{ instance_type, instance_id, [ultraserver_id], [logical_neuroncore_config], neuron_devices }`,
 * each device as in `-j` without the instance fields, and each process with the `neuroncore_ids` of the device it
 * holds when they are known (a device daemon says which process holds which core).
 *
 * @module
 */
import type { DeviceSnapshot, InstanceSnapshot, NeuronSnapshot } from "./snapshot.ts";

/** A process holding Neuron devices, as neuron-ls lists it. */
export interface NeuronProcess {
  /** Process id. */
  readonly pid: number;
  /** Command line. */
  readonly command: string;
  /** Neuron runtime version, absent for a process without the runtime (printed `NA`). */
  readonly runtimeVersion?: string;
  /** Devices the process uses. */
  readonly devices: readonly number[];
  /** The global logical NeuronCore ids the process holds, when known (`--output-format json` lists them; ours). */
  readonly neuroncoreIds?: readonly number[];
}

/** What neuron-ls reads. */
export interface NeuronLsSnapshot {
  /** The instance. */
  readonly instance: Pick<InstanceSnapshot, "instanceType" | "instanceId" | "ultraserverId">;
  /** Logical NeuronCore config; absent on generations without one. */
  readonly logicalNeuronCoreConfig?: number;
  /** The devices. */
  readonly devices: readonly Pick<
    DeviceSnapshot,
    "index" | "physicalCores" | "hbmBytes" | "connectedDevices" | "pciBdf" | "cpuAffinity" | "numaNode"
  >[];
  /** The processes holding devices. */
  readonly processes: readonly NeuronProcess[];
}

/** The neuron-ls view of a full snapshot: its runtimes (their devices from their cores) and other processes. */
export function neuronLsSnapshot(snap: NeuronSnapshot): NeuronLsSnapshot {
  const runtimes: NeuronProcess[] = snap.runtimes.map((r) => ({
    pid: r.pid,
    command: r.command,
    runtimeVersion: r.runtimeVersion,
    devices: [...new Set(r.cores.map((c) => c.device))].sort((a, b) => a - b),
  }));
  return {
    instance: snap.instance,
    logicalNeuronCoreConfig: snap.logicalNeuronCoreConfig,
    devices: snap.devices,
    processes: [...runtimes, ...(snap.otherProcesses ?? [])],
  };
}

/** `table` (the default), `json` (`--output-format json`) or `legacy-json` (`-j`, `--json-output`). */
export type NeuronLsFormat = "table" | "json" | "legacy-json";

/** How to list. */
export interface NeuronLsOptions {
  /** Output format; default `table`. */
  readonly format?: NeuronLsFormat;
  /** `--wide`/`-w`: commands up to 80 characters instead of 40. */
  readonly wide?: boolean;
  /** `--show-all-procs`/`-a`: include processes that do not run the Neuron runtime. */
  readonly showAllProcs?: boolean;
}

/** One process of `neuron_processes`. */
export interface NeuronLsProcessJson {
  /** Process id. */
  pid: number;
  /** Command line, cut as in the table. */
  command: string;
  /** Runtime version, `NA` without the runtime. */
  neuron_runtime_version: string;
  /** `--output-format json` only (ours): the NeuronCores of this device the process holds, when known. */
  neuroncore_ids?: number[];
}

/** One device as `-j` prints it, without the instance fields. */
export interface NeuronLsDeviceJson {
  /** Device index. */
  neuron_device: number;
  /** PCI BDF. */
  bdf: string;
  /** CPU affinity list. */
  cpu_affinity: string;
  /** NUMA node, as a string. */
  numa_node: string;
  /** Linked devices. */
  connected_to: number[];
  /** NeuronCores (logical) on the device. */
  nc_count: number;
  /** Logical NeuronCore config (Trn2). */
  logical_neuroncore_config?: number;
  /** Device memory in bytes. */
  memory_size: number;
  /** Global NeuronCore ids of the device. */
  neuroncore_ids: number[];
  /** Processes using the device. */
  neuron_processes: NeuronLsProcessJson[];
}

/** One element of the `-j` array. */
export interface NeuronLsLegacyDeviceJson extends NeuronLsDeviceJson {
  /** Instance type. */
  instance_type: string;
  /** Instance id. */
  instance_id: string;
}

/** The `--output-format json` document (Ours). */
export interface NeuronLsJson {
  /** Instance type. */
  instance_type: string;
  /** Instance id. */
  instance_id: string;
  /** UltraServer id, when part of one. */
  ultraserver_id?: string;
  /** Logical NeuronCore config (Trn2). */
  logical_neuroncore_config?: number;
  /** The devices. */
  neuron_devices: NeuronLsDeviceJson[];
}

const GiB = 2 ** 30;

interface DeviceView {
  readonly device: NeuronLsSnapshot["devices"][number];
  readonly coreIds: number[];
  readonly processes: NeuronProcess[];
}

function cut(command: string, wide: boolean): string {
  const max = wide ? 80 : 40;
  return command.length <= max ? command : `${command.slice(0, max - 3)}...`;
}

function coreIdsText(ids: readonly number[]): string {
  if (ids.length === 0) return "";
  const contiguous = ids.every((id, i) => i === 0 || id === ids[i - 1] + 1);
  if (ids.length === 1) return String(ids[0]);
  return contiguous ? `${ids[0]}-${ids[ids.length - 1]}` : ids.join(", ");
}

function views(snap: NeuronLsSnapshot, showAllProcs: boolean): DeviceView[] {
  const lnc = snap.logicalNeuronCoreConfig ?? 1;
  const devices = [...snap.devices].sort((a, b) => a.index - b.index);
  let next = 0;
  return devices.map((device) => {
    const count = Math.floor(device.physicalCores / lnc);
    const coreIds = Array.from({ length: count }, (_, i) => next + i);
    next += count;
    const processes = snap.processes
      .filter((p) => p.devices.includes(device.index) && (showAllProcs || p.runtimeVersion !== undefined))
      .sort((a, b) => a.pid - b.pid);
    return { device, coreIds, processes };
  });
}

interface Column {
  readonly head: readonly [string, string];
  /** The cell of this column on row `row` (0 = the device's first row) of a device. */
  readonly cell: (v: DeviceView, row: number) => string;
}

function center(s: string, width: number): string {
  const left = Math.floor((width - s.length) / 2);
  return " ".repeat(left) + s + " ".repeat(width - s.length - left);
}

function renderTable(columns: readonly Column[], groups: readonly string[][][]): string[] {
  const widths = columns.map((c, j) =>
    Math.max(c.head[0].length, c.head[1].length, ...groups.flatMap((rows) => rows.map((r) => r[j].length)))
  );
  const border = `+${widths.map((w) => "-".repeat(w + 2)).join("+")}+`;
  const line = (cells: readonly string[], align: (s: string, w: number) => string): string =>
    `|${cells.map((s, j) => ` ${align(s, widths[j])} `).join("|")}|`;
  const out = [
    border,
    line(columns.map((c) => c.head[0]), center),
    line(columns.map((c) => c.head[1]), center),
    border,
  ];
  const separated = groups.some((rows) => rows.length > 1);
  groups.forEach((rows, i) => {
    if (separated && i > 0) out.push(border);
    for (const r of rows) out.push(line(r, (s, w) => s.padEnd(w)));
  });
  out.push(border);
  return out;
}

/**
 * The neuron-ls table, preamble included.
 *
 * @param snap Devices and processes.
 * @param options `wide` and `showAllProcs`.
 * @returns The text as neuron-ls prints it, ending in a newline.
 *
 * @example List one Trn2 device
 * ```ts
 * import { neuronLsTable } from "./neuron_ls.ts";
 * console.log(neuronLsTable({
 *   instance: { instanceType: "trn2.3xlarge", instanceId: "i-0abc" },
 *   logicalNeuronCoreConfig: 2,
 *   devices: [{ index: 0, physicalCores: 8, hbmBytes: 96 * 2 ** 30, connectedDevices: [] }],
 *   processes: [],
 * }));
 * ```
 */
export function neuronLsTable(snap: NeuronLsSnapshot, options: NeuronLsOptions = {}): string {
  const wide = options.wide ?? false;
  const vs = views(snap, options.showAllProcs ?? false);
  const first = (f: (v: DeviceView) => string) => (v: DeviceView, row: number): string => (row === 0 ? f(v) : "");
  const proc = (f: (p: NeuronProcess) => string) => (v: DeviceView, row: number): string =>
    v.processes[row] === undefined ? "" : f(v.processes[row]);
  const all: Column[] = [
    { head: ["NEURON", "DEVICE"], cell: first((v) => String(v.device.index)) },
    { head: ["NEURON", "CORES"], cell: first((v) => String(v.coreIds.length)) },
    { head: ["NEURON", "CORE IDS"], cell: first((v) => coreIdsText(v.coreIds)) },
    { head: ["NEURON", "MEMORY"], cell: first((v) => `${Math.round(v.device.hbmBytes / GiB)} GB`) },
    { head: ["CONNECTED", "DEVICES"], cell: first((v) => v.device.connectedDevices.join(", ")) },
    { head: ["PCI", "BDF"], cell: first((v) => v.device.pciBdf ?? "") },
    { head: ["PID", ""], cell: proc((p) => String(p.pid)) },
    { head: ["COMMAND", ""], cell: proc((p) => cut(p.command, wide)) },
    { head: ["CPU", "AFFINITY"], cell: first((v) => v.device.cpuAffinity ?? "") },
    { head: ["NUMA", "NODE"], cell: first((v) => (v.device.numaNode === undefined ? "" : String(v.device.numaNode))) },
    { head: ["RUNTIME", "VERSION"], cell: proc((p) => p.runtimeVersion ?? "NA") },
  ];
  const rowsOf = (cols: readonly Column[]): string[][][] =>
    vs.map((v) => Array.from({ length: Math.max(1, v.processes.length) }, (_, row) => cols.map((c) => c.cell(v, row))));
  const full = rowsOf(all);
  const kept = all.filter((_, j) => j < 4 || full.some((rows) => rows.some((r) => r[j] !== "")));
  const preamble = [`instance-type: ${snap.instance.instanceType}`, `instance-id: ${snap.instance.instanceId}`];
  if (snap.logicalNeuronCoreConfig !== undefined) {
    preamble.push(`logical-neuroncore-config: ${snap.logicalNeuronCoreConfig}`);
  }
  return `${[...preamble, ...renderTable(kept, rowsOf(kept))].join("\n")}\n`;
}

function deviceJson(v: DeviceView, snap: NeuronLsSnapshot, wide: boolean, withCores = false): NeuronLsDeviceJson {
  const d = v.device;
  return {
    neuron_device: d.index,
    bdf: d.pciBdf ?? "",
    cpu_affinity: d.cpuAffinity ?? "",
    numa_node: d.numaNode === undefined ? "" : String(d.numaNode),
    connected_to: [...d.connectedDevices],
    nc_count: v.coreIds.length,
    ...(snap.logicalNeuronCoreConfig === undefined ? {} : { logical_neuroncore_config: snap.logicalNeuronCoreConfig }),
    memory_size: d.hbmBytes,
    neuroncore_ids: v.coreIds,
    neuron_processes: v.processes.map((p) => ({
      pid: p.pid,
      command: cut(p.command, wide),
      neuron_runtime_version: p.runtimeVersion ?? "NA",
      ...(withCores && p.neuroncoreIds !== undefined
        ? { neuroncore_ids: p.neuroncoreIds.filter((id) => v.coreIds.includes(id)) }
        : {}),
    })),
  };
}

/** The `-j`/`--json-output` array: one object per device. */
export function neuronLsLegacyJson(snap: NeuronLsSnapshot, options: NeuronLsOptions = {}): NeuronLsLegacyDeviceJson[] {
  return views(snap, options.showAllProcs ?? false).map((v) => ({
    instance_type: snap.instance.instanceType,
    instance_id: snap.instance.instanceId,
    ...deviceJson(v, snap, options.wide ?? false),
  }));
}

/** The `--output-format json` document (Ours: the module doc). */
export function neuronLsJson(snap: NeuronLsSnapshot, options: NeuronLsOptions = {}): NeuronLsJson {
  const i = snap.instance;
  return {
    instance_type: i.instanceType,
    instance_id: i.instanceId,
    ...(i.ultraserverId === undefined ? {} : { ultraserver_id: i.ultraserverId }),
    ...(snap.logicalNeuronCoreConfig === undefined ? {} : { logical_neuroncore_config: snap.logicalNeuronCoreConfig }),
    neuron_devices: views(snap, options.showAllProcs ?? false).map((v) => {
      const { logical_neuroncore_config: _, ...device } = deviceJson(v, snap, options.wide ?? false, true);
      return device;
    }),
  };
}

/**
 * What `nrt ls` prints for `options.format`: the table, or JSON indented by 4 spaces as neuron-ls prints it.
 *
 * @returns The text, ending in a newline.
 */
export function formatNeuronLs(snap: NeuronLsSnapshot, options: NeuronLsOptions = {}): string {
  switch (options.format ?? "table") {
    case "table":
      return neuronLsTable(snap, options);
    case "json":
      return `${JSON.stringify(neuronLsJson(snap, options), null, 4)}\n`;
    case "legacy-json":
      return `${JSON.stringify(neuronLsLegacyJson(snap, options), null, 4)}\n`;
  }
}

/**
 * Parses `nrt ls` arguments: `--output-format table|json` (also `--output-format=json`), `-j`/`--json-output`,
 * `-w`/`--wide`, `-a`/`--show-all-procs`. Ours: the last format flag wins; anything else is refused.
 *
 * @throws {TypeError} Naming the argument that cannot be used.
 */
export function parseNeuronLsArgs(args: readonly string[]): NeuronLsOptions {
  let format: NeuronLsFormat = "table";
  let wide = false;
  let showAllProcs = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "-w" || a === "--wide") wide = true;
    else if (a === "-a" || a === "--show-all-procs") showAllProcs = true;
    else if (a === "-j" || a === "--json-output") format = "legacy-json";
    else if (a === "--output-format" || a.startsWith("--output-format=")) {
      const v = a === "--output-format" ? args[++i] : a.slice("--output-format=".length);
      if (v !== "table" && v !== "json") {
        throw new TypeError(
          `Cannot parse nrt ls arguments: --output-format is ${
            v === undefined ? "missing its value" : `"${v}"`
          }, expected table or json`,
        );
      }
      format = v;
    } else throw new TypeError(`Cannot parse nrt ls arguments: "${a}" is not an option of nrt ls`);
  }
  return { format, wide, showAllProcs };
}
