/**
 * The gRPC server's limits and lifecycle through the independent client: the message size limit, the call gate,
 * a client cancelling mid-infer, the runtime's timeout and queue bound, drain, close and the default bind address.
 * Executions that must last run the faults.wasm `spin` kernel on a virtual clock, so a test decides when the
 * execution timeout ends them; the waits are turns of the event loop, never time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DEFAULT_LIMITS } from "@nrt/http-api";
import { VirtualClock } from "@nrt/core";
import { loadSync } from "@grpc/proto-loader";
import { connect as h2connect } from "node:http2";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import {
  createGrpcInferenceServer,
  DEFAULT_GRPC_HOST,
  DEFAULT_GRPC_LIMITS,
  type GrpcInferenceServer,
  type GrpcLimits,
} from "../packages/grpc-api/mod.ts";
import { bytesOf, Code, failure, FIXTURE_PROTO, type OipClient, oipClient, rawCall } from "./_grpc_client.ts";
import { deviceState, hostWaits, type HttpFixture, httpFixture, post, testModels } from "./_http.ts";
import { oneOpNeff } from "./_kernels.ts";

const clock = new VirtualClock();
const TIMEOUT_MS = 5_000;

/**
 * The execution timeout on both clocks: the device's clock moves by its watchdog budget (30 s, the simulator's
 * default), so the device drops the spinning run itself, then the host's virtual clock reaches the budget and the
 * host times out. The host writes nothing to the device on the fault path (seed lifecycle-error-model §5.5).
 */
async function timeOut(): Promise<void> {
  await fx.sim.elapse(0, 30_000);
  await clock.advance(TIMEOUT_MS);
}
let fx: HttpFixture;
const servers: GrpcInferenceServer[] = [];
const clients: OipClient[] = [];

