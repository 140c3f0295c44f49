/**
 * `kbl_infer_errors` and the two `kmetric_update_nds_*` calls that end the synchronous execute path: per execution,
 * one `bool[9]` of error flags, then the per-model, per-NeuronCore execution statistics — the flags counted first,
 * then the execution by its final `NRT_STATUS`.
 *
 * Seed: lifecycle-error-model §5.2 (`kmgr_sync_exec` ends with `kmetric_update_nds_error_stats(kbl_infer_errors*)`
 * @0xe0f60, `infer_error_flags` @+0, then `kmetric_update_nds_exec_stats(int,int,NRT_STATUS)` @0xe0d30 with the final
 * status; the CORRECTION: `kbl_infer_errors` is size 9 and `infer_error_flags` is `bool[9]`, nine one-byte flags, not
 * a bitmap).
 *
 * Ours: the seed gives the width and the names, not what each of the nine flags means. We assign one flag per error
 * class the classifier (`exec_request_process_errors`, `exec_request.ts`) already tells apart, in its order
 * ({@linkcode InferErrorFlag}). A host-side NQ overflow (1204) is not an error of the inference and has no flag; it
 * is counted by its status. The two `int`s of `kmetric_update_nds_exec_stats` are read as (model, NeuronCore); the
 * statistics live in the runtime (not in an NDS shared-memory segment).
 *
 * A model's entry lives from its load to its unload. `kmgr_unload_nn` calls `kmetric_unload_model_update_agg_neff_id`
 * (seed: lifecycle-error-model §3.2, right after `DMSTATE_STOPPING`): {@linkcode Kmetric.forget} folds the model's
 * counts into the runtime's per-NeuronCore aggregate of unloaded models ({@linkcode Kmetric.retired}). It runs where
 * the seed has it, before the async worker stops and the model's executions drain; those executions still count
 * (below). Ours: the aggregate is per NeuronCore (the seed names it, not its key); the last `keepUnloaded` (256)
 * models unloaded stay listed, `loaded: false`, still counting the executions their unload drains, before their
 * counts join the aggregate, so a reader that polls (a Prometheus scrape of `/metrics`) sees each model's last
 * executions before it leaves the list; an execution that ends after its model left the list (256 unloads during
 * its drain) is counted in the aggregate. A server that loads and unloads models for ever keeps one entry per loaded
 * model, at most 256 more, one aggregate per NeuronCore and the handles of the last 4,096 models that left.
 *
 * @module
 */
import { NrtStatus } from "../status.ts";

/** `sizeof(kbl_infer_errors)`: nine one-byte flags (seed: lifecycle-error-model §5.2). */
export const KBL_INFER_ERRORS_SIZE = 9;

/**
 * The index of each `infer_error_flags` byte. Ours: the seed names the array, not its elements; one flag per error
 * class of `exec_request_process_errors`, in its order (consume → HBM → DMA abort → OOB → collectives → network
 * proxy → timeout → the TPB verdicts).
 */
export const InferErrorFlag = {
  /** An uncorrectable NeuronCore memory error, the consume-stage verdict (1202). */
  NC_UE: 0,
  /** An uncorrectable HBM error, repairable (1205) or not (1201). */
  HBM_UE: 1,
  /** A DMA engine of the request reads ABORTED (1203). */
  DMA_ABORT: 2,
  /** An out-of-bounds device access or tensor transfer (1006, `EXEC_FATAL_STATUS_OOB`). */
  OOB: 3,
  /** A collectives / fabric fault or hang (1200, `EXEC_FATAL_STATUS_BARRIER`). */
  COLLECTIVES: 4,
  /** A network (EFA) proxy failure (1206, `EXEC_FATAL_STATUS_NETWORK_PROXY`). */
  NETWORK_PROXY: 5,
  /** No completion within `NEURON_RT_EXEC_TIMEOUT` (5, `EXEC_FATAL_STATUS_TIMEOUT`). */
  TIMEOUT: 6,
  /** A fatal TPB_ERROR (error_id 0x0a) no check above explains: a generic hardware error (6). */
  TPB_FATAL: 7,
  /** A non-fatal TPB_ERROR (error_id 0x09): the run completes with its result flagged (1003 or 1004). */
  TPB_NONFATAL: 8,
} as const;

