/**
 * The gRPC adapter: binds {@linkcode createInferenceService}'s functions to `@grpc/grpc-js` as
 * `inference.GRPCInferenceService`, loaded at runtime from this package's copy of grpc_predict_v2.proto. It owns
 * the transport's limits: the largest message read (the REST body limit by default), HTTP/2 keepalive, streams per
 * connection, and the {@linkcode CallGate} that bounds the calls served at once; and the lifecycle: listen, drain,
 * close. It is the one file of the package that imports the gRPC library (which runs on `node:http2` under Node,
 * Bun and Deno).
 *
 * A call's end on the client's side (cancel, deadline) aborts its {@linkcode CallContext.signal}; the execution it
 * started still finishes and releases its instance, since an execution cannot be stopped halfway.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { DEFAULT_LIMITS } from "@nrt/http-api";
import { constants as http2 } from "node:http2";
import { fileURLToPath } from "node:url";
import { CallGate, type GateRefusal } from "./call_gate.ts";
import { GrpcCode, GrpcError, toGrpcError } from "./grpc_status.ts";
import {
  type CallContext,
  createInferenceService,
  type InferenceService,
  type InferenceServiceOptions,
  type ServiceLimits,
  WIRE_REFUSAL,
} from "./inference_service.ts";
import { type ModelInferRequest, PROTO_LOADER_OPTIONS } from "./messages.ts";
import { type GoawayRelay, listenGoawayRelay } from "./goaway_relay.ts";
import { checkFraming, checkInferRequest, type InferBounds, inferBounds, readInferHead } from "./wire_guard.ts";

/** Bounds on what clients may make the server hold or do. */
export interface GrpcLimits extends ServiceLimits {
  /**
   * Largest request message read, in bytes; a larger one ends its call with `RESOURCE_EXHAUSTED` (default 64 MiB,
   * the REST body limit).
   */
  readonly maxReceiveMessageBytes?: number;
  /** ModelInfer calls served at once: messages read, work running and answers written (default 64). */
  readonly maxConcurrentCalls?: number;
  /**
   * Handlers of the other RPCs (ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata) running at once,
   * on slots of their own, so that a liveness or readiness check is not queued behind inferences (default 8, ours).
   * Such a call takes its slot only once its whole message has arrived, and gives it back once its handler has
   * answered (ours): a client that sends headers and nothing more, or reads no answer, holds no slot. These calls
   * are bounded instead by their count, at most this plus `maxPendingCalls` held at once whatever they are doing
   * (their message arriving, waiting for a slot, running, their answer being written; past them
   * `RESOURCE_EXHAUSTED`), and by the size of their message, `maxStatusMessageBytes`.
   */
  readonly maxConcurrentStatusCalls?: number;
  /**
   * Largest request message of the RPCs other than ModelInfer, in bytes: their messages are read before they take
   * a slot, so each is bounded far below `maxReceiveMessageBytes`; a larger one ends its call with
   * `RESOURCE_EXHAUSTED` (default 16 KiB, ours; a valid model name and version take under 150 bytes).
   */
  readonly maxStatusMessageBytes?: number;
  /**
   * How long a call may take to deliver its whole message, from its admission (ModelInfer) or its headers (the
   * others); past it the call ends with `DEADLINE_EXCEEDED` and frees its slot or place (default 60 s, the REST body
   * deadline). An answer its client has not taken within as long has its stream reset, which frees them too.
   */
  readonly messageDeadlineMs?: number;
  /**
   * Calls waiting for one of those slots: ModelInfer calls unread, the others with their message read (each has a
   * queue this long); past them a call ends with `RESOURCE_EXHAUSTED` (default 1024).
   */
  readonly maxPendingCalls?: number;
  /** HTTP/2 streams one connection may open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`, default 256). */
  readonly maxConcurrentStreams?: number;
  /** Idle time before the server pings a connection (default 2 h, as gRPC's own servers). */
  readonly keepaliveTimeMs?: number;
  /** How long the server waits for a ping's answer before it drops the connection (default 20 s). */
  readonly keepaliveTimeoutMs?: number;
}

