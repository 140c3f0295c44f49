/**
 * neuron-monitor's JSON report, built from a {@linkcode NeuronSnapshot}: one report object per period, serialised
 * as one line of JSON, in the shape the Neuron Monitor User Guide documents ("The JSON output format" and each
 * metric group's section) and `neuron-monitor-prometheus.py` reads.
 *
 * Shapes and the guide section each follows:
 * - top level `neuron_runtime_data`, `system_data`, `instance_info`, `neuron_hardware_info`: "The JSON output
 *   format", "instance_info", "neuron_hardware_info";
 * - every group `{ period, ..., error }`, `error` `""` when healthy: "Metric Groups";
 * - `neuroncore_counters`, `execution_stats`, `memory_used`, `neuron_runtime_vcpu_usage`: their sections under
 *   "Neuron application level metric groups";
 * - `neuron_hw_counters`, `vcpu_usage`, `memory_info`: "System level metric groups".
 *
 * Ours, where the guide is silent or shows more than one form:
 * - runtime entries carry `pid`, `neuron_runtime_tag`, `error`, `report` (the guide's sketch also shows a legacy
 *   `address`, which the recorded outputs of current versions do not have); a runtime whose snapshot has `error`
 *   gets an empty `report`;
 * - with no matching runtime `neuron_runtime_data` is `[]`; with no system group configured `system_data` is
 *   `null` (the exporter tests both);
 * - groups appear in alphabetical order, as in recorded neuron-monitor output; values inside a group follow the
 *   guide's order;
 * - `instance_info` always carries every documented key (`""` when unknown), as the exporter reads them all;
 * - utilization is busy time over the period, clamped to 0..100 %; `flops` appears only when the snapshot counts
 *   flops; `v3d` appears only on NC-v3 cores made of several physical cores;
 * - latency percentiles are nearest-rank over the period's samples; with no sample the object is `null`;
 * - each loaded model has one subgraph, `sg_00`;
 * - vCPU averages are arithmetic means rounded to 2 decimals;
 * - the `period` of every group collected in a report is the snapshot's period.
 *
 * @module
 */
import {
  deviceMemoryBreakdown,
  type DeviceMemoryCategory,
  hostMemoryBreakdown,
  type HostMemoryCategory,
  modelMemoryBreakdown,
  type ModelMemoryCategory,
} from "./memory_categories.ts";
import {
  type ExecutionErrorKind,
  type ExecutionOutcome,
  type LatencyPercentiles,
  latencyPercentiles,
  summarizeExecutions,
} from "./execution_outcomes.ts";

export { type LatencyPercentiles, latencyPercentiles };
import {
  DEFAULT_PERIOD_SECONDS,
  type MetricGroupPlan,
  type MonitorConfig,
  selectRuntime,
} from "./neuron_monitor_config.ts";
import {
  type CoreActivity,
  hardwareIdentity,
  type NeuronSnapshot,
  type RuntimeMetricGroup,
  type RuntimeSnapshot,
  runtimeTag,
  type SystemMetricGroup,
  type VcpuShares,
} from "./snapshot.ts";

/** One NeuronCore's entry of `neuroncores_in_use`. */
export interface NeuronCoreCounters {
  /** Utilization over the period, in percent. */
  neuroncore_utilization: number;
  /** Floating-point operations per second over the period (only when counted). */
  flops?: number;
  /** Trn2: the utilization of each physical core, keyed `nc_v3.<physical index>`. */
  v3d?: Record<string, { neuroncore_utilization: number }>;
}

/** `neuroncore_counters`. */
export interface NeuronCoreCountersGroup {
  /** Captured period in seconds. */
  period: number;
  /** Keyed by global logical NeuronCore index. */
  neuroncores_in_use: Record<string, NeuronCoreCounters>;
  /** `""` when healthy. */
  error: string;
}

