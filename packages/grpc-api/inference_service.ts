/**
 * The Open Inference Protocol's gRPC service as plain async functions over decoded messages: ServerLive,
 * ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer, on the same `ModelRepository`,
 * `ServedModel.infer`, `InferenceMetrics` and request validation as the REST app. It knows no gRPC library: the
 * adapter (`grpc_server.ts`) binds it to `@grpc/grpc-js`, and a test may call it directly.
 *
 * Every failure is thrown as a {@linkcode GrpcError} carrying the REST server's message for the same failure.
 *
 * Spec: grpc_predict_v2.proto; inference_rest.md for the meaning of each call.
 *
 * @module
 */
import type { Logger, Runtime } from "@nrt/core";
import {
  DEFAULT_LIMITS,
  type FailureReason,
  InferenceMetrics,
  modelMetadata,
  type ModelRepository,
  newTiming,
  notReadyError,
  SERVER_NAME,
  SERVER_VERSION,
} from "@nrt/http-api";
import { GrpcCode, GrpcError, toGrpcError } from "./grpc_status.ts";
import type {
  EmptyRequest,
  ModelInferRequest,
  ModelInferResponse,
  ModelMetadataResponse,
  ModelReadyResponse,
  ModelRequest,
  ServerLiveResponse,
  ServerMetadataResponse,
  ServerReadyResponse,
} from "./messages.ts";
import { modelInferResponse, planModelInfer } from "./model_infer.ts";

/** What a call knows about its transport. */
export interface CallContext {
  /**
   * Aborted when the client cancels the call or its deadline passes: a ModelInfer still waiting for an instance is
   * then dropped before it runs.
   */
  readonly signal: AbortSignal;
}

/** Bounds on what one request may make the service do. */
export interface ServiceLimits {
  /** Most entries in a `ModelInferRequest`'s `outputs` (default 256, as REST). */
  readonly maxRequestedOutputs?: number;
}

/** Options of {@linkcode createInferenceService}. */
export interface InferenceServiceOptions {
  /** The runtime the models run on. */
  readonly runtime: Runtime;
  /** The models (the REST app's repository, when both serve). */
  readonly repository: ModelRepository;
  /** Counters (default: a new set over `repository`; pass the REST app's to count both protocols together). */
  readonly metrics?: InferenceMetrics;
  /** Logger (default: the runtime's). */
  readonly logger?: Logger;
  /** Request limits. */
  readonly limits?: ServiceLimits;
}

/** The six RPCs of `inference.GRPCInferenceService`, one function each. */
export interface InferenceService {
  /** `ServerLive`: always live while the process answers. */
  serverLive(req: EmptyRequest, ctx: CallContext): Promise<ServerLiveResponse>;
  /** `ServerReady`: the runtime is up and no model is loading or poisoned (unloaded models do not count). */
  serverReady(req: EmptyRequest, ctx: CallContext): Promise<ServerReadyResponse>;
  /** `ModelReady`: the model is loaded and not poisoned. */
  modelReady(req: ModelRequest, ctx: CallContext): Promise<ModelReadyResponse>;
  /** `ServerMetadata`: name, version and the extensions of this service. */
  serverMetadata(req: EmptyRequest, ctx: CallContext): Promise<ServerMetadataResponse>;
  /** `ModelMetadata`: versions, platform `neuron`, inputs and outputs with protocol datatypes. */
  modelMetadata(req: ModelRequest, ctx: CallContext): Promise<ModelMetadataResponse>;
  /** `ModelInfer`: one inference. */
  modelInfer(req: ModelInferRequest, ctx: CallContext): Promise<ModelInferResponse>;
}

/**
 * The extensions `ServerMetadata` lists. Ours: none — the REST server's (binary tensor data, model repository,
 * statistics) are HTTP routes, and grpc_predict_v2.proto has no repository or statistics RPCs.
 */
export const GRPC_SERVER_EXTENSIONS: readonly string[] = [];

/**
 * Ours: the error of a `ModelInferRequest` the transport refused on the wire before decoding it (`wire_guard.ts`),
 * carried on the request's undecoded stand-in (its model, version and id). The service raises it once the model is
 * found ready, where the planner's refusals are raised, so it is answered and counted as they are.
 */
export const WIRE_REFUSAL: unique symbol = Symbol("nrt.grpc.wireRefusal");

/** A request with the error {@linkcode WIRE_REFUSAL} carries. */
type MaybeRefused = ModelInferRequest & { readonly [WIRE_REFUSAL]?: GrpcError };

