/**
 * The snapshot the Neuron tool formats read: what nrt knows about its devices, the processes holding NeuronCores,
 * the host and the instance, over one capture period. Ours: these types are plain data, independent of the
 * runtime's classes; a composition root maps the runtime, the simulator and the daemon onto them, and
 * `neuron_ls.ts` / `neuron_monitor.ts` turn them into the documented outputs.
 *
 * NeuronCore indices are logical and global, as neuron-ls (`NEURON CORE IDS`) and neuron-monitor
 * (`neuroncores_in_use`, `neuroncore_memory_usage`) number them: with a logical NeuronCore config of 2, device `d`
 * of a Trn2 holds logical cores `4d .. 4d+3`, each made of two physical cores.
 *
 * @module
 */

/**
 * One row of the device-memory ledger (`memory_usage_nc[nc]`), indexed by `DmaMemUsageType`. A row of 23 slots as
 * `DmemLedger.usage()` returns it is accepted; the total at index 22 is ignored.
 */
export type DmemUsageRow = ArrayLike<number>;

/** EC2 instance identity (neuron-monitor `instance_info`, neuron-ls `instance-type` / `instance-id`). */
export interface InstanceSnapshot {
  /** The instance's Name tag, `""` when unknown. */
  readonly instanceName: string;
  /** EC2 instance id. */
  readonly instanceId: string;
  /** Instance type, e.g. `trn2.48xlarge`. */
  readonly instanceType: string;
  /** Availability zone, e.g. `us-west-2b`. */
  readonly availabilityZone: string;
  /** Availability zone id, e.g. `usw2-az2`. */
  readonly availabilityZoneId: string;
  /** Region, e.g. `us-west-2`. */
  readonly region: string;
  /** AMI id. */
  readonly amiId: string;
  /** Subnet id. */
  readonly subnetId: string;
  /** UltraServer id, when the instance is part of one. */
  readonly ultraserverId?: string;
}

/** ECC events counted on one device during the capture period (neuron-monitor `neuron_hw_counters`). */
export interface EccEvents {
  /** Corrected ECC events in the device's DRAM (HBM). */
  readonly memCorrected: number;
  /** Uncorrected ECC events in the device's DRAM (HBM). */
  readonly memUncorrected: number;
  /** Corrected ECC events in the device's SRAM. */
  readonly sramCorrected: number;
  /** Uncorrected ECC events in the device's SRAM. */
  readonly sramUncorrected: number;
}

/** One Neuron device. */
export interface DeviceSnapshot {
  /** Device index (neuron-ls `NEURON DEVICE`). */
  readonly index: number;
  /** Arch pack name, e.g. `cayman`. */
  readonly archName: string;
  /** NeuronCore generation, e.g. `NC-v3`. */
  readonly generation: string;
  /** Physical NeuronCores on the device. */
  readonly physicalCores: number;
  /** Device memory (HBM) in bytes. */
  readonly hbmBytes: number;
  /** Indices of the devices this one is linked to, in link order (neuron-ls `CONNECTED DEVICES`). */
  readonly connectedDevices: readonly number[];
  /** PCI bus/device/function, e.g. `0000:cc:00.0`; absent for a simulated device without one. */
  readonly pciBdf?: string;
  /** CPU list the device's proxy threads are pinned to, e.g. `48-95,144-191`. */
  readonly cpuAffinity?: string;
  /** NUMA node of the device. */
  readonly numaNode?: number;
  /** ECC events during the period. */
  readonly ecc: EccEvents;
}

/** One physical NeuronCore making up a logical one (neuron-monitor `v3d`, Trn2 only). */
export interface PhysicalCoreActivity {
  /** Global physical NeuronCore index. */
  readonly index: number;
  /** Seconds the physical core was busy during the period. */
  readonly busySeconds: number;
}

/** One logical NeuronCore held by a runtime, with its activity and memory over the period. */
export interface CoreActivity {
  /** Global logical NeuronCore index. */
  readonly index: number;
  /** Device the core belongs to. */
  readonly device: number;
  /** Seconds the core was busy executing during the period. */
  readonly busySeconds: number;
  /** Floating-point operations during the period, when counted. */
  readonly flops?: number;
  /** The physical cores of this logical core, when their activity is known. */
  readonly physical?: readonly PhysicalCoreActivity[];
  /** Device memory booked for this core, by dmem category. */
  readonly memory: DmemUsageRow;
}

/** One loaded model (neuron-monitor `loaded_models`). */
export interface ModelSnapshot {
  /** Model name. */
  readonly name: string;
  /** NEFF UUID, lowercase hex without dashes. */
  readonly uuid: string;
  /** Runtime-assigned model id. */
  readonly modelId: number;
  /** Whether the model is started. */
  readonly isRunning: boolean;
  /** Global logical NeuronCore the model is loaded on. */
  readonly core: number;
  /** Device the model is loaded on. */
  readonly device: number;
  /** Device memory booked at load, by dmem category. */
  readonly memory: DmemUsageRow;
  /** Host memory booked at load, by dmem category. */
  readonly hostMemory: DmemUsageRow;
}

/** The latency samples of the executions that finished during the period, in seconds. */
export interface LatencySamples {
  /** End-to-end latency as the runtime measured it. */
  readonly total: readonly number[];
  /** Time spent on the device only. */
  readonly device: readonly number[];
}

/** The neuron-monitor metric groups of a runtime, as their documented `type` names. */
export type RuntimeMetricGroup =
  | "neuroncore_counters"
  | "memory_used"
  | "neuron_runtime_vcpu_usage"
  | "execution_stats";

