/**
 * A model as the server runs it: one or more loaded instances of one NEFF (Triton's instance group), each with its
 * own pooled tensors in device memory, warmed up by one execution before the model is handed out; a FIFO of requests
 * waiting for a free instance; least-busy dispatch; and the drain that unloading waits for.
 *
 * The runtime already runs one execution at a time per NeuronCore (seed: runtime-synthesis §3, `exec_tail`); the
 * queue here mirrors that one level up, so a request's queue time is measurable, the queue is bounded
 * (`NRT_QUEUE_FULL` past it), and the pooled tensors of an instance are never shared by two requests. Instance
 * groups, warm-up, dispatch and cancellation are ours (docs/rest-api.md, "Instance groups").
 *
 * @module
 */
import {
  type Model,
  type NeffTensor,
  NrtError,
  NrtStatus,
  nrtStatusName,
  type Runtime,
  type Tensor,
  TensorSet,
} from "@nrt/core";
import { HttpError } from "./http_error.ts";

/** Where one request spent its time, in microseconds, and how its execution ended. */
export interface InferTiming {
  /** Waiting for a free instance. */
  queueUs: number;
  /** Copying the inputs into the instance's tensors. */
  inputUs: number;
  /** `nrt_execute`. */
  inferUs: number;
  /** Reading the outputs back. */
  outputUs: number;
  /** The `NRT_STATUS` of the execution, when it ran (0 on success). */
  execStatus?: number;
}

/** Creates a zeroed {@linkcode InferTiming}. */
export function newTiming(): InferTiming {
  return { queueUs: 0, inputUs: 0, inferUs: 0, outputUs: 0 };
}

/**
 * The HTTP status of a request whose client left while it waited for an instance, or before its body arrived (nginx's
 * "client closed request"). It is not logged as a server error, and metrics count it as a failure of reason `OTHER`.
 * It is mostly never sent, since nobody is there to read it; a client that half-closed its connection mid-body may
 * read it on Deno (`body.ts`).
 */
export const CLIENT_CLOSED_REQUEST = 499;

/**
 * Executions running on each logical core, across every model of a repository: what "least busy" compares when a
 * model has instances on several cores that other models share. Ours.
 */
export class CoreLoad {
  readonly #running = new Map<number, number>();

  /** Executions running on logical core `vnc` now. */
  running(vnc: number): number {
    return this.#running.get(vnc) ?? 0;
  }

  /** Counts one more execution on `vnc`; the returned function counts it finished (once). */
  start(vnc: number): () => void {
    this.started(vnc);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.ended(vnc);
    };
  }

  /** Counts one more execution on `vnc`; the caller counts it finished with {@linkcode CoreLoad.ended}, once. */
  started(vnc: number): void {
    this.#running.set(vnc, this.running(vnc) + 1);
  }

  /** Counts one execution on `vnc` finished. */
  ended(vnc: number): void {
    // Kept at 0, not deleted: a key deleted and added again per request churns the map's storage (in_flight.ts).
    this.#running.set(vnc, Math.max(0, this.running(vnc) - 1));
  }
}

/**
 * The signal of a request's client, or what gives it when it is needed: a function, or an object whose `signal` is
 * read then (a `Request`: passing it makes no closure per request).
 */
export type ClientSignal = AbortSignal | (() => AbortSignal) | { readonly signal: AbortSignal };

/** Options of {@linkcode ServedModel.load}. */
export interface ServedModelOptions {
  /** Requests allowed to wait for an instance. */
  readonly maxQueue: number;
  /**
   * Run each instance once on zeroed inputs before the model is ready (default true), as Triton's model warm-up
   * does: the instance's Q7 Workers are then up and its kernels have run once.
   */
  readonly warmup?: boolean;
  /** The repository's per-core execution counts (default: this model's own). */
  readonly coreLoad?: CoreLoad;
  /**
   * Largest input or output tensor, in bytes; a model with a larger one is refused with 400 before any tensor is
   * allocated or run (default: no bound). Ours.
   */
  readonly maxTensorBytes?: number;
  /**
   * Called with each instance's model as soon as the runtime has loaded it, before anything runs on it (its warm-up
   * included), so a caller can name its handle from its first execution on (ours; the repository's `modelOfHandle`).
   */
  readonly onLoaded?: (model: Model) => void;
}

