/**
 * The flat libnrt-compatible facade: functions named after the C ABI (`nrt_init`, `nrt_load`, `nrt_execute`, …),
 * each returning an `NrtStatus` exactly where libnrt does, with out-parameters as `{ value }` boxes. It is an
 * adapter over {@linkcode Runtime}: no runtime logic lives here, only the process-global state machine, the check
 * that each argument is of the kind its entry takes, and the status translation.
 *
 * Every entry reads the state first: 13 before `nrt_init`, 14 after `nrt_close`, whatever its arguments. Only then
 * come the argument checks: a handle that is not of its kind (`null`, `undefined`, a plain object where a `Model`,
 * `Tensor`, `TensorSet`, `NrtaErrorTracker` or `Collective` goes) and an out-parameter that cannot take a `value`
 * are `NRT_INVALID` (2), before anything is done, so a refused call leaves nothing behind; a handle of the right
 * kind that is no longer valid (an unloaded model, a freed tensor) is the runtime's answer, `NRT_INVALID_HANDLE`
 * (3). No entry throws. The exceptions to the guard: `nrt_init`, which leaves the START state (and, ours, starts
 * over after `nrt_close`); `nrt_set_pool_eng_ucode`, whose window is the START state (runtime-synthesis §2.1); and
 * the three entries without a status to return (ours): `nrt_tensor_get_size` answers 0, `nrt_destroy_tensor_set`
 * and `nrta_error_tracker_destroy` do nothing.
 *
 * Seed: lifecycle-error-model §1.1 (`NRT_INIT_STATE` read at the top of every public entry: 13 before init, 14
 * after close), runtime-synthesis §2.1 (`nrt_set_pool_eng_ucode` stores the image only in the START state; INIT →
 * 0xd, CLOSED → 0xe; `nrt_init` silently substitutes it), §4.5 (the core counts), §6 (the NRT_2.0.0 surface, its
 * implicit-async mode: `nrt_execute` queues and returns, `NRT_QUEUE_FULL` on backpressure; and the NRT_3.0.0
 * `nrta_*` family, whose out-parameters are `Ref` boxes and whose sequence ids are `bigint`).
 *
 * @module
 */
import { guardInitState, NrtError, statusOfError } from "./error.ts";
import { checkPoolUcodeOverride, type PoolUcodeOverride } from "./khal.ts";
import type { MetaNeff } from "./kelf/metaneff.ts";
import { type NrtaError, NrtaErrorTracker } from "./nrta/nrta.ts";
import { Collective } from "./collectives/collectives.ts";
import type { Portal } from "./portal.ts";
import { Model, Runtime, type RuntimeInitOptions } from "./runtime.ts";
import { NrtInitState } from "./state.ts";
import { NrtStatus } from "./status.ts";
import { Tensor, tensorLocationOf, type TensorPlacement } from "./tensor.ts";
import { TensorSet } from "./tensor.ts";

/** An out-parameter: the callee fills `value` on success. */
export interface Ref<T> {
  /** The result. */
  value?: T;
}

/**
 * `nrt_ucode_info`: the `{iram, dram}` pair of a custom Pool-engine image. Either half may be absent (a null `bin`):
 * it keeps the stock half (seed: runtime-synthesis §2.1).
 */
export type NrtUcodeInfo = PoolUcodeOverride;

/** `nrt_tensor_usage_t`. */
export const NrtTensorUsage = { NRT_TENSOR_USAGE_INPUT: 0, NRT_TENSOR_USAGE_OUTPUT: 1 } as const;

/** One entry of `nrt_tensor_info_array_t`. */
export interface NrtTensorInfo {
  /** Tensor-set key. */
  readonly name: string;
  /** `NRT_TENSOR_USAGE_INPUT` or `NRT_TENSOR_USAGE_OUTPUT`. */
  readonly usage: number;
  /** Bytes. */
  readonly size: number;
  /** Element type. */
  readonly dtype: string;
  /** Shape. */
  readonly shape: readonly number[];
}

/** `nrt_tensor_info_array_t`. */
export interface NrtTensorInfoArray {
  /** Number of entries. */
  readonly tensor_count: number;
  /** Inputs first, then outputs. */
  readonly tensor_array: readonly NrtTensorInfo[];
}

/** `nrt_version_t`. */
export interface NrtVersion {
  /** Major. */
  readonly rt_major: number;
  /** Minor. */
  readonly rt_minor: number;
  /** Patch. */
  readonly rt_patch: number;
  /** Maintenance. */
  readonly rt_maintenance: number;
  /** Detail string. */
  readonly rt_detail: string;
  /** Git hash. */
  readonly git_hash: string;
}

/**
 * `NRT_ASYNC_EXEC_STATUS_CALLBACK(params, model_id, vnc, job_id, status)`: where async completions are posted.
 */
export type NrtAsyncExecStatusCallback = (
  params: unknown,
  modelId: number,
  vnc: number,
  jobId: number,
  status: NrtStatus,
) => void;

/** One harvested async completion, as {@linkcode NrtApi.nrt_async_exec_poll} fills it (the callback's arguments). */
export interface NrtAsyncExecCompletion {
  /** `H_MODEL` of the model that ran. */
  model_id: number;
  /** Logical core. */
  vnc: number;
  /** The job id `nrt_execute` queued. */
  job_id: number;
  /** The execution's status. */
  status: NrtStatus;
}

/** `nrt_vnc_memory_stats_t`. */
export interface NrtVncMemoryStats {
  /** Bytes booked on the logical core's physical cores. */
  readonly bytes_used: number;
  /** The device's HBM bytes. */
  readonly bytes_limit: number;
}

/** Options of {@linkcode NrtApi.nrt_init}: the portal and arch packs are what the C call finds in the process. */
export type NrtInitOptions = Omit<RuntimeInitOptions, "poolUcode">;

/** Runs `f` and turns its outcome into a status. */
async function status(f: () => Promise<unknown> | unknown): Promise<NrtStatus> {
  try {
    await f();
    return NrtStatus.NRT_SUCCESS;
  } catch (e) {
    return statusOfError(e);
  }
}

