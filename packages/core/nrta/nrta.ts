/**
 * The NRT_3.0.0 explicit-async surface (`nrta_*`): execution units (XUs) per logical core, each with its own FIFO
 * queues, that run tensor writes, reads, copies and model executions in the background and hand out sequence ids.
 * Work on different queues overlaps — a host → device write on the TENSOR_WRITE queue runs while the COMPUTE queue
 * waits for the device — and work on one queue completes in order.
 *
 * Seed: runtime-synthesis §6 (the 8 NRT_3.0.0 exports: `nrta_execute_schedule`, `nrta_tensor_write/read/copy`,
 * `nrta_is_completed`, `nrta_get_sequence`, `nrta_cc_prepare/schedule`; layered on the same worker pool, distinct
 * from the NRT_2.0.0 implicit-async mode). Names and values as public `nrt_async.h` has them: `nrta_xu_t` (TENSOR_READ
 * 0, TENSOR_WRITE 1, TENSOR_OP 2, COMPUTE 3, COLLECTIVES 4), `nrta_seq_t` (top 16 bits the XU id, low 48 bits a
 * strictly ordered sequence number), `nrta_error_t {seq_id, error_code}`.
 *
 * Our choices, documented in `docs/multi-model.md`: queues per logical core — COMPUTE 1, TENSOR_READ / TENSOR_WRITE /
 * TENSOR_OP 2 each, COLLECTIVES 1 (`nrta_cc_schedule`, `collectives/collectives.ts`, `docs/collectives.md`); sequence
 * numbers count per XU type across cores and queues, starting at 1, so a `nrta_seq_t` alone names a request; each
 * queue holds at most {@linkcode NRTA_QUEUE_CAPACITY} unfinished requests (`NRT_QUEUE_FULL` beyond); a request may
 * name requests it runs `after` (the idiomatic API's way to chain write → execute → read without a host round trip)
 * and fails with the first failed dependency's status.
 *
 * Close drains, then closes. `nrt_close` stops the async worker the way `kmgr_unload_nn` does — signal it to stop,
 * wait out the drain of the work posted to it, then tear down (seed: lifecycle-error-model §3.2,
 * `kmgr_async_exec_model_stop` → `kmgr_async_exec_poll` before `kmgr_unstage_kelf_model`; the `nrta_*` family runs
 * on that worker pool, runtime-synthesis §6) — and only calls made after `nrt_close` get `NRT_CLOSED` (14)
 * (lifecycle-error-model §1.1). {@linkcode Nrta.close} is that stop: from then on every schedule call is refused with
 * 14, and it resolves once every request scheduled before it has run, writes, reads, copies and executions alike,
 * each queue in its order. The host calls it before its state becomes `NRT_STATE_CLOSED`, while the requests can
 * still reach their tensors through the host's state guard.
 *
 * Ours, for a host that closes without {@linkcode Nrta.close} first: a request whose turn comes when the host's state
 * guard refuses (14 after close) does not start. It fails with the guard's status, whatever its kind, and an
 * execution drops its model reference unrun; so every request of a queue after the first one refused is refused the
 * same way, and a request already running finishes. Either way every `done` settles, and nothing a request held is
 * left behind.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { bytesOf, describeValue, type Tensor } from "../tensor.ts";

/** `nrta_xu_t`: the execution units. */
export const NrtaXu = {
  NRTA_XU_TENSOR_READ: 0,
  NRTA_XU_TENSOR_WRITE: 1,
  NRTA_XU_TENSOR_OP: 2,
  NRTA_XU_COMPUTE: 3,
  NRTA_XU_COLLECTIVES: 4,
  NRTA_XU_TYPE_NUM: 5,
} as const;
/** One `nrta_xu_t` value. */
export type NrtaXu = typeof NrtaXu[keyof typeof NrtaXu];

/** `NRTA_SEQ_NUM_MAX`: the largest sequence number, 2^48 − 1. */
export const NRTA_SEQ_NUM_MAX: bigint = (1n << 48n) - 1n;

/** Queues per execution unit and logical core, indexed by `nrta_xu_t`. */
export const NRTA_QUEUES_PER_XU: readonly number[] = Object.freeze([2, 2, 2, 1, 1]);

/** Unfinished requests one queue holds before `NRT_QUEUE_FULL`. */
export const NRTA_QUEUE_CAPACITY = 1024;

