/**
 * The dashboard's one JSON document (`GET /v2/dashboard/state`, and each `state` event of `GET /v2/dashboard/events`):
 * the device and its NeuronCores with their Q7 cores, the resident models, device memory per usage category,
 * per-model counters, `nrt_execution_status_total` and the log — assembled from the runtime, the repository, the
 * counters, the {@linkcode DashboardMonitor} and the composition root's {@linkcode DeviceViewProvider}.
 *
 * @module
 */
import { NrtInitState, nrtStatusName, type Runtime } from "@nrt/core";
import { DmaMemUsageType } from "@nrt/core";
import type { InferenceMetrics, ModelSummary } from "../metrics.ts";
import type { ModelRepository } from "../model_repository.ts";
import type {
  CoreUtilization,
  DashboardLogEntry,
  DashboardMonitor,
  LatencyHistogram,
  TimelineStep,
} from "./dashboard_monitor.ts";
import type { DeviceViewProvider, FaultView, Q7CoreView } from "./device_view.ts";

/** One physical NeuronCore. */
export interface CoreState {
  /** Physical index. */
  readonly nc: number;
  /** Its logical core, or `null` when the runtime does not use it (not visible). */
  readonly vnc: number | null;
  /** `busy` (running a model), `idle`, `faulted` (a resident model is poisoned) or `unused` (not visible). */
  readonly state: "busy" | "idle" | "faulted" | "unused";
  /** The model running now (`h_running_model`), by repository name. */
  readonly running: string | null;
  /** Executions that took the core. */
  readonly executions: number;
  /** Models resident on the core. */
  readonly models: readonly string[];
  /** Bytes the runtime booked on the core (`memory_usage_nc[nc][22]`). */
  readonly memoryBytes: number;
  /** Its Q7 cores, when the device reports them. */
  readonly q7: readonly Q7CoreView[] | null;
  /** The last fatal error the device reported on the core. */
  readonly fault: string | null;
  /** Busy share of each of the last 60 seconds, and over the minute. */
  readonly utilization: CoreUtilization;
  /** The last execution that finished on the core, as the host's steps on a timeline, or `null`. */
  readonly lastExecution: {
    /** Its model, by repository name. */
    readonly model: string;
    /** Runtime-wide sequence number. */
    readonly seq: number;
    /** Its status name (`NRT_SUCCESS`, …), or `null` when it could not be made. */
    readonly status: string | null;
    /** From taking the cores to releasing them, µs. */
    readonly durationUs: number;
    /** The host's steps. */
    readonly steps: readonly TimelineStep[];
  } | null;
}

/** One model of the repository. */
export interface ModelView {
  /** Name. */
  readonly name: string;
  /**
   * `RUNNING`; `POISONED` (every instance faulted: fail-stop until reloaded); `STOPPING` (unloading); `LOADING`;
   * `UNLOADED`; `FAILED` (the last load failed).
   */
  readonly state: "RUNNING" | "POISONED" | "STOPPING" | "LOADING" | "UNLOADED" | "FAILED";
  /** The repository's reason (`""` when ready). */
  readonly reason: string;
  /** Logical cores of the instances. */
  readonly vncs: readonly number[];
  /** Physical cores of the instances. */
  readonly ncs: readonly number[];
  /** Instances loaded. */
  readonly instances: number;
  /** Instances poisoned. */
  readonly poisonedInstances: number;
  /** The status that poisoned an instance (e.g. `NRT_EXEC_HW_ERR_HBM_UE`), or `null`. */
  readonly poisonedBy: string | null;
  /** Requests running or queued. */
  readonly inflight: number;
  /** Counters. */
  readonly stats: ModelSummary;
  /** Execution latency histogram over the loaded instances (warm-up included). */
  readonly latency: LatencyHistogram;
}

