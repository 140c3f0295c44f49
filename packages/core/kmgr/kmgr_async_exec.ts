/**
 * The NRT_2.0.0 implicit-async execute engine (`KMGR_EXEC_MODE_ASYNC`): one worker queue per logical core, bounded
 * by `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`. A submission returns a job id at once or fails with
 * `NRT_QUEUE_FULL`; completions go to the registered callback, or (with none registered — libnrt's "default
 * callback") to a queue that {@linkcode AsyncExecWorker.poll} harvests, `NRT_QUEUE_EMPTY` when nothing is ready.
 *
 * Seed: runtime-synthesis §6 (the execute engine is selected at `nrt_init`; backpressure surfaces as
 * `NRT_QUEUE_FULL` (7), an empty poll as `NRT_QUEUE_EMPTY` (15)), lifecycle-error-model §5.1 (`kmgr_exec` →
 * `kmgr_async_exec_add_work` → `kmgr_async_exec_poll`), §3.2 (unload stops the worker and drains in-flight execs).
 *
 * The worker does not run executions itself: a submitted job takes its model reference and its place in the
 * NeuronCore's FIFO at submission (so the queue is the core's FIFO), and the worker only counts the in-flight jobs
 * and routes their completions.
 *
 * Completions nobody harvested are bounded (ours: the seed gives the backpressure status, not what happens to
 * completed results a client has not polled). Without a listener, a finished job's completion waits in the worker
 * until {@linkcode AsyncExecWorker.poll} takes it; once {@linkcode AsyncExecWorker.maxUnpolled} of them wait
 * (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` by default), a submission is refused with the seed's backpressure
 * status `NRT_QUEUE_FULL` (7), exactly as when `depth` jobs are in flight, until a poll makes room. No completion is
 * ever dropped: a client that polls sees every job it submitted, in completion order, and one that never polls holds
 * at most `maxUnpolled + depth − 1` completions instead of one per job it ever submitted.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

/** One finished job. */
export interface AsyncExecCompletion {
  /** The job id {@linkcode AsyncExecWorker.submit} returned. */
  readonly id: number;
  /** `H_MODEL` of the model that ran. */
  readonly model: number;
  /** Logical core. */
  readonly vnc: number;
  /** The execution's status (`NRT_SUCCESS`, an execution result or a fault). */
  readonly status: NrtStatus;
  /** The failure, when `status` is not `NRT_SUCCESS`. */
  readonly error?: NrtError;
}

/** What `Runtime.tryPoll` returns: a completion, or the seed's empty-poll status `NRT_QUEUE_EMPTY` (15). */
export type AsyncPollResult =
  | { readonly status: typeof NrtStatus.NRT_SUCCESS; readonly completion: AsyncExecCompletion }
  | { readonly status: typeof NrtStatus.NRT_QUEUE_EMPTY };

/** Where completions go when registered (`NRT_ASYNC_EXEC_STATUS_CALLBACK` without the `params` pointer). */
export type AsyncExecListener = (completion: AsyncExecCompletion) => void;

/** `kmgr_async_exec` of one logical core. */
export class AsyncExecWorker {
  /** Logical core. */
  readonly vnc: number;
  /** `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`. */
  readonly depth: number;
  /**
   * Completions waiting for {@linkcode AsyncExecWorker.poll} at which submissions are refused with `NRT_QUEUE_FULL`
   * (ours; `depth` unless given).
   */
  readonly maxUnpolled: number;
  readonly #done: AsyncExecCompletion[] = [];
  readonly #idle: Array<() => void> = [];
  readonly #nextId: () => number;
  readonly #onListenerError: (e: unknown) => void;
  #inflight = 0;
  /** The registered completion listener; completions queue for {@linkcode AsyncExecWorker.poll} while unset. */
  listener: AsyncExecListener | undefined;