/** `nrta_seq_t` of XU `xu` and sequence number `num`. */
export function nrtaSeq(xu: number, num: bigint): bigint {
  return (BigInt(xu) << 48n) | (num & NRTA_SEQ_NUM_MAX);
}

/** `NRTA_SEQ_GET_XU_ID`. */
export function nrtaSeqXu(seq: bigint): number {
  return Number(seq >> 48n);
}

/** `NRTA_SEQ_GET_SEQ_NUM`. */
export function nrtaSeqNum(seq: bigint): bigint {
  return seq & NRTA_SEQ_NUM_MAX;
}

/** `nrta_error_t`. */
export interface NrtaError {
  /** The failed request. */
  readonly seq_id: bigint;
  /** Its `NRT_STATUS`. */
  readonly error_code: number;
}

/** `nrta_error_tracker_t`: the failures of the requests that named it, in completion order. */
export class NrtaErrorTracker {
  /** Logical core the tracker was created for. */
  readonly lnc: number;
  readonly #errors: NrtaError[] = [];

  /** An empty tracker for logical core `lnc` (`nrta_error_tracker_create`). */
  constructor(lnc: number) {
    this.lnc = lnc;
  }

  /** `nrta_error_tracker_get_list`: the errors so far (a copy). */
  list(): NrtaError[] {
    return [...this.#errors];
  }

  /** Records one failure. */
  add(error: NrtaError): void {
    this.#errors.push(error);
  }
}

/** One scheduled request. */
export interface NrtaRequest {
  /** Its `nrta_seq_t`. */
  readonly seq: bigint;
  /** Settles when the request completed: resolves on success, rejects with its `NrtError`. */
  readonly done: Promise<void>;
}

/**
 * What every schedule call returns (not exported: `after` takes only requests a scheduler made, so a waiting request
 * cannot hang on an object that never settles, holding its model's reference and every unload behind it; ours).
 */
class ScheduledRequest implements NrtaRequest {
  constructor(readonly seq: bigint, readonly done: Promise<void>) {}
}

/** Options of every schedule call. */
export interface NrtaScheduleOptions {
  /** XU queue (default 0). */
  readonly queue?: number;
  /** Error tracker the request reports a failure to. */
  readonly errors?: NrtaErrorTracker;
  /**
   * Requests (on any queue, of any runtime's scheduler) that must complete first: only objects a schedule call
   * returned, anything else is refused with `NRT_INVALID`.
   */
  readonly after?: readonly NrtaRequest[];
}

/** A model execution with its model reference already taken, as the runtime prepares it for a queue. */
export interface PreparedExecution {
  /** Logical core of the model. */
  readonly vnc: number;
  /**
   * The runtime that prepared it: only that runtime's scheduler takes it ({@linkcode NrtaHost.owner}; another's is
   * refused with `NRT_INVALID` and left as it was).
   */
  readonly owner?: object;
  /** Runs the execution (and drops the reference). */
  run(): Promise<void>;
  /** Drops the reference without running. */
  cancel(): void;
}

/** What the scheduler needs from the runtime. */
export interface NrtaHost {
  /** Visible logical cores. */
  readonly vncCount: number;
  /** The state guard (13 before init, 14 after close). */
  guard(): void;
  /** Logical core a tensor was allocated on. */
  vncOf(tensor: Tensor): number;
  /** The runtime whose executions the scheduler takes: a prepared execution's `owner` must be it. */
  readonly owner?: object;
}

interface Queue {
  readonly xu: NrtaXu;
  tail: Promise<void>;
  pending: number;
  last: bigint;
  /**
   * The sequence numbers of the queue's requests not completed yet, from `head` on, in order: a queue completes its
   * requests in the order they were scheduled. Not a set of the execution unit's pending numbers: one added and
   * deleted per request churned its storage (see `#unsettled`).
   */
  readonly nums: bigint[];
  head: number;
}

/** Whether `q` holds `num` among its requests not completed (a binary search: its numbers only grow). */
/** `buf`'s bytes, or `NRT_INVALID` for something that holds none (ours). */
function bytesIn(buf: unknown, action: string): Uint8Array {
  const bytes = bytesOf(buf);
  if (bytes === undefined) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `${action}: the buffer must be an ArrayBuffer or an ArrayBufferView, got ${describeValue(buf)}`,
    );
  }
  return bytes;
}