/** One `infer_error_flags` index. */
export type InferErrorFlag = typeof InferErrorFlag[keyof typeof InferErrorFlag];

/** The name of one flag (the key of {@linkcode InferErrorFlag}). */
export type InferErrorName = keyof typeof InferErrorFlag;

/** The flag names by index (`INFER_ERROR_NAMES[InferErrorFlag.OOB] === "OOB"`). */
export const INFER_ERROR_NAMES: readonly InferErrorName[] = Object.freeze(
  (Object.keys(InferErrorFlag) as InferErrorName[]).sort((a, b) => InferErrorFlag[a] - InferErrorFlag[b]),
);

/** `kbl_infer_errors`: the error flags of one execution (seed: lifecycle-error-model §5.2). */
export interface KblInferErrors {
  /** `infer_error_flags` `bool[9]` @+0: byte i is 1 when error class i ({@linkcode InferErrorFlag}) fired, else 0. */
  readonly inferErrorFlags: Uint8Array;
}

/** A `kbl_infer_errors` with every flag clear. */
export function kblInferErrorsInit(): KblInferErrors {
  return { inferErrorFlags: new Uint8Array(KBL_INFER_ERRORS_SIZE) };
}

/** The execution statistics of one NeuronCore of one model (read-only snapshot). */
export interface NcExecutionStats {
  /** Physical NeuronCore. */
  readonly nc: number;
  /** Executions that reached their final status (`kmetric_update_nds_exec_stats` calls). */
  readonly executions: number;
  /** Executions by final `NRT_STATUS` (only statuses seen are present; `0` is `NRT_SUCCESS`). */
  readonly byStatus: Readonly<Record<number, number>>;
  /** Executions with each `infer_error_flags` byte set, by flag name (every name present). */
  readonly errors: Readonly<Record<InferErrorName, number>>;
}

/** The execution statistics of one model (read-only snapshot). */
export interface ModelExecutionStats {
  /** `H_MODEL` handle. */
  readonly handle: number;
  /** Model name (NEFF header name). */
  readonly name: string;
  /** Logical NeuronCore. */
  readonly vnc: number;
  /**
   * Whether the model is still loaded: `false` for one of the last models unloaded ({@linkcode Kmetric.forget}), for
   * one the runtime did not unload (it closed with the model loaded), and in the final snapshot `forget` returns.
   */
  readonly loaded: boolean;
  /** Successful executions (final status `NRT_SUCCESS`), summed over the model's NeuronCores. */
  readonly succeeded: number;
  /** Failed or flagged executions (any other final status), summed over the model's NeuronCores. */
  readonly failed: number;
  /** Per physical NeuronCore the model ran on, in NeuronCore order. */
  readonly cores: readonly NcExecutionStats[];
}

class NcCounters {
  executions = 0;
  readonly byStatus = new Map<number, number>();
  readonly errors = new Float64Array(KBL_INFER_ERRORS_SIZE);
}

interface ModelCounters {
  readonly handle: number;
  readonly name: string;
  readonly vnc: number;
  readonly cores: Map<number, NcCounters>;
}

/** One NeuronCore's counters as a read-only snapshot. */
function ncSnapshot(nc: number, c: NcCounters): NcExecutionStats {
  return {
    nc,
    executions: c.executions,
    byStatus: Object.fromEntries([...c.byStatus].sort(([a], [b]) => a - b)),
    errors: Object.fromEntries(INFER_ERROR_NAMES.map((n, i) => [n, c.errors[i]])) as Record<InferErrorName, number>,
  };
}

/** How many handles of models that left the list are remembered, for executions that end later. Ours. */
const LEFT_REMEMBERED = 4096;