/** Device memory of one device. */
export interface MemoryView {
  /** HBM size. */
  readonly hbmBytes: number;
  /** HBM bytes booked (what the cap applies to). */
  readonly hbmUsedBytes: number;
  /** Bytes booked on every core, HBM and pinned host DRAM. */
  readonly bookedBytes: number;
  /** Bytes per usage category (`dma_mem_usage_type`, lower case), summed over the cores, every category present. */
  readonly categories: ReadonlyArray<{ readonly name: string; readonly bytes: number }>;
}

/** The dashboard document. */
export interface DashboardState {
  /** Milliseconds since the epoch. */
  readonly time: number;
  /** Server facts. */
  readonly server: {
    readonly name: string;
    readonly version: string;
    /** Operator actions are enabled. */
    readonly admin: boolean;
    /** A fault API is available. */
    readonly faultApi: boolean;
    /** The runtime is initialized and not closed. */
    readonly running: boolean;
  };
  /** The device the runtime drives. */
  readonly devices: ReadonlyArray<{
    readonly index: number;
    /** Generation (arch pack name, e.g. `cayman`). */
    readonly generation: string;
    readonly ncCount: number;
    readonly hbmBytes: number;
    /** Physical cores per logical core. */
    readonly virtualCoreSize: number;
    readonly cores: readonly CoreState[];
    readonly memory: MemoryView;
  }>;
  /** Every repository model. */
  readonly models: readonly ModelView[];
  /** `nrt_execution_status_total` by outcome. */
  readonly executionStatus: Readonly<Record<string, number>>;
  /** Log lines after the requested sequence number (at most {@linkcode DASHBOARD_LOG_BATCH}). */
  readonly log: readonly DashboardLogEntry[];
  /** Armed and fired faults, when the device has a fault API. */
  readonly faults: { readonly pending: readonly FaultView[]; readonly fired: readonly FaultView[] } | null;
}

/** Most log lines in one document. */
export const DASHBOARD_LOG_BATCH = 200;

/** What {@linkcode dashboardState} reads. */
export interface DashboardSources {
  /** The runtime. */
  readonly runtime: Runtime;
  /** The repository. */
  readonly repository: ModelRepository;
  /** The counters. */
  readonly metrics: InferenceMetrics;
  /** Executions and log. */
  readonly monitor: DashboardMonitor;
  /** The device-side view, if the composition root provides one. */
  readonly deviceView?: DeviceViewProvider;
  /** Whether operator actions are on. */
  readonly admin: boolean;
  /** Whether a fault API is available. */
  readonly faultApi: boolean;
  /** Server name and version. */
  readonly server: { readonly name: string; readonly version: string };
}

const CATEGORY_NAMES: readonly string[] = Object.keys(DmaMemUsageType).map((k) => k.toLowerCase());

/**
 * Builds the dashboard document.
 *
 * @param s What to read.
 * @param logAfter Include the log lines after this sequence number (0: from the oldest kept).
 * @returns The document.
 */
