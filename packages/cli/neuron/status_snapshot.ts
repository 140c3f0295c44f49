/**
 * From the status documents that `nrt serve` answers at `GET /v2/neuron/status` (`@nrt/http-api`
 * `neuron_activity.ts`: cumulative counters) to the {@linkcode NeuronSnapshot} of one neuron-monitor period
 * (counts, busy time and latencies during the period). Ours, where neuron-monitor's definitions leave room:
 *
 * - the first reading of a process is its baseline: that report lists it with its memory and zero activity, the
 *   next reports count what happened since the previous reading (neuron-monitor too reports from when it attached);
 * - each process is read at its own moment, so its busy time is scaled to the report's period: the utilization is
 *   its busy time over the time between its own two readings;
 * - a logical NeuronCore's busy time is the mean of its physical cores'; global indices number the cores of device
 *   `d` from `d × cores per device`, as neuron-ls does;
 * - host memory is the ledger's host part of every core plus the process's resident set as `application_memory`;
 * - the process's vCPU use is its CPU time over the period, as a share of all the host's vCPUs;
 * - the runtime exposes no per-model memory ledger, so `loaded_models` is empty (docs/neuron-tools.md);
 * - the simulator models no ECC, so every ECC counter is 0.
 *
 * @module
 */
import type { NeuronStatus } from "@nrt/http-api";
import type {
  CoreActivity,
  DeviceSnapshot,
  InstanceSnapshot,
  NeuronSnapshot,
  RuntimeSnapshot,
  SystemSnapshot,
} from "./snapshot.ts";

/** What was read from one process this period. */
export interface RuntimeReading {
  /** Process id. */
  readonly pid: number;
  /** Command line. */
  readonly command: string;
  /** Its status document, when it could be read. */
  readonly status?: NeuronStatus;
  /** Why it could not be read. */
  readonly error?: string;
}

/** One simulated generation's device, for the devices no process reports. */
export interface DeviceTemplate {
  /** Pack name, e.g. `cayman`. */
  readonly archName: string;
  /** Generation, e.g. `NC-v3`. */
  readonly generation: string;
  /** Physical NeuronCores per device. */
  readonly physicalCores: number;
  /** HBM bytes per device. */
  readonly hbmBytes: number;
  /** Logical NeuronCore config (absent before NC-v3). */
  readonly logicalNeuronCoreConfig?: number;
  /** The generation's first instance family, e.g. `trn2`. */
  readonly instanceFamily: string;
}

const NO_ECC = { memCorrected: 0, memUncorrected: 0, sramCorrected: 0, sramUncorrected: 0 };

function lncOf(generation: string, vcs: number): number | undefined {
  return generation === "NC-v2" ? undefined : vcs;
}

/** Turns successive readings into period snapshots; keeps each process's previous reading. */
export class StatusSnapshots {
  /** The previous reading of each process, per baseline (`pid:baseline`). */
  readonly #previous = new Map<
    string,
    { readonly pid: number; readonly status: NeuronStatus; readonly lastSeq: number }
  >();
  readonly #template: DeviceTemplate;
  readonly #vcpus: number;

  /**
   * Starts without baselines: each process's first reading will be its baseline.
   *
   * @param template The device shown when no process reports one (`neuron_hardware_info` needs one).
   * @param vcpus The host's vCPU count (a process's CPU time is shared over them).
   */
  constructor(template: DeviceTemplate, vcpus: number) {
    this.#template = template;
    this.#vcpus = Math.max(1, vcpus);
  }

