/**
 * `Runtime`: the idiomatic face of the host runtime — init, load, execute, unload, close — over the Portal and the
 * arch pack the DI container provides. The flat `nrt_*` facade (`nrt_api.ts`) is an adapter over this class.
 *
 * Seed: runtime-synthesis §7 (the end-to-end host model), lifecycle-error-model §1 (state guards: 13 before init,
 * 14 after close), §2.7 (load-path statuses and unwind), §3 (ref-counted unload: removed from lookup first, then
 * drained, RUNNING → STOPPING → STOPPED, vNC released last), §5.5 (fail-stop: a faulted model stays RUNNING but
 * poisoned), spmd-teardown §6 (close order).
 *
 * @module
 */
import type { DependencyContainer } from "tsyringe";
import { type Clock, SystemClock } from "./clock.ts";
import { type RuntimeConfig, type RuntimeOptions, resolveRuntimeConfig } from "./config.ts";
import { DmaMemUsageType, DmemLedger } from "./dmem/dmem.ts";
import { NrtError } from "./error.ts";
import { Khal, type UcodeImage } from "./khal.ts";
import { kelfLoad, type KelfModel } from "./kelf/kelf_load.ts";
import { bindMetaneff, defaultBinding, type IoBinding, type MetaNeff } from "./kelf/metaneff.ts";
import { kmgrSyncExec } from "./kmgr/kmgr_exec.ts";
import { createConsoleLogger, type Logger } from "./log.ts";
import { readNeff } from "./neff/neff_file.ts";
import type { NeffTensor } from "./neff/neff_signature.ts";
import { Portal, type PortalDeviceInfo } from "./portal.ts";
import { DlrModelState, NrtInitState } from "./state.ts";
import { NrtStatus } from "./status.ts";
import { type InstalledModel, kblComputeSetup, kblModelAdd, kmgrUnstage } from "./tdrv/kbl_model_add.ts";
import { type Tpb, tpbDestroy, tpbInit } from "./tdrv/tpb.ts";
import { allocateTensor, type Tensor, type TensorContext, TensorPlacement, TensorSet } from "./tensor.ts";

/** Options of {@linkcode Runtime.init}. */
export interface RuntimeInitOptions extends RuntimeOptions {
  /** The DI container holding a `Portal` and one or more `Khal` packs. */
  readonly container: DependencyContainer;
  /** The image registered with `nrt_set_pool_eng_ucode` before init. */
  readonly poolUcode?: UcodeImage;
  /** Environment to read `NEURON_RT_*` from (composition roots pass the process environment). */
  readonly env?: Record<string, string | undefined>;
  /** Logger (default: console at the configured level). */
  readonly logger?: Logger;
  /** Clock (default: the system clock; tests pass a virtual one). */
  readonly clock?: Clock;
}

/** Options of {@linkcode Runtime.load}. */
export interface LoadOptions {
  /** Logical NeuronCore (the `nrt_load` vnc argument); default 0. */
  readonly vnc?: number;
  /** The metaneff (JSON form) that binds MetaTensor i ↔ var_id i ↔ tensor-set ordinal i. */
  readonly metaneff?: MetaNeff;
  /** Checkpoint data of `INPUT_STATE` / `INPUT_WEIGHT` tensors, by checkpoint key. */
  readonly checkpoint?: ReadonlyMap<string, Uint8Array> | Readonly<Record<string, Uint8Array>>;
}

/** Per-model state kept by the runtime (`dlr_model`). */
interface ModelRecord {
  readonly handle: number;
  readonly name: string;
  readonly kelf: KelfModel;
  readonly vnc: number;
  readonly installed: InstalledModel;
  state: DlrModelState;
  refCount: number;
  drained?: () => void;
  poisoned?: number;
  /** Device staging buffers for host-placed I/O, by io index. */
  readonly staging: Map<number, Tensor>;
  /** The metaneff binding (identity without a metaneff). */
  readonly binding: IoBinding;
  /** Device tensors of INPUT_STATE / INPUT_WEIGHT inputs, by input ordinal. */
  readonly resident: Map<number, Tensor>;
}