/** One process running the Neuron runtime (a neuron-monitor "Neuron application"). */
export interface RuntimeSnapshot {
  /** Process id. */
  readonly pid: number;
  /** Command line that started the process. */
  readonly command: string;
  /** `NEURON_PROCESS_TAG`, when set; otherwise the pid is the tag. */
  readonly tag?: string;
  /** Neuron runtime version the process runs, e.g. `2.31.0`. */
  readonly runtimeVersion: string;
  /** The logical NeuronCores the process holds. */
  readonly cores: readonly CoreActivity[];
  /** Host memory booked by the runtime, by dmem category. */
  readonly hostMemory: DmemUsageRow;
  /** Other host memory of the process (heap, mappings), in bytes. */
  readonly hostApplicationBytes?: number;
  /** The process's vCPU use over the period, in percent. */
  readonly vcpu: { readonly user: number; readonly system: number };
  /** Executions finished during the period, counted by their `NRT_STATUS` (0 is success). */
  readonly executions: Readonly<Record<number, number>>;
  /** Latencies of the executions finished during the period. */
  readonly latency: LatencySamples;
  /** Loaded models. */
  readonly models?: readonly ModelSnapshot[];
  /** Set when the process could not be read at all (neuron-monitor's per-application `error`). */
  readonly error?: string;
  /** Per-group collection errors (each group's `error`). */
  readonly groupErrors?: Readonly<Partial<Record<RuntimeMetricGroup, string>>>;
}

/** A process holding Neuron devices without the Neuron runtime (listed by `neuron-ls --show-all-procs`). */
export interface OtherProcessSnapshot {
  /** Process id. */
  readonly pid: number;
  /** Command line. */
  readonly command: string;
  /** Devices it holds open. */
  readonly devices: readonly number[];
}

/** vCPU time shares over the period, in percent (neuron-monitor `vcpu_usage` fields). */
export interface VcpuShares {
  /** User code. */
  readonly user: number;
  /** Niced user code. */
  readonly nice: number;
  /** Kernel code. */
  readonly system: number;
  /** Idle. */
  readonly idle: number;
  /** Waiting for IO. */
  readonly ioWait: number;
  /** Hardware interrupts. */
  readonly irq: number;
  /** Software interrupts. */
  readonly softIrq: number;
}

/** The system metric groups, as their documented `type` names. */
export type SystemMetricGroup = "vcpu_usage" | "memory_info" | "neuron_hw_counters";

/** Host-wide state over the period. */
export interface SystemSnapshot {
  /** Per-vCPU shares, vCPU 0 first. */
  readonly vcpus: readonly VcpuShares[];
  /** vCPU context switches during the period. */
  readonly contextSwitches: number;
  /** Host memory size in bytes. */
  readonly memoryTotalBytes: number;
  /** Host memory in use in bytes. */
  readonly memoryUsedBytes: number;
  /** Swap size in bytes. */
  readonly swapTotalBytes: number;
  /** Swap in use in bytes. */
  readonly swapUsedBytes: number;
  /** Per-group collection errors. */
  readonly groupErrors?: Readonly<Partial<Record<SystemMetricGroup, string>>>;
}

/** Everything the tool formats read, captured over one period. */
export interface NeuronSnapshot {
  /** Length of the capture period in seconds (> 0). */
  readonly periodSeconds: number;
  /** The instance. */
  readonly instance: InstanceSnapshot;
  /** Logical NeuronCore config (physical cores per logical core); absent on generations without one. */
  readonly logicalNeuronCoreConfig?: number;
  /** The devices, by index. */
  readonly devices: readonly DeviceSnapshot[];
  /** The processes running the Neuron runtime. */
  readonly runtimes: readonly RuntimeSnapshot[];
  /** Processes holding devices without the runtime. */
  readonly otherProcesses?: readonly OtherProcessSnapshot[];
  /** The host. */
  readonly system: SystemSnapshot;
}

/** A runtime's tag: `NEURON_PROCESS_TAG`, or the pid when the tag is not set (Neuron Monitor User Guide, tagging). */
export function runtimeTag(runtime: Pick<RuntimeSnapshot, "pid" | "tag">): string {
  return runtime.tag ?? String(runtime.pid);
}

/** The names neuron-monitor's `neuron_hardware_info` gives a generation. */
export interface HardwareIdentity {
  /** `neuron_device_type`, e.g. `trainium2`. */
  readonly deviceType: string;
  /** `neuron_device_version`, e.g. `v4`. */
  readonly deviceVersion: string;
  /** `neuroncore_version`, e.g. `v3d`. */
  readonly coreVersion: string;
}

/**
 * The `neuron_hardware_info` names of a NeuronCore generation. The Trn2 values (NC-v3: `trainium2`, `v4`, `v3d`
 * under a logical NeuronCore config above 1) are the Neuron Monitor User Guide's `neuron_hardware_info` example.
 * Ours: the NC-v2 names (`trainium`, `v3`, `v2`), `v3` for NC-v3 without logical cores, the NC-v4 names
 * (`trainium3`, `v5`, `v4d`), and the generation string itself for an unknown generation.
 */
export function hardwareIdentity(generation: string, logicalNeuronCoreConfig = 1): HardwareIdentity {
  const fused = logicalNeuronCoreConfig > 1;
  switch (generation) {
    case "NC-v2":
      return { deviceType: "trainium", deviceVersion: "v3", coreVersion: "v2" };
    case "NC-v3":
      return { deviceType: "trainium2", deviceVersion: "v4", coreVersion: fused ? "v3d" : "v3" };
    case "NC-v4":
      return { deviceType: "trainium3", deviceVersion: "v5", coreVersion: fused ? "v4d" : "v4" };
    default:
      return { deviceType: generation, deviceVersion: "", coreVersion: generation };
  }
}