/**
 * `NRT_INVALID` unless `options` is an object whose `after` lists requests a scheduler made and whose `errors` is a
 * tracker (ours).
 */
function checkOptions(options: unknown): asserts options is NrtaScheduleOptions {
  const bad = (why: string): never => {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot schedule a request: ${why}`);
  };
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    bad(`the options must be an object, got ${describeValue(options)}`);
  }
  const { after, errors } = options as NrtaScheduleOptions;
  if (after !== undefined) {
    if (!Array.isArray(after)) bad(`after must be an array of requests, got ${describeValue(after)}`);
    for (const r of after) {
      if (!(r instanceof ScheduledRequest)) {
        bad(`after holds ${describeValue(r)}, not a request a schedule call returned`);
      }
    }
  }
  if (errors !== undefined && !(errors instanceof NrtaErrorTracker)) {
    bad(`errors must be an NrtaErrorTracker, got ${describeValue(errors)}`);
  }
}

function queueHolds(q: Queue, num: bigint): boolean {
  let lo = q.head, hi = q.nums.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1, v = q.nums[mid];
    if (v === num) return true;
    if (v < num) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/**
 * The `nrta_*` scheduler of one runtime.
 *
 * @example Write, execute and read in one chain
 * ```ts ignore
 * const w = rt.nrta.tensorWrite(input, bytes);
 * const x = rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs), { after: [w] });
 * const r = rt.nrta.tensorRead(out, output, 0, out.byteLength, { after: [x] });
 * await r.done;
 * ```
 */
export class Nrta {
  readonly #host: NrtaHost;
  readonly #queues = new Map<string, Queue>();
  readonly #issued: bigint[] = new Array(NrtaXu.NRTA_XU_TYPE_NUM).fill(0n);
  /**
   * Requests scheduled and not settled, and what `drain` waits on. A count, not a set of the requests' promises: a
   * set with one added and deleted per request made JavaScriptCore rebuild its storage every few requests, and each
   * dropped storage, with the promises it held, survived eden collections until a full one (ours; 1.7 cells per
   * request on Bun).
   */
  #unsettled = 0;
  #drained: PromiseWithResolvers<void> | undefined;
  /** Set by {@linkcode Nrta.close}: schedule calls are refused with `NRT_CLOSED`. */
  #closed = false;

  /** A scheduler over `host`. */
  constructor(host: NrtaHost) {
    this.#host = host;
  }

  /** `nrta_tensor_write`: host `buf` → `tensor` at `offset`, on the TENSOR_WRITE unit of the tensor's core. */
  tensorWrite(
    tensor: Tensor,
    buf: ArrayBufferView | ArrayBuffer,
    offset = 0,
    options: NrtaScheduleOptions = {},
  ): NrtaRequest {
    this.#host.guard();
    bytesIn(buf, "Cannot schedule a tensor write");
    // Like the C call, the buffer must stay untouched until the request completes.
    return this.#schedule(
      NrtaXu.NRTA_XU_TENSOR_WRITE,
      this.#host.vncOf(tensor),
      options,
      () => tensor.write(buf, offset),
    );
  }

  /** `nrta_tensor_read`: `size` bytes of `tensor` at `offset` → host `buf`, on the TENSOR_READ unit. */
  tensorRead(
    buf: ArrayBufferView | ArrayBuffer,
    tensor: Tensor,
    offset = 0,
    size?: number,
    options: NrtaScheduleOptions = {},
  ): NrtaRequest {
    this.#host.guard();
    const bytes = bytesIn(buf, "Cannot schedule a tensor read");
    size ??= bytes.byteLength;
    if (!Number.isSafeInteger(size) || size < 0 || size > bytes.byteLength) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot read ${describeValue(size)} bytes into a buffer of ${bytes.byteLength}`,
      );
    }
    const into = size === bytes.byteLength ? bytes : bytes.subarray(0, size);
    return this.#schedule(
      NrtaXu.NRTA_XU_TENSOR_READ,
      this.#host.vncOf(tensor),
      options,
      () => tensor.readInto(into, offset),
    );
  }

  /** `nrta_tensor_copy`: tensor → tensor on the same logical core, on the TENSOR_OP unit. */
  tensorCopy(
    src: Tensor,
    srcOffset: number,
    dst: Tensor,
    dstOffset: number,
    size: number,
    options: NrtaScheduleOptions = {},
  ): NrtaRequest {
    this.#host.guard();
    const vnc = this.#host.vncOf(src);
    if (this.#host.vncOf(dst) !== vnc) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot copy "${src.name}" to "${dst.name}": the tensors are on logical cores ${vnc} and ${
          this.#host.vncOf(dst)
        }`,
      );
    }
    return this.#schedule(NrtaXu.NRTA_XU_TENSOR_OP, vnc, options, () => dst.copyFrom(src, srcOffset, dstOffset, size));
  }

  /**
   * `nrta_execute_schedule`: runs a prepared execution on the COMPUTE unit of its model's core. The scheduler owns
   * the execution from the call on: refused (a closed runtime, a full queue, bad options), it is cancelled, so its
   * model reference is dropped. Not one its runtime prepared — another runtime's, or a look-alike — is refused with
   * `NRT_INVALID` (2) before the queue and options checks, and left untouched: its own runtime may still run or
   * cancel it, and its unload waits for that (ours: the seeds have one runtime per process).
   */
  executeSchedule(execution: PreparedExecution, options: NrtaScheduleOptions = {}): NrtaRequest {
    const shaped = typeof execution === "object" && execution !== null && typeof execution.run === "function" &&
      typeof execution.cancel === "function";
    const ours = shaped && execution.owner === this.#host.owner;
    try {
      this.#host.guard();
      if (!ours) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          shaped
            ? "Cannot schedule an execution: it was not prepared by this runtime"
            : `Cannot schedule an execution: ${describeValue(execution)} is not a prepared execution`,
        );
      }
      return this.#schedule(
        NrtaXu.NRTA_XU_COMPUTE,
        execution.vnc,
        options,
        () => execution.run(),
        () => execution.cancel(),
      );
    } catch (e) {
      // Ours holds a model reference of this runtime: drop it. Another runtime's is its runtime's to run or cancel.
      if (ours) execution.cancel();
      throw e;
    }
  }

  /**
   * `nrta_cc_schedule`: runs a prepared collective on the COLLECTIVES unit of logical core `vnc` (ours: the
   * collective's rank 0; `collectives/collectives.ts` supplies `run`).
   */
  ccSchedule(vnc: number, run: () => Promise<void>, options: NrtaScheduleOptions = {}): NrtaRequest {
    this.#host.guard();
    return this.#schedule(NrtaXu.NRTA_XU_COLLECTIVES, vnc, options, run);
  }

  /**
   * `nrta_is_completed`.
   *
   * @throws {NrtError} `NRT_INVALID` when `seq` was never issued.
   */
  isCompleted(seq: bigint): boolean {
    this.#host.guard();
    if (typeof seq !== "bigint") {
      throw new NrtError(NrtStatus.NRT_INVALID, `Sequence ${describeValue(seq)} is not an nrta_seq_t (a bigint)`);
    }
    const xu = nrtaSeqXu(seq), num = nrtaSeqNum(seq);
    if (seq < 0n || xu < 0 || xu >= NrtaXu.NRTA_XU_TYPE_NUM || num <= 0n || !(num <= this.#issued[xu])) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Sequence 0x${seq.toString(16)} was never scheduled`);
    }
    for (const q of this.#queues.values()) if (q.xu === xu && queueHolds(q, num)) return false;
    return true;
  }

  /** `nrta_get_sequence`: the last completed request of one queue (sequence number 0 when none completed yet). */
  getSequence(lnc: number, xu: number, queue: number): bigint {
    this.#host.guard();
    this.#checkQueue(xu, lnc, queue);
    return this.#queues.get(`${lnc}:${xu}:${queue}`)?.last ?? nrtaSeq(xu, 0n);
  }

  /** Resolves once every request scheduled so far has completed (successfully or not). */
  async drain(): Promise<void> {
    while (this.#unsettled > 0) await (this.#drained ??= Promise.withResolvers<void>()).promise;
  }

  /**
   * The async worker's stop at `nrt_close` (seed: lifecycle-error-model §3.2, stop → drain → teardown): from now on
   * every schedule call is refused with `NRT_CLOSED` (14) — an execution's model reference is dropped then — and
   * the returned promise resolves once every request scheduled before has completed, successfully or not. Every
   * request scheduled before runs, in its queue's order. Calling it again returns the same drain.
   */
  close(): Promise<void> {
    this.#closed = true;
    return this.drain();
  }

  /** Whether {@linkcode Nrta.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  #checkQueue(xu: number, vnc: number, queue: number): void {
    if (!Number.isInteger(xu) || xu < 0 || xu >= NrtaXu.NRTA_XU_TYPE_NUM) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Execution unit ${xu} does not exist`);
    }
    if (!Number.isInteger(vnc) || vnc < 0 || vnc >= this.#host.vncCount) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Logical core ${vnc} is not visible`);
    }
    const n = NRTA_QUEUES_PER_XU[xu];
    if (!Number.isInteger(queue) || queue < 0 || queue >= n) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Execution unit ${xu} has ${n} queue${n === 1 ? "" : "s"}; queue ${queue} does not exist`,
      );
    }
  }

  #schedule(
    xu: NrtaXu,
    vnc: number,
    options: NrtaScheduleOptions,
    work: () => Promise<void>,
    cancel?: () => void,
  ): NrtaRequest {
    this.#host.guard();
    if (this.#closed) {
      throw new NrtError(NrtStatus.NRT_CLOSED, "Cannot schedule a request: the runtime is closing");
    }
    checkOptions(options);
    const queue = options.queue ?? 0;
    this.#checkQueue(xu, vnc, queue);
    const key = `${vnc}:${xu}:${queue}`;
    let q = this.#queues.get(key);
    if (q === undefined) {
      this.#queues.set(key, q = { xu, tail: Promise.resolve(), pending: 0, last: nrtaSeq(xu, 0n), nums: [], head: 0 });
    }
    if (q.pending >= NRTA_QUEUE_CAPACITY) {
      throw new NrtError(
        NrtStatus.NRT_QUEUE_FULL,
        `Queue ${queue} of execution unit ${xu} on logical core ${vnc} holds ${NRTA_QUEUE_CAPACITY} requests`,
      );
    }
    if (this.#issued[xu] >= NRTA_SEQ_NUM_MAX) {
      throw new NrtError(NrtStatus.NRT_RESOURCE, `Execution unit ${xu} ran out of sequence numbers`);
    }
    const num = ++this.#issued[xu];
    const seq = nrtaSeq(xu, num);
    q.nums.push(num);
    q.pending++;
    const queueRef = q;
    const prev = q.tail;
    const deps = (options.after ?? []).map((r) => r.done);
    const host = this.#host;
    const done = (async () => {
      await prev;
      try {
        const settled = await Promise.allSettled(deps);
        try {
          // Its turn came: a request does not start on a host that closed meanwhile (ours, see the module comment).
          host.guard();
        } catch (e) {
          cancel?.();
          const status = e instanceof NrtError ? e.status : NrtStatus.NRT_FAILURE;
          throw new NrtError(status, `Request 0x${seq.toString(16)} did not run: ${(e as Error)?.message ?? e}`, {
            cause: e,
          });
        }
        const failed = settled.find((s) => s.status === "rejected");
        if (failed !== undefined) {
          cancel?.();
          const why = (failed as PromiseRejectedResult).reason;
          const status = why instanceof NrtError ? why.status : NrtStatus.NRT_FAILURE;
          throw new NrtError(status, `Request 0x${seq.toString(16)} did not run: a request it runs after failed`, {
            cause: why,
          });
        }
        await work();
      } catch (e) {
        const err = e instanceof NrtError
          ? e
          : new NrtError(NrtStatus.NRT_FAILURE, `Request 0x${seq.toString(16)} failed: ${String(e)}`, { cause: e });
        options.errors?.add({ seq_id: seq, error_code: err.status });
        throw err;
      } finally {
        // This request is the queue's oldest not completed: the queue runs them in order.
        queueRef.head++;
        if (queueRef.head >= 64 && 2 * queueRef.head >= queueRef.nums.length) {
          queueRef.nums.copyWithin(0, queueRef.head);
          queueRef.nums.length -= queueRef.head;
          queueRef.head = 0;
        }
        queueRef.pending--;
        queueRef.last = seq;
      }
    })();
    // The queue's next request waits for this one to settle, not to succeed; the failure itself reaches whoever
    // awaits `done`, the error tracker and `nrta_is_completed`.
    const settled = done.catch(() => {});
    q.tail = settled;
    this.#unsettled++;
    void settled.then(() => {
      if (--this.#unsettled > 0) return;
      this.#drained?.resolve();
      this.#drained = undefined;
    });
    return new ScheduledRequest(seq, done);
  }
}