let nextModelHandle = 1;

/** A loaded model. */
export class Model {
  readonly #rt: Runtime;
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
    this.handle = r.handle;
    this.name = r.name;
    this.vnc = r.vnc;
    const named = r.kelf.io.map((t, i) => ({ ...t, name: r.binding.keys[i] }));
    this.inputs = named.slice(0, r.kelf.inputCount).filter((_, i) => r.binding.sources[i] === "USER_INPUT");
    this.outputs = named.slice(r.kelf.inputCount);
  }

  /** Runs the model once; resolves when the device completed (throws `NrtError` otherwise). */
  execute(inputs: TensorSet, outputs: TensorSet): Promise<void> {
    return this.#rt.execute(this, inputs, outputs);
  }

  /** Unloads the model. */
  unload(): Promise<void> {
    return this.#rt.unload(this);
  }
}

/** The runtime. */
export class Runtime {
  #state: NrtInitState = NrtInitState.NRT_STATE_START;
  readonly #models = new Map<number, ModelRecord>();
  readonly #tpbs: Tpb[] = [];
  readonly #vncUsage: number[] = [];
  /** Resolved configuration. */
  readonly config: RuntimeConfig;
  /** The portal. */
  readonly portal: Portal;
  /** The arch pack chosen at init. */
  readonly khal: Khal;
  /** Device-memory ledger. */
  readonly ledger: DmemLedger;
  /** Logger. */
  readonly log: Logger;
  /** Clock. */
  readonly clock: Clock;
  /** The device this runtime drives. */
  readonly device: PortalDeviceInfo;
  /** Physical cores per logical core. */
  readonly virtualCoreSize: number;
  /** Lifecycle events in order (creation and destruction of cores, staging, teardown). */
  readonly events: string[] = [];
  readonly #tensorCtx: TensorContext;