  /** The latency samples of process `pid` every baseline has seen (ask its status for the later ones only). */
  lastSeq(pid: number): number {
    const seqs = [...this.#previous.values()].filter((p) => p.pid === pid).map((p) => p.lastSeq);
    return seqs.length === 0 ? 0 : Math.min(...seqs);
  }

  /**
   * The snapshot of one period.
   *
   * @param readings What each process answered (or why it did not).
   * @param periodSeconds The period the report covers (> 0).
   * @param system The host over the period.
   * @param baseline Which baseline the activity is counted from, and moves: one per metric group collected on its
   * own period (default `all`).
   * @returns The snapshot; processes absent from `readings` are forgotten.
   */
  snapshot(
    readings: readonly RuntimeReading[],
    periodSeconds: number,
    system: SystemSnapshot,
    baseline = "all",
  ): NeuronSnapshot {
    const runtimes: RuntimeSnapshot[] = [];
    const devices = new Map<number, DeviceSnapshot>();
    let lnc: number | undefined = this.#template.logicalNeuronCoreConfig;
    const seen = new Set<number>();
    for (const r of readings) {
      seen.add(r.pid);
      if (r.status === undefined) {
        runtimes.push({
          pid: r.pid,
          command: r.command,
          runtimeVersion: "",
          cores: [],
          hostMemory: [],
          vcpu: { user: 0, system: 0 },
          executions: {},
          latency: { total: [], device: [] },
          error: r.error ?? "no status",
        });
        continue;
      }
      const s = r.status;
      const key = `${r.pid}:${baseline}`;
      const prev = this.#previous.get(key);
      const lastSeq = Math.max(prev?.lastSeq ?? 0, ...s.latency.map((l) => l.seq));
      this.#previous.set(key, { pid: r.pid, status: s, lastSeq });
      const d = s.device;
      lnc = lncOf(d.generation, d.virtual_core_size);
      if (!devices.has(d.index)) {
        devices.set(d.index, {
          index: d.index,
          archName: d.arch,
          generation: d.generation,
          physicalCores: d.physical_cores,
          hbmBytes: d.hbm_bytes,
          connectedDevices: [],
          ecc: NO_ECC,
        });
      }
      runtimes.push(runtimeSnapshot(r, s, prev?.status, prev?.lastSeq ?? 0, periodSeconds, this.#vcpus));
    }
    for (const [key, p] of [...this.#previous]) if (!seen.has(p.pid)) this.#previous.delete(key);
    if (devices.size === 0) {
      const t = this.#template;
      devices.set(0, {
        index: 0,
        archName: t.archName,
        generation: t.generation,
        physicalCores: t.physicalCores,
        hbmBytes: t.hbmBytes,
        connectedDevices: [],
        ecc: NO_ECC,
      });
    }
    const instance: InstanceSnapshot = {
      instanceName: "",
      instanceId: "",
      instanceType: this.#template.instanceFamily,
      availabilityZone: "",
      availabilityZoneId: "",
      region: "",
      amiId: "",
      subnetId: "",
    };
    return {
      periodSeconds,
      instance,
      ...(lnc === undefined ? {} : { logicalNeuronCoreConfig: lnc }),
      devices: [...devices.values()].sort((a, b) => a.index - b.index),
      runtimes,
      system,
    };
  }
}

function runtimeSnapshot(
  r: RuntimeReading,
  s: NeuronStatus,
  before: NeuronStatus | undefined,
  lastSeq: number,
  period: number,
  vcpus: number,
): RuntimeSnapshot {
  const d = s.device;
  const perDevice = Math.max(1, Math.floor(d.physical_cores / Math.max(1, d.virtual_core_size)));
  // Busy time between this process's two readings, scaled to the report's period.
  const ownSeconds = before === undefined ? 0 : (s.time.clock_ms - before.time.clock_ms) / 1000;
  const scale = ownSeconds > 0 ? period / ownSeconds : 0;
  const busyBefore = new Map<number, number>();
  for (const c of before?.cores ?? []) c.ncs.forEach((nc, i) => busyBefore.set(nc, c.busy_ms[i]));
  const hostRow: number[] = [];
  const cores: CoreActivity[] = s.cores.map((c) => {
    const physical = c.ncs.map((nc, i) => ({
      index: d.index * d.physical_cores + nc,
      busySeconds: before === undefined
        ? 0
        : (Math.max(0, c.busy_ms[i] - (busyBefore.get(nc) ?? c.busy_ms[i])) / 1000) * scale,
    }));
    c.host_memory.forEach((v, i) => (hostRow[i] = (hostRow[i] ?? 0) + v));
    return {
      index: d.index * perDevice + Math.floor((c.ncs[0] ?? 0) / Math.max(1, d.virtual_core_size)),
      device: d.index,
      busySeconds: physical.reduce((a, p) => a + p.busySeconds, 0) / Math.max(1, physical.length),
      physical,
      memory: c.device_memory,
    };
  });
  const executions: Record<number, number> = {};
  if (before !== undefined) {
    for (const [k, v] of Object.entries(s.executions)) {
      const n = v - (before.executions[k] ?? 0);
      if (n > 0) executions[Number(k)] = n;
    }
  }
  const fresh = before === undefined ? [] : s.latency.filter((l) => l.seq > lastSeq);
  const cpuShare = (key: "user_us" | "system_us"): number =>
    before === undefined || ownSeconds <= 0
      ? 0
      : Math.min(100, ((s.cpu[key] - before.cpu[key]) / 1e6 / ownSeconds / vcpus) * 100);
  return {
    pid: r.pid,
    command: r.command,
    ...(s.tag === undefined ? {} : { tag: s.tag }),
    runtimeVersion: s.runtime_version,
    cores,
    hostMemory: hostRow,
    hostApplicationBytes: s.rss_bytes,
    vcpu: { user: Math.max(0, cpuShare("user_us")), system: Math.max(0, cpuShare("system_us")) },
    executions,
    latency: { total: fresh.map((l) => l.totalSeconds), device: fresh.map((l) => l.deviceSeconds) },
  };
}
