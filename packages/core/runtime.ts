/**
 * `Runtime`: the idiomatic face of the host runtime — init, load, execute, unload, close — over the Portal and the
 * arch pack the DI container provides. The flat `nrt_*` facade (`nrt_api.ts`) is an adapter over this class.
 *
 * Seed: runtime-synthesis §7 (the end-to-end host model), lifecycle-error-model §1 (state guards: 13 before init,
 * 14 after close), §2.7 (load-path statuses and unwind), §3 (ref-counted unload: removed from lookup first, then
 * drained, RUNNING → STOPPING → STOPPED, vNC released last), §4.1/§5.5 (fail-stop for Band C only: such a model
 * stays RUNNING but poisoned; Band A/B leave it re-runnable), spmd-teardown §6 (close order); runtime-synthesis §4 (many models per core, per-core FIFO with
 * `h_running_model`, per-model ref count, logical cores), §6 (the NRT_2.0.0 implicit-async engine and the NRT_3.0.0
 * `nrta_*` scheduler). `docs/multi-model.md` describes the multi-model, logical-core and async design.
 *
 * @module
 */
import { type Clock, SystemClock } from "./clock.ts";
import { resolveRuntimeConfig, type RuntimeConfig, type RuntimeOptions } from "./config.ts";
import { DMA_MEM_USAGE_TOTAL, DmaMemUsageType, DmemLedger } from "./dmem/dmem.ts";
import { guardInitState, NrtError } from "./error.ts";
import { type ArchPack, checkPoolUcodeOverride, createKhal, type Khal, type PoolUcodeOverride } from "./khal.ts";
import { kelfLoad } from "./kelf/kelf_load.ts";
import { bindMetaneff, defaultBinding, type MetaNeff } from "./kelf/metaneff.ts";
import {
  type AsyncExecCompletion,
  type AsyncExecListener,
  AsyncExecWorker,
  type AsyncPollResult,
} from "./kmgr/kmgr_async_exec.ts";
import type { DlrModel as ModelRecord, ExecOutcome } from "./kmgr/dlr_model.ts";
import { ExecWaits } from "./kmgr/exec_waits.ts";
import { type KmgrExecDeps, kmgrExecOnCores } from "./kmgr/kmgr_exec_pre.ts";
import { Kmetric, type ModelExecutionStats } from "./kmgr/kmetric.ts";
import { createConsoleLogger, type Logger } from "./log.ts";
import { md5 } from "./neff/hash.ts";
import { readNeffHeader } from "./neff/header.ts";
import { readNeffAsync } from "./neff/neff_file.ts";
import { checkNeffTarget } from "./kelf/target_check.ts";
import type { NeffTensor } from "./neff/neff_signature.ts";
import type { Portal, PortalDeviceInfo } from "./portal.ts";
import type { SiliconSpec } from "./silicon_spec.ts";
import { Nrta, type PreparedExecution } from "./nrta/nrta.ts";
import { Collectives, encValidateGlobalComm, kmgrValidateReplicaGroups } from "./collectives/collectives.ts";
import { DlrModelState, KmgrExecMode, NrtInitState } from "./state.ts";
import { NrtStatus } from "./status.ts";
import { type InstalledModel, type InstallServices, kblModelAdd, kmgrUnstage } from "./tdrv/kbl_model_add.ts";
import { RuntimeEvents } from "./runtime_events.ts";
import { hostClockMs, type HostSpanListener, safeSpanListener } from "./host_span.ts";
import { CoreQueue } from "./tdrv/core_queue.ts";
import { type Tpb, tpbDestroy, tpbInit } from "./tdrv/tpb.ts";
import { ucodeInitModule } from "./tdrv/ucode_module.ts";
import {
  allocateTensor,
  bytesOf,
  describeValue,
  holdTensors,
  releaseHolds,
  releaseTensor,
  releaseTensors,
  Tensor,
  type TensorContext,
  type TensorLocation,
  TensorPlacement,
  TensorSet,
} from "./tensor.ts";
import { resolveVirtualCoreSize, type VncChoice, type VncLoad, VncTable } from "./vnc/vnc.ts";

/**
 * The NeuronCores claimed by the live runtimes of this process, per portal, as `device:nc` (ours: the seeds describe
 * one runtime per process). A backend's `acquireCores` arbitrates between processes and lets a client take its own
 * cores again, and the embedded simulator has none: without this, two runtimes on one portal would both bring up the
 * same cores, and the first would then fail every execution. A runtime claims its visible cores at init, before
 * bringing them up, and gives them back at close or when its init fails.
 */
const claimedCores = new WeakMap<Portal, Set<string>>();

/**
 * Claims `cores` of `device` on `portal` for one runtime, all or none.
 *
 * @throws {NrtError} `NRT_RESOURCE` naming the cores a live runtime on the same portal holds.
 */
function claimCores(portal: Portal, device: number, cores: readonly number[]): readonly string[] {
  let held = claimedCores.get(portal);
  if (held === undefined) claimedCores.set(portal, held = new Set());
  const keys = cores.map((nc) => `${device}:${nc}`);
  const taken = cores.filter((_, i) => held.has(keys[i]));
  if (taken.length > 0) {
    const one = taken.length === 1;
    throw new NrtError(
      NrtStatus.NRT_RESOURCE,
      `Cannot initialize: NeuronCore${one ? "" : "s"} ${taken.map((nc) => `nc${nc}`).join(", ")} of device ` +
        `${device} ${one ? "is" : "are"} held by another runtime on the same portal; close it, or give each runtime ` +
        `its own cores (visibleCores)`,
    );
  }
  for (const k of keys) held.add(k);
  return keys;
}

/** Gives back what {@linkcode claimCores} took. */
function unclaimCores(portal: Portal, keys: readonly string[]): void {
  const held = claimedCores.get(portal);
  for (const k of keys) held?.delete(k);
}

/** `NRT_INVALID` unless `v` is a non-null object (not an array). */
function checkObject<T>(action: string, what: string, v: T): asserts v is NonNullable<T> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new NrtError(NrtStatus.NRT_INVALID, `${action}: ${what} must be an object, got ${describeValue(v)}`);
  }
}

/** `NRT_INVALID` unless `v` is a logical core index (a non-negative integer). */
function checkVnc(action: string, v: unknown): asserts v is number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `${action}: logical core ${describeValue(v)} is not a non-negative integer`,
    );
  }
}

/** Options of {@linkcode Runtime.init}. */
export interface RuntimeInitOptions extends RuntimeOptions {
  /** The device backend (the embedded simulator, the remote daemon, or a real driver). */
  readonly portal: Portal;
  /** The NeuronCore generations this runtime can drive; the one whose arch the device reports is chosen at init. */
  readonly archPacks: readonly ArchPack[];
  /** Whether `close()` (and `await using`) also closes the portal (default `true`: the runtime owns it). */
  readonly ownsPortal?: boolean;
  /**
   * The image registered with `nrt_set_pool_eng_ucode` before init: either half or both; each half given replaces
   * the stock half on its own, a missing half keeps the stock one (seed: runtime-synthesis §2.1).
   */
  readonly poolUcode?: PoolUcodeOverride;
  /** Environment to read `NEURON_RT_*` from (composition roots pass the process environment). */
  readonly env?: Record<string, string | undefined>;
  /** Logger (default: console at the configured level). */
  readonly logger?: Logger;
  /** Clock (default: the system clock; tests pass a virtual one). */
  readonly clock?: Clock;
  /** Observes every execution as it takes and leaves its NeuronCores (tests prove the per-core FIFO with it). */
  readonly onExecution?: (event: ExecutionEvent) => void;
  /**
   * Hears the host's steps of loads and executions, timed (profilers; `host_span.ts`). Absent, nothing is timed. It
   * should not throw: a throw is logged once and ignored.
   */
  readonly onSpan?: HostSpanListener;
  /**
   * Which executions `onSpan` hears the steps of (ours): asked once as each execution starts, with its sequence number
   * (`ExecutionEvent.seq`), its first physical NeuronCore and its model's handle; `false` times none of its steps (no
   * clock read, no span). Absent, every execution is timed. A load's steps are always heard. A view that shows a
   * recent execution's steps, not every one's, passes it: timing the steps cost a busy server several µs per execution.
   */
  readonly timeExecution?: (seq: number, nc: number, model: number) => boolean;
}