  private constructor(config: RuntimeConfig, portal: Portal, khal: Khal, device: PortalDeviceInfo, log: Logger, clock: Clock) {
    this.config = config;
    this.portal = portal;
    this.khal = khal;
    this.device = device;
    this.log = log;
    this.clock = clock;
    this.ledger = new DmemLedger(portal, log, device.hbmBytes);
    const spec = khal.spec;
    let size = config.virtualCoreSize ?? spec.defaultVirtualCoreSize;
    if (spec.forcedVirtualCoreSize !== null) size = spec.forcedVirtualCoreSize;
    if (device.ncCount % size !== 0) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Invalid NEURON_RT_VIRTUAL_CORE_SIZE ${size}: it must divide the ${device.ncCount} NeuronCores of a ${spec.name} device`);
    }
    this.virtualCoreSize = size;
    this.#tensorCtx = { portal, ledger: this.ledger, guard: () => this.guard() };
  }

  /** `nrt_init`: resolves the portal and the matching arch pack, brings up every visible NeuronCore. */
  static async init(options: RuntimeInitOptions): Promise<Runtime> {
    const config = resolveRuntimeConfig(options, options.env ?? {});
    const log = options.logger ?? createConsoleLogger(config.logLevel);
    const portal = options.container.resolve(Portal);
    const devices = await portal.devices();
    if (devices.length === 0) throw new NrtError(NrtStatus.NRT_HW_ERROR, "Cannot initialize: the portal reports no Neuron device");
    const device = devices[0];
    const packs = options.container.isRegistered(Khal, true) ? options.container.resolveAll(Khal) : [];
    const khal = packs.find((k) => k.spec.arch === device.arch);
    if (khal === undefined) {
      throw new NrtError(
        NrtStatus.NRT_HW_ERROR,
        `Cannot initialize: no arch pack is registered for al_hal_tpb_arch_type ${device.arch}; registered: ` +
          (packs.map((k) => `${k.spec.name} (${k.spec.arch})`).join(", ") || "none"),
      );
    }
    const rt = new Runtime(config, portal, khal, device, log, options.clock ?? new SystemClock());
    const target = { portal, device: device.index };
    const services = { khal, target, ledger: rt.ledger, log, event: (e: string) => rt.events.push(e) };
    const cores = rt.#visiblePhysicalCores();
    try {
      for (const nc of cores) rt.#tpbs.push(await tpbInit(services, nc, options.poolUcode));
    } catch (e) {
      for (const tpb of rt.#tpbs.splice(0).reverse()) await tpbDestroy(services, tpb).catch(() => {});
      throw e;
    }
    rt.#vncUsage.push(...new Array(Math.floor(cores.length / rt.virtualCoreSize)).fill(0));
    rt.#state = NrtInitState.NRT_STATE_INIT;
    return rt;
  }

  #visiblePhysicalCores(): number[] {
    const n = this.device.ncCount;
    const c = this.config;
    const cores = c.visibleCores !== undefined ? [...c.visibleCores] : [...Array(Math.min(n, c.numCores ?? n)).keys()];
    for (const k of cores) {
      if (k >= n) throw new NrtError(NrtStatus.NRT_INVALID, `Invalid NEURON_RT_VISIBLE_CORES: core ${k} does not exist (the device has ${n})`);
    }
    return cores;
  }

  /** `nrt_init_state`. */
  get state(): NrtInitState {
    return this.#state;
  }

  /** The state guard at the top of every public entry: 13 before init, 14 after close. */
  guard(): void {
    if (this.#state === NrtInitState.NRT_STATE_CLOSED) throw new NrtError(NrtStatus.NRT_CLOSED, "Runtime is closed");
    if (this.#state !== NrtInitState.NRT_STATE_INIT) throw new NrtError(NrtStatus.NRT_UNINITIALIZED, "Runtime is not initialized");
  }

  /** Number of logical NeuronCores visible to the process. */
  get visibleVncCount(): number {
    return this.#vncUsage.length;
  }

  /** `nrt_load`: NEFF bytes → a RUNNING model on a logical core (default 0), optionally with a metaneff. */
  async load(neff: Uint8Array, options: number | LoadOptions = {}): Promise<Model> {
    this.guard();
    const opts: LoadOptions = typeof options === "number" ? { vnc: options } : options;
    const vnc = opts.vnc ?? 0;
    // nrt_vnc_usage_inc: reserve the vNC first; every failure below releases it.
    if (!Number.isInteger(vnc) || vnc < 0 || vnc >= this.#vncUsage.length) {
      throw new NrtError(
        NrtStatus.NRT_LOAD_NOT_ENOUGH_NC,
        `Insufficient number of pncs, required: ${this.virtualCoreSize}, available: ${vnc >= 0 && vnc < this.#vncUsage.length ? this.virtualCoreSize : 0}`,
      );
    }
    this.#vncUsage[vnc]++;
    try {
      const file = readNeff(neff, { validateHash: this.config.validateHash });
      const kelf = kelfLoad(file);
      const checkpoint = opts.checkpoint instanceof Map ? opts.checkpoint : new Map(Object.entries(opts.checkpoint ?? {}));
      const binding = opts.metaneff === undefined
        ? defaultBinding(kelf.io, kelf.inputCount)
        : bindMetaneff(kelf.name, kelf.io, kelf.inputCount, opts.metaneff, checkpoint);
      const tpb = this.#tpbs[vnc * this.virtualCoreSize];
      const handle = nextModelHandle++;
      const installed = await kblModelAdd(
        { khal: this.khal, target: { portal: this.portal, device: this.device.index }, ledger: this.ledger, event: (e) => this.events.push(e) },
        tpb,
        kelf,
        handle & 0x7fff,
      );
      const rec: ModelRecord = {
        handle, name: kelf.name, kelf, vnc, installed, state: DlrModelState.DMSTATE_STARTING, refCount: 0, staging: new Map(), binding, resident: new Map(),
      };
      try {
        // INPUT_STATE / INPUT_WEIGHT: device-resident, filled once from the checkpoint (seed: runtime-synthesis §2.3).
        for (const [i, key] of binding.checkpointKeys.entries()) {
          if (key === undefined) continue;
          const t = await allocateTensor(this.#tensorCtx, TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, this.device.index, tpb.nc, kelf.io[i].size, `${kelf.name}:${binding.keys[i]}`);
          rec.resident.set(i, t);
          await t.write(checkpoint.get(key)!);
        }
      } catch (e) {
        await this.#unstage(rec).catch(() => {});
        throw e;
      }
      this.#models.set(handle, rec); // add_model
      rec.state = DlrModelState.DMSTATE_RUNNING;
      return new Model(this, rec);
    } catch (e) {
      this.#vncUsage[vnc]--; // nrt_vnc_usage_dec
      throw e;
    }
  }