/** `execution_stats`. */
export interface ExecutionStatsGroup {
  /** Captured period in seconds. */
  period: number;
  /** Error counts by kind. */
  error_summary: Record<ExecutionErrorKind, number>;
  /** Execution counts by outcome. */
  execution_summary: Record<ExecutionOutcome, number>;
  /** Latency percentiles; each `null` when nothing ran in the period. */
  latency_stats: { total_latency: LatencyPercentiles | null; device_latency: LatencyPercentiles | null };
  /** `""` when healthy. */
  error: string;
}

/** One loaded model's subgraph. */
export interface LoadedModelSubgraph {
  /** Memory booked at load. */
  memory_used_bytes: {
    host: number;
    neuron_device: number;
    usage_breakdown: { host: Record<HostMemoryCategory, number>; neuron_device: Record<ModelMemoryCategory, number> };
  };
  /** Logical NeuronCore the subgraph is loaded on. */
  neuroncore_index: number;
  /** Device the subgraph is loaded on. */
  neuron_device_index: number;
}

/** One entry of `loaded_models`. */
export interface LoadedModel {
  /** Model name. */
  name: string;
  /** Model UUID. */
  uuid: string;
  /** Runtime-assigned id. */
  model_id: number;
  /** Whether the model is started. */
  is_running: boolean;
  /** Subgraphs by name. */
  subgraphs: Record<string, LoadedModelSubgraph>;
}

/** `memory_used`. */
export interface MemoryUsedGroup {
  /** Captured period in seconds. */
  period: number;
  /** Current memory use of the application. */
  neuron_runtime_used_bytes: {
    host: number;
    neuron_device: number;
    usage_breakdown: {
      host: Record<HostMemoryCategory, number>;
      neuroncore_memory_usage: Record<string, Record<DeviceMemoryCategory, number>>;
    };
  };
  /** Loaded models. */
  loaded_models: LoadedModel[];
  /** `""` when healthy. */
  error: string;
}

/** `neuron_runtime_vcpu_usage`. */
export interface RuntimeVcpuUsageGroup {
  /** Captured period in seconds. */
  period: number;
  /** Percent of time in user and kernel code. */
  vcpu_usage: { user: number; system: number };
  /** `""` when healthy. */
  error: string;
}

/** A runtime's `report`: the configured groups. */
export interface RuntimeReport {
  /** `execution_stats`. */
  execution_stats?: ExecutionStatsGroup;
  /** `memory_used`. */
  memory_used?: MemoryUsedGroup;
  /** `neuron_runtime_vcpu_usage`. */
  neuron_runtime_vcpu_usage?: RuntimeVcpuUsageGroup;
  /** `neuroncore_counters`. */
  neuroncore_counters?: NeuronCoreCountersGroup;
}

/** One entry of `neuron_runtime_data`. */
export interface RuntimeData {
  /** Process id. */
  pid: number;
  /** The application's tag. */
  neuron_runtime_tag: string;
  /** `""` when the application could be read. */
  error: string;
  /** The application's groups. */
  report: RuntimeReport;
}

/** One vCPU usage object, in percent. */
export interface VcpuUsage {
  /** User code. */
  user: number;
  /** Niced user code. */
  nice: number;
  /** Kernel code. */
  system: number;
  /** Idle. */
  idle: number;
  /** IO wait. */
  io_wait: number;
  /** Hardware interrupts. */
  irq: number;
  /** Software interrupts. */
  soft_irq: number;
}

/** `vcpu_usage`. */
export interface VcpuUsageGroup {
  /** Captured period in seconds. */
  period: number;
  /** Average over all vCPUs. */
  average_usage: VcpuUsage;
  /** Per vCPU, keyed by vCPU index. */
  usage_data: Record<string, VcpuUsage>;
  /** Context switches during the period. */
  context_switch_count: number;
  /** `""` when healthy. */
  error: string;
}

/** `memory_info`. */
export interface MemoryInfoGroup {
  /** Captured period in seconds. */
  period: number;
  /** Host memory size. */
  memory_total_bytes: number;
  /** Host memory in use. */
  memory_used_bytes: number;
  /** Swap size. */
  swap_total_bytes: number;
  /** Swap in use. */
  swap_used_bytes: number;
  /** `""` when healthy. */
  error: string;
}

