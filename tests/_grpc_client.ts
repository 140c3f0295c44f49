/**
 * An independent gRPC client of the Open Inference Protocol for the tests and the benchmark: `@grpc/proto-loader`
 * and `@grpc/grpc-js` over the fixture ../shared/fixtures/oip/grpc_predict_v2.proto, with loader options of its own
 * (proto field names, 64-bit integers as strings) and nothing of the server's code. Each RPC returns a promise; a
 * failed call rejects with a {@linkcode CallFailure} holding the gRPC code and details.
 */
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
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