  #record(model: Model): ModelRecord {
    const r = this.#models.get(model.handle);
    if (r === undefined) throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `Model ${model.handle} is not loaded`);
    return r;
  }

  /** Whether a model is poisoned by a fault (fail-stop), and with which status. */
  poisonedStatus(model: Model): number | undefined {
    return this.#models.get(model.handle)?.poisoned;
  }

  /** `nrt_execute`. Throws `NrtError` with the request's status unless it is `NRT_SUCCESS`. */
  async execute(model: Model, inputs: TensorSet, outputs: TensorSet): Promise<void> {
    this.guard();
    const r = this.#record(model);
    if (r.state !== DlrModelState.DMSTATE_RUNNING) throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `Model ${model.handle} is not running`);
    if (r.poisoned !== undefined) {
      throw new NrtError(r.poisoned as NrtStatus, `Cannot execute model "${r.name}": a previous execution faulted (${r.poisoned}); unload and reload it`);
    }
    const io = r.kelf.io;
    const { keys, aliases } = r.binding;
    const nIn = r.kelf.inputCount;
    // Tensor-set ordinal i == var_id i; an aliased output may be omitted (it is written into its input's buffer).
    const tensors: Array<Tensor | undefined> = io.map((t, i) => {
      const resident = r.resident.get(i);
      if (resident !== undefined) return resident;
      const set = i < nIn ? inputs : outputs;
      if (!set.has(keys[i])) {
        if (i >= nIn && aliases.has(i - nIn)) return undefined;
        throw new NrtError(NrtStatus.NRT_INVALID, `Cannot execute model "${r.name}": ${i < nIn ? "input" : "output"} "${keys[i]}" is missing from the tensor set`);
      }
      const x = set.get(keys[i]);
      if (x.size !== t.size) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Cannot execute model "${r.name}": tensor "${keys[i]}" is ${x.size} bytes, the model expects ${t.size}`);
      }
      return x;
    });
    r.refCount++;
    const tpb = r.installed.tpb;
    const prev = tpb.execTail;
    let release!: () => void;
    tpb.execTail = new Promise<void>((res) => (release = res));
    try {
      await prev.catch(() => {});
      if (tpb.halted) throw new NrtError(NrtStatus.NRT_CLOSED, "Runtime is closed");
      tpb.runningModel = r.installed.deviceModel; // h_running_model
      const target = { portal: this.portal, device: this.device.index };
      // kmgr_exec_pre: clone the tensor sets to device memory where they are not there already.
      const pa: number[] = [];
      for (const [i, t] of tensors.entries()) {
        const alias = i >= nIn ? aliases.get(i - nIn) : undefined;
        if (alias !== undefined) {
          pa.push(pa[alias]); // output_aliases_to: the output reuses its input's device buffer
          continue;
        }
        if (t === undefined) throw new RangeError("unreachable: a non-aliased tensor is missing");
        const dev = t.devicePa;
        if (dev !== undefined && t.device === this.device.index) {
          pa.push(dev);
          continue;
        }
        let st = r.staging.get(i);
        if (st === undefined) {
          st = await allocateTensor(this.#tensorCtx, TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, this.device.index, tpb.nc, t.size, `${r.name}:${io[i].name}`);
          r.staging.set(i, st);
        }
        if (i < r.kelf.inputCount) await st.write(await t.read());
        pa.push(st.devicePa!);
      }
      const services = { khal: this.khal, target, ledger: this.ledger, event: (e: string) => this.events.push(e) };
      await kblComputeSetup(services, r.installed, pa);
      const req = await kmgrSyncExec(
        { khal: this.khal, target, clock: this.clock, log: this.log, timeoutMs: this.config.execTimeoutMs },
        r.installed,
        r.name,
      );
      const status = req.execRets[0];
      if (status !== NrtStatus.NRT_SUCCESS && status !== NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR && status !== NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR) {
        r.poisoned = status; // fail-stop: RUNNING but poisoned
        throw new NrtError(status as NrtStatus, `Execution of model "${r.name}" failed with status ${status}`);
      }
      for (const [i, t] of tensors.entries()) {
        if (i < nIn) continue;
        const alias = aliases.get(i - nIn);
        if (alias !== undefined) {
          // In place: the data is in the input's buffer; a host-side input (staged) and a given output get copies.
          const src = r.staging.get(alias) ?? tensors[alias]!;
          const inT = tensors[alias]!;
          if (r.staging.has(alias) && inT.devicePa === undefined) await inT.write(await src.read());
          if (t !== undefined && t !== inT) await t.write(await src.read());
          continue;
        }
        const st = r.staging.get(i);
        if (st !== undefined && t !== undefined && t.devicePa === undefined) await t.write(await st.read());
      }
      if (status !== NrtStatus.NRT_SUCCESS) throw new NrtError(status as NrtStatus, `Execution of model "${r.name}" completed with errors (${status})`);
    } finally {
      release();
      if (--r.refCount === 0) r.drained?.();
    }
  }

  /** `nrt_unload`: removed from lookup first, waits for in-flight executions, frees the model, releases its vNC. */
  async unload(model: Model): Promise<void> {
    this.guard();
    const r = this.#record(model);
    this.#models.delete(model.handle); // no new execution can acquire it
    if (r.refCount > 0) await new Promise<void>((res) => (r.drained = res));
    r.state = DlrModelState.DMSTATE_STOPPING;
    try {
      await this.#unstage(r);
    } finally {
      r.state = DlrModelState.DMSTATE_STOPPED;
      this.#vncUsage[r.vnc]--;
    }
  }

  async #unstage(r: ModelRecord): Promise<void> {
    for (const t of [...r.staging.values(), ...r.resident.values()]) await t.free();
    r.staging.clear();
    r.resident.clear();
    await kmgrUnstage(
      { khal: this.khal, target: { portal: this.portal, device: this.device.index }, ledger: this.ledger, event: (e) => this.events.push(e) },
      r.installed,
    );
  }

  /** `nrt_tensor_allocate`. */
  allocateTensor(placement: TensorPlacement, vnc: number, size: number, name: string): Promise<Tensor> {
    this.guard();
    const tpb = this.#tpbs[vnc * this.virtualCoreSize];
    if (tpb === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate tensor "${name}": logical core ${vnc} is not visible`);
    return allocateTensor(this.#tensorCtx, placement, this.device.index, tpb.nc, size, name);
  }

  /** `nrt_close`: tears every NeuronCore down in the seed's order; afterwards every call returns 14. */
  async close(): Promise<void> {
    this.guard();
    this.#state = NrtInitState.NRT_STATE_CLOSED;
    const target = { portal: this.portal, device: this.device.index };
    const services = { khal: this.khal, target, ledger: this.ledger, log: this.log, event: (e: string) => this.events.push(e) };
    let first: unknown;
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
    if (first !== undefined) throw first;
  }
}

export { DmaMemUsageType, TensorPlacement, TensorSet };
