/**
 * A model as the server runs it: one or more loaded instances of one NEFF, each with its own pooled HOST tensors,
 * a FIFO of requests waiting for a free instance, and the drain that unloading waits for.
 *
 * The runtime already runs one execution at a time per NeuronCore (seed: runtime-synthesis §3, `exec_tail`); the
 * queue here mirrors that one level up, so a request's queue time is measurable, the queue is bounded
 * (`NRT_QUEUE_FULL` past it), and the pooled tensors of an instance are never shared by two requests.
 *
 * @module
 */
import { type Model, type NeffTensor, NrtError, NrtStatus, nrtStatusName, type Runtime, type Tensor, TensorPlacement, TensorSet } from "@nrt/core";
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

interface Instance {
  readonly model: Model;
  readonly ins: TensorSet;
  readonly outs: TensorSet;
  readonly tensors: Tensor[];
  busy: boolean;
}

interface Waiter {
  resolve(i: Instance): void;
  reject(e: unknown): void;
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
  readonly #waiters: Waiter[] = [];
  #inflight = 0;
  #drained: (() => void) | undefined;
  #closing = false;

  private constructor(rt: Runtime, name: string, instances: Instance[], maxQueue: number) {
    this.#rt = rt;
    this.name = name;
    this.#instances = instances;
    this.#maxQueue = maxQueue;
    this.inputs = instances[0].model.inputs;
    this.outputs = instances[0].model.outputs;
    this.vncs = instances.map((i) => i.model.vnc);
  }

  /**
   * Loads `neff` once per entry of `vncs` and allocates each instance's HOST tensors. On any failure the instances
   * already loaded are unloaded again before the error propagates.
   *
   * @param rt The runtime.
   * @param name The repository name.
   * @param neff The NEFF bytes.
   * @param vncs One logical core per instance.
   * @param maxQueue Requests allowed to wait for an instance.
   * @returns The served model.
   * @throws {NrtError} What `nrt_load` or `nrt_tensor_allocate` reported.
   */
  static async load(rt: Runtime, name: string, neff: Uint8Array, vncs: readonly number[], maxQueue: number): Promise<ServedModel> {
    const instances: Instance[] = [];
    try {
      for (const vnc of vncs) {
        const model = await rt.load(neff, vnc);
        const inst: Instance = { model, ins: new TensorSet(), outs: new TensorSet(), tensors: [], busy: false };
        instances.push(inst);
        for (const [set, list] of [[inst.ins, model.inputs], [inst.outs, model.outputs]] as const) {
          for (const t of list) {
            const x = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, vnc, t.size, `${name}:${t.name}`);
            inst.tensors.push(x);
            set.add(t.name, x);
          }
        }
      }
    } catch (e) {
      await unloadAll(instances).catch(() => {});
      throw e;
    }
    return new ServedModel(rt, name, instances, maxQueue);
  }

  /** The poisoning status of an instance (seed: lifecycle-error-model §5.5), `undefined` while it is healthy. */
  #poisoned(i: Instance): number | undefined {
    return this.#rt.poisonedStatus(i.model);
  }

  /** Why the model cannot take requests, or `undefined` when it can: unloading, or every instance poisoned. */
  get notReadyReason(): string | undefined {
    if (this.#closing) return "it is unloading";
    const statuses = this.#instances.map((i) => this.#poisoned(i));
    if (statuses.every((s) => s !== undefined)) {
      return `it is poisoned by ${nrtStatusName(statuses[0]!)} (a fault during execution); load it again to recover`;
    }
    return undefined;
  }

  /** Instances poisoned so far. */
  get poisonedInstances(): number {
    return this.#instances.filter((i) => this.#poisoned(i) !== undefined).length;
  }

  /** The loaded instances: `H_MODEL` handle, logical core, and the poisoning status (`undefined` while healthy). */
  get instances(): Array<{ handle: number; vnc: number; poisoned: number | undefined }> {
    return this.#instances.map((i) => ({ handle: i.model.handle, vnc: i.model.vnc, poisoned: this.#poisoned(i) }));
  }

  /** Requests running or queued. */
  get inflight(): number {
    return this.#inflight;
  }

  #notReady(): HttpError {
    return new HttpError(503, `Model "${this.name}" is not ready: ${this.notReadyReason ?? "no instance is free"}`);
  }

  #acquire(): Promise<Instance> {
    const idle = this.#instances.find((i) => !i.busy && this.#poisoned(i) === undefined);
    if (idle !== undefined) {
      idle.busy = true;
      return Promise.resolve(idle);
    }
    if (this.notReadyReason !== undefined) return Promise.reject(this.#notReady());
    if (this.#waiters.length >= this.#maxQueue) {
      return Promise.reject(
        new NrtError(NrtStatus.NRT_QUEUE_FULL, `Cannot queue a request for model "${this.name}": ${this.#maxQueue} requests are already waiting`),
      );
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  #release(i: Instance): void {
    i.busy = false;
    if (this.#poisoned(i) === undefined) {
      const w = this.#waiters.shift();
      if (w !== undefined) {
        i.busy = true;
        w.resolve(i);
      }
    } else if (this.notReadyReason !== undefined) {
      for (const w of this.#waiters.splice(0)) w.reject(this.#notReady());
    }
  }

  /**
   * Runs one inference on a free instance.
   *
   * @param inputs Bytes of every input, by name, each exactly the input's size (the caller validated them).
   * @param outputs Names of the outputs to read back.
   * @param timing Filled with the time spent in each phase and the execution status.
   * @returns The bytes of the requested outputs.
   * @throws {HttpError} 503 when the model is unloading or poisoned.
   * @throws {NrtError} `NRT_QUEUE_FULL` past the queue bound, or what `nrt_execute` reported.
   */
  async infer(inputs: ReadonlyMap<string, Uint8Array>, outputs: readonly string[], timing: InferTiming): Promise<Map<string, Uint8Array>> {
    if (this.#closing) throw this.#notReady();
    this.#inflight++;
    try {
      let t = performance.now();
      const inst = await this.#acquire();
      timing.queueUs = micros(t);
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
        }
        t = performance.now();
        const out = new Map<string, Uint8Array>();
        for (const name of outputs) out.set(name, await inst.outs.get(name).read());
        timing.outputUs = micros(t);
        return out;
      } finally {
        this.#release(inst);
      }
    } finally {
      if (--this.#inflight === 0) this.#drained?.();
    }
  }

  /** Stops taking requests, waits for the running and queued ones, unloads every instance and frees its tensors. */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#inflight > 0) await new Promise<void>((res) => (this.#drained = res));
    await unloadAll(this.#instances.splice(0));
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