/** The per-model, per-NeuronCore execution statistics of one runtime (the NDS "nds_*_stats" of the seed, ours). */
export class Kmetric {
  /** Models loaded. */
  readonly #models = new Map<number, ModelCounters>();
  /** The last models forgotten, oldest first, still listed and counting. */
  readonly #unloaded: ModelCounters[] = [];
  /** Every model still counting: those loaded and those in {@linkcode Kmetric.#unloaded}. */
  readonly #counting = new Map<number, ModelCounters>();
  /** The handles of the last models that left the list: a late execution of one counts in the aggregate. */
  readonly #left = new Set<number>();
  readonly #keepUnloaded: number;
  /** The counts of the forgotten models no longer listed, per physical NeuronCore (ours: the aggregate's key). */
  readonly #retired = new Map<number, NcCounters>();

  /**
   * Statistics of one runtime.
   *
   * @param options `keepUnloaded`: how many of the last models unloaded stay listed (default 256).
   * @throws {RangeError} If `keepUnloaded` is not a non-negative integer.
   */
  constructor(options: { readonly keepUnloaded?: number } = {}) {
    const keep = options.keepUnloaded ?? 256;
    if (!Number.isSafeInteger(keep) || keep < 0) {
      throw new RangeError(`Cannot keep ${keep} unloaded models' statistics: not a non-negative integer`);
    }
    this.#keepUnloaded = keep;
  }