/** One instance as metadata, metrics and the dashboard show it. */
export interface InstanceView {
  /** Position in the model's instance group (`<model>_<index>` in Triton's naming). */
  readonly index: number;
  /** `H_MODEL` handle. */
  readonly handle: number;
  /** Logical NeuronCore. */
  readonly vnc: number;
  /** Running a request now. */
  readonly busy: boolean;
  /** Executions since the load, warm-up excluded. */
  readonly executions: number;
  /** The status that poisoned the instance (seed: lifecycle-error-model §5.5), `undefined` while healthy. */
  readonly poisoned: number | undefined;
}

interface Instance {
  readonly index: number;
  readonly model: Model;
  readonly ins: TensorSet;
  readonly outs: TensorSet;
  readonly tensors: Tensor[];
  busy: boolean;
  executions: number;
  /** Dispatch order of the last request it took (ties of "least busy" go to the longest idle). */
  lastDispatch: number;
}

/**
 * A request waiting for an instance. It is its client signal's `abort` listener itself (`handleEvent`), so a request
 * that waits makes no closure for it (ours).
 */
class Waiter {
  readonly #queue: Waiter[];
  readonly #model: string;
  readonly #signal: AbortSignal | undefined;
  readonly #resolve: (i: Instance) => void;
  readonly #reject: (e: unknown) => void;

  constructor(
    queue: Waiter[],
    model: string,
    signal: AbortSignal | undefined,
    settle: { resolve(i: Instance): void; reject(e: unknown): void },
  ) {
    this.#queue = queue;
    this.#model = model;
    this.#signal = signal;
    this.#resolve = settle.resolve;
    this.#reject = settle.reject;
  }

  /** The client left while the request waited: it leaves the queue unrun. */
  handleEvent(): void {
    const k = this.#queue.indexOf(this);
    if (k < 0) return;
    this.#queue.splice(k, 1);
    this.#reject(cancelledWhileQueued(this.#model));
  }

  /** The request takes instance `i` (it has left the queue). */
  resolve(i: Instance): void {
    this.#signal?.removeEventListener("abort", this);
    this.#resolve(i);
  }

  /** The request is refused (it has left the queue). */
  reject(e: unknown): void {
    this.#signal?.removeEventListener("abort", this);
    this.#reject(e);
  }
}

const micros = (from: number): number => Math.round((performance.now() - from) * 1000);

/** One model's loaded instances. Create with {@linkcode ServedModel.load}. */
export class ServedModel {
  /** Repository name of the model. */
  readonly name: string;
  /** Inputs (from the NEFF signature). */
  readonly inputs: readonly NeffTensor[];
  /** Outputs. */
  readonly outputs: readonly NeffTensor[];
  /** Logical NeuronCores of the instances. */
  readonly vncs: readonly number[];
  readonly #rt: Runtime;
  readonly #instances: Instance[];
  readonly #maxQueue: number;
  readonly #coreLoad: CoreLoad;
  readonly #waiters: Waiter[] = [];
  #dispatched = 0;
  #inflight = 0;
  #drained: (() => void) | undefined;
  #closing = false;

  private constructor(rt: Runtime, name: string, instances: Instance[], options: ServedModelOptions) {
    this.#rt = rt;
    this.name = name;
    this.#instances = instances;
    this.#maxQueue = options.maxQueue;
    this.#coreLoad = options.coreLoad ?? new CoreLoad();
    this.inputs = instances[0].model.inputs;
    this.outputs = instances[0].model.outputs;
    this.vncs = instances.map((i) => i.model.vnc);
  }