/** One execution entering (`start`) or leaving (`end`) its NeuronCores' FIFO. */
export interface ExecutionEvent {
  /** `start` once the request owns its cores, `end` when it releases them. */
  readonly phase: "start" | "end";
  /** The physical NeuronCores of the request. */
  readonly ncs: readonly number[];
  /** `H_MODEL` of the model (`h_running_model`). */
  readonly model: number;
  /** Runtime-wide execution sequence number, in the order requests were issued. */
  readonly seq: number;
  /** At `end`: the request's `NRT_STATUS` (0 on success), or `undefined` when it could not be made. */
  readonly status?: number;
}

/** A logical core as {@linkcode Runtime.cores} lists it. */
export interface CoreInfo {
  /** Logical core index (the `nrt_load` vnc argument). */
  readonly vnc: number;
  /** Its physical NeuronCores. */
  readonly ncs: readonly number[];
  /** Resident models. */
  readonly models: ReadonlyArray<{ readonly handle: number; readonly name: string; readonly ncs: readonly number[] }>;
  /** `nrt_get_vnc_memory_stats`. */
  readonly memory: VncMemoryStats;
}

/** A logical core's memory (`nrt_vnc_memory_stats_t`, idiomatic names). */
export interface VncMemoryStats {
  /** Bytes booked on the logical core's physical cores (`memory_usage_nc[nc][22]` summed). */
  readonly bytesUsed: number;
  /** `aws_hal_get_hbm_size()`: the HBM of the device, which the cores share. */
  readonly bytesLimit: number;
}

/** Options of {@linkcode Runtime.allocateTensor}. */
export interface AllocateTensorOptions {
  /** Bytes. */
  readonly size: number;
  /** Where the bytes live (default `"device"`). */
  readonly location?: TensorLocation;
  /** Logical core (default 0). */
  readonly vnc?: number;
  /** A name for errors and traces (default `"tensor"`). */
  readonly name?: string;
}

/** One NeuronCore's booked memory, from {@linkcode Runtime.memory}. */
export interface CoreMemory {
  /** Physical NeuronCore. */
  readonly nc: number;
  /** Its logical core. */
  readonly vnc: number;
  /** Bytes booked, all categories and locations (`memory_usage_nc[nc][22]`). */
  readonly total: number;
  /** Of which in HBM. */
  readonly hbm: number;
  /** Of which in pinned host DRAM. */
  readonly host: number;
  /** Bytes per `dma_mem_usage_type` category (index = `DmaMemUsageType` value), both locations. */
  readonly byUsage: readonly number[];
  /** The host-DRAM part of each category. */
  readonly byUsageHost: readonly number[];
}

/** The device memory a runtime has booked, from {@linkcode Runtime.memory}. */
export interface RuntimeMemory {
  /** Device index. */
  readonly device: number;
  /** `aws_hal_get_hbm_size()`. */
  readonly hbmBytes: number;
  /** HBM bytes booked on the device. */
  readonly hbmUsed: number;
  /** Bytes booked on the device, both locations. */
  readonly total: number;
  /** The visible NeuronCores. */
  readonly cores: readonly CoreMemory[];
}

/** Options of {@linkcode Runtime.load}. */
export interface LoadOptions {
  /** Logical NeuronCore (the `nrt_load` vnc argument), or `"auto"` for the least loaded one; default 0. */
  readonly vnc?: VncChoice;
  /** The metaneff (JSON form) that binds MetaTensor i ↔ var_id i ↔ tensor-set ordinal i. */
  readonly metaneff?: MetaNeff;
  /** Checkpoint data of `INPUT_STATE` / `INPUT_WEIGHT` tensors, by checkpoint key. */
  readonly checkpoint?: ReadonlyMap<string, Uint8Array> | Readonly<Record<string, Uint8Array>>;
}

/** Options of {@linkcode Runtime.loadCollectives}: a load's options plus the comm (ours: defaults for one device). */
export interface LoadCollectivesOptions extends LoadOptions {
  /** `g_device_id` (default 0). */
  readonly globalDeviceId?: number;
  /** `g_device_count` (default 1; collectives span one device). */
  readonly globalDeviceCount?: number;
  /** Replica groups of logical cores (default: one group of every visible logical core). */
  readonly replicaGroups?: readonly (readonly number[])[];
}

/** The runtime a {@linkcode Model} was loaded by (set by `Model`'s static block: its `#rt` stays private). */
let runtimeOf: (model: Model) => Runtime;

/** A loaded model. */
export class Model {
  static {
    runtimeOf = (model) => model.#rt;
  }
  readonly #rt: Runtime;
  readonly #record: ModelRecord;
  /** `H_MODEL` handle. */
  readonly handle: number;
  /** Model name (NEFF header name). */
  readonly name: string;
  /** Logical NeuronCore it occupies. */
  readonly vnc: number;
  /** Inputs (name, dtype, shape, size). */
  readonly inputs: readonly NeffTensor[];
  /** Outputs. */
  readonly outputs: readonly NeffTensor[];

  /** @internal */
  constructor(rt: Runtime, r: ModelRecord) {
    this.#rt = rt;
    this.#record = r;
    this.handle = r.handle;
    this.name = r.name;
    this.vnc = r.vnc;
    const named = r.kelf.io.map((t, i) => ({ ...t, name: r.binding.keys[i] }));
    this.inputs = named.slice(0, r.kelf.inputCount).filter((_, i) => r.binding.sources[i] === "USER_INPUT");
    this.outputs = named.slice(r.kelf.inputCount);
  }

  /**
   * `dlr_model.state` as this handle sees it (seed: lifecycle-error-model §1.2): `DMSTATE_RUNNING` while loaded,
   * `DMSTATE_STOPPING` while its unload drains and unstages, `DMSTATE_STOPPED` once unloaded (also for a handle
   * whose unload only dropped its reference to a model another handle still holds).
   */
  get state(): DlrModelState {
    const r = this.#record;
    // A handle whose unload only dropped its reference reads STOPPED; the last handle follows the model.
    return r.holders.has(this) || r.holders.size === 0 ? r.state : DlrModelState.DMSTATE_STOPPED;
  }

  /** Runs the model once; resolves when the device completed (throws `NrtError` otherwise). */
  execute(inputs: TensorSet, outputs: TensorSet): Promise<void> {
    return this.#rt.execute(this, inputs, outputs);
  }

  /** Unloads the model. */
  unload(): Promise<void> {
    return this.#rt.unload(this);
  }

  /** `await using model = await rt.load(…)`: unloads the model unless it is already unloaded or the runtime closed. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#rt.isLoaded(this)) await this.unload();
  }
}

/** The runtime. */
export class Runtime {
  #state: NrtInitState = NrtInitState.NRT_STATE_START;
  /** `H_MODEL` → model: the lookup executions acquire through (the per-core model dbs are views of it). */
  readonly #models = new Map<number, ModelRecord>();
  /** `nrt_load_util` step 7: the interned models, by NEFF digest and logical core. */
  readonly #interned = new Map<string, ModelRecord>();
  readonly #tpbs: Tpb[] = [];
  readonly #vnc: VncTable;
  /** KMGR_EXEC_MODE_ASYNC: one worker per logical core (empty in synchronous mode). */
  readonly #async: AsyncExecWorker[] = [];
  /** Loads in flight, which close waits for. */
  readonly #loading = new Set<Promise<unknown>>();
  readonly #onExecution: ((e: ExecutionEvent) => void) | undefined;
  readonly #onSpan: HostSpanListener | undefined;
  readonly #timeExecution: ((seq: number, nc: number, model: number) => boolean) | undefined;
  /** The execution budgets of the synchronous executions in flight, on one timer (`kmgr/exec_waits.ts`, ours). */
  readonly #execWaits: ExecWaits;
  /** Each model's execution services, timed and not, made at its load (`#execDeps`). */
  readonly #deps = new WeakMap<ModelRecord, { readonly timed: KmgrExecDeps; readonly untimed: KmgrExecDeps }>();
  #services: (InstallServices & { readonly log: Logger }) | undefined;
  readonly #ownsPortal: boolean;
  /** The `device:nc` this runtime claimed on its portal (`claimCores`), given back at close. */
  #claim: readonly string[] = [];
  /** The generations this runtime was given (NEFF targets are resolved against their names). */
  readonly archPacks: readonly ArchPack[];
  #execSeq = 0;
  /** The next `H_MODEL` handle: per runtime, never reused, never wrapped. */
  #nextHandle = 1;
  #jobId = 0;
  /** Resolved configuration. */
  readonly config: RuntimeConfig;
  readonly #portal: Portal;
  /** The HAL built from the arch pack chosen at init (ours: private; `spec` is the public view). */
  readonly #khal: Khal;
  /** Device-memory ledger (private; `memory()` and `memoryStats()` are the read-only queries). */
  readonly #ledger: DmemLedger;
  /** Execution statistics (`kmetric_update_nds_*`; private, `executionStats()` is the read-only query). */
  readonly #kmetric: Kmetric = new Kmetric();
  /** Logger. */
  readonly log: Logger;
  /** Clock. */
  readonly clock: Clock;
  /** The device this runtime drives. */
  readonly device: PortalDeviceInfo;
  /** Physical cores per logical core. */
  readonly virtualCoreSize: number;
  /** `kmgr_exec_mode_t`: `KMGR_EXEC_MODE_ASYNC` when `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` > 0, else `undefined` (sync). */
  readonly execMode: KmgrExecMode | undefined;
  /** The NRT_3.0.0 `nrta_*` scheduler. */
  readonly nrta: Nrta;
  /** Collectives across the logical cores of the device (`nrta_cc_prepare`, `docs/collectives.md`). */
  readonly collectives: Collectives;
  /** Lifecycle events in order (creation and destruction of cores, staging, teardown): a bounded log to read or follow. */
  readonly events: RuntimeEvents = new RuntimeEvents();
  readonly #tensorCtx: TensorContext;