  /**
   * Registers a model before its first execution, so it is listed with zeros (ours; the seed's NDS entry is
   * created at load).
   *
   * @param handle `H_MODEL`.
   * @param name Model name.
   * @param vnc Logical NeuronCore.
   * @param ncs Its physical NeuronCores.
   */
  addModel(handle: number, name: string, vnc: number, ncs: readonly number[]): void {
    if (this.#models.has(handle)) return;
    const m = { handle, name, vnc, cores: new Map(ncs.map((nc) => [nc, new NcCounters()])) };
    this.#models.set(handle, m);
    this.#counting.set(handle, m);
    this.#left.delete(handle);
  }

  #core(model: number, nc: number): NcCounters {
    const m = this.#counting.get(model);
    if (m === undefined) {
      if (this.#left.has(model)) return this.#aggregate(nc);
      throw new RangeError(`Cannot update execution statistics: model ${model} is not registered`);
    }
    let c = m.cores.get(nc);
    if (c === undefined) m.cores.set(nc, c = new NcCounters());
    return c;
  }

  /**
   * `kmetric_update_nds_error_stats(kbl_infer_errors*)`: counts each set flag of one execution once.
   *
   * @param model `H_MODEL`.
   * @param nc Physical NeuronCore.
   * @param errors The execution's flags.
   * @throws {RangeError} If the model is not registered or `inferErrorFlags` is not 9 bytes.
   */
  updateNdsErrorStats(model: number, nc: number, errors: KblInferErrors): void {
    const flags = errors.inferErrorFlags;
    if (flags.length !== KBL_INFER_ERRORS_SIZE) {
      throw new RangeError(`kbl_infer_errors is ${KBL_INFER_ERRORS_SIZE} bytes, got ${flags.length}`);
    }
    const c = this.#core(model, nc);
    for (let i = 0; i < KBL_INFER_ERRORS_SIZE; i++) if (flags[i] !== 0) c.errors[i]++;
  }

  /**
   * `kmetric_update_nds_exec_stats(int, int, NRT_STATUS)`: counts one execution by its final status.
   *
   * @param model `H_MODEL`.
   * @param nc Physical NeuronCore.
   * @param status The execution's final `NRT_STATUS`.
   * @throws {RangeError} If the model is not registered.
   */
  updateNdsExecStats(model: number, nc: number, status: number): void {
    const c = this.#core(model, nc);
    c.executions++;
    c.byStatus.set(status, (c.byStatus.get(status) ?? 0) + 1);
  }

  /**
   * `kmetric_unload_model_update_agg_neff_id` (seed: lifecycle-error-model §3.2, `kmgr_unload_nn`, right after
   * `DMSTATE_STOPPING`): the model joins the last models unloaded, listed `loaded: false` and still counting the
   * executions its unload drains; the oldest one past `keepUnloaded` leaves the list and its counts join the
   * per-NeuronCore aggregate ({@linkcode Kmetric.retired}), as do executions of a recent one that end later.
   *
   * @param handle `H_MODEL`.
   * @returns The model's statistics so far (`loaded: false`), or `undefined` when it is not loaded.
   */
  forget(handle: number): ModelExecutionStats | undefined {
    const m = this.#models.get(handle);
    if (m === undefined) return undefined;
    const last = modelSnapshot(m, false);
    this.#models.delete(handle);
    this.#unloaded.push(m);
    if (this.#unloaded.length > this.#keepUnloaded) this.#retire(this.#unloaded.shift()!);
    return last;
  }

  /** A model leaves the list: its counts join the per-NeuronCore aggregate, and its handle is remembered a while. */
  #retire(m: ModelCounters): void {
    this.#counting.delete(m.handle);
    this.#left.add(m.handle);
    if (this.#left.size > LEFT_REMEMBERED) this.#left.delete(this.#left.values().next().value!);
    for (const [nc, c] of m.cores) {
      const agg = this.#aggregate(nc);
      agg.executions += c.executions;
      for (const [status, n] of c.byStatus) agg.byStatus.set(status, (agg.byStatus.get(status) ?? 0) + n);
      for (let i = 0; i < KBL_INFER_ERRORS_SIZE; i++) agg.errors[i] += c.errors[i];
    }
  }

  /** The aggregate of one NeuronCore. */
  #aggregate(nc: number): NcCounters {
    let agg = this.#retired.get(nc);
    if (agg === undefined) this.#retired.set(nc, agg = new NcCounters());
    return agg;
  }

  /** Models registered and not forgotten. */
  get size(): number {
    return this.#models.size;
  }

  /**
   * The summed statistics of every model forgotten and no longer listed, per physical NeuronCore in NeuronCore order
   * (only cores such a model had).
   *
   * @returns Snapshots (copies).
   */
  retired(): NcExecutionStats[] {
    return [...this.#retired].sort(([a], [b]) => a - b).map(([nc, c]) => ncSnapshot(nc, c));
  }

  /**
   * Every registered model's statistics and the last models forgotten (`loaded: false`), in handle order.
   *
   * @param loaded Whether a registered handle is still loaded.
   * @returns Snapshots (copies: later executions do not change them).
   */
  snapshot(loaded: (handle: number) => boolean): ModelExecutionStats[] {
    const live = [...this.#models.values()].map((m) => modelSnapshot(m, loaded(m.handle)));
    const gone = this.#unloaded.map((m) => modelSnapshot(m, false));
    return [...live, ...gone].sort((a, b) => a.handle - b.handle);
  }
}

/** One model's counters as a read-only snapshot. */
function modelSnapshot(m: ModelCounters, loaded: boolean): ModelExecutionStats {
  const cores = [...m.cores].sort(([a], [b]) => a - b).map(([nc, c]) => ncSnapshot(nc, c));
  const ok = cores.reduce((a, c) => a + (c.byStatus[NrtStatus.NRT_SUCCESS] ?? 0), 0);
  const all = cores.reduce((a, c) => a + c.executions, 0);
  return { handle: m.handle, name: m.name, vnc: m.vnc, loaded, succeeded: ok, failed: all - ok, cores };
}

/** Where the sync execute path reports one execution (`ExecServices.kmetric`). */
export interface KmetricTarget {
  /** The runtime's statistics. */
  readonly sink: Kmetric;
  /** `H_MODEL` of the executing model. */
  readonly model: number;
}

/**
 * The end of `kmgr_sync_exec` (seed: lifecycle-error-model §5.2): `kmetric_update_nds_error_stats` with the
 * execution's flags, then `kmetric_update_nds_exec_stats` with its final status, in that order.
 *
 * @param t The statistics and the model.
 * @param nc Physical NeuronCore.
 * @param errors The execution's `kbl_infer_errors`.
 * @param status The final status.
 */
export function kmetricUpdate(t: KmetricTarget, nc: number, errors: KblInferErrors, status: number): void {
  t.sink.updateNdsErrorStats(t.model, nc, errors);
  t.sink.updateNdsExecStats(t.model, nc, status);
}