  /**
   * Loads `neff` once per entry of `vncs`, allocates each instance's device tensors and, unless told otherwise, runs
   * each instance once on zeroed inputs. On any failure the instances already loaded are unloaded again before the
   * error propagates, so no half-loaded model is left behind.
   *
   * @param rt The runtime.
   * @param name The repository name.
   * @param neff The NEFF bytes.
   * @param vncs One logical core per instance (at least one).
   * @param options Queue bound, warm-up, the repository's core load.
   * @returns The served model.
   * @throws {NrtError} What `nrt_load` or `nrt_tensor_allocate` reported; a failed warm-up with the status of its
   *   execution and a message that says so.
   */
  static async load(
    rt: Runtime,
    name: string,
    neff: Uint8Array,
    vncs: readonly number[],
    options: ServedModelOptions,
  ): Promise<ServedModel> {
    if (vncs.length === 0) throw new RangeError(`Cannot load model "${name}": it needs at least one instance`);
    const instances: Instance[] = [];
    try {
      for (const [index, vnc] of vncs.entries()) {
        const model = await rt.load(neff, vnc);
        options.onLoaded?.(model);
        const inst: Instance = {
          index,
          model,
          ins: new TensorSet(),
          outs: new TensorSet(),
          tensors: [],
          busy: false,
          executions: 0,
          lastDispatch: 0,
        };
        instances.push(inst);
        if (index === 0) checkTensorSizes(name, model, options.maxTensorBytes);
        for (const [set, list] of [[inst.ins, model.inputs], [inst.outs, model.outputs]] as const) {
          for (const t of list) {
            // In device memory (ours): a request's input goes to the device in one copy and its output comes back in
            // one, where a host tensor took one more each way through the execution's staging buffer.
            const x = await rt.allocateTensor({
              location: "device",
              vnc: vnc,
              size: t.size,
              name: `${name}:${t.name}`,
            });
            inst.tensors.push(x);
            set.add(t.name, x);
          }
        }
        if (options.warmup ?? true) await warmUp(name, inst);
      }
    } catch (e) {
      await unloadAll(instances).catch(() => {});
      throw e;
    }
    return new ServedModel(rt, name, instances, options);
  }