/** The default {@linkcode GrpcLimits}. */
export const DEFAULT_GRPC_LIMITS: Required<GrpcLimits> = {
  maxReceiveMessageBytes: DEFAULT_LIMITS.maxBodyBytes,
  maxConcurrentCalls: 64,
  maxConcurrentStatusCalls: 8,
  maxStatusMessageBytes: 16 * 1024,
  messageDeadlineMs: DEFAULT_LIMITS.bodyDeadlineMs,
  maxPendingCalls: 1024,
  maxConcurrentStreams: 256,
  keepaliveTimeMs: 2 * 60 * 60 * 1000,
  keepaliveTimeoutMs: 20_000,
  maxRequestedOutputs: DEFAULT_LIMITS.maxRequestedOutputs,
};

/** The interface {@linkcode GrpcInferenceServer.listen} binds by default: loopback only. */
export const DEFAULT_GRPC_HOST = "127.0.0.1";
/** The port {@linkcode GrpcInferenceServer.listen} binds by default (Triton's gRPC port). */
export const DEFAULT_GRPC_PORT = 8001;

/** The proto file the server loads: this package's copy of the fixture. */
export const GRPC_PREDICT_V2_PROTO: URL = new URL("./grpc_predict_v2.proto", import.meta.url);

/** The gRPC service's full name. */
export const GRPC_SERVICE_NAME = "inference.GRPCInferenceService";

/** Options of {@linkcode createGrpcInferenceServer}. */
export interface GrpcInferenceServerOptions extends InferenceServiceOptions {
  /** Transport and request limits (defaults: {@linkcode DEFAULT_GRPC_LIMITS}). */
  readonly limits?: GrpcLimits;
  /**
   * Listen behind a relay that drops the clients' GOAWAY frames (`goaway_relay.ts`), the server itself on an
   * ephemeral port of 127.0.0.1 (default: under Deno only, whose `node:http2` can abort the process on a GOAWAY,
   * denoland/deno#36788). Ours.
   */
  readonly relayGoaway?: boolean;
}

/** What {@linkcode GrpcInferenceServer.drain} reports. */
export interface DrainResult {
  /** Calls still running at the deadline, whose connections were then closed (0 when all finished). */
  readonly unfinished: number;
}

/** A gRPC inference server. */
export interface GrpcInferenceServer {
  /**
   * Binds a port and serves on it (it may be called again for more addresses).
   *
   * @param host Interface (default {@linkcode DEFAULT_GRPC_HOST}); an IPv6 address without brackets.
   * @param port Port (default {@linkcode DEFAULT_GRPC_PORT}); 0 picks a free one.
   * @returns The port bound.
   */
  listen(host?: string, port?: number): Promise<{ readonly port: number }>;
  /**
   * Graceful shutdown: refuses new and waiting calls with `UNAVAILABLE`, stops listening, lets the running calls
   * finish, and closes whatever is left at the deadline. Once no call is left, connections whose clients have not
   * closed their streams get a second more, then close.
   *
   * @param deadlineMs How long the running calls may take.
   * @returns How many calls were still running at the deadline.
   */
  drain(deadlineMs: number): Promise<DrainResult>;
  /**
   * Stops at once: closes every connection. The handlers already running still finish their executions (an
   * execution cannot be stopped halfway; the runtime's execution timeout bounds it) and release their instances.
   *
   * @returns A promise that settles when no handler is left running.
   */
  close(): Promise<void>;
  /**
   * Calls being served: messages being read, handlers running (also for calls the client has left), answers being
   * written; for ModelInfer, the calls holding a slot.
   */
  readonly activeCalls: number;
  /** Calls waiting for a slot: ModelInfer calls unread, the others with their message read. */
  readonly pendingCalls: number;
}

/**
 * The longest delay a timer takes (2^31 − 1 ms, about 24.8 days): Node, Bun and Deno run a longer one after 1 ms, so
 * a longer deadline would end every call at once.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Once every call has ended on the server, how long a drain still waits for the clients to close their side of their
 * streams before it closes the connections (ours). An answered call whose client never ended its request (a status
 * sent before the message's end, such as a refusal) keeps its stream half open, and the connection with it: the
 * drain then waited for its whole deadline.
 */
const SESSION_GRACE_MS = 1000;

