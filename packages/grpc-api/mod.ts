/**
 * `@nrt/grpc-api`: the Open Inference Protocol v2 over gRPC — `inference.GRPCInferenceService` of KServe's
 * grpc_predict_v2.proto (ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer with typed
 * and raw tensor contents) on `@grpc/grpc-js`, over the same model repository, served models, metrics and request
 * validation as `@nrt/http-api`'s REST server. See README.md for the status mapping, the limits and the raw/typed
 * rule.
 *
 * @example Serve a repository over REST and gRPC (in a composition root)
 * ```ts ignore
 * import { createInferenceApp, InferenceMetrics, ModelRepository } from "@nrt/http-api";
 * import { createGrpcInferenceServer } from "@nrt/grpc-api";
 * const metrics = new InferenceMetrics();
 * Deno.serve({ port: 8000 }, createInferenceApp({ runtime: rt, repository, metrics }).fetch);
 * const grpc = createGrpcInferenceServer({ runtime: rt, repository, metrics });
 * await grpc.listen("127.0.0.1", 8001);
 * ```
 *
 * @module
 */
export { CallGate, type GateCall, type GateRefusal } from "./call_gate.ts";
export {
  createGrpcInferenceServer,
  DEFAULT_GRPC_HOST,
  DEFAULT_GRPC_LIMITS,
  DEFAULT_GRPC_PORT,
  type DrainResult,
  GRPC_PREDICT_V2_PROTO,
  GRPC_SERVICE_NAME,
  type GrpcInferenceServer,
  type GrpcInferenceServerOptions,
  type GrpcLimits,
} from "./grpc_server.ts";
export {
  GrpcCode,
  grpcCodeName,
  GrpcError,
  type GrpcErrorOptions,
  grpcStatusOf,
  HTTP_GRPC_STATUS,
  NRT_GRPC_STATUS,
  toGrpcError,
} from "./grpc_status.ts";
export {
  type CallContext,
  createInferenceService,
  GRPC_SERVER_EXTENSIONS,
  type InferenceService,
  type InferenceServiceOptions,
  type ServiceLimits,
} from "./inference_service.ts";
export type * from "./messages.ts";
export { PROTO_LOADER_OPTIONS } from "./messages.ts";
export { BINARY_DATA_OUTPUT, type ModelInferPlan, modelInferResponse, planModelInfer } from "./model_infer.ts";
export { type ContentsField, contentsField, decodeContents, encodeContents } from "./tensor_contents.ts";