  /** The poisoning status of an instance (seed: lifecycle-error-model §5.5), `undefined` while it is healthy. */
  #poisoned(i: Instance): number | undefined {
    return this.#rt.poisonedStatus(i.model);
  }

  /**
   * Why the model cannot take requests, or `undefined` when it can: unloading, or every instance poisoned. Asked at
   * every request: it stops at the first healthy instance and allocates nothing on the way (ours).
   */
  get notReadyReason(): string | undefined {
    if (this.#closing) return "it is unloading";
    let first: number | undefined;
    for (let k = 0; k < this.#instances.length; k++) {
      const status = this.#poisoned(this.#instances[k]);
      if (status === undefined) return undefined;
      first ??= status;
    }
    return `it is poisoned by ${nrtStatusName(first!)} (a fault during execution); load it again to recover`;
  }

  /** Instances poisoned so far. */
  get poisonedInstances(): number {
    return this.#instances.filter((i) => this.#poisoned(i) !== undefined).length;
  }

  /** The loaded instances, in the order of `vncs`. */
  get instances(): InstanceView[] {
    return this.#instances.map((i) => ({
      index: i.index,
      handle: i.model.handle,
      vnc: i.model.vnc,
      busy: i.busy,
      executions: i.executions,
      poisoned: this.#poisoned(i),
    }));
  }

  /** Requests running or queued. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Requests waiting for an instance. */
  get queued(): number {
    return this.#waiters.length;
  }

  #notReady(): HttpError {
    return new HttpError(503, `Model "${this.name}" is not ready: ${this.notReadyReason ?? "no instance is free"}`);
  }

  /**
   * The least busy free instance: among the healthy idle ones, the one whose logical core runs the fewest
   * executions (of any model), then the one idle longest.
   */
  #leastBusy(): Instance | undefined {
    let best: Instance | undefined;
    for (const i of this.#instances) {
      if (i.busy || this.#poisoned(i) !== undefined) continue;
      if (best === undefined) {
        best = i;
        continue;
      }
      const a = this.#coreLoad.running(i.model.vnc), b = this.#coreLoad.running(best.model.vnc);
      if (a < b || (a === b && i.lastDispatch < best.lastDispatch)) best = i;
    }
    return best;
  }

  #take(i: Instance): Instance {
    i.busy = true;
    i.lastDispatch = ++this.#dispatched;
    return i;
  }

  #acquire(clientSignal: ClientSignal | undefined): Promise<Instance> {
    const idle = this.#leastBusy();
    if (idle !== undefined) return Promise.resolve(this.#take(idle));
    // The wait is a method of its own: its closures capture its locals, which would otherwise be allocated in a scope
    // of their own at every request, waiting or not.
    return this.#enqueue(clientSignal);
  }

  #enqueue(clientSignal: ClientSignal | undefined): Promise<Instance> {
    if (this.notReadyReason !== undefined) return Promise.reject(this.#notReady());
    if (this.#waiters.length >= this.#maxQueue) {
      return Promise.reject(
        new NrtError(
          NrtStatus.NRT_QUEUE_FULL,
          `Cannot queue a request for model "${this.name}": ${this.#maxQueue} requests are already waiting`,
        ),
      );
    }
    // Read only now that the request has to wait (Deno warns when a served request's signal is read).
    const signal = typeof clientSignal === "function"
      ? clientSignal()
      : clientSignal instanceof AbortSignal || clientSignal === undefined
      ? clientSignal
      : clientSignal.signal;
    if (signal?.aborted) return Promise.reject(cancelledWhileQueued(this.name));
    const settle = Promise.withResolvers<Instance>();
    const w = new Waiter(this.#waiters, this.name, signal, settle);
    this.#waiters.push(w);
    // No `once`: the listener is removed when the request leaves the queue either way, and an options object
    // doubles what adding and removing it costs on Bun (ours; every request that waits pays it).
    signal?.addEventListener("abort", w);
    return settle.promise;
  }

  #release(i: Instance): void {
    i.busy = false;
    if (this.#poisoned(i) === undefined) {
      const w = this.#waiters.shift();
      if (w !== undefined) w.resolve(this.#take(i));
    } else if (this.notReadyReason !== undefined) {
      for (const w of this.#waiters.splice(0)) w.reject(this.#notReady());
    }
  }

  /**
   * Runs one inference on the least busy free instance, or waits in the model's queue for one.
   *
   * @param inputs Bytes of every input, by name, each exactly the input's size (the caller validated them).
   * @param outputs Names of the outputs to read back.
   * @param timing Filled with the time spent in each phase and the execution status.
   * @param signal Aborted when the client leaves: a request still waiting in the queue is dropped and never runs. A
   *   running execution cannot be stopped halfway; it finishes and releases its instance. A function is called,
   *   or an object's `signal` read, only if the request has to wait.
   * @returns The bytes of the requested outputs.
   * @throws {HttpError} 503 when the model is unloading or poisoned; {@linkcode CLIENT_CLOSED_REQUEST} when the
   *   signal aborted before the request reached an instance.
   * @throws {NrtError} `NRT_QUEUE_FULL` past the queue bound, or what `nrt_execute` reported.
   */
  async infer(
    inputs: ReadonlyMap<string, Uint8Array>,
    outputs: readonly string[],
    timing: InferTiming,
    signal?: ClientSignal,
  ): Promise<Map<string, Uint8Array>> {
    if (this.#closing) throw this.#notReady();
    if (signal instanceof AbortSignal && signal.aborted) throw cancelledWhileQueued(this.name);
    this.#inflight++;
    try {
      let t = performance.now();
      const inst = await this.#acquire(signal);
      timing.queueUs = micros(t);
      const vnc = inst.model.vnc;
      this.#coreLoad.started(vnc);
      try {
        t = performance.now();
        for (const x of this.inputs) await inst.ins.get(x.name).write(inputs.get(x.name)!);
        timing.inputUs = micros(t);
        t = performance.now();
        try {
          await inst.model.execute(inst.ins, inst.outs);
          timing.execStatus = NrtStatus.NRT_SUCCESS;
        } catch (e) {
          timing.execStatus = e instanceof NrtError ? e.status : NrtStatus.NRT_FAILURE;
          throw e;
        } finally {
          timing.inferUs = micros(t);
          inst.executions++;
        }
        t = performance.now();
        const out = new Map<string, Uint8Array>();
        for (const name of outputs) out.set(name, await inst.outs.get(name).read());
        timing.outputUs = micros(t);
        return out;
      } finally {
        this.#coreLoad.ended(vnc);
        this.#release(inst);
      }
    } finally {
      if (--this.#inflight === 0) this.#drained?.();
    }
  }

  /**
   * Refuses the requests still waiting for an instance (503, "the server is shutting down" or the reason given);
   * the running ones go on.
   *
   * @param reason Why, for the refused requests' message.
   * @returns How many were refused.
   */
  refuseQueued(reason: string): number {
    const waiting = this.#waiters.splice(0);
    for (const w of waiting) w.reject(new HttpError(503, `Model "${this.name}" is not ready: ${reason}`));
    return waiting.length;
  }

  /** Stops taking requests, waits for the running and queued ones, unloads every instance and frees its tensors. */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#inflight > 0) await new Promise<void>((res) => (this.#drained = res));
    await unloadAll(this.#instances.splice(0));
  }
}

/** The error of a request whose client left while it waited in the queue. */
function cancelledWhileQueued(model: string): HttpError {
  return new HttpError(
    CLIENT_CLOSED_REQUEST,
    `Cannot run the request for model "${model}": the client left before an instance was free`,
  );
}

/** Runs an instance once on zeroed inputs; a failure names the warm-up and keeps the execution's status. */
async function warmUp(name: string, inst: Instance): Promise<void> {
  try {
    for (const t of inst.model.inputs) await inst.ins.get(t.name).memset(0);
    await inst.model.execute(inst.ins, inst.outs);
  } catch (e) {
    const status = e instanceof NrtError ? e.status : NrtStatus.NRT_FAILURE;
    const why = e instanceof NrtError ? e.message : e instanceof Error ? e.message : String(e);
    throw new NrtError(status, `Warm-up of model "${name}" on logical core ${inst.model.vnc} failed: ${why}`, {
      cause: e,
    });
  }
}

/**
 * Refuses a model with an input or output over `max` bytes: an 11 KB NEFF can declare a 2 GiB output, which the
 * warm-up would fill and every request would read back whole.
 */
function checkTensorSizes(
  name: string,
  model: { readonly inputs: readonly NeffTensor[]; readonly outputs: readonly NeffTensor[] },
  max: number | undefined,
): void {
  if (max === undefined) return;
  for (const [kind, list] of [["input", model.inputs], ["output", model.outputs]] as const) {
    const t = list.find((x) => x.size > max);
    if (t !== undefined) {
      throw new HttpError(
        400,
        `Cannot load model "${name}": ${kind} "${t.name}" is ${t.size} bytes, over the server's ${max}-byte tensor ` +
          `limit (the body limit, --max-body)`,
      );
    }
  }
}

async function unloadAll(instances: Instance[]): Promise<void> {
  let first: unknown;
  for (const i of instances) {
    for (const t of i.tensors) await t.free().catch((e) => (first ??= e));
    await i.model.unload().catch((e) => (first ??= e));
  }
  if (first !== undefined) throw first;
}