  private constructor(
    config: RuntimeConfig,
    portal: Portal,
    khal: Khal,
    device: PortalDeviceInfo,
    log: Logger,
    clock: Clock,
    onExecution: ((e: ExecutionEvent) => void) | undefined,
    onSpan: HostSpanListener | undefined,
    timeExecution: ((seq: number, nc: number, model: number) => boolean) | undefined,
    ownsPortal: boolean,
    archPacks: readonly ArchPack[],
  ) {
    this.#ownsPortal = ownsPortal;
    this.archPacks = archPacks;
    this.config = config;
    this.#portal = portal;
    this.#khal = khal;
    this.device = device;
    this.log = log;
    this.clock = clock;
    this.#execWaits = new ExecWaits(clock);
    this.#ledger = new DmemLedger(portal, log, device.hbmBytes);
    this.virtualCoreSize = resolveVirtualCoreSize(khal.spec, config.virtualCoreSize, device.ncCount);
    this.#vnc = new VncTable(this.#visiblePhysicalCores(), this.virtualCoreSize, device.ncCount);
    this.#onExecution = onExecution;
    // Heard mid-protocol: a throw is logged, never let through (host_span.ts).
    this.#onSpan = onSpan === undefined ? undefined : safeSpanListener(onSpan, log);
    this.#timeExecution = timeExecution;
    this.#tensorCtx = { portal, ledger: this.#ledger, guard: () => this.guard(), owner: this };
    const depth = config.asyncExecMaxInflightRequests;
    this.execMode = depth > 0 ? KmgrExecMode.KMGR_EXEC_MODE_ASYNC : undefined;
    if (depth > 0) {
      for (let v = 0; v < this.#vnc.visibleCount; v++) {
        this.#async.push(
          new AsyncExecWorker(
            v,
            depth,
            () => ++this.#jobId,
            (e) => log.error(`The async execution listener threw: ${e instanceof Error ? e.message : String(e)}`),
          ),
        );
      }
    }
    this.nrta = new Nrta({
      vncCount: this.#vnc.visibleCount,
      guard: () => this.guard(),
      owner: this, // another runtime's prepared execution is refused with NRT_INVALID (ours)
      vncOf: (t) => {
        if (!(t instanceof Tensor)) {
          throw new NrtError(NrtStatus.NRT_INVALID, `Cannot schedule: ${describeValue(t)} is not a Tensor`);
        }
        // As an execution refuses it: the request would run on this runtime's queues against another's memory.
        if (t.owner !== this) {
          throw new NrtError(
            NrtStatus.NRT_INVALID,
            `Cannot schedule: tensor ${describeValue(t.name)} was not allocated by this runtime`,
          );
        }
        return this.#vncOfNc(t.nc);
      },
    });
    this.collectives = new Collectives({
      guard: () => this.guard(),
      owner: this,
      tpbOf: (vnc) => {
        if (!this.#vnc.has(vnc)) throw new NrtError(NrtStatus.NRT_INVALID, `Logical core ${vnc} is not visible`);
        return this.#tpbs[this.#vnc.slots(vnc)[0]];
      },
      services: () => ({
        ...this.#installServices(),
        clock: this.clock,
        timeoutMs: this.config.execTimeoutMs,
        waits: this.#execWaits,
      }),
      nrta: this.nrta,
      isLoaded: (m) => m instanceof Model && this.isLoaded(m),
    });
  }

