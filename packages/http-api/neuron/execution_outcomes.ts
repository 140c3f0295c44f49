/**
 * How an execution's `NRT_STATUS` is counted in neuron-monitor's `execution_stats` (Neuron Monitor User Guide,
 * "execution_stats"): every finished execution adds one to exactly one `execution_summary` outcome, and every
 * execution that did not succeed also adds one to exactly one `error_summary` kind.
 *
 * The guide defines the buckets in words; which status lands in which is ours ("Ours"):
 *
 * | status | outcome | error kind |
 * |---|---|---|
 * | 0 NRT_SUCCESS | completed | (none) |
 * | 1003 NRT_EXEC_COMPLETED_WITH_NUM_ERR | completed_with_num_err | numerical |
 * | 1004 NRT_EXEC_COMPLETED_WITH_ERR | completed_with_err | generic |
 * | 5 NRT_TIMEOUT | timed_out | runtime |
 * | 2 NRT_INVALID, 1002 NRT_EXEC_BAD_INPUT | incorrect_input | model |
 * | 7 NRT_QUEUE_FULL | failed_to_queue | transient |
 * | 3 NRT_INVALID_HANDLE, 1006 NRT_EXEC_OOB | completed_with_err | model |
 * | 1005 NRT_EXEC_NC_BUSY, 1100 NRT_COLL_PENDING | completed_with_err | transient |
 * | 6, 1200, 1201, 1202, 1203, 1205, 1206 (hardware faults) | completed_with_err | hardware |
 * | 4, 9, 10, 11, 13, 14, 15, 101, 1204 (runtime conditions) | completed_with_err | runtime |
 * | 1 NRT_FAILURE and any other code | completed_with_err | generic |
 *
 * "Transient" is the guide's "recoverable errors": a retry of the same request can succeed.
 *
 * One definition for every reader: `nrt monitor`'s reports (`@nrt/cli`) and the exporter's metric names on
 * `/metrics` (`metrics.ts`), with the latency percentiles both use.
 *
 * @module
 */
import { NrtStatus } from "@nrt/core";

/** A key of `execution_summary`. */
export type ExecutionOutcome =
  | "completed"
  | "completed_with_err"
  | "completed_with_num_err"
  | "timed_out"
  | "incorrect_input"
  | "failed_to_queue";

/** A key of `error_summary`. */
export type ExecutionErrorKind = "generic" | "numerical" | "transient" | "model" | "runtime" | "hardware";

/** The `execution_summary` keys in the order the guide documents them. */
export const EXECUTION_OUTCOMES: readonly ExecutionOutcome[] = Object.freeze([
  "completed",
  "completed_with_err",
  "completed_with_num_err",
  "timed_out",
  "incorrect_input",
  "failed_to_queue",
]);

/** The `error_summary` keys in the order the guide documents them (the JSON key is `numerical`). */
export const EXECUTION_ERROR_KINDS: readonly ExecutionErrorKind[] = Object.freeze([
  "generic",
  "numerical",
  "transient",
  "model",
  "runtime",
  "hardware",
]);

const S = NrtStatus;

const OUTCOME: ReadonlyMap<number, ExecutionOutcome> = new Map<number, ExecutionOutcome>([
  [S.NRT_SUCCESS, "completed"],
  [S.NRT_EXEC_COMPLETED_WITH_NUM_ERR, "completed_with_num_err"],
  [S.NRT_TIMEOUT, "timed_out"],
  [S.NRT_INVALID, "incorrect_input"],
  [S.NRT_EXEC_BAD_INPUT, "incorrect_input"],
  [S.NRT_QUEUE_FULL, "failed_to_queue"],
]);