function checkLimit(name: string, v: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new RangeError(
      `Cannot create the gRPC server: limits.${name} is ${v}, expected an integer ${
        max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`
      }`,
    );
  }
}

type Rpc<Req, Res> = (req: Req, ctx: CallContext) => Promise<Res>;

/** A request message the transport could not read: its call answers with the error, its handler never runs. */
class Unreadable {
  constructor(readonly error: GrpcError) {}
}

/** The error of a message the proto's decoder refused. */
function undecodable(type: string, e: unknown): GrpcError {
  if (e instanceof GrpcError) return e;
  return new GrpcError(
    GrpcCode.INVALID_ARGUMENT,
    `Cannot read the request: the message is not a well-formed ${type} (${e instanceof Error ? e.message : String(e)})`,
    { httpStatus: 400 },
  );
}

/**
 * A request deserializer that never throws: grpc-js answers a throwing one with `INTERNAL`, a status for server
 * faults, where a malformed message is the client's (`INVALID_ARGUMENT`). The framing is checked first: the decoder
 * reads a truncated field as far as the bytes go.
 */
function readable(type: string, decode: (buf: Buffer) => unknown): (buf: Buffer) => unknown {
  return (buf) => {
    try {
      checkFraming(buf, type);
      return decode(buf);
    } catch (e) {
      return new Unreadable(undecodable(type, e));
    }
  };
}

/** One unary handler: the call's cancellation becomes the context's signal, a failure its gRPC status. */
function unary<Req, Res>(fn: Rpc<Req, Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    if ((call.request as unknown) instanceof Unreadable) {
      callback(toGrpcError((call.request as unknown as Unreadable).error));
      return;
    }
    const ac = new AbortController();
    // grpc-js also emits "cancelled" once a finished call's stream closes; aborting then changes nothing.
    call.on("cancelled", () => ac.abort());
    fn(call.request, { signal: ac.signal }).then(
      (res) => callback(null, res),
      (e) => callback(toGrpcError(e)),
    );
  };
}

function refusal(why: GateRefusal, gate: CallGate): { code: GrpcCode; details: string } {
  return why === "closed"
    ? { code: GrpcCode.UNAVAILABLE, details: "Cannot accept the call: the server is shutting down" }
    : {
      code: GrpcCode.RESOURCE_EXHAUSTED,
      details: `Cannot accept the call: ${gate.maxActive} calls are being served and ${gate.maxPending} are waiting`,
    };
}

/**
 * A status grpc-js can send. Its details go out percent-encoded by `encodeURI`, which throws on half a surrogate pair:
 * the call was never answered and the error escaped as an unhandled rejection. A message quoting a client's name cut
 * to its first 128 UTF-16 units has one when the cut falls inside a pair; it becomes U+FFFD (ours).
 */
function sendable<S extends { readonly details: string }>(status: S): S {
  const details = status.details.toWellFormed();
  return details === status.details ? status : { ...status, details };
}

/**
 * grpc-js's own statuses for a unary call that broke the protocol, which name a client's mistake `UNIMPLEMENTED` as
 * though the RPC did not exist (and a message cut short as no message), with their `INVALID_ARGUMENT` (ours).
 */
const UNARY_MISUSE: ReadonlyArray<readonly [prefix: string, details: string]> = [
  ["Received no request message for ", "Cannot read the request: the call ended before a whole message arrived"],
  [
    "Received a second request message for ",
    "Cannot read the request: a unary call carries one message, and a second one arrived",
  ],
];

/** A status of grpc-js's for a client's protocol mistake, as this server answers it. */
function clientMistake<S extends { readonly code: number; readonly details: string }>(status: S): S {
  if (status.code !== GrpcCode.UNIMPLEMENTED) return status;
  const row = UNARY_MISUSE.find(([prefix]) => status.details.startsWith(prefix));
  return row === undefined ? status : { ...status, code: GrpcCode.INVALID_ARGUMENT, details: row[1] };
}

const NGHTTP2_CANCEL = http2.NGHTTP2_CANCEL;

/** The RPC whose calls take the inference slots; every other one takes the status slots. */
const MODEL_INFER_PATH = "/inference.GRPCInferenceService/ModelInfer";

/** The gates a server's calls pass, and the calls of the status RPCs still waiting for their message. */
interface Gates {
  /** ModelInfer's slots, held from a call's headers until nothing of it is left. */
  readonly infer: CallGate;
  /** The other RPCs' slots, held from a call's whole message until its handler answers (ours). */
  readonly status: CallGate;
  /** The other RPCs' calls held at once, from their headers until nothing of them is left (ours). */
  readonly statusHeld: CallGate;
  /** Refusals (`UNAVAILABLE`) of the status calls whose message is still arriving, which drain and close run. */
  readonly arriving: Set<() => void>;
}

/**
 * The interceptor that passes every call through its gates, holding what it took until nothing of the call is left
 * on the server.
 *
 * A ModelInfer call enters its gate before its message is read, and holds its slot until its status is sent, which
 * for an answer is once the answer has been written out, or until the client leaves (its execution finished and its
 * instance was released first).
 *
 * A call of another RPC takes a place of `statusHeld` at its headers and reads its message at once, capped at
 * `maxStatusMessageBytes`; it takes a status slot only once its whole message is in, and gives it back once its
 * handler has answered, keeping its place until the answer is written out (ours). So clients that send headers and
 * then nothing, or never read their answers, hold places but no slot: a liveness check still answers while the
 * places are not all taken, and the places bound how many status calls, messages and answers the server holds.
 *
 * A call whose message has not all arrived within `messageDeadlineMs` (from its admission for ModelInfer, from its
 * headers for the others) ends with `DEADLINE_EXCEEDED`: a client that sends headers and then nothing cannot hold a
 * slot or place for ever (ours, as the REST body deadline). Likewise an answer not written out within
 * `messageDeadlineMs`, its client granting no flow-control window, has its stream reset (ours): the answers waiting
 * in memory are those of the slots and places, whatever a client leaves unread.
 */
function gateInterceptor(
  gates: Gates,
  limits: { readonly messageDeadlineMs: number; readonly maxStatusMessageBytes: number },
): grpc.ServerInterceptor {
  const { messageDeadlineMs } = limits;
  return (method, call) => {
    const infer = method.path === MODEL_INFER_PATH;
    const gate = infer ? gates.infer : gates.status;
    let releaseSlot = (): void => {};
    let releaseHeld = (): void => {};
    let done = false; // the call has ended on the server: what it takes from now on is given back at once
    let handled = false; // the handler runs: it answers, and the slot goes with its answer or status
    let answered = false; // its answer is being written: the status follows once it is out
    let cancelled = false;
    let late: ReturnType<typeof setTimeout> | undefined;
    const onTime = (): void => {
      if (late !== undefined) clearTimeout(late);
      late = undefined;
    };
    const release = (): void => {
      done = true;
      gates.arriving.delete(shutDown);
      releaseSlot();
      releaseHeld();
    };
    // `call` is the call under this interceptor: a status sent on it bypasses the responder below, so what the call
    // holds is released first, as the responder's withSendStatus does.
    const end = (status: { code: GrpcCode; details: string }): void => {
      release();
      call.sendStatus(status);
    };
    function shutDown(): void {
      end(refusal("closed", gate));
    }
    /** Enters a gate; a call that ended within `enter` (a handler admitted and answering at once) leaves it again. */
    const enter = (g: CallGate, admit: () => void): () => void => {
      const leave = g.enter({ admit, refuse: (why) => end(refusal(why, gate)) });
      if (done) leave();
      return leave;
    };
    const read = (metadata: grpc.Metadata, next: (metadata: grpc.Metadata) => void): void => {
      late = setTimeout(() => {
        late = undefined;
        if (!handled) {
          end({
            code: GrpcCode.DEADLINE_EXCEEDED,
            details: `Cannot read the request: its message did not arrive within ${messageDeadlineMs} ms`,
          });
        }
      }, messageDeadlineMs);
      next(metadata);
    };
    const listener = new grpc.ServerListenerBuilder()
      // The handler asks for the message only after it sees the metadata; holding the metadata holds the read.
      .withOnReceiveMetadata((metadata, next) => {
        if (infer) {
          releaseSlot = enter(gates.infer, () => read(metadata, next));
        } else if (!limitReceive(call, limits.maxStatusMessageBytes)) {
          end({
            code: GrpcCode.INTERNAL,
            details: "Cannot accept the call: the gRPC library gives no way to bound the size of its message",
          });
        } else {
          releaseHeld = enter(gates.statusHeld, () => {
            gates.arriving.add(shutDown);
            read(metadata, next);
          });
        }
      })
      // The handler runs on the half-close, once the whole message is in; holding it holds the handler.
      .withOnReceiveHalfClose((next) => {
        onTime();
        if (done) return; // ended already (past its deadline, refused at a drain): no handler runs
        if (infer) {
          handled = true;
          next();
        } else {
          gates.arriving.delete(shutDown);
          releaseSlot = enter(gates.status, () => {
            handled = true;
            next();
          });
        }
      })
      .withOnCancel(() => {
        cancelled = true;
        onTime();
        // A handler still running releases the slot when it answers; an answer being written is dropped with the call.
        if (!handled || answered) release();
      })
      .build();
    const responder = new grpc.ResponderBuilder()
      .withStart((next) => next(listener))
      .withSendMessage((message, next) => {
        answered = true;
        // A status RPC's slot is its handler's: its answer, small, is written out on the call's place alone.
        if (!infer) releaseSlot();
        // grpc-js drops the answer of a call that has ended, and sends no status after it.
        if (cancelled) release();
        else {
          late = setTimeout(() => {
            late = undefined;
            release();
            resetStream(call);
          }, messageDeadlineMs);
        }
        next(message);
      })
      .withSendStatus((status, next) => {
        onTime();
        release();
        next(sendable(clientMistake(status)));
      })
      .build();
    return new grpc.ServerInterceptingCall(call, responder);
  };
}

/**
 * Lowers the largest message one call reads to `bytes`, on its length prefix and, for a compressed message, on its
 * decompressed size. grpc-js has no API for it: the limit is in two fields of the call the interceptor is handed
 * (grpc-js 1.14.7's `BaseServerInterceptingCall` and its `StreamDecoder`), read as each message arrives, so setting
 * them before the first read bounds the call; the tests check it.
 *
 * @returns Whether both fields were there to set.
 */
function limitReceive(call: grpc.ServerInterceptingCallInterface, bytes: number): boolean {
  const c = call as unknown as { maxReceiveMessageSize?: unknown; decoder?: { maxReadMessageLength?: unknown } };
  if (typeof c.maxReceiveMessageSize !== "number" || typeof c.decoder?.maxReadMessageLength !== "number") return false;
  c.maxReceiveMessageSize = bytes;
  c.decoder.maxReadMessageLength = bytes;
  return true;
}

/**
 * Resets a call's HTTP/2 stream (`CANCEL`), dropping what is queued on it. grpc-js has no API for it: the stream is
 * a field of the call the interceptor is handed (grpc-js 1.14.7's `BaseServerInterceptingCall`); the tests check it.
 */
function resetStream(call: grpc.ServerInterceptingCallInterface): void {
  const stream = (call as unknown as { stream?: { close?(code: number): void } }).stream;
  stream?.close?.(NGHTTP2_CANCEL);
}

/**
 * Creates the gRPC server of the Open Inference Protocol over a runtime and a repository; it listens once
 * {@linkcode GrpcInferenceServer.listen} is called.
 *
 * @param options Runtime, repository (share the REST app's), metrics (share the REST app's to count both
 *   protocols together), logger, limits.
 * @returns The server.
 * @throws {RangeError} For a limit that is not a positive integer.
 *
 * @example Serve next to the REST app (in a composition root)
 * ```ts ignore
 * import { createGrpcInferenceServer } from "@nrt/grpc-api";
 * const grpc = createGrpcInferenceServer({ runtime: rt, repository, metrics });
 * const { port } = await grpc.listen("127.0.0.1", 8001);
 * // on SIGTERM:
 * await grpc.drain(10_000);
 * ```
 */
export function createGrpcInferenceServer(options: GrpcInferenceServerOptions): GrpcInferenceServer {
  const limits = { ...DEFAULT_GRPC_LIMITS, ...options.limits };
  checkLimit("maxReceiveMessageBytes", limits.maxReceiveMessageBytes, 1);
  checkLimit("maxConcurrentCalls", limits.maxConcurrentCalls, 1);
  checkLimit("maxConcurrentStatusCalls", limits.maxConcurrentStatusCalls, 1);
  checkLimit("maxStatusMessageBytes", limits.maxStatusMessageBytes, 1);
  checkLimit("messageDeadlineMs", limits.messageDeadlineMs, 1, MAX_TIMER_MS);
  checkLimit("maxPendingCalls", limits.maxPendingCalls, 0);
  checkLimit("maxConcurrentStreams", limits.maxConcurrentStreams, 1);
  checkLimit("keepaliveTimeMs", limits.keepaliveTimeMs, 1);
  checkLimit("keepaliveTimeoutMs", limits.keepaliveTimeoutMs, 1, MAX_TIMER_MS);
  checkLimit("maxRequestedOutputs", limits.maxRequestedOutputs, 0);
  const service: InferenceService = createInferenceService({ ...options, limits });
  const gates: Gates = {
    infer: new CallGate(limits.maxConcurrentCalls, limits.maxPendingCalls),
    status: new CallGate(limits.maxConcurrentStatusCalls, limits.maxPendingCalls),
    // As many status calls as the status slots and their queue held before they read their messages first.
    statusHeld: new CallGate(limits.maxConcurrentStatusCalls + limits.maxPendingCalls, 0),
    arriving: new Set(),
  };
  /** Refuses the status calls whose message is still arriving, and closes the gates; settles once they are idle. */
  const closeGates = (): Promise<void> => {
    const idle = Promise.all([gates.infer.close(), gates.status.close(), gates.statusHeld.close()]);
    for (const refuse of [...gates.arriving]) refuse();
    return idle.then(() => {});
  };
  /** Calls being served; the status calls held are served unless they wait for a slot. */
  const activeCalls = (): number => gates.infer.active + gates.statusHeld.active - gates.status.pending;
  const definition = loadSync(fileURLToPath(GRPC_PREDICT_V2_PROTO), { ...PROTO_LOADER_OPTIONS });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    inference: { GRPCInferenceService: { service: grpc.ServiceDefinition } };
  };
  // Every request deserializer answers a malformed message with INVALID_ARGUMENT; ModelInfer's hands over the bytes,
  // which `inferRequest` checks on the wire against the model they name before decoding them (wire_guard.ts).
  const methods = loaded.inference.GRPCInferenceService.service;
  const decodeInfer = methods.ModelInfer.requestDeserialize;
  const serviceDefinition: grpc.ServiceDefinition = Object.fromEntries(
    Object.entries(methods).map(([name, m]) => [name, {
      ...m,
      requestDeserialize: name === "ModelInfer"
        ? (buf: Buffer) => buf
        : readable(`${name}Request`, m.requestDeserialize),
    }]),
  );
  const bounds = new WeakMap<object, InferBounds>();
  const repository = options.repository;
  /**
   * The request a ModelInfer call's bytes stand for. Its model, version and id are read first; when the model is
   * ready the whole message is checked on the wire against the model's bounds, then decoded. Otherwise the service
   * gets a stand-in with only those three fields and answers as it answers for that model (not found, not ready). A
   * message that fails the check becomes a stand-in carrying the error, which the service raises once it has found
   * the model ready, as it raises the planner's. The service reads the model's state in the same synchronous run.
   */
  const inferRequest = (buf: Buffer): ModelInferRequest => {
    const head = readInferHead(buf);
    const standIn: ModelInferRequest = {
      model_name: head.modelName,
      model_version: head.modelVersion,
      id: head.id,
      parameters: {},
      inputs: [],
      outputs: [],
      raw_input_contents: [],
    };
    let served;
    try {
      const m = repository.lookup(head.modelName, head.modelVersion);
      if (m.state === "READY") served = m.served;
    } catch {
      // The service's own lookup answers.
    }
    if (served === undefined) return standIn;
    let b = bounds.get(served);
    if (b === undefined) bounds.set(served, b = inferBounds(served, limits.maxRequestedOutputs));
    try {
      checkInferRequest(buf, b);
      return decodeInfer(buf) as ModelInferRequest;
    } catch (e) {
      return { ...standIn, [WIRE_REFUSAL]: undecodable("ModelInferRequest", e) } as ModelInferRequest;
    }
  };
  const server = new grpc.Server({
    "grpc.max_receive_message_length": limits.maxReceiveMessageBytes,
    "grpc.max_concurrent_streams": limits.maxConcurrentStreams,
    "grpc.keepalive_time_ms": limits.keepaliveTimeMs,
    "grpc.keepalive_timeout_ms": limits.keepaliveTimeoutMs,
    // Channelz stays on: with it off, grpc-js 1.14.7 does not track the sessions forceShutdown must destroy.
    interceptors: [gateInterceptor(gates, {
      messageDeadlineMs: limits.messageDeadlineMs,
      maxStatusMessageBytes: Math.min(limits.maxStatusMessageBytes, limits.maxReceiveMessageBytes),
    })],
  });
  server.addService(serviceDefinition, {
    ServerLive: unary(service.serverLive),
    ServerReady: unary(service.serverReady),
    ModelReady: unary(service.modelReady),
    ServerMetadata: unary(service.serverMetadata),
    ModelMetadata: unary(service.modelMetadata),
    ModelInfer: unary(async (buf: Buffer, ctx) => await service.modelInfer(inferRequest(buf), ctx)),
  });
  let draining: Promise<DrainResult> | undefined;
  let closed = false;
  const relayGoaway = options.relayGoaway ?? "Deno" in globalThis;
  const relays = new Set<GoawayRelay>();
  const closeRelays = async (): Promise<void> => {
    await Promise.all([...relays].map((r) => r.close()));
  };

  return {
    listen(host = DEFAULT_GRPC_HOST, port = DEFAULT_GRPC_PORT): Promise<{ port: number }> {
      if (!Number.isSafeInteger(port) || port < 0 || port > 65535) {
        return Promise.reject(new RangeError(`Cannot listen on port ${port}: expected an integer from 0 to 65535`));
      }
      const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
      if (closed || draining !== undefined) {
        return Promise.reject(new Error(`Cannot listen on ${address}: the server is shutting down`));
      }
      const bind = (at: string): Promise<number> =>
        new Promise((resolve, reject) => {
          server.bindAsync(at, grpc.ServerCredentials.createInsecure(), (e, bound) => {
            if (e === null) resolve(bound);
            else reject(new Error(`Cannot listen on ${address}: ${e.message}`, { cause: e }));
          });
        });
      if (!relayGoaway) return bind(address).then((bound) => ({ port: bound }));
      return (async () => {
        const inner = await bind("127.0.0.1:0");
        try {
          const relay = await listenGoawayRelay(host, port, inner);
          if (closed || draining !== undefined) {
            await relay.close();
            throw new Error("the server is shutting down");
          }
          relays.add(relay);
          return { port: relay.port };
        } catch (e) {
          server.unbind(`127.0.0.1:${inner}`);
          throw new Error(`Cannot listen on ${address}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
        }
      })();
    },
    drain(deadlineMs: number): Promise<DrainResult> {
      if (!Number.isFinite(deadlineMs) || deadlineMs < 0 || deadlineMs > MAX_TIMER_MS) {
        return Promise.reject(
          new RangeError(`Cannot drain: deadline ${deadlineMs} ms is not a number from 0 to ${MAX_TIMER_MS}`),
        );
      }
      return draining ??= (async () => {
        for (const r of relays) r.stopListening();
        const idle = closeGates();
        const shutdown = new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
        let timer: ReturnType<typeof setTimeout> | undefined;
        const deadline = new Promise<"deadline">((
          resolve,
        ) => (timer = setTimeout(() => resolve("deadline"), deadlineMs)));
        let graceTimer: ReturnType<typeof setTimeout> | undefined;
        try {
          if (await Promise.race([idle.then(() => "idle" as const), deadline]) === "deadline") {
            const unfinished = activeCalls();
            server.forceShutdown();
            return { unfinished };
          }
          // No call is left on the server: what still holds a connection open is a client's side of a stream.
          const grace = new Promise<"grace">((
            resolve,
          ) => (graceTimer = setTimeout(() => resolve("grace"), SESSION_GRACE_MS)));
          if (await Promise.race([shutdown.then(() => "done" as const), grace, deadline]) !== "done") {
            server.forceShutdown();
          }
          return { unfinished: 0 };
        } finally {
          clearTimeout(timer);
          clearTimeout(graceTimer);
          closed = true;
          await closeRelays();
        }
      })();
    },
    close(): Promise<void> {
      if (!closed) {
        closed = true;
        server.forceShutdown();
      }
      return Promise.all([closeGates(), closeRelays()]).then(() => {});
    },
    get activeCalls(): number {
      return activeCalls();
    },
    get pendingCalls(): number {
      return gates.infer.pending + gates.status.pending;
    },
  };
}