const enc = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
const reluReq = () => ({
  model_name: "relu",
  inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: [1, -1, 2, -2, 3, -3, 4, -4] } }],
});
const spinReq = () => ({
  model_name: "spin",
  inputs: [{ name: "x", datatype: "FP32", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
});

/** A server over the fixture, listening on a free loopback port, and a client of it. */
async function serve(limits?: GrpcLimits): Promise<{ server: GrpcInferenceServer; client: OipClient; port: number }> {
  const server = createGrpcInferenceServer({
    runtime: fx.runtime,
    repository: fx.repository,
    metrics: fx.metrics,
    limits,
  });
  servers.push(server);
  const { port } = await server.listen("127.0.0.1", 0);
  const client = oipClient(`127.0.0.1:${port}`);
  clients.push(client);
  return { server, client, port };
}

/** Turns of the event loop (macrotasks, not time) until `cond` holds; giving up says what `state` then reads. */
async function until(cond: () => boolean, what: string, state?: () => unknown): Promise<void> {
  for (let i = 0; i < 20_000 && !cond(); i++) await new Promise<void>((r) => setTimeout(r, 0));
  if (!cond()) throw new Error(`Gave up waiting for ${what}${state ? `: ${JSON.stringify(state())}` : ""}`);
}

/** Whether a promise has settled, read synchronously. */
function settled(p: Promise<unknown>): () => boolean {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  return () => done;
}

/**
 * What `p` settles with, or a failure naming `what` once `ms` have passed: for a call that must answer, given a
 * bound far from the time the test tells apart.
 */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const spinInflight = (): number => fx.repository.get("spin")?.served?.inflight ?? 0;

/** Starts a spin execution through `client` and waits until it runs on the device, its host waiting for its end. */
async function spinning(
  client: OipClient,
  server: GrpcInferenceServer,
): Promise<{ result: Promise<unknown>; cancel(): void }> {
  const waits = hostWaits(fx.sim);
  const call = client.startInfer(spinReq());
  let outcome = "pending";
  call.result.then(() => (outcome = "answered"), (e: unknown) => (outcome = `failed: ${(e as Error)?.message}`));
  await until(
    () => hostWaits(fx.sim) > waits && server.activeCalls >= 1,
    "the spin execution to wait for its end",
    () => ({
      hostWaitsBefore: waits,
      hostWaits: hostWaits(fx.sim),
      sleepers: clock.pendingSleepers,
      activeCalls: server.activeCalls,
      spinInflight: spinInflight(),
      call: outcome,
      // What the device shows on each NeuronCore (a fault's cause, when the spin faulted instead of spinning).
      device: deviceState(fx.sim),
    }),
  );
  return call;
}

describe("gRPC limits and lifecycle", () => {
  beforeAll(async () => {
    const { "relu.neff": relu } = testModels();
    const spin = oneOpNeff("faults", "spin", [{ name: "x", dtype: "float32", shape: [4] }], [{
      name: "y",
      dtype: "float32",
      shape: [4],
    }]);
    fx = await httpFixture({
      files: {
        "relu.neff": relu,
        "relu.json": enc({ vnc: 0 }),
        "spin.neff": spin,
        "spin.json": enc({ vnc: 1, maxQueue: 1, warmup: false }), // spin never ends on its own: no warm-up
      },
      runtime: { clock, execTimeoutSeconds: TIMEOUT_MS / 1000 },
    });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of servers) await s.close();
    await fx.close();
  });

  test("a message over maxReceiveMessageBytes ends with RESOURCE_EXHAUSTED; one at the limit is served", async () => {
    const type = loadSync(FIXTURE_PROTO, { keepCase: true })["inference.ModelInferRequest"] as unknown as {
      serialize(m: unknown): Uint8Array;
    };
    const x = bytesOf(Float32Array.from([1, -1, 2, -2, 3, -3, 4, -4]));
    const atLimit = {
      model_name: "relu",
      inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
      raw_input_contents: [x],
    };
    const limit = type.serialize(atLimit).length;
    const { client, server } = await serve({ maxReceiveMessageBytes: limit });
    expect((await client.modelInfer(atLimit)).raw_output_contents.length).toBe(1);
    const over = await failure(client.modelInfer({ ...atLimit, id: "x" }));
    expect(over.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(over.details).toBe(`Received message larger than max (${limit + 3} vs ${limit})`);
    expect(server.activeCalls).toBe(0);
  });

  test("the default message limit is the REST body limit, 64 MiB, and a larger message is refused", async () => {
    expect(DEFAULT_GRPC_LIMITS.maxReceiveMessageBytes).toBe(DEFAULT_LIMITS.maxBodyBytes);
    const { client } = await serve();
    const big = new Uint8Array(DEFAULT_LIMITS.maxBodyBytes + 1);
    const e = await failure(
      client.modelInfer({
        model_name: "relu",
        inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
        raw_input_contents: [big],
      }),
    );
    expect(e.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(e.details).toMatch(
      new RegExp(`^Received message larger than max \\(\\d+ vs ${DEFAULT_LIMITS.maxBodyBytes}\\)$`),
    );
  }, 60_000);

  test("the call gate serves maxConcurrentCalls, keeps maxPendingCalls unread and refuses the rest", async () => {
    const { client, server } = await serve({ maxConcurrentCalls: 1, maxPendingCalls: 1 });
    const running = await spinning(client, server);
    const waiting = client.modelInfer(reluReq());
    const waited = settled(waiting);
    await until(() => server.pendingCalls === 1, "the relu call to wait at the gate");
    const refused = await failure(client.modelInfer(reluReq()));
    expect([refused.code, refused.details]).toEqual([
      Code.RESOURCE_EXHAUSTED,
      "Cannot accept the call: 1 calls are being served and 1 are waiting",
    ]);
    expect([waited(), server.activeCalls, server.pendingCalls]).toEqual([false, 1, 1]);
    await timeOut();
    expect((await failure(running.result)).code).toBe(Code.DEADLINE_EXCEEDED);
    expect((await waiting).outputs[0].contents.fp32_contents).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
    await until(() => server.activeCalls === 0, "the gate to empty");
    expect(server.pendingCalls).toBe(0);
    await fx.repository.load("spin");
  });

  test("a client cancelling mid-infer gets CANCELLED; the execution ends and releases its instance", async () => {
    const { client, server } = await serve();
    const failed = fx.metrics.modelStatistics("spin").inference_stats.fail.count;
    const call = await spinning(client, server);
    call.cancel();
    const e = await failure(call.result);
    expect(e.code).toBe(Code.CANCELLED);
    // The execution cannot stop halfway: it still holds its slot and its instance until it ends.
    expect([server.activeCalls, spinInflight()]).toEqual([1, 1]);
    expect((await client.modelInfer(reluReq())).outputs[0].contents.fp32_contents).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
    await timeOut();
    await until(() => server.activeCalls === 0, "the cancelled call's handler to end");
    expect(spinInflight()).toBe(0);
    expect(fx.metrics.modelStatistics("spin").inference_stats.fail.count).toBe(failed + 1);
    await fx.repository.unload("spin"); // resolves only once no request holds an instance
    await fx.repository.load("spin");
    expect(await client.modelReady("spin")).toEqual({ ready: true });
  });

  test("NRT_TIMEOUT answers DEADLINE_EXCEEDED and NRT_QUEUE_FULL RESOURCE_EXHAUSTED, as REST words them", async () => {
    const { client, server } = await serve();
    const running = await spinning(client, server);
    const queued = client.modelInfer(spinReq());
    queued.catch(() => {});
    await until(() => spinInflight() === 2, "the second spin request to queue");
    const full = await failure(client.modelInfer(spinReq()));
    const rest = await fx.app.request(
      "/v2/models/spin/infer",
      post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
    );
    expect(rest.status).toBe(503);
    expect([full.code, full.details]).toEqual([Code.RESOURCE_EXHAUSTED, (await rest.json()).error]);
    expect(full.details).toMatch(/1 requests are already waiting \(NRT_QUEUE_FULL\)$/);
    await timeOut();
    const timedOut = await failure(running.result);
    expect(timedOut.code).toBe(Code.DEADLINE_EXCEEDED);
    expect(timedOut.details).toMatch(/\(NRT_TIMEOUT\)$/);
    // NRT_TIMEOUT is Band A, not fail-stop (seed lifecycle-error-model §4.1): the queued request really runs next,
    // spins, and times out too.
    await until(() => hostWaits(fx.sim) > 0 && spinInflight() === 1, "the queued spin request to run");
    await timeOut();
    const second = await failure(queued);
    expect(second.code).toBe(Code.DEADLINE_EXCEEDED);
    expect(second.details).toMatch(/\(NRT_TIMEOUT\)$/);
    await until(() => spinInflight() === 0, "the spin model to finish its requests");
    await fx.repository.load("spin");
  });

  test("drain() refuses new calls, lets the running call end, then stops listening", async () => {
    const { client, server, port } = await serve();
    const running = await spinning(client, server);
    const drained = server.drain(600_000);
    const fresh = oipClient(`127.0.0.1:${port}`);
    clients.push(fresh);
    expect((await failure(fresh.serverLive())).code).toBe(Code.UNAVAILABLE);
    await expect(server.listen("127.0.0.1", 0)).rejects.toThrow(
      "Cannot listen on 127.0.0.1:0: the server is shutting down",
    );
    expect(settled(drained)()).toBe(false);
    await timeOut();
    expect((await failure(running.result)).code).toBe(Code.DEADLINE_EXCEEDED);
    expect(await drained).toEqual({ unfinished: 0 });
    expect(server.activeCalls).toBe(0);
    await fx.repository.load("spin");
  });

  test("drain() past its deadline closes the connections of the running calls and reports them", async () => {
    const { client, server } = await serve();
    const running = await spinning(client, server);
    expect(await server.drain(0)).toEqual({ unfinished: 1 });
    expect([Code.UNAVAILABLE, Code.CANCELLED]).toContain((await failure(running.result)).code);
    expect(server.activeCalls).toBe(1); // the handler still waits for its execution
    const closed = server.close();
    await timeOut();
    await closed;
    expect([server.activeCalls, spinInflight()]).toEqual([0, 0]);
    await fx.repository.load("spin");
  });

  test("a call whose message does not arrive within messageDeadlineMs ends with DEADLINE_EXCEEDED and frees its slot", async () => {
    expect(DEFAULT_GRPC_LIMITS.messageDeadlineMs).toBe(60_000); // the REST body deadline
    const { client, server, port } = await serve({ maxConcurrentCalls: 1, messageDeadlineMs: 200 });
    const stalled = rawCall(port, "ModelInfer"); // headers, then nothing
    try {
      await until(() => server.activeCalls === 1, "the stalled call to take the slot");
      const waiting = client.modelInfer(reluReq());
      await until(() => server.pendingCalls === 1, "the relu call to wait for the slot");
      expect(await stalled.status).toEqual({
        code: Code.DEADLINE_EXCEEDED,
        message: "Cannot read the request: its message did not arrive within 200 ms",
      });
      expect((await waiting).outputs[0].contents.fp32_contents).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
      await until(() => server.activeCalls === 0, "the gate to empty");
    } finally {
      stalled.close();
    }
  });

  test("ServerLive and the other status RPCs have slots of their own: they answer while ModelInfer's are all held", async () => {
    const { client, server, port } = await serve({ maxConcurrentCalls: 1, maxPendingCalls: 0 });
    const stalled = rawCall(port, "ModelInfer");
    try {
      await until(() => server.activeCalls === 1, "the stalled call to take the slot");
      expect((await failure(client.modelInfer(reluReq()))).code).toBe(Code.RESOURCE_EXHAUSTED);
      expect(await client.serverLive()).toEqual({ live: true });
      expect(await client.serverReady()).toEqual({ ready: true });
      expect(await client.modelReady("relu")).toEqual({ ready: true });
    } finally {
      stalled.close();
    }
    await until(() => server.activeCalls === 0, "the stalled call to leave");
  });

  test("header-only status calls hold no status slot: ServerLive answers while 32 are open", async () => {
    // Before, each took one of the 8 status slots at its headers and kept it until messageDeadlineMs (60 s) ended it:
    // 8 such calls from one client queued every other client's liveness and readiness checks for a minute.
    expect(DEFAULT_GRPC_LIMITS.maxConcurrentStatusCalls).toBe(8);
    const { client, server, port } = await serve();
    const session = h2connect(`http://127.0.0.1:${port}`).on("error", () => {});
    const methods = ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata"];
    const stalled = Array.from(
      { length: 32 },
      (_, i) => rawCall(port, methods[i % methods.length], undefined, session),
    );
    try {
      await until(
        () => server.activeCalls + server.pendingCalls === 32,
        "the stalled calls to reach the server",
        () => [server.activeCalls, server.pendingCalls],
      );
      // A bound far from both the milliseconds these take and the 60 s the stalled calls could wait.
      expect(await within(client.serverLive(), 30_000, "ServerLive")).toEqual({ live: true });
      expect(await within(client.serverReady(), 30_000, "ServerReady")).toEqual({ ready: true });
      expect(await within(client.modelMetadata("relu"), 30_000, "ModelMetadata")).toMatchObject({ name: "relu" });
      // The stalled calls are still open, served (their messages awaited), none waiting for a slot.
      expect(stalled.filter((c) => settled(c.status)()).length).toBe(0);
      expect([server.activeCalls, server.pendingCalls]).toEqual([32, 0]);
    } finally {
      session.destroy();
    }
    await until(() => server.activeCalls === 0, "the stalled calls to leave");
  }, 60_000);

  test("a status call whose client grants no window gives its slot back once its handler answered", async () => {
    // Before, a status call kept its slot until its answer was written out: 8 ServerLive calls from a client whose
    // SETTINGS_INITIAL_WINDOW_SIZE is 0 held every status slot until messageDeadlineMs reset their streams.
    const { client, server, port } = await serve();
    const noWindow = { settings: { initialWindowSize: 0 } };
    const session = h2connect(`http://127.0.0.1:${port}`, noWindow).on("error", () => {});
    for (let i = 0; i < 16; i++) rawCall(port, "ServerLive", new Uint8Array(0), session);
    try {
      await until(() => server.activeCalls + server.pendingCalls === 16, "the unread calls to reach the server");
      expect(await within(client.serverLive(), 30_000, "ServerLive")).toEqual({ live: true });
      expect(server.pendingCalls).toBe(0);
    } finally {
      session.destroy();
    }
    await until(() => server.activeCalls === 0, "the unread calls to leave");
  }, 60_000);

  test("status calls held are bounded by maxConcurrentStatusCalls + maxPendingCalls, then refused", async () => {
    const { client, server, port } = await serve({ maxConcurrentStatusCalls: 1, maxPendingCalls: 2 });
    const session = h2connect(`http://127.0.0.1:${port}`).on("error", () => {});
    const stalled = Array.from({ length: 3 }, () => rawCall(port, "ServerLive", undefined, session));
    try {
      await until(() => server.activeCalls === 3, "the stalled calls to take every place");
      const refused = await failure(client.serverLive());
      expect([refused.code, refused.details]).toEqual([
        Code.RESOURCE_EXHAUSTED,
        "Cannot accept the call: 1 calls are being served and 2 are waiting",
      ]);
      // ModelInfer's slots are apart.
      expect((await client.modelInfer(reluReq())).outputs[0].contents.fp32_contents).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
      stalled[0].close();
      await until(() => server.activeCalls === 2, "the closed call to give its place back");
      expect(await client.serverLive()).toEqual({ live: true });
    } finally {
      session.destroy();
    }
    await until(() => server.activeCalls === 0, "the stalled calls to leave");
    // A status call whose message does not arrive within messageDeadlineMs ends with DEADLINE_EXCEEDED.
    const timed = await serve({ messageDeadlineMs: 200 });
    const late = rawCall(timed.port, "ModelReady");
    try {
      expect(await late.status).toEqual({
        code: Code.DEADLINE_EXCEEDED,
        message: "Cannot read the request: its message did not arrive within 200 ms",
      });
      await until(() => timed.server.activeCalls === 0, "the late call to give its place back");
    } finally {
      late.close();
    }
  });

  test("a status message over maxStatusMessageBytes is RESOURCE_EXHAUSTED, compressed or not", async () => {
    // The status RPCs read their message before they take a slot: each is bounded far below maxReceiveMessageBytes.
    expect(DEFAULT_GRPC_LIMITS.maxStatusMessageBytes).toBe(16 * 1024);
    const { client, port } = await serve();
    const long = "a".repeat(20_000);
    const over = await failure(client.modelReady(long));
    // The message: name (tag, 3-byte length, 20000 bytes) and an empty version (tag, length), as the client sends it.
    expect([over.code, over.details]).toEqual([
      Code.RESOURCE_EXHAUSTED,
      "Received message larger than max (20006 vs 16384)",
    ]);
    const gzip = oipClient(`127.0.0.1:${port}`, { "grpc.default_compression_algorithm": 2 });
    clients.push(gzip);
    const inflated = await failure(gzip.modelMetadata(long));
    expect([inflated.code, inflated.details]).toEqual([
      Code.RESOURCE_EXHAUSTED,
      "Received message that decompresses to a size larger than 16384",
    ]);
    expect((await failure(gzip.modelReady("a".repeat(200)))).code).toBe(Code.INVALID_ARGUMENT); // past 128 chars
    expect((await client.modelInfer({ ...reluReq(), id: long })).id).toBe(long);
    // The smaller of the two limits holds.
    const small = await serve({ maxReceiveMessageBytes: 100 });
    expect((await failure(small.client.modelReady("a".repeat(200)))).details).toBe(
      "Received message larger than max (205 vs 100)",
    );
    expect(() =>
      createGrpcInferenceServer({
        runtime: fx.runtime,
        repository: fx.repository,
        limits: { maxStatusMessageBytes: 0 },
      })
    ).toThrow(
      "Cannot create the gRPC server: limits.maxStatusMessageBytes is 0, expected an integer of at least 1",
    );
  });

  test("drain() refuses with UNAVAILABLE the status calls whose message has not arrived", async () => {
    const { server, port } = await serve();
    const stalled = rawCall(port, "ServerReady");
    try {
      await until(() => server.activeCalls === 1, "the stalled call to reach the server");
      const drained = server.drain(600_000);
      expect(await stalled.status).toEqual({
        code: Code.UNAVAILABLE,
        message: "Cannot accept the call: the server is shutting down",
      });
      expect([server.activeCalls, server.pendingCalls]).toEqual([0, 0]);
      // The server waits for its connections to close, this one's client still holding its side of the stream open.
      stalled.close();
      expect(await drained).toEqual({ unfinished: 0 });
    } finally {
      stalled.close();
    }
  });

  test("a message of many empty inputs is refused on the wire, before it is decoded, and counted as refused", async () => {
    const { client, server } = await serve();
    const failed = fx.metrics.modelStatistics("relu").inference_stats.fail.count;
    const inputs = Array.from({ length: 50_000 }, () => ({}));
    const e = await failure(client.modelInfer({ model_name: "relu", inputs }));
    expect([e.code, e.details]).toEqual([
      Code.INVALID_ARGUMENT,
      "Cannot read the request: it has 50000 inputs, more than the model's inputs allow",
    ]);
    const many = await failure(client.modelInfer({
      model_name: "relu",
      inputs: [{
        name: "x",
        datatype: "INT64",
        shape: [8],
        contents: { int64_contents: new Array(100_000).fill("1") },
      }],
    }));
    expect([many.code, many.details]).toEqual([
      Code.INVALID_ARGUMENT,
      'Cannot read input "x": its contents hold 100000 elements, more than the 8 the model\'s input takes',
    ]);
    expect(fx.metrics.modelStatistics("relu").inference_stats.fail.count).toBe(failed + 2);
    // For a model that does not exist nothing is decoded either: the answer is the lookup's.
    const unknown = await failure(client.modelInfer({ model_name: "nope", inputs }));
    expect([unknown.code, unknown.details]).toEqual([
      Code.NOT_FOUND,
      'Cannot find model "nope": it is not in the repository',
    ]);
    expect(server.activeCalls).toBe(0);
  });

  test("a truncated or malformed message answers INVALID_ARGUMENT, not INTERNAL, and is not read past its end", async () => {
    const { client, port } = await serve();
    // model_name says 16 bytes and 1 follows: before, the decoder read "r" and answered NOT_FOUND.
    const truncated = await rawCall(port, "ModelInfer", Uint8Array.of(0x0a, 0x10, 0x72)).status;
    expect(truncated).toEqual({
      code: Code.INVALID_ARGUMENT,
      message:
        "Cannot read the request: the message is not a well-formed ModelInferRequest (model_name runs past the end of its message)",
    });
    const ready = await rawCall(port, "ModelReady", Uint8Array.of(0x0a, 0x10, 0x72)).status;
    expect(ready).toEqual({
      code: Code.INVALID_ARGUMENT,
      message:
        "Cannot read the request: the message is not a well-formed ModelReadyRequest (field 1 runs past the end of its message)",
    });
    // A well-formed ModelInferRequest naming relu, then a group (wire type 3), which proto3 has no use for.
    const group = await rawCall(port, "ModelInfer", Uint8Array.of(0x0a, 0x04, 0x72, 0x65, 0x6c, 0x75, 0x4b)).status;
    expect(group.code).toBe(Code.INVALID_ARGUMENT);
    expect(await client.serverLive()).toEqual({ live: true });
  });

  test("listen() binds the loopback interface by default", async () => {
    expect(DEFAULT_GRPC_HOST).toBe("127.0.0.1");
    const server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository });
    servers.push(server);
    const { port } = await server.listen(undefined, 0);
    const client = oipClient(`127.0.0.1:${port}`);
    clients.push(client);
    expect(await client.serverLive()).toEqual({ live: true });
    const external = Object.values(networkInterfaces()).flat().find((a) =>
      a !== undefined && a.family === "IPv4" && !a.internal
    );
    if (external !== undefined) {
      const refused = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: external.address, port });
        socket.once("connect", () => (socket.destroy(), resolve(false)));
        socket.once("error", () => resolve(true));
      });
      expect({ address: external.address, refused }).toEqual({ address: external.address, refused: true });
    }
  });
});