/** One device of `neuron_hw_counters`. */
export interface DeviceHwCounters {
  /** Device index. */
  neuron_device_index: number;
  /** Corrected DRAM ECC events. */
  mem_ecc_corrected: number;
  /** Uncorrected DRAM ECC events. */
  mem_ecc_uncorrected: number;
  /** Uncorrected SRAM ECC events. */
  sram_ecc_uncorrected: number;
  /** Corrected SRAM ECC events. */
  sram_ecc_corrected: number;
}

/** `neuron_hw_counters`. */
export interface HwCountersGroup {
  /** Captured period in seconds. */
  period: number;
  /** Every device. */
  neuron_devices: DeviceHwCounters[];
  /** `""` when healthy. */
  error: string;
}

/** `system_data`: the configured system groups. */
export interface SystemData {
  /** `memory_info`. */
  memory_info?: MemoryInfoGroup;
  /** `neuron_hw_counters`. */
  neuron_hw_counters?: HwCountersGroup;
  /** `vcpu_usage`. */
  vcpu_usage?: VcpuUsageGroup;
}

/** `instance_info`. */
export interface InstanceInfo {
  /** Name tag. */
  instance_name: string;
  /** Instance id. */
  instance_id: string;
  /** Instance type. */
  instance_type: string;
  /** Availability zone. */
  instance_availability_zone: string;
  /** Availability zone id. */
  instance_availability_zone_id: string;
  /** Region. */
  instance_region: string;
  /** AMI id. */
  ami_id: string;
  /** Subnet id. */
  subnet_id: string;
  /** UltraServer id, when part of one. */
  ultraserver_id?: string;
  /** `""` when healthy. */
  error: string;
}

/** `neuron_hardware_info`. */
export interface NeuronHardwareInfo {
  /** e.g. `trainium2`. */
  neuron_device_type: string;
  /** e.g. `v4`. */
  neuron_device_version: string;
  /** e.g. `v3d`. */
  neuroncore_version: string;
  /** Devices on the instance. */
  neuron_device_count: number;
  /** Memory of each device in bytes. */
  neuron_device_memory_size: number;
  /** (Logical) NeuronCores per device. */
  neuroncore_per_device_count: number;
  /** Logical NeuronCore config (present when the generation has one). */
  logical_neuroncore_config?: number;
  /** `""` when healthy. */
  error: string;
}

/** One neuron-monitor report. */
export interface NeuronMonitorReport {
  /** One entry per application that passes the filter. */
  neuron_runtime_data: RuntimeData[];
  /** System groups, or `null` when none is configured. */
  system_data: SystemData | null;
  /** Always present. */
  instance_info: InstanceInfo;
  /** Always present. */
  neuron_hardware_info: NeuronHardwareInfo;
}

const percentOf = (busy: number, period: number): number => Math.min(100, Math.max(0, (busy / period) * 100));
const round2 = (x: number): number => Math.round(x * 100) / 100;

function coreCounters(core: CoreActivity, period: number, generation: string | undefined): NeuronCoreCounters {
  const out: NeuronCoreCounters = { neuroncore_utilization: percentOf(core.busySeconds, period) };
  if (core.flops !== undefined) out.flops = core.flops / period;
  if (generation === "NC-v3" && core.physical !== undefined && core.physical.length > 1) {
    out.v3d = Object.fromEntries(
      core.physical.map((p) => [`nc_v3.${p.index}`, { neuroncore_utilization: percentOf(p.busySeconds, period) }]),
    );
  }
  return out;
}

function sum(record: Record<string, number>): number {
  return Object.values(record).reduce((a, b) => a + b, 0);
}