  /**
   * `nrt_init`: resolves the portal and the matching arch pack, brings up every visible NeuronCore.
   *
   * Several runtimes may share one portal (`ownsPortal: false`) on disjoint NeuronCores; a runtime whose visible
   * cores overlap those of a live runtime on the same portal is refused (ours: the seeds describe one runtime per
   * process, and a backend's `acquireCores` lets one client take its own cores twice).
   *
   * @throws {NrtError} `NRT_INVALID` for options that are not an object, a portal that is not one, or a bad
   * configuration; `NRT_RESOURCE` naming the cores a live runtime on the same portal holds; `NRT_HW_ERROR` when the
   * device is missing or of a generation none of `archPacks` drives; the bring-up's errors.
   */
  static async init(options: RuntimeInitOptions): Promise<Runtime> {
    checkObject("Cannot initialize", "the options", options);
    const portal = options.portal;
    if (typeof portal !== "object" || portal === null || typeof portal.devices !== "function") {
      throw new NrtError(NrtStatus.NRT_INVALID, `Cannot initialize: portal ${describeValue(portal)} is not a Portal`);
    }
    const owns = options.ownsPortal ?? true;
    let config: RuntimeConfig;
    try {
      config = resolveRuntimeConfig(options, options.env ?? {});
    } catch (e) {
      // The runtime owns the portal from this call on: a refused configuration closes it as a failed bring-up does.
      if (owns) await portal.close().catch(() => {});
      throw e;
    }
    const log = options.logger ?? createConsoleLogger(config.logLevel);
    let rt: Runtime;
    try {
      if (!Array.isArray(options.archPacks)) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot initialize: archPacks must be an array of arch packs, got ${describeValue(options.archPacks)}`,
        );
      }
      if (options.poolUcode !== undefined) {
        const bad = checkPoolUcodeOverride(options.poolUcode);
        if (bad !== undefined) {
          throw new NrtError(NrtStatus.NRT_INVALID, `Cannot initialize: the custom Pool image is invalid: ${bad}`);
        }
      }
      const devices = await portal.devices();
      if (devices.length === 0) {
        throw new NrtError(NrtStatus.NRT_HW_ERROR, "Cannot initialize: the portal reports no Neuron device");
      }
      const device = devices[0];
      // The architecture is checked once, here: the pack whose arch the device reports (seed: runtime-synthesis §1.2).
      const pack = options.archPacks.find((p) => p.spec.arch === device.arch);
      if (pack === undefined) {
        throw new NrtError(
          NrtStatus.NRT_HW_ERROR,
          `Cannot initialize: no arch pack is registered for al_hal_tpb_arch_type ${device.arch}; registered: ` +
            (options.archPacks.map((p) => `${p.spec.name} (${p.spec.arch})`).join(", ") || "none"),
        );
      }
      const khal = createKhal(pack);
      // ucode_init_module: api_level == 3 and the DEFAULT Q7 image's liveness probe, before any core is touched
      // (seed: runtime-synthesis §2.1).
      const ucode = await ucodeInitModule(khal);
      rt = new Runtime(
        config,
        portal,
        khal,
        device,
        log,
        options.clock ?? new SystemClock(),
        options.onExecution,
        options.onSpan,
        options.timeExecution,
        owns,
        options.archPacks,
      );
      rt.events.push(`ucode_init_module api_level=${ucode.apiLevel}`);
    } catch (e) {
      if (owns) await portal.close().catch(() => {});
      throw e;
    }
    const device = rt.device;
    const target = { portal, device: device.index };
    const services = {
      khal: rt.#khal,
      target,
      ledger: rt.#ledger,
      log,
      event: (e: string) => rt.events.push(e),
      gpsimdStdoutQueueSizeBytes: config.gpsimdStdoutQueueSizeBytes,
    };
    const cores = rt.#vnc.physical;
    // This process's runtimes on this portal: a core another live runtime brought up is refused here (ours). The
    // portal is left open: the runtime holding the cores uses it.
    rt.#claim = claimCores(portal, device.index, cores);
    try {
      // The driver's per-process core ownership: a core another process holds fails here, naming the owner.
      await portal.acquireCores?.(device.index, cores);
    } catch (e) {
      unclaimCores(portal, rt.#claim);
      throw e;
    }
    try {
      for (const nc of cores) rt.#tpbs.push(await tpbInit(services, nc, options.poolUcode));
    } catch (e) {
      for (const tpb of rt.#tpbs.splice(0).reverse()) await tpbDestroy(services, tpb).catch(() => {});
      await portal.releaseCores?.(device.index, cores).catch(() => {});
      unclaimCores(portal, rt.#claim);
      if (owns) await portal.close().catch(() => {});
      throw e;
    }
    rt.#state = NrtInitState.NRT_STATE_INIT;
    return rt;
  }

  /** `NEURON_RT_VISIBLE_CORES` / `NEURON_RT_NUM_CORES` (physical cores; checked by {@linkcode VncTable}). */
  #visiblePhysicalCores(): number[] {
    const n = this.device.ncCount;
    const c = this.config;
    return c.visibleCores !== undefined ? [...c.visibleCores] : [...Array(Math.min(n, c.numCores || n)).keys()];
  }

  /** Logical core of a visible physical core. */
  #vncOfNc(nc: number): number {
    const i = this.#vnc.physical.indexOf(nc);
    if (i < 0) throw new NrtError(NrtStatus.NRT_INVALID, `NeuronCore ${nc} is not visible`);
    return Math.floor(i / this.virtualCoreSize);
  }

  /** The silicon spec of the generation the runtime drives (chosen at init from the device's arch). */
  get spec(): SiliconSpec {
    return this.#khal.spec;
  }

  /** `nrt_init_state`. */
  get state(): NrtInitState {
    return this.#state;
  }

  /** The state guard at the top of every public entry: 13 before init, 14 after close. */
  guard(): void {
    guardInitState(this.#state);
  }

  /** Number of logical NeuronCores visible to the process (`nrt_get_visible_vnc_count`). */
  get visibleVncCount(): number {
    return this.#vnc.visibleCount;
  }

  /** Logical NeuronCores of the device (`nrt_get_total_vnc_count`). */
  get totalVncCount(): number {
    return this.#vnc.totalCount;
  }

  /** Physical NeuronCores visible to the process (`nrt_get_visible_nc_count`). */
  get visibleNcCount(): number {
    return this.#vnc.physical.length;
  }

  /** Physical NeuronCores of the device (`nrt_get_total_nc_count`). */
  get totalNcCount(): number {
    return this.#vnc.totalNc;
  }

  /**
   * `nrt_load_collectives`: `enc_validate_global_comm`, the load, then `kmgr_trace_set_cc_global_id` and
   * `kmgr_validate_replica_groups` (seed: lifecycle-error-model §2.1); a failed check after the load unloads the model.
   * The model's logical core becomes a rank of {@linkcode Runtime.collectives} (`docs/collectives.md`).
   *
   * @throws {NrtError} `NRT_INVALID` for a bad global comm or replica groups; every `nrt_load` error.
   */
  async loadCollectives(neff: Uint8Array | ArrayBuffer, options: LoadCollectivesOptions): Promise<Model> {
    this.guard();
    checkObject("Cannot load NEFF", "the options", options);
    const { globalDeviceId = 0, globalDeviceCount = 1, replicaGroups, ...load } = options;
    encValidateGlobalComm(globalDeviceId, globalDeviceCount);
    const model = await this.load(neff, load);
    try {
      const groups = kmgrValidateReplicaGroups(replicaGroups, this.#vnc.visibleCount * globalDeviceCount);
      this.collectives.register(model, { globalDeviceId, globalDeviceCount, replicaGroups: groups });
    } catch (e) {
      await this.unload(model).catch(() => {});
      throw e;
    }
    return model;
  }

  /**
   * `nrt_load`: NEFF bytes → a RUNNING model on a logical core (default 0), optionally with a metaneff.
   *
   * The NEFF is a `Uint8Array` or an `ArrayBuffer` (its whole content; ours: read in place, not copied; any other
   * `ArrayBufferView` is read as its bytes too). `options` is the logical core or a {@linkcode LoadOptions}.
   *
   * @throws {NrtError} 13/14 by state, then `NRT_INVALID` for a NEFF that is not bytes, options that are not a
   * logical core or an object, a logical core that is neither a non-negative integer nor `"auto"`; then the
   * `nrt_load` errors (`NRT_LOAD_NOT_ENOUGH_NC` for a logical core past the visible ones, a bad NEFF, …).
   */
  async load(source: Uint8Array | ArrayBuffer, options: number | LoadOptions = {}): Promise<Model> {
    this.guard();
    const neff = bytesOf(source);
    if (neff === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot load NEFF: expected its bytes (a Uint8Array or an ArrayBuffer), got ${describeValue(source)}`,
      );
    }
    if (typeof options !== "number") checkObject("Cannot load NEFF", "the options", options);
    const opts: LoadOptions = typeof options === "number" ? { vnc: options } : options;
    if (opts.vnc !== undefined && opts.vnc !== "auto") checkVnc("Cannot load NEFF", opts.vnc);
    if (opts.metaneff !== undefined) checkObject("Cannot load NEFF", "the metaneff", opts.metaneff);
    if (opts.checkpoint !== undefined) checkObject("Cannot load NEFF", "the checkpoint", opts.checkpoint);
    // neff_get_header_from_buffer: the header says how many physical cores the model spans (lnc_size). The version
    // gate is neff_parse's, after the vNC is reserved (seed: lifecycle-error-model §2.3, §2.7).
    const header = readNeffHeader(neff, { checkVersion: false });
    const span = Math.max(1, header.lncSize);
    // nrt_vnc_usage_inc: reserve the vNC first; every failure below releases it.
    const vnc = this.#vnc.reserve(opts.vnc ?? 0, (v) => this.#vncLoad(v));
    // nrt_load_util step 7, the model-id cache: the same NEFF on the same vNC shares its interned model, and the new
    // handle only takes a reference (ours: looked up before the parse, so nothing is staged twice; only loads
    // without a caller metaneff or checkpoint are shared, since those bind the model's weights).
    const key = opts.metaneff === undefined && opts.checkpoint === undefined ? `${vnc}:${hexOf(md5(neff))}` : undefined;
    const interned = key === undefined ? undefined : this.#interned.get(key);
    if (interned !== undefined && interned.state === DlrModelState.DMSTATE_RUNNING && interned.poisoned === undefined) {
      const shared = new Model(this, interned);
      interned.holders.add(shared);
      this.events.push(`nrt_load_util model=${interned.handle} interned: refs=${interned.holders.size}`);
      return shared;
    }
    const t0 = this.#onSpan === undefined ? 0 : hostClockMs();
    const loading = this.#loadOn(neff, opts, vnc, span, key);
    this.#loading.add(loading);
    try {
      return await loading;
    } catch (e) {
      this.#vnc.release(vnc); // nrt_vnc_usage_dec
      throw e;
    } finally {
      this.#loading.delete(loading);
      this.#onSpan?.({ name: "nrt_load", start: t0, end: hostClockMs(), detail: `${neff.byteLength} B` });
    }
  }

  /** How busy a logical core is: resident models and booked bytes (for `vnc: "auto"`). */
  #vncLoad(vnc: number): VncLoad {
    return { models: this.#vnc.usage(vnc), bytes: this.#memoryStats(vnc).bytesUsed };
  }

