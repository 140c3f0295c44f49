/**
 * `@nrt/http-api`: the REST inference server — the Open Inference Protocol v2 (KServe / Triton) on Hono, over
 * Web-standard `Request`/`Response` only, with a model repository of NEFF files, the binary tensor, model
 * repository and statistics extensions, and Prometheus metrics; and a live device dashboard in the browser with
 * opt-in operator actions. See docs/rest-api.md and docs/dashboard.md.
 *
 * @example Serve a repository (in a composition root)
 * ```ts ignore
 * import { createInferenceApp, ModelRepository } from "@nrt/http-api";
 * const repository = new ModelRepository({ runtime: rt, files });
 * await repository.scan();
 * await repository.loadAll();
 * Deno.serve({ port: 8000 }, createInferenceApp({ runtime: rt, repository }).fetch);
 * ```
 *
 * @module
 */
export type { AccessOptions, ModelControlMode } from "./access.ts";
export type { InferenceApp } from "./inference_app.ts";
export { BodyBudget, parseJson, readBody } from "./body.ts";
export {
  type DatatypeInfo,
  datatypeInfo,
  decodeJsonData,
  dtypeInfo,
  encodeJsonData,
  jsonDataText,
} from "./datatype.ts";
export { HttpError, type HttpErrorOptions, httpStatusOf, NRT_HTTP_STATUS, toHttpError } from "./http_error.ts";
export {
  checkShape,
  type DecodedInput,
  type DecodedOutput,
  type DecodedRequest,
  type InferPlan,
  JSON_BYTES_PER_ELEMENT,
  JSON_OVERHEAD_BYTES,
  MAX_RANK,
  parseInferRequest,
  planInfer,
  type PlannedOutput,
  requestBodyLimit,
  type RequestLimits,
  type TensorSignature,
} from "./infer_request.ts";
export { INFERENCE_HEADER_CONTENT_LENGTH, inferResponse } from "./infer_response.ts";
export {
  createInferenceApp,
  DEFAULT_LIMITS,
  type InferenceAppOptions,
  type InferenceLimits,
  SERVER_EXTENSIONS,
  SERVER_NAME,
  SERVER_VERSION,
} from "./inference_app.ts";
export {
  DEVICE_CATEGORY_OF,
  DEVICE_MEMORY_CATEGORIES,
  deviceMemoryBreakdown,
  type DeviceMemoryCategory,
  type DmemUsageRow,
  HOST_CATEGORY_OF,
  HOST_MEMORY_CATEGORIES,
  hostMemoryBreakdown,
  type HostMemoryCategory,
  MODEL_MEMORY_CATEGORIES,
  modelMemoryBreakdown,
  type ModelMemoryCategory,
} from "./neuron/memory_categories.ts";
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
} from "./neuron/execution_outcomes.ts";
export {
  type LatencySample,
  NeuronActivity,
  type NeuronActivityOptions,
  type NeuronStatus,
  neuronStatus,
} from "./neuron_activity.ts";
export {
  type FailureReason,
  InferenceMetrics,
  type InferenceMetricsOptions,
  type ModelStatistics,
  type ModelSummary,
  type StatDuration,
} from "./metrics.ts";
export {
  type CoreUtilization,
  type DashboardLogEntry,
  DashboardMonitor,
  type DashboardMonitorOptions,
  type LastExecution,
  LATENCY_BOUNDS_US,
  type LatencyHistogram,
  type RunningExecution,
  STEP_SAMPLE_MS,
  type TimelineStep,
  UTILIZATION_SECONDS,
} from "./dashboard/dashboard_monitor.ts";
export type { DashboardOptions } from "./dashboard/dashboard_routes.ts";
export {
  type CoreState,
  DASHBOARD_LOG_BATCH,
  type DashboardState,
  type MemoryView,
  type ModelView,
} from "./dashboard/dashboard_state.ts";
export type {
  DeviceView,
  DeviceViewProvider,
  FaultControl,
  FaultView,
  NeuronCoreView,
  Q7CoreView,
} from "./dashboard/device_view.ts";
export { DASHBOARD_HTML } from "./dashboard/dashboard_page.ts";
export { DASHBOARD_SCRIPT } from "./dashboard/dashboard_script.ts";
export {
  DEFAULT_MAX_TENSOR_BYTES,
  filesFromMap,
  isValidModelName,
  isValidModelVersion,
  MAX_INSTANCES,
  MODEL_VERSION,
  type ModelConfig,
  type ModelFileName,
  ModelRepository,
  type ModelRepositoryOptions,
  type ModelState,
  type ModelUpload,
  notReadyError,
  parseModelConfig,
  type Readiness,
  type RepositoryFiles,
  type RepositoryIndexEntry,
  type RepositoryModel,
} from "./model_repository.ts";
export {
  type InstanceMetadata,
  instanceMetadata,
  MODEL_PLATFORM,
  type ModelMetadata,
  modelMetadata,
  type TensorMetadata,
  tensorMetadata,
} from "./model_metadata.ts";
export { MAX_UPLOAD_CONFIG_BYTES, readUpload, uploadBodyLimit } from "./model_upload.ts";
export {
  CLIENT_CLOSED_REQUEST,
  type ClientSignal,
  CoreLoad,
  type InferTiming,
  type InstanceView,
  newTiming,
  ServedModel,
  type ServedModelOptions,
} from "./served_model.ts";