function memoryUsed(rt: RuntimeSnapshot, period: number, error: string): MemoryUsedGroup {
  const host = hostMemoryBreakdown(rt.hostMemory, rt.hostApplicationBytes ?? 0);
  const perCore: Record<string, Record<DeviceMemoryCategory, number>> = {};
  let device = 0;
  for (const core of rt.cores) {
    const b = deviceMemoryBreakdown(core.memory);
    perCore[String(core.index)] = b;
    device += sum(b);
  }
  const loaded_models: LoadedModel[] = (rt.models ?? []).map((m) => {
    const mh = hostMemoryBreakdown(m.hostMemory);
    const md = modelMemoryBreakdown(m.memory);
    return {
      name: m.name,
      uuid: m.uuid,
      model_id: m.modelId,
      is_running: m.isRunning,
      subgraphs: {
        sg_00: {
          memory_used_bytes: {
            host: sum(mh),
            neuron_device: sum(md),
            usage_breakdown: { host: mh, neuron_device: md },
          },
          neuroncore_index: m.core,
          neuron_device_index: m.device,
        },
      },
    };
  });
  return {
    period,
    neuron_runtime_used_bytes: {
      host: sum(host),
      neuron_device: device,
      usage_breakdown: { host, neuroncore_memory_usage: perCore },
    },
    loaded_models,
    error,
  };
}

function runtimeGroup(
  type: RuntimeMetricGroup,
  rt: RuntimeSnapshot,
  snap: NeuronSnapshot,
): NonNullable<RuntimeReport[RuntimeMetricGroup]> {
  const period = snap.periodSeconds;
  const error = rt.groupErrors?.[type] ?? "";
  switch (type) {
    case "neuroncore_counters": {
      const generationOf = new Map(snap.devices.map((d) => [d.index, d.generation]));
      const neuroncores_in_use: Record<string, NeuronCoreCounters> = {};
      for (const core of rt.cores) {
        neuroncores_in_use[String(core.index)] = coreCounters(core, period, generationOf.get(core.device));
      }
      return { period, neuroncores_in_use, error };
    }
    case "execution_stats": {
      const { error_summary, execution_summary } = summarizeExecutions(rt.executions);
      return {
        period,
        error_summary,
        execution_summary,
        latency_stats: {
          total_latency: latencyPercentiles(rt.latency.total),
          device_latency: latencyPercentiles(rt.latency.device),
        },
        error,
      };
    }
    case "memory_used":
      return memoryUsed(rt, period, error);
    case "neuron_runtime_vcpu_usage":
      return { period, vcpu_usage: { user: round2(rt.vcpu.user), system: round2(rt.vcpu.system) }, error };
  }
}

function vcpuUsage(v: VcpuShares): VcpuUsage {
  return {
    user: round2(v.user),
    nice: round2(v.nice),
    system: round2(v.system),
    idle: round2(v.idle),
    io_wait: round2(v.ioWait),
    irq: round2(v.irq),
    soft_irq: round2(v.softIrq),
  };
}

function systemGroup(type: SystemMetricGroup, snap: NeuronSnapshot): NonNullable<SystemData[SystemMetricGroup]> {
  const period = snap.periodSeconds;
  const sys = snap.system;
  const error = sys.groupErrors?.[type] ?? "";
  switch (type) {
    case "vcpu_usage": {
      const n = Math.max(1, sys.vcpus.length);
      const mean = (f: (v: VcpuShares) => number): number => sys.vcpus.reduce((a, v) => a + f(v), 0) / n;
      const average: VcpuShares = {
        user: mean((v) => v.user),
        nice: mean((v) => v.nice),
        system: mean((v) => v.system),
        idle: mean((v) => v.idle),
        ioWait: mean((v) => v.ioWait),
        irq: mean((v) => v.irq),
        softIrq: mean((v) => v.softIrq),
      };
      return {
        period,
        average_usage: vcpuUsage(average),
        usage_data: Object.fromEntries(sys.vcpus.map((v, i) => [String(i), vcpuUsage(v)])),
        context_switch_count: sys.contextSwitches,
        error,
      };
    }
    case "memory_info":
      return {
        period,
        memory_total_bytes: sys.memoryTotalBytes,
        memory_used_bytes: sys.memoryUsedBytes,
        swap_total_bytes: sys.swapTotalBytes,
        swap_used_bytes: sys.swapUsedBytes,
        error,
      };
    case "neuron_hw_counters":
      return {
        period,
        neuron_devices: snap.devices.map((d) => ({
          neuron_device_index: d.index,
          mem_ecc_corrected: d.ecc.memCorrected,
          mem_ecc_uncorrected: d.ecc.memUncorrected,
          sram_ecc_uncorrected: d.ecc.sramUncorrected,
          sram_ecc_corrected: d.ecc.sramCorrected,
        })),
        error,
      };
  }
}