const ERROR_KIND: ReadonlyMap<number, ExecutionErrorKind> = new Map<number, ExecutionErrorKind>([
  [S.NRT_EXEC_COMPLETED_WITH_NUM_ERR, "numerical"],
  [S.NRT_EXEC_COMPLETED_WITH_ERR, "generic"],
  [S.NRT_FAILURE, "generic"],
  [S.NRT_TIMEOUT, "runtime"],
  [S.NRT_INVALID, "model"],
  [S.NRT_EXEC_BAD_INPUT, "model"],
  [S.NRT_INVALID_HANDLE, "model"],
  [S.NRT_EXEC_OOB, "model"],
  [S.NRT_QUEUE_FULL, "transient"],
  [S.NRT_EXEC_NC_BUSY, "transient"],
  [S.NRT_COLL_PENDING, "transient"],
  [S.NRT_HW_ERROR, "hardware"],
  [S.NRT_EXEC_HW_ERR_COLLECTIVES, "hardware"],
  [S.NRT_EXEC_HW_ERR_HBM_UE, "hardware"],
  [S.NRT_EXEC_HW_ERR_NC_UE, "hardware"],
  [S.NRT_EXEC_HW_ERR_DMA_ABORT, "hardware"],
  [S.NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE, "hardware"],
  [S.NRT_NETWORK_PROXY_FAILURE, "hardware"],
  [S.NRT_RESOURCE, "runtime"],
  [S.NRT_LOAD_NOT_ENOUGH_NC, "runtime"],
  [S.NRT_UNSUPPORTED_NEFF_VERSION, "runtime"],
  [S.NRT_FAIL_HOST_MEM_ALLOC, "runtime"],
  [S.NRT_UNINITIALIZED, "runtime"],
  [S.NRT_CLOSED, "runtime"],
  [S.NRT_QUEUE_EMPTY, "runtime"],
  [S.NRT_EXEC_UNIT_UNRECOVERABLE, "runtime"],
  [S.NRT_EXEC_SW_NQ_OVERFLOW, "runtime"],
]);

/**
 * The `execution_summary` outcome an execution ending in `status` counts as.
 *
 * @example Classify a numerical error
 * ```ts
 * import { executionOutcome } from "./execution_outcomes.ts";
 * console.log(executionOutcome(1003)); // "completed_with_num_err"
 * ```
 */
export function executionOutcome(status: number): ExecutionOutcome {
  return OUTCOME.get(status) ?? "completed_with_err";
}

/** The `error_summary` kind an execution ending in `status` counts as, or `null` for a success. */
export function executionErrorKind(status: number): ExecutionErrorKind | null {
  if (status === S.NRT_SUCCESS) return null;
  return ERROR_KIND.get(status) ?? "generic";
}

/** Counts by outcome and by error kind. */
export interface ExecutionSummaries {
  /** `execution_summary`. */
  readonly execution_summary: Record<ExecutionOutcome, number>;
  /** `error_summary`. */
  readonly error_summary: Record<ExecutionErrorKind, number>;
}

/**
 * Buckets execution counts keyed by `NRT_STATUS` into neuron-monitor's two summaries.
 *
 * @param counts Executions finished during the period, by status.
 * @returns Both summaries, every documented key present.
 * @throws {RangeError} When a count is not a non-negative integer, or a key is not an integer status.
 */
export function summarizeExecutions(counts: Readonly<Record<number, number>>): ExecutionSummaries {
  const execution_summary = Object.fromEntries(EXECUTION_OUTCOMES.map((k) => [k, 0])) as Record<
    ExecutionOutcome,
    number
  >;
  const error_summary = Object.fromEntries(EXECUTION_ERROR_KINDS.map((k) => [k, 0])) as Record<
    ExecutionErrorKind,
    number
  >;
  for (const [key, n] of Object.entries(counts)) {
    const status = Number(key);
    if (!Number.isInteger(status)) {
      throw new RangeError(`Cannot count executions: status key "${key}" is not an integer`);
    }
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new RangeError(`Cannot count executions: status ${status} has count ${n}, expected a non-negative integer`);
    }
    execution_summary[executionOutcome(status)] += n;
    const kind = executionErrorKind(status);
    if (kind !== null) error_summary[kind] += n;
  }
  return { execution_summary, error_summary };
}

/** Percentiles of one latency, in seconds (neuron-monitor `latency_stats`, "execution_stats"). */
export interface LatencyPercentiles {
  /** Minimum. */
  p0: number;
  /** 1st percentile. */
  p1: number;
  /** 25th percentile. */
  p25: number;
  /** Median. */
  p50: number;
  /** 75th percentile. */
  p75: number;
  /** 99th percentile. */
  p99: number;
  /** Maximum. */
  p100: number;
}

const PERCENTILES = [0, 1, 25, 50, 75, 99, 100] as const;

/**
 * Nearest-rank percentiles (Ours) of latency samples, or `null` for none.
 *
 * @param samples Latencies in seconds, any order.
 * @returns `p0` (minimum) to `p100` (maximum).
 * @throws {RangeError} For a sample that is not a finite non-negative duration.
 */
export function latencyPercentiles(samples: readonly number[]): LatencyPercentiles | null {
  if (samples.length === 0) return null;
  for (const s of samples) {
    if (!Number.isFinite(s) || s < 0) throw new RangeError(`Cannot summarise latency: sample ${s} is not a duration`);
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const [p0, p1, p25, p50, p75, p99, p100] = PERCENTILES.map(at);
  return { p0, p1, p25, p50, p75, p99, p100 };
}