const micros = (from: number): number => Math.round((performance.now() - from) * 1000);

/** Triton's failure reason of an error, as the REST app counts it (by the HTTP status of the same failure). */
function failureReason(e: GrpcError): FailureReason {
  if (e.code === GrpcCode.CANCELLED) return "OTHER"; // also the queued call dropped (HTTP 499)
  const status = e.httpStatus ?? 500;
  if (status === 503) return "REJECTED";
  return status >= 500 ? "BACKEND" : "OTHER";
}

/**
 * Creates the service over a runtime and a repository.
 *
 * @param options Runtime, repository, metrics, logger, limits.
 * @returns The six RPCs as async functions; each rejects with a {@linkcode GrpcError}.
 *
 * @example Ask whether a model is ready, without a transport
 * ```ts ignore
 * const service = createInferenceService({ runtime: rt, repository: repo });
 * const signal = new AbortController().signal;
 * console.log(await service.modelReady({ name: "relu", version: "" }, { signal })); // { ready: true }
 * ```
 */
export function createInferenceService(options: InferenceServiceOptions): InferenceService {
  const { runtime: rt, repository: repo } = options;
  const log = options.logger ?? rt.log;
  const metrics = options.metrics ?? new InferenceMetrics({ repository: repo });
  const limits = {
    maxJsonDepth: DEFAULT_LIMITS.maxJsonDepth,
    maxRequestedOutputs: options.limits?.maxRequestedOutputs ?? DEFAULT_LIMITS.maxRequestedOutputs,
  };

  /** Runs one RPC: every failure leaves as a GrpcError; server-side ones (REST 5xx) are logged, as REST does. */
  const rpc =
    <Req, Res>(name: string, fn: (req: Req, ctx: CallContext) => Res | Promise<Res>) =>
    async (req: Req, ctx: CallContext): Promise<Res> => {
      try {
        return await fn(req, ctx);
      } catch (e) {
        const err = toGrpcError(e);
        if (err.code !== GrpcCode.CANCELLED && (err.httpStatus ?? 500) >= 500) log.error(`${name}: ${err.message}`);
        throw err;
      }
    };

  return {
    serverLive: rpc("ServerLive", () => ({ live: true })),
    serverReady: rpc("ServerReady", () => ({ ready: repo.readiness().ready })),
    modelReady: rpc("ModelReady", (req: ModelRequest) => {
      const m = repo.lookup(req.name, req.version);
      return { ready: m.state === "READY" && m.reason === "" };
    }),
    serverMetadata: rpc(
      "ServerMetadata",
      () => ({ name: SERVER_NAME, version: SERVER_VERSION, extensions: GRPC_SERVER_EXTENSIONS }),
    ),
    modelMetadata: rpc("ModelMetadata", (req: ModelRequest) => modelMetadata(repo.lookup(req.name, req.version))),
    modelInfer: rpc("ModelInfer", async (req: ModelInferRequest, ctx: CallContext) => {
      const t0 = performance.now();
      const m = repo.lookup(req.model_name, req.model_version);
      const timing = newTiming();
      try {
        const served = m.served;
        if (m.state !== "READY" || served === undefined || served.notReadyReason !== undefined) throw notReadyError(m);
        const refusal = (req as MaybeRefused)[WIRE_REFUSAL];
        if (refusal !== undefined) throw refusal;
        const p = planModelInfer(req, served, limits);
        if (ctx.signal.aborted) throw cancelled(m.name, "before the execution");
        // A call cancelled while it waits for an instance leaves the queue unrun (HTTP 499 → CANCELLED).
        const outputs = await served.infer(p.plan.inputs, p.plan.outputs.map((o) => o.tensor.name), timing, ctx.signal);
        // The execution finished and released its instance; the answer would reach nobody.
        if (ctx.signal.aborted) throw cancelled(m.name, "during the execution");
        const res = modelInferResponse(m.name, m.version, p, outputs);
        metrics.recordRequest(m.name, micros(t0), timing);
        return res;
      } catch (e) {
        const err = toGrpcError(e);
        metrics.recordRequest(m.name, micros(t0), timing, failureReason(err));
        throw err;
      }
    }),
  };
}

/** The error of a call that ended on the client's side (cancelled, or past its deadline): counted, never sent. */
function cancelled(model: string, when: string): GrpcError {
  return new GrpcError(GrpcCode.CANCELLED, `Cannot answer the request for model "${model}": the call ended ${when}`);
}
