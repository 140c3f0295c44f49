/**
 * How an execution's `NRT_STATUS` is counted in neuron-monitor's `execution_stats`, and the latency percentiles:
 * defined once in `@nrt/http-api` (`neuron/execution_outcomes.ts`, which `/metrics` uses too) and re-exported here
 * for the report builders.
 *
 * @module
 */
export {
  EXECUTION_ERROR_KINDS,
  EXECUTION_OUTCOMES,
  type ExecutionErrorKind,
  executionErrorKind,
  type ExecutionOutcome,
  executionOutcome,
  type ExecutionSummaries,
  type LatencyPercentiles,
  latencyPercentiles,
  summarizeExecutions,
} from "@nrt/http-api";