export function dashboardState(s: DashboardSources, logAfter = 0): DashboardState {
  const rt = s.runtime;
  const dev = rt.device.index;
  const memory = rt.memory();
  const names = new Map<number, string>();
  const models: ModelView[] = s.repository.models().map((m) => {
    const served = m.served;
    const instances = served?.instances ?? [];
    for (const i of instances) names.set(i.handle, m.name);
    const poisoned = instances.filter((i) => i.poisoned !== undefined);
    let state: ModelView["state"];
    if (m.state === "READY") {
      state = instances.length > 0 && poisoned.length === instances.length ? "POISONED" : "RUNNING";
    } else if (m.state === "UNLOADING") state = "STOPPING";
    else if (m.state === "LOADING") state = "LOADING";
    else state = m.reason.startsWith("load failed") ? "FAILED" : "UNLOADED";
    return {
      name: m.name,
      state,
      reason: m.reason,
      vncs: instances.map((i) => i.vnc),
      ncs: [],
      instances: instances.length,
      poisonedInstances: poisoned.length,
      poisonedBy: poisoned.length > 0 ? nrtStatusName(poisoned[0].poisoned!) : null,
      inflight: served?.inflight ?? 0,
      stats: s.metrics.modelSummary(m.name),
      latency: sumHistograms(instances.map((i) => s.monitor.latency(i.handle)), s.monitor.latency(-1)),
    };
  });
  const poisonedHandles = new Set(
    s.repository.models().flatMap((m) =>
      (m.served?.instances ?? []).filter((i) => i.poisoned !== undefined).map((i) => i.handle)
    ),
  );
  const vncOf = new Map<number, number>();
  const resident = new Map<number, Array<{ handle: number; name: string }>>();
  const ncsOf = new Map<string, Set<number>>();
  for (const c of rt.cores()) {
    for (const nc of c.ncs) vncOf.set(nc, c.vnc);
    for (const m of c.models) {
      const name = names.get(m.handle) ?? m.name;
      for (const nc of m.ncs) {
        const list = resident.get(nc) ?? [];
        list.push({ handle: m.handle, name });
        resident.set(nc, list);
      }
      const set = ncsOf.get(name) ?? new Set();
      for (const nc of m.ncs) set.add(nc);
      ncsOf.set(name, set);
    }
  }
  const device = s.deviceView?.(dev);
  const lastOf = (nc: number): CoreState["lastExecution"] => {
    const x = s.monitor.lastExecution(nc);
    if (x === undefined) return null;
    return {
      model: names.get(x.model) ?? `model ${x.model}`,
      seq: x.seq,
      status: x.status === undefined ? null : nrtStatusName(x.status),
      durationUs: x.durationUs,
      steps: x.steps,
    };
  };
  const cores: CoreState[] = Array.from({ length: rt.device.ncCount }, (_, nc) => {
    const vnc = vncOf.get(nc);
    const run = s.monitor.running(nc);
    const here = resident.get(nc) ?? [];
    const view = device?.ncs.find((v) => v.nc === nc);
    let state: CoreState["state"] = "idle";
    if (vnc === undefined) state = "unused";
    else if (here.some((m) => poisonedHandles.has(m.handle))) state = "faulted";
    else if (run !== undefined) state = "busy";
    return {
      nc,
      vnc: vnc ?? null,
      state,
      running: run === undefined ? null : names.get(run.model) ?? `model ${run.model}`,
      executions: s.monitor.executions(nc),
      models: here.map((m) => m.name),
      memoryBytes: memory.cores.find((c) => c.nc === nc)?.total ?? 0,
      q7: view?.q7 ?? null,
      fault: view?.fault ?? null,
      utilization: s.monitor.utilization(nc),
      lastExecution: lastOf(nc),
    };
  });
  const totals = new Float64Array(CATEGORY_NAMES.length);
  for (const core of memory.cores) for (let k = 0; k < totals.length; k++) totals[k] += core.byUsage[k];
  return {
    time: Date.now(),
    server: { ...s.server, admin: s.admin, faultApi: s.faultApi, running: rt.state === NrtInitState.NRT_STATE_INIT },
    devices: [{
      index: dev,
      generation: rt.spec.name,
      ncCount: rt.device.ncCount,
      hbmBytes: rt.device.hbmBytes,
      virtualCoreSize: rt.virtualCoreSize,
      cores,
      memory: {
        hbmBytes: memory.hbmBytes,
        hbmUsedBytes: memory.hbmUsed,
        bookedBytes: memory.total,
        categories: CATEGORY_NAMES.map((name, k) => ({ name, bytes: totals[k] })),
      },
    }],
    models: models.map((m) => ({ ...m, ncs: [...(ncsOf.get(m.name) ?? [])].sort((a, b) => a - b) })),
    executionStatus: s.metrics.executionOutcomes(),
    log: s.monitor.log(logAfter).slice(-DASHBOARD_LOG_BATCH),
    faults: device?.faults ?? null,
  };
}

/** The bucket-wise sum of histograms that share their bounds (`empty` when there are none). */
function sumHistograms(all: readonly LatencyHistogram[], empty: LatencyHistogram): LatencyHistogram {
  const counts = empty.counts.map(() => 0);
  for (const h of all) h.counts.forEach((n, k) => (counts[k] += n));
  return { boundsUs: empty.boundsUs, counts };
}