  /** `kmgr_load_nn_nc` on a reserved logical core: parse, then one `kbl_model_add` per physical core of the span. */
  async #loadOn(
    neff: Uint8Array,
    opts: LoadOptions,
    vnc: number,
    span: number,
    cacheKey: string | undefined,
  ): Promise<Model> {
    const onSpan = this.#onSpan;
    let t = onSpan === undefined ? 0 : hostClockMs();
    const step = (name: string, nc?: number, detail?: string): void => {
      if (onSpan === undefined) return;
      const now = hostClockMs();
      onSpan({ name, start: t, end: now, nc, detail });
      t = now;
    };
    const file = await readNeffAsync(neff, {
      validateHash: this.config.validateHash,
      maxDecompressedBytes: this.config.maxNeffBytes,
    });
    step("neff_parse");
    checkNeffTarget(file.target, this.#khal.spec, this.config.allowLegacyNeff, this.archPacks.map((p) => p.spec));
    const kelf = kelfLoad(file);
    this.#vnc.checkSpan(span);
    const given = opts.checkpoint instanceof Map ? opts.checkpoint : new Map(Object.entries(opts.checkpoint ?? {}));
    // A NEFF that carries its own metaneff binds its weights from its own checkpoint members; a caller's metaneff
    // replaces both, a caller's checkpoint entries win over the NEFF's (docs/onnx.md).
    const metaneff = opts.metaneff ?? kelf.metaneff;
    const checkpoint = opts.metaneff === undefined ? new Map([...kelf.checkpoint, ...given]) : given;
    const binding = metaneff === undefined
      ? defaultBinding(kelf.io, kelf.inputCount)
      : bindMetaneff(kelf.name, kelf.io, kelf.inputCount, metaneff, checkpoint);
    step("kelf_load", undefined, kelf.name);
    if (span > 1 && binding.aliases.size > 0) {
      // Both cores would read the input buffer the other one is overwriting in place.
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot load NEFF "${kelf.name}": lnc_size ${span} with outputs aliased to inputs is not supported`,
      );
    }
    const tpbs = this.#vnc.slots(vnc).slice(0, span).map((i) => this.#tpbs[i]);
    const handle = this.#nextHandle++;
    const services = this.#installServices();
    // Our custom-op NEFFs carry one graph: an lnc_size-2 NEFF runs that graph on both physical cores of the LNC.
    const parts: InstalledModel[] = [];
    try {
      for (const tpb of tpbs) {
        parts.push(await kblModelAdd(services, tpb, kelf));
        step("kbl_model_add", tpb.nc, kelf.name);
      }
    } catch (e) {
      for (const p of parts.reverse()) await kmgrUnstage(services, p).catch(() => {});
      throw e;
    }
    const rec: ModelRecord = {
      handle,
      name: kelf.name,
      kelf,
      vnc,
      installed: parts[0],
      parts,
      state: DlrModelState.DMSTATE_STARTING,
      refCount: 0,
      staging: new Map(),
      binding,
      resident: new Map(),
      holders: new Set(),
      cacheKey,
    };
    try {
      // INPUT_STATE / INPUT_WEIGHT: device-resident, filled once from the checkpoint (seed: runtime-synthesis §2.3).
      for (const [i, key] of binding.checkpointKeys.entries()) {
        if (key === undefined) continue;
        const t = await allocateTensor(
          this.#tensorCtx,
          "device",
          this.device.index,
          tpbs[0].nc,
          kelf.io[i].size,
          `${kelf.name}:${binding.keys[i]}`,
          vnc,
        );
        rec.resident.set(i, t);
        await t.write(checkpoint.get(key)!);
        step("checkpoint", tpbs[0].nc, binding.keys[i]);
      }
      // A close that started while we were installing owns the cores now: undo instead of adding to the model db.
      this.guard();
    } catch (e) {
      await this.#unstage(rec).catch(() => {});
      throw e;
    }
    this.#models.set(handle, rec); // the runtime's model lookup (add_model itself is kbl_model_add's step)
    this.#kmetric.addModel(handle, rec.name, vnc, tpbs.map((t) => t.nc));
    if (cacheKey !== undefined) this.#interned.set(cacheKey, rec);
    rec.state = DlrModelState.DMSTATE_RUNNING;
    this.#execDeps(rec); // made now, not by the first execute (measurement log, 2026-12-05, later)
    const model = new Model(this, rec);
    rec.holders.add(model);
    return model;
  }

  #installServices(): InstallServices & { readonly log: Logger } {
    return this.#services ??= {
      khal: this.#khal,
      target: { portal: this.#portal, device: this.device.index },
      ledger: this.#ledger,
      event: (e) => this.events.push(e),
      log: this.log,
    };
  }

  /** `NRT_INVALID` unless `model` is a {@linkcode Model} (of any runtime: the queries answer for another's too). */
  #checkModel(action: string, model: unknown): asserts model is Model {
    if (!(model instanceof Model)) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: ${describeValue(model)} is not a Model`);
    }
  }

  /**
   * `NRT_INVALID` unless `model` is a {@linkcode Model} this runtime loaded. Another runtime's is 2 as its tensors
   * are (ours: the seeds have one runtime per process), not the lookup's `NRT_INVALID_HANDLE` (3): handles are per
   * runtime, and this runtime's model of the same handle is not the one meant.
   */
  #checkOwnModel(action: string, model: unknown): asserts model is Model {
    this.#checkModel(action, model);
    if (runtimeOf(model) !== this) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: model "${model.name}" was loaded by another runtime`);
    }
  }

  #record(model: Model): ModelRecord {
    const r = this.#models.get(model.handle);
    if (r === undefined || !r.holders.has(model)) {
      throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `Model ${model.handle} is not loaded`);
    }
    return r;
  }

  /** Whether `model` is still loaded in this runtime (and the runtime is open); `NRT_INVALID` for a non-model. */
  isLoaded(model: Model): boolean {
    this.#checkModel("Cannot look up a model", model);
    return this.#state === NrtInitState.NRT_STATE_INIT && this.#models.get(model.handle)?.holders.has(model) === true;
  }

  /**
   * Whether a model is poisoned by a Band-C fault (1200..1206, fail-stop until unload: seed lifecycle-error-model
   * §4.1, §5.5), and with which status. Band A/B verdicts never poison; `undefined` too for a handle this runtime
   * does not hold (unloaded, or another runtime's).
   */
  poisonedStatus(model: Model): number | undefined {
    this.#checkModel("Cannot look up a model", model);
    // By the handle and its holder, as the lookup of an execution: handles are per runtime.
    const r = this.#models.get(model.handle);
    return r?.holders.has(model) === true ? r.poisoned : undefined;
  }

  /** `nrt_execute`. Throws `NrtError` with the request's status unless it is `NRT_SUCCESS`. */
  async execute(model: Model, inputs: TensorSet, outputs: TensorSet): Promise<void> {
    throwUnlessSuccess(await this.run(model, inputs, outputs), model.name);
  }

  /**
   * `nrt_execute` reporting the request's `exec_rets` instead of throwing for an execution result: resolves with the
   * device's verdict (success, 1003/1004, or a fault — a Band-C fault 1200..1206 then poisons the model until unload,
   * any other leaves it re-runnable); rejects only when the request
   * could not be made (state guard, unknown model, bad tensor set, runtime closed meanwhile) or a tensor it binds was
   * freed before it ended (`NRT_INVALID_HANDLE`; the memory stays the execution's until then).
   */
  run(model: Model, inputs: TensorSet, outputs: TensorSet): Promise<ExecOutcome> {
    try {
      return this.#run(this.#acquire(model, inputs, outputs));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Takes a model reference for one execution now and returns the execution to run later — what the async engines
   * queue. An unload that starts after this waits for the execution (or its `cancel`).
   */
  prepareExecution(model: Model, inputs: TensorSet, outputs: TensorSet): PreparedExecution {
    const x = this.#acquire(model, inputs, outputs);
    let state: "ready" | "ran" | "cancelled" = "ready";
    return {
      vnc: x.r.vnc,
      owner: this, // only this runtime's nrta schedules it
      run: async () => {
        if (state !== "ready") {
          throw new NrtError(
            NrtStatus.NRT_INVALID,
            `Execution of model "${x.r.name}" was already ${state === "ran" ? "run" : "cancelled"}`,
          );
        }
        state = "ran";
        throwUnlessSuccess(await this.#run(x), x.r.name);
      },
      cancel: () => {
        if (state !== "ready") return;
        state = "cancelled";
        releaseHolds(x.tensors)?.catch((e: unknown) =>
          this.log.warn(`Cannot free a tensor's memory: ${e instanceof Error ? e.message : String(e)}`)
        );
        this.#release(x.r);
      },
    };
  }

  /**
   * The synchronous half of `nrt_execute`: state guard, lookup, tensor-set check, `nn_ref_increment`. Nothing awaits
   * between the lookup and the increment, so an unload either removed the model before (→ `NRT_INVALID_HANDLE`) or
   * finds the reference and waits for it.
   */
  #acquire(
    model: Model,
    inputs: TensorSet,
    outputs: TensorSet,
  ): { r: ModelRecord; tensors: Array<Tensor | undefined> } {
    this.guard();
    this.#checkOwnModel("Cannot execute", model);
    if (!(inputs instanceof TensorSet) || !(outputs instanceof TensorSet)) {
      const [what, v] = inputs instanceof TensorSet ? ["outputs", outputs] : ["inputs", inputs];
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot execute model "${model.name}": the ${what} must be a TensorSet, got ${describeValue(v)}`,
      );
    }
    const r = this.#record(model);
    if (r.state !== DlrModelState.DMSTATE_RUNNING) {
      throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `Model ${model.handle} is not running`);
    }
    if (r.poisoned !== undefined) {
      throw new NrtError(
        r.poisoned as NrtStatus,
        `Cannot execute model "${r.name}": a previous execution faulted (${r.poisoned}); unload and reload it`,
      );
    }
    const io = r.kelf.io;
    const { keys, aliases } = r.binding;
    const nIn = r.kelf.inputCount;
    // Tensor-set ordinal i == var_id i; an aliased output may be omitted (it is written into its input's buffer).
    // A loop, not `map` with a callback: this runs at every execute.
    const tensors: Array<Tensor | undefined> = [];
    for (let i = 0; i < io.length; i++) {
      const resident = r.resident.get(i);
      if (resident !== undefined) {
        tensors.push(resident);
        continue;
      }
      const set = i < nIn ? inputs : outputs;
      if (!set.has(keys[i])) {
        if (i >= nIn && aliases.has(i - nIn)) {
          tensors.push(undefined);
          continue;
        }
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot execute model "${r.name}": ${i < nIn ? "input" : "output"} "${
            keys[i]
          }" is missing from the tensor set`,
        );
      }
      const x = set.get(keys[i]);
      this.#checkTensor(r, keys[i], x);
      if (x.size !== io[i].size) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot execute model "${r.name}": tensor "${keys[i]}" is ${x.size} bytes, the model expects ${io[i].size}`,
        );
      }
      tensors.push(x);
    }
    // The execution holds the memory of its tensors until it ends: a tensor freed meanwhile keeps it (ours).
    holdTensors(tensors);
    r.refCount++;
    return { r, tensors };
  }

  /**
   * A tensor a request binds must be this runtime's, live, and — in device memory — on the model's logical core:
   * a kernel would otherwise read or write device memory at an address another runtime or core owns.
   */
  #checkTensor(r: ModelRecord, key: string, x: Tensor): void {
    // No closure for the refusal: this runs for every tensor of every execute.
    if (!(x instanceof Tensor) || x.owner !== this) refuseTensor(r, key, x, "was not allocated by this runtime");
    if (x.freed) refuseTensor(r, key, x, "was freed");
    if (x.location === "device" && x.vnc !== r.vnc) {
      refuseTensor(
        r,
        key,
        x,
        `is in the device memory of logical core ${x.vnc}; the model runs on logical core ${r.vnc}`,
      );
    }
  }

  /** `nn_ref_decrement`: the last reference out wakes a waiting unload. */
  #release(r: ModelRecord): void {
    if (--r.refCount === 0) r.drained?.();
  }

  /**
   * Runs one acquired execution: takes its place in the FIFO of every physical core of the request synchronously (so
   * requests run in issue order), then stages I/O, rings one doorbell per physical core and polls them all
   * (`exec_rets[k]` per core, ranked by `nrt_get_status_priority`). Releases the cores and the reference at the end.
   */
  async #run(x: { r: ModelRecord; tensors: Array<Tensor | undefined> }): Promise<ExecOutcome> {
    const { r, tensors } = x;
    const seq = ++this.#execSeq;
    const deps = this.#execDeps(r);
    let d = deps.untimed;
    const tpbs = d.tpbs;
    // The turn is taken synchronously on every core of the request, so requests run in issue order.
    const turn = CoreQueue.acquire(d.queues);
    let started = false;
    let status: number | undefined;
    let onSpan: HostSpanListener | undefined;
    let t0 = 0;
    try {
      // Asked inside the try: a listener that throws fails this execution, which still gives back its turn and its
      // model reference.
      if (this.#onSpan !== undefined && (this.#timeExecution?.(seq, d.ncs[0], r.handle) ?? true)) {
        onSpan = this.#onSpan;
        d = deps.timed;
        t0 = hostClockMs();
      }
      await turn.ready;
      for (let k = 0; k < tpbs.length; k++) {
        if (tpbs[k].halted) throw new NrtError(NrtStatus.NRT_CLOSED, "Runtime is closed");
      }
      // An execution queued behind a Band-C fault must not ring the poisoned model's doorbell (fail-stop, seed §4.1/§5.5).
      if (r.poisoned !== undefined) {
        return { status: r.poisoned, execRets: r.parts.map(() => r.poisoned!) };
      }
      // A tensor freed after the request was accepted: the execution does not start (NRT_INVALID_HANDLE, as every use
      // of a freed tensor is; ours).
      checkNotFreed(r, tensors, "ran");
      for (let k = 0; k < tpbs.length; k++) tpbs[k].runningModel = r.parts[k].deviceModel; // h_running_model
      started = true;
      this.#onExecution?.({ phase: "start", ncs: d.ncs, model: r.handle, seq });
      const outcome = await kmgrExecOnCores(r, tensors, d, seq);
      status = outcome.status;
      // Freed while the device ran (its memory was held): the outputs cannot reach the caller. A failed execution
      // keeps the device's verdict.
      if (completed(outcome.status)) checkNotFreed(r, tensors, "ended");
      return outcome;
    } finally {
      try {
        if (started) this.#onExecution?.({ phase: "end", ncs: d.ncs, model: r.handle, seq, status });
        if (started) {
          onSpan?.({ name: "nrt_execute", start: t0, end: hostClockMs(), nc: d.ncs[0], seq, detail: r.name });
        }
      } finally {
        // A listener that threw fails the execution, and the turn and the model reference still go back.
        turn[Symbol.dispose]();
        try {
          const freeing = releaseHolds(tensors);
          if (freeing !== undefined) await freeing;
        } finally {
          this.#release(r);
        }
      }
    }
  }

  /**
   * What `kmgr_exec` needs for the executions of one model (`kmgr/kmgr_exec_pre.ts`), for a timed execution and for
   * one `timeExecution` leaves untimed: made at its load and kept with it, so an execution allocates none of it, and its
   * first execution does not make them (ours).
   */
  #execDeps(r: ModelRecord): { readonly timed: KmgrExecDeps; readonly untimed: KmgrExecDeps } {
    const kept = this.#deps.get(r);
    if (kept !== undefined) return kept;
    const tpbs = r.parts.map((p) => p.tpb);
    const timed: KmgrExecDeps = {
      tpbs,
      ncs: tpbs.map((t) => t.nc),
      queues: tpbs.map((t) => t.queue),
      install: this.#installServices(),
      exec: {
        khal: this.#khal,
        target: { portal: this.#portal, device: this.device.index },
        clock: this.clock,
        log: this.log,
        timeoutMs: this.config.execTimeoutMs,
        onSpan: this.#onSpan,
        waits: this.#execWaits,
        kmetric: { sink: this.#kmetric, model: r.handle },
      },
      staging: (_i, size, name) =>
        allocateTensor(this.#tensorCtx, "device", this.device.index, r.installed.tpb.nc, size, name, r.vnc),
      device: this.device.index,
    };
    const { onSpan: _untimed, ...untimedExec } = timed.exec;
    const d = { timed, untimed: { ...timed, exec: untimedExec } };
    this.#deps.set(r, d);
    return d;
  }

  /**
   * `nrt_unload` → `kmgr_unload_nn` → `nrt_vnc_usage_dec`, in the seed's order (lifecycle-error-model §3;
   * runtime-synthesis §4.6): `nn_ref_decrement` of this handle's reference, and if the interned model is still
   * referenced by another handle, return without teardown. Otherwise the model leaves the lookup (no new execution
   * can acquire it), RUNNING → STOPPING, the async worker is told to stop taking the model's work
   * (`kmgr_async_exec_model_stop`), in-flight executions drain (`kmgr_async_exec_poll`), `kmgr_unstage_kelf_model`,
   * STOPPED, and the vNC is released last. Every step is a lifecycle event (`rt.events`).
   *
   * The drain waits for the executions' references to drop, as the synthesis seed's `remove_model` busy-waits
   * (§4.2); an execution's reference never makes the unload return early (`docs/multi-model.md`).
   *
   * @throws {NrtError} 13/14 by state; `NRT_INVALID` for a value that is not a {@linkcode Model};
   * `NRT_INVALID_HANDLE` for a handle already unloaded.
   */
  async unload(model: Model): Promise<void> {
    this.guard();
    this.#checkOwnModel("Cannot unload", model);
    const r = this.#record(model);
    r.holders.delete(model); // nn_ref_decrement
    if (r.holders.size > 0) {
      // kmgr_unload_nn: "if (rc != 0) return" — the interned model stays installed for its other handles.
      this.events.push(`kmgr_unload_nn model=${r.handle} still referenced: refs=${r.holders.size}`);
      this.#vnc.release(r.vnc); // nrt_vnc_usage_dec (this handle's reservation)
      this.events.push(`nrt_vnc_usage_dec vnc=${r.vnc} model=${r.handle}`);
      return;
    }
    this.#models.delete(model.handle); // remove_model: no new execution can acquire it
    if (r.cacheKey !== undefined && this.#interned.get(r.cacheKey) === r) this.#interned.delete(r.cacheKey);
    r.state = DlrModelState.DMSTATE_STOPPING; // first: RUNNING → STOPPING
    this.events.push(`kmgr_unload_nn model=${r.handle} DMSTATE_STOPPING`);
    // kmetric_unload_model_update_agg_neff_id (seed §3.2): the model's statistics leave the loaded ones; the
    // executions the drain below waits for still count.
    this.#kmetric.forget(r.handle);
    this.events.push(`kmetric_unload_model_update_agg_neff_id model=${r.handle}`);
    const unloading = (async () => {
      // kmgr_async_exec_model_stop: queued async jobs already hold their reference and drain below; none is added.
      this.events.push(`kmgr_async_exec_model_stop model=${r.handle}`);
      // kmgr_async_exec_poll: wait out the drain (libnrt busy-waits on the ref count; the last execution out wakes us).
      if (r.refCount > 0) await new Promise<void>((res) => (r.drained = res));
      this.events.push(`kmgr_async_exec_poll model=${r.handle} drained`);
      try {
        await this.#unstage(r);
        this.events.push(`kmgr_unstage_kelf_model model=${r.handle}`);
      } finally {
        r.state = DlrModelState.DMSTATE_STOPPED;
        this.events.push(`kmgr_unload_nn model=${r.handle} DMSTATE_STOPPED`);
        this.#vnc.release(r.vnc); // nrt_vnc_usage_dec, last
        this.events.push(`nrt_vnc_usage_dec vnc=${r.vnc} model=${r.handle}`);
      }
    })();
    this.#loading.add(unloading);
    try {
      await unloading;
    } finally {
      this.#loading.delete(unloading);
    }
  }

  /** `kmgr_unstage_kelf_model` on every physical core of the model, then its I/O staging and resident tensors. */
  async #unstage(r: ModelRecord): Promise<void> {
    const tensors = [...r.staging.values(), ...r.resident.values()];
    r.staging.clear();
    r.resident.clear();
    let first: unknown;
    for (const t of tensors) await releaseTensor(t).catch((e) => (first ??= e));
    const services = this.#installServices();
    for (const p of r.parts) await kmgrUnstage(services, p).catch((e) => (first ??= e));
    if (first !== undefined) throw first;
  }

  /**
   * Allocates a tensor (`nrt_tensor_allocate`): `size` bytes in the device memory of logical core `vnc` (the
   * default), in host memory, or virtual (a buffer attached later). Every failure, a bad logical core included, is
   * a rejected promise: 13/14 by state, then `NRT_INVALID` for options that are not an object, a size that is not a
   * positive integer, a name that is not a string, an unknown location, a logical core that is not visible.
   *
   * @example A device tensor on logical core 0
   * ```ts ignore
   * const x = await rt.allocateTensor({ size: 1024, name: "x" });
   * ```
   */
  async allocateTensor(options: AllocateTensorOptions): Promise<Tensor> {
    this.guard();
    checkObject("Cannot allocate tensor", "the options", options);
    const { size, vnc = 0, location = "device", name = "tensor" } = options;
    if (typeof name !== "string") {
      throw new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate tensor: name ${describeValue(name)} is not a string`);
    }
    checkVnc(`Cannot allocate tensor "${name}"`, vnc);
    if (!this.#vnc.has(vnc)) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate tensor "${name}": logical core ${vnc} is not visible`);
    }
    const tpb = this.#tpbs[this.#vnc.slots(vnc)[0]];
    return await allocateTensor(this.#tensorCtx, location, this.device.index, tpb.nc, size, name, vnc);
  }

  /**
   * Bytes booked on a logical core's physical cores, and the device's HBM size (`nrt_get_vnc_memory_stats`).
   *
   * @throws {NrtError} 13/14 by state; `NRT_INVALID` for a logical core that is not visible.
   */
  memoryStats(vnc: number): VncMemoryStats {
    this.guard();
    return this.#memoryStats(vnc);
  }

  #memoryStats(vnc: number): VncMemoryStats {
    if (!this.#vnc.has(vnc)) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Logical core ${describeValue(vnc)} is not visible`);
    }
    const used = this.#vnc.slots(vnc).reduce(
      (a, i) => a + this.#ledger.coreTotal(this.device.index, this.#vnc.physical[i]),
      0,
    );
    return { bytesUsed: used, bytesLimit: this.#ledger.hbmBytes };
  }

  /**
   * The device memory this runtime has booked, read-only: per visible NeuronCore its total, its HBM and host-DRAM
   * shares and the bytes of each `dma_mem_usage_type` category (the dmem ledger's rows), and the device's HBM.
   * Like the other read-only views (`cores`, `executionStats`, `events`), it stays readable after close, to check
   * what the teardown gave back (ours).
   */
  memory(): RuntimeMemory {
    const device = this.device.index;
    const cores = this.#vnc.physical.map((nc) => {
      const hbm = this.#ledger.usageAt(device, nc, "hbm"), host = this.#ledger.usageAt(device, nc, "host");
      return {
        nc,
        vnc: this.#vncOfNc(nc),
        total: hbm[DMA_MEM_USAGE_TOTAL] + host[DMA_MEM_USAGE_TOTAL],
        hbm: hbm[DMA_MEM_USAGE_TOTAL],
        host: host[DMA_MEM_USAGE_TOTAL],
        byUsage: Array.from({ length: DMA_MEM_USAGE_TOTAL }, (_, i) => hbm[i] + host[i]),
        byUsageHost: Array.from(host.subarray(0, DMA_MEM_USAGE_TOTAL)),
      };
    });
    return {
      device,
      hbmBytes: this.#ledger.hbmBytes,
      hbmUsed: this.#ledger.hbmUsed(device),
      total: this.#ledger.deviceTotal(device),
      cores,
    };
  }

  /**
   * What the device's own allocator reports for this runtime's device, through the portal: bytes in HBM and in
   * pinned host DRAM and the number of live allocations. Read-only; compare with {@linkcode Runtime.memory}, the
   * runtime's ledger (ours: the seeds describe no such query).
   */
  deviceMemory(): Promise<{ readonly hbm: number; readonly host: number; readonly allocations: number }> {
    return this.#portal.memUsage(this.device.index);
  }

  /**
   * Execution statistics per model, read-only: per physical NeuronCore, executions by final `NRT_STATUS` and, per
   * `kbl_infer_errors` flag, the executions that raised it (`kmetric_update_nds_error_stats` then
   * `kmetric_update_nds_exec_stats` at the end of every synchronous execution; seed: lifecycle-error-model §5.2).
   * A model is listed from its load until 256 more models were unloaded after it (`loaded: false` once unloaded, still
   * counting the executions its unload drains); then its counts join a per-NeuronCore total of unloaded models (ours:
   * bounded for a server that loads and unloads for ever). Requests refused before they reach the device (bad arguments, a poisoned model) are
   * not executions and are not counted. The meaning of the nine flags is ours (`InferErrorFlag`, docs/faults.md).
   */
  executionStats(): ModelExecutionStats[] {
    return this.#kmetric.snapshot((h) => this.#models.has(h));
  }

  /** The visible logical cores with their physical cores, resident models and memory (the placement view). */
  cores(): CoreInfo[] {
    const models = [...this.#models.values()];
    return Array.from({ length: this.#vnc.visibleCount }, (_, vnc) => ({
      vnc,
      ncs: this.#vnc.slots(vnc).map((i) => this.#vnc.physical[i]),
      models: models.filter((m) => m.vnc === vnc).map((m) => ({
        handle: m.handle,
        name: m.name,
        ncs: m.parts.map((p) => p.tpb.nc),
      })),
      memory: this.#memoryStats(vnc),
    }));
  }

  /**
   * KMGR_EXEC_MODE_ASYNC (`nrt_execute` with `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` > 0): queues one execution
   * on the model's logical core and returns its job id at once. The model reference is taken now.
   *
   * @throws {NrtError} `NRT_QUEUE_FULL` when the core's queue holds the configured depth; `NRT_INVALID` in
   * synchronous mode; the `nrt_execute` errors of a request that cannot be made.
   */
  submit(model: Model, inputs: TensorSet, outputs: TensorSet): number {
    this.guard();
    this.#checkOwnModel("Cannot execute", model);
    const worker = this.#worker(model.vnc);
    worker.checkCapacity(); // before the model reference is taken
    const x = this.prepareExecution(model, inputs, outputs);
    return worker.submit(model.handle, () => x.run());
  }

  /** `kmgr_async_exec_poll`: the oldest unharvested completion of a logical core, or `undefined` (`NRT_QUEUE_EMPTY`). */
  poll(vnc = 0): AsyncExecCompletion | undefined {
    this.guard();
    return this.#worker(vnc).poll();
  }

  /**
   * `kmgr_async_exec_poll` with the seed's status typed: `{ status: NRT_SUCCESS, completion }`, or `{ status:
   * NRT_QUEUE_EMPTY }` (15) at once when nothing is ready (seed: runtime-synthesis §6).
   *
   * @throws {NrtError} `NRT_INVALID` in synchronous mode or for a logical core that is not visible; 13/14 by state.
   */
  tryPoll(vnc = 0): AsyncPollResult {
    const completion = this.poll(vnc);
    return completion === undefined
      ? { status: NrtStatus.NRT_QUEUE_EMPTY }
      : { status: NrtStatus.NRT_SUCCESS, completion };
  }

  /** `nrt_async_drain_queued_execs`: resolves once the logical core has no async execution in flight. */
  drainAsync(vnc = 0): Promise<void> {
    this.guard();
    return this.#worker(vnc).drain();
  }

  /**
   * `nrt_register_async_exec_callback`: completions of every logical core go to `listener` (replacing the previous
   * one); `undefined` restores the default (completions queue for {@linkcode Runtime.poll}).
   */
  setAsyncListener(listener: AsyncExecListener | undefined): void {
    this.guard();
    if (listener !== undefined && typeof listener !== "function") {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot set the async listener: ${describeValue(listener)} is not a function or undefined`,
      );
    }
    for (const w of this.#async) w.listener = listener;
  }

  #worker(vnc: number): AsyncExecWorker {
    if (this.#async.length === 0) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        "Async execution is off: set NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS (asyncExecMaxInflightRequests) above 0",
      );
    }
    // An integer first: `this.#async["0"]` would find core 0's worker.
    const w = typeof vnc === "number" && Number.isSafeInteger(vnc) ? this.#async[vnc] : undefined;
    if (w === undefined) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Logical core ${describeValue(vnc)} is not visible`);
    }
    return w;
  }

  /**
   * `nrt_close`: tears every NeuronCore down in the seed's order; afterwards every call returns 14. The device memory
   * of the tensors the application did not free goes back too, whether or not the runtime owns the portal (ours: a
   * shared portal outlives the runtime, and nothing else would ever free it); so do the NeuronCores the runtime
   * claimed on the portal (`Runtime.init`).
   */
  async close(): Promise<void> {
    this.guard();
    // nrt_close stops the async worker first (seed lifecycle-error-model §3.2: stop, drain, then tear down): the nrta
    // queues refuse new requests with NRT_CLOSED (14) at once, and every request scheduled before close runs, reads
    // and writes included, while the state still lets them reach their tensors. A second close meanwhile is 14.
    if (this.nrta.closed) throw new NrtError(NrtStatus.NRT_CLOSED, "Cannot close the runtime: it is closing");
    await this.nrta.close();
    this.#state = NrtInitState.NRT_STATE_CLOSED;
    try {
      await this.#teardown();
    } finally {
      unclaimCores(this.#portal, this.#claim);
      this.#claim = [];
    }
  }

  async #teardown(): Promise<void> {
    // Loads and unloads in flight finish (a load that sees CLOSED undoes itself), and queued async work drains,
    // before the cores go.
    while (this.#loading.size > 0) await Promise.allSettled([...this.#loading]);
    await Promise.all(this.#async.map((w) => w.drain()));
    await this.nrta.drain();
    await this.collectives.close().catch((e: unknown) =>
      this.log.warn(`Cannot release the prepared collectives: ${e instanceof Error ? e.message : String(e)}`)
    );
    const target = { portal: this.#portal, device: this.device.index };
    const services = {
      khal: this.#khal,
      target,
      ledger: this.#ledger,
      log: this.log,
      event: (e: string) => this.events.push(e),
    };
    let first: unknown;
    this.#interned.clear();
    for (const tpb of this.#tpbs.splice(0)) {
      const models = [...this.#models.values()].filter((m) => m.installed.tpb === tpb);
      try {
        await tpbDestroy(services, tpb, async () => {
          for (const m of models) {
            this.#models.delete(m.handle);
            m.state = DlrModelState.DMSTATE_STOPPED;
            await this.#unstage(m);
          }
        });
      } catch (e) {
        first ??= e;
      }
    }
    try {
      const left = await releaseTensors(this.#tensorCtx);
      if (left.count > 0) this.log.debug(`nrt_close freed ${left.count} tensor(s) left allocated (${left.bytes} B)`);
    } catch (e) {
      first ??= e;
    }
    await this.#portal.releaseCores?.(this.device.index, this.#vnc.physical).catch((e: unknown) => (first ??= e));
    if (this.#ownsPortal) await this.#portal.close().catch((e: unknown) => (first ??= e));
    this.#execWaits.close();
    if (first !== undefined) throw first;
  }

  /** `await using rt = await Runtime.init(…)`: closes the runtime (and the portal it owns) unless already closed. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#state === NrtInitState.NRT_STATE_INIT && !this.nrta.closed) await this.close();
  }
}

function hexOf(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** Refuses a tensor a request binds (`NRT_INVALID`). */
function refuseTensor(r: { readonly name: string }, key: string, x: Tensor, why: string): never {
  throw new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot execute model "${r.name}": tensor "${x?.name}" bound to "${key}" ${why}`,
  );
}

