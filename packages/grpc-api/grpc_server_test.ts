/**
 * The gRPC server against what a hostile or careless client sends, through the independent client of the tests
 * (tests/_grpc_client.ts) and a real server on a loopback port: each case here once crashed, hung or misanswered a
 * call.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadSync } from "@grpc/proto-loader";
import { type ClientHttp2Session, connect as h2connect, constants as h2 } from "node:http2";
import { createGrpcInferenceServer, type GrpcInferenceServer, type GrpcLimits } from "./mod.ts";
import {
  Code,
  failure,
  FIXTURE_PROTO,
  grpcFrame,
  type OipClient,
  oipClient,
  rawSend,
  type RawStatus,
} from "../../tests/_grpc_client.ts";
import { type HttpFixture, httpFixture, testModels } from "../../tests/_http.ts";
import { oneOpNeff } from "../../tests/_kernels.ts";

let fx: HttpFixture;
let server: GrpcInferenceServer;
let client: OipClient;
const servers: GrpcInferenceServer[] = [];
const sessions: ClientHttp2Session[] = [];

/** A model whose answer (1 MiB) is far larger than an HTTP/2 stream's initial flow-control window (64 KiB). */
const BIG_OUT = 1 << 18;
const bigModel = (): Uint8Array =>
  oneOpNeff("noop", "noop", [{ name: "x", dtype: "float32", shape: [4] }], [{
    name: "y",
    dtype: "float32",
    shape: [BIG_OUT],
  }], 1);

/** Another server over the fixture, on a free loopback port. */
async function serve(limits: GrpcLimits): Promise<{ server: GrpcInferenceServer; port: number }> {
  const s = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics, limits });
  servers.push(s);
  return { server: s, port: (await s.listen("127.0.0.1", 0)).port };
}

/** Turns of the event loop (macrotasks, not time) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 20_000 && !cond(); i++) await new Promise<void>((r) => setTimeout(r, 0));
  if (!cond()) throw new Error(`Gave up waiting for ${what}`);
}

/**
 * A ModelInfer of the big model by a client that never reads its answer: its HTTP/2 stream stays paused, so the
 * client grants no flow-control window past the first 64 KiB. `closed` settles with the stream's reset code.
 */