/** `instance_info` of a snapshot (Neuron Monitor User Guide, "instance_info"). */
export function instanceInfo(snap: Pick<NeuronSnapshot, "instance">): InstanceInfo {
  const i = snap.instance;
  return {
    instance_name: i.instanceName,
    instance_id: i.instanceId,
    instance_type: i.instanceType,
    instance_availability_zone: i.availabilityZone,
    instance_availability_zone_id: i.availabilityZoneId,
    instance_region: i.region,
    ami_id: i.amiId,
    subnet_id: i.subnetId,
    ...(i.ultraserverId === undefined ? {} : { ultraserver_id: i.ultraserverId }),
    error: "",
  };
}

/** `neuron_hardware_info` of a snapshot (Neuron Monitor User Guide, "neuron_hardware_info"). */
export function neuronHardwareInfo(
  snap: Pick<NeuronSnapshot, "devices" | "logicalNeuronCoreConfig">,
): NeuronHardwareInfo {
  const first = snap.devices[0];
  const lnc = snap.logicalNeuronCoreConfig;
  const id = first === undefined
    ? { deviceType: "", deviceVersion: "", coreVersion: "" }
    : hardwareIdentity(first.generation, lnc);
  return {
    neuron_device_type: id.deviceType,
    neuron_device_version: id.deviceVersion,
    neuroncore_version: id.coreVersion,
    neuron_device_count: snap.devices.length,
    neuron_device_memory_size: first?.hbmBytes ?? 0,
    neuroncore_per_device_count: first === undefined ? 0 : Math.floor(first.physicalCores / (lnc ?? 1)),
    ...(lnc === undefined ? {} : { logical_neuroncore_config: lnc }),
    error: "",
  };
}

/** Which groups a report collects now; the others are copied from the previous report. */
export interface ReportOptions {
  /** The report before this one. */
  readonly previous?: NeuronMonitorReport;
  /**
   * Group keys due now ({@linkcode groupKey}); absent, every configured group is collected. A group not due whose
   * previous object exists is copied from `previous`; one without a previous object is collected.
   */
  readonly due?: ReadonlySet<string>;
}

/**
 * The key of one configured group for scheduling: `system:<type>`, or `runtime:<entry>:<type>` where `<entry>` is
 * the index of its `neuron_runtimes` entry (Ours).
 */
export function groupKey(scope: "system", type: SystemMetricGroup): string;
/** The key of a runtime group of `neuron_runtimes[entry]`. */
export function groupKey(scope: "runtime", type: RuntimeMetricGroup, entry: number): string;
export function groupKey(scope: "system" | "runtime", type: string, entry?: number): string {
  return scope === "system" ? `system:${type}` : `runtime:${entry}:${type}`;
}

const byName = <T extends { type: string }>(a: T, b: T): number => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0);

/**
 * Builds one neuron-monitor report from a snapshot.
 *
 * @param snap What nrt knows, over one period.
 * @param config The monitor configuration (`defaultMonitorConfig()` without `-c`).
 * @param options Scheduling: the previous report and the groups due now.
 * @returns The report object; serialise it with {@linkcode serializeMonitorReport}.
 * @throws {RangeError} When the snapshot's period is not positive, or a memory or execution count is invalid.
 *
 * @example Build and serialise a report
 * ```ts ignore
 * const line = serializeMonitorReport(buildMonitorReport(snapshot, defaultMonitorConfig()));
 * ```
 */