/** Whether the device completed the execution: success, or the soft 1003/1004 (seed: lifecycle-error-model §5.5). */
function completed(status: number): boolean {
  return status === NrtStatus.NRT_SUCCESS || status === NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR ||
    status === NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR;
}

/** `NRT_INVALID_HANDLE` (3) when a tensor the request binds was freed before the execution `when` (ours). */
function checkNotFreed(r: ModelRecord, tensors: ReadonlyArray<Tensor | undefined>, when: "ran" | "ended"): void {
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i];
    if (t === undefined || !t.freed) continue;
    throw new NrtError(
      NrtStatus.NRT_INVALID_HANDLE,
      `Cannot execute model "${r.name}": tensor "${t.name}" bound to "${r.binding.keys[i]}" was freed before the ` +
        `execution ${when}`,
    );
  }
}

/** Throws the `NrtError` of an execution result that is not `NRT_SUCCESS`. */
function throwUnlessSuccess(o: ExecOutcome, name: string): void {
  const status = o.status;
  if (status === NrtStatus.NRT_SUCCESS) return;
  if (status === NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR || status === NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR) {
    throw new NrtError(status, `Execution of model "${name}" completed with errors (${status})`);
  }
  throw new NrtError(status as NrtStatus, `Execution of model "${name}" failed with status ${status}`);
}

export { DmaMemUsageType, TensorPlacement, TensorSet };
export type { ExecOutcome };
export {
  type AsyncExecCompletion,
  type AsyncExecListener,
  AsyncExecWorker,
  type AsyncPollResult,
} from "./kmgr/kmgr_async_exec.ts";
export * from "./nrta/nrta.ts";
export * from "./vnc/vnc.ts";