function unreadInfer(port: number): { closed: Promise<number>; close(): void } {
  const type = loadSync(FIXTURE_PROTO, { keepCase: true })["inference.ModelInferRequest"] as unknown as {
    serialize(m: unknown): Uint8Array;
  };
  const message = type.serialize({
    model_name: "big",
    inputs: [{ name: "x", datatype: "FP32", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
  });
  const session = h2connect(`http://127.0.0.1:${port}`);
  sessions.push(session);
  session.on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": "/inference.GRPCInferenceService/ModelInfer",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.on("error", () => {});
  stream.pause();
  const closed = new Promise<number>((resolve) => stream.on("close", () => resolve(stream.rstCode ?? 0)));
  stream.end(grpcFrame(message));
  return { closed, close: () => stream.close(h2.NGHTTP2_CANCEL) };
}

/** The status of a call whose request body is `body` as given (frames or not), sent whole. */
async function rawStatus(port: number, method: string, body: Uint8Array): Promise<RawStatus> {
  const call = rawSend(port, method, body);
  try {
    return await call.status;
  } finally {
    call.close();
  }
}

const successes = (): number => fx.metrics.modelStatistics("big").inference_stats.success.count;

const reluIn = [1, -1, 2, -2, 3, -3, 4, -4];

describe("gRPC server against hostile requests", () => {
  beforeAll(async () => {
    fx = await httpFixture({ files: { ...testModels(), "big.neff": bigModel() } });
    server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics });
    const { port } = await server.listen("127.0.0.1", 0);
    client = oipClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    client.close();
    for (const s of sessions) s.destroy();
    for (const s of [server, ...servers]) await s.close();
    await fx.close();
  });

  test("a name cut inside a surrogate pair in the message is answered INVALID_ARGUMENT, not left hanging", async () => {
    // Messages quote a name's first 128 UTF-16 units (a datatype's first 32): here the cut falls inside the emoji,
    // leaving half a surrogate pair, which grpc-js could not percent-encode into grpc-message. The call hung, and the
    // error escaped as an unhandled rejection, which ends a Deno process.
    const cut = (n: number) => "a".repeat(n - 1) + "\u{1F600}";
    const shown = (n: number) => "a".repeat(n - 1) + "\uFFFD";
    const x = { name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn } };
    const cases: Array<[string, Record<string, unknown>, string]> = [
      [
        "input name",
        { model_name: "relu", inputs: [{ ...x, name: cut(128) }] },
        `Cannot read input "${shown(128)}": the model has no such input; its inputs are x`,
      ],
      [
        "datatype",
        { model_name: "relu", inputs: [{ ...x, datatype: cut(32) }] },
        `Cannot read input "x": datatype "${shown(32)}" is not supported`,
      ],
      [
        "requested output",
        { model_name: "relu", inputs: [x], outputs: [{ name: cut(128) }] },
        `Cannot read requested output "${shown(128)}": the model has no such output; its outputs are y`,
      ],
    ];
    for (const [what, req, details] of cases) {
      const e = await failure(client.modelInfer(req));
      expect({ what, code: e.code, details: e.details }).toEqual({ what, code: Code.INVALID_ARGUMENT, details });
    }
    expect(await client.serverLive()).toEqual({ live: true });
    expect(server.activeCalls).toBe(0);
  });

  test("an answer the client does not read keeps its slot; its stream is reset after messageDeadlineMs", async () => {
    // Before, the slot was freed once the handler answered, while the answer waited unsent in the server's memory: one
    // connection that read nothing made a server hold 2.6 GB with no call active.
    const held = await serve({ maxConcurrentCalls: 1 });
    const before = successes();
    const unread = unreadInfer(held.port);
    await until(() => successes() === before + 1, "the inference to be answered");
    expect(held.server.activeCalls).toBe(1);
    unread.close(); // the client leaves: the answer is dropped and the slot freed
    await unread.closed;
    await until(() => held.server.activeCalls === 0, "the slot to be freed");
    // A client that stays but never reads has its stream reset once messageDeadlineMs has passed.
    const timed = await serve({ maxConcurrentCalls: 1, messageDeadlineMs: 2_000 });
    const stalled = unreadInfer(timed.port);
    expect(await stalled.closed).toBe(h2.NGHTTP2_CANCEL);
    await until(() => timed.server.activeCalls === 0, "the reset call's slot to be freed");
    expect(successes()).toBe(before + 2);
    expect(
      await client.modelInfer({
        model_name: "relu",
        inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn } }],
      }),
    ).toMatchObject({ outputs: [{ name: "y", contents: { fp32_contents: [1, 0, 2, 0, 3, 0, 4, 0] } }] });
  });

  test("a deadline past a timer's range (2^31 - 1 ms) is refused, not run after 1 ms", async () => {
    // Before, limits.messageDeadlineMs of 2^31 ended every call at once with "did not arrive within 2147483648 ms",
    // and drain(2 ** 31) closed the running calls' connections after 1 ms.
    const make = (limits: GrpcLimits) => () =>
      createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, limits });
    expect(make({ messageDeadlineMs: 2 ** 31 })).toThrow(
      "Cannot create the gRPC server: limits.messageDeadlineMs is 2147483648, expected an integer from 1 to 2147483647",
    );
    expect(make({ keepaliveTimeoutMs: 2 ** 31 })).toThrow("limits.keepaliveTimeoutMs is 2147483648");
    expect(make({ messageDeadlineMs: 2 ** 31 - 1, keepaliveTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
    const s = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository });
    servers.push(s);
    await expect(s.drain(2 ** 31)).rejects.toThrow(
      "Cannot drain: deadline 2147483648 ms is not a number from 0 to 2147483647",
    );
  });

  test("a drain does not wait its deadline for a stream its client left half open after the answer", async () => {
    // A status call whose message is over the status cap is answered RESOURCE_EXHAUSTED from its length prefix,
    // before its client ends the request: the stream stays half open, and with it the connection. The drain waited
    // for its whole deadline (60 s here, past this test's timeout); now it closes the connection a second after the
    // last call ended.
    const { server: s, port } = await serve({});
    const session = h2connect(`http://127.0.0.1:${port}`);
    sessions.push(session);
    session.on("error", () => {});
    const stream = session.request({
      ":method": "POST",
      ":path": "/inference.GRPCInferenceService/ServerLive",
      "content-type": "application/grpc",
      te: "trailers",
    }, { endStream: false });
    stream.on("error", () => {});
    const status = new Promise<string>((resolve) => {
      stream.on("response", (h) => h["grpc-status"] !== undefined && resolve(String(h["grpc-status"])));
      stream.on("trailers", (h) => resolve(String(h["grpc-status"])));
    });
    const closed = new Promise<void>((resolve) => session.on("close", () => resolve()));
    stream.resume();
    const prefix = new Uint8Array(5);
    new DataView(prefix.buffer).setUint32(1, 1 << 20); // 1 MiB declared, nothing sent
    stream.write(prefix);
    expect(await status).toBe(String(Code.RESOURCE_EXHAUSTED));
    expect(await s.drain(60_000)).toEqual({ unfinished: 0 });
    await closed; // the server closed the connection
  }, 20_000);

  test("a unary call without a whole message, or with two, is INVALID_ARGUMENT, not UNIMPLEMENTED", async () => {
    // grpc-js answered "UNIMPLEMENTED: Received no request message for server streaming method …" for a body that
    // ended inside its frame, as if the RPC did not exist.
    const { port } = await serve({});
    const type = loadSync(FIXTURE_PROTO, { keepCase: true })["inference.ModelInferRequest"] as unknown as {
      serialize(m: unknown): Uint8Array;
    };
    const relu = grpcFrame(type.serialize({
      model_name: "relu",
      inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn } }],
    }));
    const none = "Cannot read the request: the call ended before a whole message arrived";
    const cases: Array<[string, string, Uint8Array, string]> = [
      ["no message", "ModelInfer", new Uint8Array(0), none],
      ["a message cut short", "ModelInfer", relu.subarray(0, relu.byteLength - 1), none],
      ["a length prefix cut short", "ServerLive", Uint8Array.of(0, 0), none],
      [
        "two messages",
        "ModelInfer",
        Uint8Array.of(...relu, ...relu),
        "Cannot read the request: a unary call carries one message, and a second one arrived",
      ],
    ];
    for (const [what, method, body, message] of cases) {
      expect({ what, ...await rawStatus(port, method, body) }).toEqual({ what, code: Code.INVALID_ARGUMENT, message });
    }
    expect(await rawStatus(port, "ModelInfer", relu)).toEqual({ code: Code.OK, message: "OK" });
  });
});