export function buildMonitorReport(
  snap: NeuronSnapshot,
  config: MonitorConfig,
  options: ReportOptions = {},
): NeuronMonitorReport {
  if (!(snap.periodSeconds > 0) || !Number.isFinite(snap.periodSeconds)) {
    throw new RangeError(`Cannot build a neuron-monitor report: the period is ${snap.periodSeconds} s, expected > 0`);
  }
  const { previous, due } = options;
  const neuron_runtime_data: RuntimeData[] = [];
  for (const rt of snap.runtimes) {
    const tag = runtimeTag(rt);
    const selection = selectRuntime(config, tag);
    if (selection === undefined) continue;
    const entry = config.runtimes.indexOf(selection);
    if (rt.error !== undefined && rt.error !== "") {
      neuron_runtime_data.push({ pid: rt.pid, neuron_runtime_tag: tag, error: rt.error, report: {} });
      continue;
    }
    const before = previous?.neuron_runtime_data.find((r) => r.pid === rt.pid && r.error === "")?.report;
    const report: Record<string, unknown> = {};
    for (const g of [...selection.groups].sort(byName)) {
      const old = before?.[g.type];
      const reuse = due !== undefined && !due.has(groupKey("runtime", g.type, entry)) && old !== undefined;
      report[g.type] = reuse ? old : runtimeGroup(g.type, rt, snap);
    }
    neuron_runtime_data.push({ pid: rt.pid, neuron_runtime_tag: tag, error: "", report: report as RuntimeReport });
  }
  let system_data: SystemData | null = null;
  if (config.system.length > 0) {
    const data: Record<string, unknown> = {};
    for (const g of [...config.system].sort(byName)) {
      const old = previous?.system_data?.[g.type];
      const reuse = due !== undefined && !due.has(groupKey("system", g.type)) && old !== undefined;
      data[g.type] = reuse ? old : systemGroup(g.type, snap);
    }
    system_data = data as SystemData;
  }
  return {
    neuron_runtime_data,
    system_data,
    instance_info: instanceInfo(snap),
    neuron_hardware_info: neuronHardwareInfo(snap),
  };
}

/**
 * One report as neuron-monitor writes it to stdout: a complete JSON document on one line.
 *
 * @param report The report.
 * @returns The JSON text followed by `"\n"`.
 */
export function serializeMonitorReport(report: NeuronMonitorReport): string {
  return `${JSON.stringify(report)}\n`;
}

/** What to collect next. */
export interface MonitorSchedule {
  /** Group keys due now. */
  readonly due: ReadonlySet<string>;
  /**
   * When the next group falls due, in the same clock as `now`; with no group enabled, one root period after `now`
   * (always finite).
   */
  readonly nextAt: number;
}

/**
 * neuron-monitor's execution model ("Execution model"): wait until at least one group is due, collect the due
 * groups, emit a report. Given when each group was last collected, this says which are due at `now` and when the
 * next one will be. A configuration that enables no group is due once per its root period (ours: otherwise no
 * report would ever be due, and a caller waiting `nextAt - now` would wait forever or, with a timer, not at all).
 *
 * @param config The monitor configuration.
 * @param lastCollected Last collection time per {@linkcode groupKey}, in seconds; a group never collected is due.
 * @param now The current time in seconds.
 * @returns The due keys and the earliest next due time.
 */
export function scheduleMonitorGroups(
  config: MonitorConfig,
  lastCollected: ReadonlyMap<string, number>,
  now: number,
): MonitorSchedule {
  const plans: [string, MetricGroupPlan<string>][] = [
    ...config.runtimes.flatMap((r, entry) =>
      r.groups.map((g) => [groupKey("runtime", g.type, entry), g] as [string, MetricGroupPlan<string>])
    ),
    ...config.system.map((g) => [groupKey("system", g.type), g] as [string, MetricGroupPlan<string>]),
  ];
  const due = new Set<string>();
  if (plans.length === 0) return { due, nextAt: now + (config.periodSeconds ?? DEFAULT_PERIOD_SECONDS) };
  let nextAt = Infinity;
  for (const [key, plan] of plans) {
    const last = lastCollected.get(key);
    const at = last === undefined ? now : last + plan.periodSeconds;
    if (at <= now) {
      due.add(key);
      nextAt = Math.min(nextAt, now + plan.periodSeconds);
    } else {
      nextAt = Math.min(nextAt, at);
    }
  }
  return { due, nextAt };
}