  /**
   * A worker of `depth` in-flight jobs; `nextId` mints job ids (process-wide, so ids never repeat across cores);
   * submissions are refused once `maxUnpolled` completions wait to be polled.
   */
  constructor(
    vnc: number,
    depth: number,
    nextId: () => number,
    onListenerError: (e: unknown) => void = (e) => console.error("Async execution listener failed:", e),
    maxUnpolled: number = depth,
  ) {
    if (!Number.isInteger(depth) || depth < 1) {
      throw new RangeError(`Async queue depth ${depth} is not a positive integer`);
    }
    if (!Number.isInteger(maxUnpolled) || maxUnpolled < 1) {
      throw new RangeError(`Async unpolled completion cap ${maxUnpolled} is not a positive integer`);
    }
    this.vnc = vnc;
    this.depth = depth;
    this.maxUnpolled = maxUnpolled;
    this.#nextId = nextId;
    this.#onListenerError = onListenerError;
  }

  /** Jobs submitted and not yet completed. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Completions waiting for {@linkcode AsyncExecWorker.poll}. */
  get unpolled(): number {
    return this.#done.length;
  }

  /**
   * `kmgr_async_exec_add_work`: starts `run` as one job and returns its id.
   *
   * @throws {NrtError} `NRT_QUEUE_FULL` when `depth` jobs are in flight or `maxUnpolled` completions wait to be
   * polled (nothing is started then).
   */
  submit(model: number, run: () => Promise<void>): number {
    this.checkCapacity();
    const id = this.#nextId();
    this.#inflight++;
    const finish = (status: NrtStatus, error?: NrtError) => {
      this.#inflight--;
      const c: AsyncExecCompletion = error === undefined
        ? { id, model, vnc: this.vnc, status }
        : { id, model, vnc: this.vnc, status, error };
      try {
        if (this.listener !== undefined) this.listener(c);
        else this.#done.push(c);
      } catch (e) {
        // Ours: a listener that throws must not leave a drain waiting for ever, nor end the process (an unhandled
        // rejection on Deno): its error is logged.
        this.#onListenerError(e);
      } finally {
        if (this.#inflight === 0) { for (const wake of this.#idle.splice(0)) wake(); }
      }
    };
    run().then(
      () => finish(NrtStatus.NRT_SUCCESS),
      (e) => {
        const err = e instanceof NrtError
          ? e
          : new NrtError(NrtStatus.NRT_FAILURE, `Execution failed: ${String(e)}`, { cause: e });
        finish(err.status, err);
      },
    );
    return id;
  }

  /**
   * Throws what {@linkcode AsyncExecWorker.submit} would for a full queue.
   *
   * @throws {NrtError} `NRT_QUEUE_FULL` when `depth` jobs are in flight or `maxUnpolled` completions wait to be
   * polled.
   */
  checkCapacity(): void {
    if (this.#inflight >= this.depth) {
      throw new NrtError(
        NrtStatus.NRT_QUEUE_FULL,
        `Cannot queue an execution on logical core ${this.vnc}: ${this.depth} requests are in flight (NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS)`,
      );
    }
    if (this.#done.length >= this.maxUnpolled) {
      throw new NrtError(
        NrtStatus.NRT_QUEUE_FULL,
        `Cannot queue an execution on logical core ${this.vnc}: ${this.#done.length} completed executions wait ` +
          "to be polled; poll them (nrt_async_exec_poll), or register a completion callback to take later ones",
      );
    }
  }

  /**
   * `kmgr_async_exec_poll`: the oldest unharvested completion, or `undefined` (`NRT_QUEUE_EMPTY`) at once. Taking one
   * makes room for a submission refused for {@linkcode AsyncExecWorker.maxUnpolled}.
   */
  poll(): AsyncExecCompletion | undefined {
    return this.#done.shift();
  }

  /** `nrt_async_drain_queued_execs`: resolves once no job is in flight. */
  drain(): Promise<void> {
    if (this.#inflight === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idle.push(resolve));
  }
}