/**
 * One process's libnrt: the `NRT_INIT_STATE` machine, the registered Pool image and the runtime. The module-level
 * `nrt_*` functions use a default instance; tests build their own.
 *
 * @example Run the C-shaped lifecycle
 * ```ts ignore
 * const api = new NrtApi();
 * api.nrt_set_pool_eng_ucode({ iram, dram });          // 0 (START)
 * await api.nrt_init({ portal, archPacks: [cayman] });  // 0
 * api.nrt_set_pool_eng_ucode({ iram, dram });          // 13 (0xd: already initialised)
 * const model: Ref<Model> = {};
 * await api.nrt_load(neffBytes, 0, 1, model);           // 0
 * await api.nrt_close();                                // 0; every call now returns 14
 * ```
 */
export class NrtApi {
  #state: NrtInitState = NrtInitState.NRT_STATE_START;
  #ucode: PoolUcodeOverride | undefined;
  #rt: Runtime | undefined;
  /** The portal of the runtime, or of the `nrt_init` in flight: a refused `nrt_init` never closes it. */
  #portal: Portal | undefined;
  /** Settles when the `nrt_init` in flight did (success or failure). */
  #initing: Promise<void> | undefined;
  /** The teardown of the `nrt_close` in flight (never rejects). */
  #closing: Promise<unknown> | undefined;

  /** `nrt_init_state`. */
  get state(): NrtInitState {
    return this.#state;
  }

  /** The runtime behind the facade, once initialised. */
  get runtime(): Runtime | undefined {
    return this.#rt;
  }

