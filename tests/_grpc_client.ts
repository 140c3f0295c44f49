/**
 * An independent gRPC client of the Open Inference Protocol for the tests and the benchmark: `@grpc/proto-loader`
 * and `@grpc/grpc-js` over the fixture ../shared/fixtures/oip/grpc_predict_v2.proto, with loader options of its own
 * (proto field names, 64-bit integers as strings) and nothing of the server's code. Each RPC returns a promise; a
 * failed call rejects with a {@linkcode CallFailure} holding the gRPC code and details.
 */
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { type ClientHttp2Session, connect as h2connect } from "node:http2";
import { fileURLToPath } from "node:url";

/** The fixture proto. */
export const FIXTURE_PROTO: string = fileURLToPath(
  new URL("../../shared/fixtures/oip/grpc_predict_v2.proto", import.meta.url),
);

/** The status codes the tests expect, by their protocol names. */
export const Code: typeof grpc.status = grpc.status;

/** A failed call: its gRPC status. */
export class CallFailure extends Error {
  /** gRPC status code. */
  readonly code: number;
  /** The status details (the server's message). */
  readonly details: string;
  constructor(e: grpc.ServiceError) {
    super(`${grpc.status[e.code]}: ${e.details}`);
    this.code = e.code;
    this.details = e.details;
  }
}

// deno-lint-ignore no-explicit-any
type Msg = Record<string, any>;

/** The six RPCs, a cancellable ModelInfer, and close. */
export interface OipClient {
  serverLive(): Promise<Msg>;
  serverReady(): Promise<Msg>;
  modelReady(name: string, version?: string): Promise<Msg>;
  serverMetadata(): Promise<Msg>;
  modelMetadata(name: string, version?: string): Promise<Msg>;
  modelInfer(req: Msg, options?: grpc.CallOptions): Promise<Msg>;
  /** Starts a ModelInfer and returns its result and a way to cancel it. */
  startInfer(req: Msg): { result: Promise<Msg>; cancel(): void };
  /** The underlying client, for raw calls. */
  readonly raw: grpc.Client;
  close(): void;
}

/** Loader options of the client: proto field names (as the proto spells them) and int64 as strings. */
const LOADER = { keepCase: true, longs: String, defaults: true, arrays: true };

/**
 * Connects to `address` (`host:port`).
 *
 * @param address The server.
 * @param options Channel options (e.g. `"grpc.max_receive_message_length"`).
 */
export function oipClient(address: string, options: grpc.ChannelOptions = {}): OipClient {
  const pkg = grpc.loadPackageDefinition(loadSync(FIXTURE_PROTO, LOADER)) as unknown as {
    inference: {
      GRPCInferenceService: new (
        address: string,
        creds: grpc.ChannelCredentials,
        options: grpc.ChannelOptions,
      ) => grpc.Client;
    };
  };
  const client = new pkg.inference.GRPCInferenceService(address, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": -1,
    ...options,
  });
  type Unary = (
    req: Msg,
    options: grpc.CallOptions,
    cb: (e: grpc.ServiceError | null, res: Msg) => void,
  ) => grpc.ClientUnaryCall;
  const method = (name: string): Unary => (client as unknown as Record<string, Unary>)[name].bind(client);
  const call = (
    name: string,
    req: Msg,
    options: grpc.CallOptions = {},
  ): { result: Promise<Msg>; call: grpc.ClientUnaryCall } => {
    let c!: grpc.ClientUnaryCall;
    const result = new Promise<Msg>((resolve, reject) => {
      c = method(name)(req, options, (e, res) => (e === null ? resolve(res) : reject(new CallFailure(e))));
    });
    return { result, call: c };
  };
  return {
    serverLive: () => call("ServerLive", {}).result,
    serverReady: () => call("ServerReady", {}).result,
    modelReady: (name, version = "") => call("ModelReady", { name, version }).result,
    serverMetadata: () => call("ServerMetadata", {}).result,
    modelMetadata: (name, version = "") => call("ModelMetadata", { name, version }).result,
    modelInfer: (req, options) => call("ModelInfer", req, options).result,
    startInfer: (req) => {
      const { result, call: c } = call("ModelInfer", req);
      return { result, cancel: () => c.cancel() };
    },
    raw: client,
    close: () => client.close(),
  };
}

/** The failure a promise rejects with; throws when it resolves instead. */
export async function failure(p: Promise<unknown>): Promise<CallFailure> {
  try {
    await p;
  } catch (e) {
    if (e instanceof CallFailure) return e;
    throw e;
  }
  throw new Error("The call succeeded; a failure was expected");
}

/** Little-endian bytes of a typed array. */
export function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** What a raw call ended with: its gRPC status and message (from the trailers, or a Trailers-Only answer). */
export interface RawStatus {
  readonly code: number;
  readonly message: string;
}

/** A gRPC frame of `message`: the flag byte (not compressed), the 4-byte big-endian length, the message. */
export function grpcFrame(message: Uint8Array): Uint8Array {
  const frame = new Uint8Array(5 + message.byteLength);
  new DataView(frame.buffer).setUint32(1, message.byteLength);
  frame.set(message, 5);
  return frame;
}

/**
 * A gRPC call made by hand over HTTP/2 (node:http2, nothing of gRPC's libraries): its headers, then `message`
 * framed as gRPC frames it ({@linkcode grpcFrame}) and the end of the stream, or, without one, nothing at all: the
 * stream stays open, as a client that stalls leaves it. `over` shares a connection (streams on one connection reach
 * the server in the order they were opened; its owner handles its errors); without it the call has its own.
 */
export function rawCall(
  port: number,
  method: string,
  message?: Uint8Array,
  over?: ClientHttp2Session,
): { status: Promise<RawStatus>; close(): void } {
  return rawSend(port, method, message === undefined ? undefined : grpcFrame(message), over);
}

/**
 * As {@linkcode rawCall}, with the request body `body` sent as given (whole frames, part of one, several, or none)
 * and then the end of the stream; without one, nothing.
 */
export function rawSend(
  port: number,
  method: string,
  body?: Uint8Array,
  over?: ClientHttp2Session,
): { status: Promise<RawStatus>; close(): void } {
  // A shared session's errors are its owner's to handle: a listener per call would pile up on it.
  const session = over ?? h2connect(`http://127.0.0.1:${port}`).on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": `/inference.GRPCInferenceService/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
  }, { endStream: false });
  stream.on("error", () => {});
  const status = new Promise<RawStatus>((resolve, reject) => {
    const read = (h: Record<string, unknown>): boolean => {
      if (h["grpc-status"] === undefined) return false;
      resolve({ code: Number(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"] ?? "")) });
      return true;
    };
    stream.on("response", (h) => read(h));
    stream.on("trailers", (h) => read(h));
    stream.on("close", () => reject(new Error("the stream closed without a gRPC status")));
    stream.resume();
  });
  status.catch(() => {}); // a call closed by the test before its answer is not awaited
  if (body !== undefined) stream.end(body);
  return { status, close: () => (stream.close(), over === undefined && session.close()) };
}