  #guard(): Runtime {
    guardInitState(
      this.#rt === undefined && this.#state === NrtInitState.NRT_STATE_INIT
        ? NrtInitState.NRT_STATE_START
        : this.#state,
    );
    return this.#rt!;
  }

  /**
   * `nrt_set_pool_eng_ucode`: only in the START state; INIT → 13 (0xd), CLOSED → 14 (0xe); while an `nrt_init` is in
   * flight also 13 (ours: that init has taken the image it runs with). No signature check. Either half may be absent
   * (`undefined` or `null`): at init it keeps the stock half. Neither half, or a half that is not a `Uint8Array`, →
   * `NRT_INVALID` (ours).
   */
  nrt_set_pool_eng_ucode(info: NrtUcodeInfo): NrtStatus {
    if (this.#state === NrtInitState.NRT_STATE_INIT) return NrtStatus.NRT_UNINITIALIZED; // seed: "==INIT -> reject 0xd"
    if (this.#state === NrtInitState.NRT_STATE_CLOSED) return NrtStatus.NRT_CLOSED; // seed: "==CLOSED -> reject 0xe"
    if (this.#initing !== undefined) return NrtStatus.NRT_UNINITIALIZED;
    if (checkPoolUcodeOverride(info) !== undefined) return NrtStatus.NRT_INVALID;
    this.#ucode = {
      ...(info.iram instanceof Uint8Array ? { iram: info.iram.slice() } : {}),
      ...(info.dram instanceof Uint8Array ? { dram: info.dram.slice() } : {}),
    };
    return NrtStatus.NRT_SUCCESS;
  }

  /**
   * `nrt_init`. A second init while initialised fails with `NRT_FAILURE` (1), and so does one while another
   * `nrt_init` is in flight (ours: only the first brings a runtime up); a refused init creates nothing, and closes
   * the portal it was given to own unless that portal is the one in use. Options that are not an object with a
   * portal → `NRT_INVALID`. After `nrt_close` a new init starts over (ours), once the close's teardown finished.
   */
  async nrt_init(options: NrtInitOptions): Promise<NrtStatus> {
    if (this.#state === NrtInitState.NRT_STATE_INIT || this.#initing !== undefined) {
      const o = options as Partial<NrtInitOptions> | null | undefined;
      const portal = o?.portal;
      // The refused call was given its portal to own, as Runtime.init is: close it, unless it is the one in use.
      if ((o?.ownsPortal ?? true) && portal !== this.#portal && typeof portal?.close === "function") {
        await portal.close().catch(() => {});
      }
      return NrtStatus.NRT_FAILURE;
    }
    if (typeof options !== "object" || options === null || typeof options.portal !== "object") {
      return NrtStatus.NRT_INVALID;
    }
    let settled!: () => void;
    this.#initing = new Promise<void>((resolve) => (settled = resolve));
    this.#portal = options.portal;
    const closing = this.#closing;
    try {
      return await status(async () => {
        await closing;
        const rt = await Runtime.init({ ...options, poolUcode: this.#ucode });
        this.#rt = rt;
        this.#state = NrtInitState.NRT_STATE_INIT;
      });
    } finally {
      if (this.#rt === undefined) this.#portal = undefined;
      this.#initing = undefined;
      settled();
    }
  }

  /**
   * `nrt_close`. While an `nrt_init` is in flight it waits for it (ours): an init that succeeds is then closed (the
   * init returns 0, the close 0), one that fails leaves nothing to close (13, or 14 after an earlier close). From
   * the moment the close starts every call returns 14.
   */
  async nrt_close(): Promise<NrtStatus> {
    if (this.#initing !== undefined) await this.#initing;
    let rt: Runtime;
    try {
      rt = this.#guard();
    } catch (e) {
      return statusOfError(e);
    }
    this.#state = NrtInitState.NRT_STATE_CLOSED;
    this.#rt = undefined;
    this.#portal = undefined;
    const closing = status(() => rt.close());
    this.#closing = closing;
    try {
      return await closing;
    } finally {
      if (this.#closing === closing) this.#closing = undefined;
    }
  }

  /** `nrt_load(neff, size, start_nc, nc_count, &model)`: `start_nc` is the logical core (-1 = 0). */
  async nrt_load(
    neff: Uint8Array,
    startNc: number,
    ncCount: number,
    model: Ref<Model>,
    metaneff?: MetaNeff,
    checkpoint?: ReadonlyMap<string, Uint8Array>,
  ): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkRef(model, "Cannot load NEFF", "model");
      checkLoadArgs(neff, ncCount);
      model.value = await rt.load(neff, { vnc: startNc < 0 ? 0 : startNc, metaneff, checkpoint });
    });
  }

  /** `nrt_unload`. */
  async nrt_unload(model: Model): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkModel(model, "Cannot unload");
      await rt.unload(model);
    });
  }

  /**
   * `nrt_execute`. In the implicit-async mode (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` > 0) it queues the
   * request and returns `NRT_SUCCESS` at once, or `NRT_QUEUE_FULL`; the result goes to the registered callback.
   */
  async nrt_execute(model: Model, input: TensorSet, output: TensorSet): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkExecArgs(model, input, output);
      if (rt.execMode !== undefined) rt.submit(model, input, output);
      else await rt.execute(model, input, output);
    });
  }

  /**
   * `nrt_register_async_exec_callback(callback, params)`: replaces the previous callback; `undefined` (or `null`, the
   * C `NULL`) restores the default. A callback that is not a function → `NRT_INVALID`.
   */
  nrt_register_async_exec_callback(callback: NrtAsyncExecStatusCallback | undefined, params?: unknown): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      if (callback === undefined || callback === null) return rt.setAsyncListener(undefined);
      if (typeof callback !== "function") {
        throw new NrtError(NrtStatus.NRT_INVALID, "Cannot register the async callback: it is not a function");
      }
      rt.setAsyncListener((c) => callback(params, c.model, c.vnc, c.id, c.status));
    });
  }

  /** `nrt_async_drain_queued_execs(vnc)`: returns once every queued execution of the logical core completed. */
  async nrt_async_drain_queued_execs(vnc: number): Promise<NrtStatus> {
    return await status(() => this.#guard().drainAsync(vnc));
  }

  /**
   * `kmgr_async_exec_poll` for one logical core (the C name is ours: the seed names only the internal poll). Fills
   * `completion` with the oldest unharvested completion and returns `NRT_SUCCESS`; with nothing ready it returns
   * `NRT_QUEUE_EMPTY` (15) at once and leaves `completion` untouched (seed: runtime-synthesis §6, lifecycle-error-model
   * §5.1). `NRT_INVALID` in synchronous mode, for a logical core that is not visible, or for a `completion` that
   * cannot take a value (nothing is harvested then).
   */
  nrt_async_exec_poll(vnc: number, completion: Ref<NrtAsyncExecCompletion>): NrtStatus {
    try {
      const rt = this.#guard();
      checkRef(completion, "Cannot poll", "completion");
      const polled = rt.tryPoll(vnc);
      if (polled.status === NrtStatus.NRT_QUEUE_EMPTY) return polled.status;
      const c = polled.completion;
      completion.value = { model_id: c.model, vnc: c.vnc, job_id: c.id, status: c.status };
      return NrtStatus.NRT_SUCCESS;
    } catch (e) {
      return statusOfError(e);
    }
  }

  /** `nrt_get_total_nc_count(&count)`: physical NeuronCores of the device. */
  nrt_get_total_nc_count(count: Ref<number>): NrtStatus {
    return this.#count(count, (rt) => rt.totalNcCount);
  }

  /** `nrt_get_visible_nc_count(&count)`: physical NeuronCores visible to the process. */
  nrt_get_visible_nc_count(count: Ref<number>): NrtStatus {
    return this.#count(count, (rt) => rt.visibleNcCount);
  }

  /** `nrt_get_total_vnc_count(&count)`: logical NeuronCores of the device. */
  nrt_get_total_vnc_count(count: Ref<number>): NrtStatus {
    return this.#count(count, (rt) => rt.totalVncCount);
  }

  /** `nrt_get_visible_vnc_count(&count)`: logical NeuronCores visible to the process. */
  nrt_get_visible_vnc_count(count: Ref<number>): NrtStatus {
    return this.#count(count, (rt) => rt.visibleVncCount);
  }

  /** `nrt_get_vnc_memory_stats(vnc, &stats)`: `{bytes_used, bytes_limit}` of a logical core. */
  nrt_get_vnc_memory_stats(vnc: number, stats: Ref<NrtVncMemoryStats>): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      checkRef(stats, "Cannot read memory stats", "stats");
      const m = rt.memoryStats(vnc);
      stats.value = { bytes_used: m.bytesUsed, bytes_limit: m.bytesLimit };
    });
  }

  /** `nrta_tensor_write(tensor, buf, offset, size, queue, err, &seq)`. */
  nrta_tensor_write(
    tensor: Tensor,
    buf: Uint8Array,
    offset: number,
    size: number,
    queue: number,
    err: NrtaErrorTracker | null,
    seq: Ref<bigint>,
  ): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      const what = "Cannot schedule tensor write";
      checkTensor(tensor, what);
      checkBuffer(buf, what);
      checkTracker(err, what);
      checkRef(seq, what, "seq");
      if (!Number.isSafeInteger(size) || size < 0 || size > buf.byteLength) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Buffer of ${buf.byteLength} bytes cannot supply ${size}`);
      }
      seq.value = rt.nrta.tensorWrite(tensor, buf.subarray(0, size), offset, { queue, errors: err ?? undefined }).seq;
    });
  }

  /** `nrta_tensor_read(buf, tensor, offset, size, queue, err, &seq)`. */
  nrta_tensor_read(
    buf: Uint8Array,
    tensor: Tensor,
    offset: number,
    size: number,
    queue: number,
    err: NrtaErrorTracker | null,
    seq: Ref<bigint>,
  ): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      const what = "Cannot schedule tensor read";
      checkBuffer(buf, what);
      checkTensor(tensor, what);
      checkTracker(err, what);
      checkRef(seq, what, "seq");
      seq.value = rt.nrta.tensorRead(buf, tensor, offset, size, { queue, errors: err ?? undefined }).seq;
    });
  }

  /** `nrta_tensor_copy(src, src_offset, dst, dst_offset, size, queue, err, &seq)`. */
  nrta_tensor_copy(
    src: Tensor,
    srcOffset: number,
    dst: Tensor,
    dstOffset: number,
    size: number,
    queue: number,
    err: NrtaErrorTracker | null,
    seq: Ref<bigint>,
  ): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      const what = "Cannot schedule tensor copy";
      checkTensor(src, what);
      checkTensor(dst, what);
      checkTracker(err, what);
      checkRef(seq, what, "seq");
      seq.value = rt.nrta.tensorCopy(src, srcOffset, dst, dstOffset, size, { queue, errors: err ?? undefined }).seq;
    });
  }

  /** `nrta_execute_schedule(model, input, output, queue, err, &seq)`: queue must be 0. */
  nrta_execute_schedule(
    model: Model,
    input: TensorSet,
    output: TensorSet,
    queue: number,
    err: NrtaErrorTracker | null,
    seq: Ref<bigint>,
  ): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      const what = "Cannot schedule execution";
      checkExecArgs(model, input, output);
      checkTracker(err, what);
      checkRef(seq, what, "seq");
      seq.value =
        rt.nrta.executeSchedule(rt.prepareExecution(model, input, output), { queue, errors: err ?? undefined }).seq;
    });
  }

  /** `nrta_is_completed(seq, &done)`: `NRT_INVALID` for a sequence never scheduled. */
  nrta_is_completed(seq: bigint, done: Ref<boolean>): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      checkRef(done, "Cannot query completion", "done");
      done.value = rt.nrta.isCompleted(seq);
    });
  }

  /** `nrta_get_sequence(lnc, xu, queue, &seq)`: the last completed request of one queue. */
  nrta_get_sequence(lnc: number, xu: number, queue: number, seq: Ref<bigint>): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      checkRef(seq, "Cannot read the sequence", "seq");
      seq.value = rt.nrta.getSequence(lnc, xu, queue);
    });
  }

  /** `nrta_error_tracker_create(lnc, &tracker)`. */
  nrta_error_tracker_create(lnc: number, tracker: Ref<NrtaErrorTracker>): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      checkRef(tracker, "Cannot create an error tracker", "tracker");
      if (!Number.isInteger(lnc) || lnc < 0 || lnc >= rt.visibleVncCount) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Logical core ${lnc} is not visible`);
      }
      tracker.value = new NrtaErrorTracker(lnc);
    });
  }

  /** `nrta_error_tracker_destroy(tracker)`: nothing to free in a garbage-collected runtime (no status: it is `void`). */
  nrta_error_tracker_destroy(_tracker: NrtaErrorTracker): void {}

  /** `nrta_error_tracker_get_list(tracker, &list, &count)`. */
  nrta_error_tracker_get_list(
    tracker: NrtaErrorTracker,
    list: Ref<readonly NrtaError[]>,
    count: Ref<number>,
  ): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      const what = "Cannot list the tracked errors";
      if (!(tracker instanceof NrtaErrorTracker)) {
        throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the tracker is not an error tracker`);
      }
      checkRef(list, what, "list");
      checkRef(count, what, "count");
      const errors = tracker.list();
      list.value = errors;
      count.value = errors.length;
    });
  }

  #count(count: Ref<number>, f: (rt: Runtime) => number): NrtStatus {
    return this.#sync(() => {
      const rt = this.#guard();
      checkRef(count, "Cannot count NeuronCores", "count");
      count.value = f(rt);
    });
  }

  /** Runs a synchronous call and turns its outcome into a status. */
  #sync(f: () => unknown): NrtStatus {
    try {
      f();
      return NrtStatus.NRT_SUCCESS;
    } catch (e) {
      return statusOfError(e);
    }
  }

  /** `nrt_execute_repeat`: runs `repeat` times, stopping at the first failure. */
  async nrt_execute_repeat(model: Model, input: TensorSet, output: TensorSet, repeat: number): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkExecArgs(model, input, output);
      if (!Number.isInteger(repeat) || repeat < 1) {
        throw new NrtError(NrtStatus.NRT_INVALID, `repeat ${repeat} is not a positive integer`);
      }
      for (let i = 0; i < repeat; i++) await rt.execute(model, input, output);
    });
  }

  /** `nrt_tensor_allocate(placement, logical_nc_id, size, name, &tensor)`. */
  async nrt_tensor_allocate(
    placement: TensorPlacement,
    logicalNc: number,
    size: number,
    name: string,
    tensor: Ref<Tensor>,
  ): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkRef(tensor, `Cannot allocate tensor "${name}"`, "tensor");
      const location = tensorLocationOf(placement);
      if (location === undefined) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot allocate tensor "${name}": unknown placement ${String(placement)}`,
        );
      }
      tensor.value = await rt.allocateTensor({ location, vnc: logicalNc, size, name });
    });
  }

  /** `nrt_tensor_free(&tensor)`: frees and clears the reference; an empty reference is nothing to free. */
  async nrt_tensor_free(tensor: Ref<Tensor>): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkRef(tensor, "Cannot free tensor", "tensor");
      if (tensor.value !== undefined && tensor.value !== null) checkTensor(tensor.value, "Cannot free tensor");
      await tensor.value?.free();
      tensor.value = undefined;
    });
  }

  /** `nrt_tensor_read(tensor, buf, offset, size)`. */
  async nrt_tensor_read(tensor: Tensor, buf: Uint8Array, offset: number, size: number): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkTensor(tensor, "Cannot read tensor");
      checkBuffer(buf, "Cannot read tensor");
      if (!Number.isSafeInteger(size) || size < 0 || size > buf.byteLength) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Buffer of ${buf.byteLength} bytes cannot hold ${size}`);
      }
      await tensor.readInto(size === buf.byteLength ? buf : buf.subarray(0, size), offset);
    });
  }

  /** `nrt_tensor_write(tensor, buf, offset, size)`. */
  async nrt_tensor_write(tensor: Tensor, buf: Uint8Array, offset: number, size: number): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkTensor(tensor, "Cannot write tensor");
      checkBuffer(buf, "Cannot write tensor");
      if (!Number.isSafeInteger(size) || size < 0 || size > buf.byteLength) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Buffer of ${buf.byteLength} bytes cannot supply ${size}`);
      }
      await tensor.write(buf.subarray(0, size), offset);
    });
  }

  /** `nrt_tensor_copy(src, src_offset, dst, dst_offset, size)`. */
  async nrt_tensor_copy(
    src: Tensor,
    srcOffset: number,
    dst: Tensor,
    dstOffset: number,
    size: number,
  ): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkTensor(src, "Cannot copy tensor");
      checkTensor(dst, "Cannot copy tensor");
      await dst.copyFrom(src, srcOffset, dstOffset, size);
    });
  }

  /** `nrt_tensor_memset(tensor, offset, value, size)`. */
  async nrt_tensor_memset(tensor: Tensor, offset: number, value: number, size: number): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkTensor(tensor, "Cannot memset tensor");
      await tensor.memset(value, offset, size);
    });
  }

  /**
   * `nrt_tensor_get_size`: a `size_t`, not a status (ours: 0 for anything that is not a tensor, and before init or
   * after close, where the guard has no status to return).
   */
  nrt_tensor_get_size(tensor: Tensor): number {
    if (this.#state !== NrtInitState.NRT_STATE_INIT || this.#rt === undefined) return 0;
    return tensor instanceof Tensor ? tensor.size : 0;
  }

  /** `nrt_tensor_allocate_slice(source, offset, size, name, &slice)`. */
  async nrt_tensor_allocate_slice(
    source: Tensor,
    offset: number,
    size: number,
    name: string,
    slice: Ref<Tensor>,
  ): Promise<NrtStatus> {
    return await status(() => {
      this.#guard();
      checkTensor(source, "Cannot slice tensor");
      checkRef(slice, "Cannot slice tensor", "slice");
      slice.value = source.slice(offset, size, name);
    });
  }

  /** `nrt_tensor_attach_buffer(tensor, buffer, size)`: a VIRTUAL tensor gets its host buffer. */
  async nrt_tensor_attach_buffer(tensor: Tensor, buffer: Uint8Array, size: number): Promise<NrtStatus> {
    return await status(() => {
      this.#guard();
      checkTensor(tensor, "Cannot attach buffer");
      checkBuffer(buffer, "Cannot attach buffer");
      if (!Number.isSafeInteger(size) || size < 0 || size > buffer.byteLength) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Buffer of ${buffer.byteLength} bytes cannot supply ${size}`);
      }
      tensor.attachBuffer(buffer);
    });
  }

  /** `nrt_allocate_tensor_set(&set)`. */
  nrt_allocate_tensor_set(set: Ref<TensorSet>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      checkRef(set, "Cannot allocate tensor set", "set");
      set.value = new TensorSet();
    });
  }

  /**
   * `nrt_destroy_tensor_set(&set)`: clears the reference; the tensors stay owned by the caller. It is `void`: before
   * init, after close, or for a reference that cannot take a value it does nothing.
   */
  nrt_destroy_tensor_set(set: Ref<TensorSet>): void {
    if (this.#state !== NrtInitState.NRT_STATE_INIT || this.#rt === undefined || !isRef(set)) return;
    set.value = undefined;
  }

  /** `nrt_add_tensor_to_tensor_set(set, name, tensor)`: an empty or non-string name → `NRT_INVALID`. */
  nrt_add_tensor_to_tensor_set(set: TensorSet, name: string, tensor: Tensor): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      const what = "Cannot add to tensor set";
      checkTensorSet(set, what);
      if (typeof name !== "string" || name === "") {
        throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the name is not a non-empty string`);
      }
      checkTensor(tensor, what);
      set.add(name, tensor);
    });
  }

  /** `nrt_get_tensor_from_tensor_set(set, name, &tensor)`: `NRT_INVALID` for a name the set does not hold. */
  nrt_get_tensor_from_tensor_set(set: TensorSet, name: string, tensor: Ref<Tensor>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      const what = "Cannot get from tensor set";
      checkTensorSet(set, what);
      checkRef(tensor, what, "tensor");
      if (typeof name !== "string" || !set.has(name)) {
        throw new NrtError(NrtStatus.NRT_INVALID, `${what}: it holds no tensor named ${JSON.stringify(name)}`);
      }
      tensor.value = set.get(name);
    });
  }

  /** `nrt_get_model_tensor_info(model, &info)`. */
  nrt_get_model_tensor_info(model: Model, info: Ref<NrtTensorInfoArray>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      checkModel(model, "Cannot read tensor info");
      checkRef(info, "Cannot read tensor info", "info");
      const arr: NrtTensorInfo[] = [
        ...model.inputs.map((t) => ({
          name: t.name,
          usage: NrtTensorUsage.NRT_TENSOR_USAGE_INPUT,
          size: t.size,
          dtype: t.dtype,
          shape: t.shape,
        })),
        ...model.outputs.map((t) => ({
          name: t.name,
          usage: NrtTensorUsage.NRT_TENSOR_USAGE_OUTPUT,
          size: t.size,
          dtype: t.dtype,
          shape: t.shape,
        })),
      ];
      info.value = { tensor_count: arr.length, tensor_array: arr };
    });
  }

  /** `nrt_free_model_tensor_info(&info)`. */
  nrt_free_model_tensor_info(info: Ref<NrtTensorInfoArray>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      checkRef(info, "Cannot free tensor info", "info");
      info.value = undefined;
    });
  }

  /** `nrt_get_version(&ver)`: the version of this runtime (0.1.0), not libnrt's. */
  nrt_get_version(ver: Ref<NrtVersion>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      checkRef(ver, "Cannot read the version", "ver");
      ver.value = {
        rt_major: 0,
        rt_minor: 1,
        rt_patch: 0,
        rt_maintenance: 0,
        rt_detail: "nrt (TypeScript) 0.1.0",
        git_hash: "",
      };
    });
  }

  /**
   * `nrt_load_collectives(neff, size, start_nc, nc_count, g_device_id, g_device_count, &model)` (seed:
   * lifecycle-error-model §2.1): `nrt_load` between the global-comm check and the replica-group check; a bad comm or
   * bad groups → `NRT_INVALID`. `replicaGroups` (ours: a trailing argument; default one group of every logical core).
   */
  async nrt_load_collectives(
    neff: Uint8Array,
    startNc: number,
    ncCount: number,
    gDeviceId: number,
    gDeviceCount: number,
    model: Ref<Model>,
    replicaGroups?: readonly (readonly number[])[],
  ): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      checkRef(model, "Cannot load NEFF", "model");
      checkLoadArgs(neff, ncCount);
      model.value = await rt.loadCollectives(neff, {
        vnc: startNc < 0 ? 0 : startNc,
        globalDeviceId: gDeviceId,
        globalDeviceCount: gDeviceCount,
        replicaGroups,
      });
    });
  }

  /**
   * `nrta_cc_prepare(op, redop, dtype, count, inputs, outputs, &cc)` (ours: the argument list; `NrtaCcOp`,
   * `NrtaCcRedOp`, `NrtaCcDtype`): one input and output tensor per rank.
   */
  async nrta_cc_prepare(
    op: number,
    redop: number,
    dtype: number,
    count: number,
    inputs: readonly Tensor[],
    outputs: readonly Tensor[],
    cc: Ref<Collective>,
  ): Promise<NrtStatus> {
    return await status(async () => {
      const rt = this.#guard();
      const what = "Cannot prepare collective";
      checkRef(cc, what, "cc");
      for (const ts of [inputs, outputs]) {
        if (!Array.isArray(ts)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the tensors are not an array`);
        for (const t of ts) checkTensor(t, what);
      }
      const opName = (["all-reduce", "all-gather", "reduce-scatter"] as const)[op];
      const red = (["sum", "max"] as const)[redop], type = (["float32", "bfloat16"] as const)[dtype];
      if (opName === undefined || red === undefined || type === undefined) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `${what}: op ${op}, redop ${redop} or dtype ${dtype} is unknown`,
        );
      }
      cc.value = await rt.collectives.prepare({ op: opName, reduce: red, dtype: type, count, inputs, outputs });
    });
  }

  /** `nrta_cc_schedule(cc, queue, err, &seq)`: on the COLLECTIVES unit (queue 0) of the collective's rank 0. */
  nrta_cc_schedule(cc: Collective, queue: number, err: NrtaErrorTracker | null, seq: Ref<bigint>): NrtStatus {
    return this.#sync(() => {
      this.#guard();
      const what = "Cannot schedule collective";
      checkCollective(cc, what);
      checkTracker(err, what);
      checkRef(seq, what, "seq");
      seq.value = cc.schedule({ queue, errors: err ?? undefined }).seq;
    });
  }

  /** `nrta_cc_release(cc)` (ours): `NRT_COLL_PENDING` (1100) while a scheduled run is pending. */
  async nrta_cc_release(cc: Collective): Promise<NrtStatus> {
    return await status(async () => {
      this.#guard();
      checkCollective(cc, "Cannot release collective");
      await cc.release();
    });
  }
}

/** The process's default facade instance, behind the module-level `nrt_*` functions. */
export const nrt: NrtApi = new NrtApi();

/** `nrt_set_pool_eng_ucode` on the default instance. */
export function nrt_set_pool_eng_ucode(info: NrtUcodeInfo): NrtStatus {
  return nrt.nrt_set_pool_eng_ucode(info);
}
/** `nrt_init` on the default instance. */
export function nrt_init(options: NrtInitOptions): Promise<NrtStatus> {
  return nrt.nrt_init(options);
}
/** `nrt_close` on the default instance. */
export function nrt_close(): Promise<NrtStatus> {
  return nrt.nrt_close();
}
/** `nrt_load` on the default instance. */
export function nrt_load(
  neff: Uint8Array,
  startNc: number,
  ncCount: number,
  model: Ref<Model>,
  metaneff?: MetaNeff,
  checkpoint?: ReadonlyMap<string, Uint8Array>,
): Promise<NrtStatus> {
  return nrt.nrt_load(neff, startNc, ncCount, model, metaneff, checkpoint);
}
/** `nrt_unload` on the default instance. */
export function nrt_unload(model: Model): Promise<NrtStatus> {
  return nrt.nrt_unload(model);
}
/** `nrt_execute` on the default instance. */
export function nrt_execute(model: Model, input: TensorSet, output: TensorSet): Promise<NrtStatus> {
  return nrt.nrt_execute(model, input, output);
}
/** `nrt_execute_repeat` on the default instance. */
export function nrt_execute_repeat(
  model: Model,
  input: TensorSet,
  output: TensorSet,
  repeat: number,
): Promise<NrtStatus> {
  return nrt.nrt_execute_repeat(model, input, output, repeat);
}
/** `nrt_tensor_allocate` on the default instance. */
export function nrt_tensor_allocate(
  placement: TensorPlacement,
  logicalNc: number,
  size: number,
  name: string,
  tensor: Ref<Tensor>,
): Promise<NrtStatus> {
  return nrt.nrt_tensor_allocate(placement, logicalNc, size, name, tensor);
}
/** `nrt_tensor_free` on the default instance. */
export function nrt_tensor_free(tensor: Ref<Tensor>): Promise<NrtStatus> {
  return nrt.nrt_tensor_free(tensor);
}
/** `nrt_tensor_read` on the default instance. */
export function nrt_tensor_read(tensor: Tensor, buf: Uint8Array, offset: number, size: number): Promise<NrtStatus> {
  return nrt.nrt_tensor_read(tensor, buf, offset, size);
}
/** `nrt_tensor_write` on the default instance. */
export function nrt_tensor_write(tensor: Tensor, buf: Uint8Array, offset: number, size: number): Promise<NrtStatus> {
  return nrt.nrt_tensor_write(tensor, buf, offset, size);
}
/** `nrt_allocate_tensor_set` on the default instance. */
export function nrt_allocate_tensor_set(set: Ref<TensorSet>): NrtStatus {
  return nrt.nrt_allocate_tensor_set(set);
}
/** `nrt_add_tensor_to_tensor_set` on the default instance. */
export function nrt_add_tensor_to_tensor_set(set: TensorSet, name: string, tensor: Tensor): NrtStatus {
  return nrt.nrt_add_tensor_to_tensor_set(set, name, tensor);
}
/** `nrt_get_tensor_from_tensor_set` on the default instance. */
export function nrt_get_tensor_from_tensor_set(set: TensorSet, name: string, tensor: Ref<Tensor>): NrtStatus {
  return nrt.nrt_get_tensor_from_tensor_set(set, name, tensor);
}
/** `nrt_get_model_tensor_info` on the default instance. */
export function nrt_get_model_tensor_info(model: Model, info: Ref<NrtTensorInfoArray>): NrtStatus {
  return nrt.nrt_get_model_tensor_info(model, info);
}
/** `nrt_get_version` on the default instance. */
export function nrt_get_version(ver: Ref<NrtVersion>): NrtStatus {
  return nrt.nrt_get_version(ver);
}

/** `nrt_register_async_exec_callback` on the default instance. */
export function nrt_register_async_exec_callback(
  callback: NrtAsyncExecStatusCallback | undefined,
  params?: unknown,
): NrtStatus {
  return nrt.nrt_register_async_exec_callback(callback, params);
}

/** `nrt_async_drain_queued_execs` on the default instance. */
export function nrt_async_drain_queued_execs(vnc: number): Promise<NrtStatus> {
  return nrt.nrt_async_drain_queued_execs(vnc);
}

/** `nrt_async_exec_poll` on the default instance. */
export function nrt_async_exec_poll(vnc: number, completion: Ref<NrtAsyncExecCompletion>): NrtStatus {
  return nrt.nrt_async_exec_poll(vnc, completion);
}

/** `nrt_get_total_nc_count` on the default instance. */
export function nrt_get_total_nc_count(count: Ref<number>): NrtStatus {
  return nrt.nrt_get_total_nc_count(count);
}

/** `nrt_get_visible_nc_count` on the default instance. */
export function nrt_get_visible_nc_count(count: Ref<number>): NrtStatus {
  return nrt.nrt_get_visible_nc_count(count);
}

/** `nrt_get_total_vnc_count` on the default instance. */
export function nrt_get_total_vnc_count(count: Ref<number>): NrtStatus {
  return nrt.nrt_get_total_vnc_count(count);
}

/** `nrt_get_visible_vnc_count` on the default instance. */
export function nrt_get_visible_vnc_count(count: Ref<number>): NrtStatus {
  return nrt.nrt_get_visible_vnc_count(count);
}

/** `nrt_get_vnc_memory_stats` on the default instance. */
export function nrt_get_vnc_memory_stats(vnc: number, stats: Ref<NrtVncMemoryStats>): NrtStatus {
  return nrt.nrt_get_vnc_memory_stats(vnc, stats);
}

/** `nrta_tensor_write` on the default instance. */
export function nrta_tensor_write(
  tensor: Tensor,
  buf: Uint8Array,
  offset: number,
  size: number,
  queue: number,
  err: NrtaErrorTracker | null,
  seq: Ref<bigint>,
): NrtStatus {
  return nrt.nrta_tensor_write(tensor, buf, offset, size, queue, err, seq);
}

/** `nrta_tensor_read` on the default instance. */
export function nrta_tensor_read(
  buf: Uint8Array,
  tensor: Tensor,
  offset: number,
  size: number,
  queue: number,
  err: NrtaErrorTracker | null,
  seq: Ref<bigint>,
): NrtStatus {
  return nrt.nrta_tensor_read(buf, tensor, offset, size, queue, err, seq);
}

/** `nrta_tensor_copy` on the default instance. */
export function nrta_tensor_copy(
  src: Tensor,
  srcOffset: number,
  dst: Tensor,
  dstOffset: number,
  size: number,
  queue: number,
  err: NrtaErrorTracker | null,
  seq: Ref<bigint>,
): NrtStatus {
  return nrt.nrta_tensor_copy(src, srcOffset, dst, dstOffset, size, queue, err, seq);
}

/** `nrta_execute_schedule` on the default instance. */
export function nrta_execute_schedule(
  model: Model,
  input: TensorSet,
  output: TensorSet,
  queue: number,
  err: NrtaErrorTracker | null,
  seq: Ref<bigint>,
): NrtStatus {
  return nrt.nrta_execute_schedule(model, input, output, queue, err, seq);
}

/** `nrta_is_completed` on the default instance. */
export function nrta_is_completed(seq: bigint, done: Ref<boolean>): NrtStatus {
  return nrt.nrta_is_completed(seq, done);
}

/** `nrta_get_sequence` on the default instance. */
export function nrta_get_sequence(lnc: number, xu: number, queue: number, seq: Ref<bigint>): NrtStatus {
  return nrt.nrta_get_sequence(lnc, xu, queue, seq);
}

/** `nrta_error_tracker_create` on the default instance. */
export function nrta_error_tracker_create(lnc: number, tracker: Ref<NrtaErrorTracker>): NrtStatus {
  return nrt.nrta_error_tracker_create(lnc, tracker);
}

/** `nrta_error_tracker_destroy` on the default instance. */
export function nrta_error_tracker_destroy(_tracker: NrtaErrorTracker): void {
  return nrt.nrta_error_tracker_destroy(_tracker);
}

/** `nrta_error_tracker_get_list` on the default instance. */
export function nrta_error_tracker_get_list(
  tracker: NrtaErrorTracker,
  list: Ref<readonly NrtaError[]>,
  count: Ref<number>,
): NrtStatus {
  return nrt.nrta_error_tracker_get_list(tracker, list, count);
}

/** `nrt_tensor_copy` on the default instance. */
export function nrt_tensor_copy(
  src: Tensor,
  srcOffset: number,
  dst: Tensor,
  dstOffset: number,
  size: number,
): Promise<NrtStatus> {
  return nrt.nrt_tensor_copy(src, srcOffset, dst, dstOffset, size);
}

/** `nrt_tensor_memset` on the default instance. */
export function nrt_tensor_memset(tensor: Tensor, offset: number, value: number, size: number): Promise<NrtStatus> {
  return nrt.nrt_tensor_memset(tensor, offset, value, size);
}

/** `nrt_tensor_get_size` on the default instance. */
export function nrt_tensor_get_size(tensor: Tensor): number {
  return nrt.nrt_tensor_get_size(tensor);
}

/** `nrt_tensor_allocate_slice` on the default instance. */
export function nrt_tensor_allocate_slice(
  source: Tensor,
  offset: number,
  size: number,
  name: string,
  slice: Ref<Tensor>,
): Promise<NrtStatus> {
  return nrt.nrt_tensor_allocate_slice(source, offset, size, name, slice);
}

/** `nrt_tensor_attach_buffer` on the default instance. */
export function nrt_tensor_attach_buffer(tensor: Tensor, buffer: Uint8Array, size: number): Promise<NrtStatus> {
  return nrt.nrt_tensor_attach_buffer(tensor, buffer, size);
}

/** `nrt_destroy_tensor_set` on the default instance. */
export function nrt_destroy_tensor_set(set: Ref<TensorSet>): void {
  return nrt.nrt_destroy_tensor_set(set);
}

/** `nrt_free_model_tensor_info` on the default instance. */
export function nrt_free_model_tensor_info(info: Ref<NrtTensorInfoArray>): NrtStatus {
  return nrt.nrt_free_model_tensor_info(info);
}

/** `nrt_load_collectives` on the default instance. */
export function nrt_load_collectives(
  neff: Uint8Array,
  startNc: number,
  ncCount: number,
  gDeviceId: number,
  gDeviceCount: number,
  model: Ref<Model>,
  replicaGroups?: readonly (readonly number[])[],
): Promise<NrtStatus> {
  return nrt.nrt_load_collectives(neff, startNc, ncCount, gDeviceId, gDeviceCount, model, replicaGroups);
}

/** `nrta_cc_prepare` on the default instance. */
export function nrta_cc_prepare(
  op: number,
  redop: number,
  dtype: number,
  count: number,
  inputs: readonly Tensor[],
  outputs: readonly Tensor[],
  cc: Ref<Collective>,
): Promise<NrtStatus> {
  return nrt.nrta_cc_prepare(op, redop, dtype, count, inputs, outputs, cc);
}

/** `nrta_cc_schedule` on the default instance. */
export function nrta_cc_schedule(
  cc: Collective,
  queue: number,
  err: NrtaErrorTracker | null,
  seq: Ref<bigint>,
): NrtStatus {
  return nrt.nrta_cc_schedule(cc, queue, err, seq);
}

/** `nrta_cc_release` on the default instance. */
export function nrta_cc_release(cc: Collective): Promise<NrtStatus> {
  return nrt.nrta_cc_release(cc);
}

/**
 * The argument checks `nrt_load` and `nrt_load_collectives` share: the NEFF must be bytes, and `nc_count` 1 or -1
 * (a model spans one logical core here).
 */
function checkLoadArgs(neff: unknown, ncCount: number): void {
  if (!(neff instanceof Uint8Array)) {
    throw new NrtError(NrtStatus.NRT_INVALID, "Cannot load NEFF: the buffer is not bytes");
  }
  if (ncCount !== -1 && ncCount !== 1) {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot load NEFF: nc_count ${ncCount} is not supported (use 1 or -1)`);
  }
}

/** Whether `x` can take a result: an object whose `value` can be written. */
function isRef(x: unknown): x is Ref<unknown> {
  if (typeof x !== "object" || x === null) return false;
  const d = Object.getOwnPropertyDescriptor(x, "value");
  return d === undefined ? Object.isExtensible(x) : d.writable === true || d.set !== undefined;
}

/** Refuses an out-parameter that cannot take a result (`NRT_INVALID`), before the call does anything. */
function checkRef(x: unknown, what: string, name: string): void {
  if (!isRef(x)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the out-parameter ${name} cannot take a value`);
}

/** Refuses a model handle that is not a `Model` (`NRT_INVALID`). */
function checkModel(x: unknown, what: string): void {
  if (!(x instanceof Model)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the model is not a model handle`);
}

/** Refuses a tensor handle that is not a `Tensor` (`NRT_INVALID`). */
function checkTensor(x: unknown, what: string): void {
  if (!(x instanceof Tensor)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the tensor is not a tensor handle`);
}

/** Refuses a tensor set that is not a `TensorSet` (`NRT_INVALID`). */
function checkTensorSet(x: unknown, what: string): void {
  if (!(x instanceof TensorSet)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the tensor set is not one`);
}

/** Refuses a host buffer that is not a `Uint8Array` (`NRT_INVALID`). */
function checkBuffer(x: unknown, what: string): void {
  if (!(x instanceof Uint8Array)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the buffer is not bytes`);
}

/** Refuses an error tracker that is neither absent (`null`) nor an `NrtaErrorTracker` (`NRT_INVALID`). */
function checkTracker(x: unknown, what: string): void {
  if (x !== null && x !== undefined && !(x instanceof NrtaErrorTracker)) {
    throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the error tracker is not one`);
  }
}

/** Refuses a collective handle that is not a `Collective` (`NRT_INVALID`). */
function checkCollective(x: unknown, what: string): void {
  if (!(x instanceof Collective)) throw new NrtError(NrtStatus.NRT_INVALID, `${what}: the collective is not one`);
}

/** The handles `nrt_execute`, `nrt_execute_repeat` and `nrta_execute_schedule` take. */
function checkExecArgs(model: unknown, input: unknown, output: unknown): void {
  checkModel(model, "Cannot execute");
  checkTensorSet(input, "Cannot execute");
  checkTensorSet(output, "Cannot execute");
}
