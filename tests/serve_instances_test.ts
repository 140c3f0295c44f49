/**
 * Instance groups, warm-up, readiness and dropped queued requests (packages/http-api/served_model.ts,
 * model_repository.ts): N instances or one per logical core, least-busy dispatch (by the executions running on each
 * instance's logical core, then the longest idle), instances in metadata and /metrics, one warm-up execution per
 * instance before READY, a failed warm-up as UNAVAILABLE with its reason, readiness over the models the server was
 * asked for, and a REST or gRPC request whose client leaves while it is queued never running. Executions that must
 * last run faults.wasm `spin` on a virtual clock, so the test decides when they end.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type ExecutionEvent, VirtualClock } from "@nrt/core";
import { createGrpcInferenceServer, type GrpcInferenceServer } from "../packages/grpc-api/mod.ts";
import { Code, failure, type OipClient, oipClient } from "./_grpc_client.ts";
import { control, deviceState, hostWaits, type HttpFixture, httpFixture, post } from "./_http.ts";
import { namedOneOpNeff, oneOpNeff } from "./_kernels.ts";

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
const enc = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
// Each served model is its own NEFF: one NEFF loaded twice on a core would share one interned model (nrt_load_util
// step 7), and its instances would count each other's warm-ups.
const relu = (name = "relu.neff") => namedOneOpNeff(name, "relu", "relu", [f32("x", [8])], [f32("y", [8])]);
const spin = () => oneOpNeff("faults", "spin", [f32("x", [4])], [f32("y", [4])]);
const trap = () => oneOpNeff("faults", "trap", [f32("x", [4])], [f32("y", [4])]);
const reluReq = () =>
  post({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] });
const spinReq = (init: RequestInit = {}) => ({
  ...post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
  ...init,
});

/**
 * `p`, or — when it has not settled within 10 s of real time — a failure that says what the device and the runtime
 * were doing: per NeuronCore the Q7 state, the last sequencer fault and the last records, then the runtime's last
 * lifecycle events and log lines (this is how a load stuck behind a run the watchdog had missed was found).
 */
async function answersWithin<T>(p: T | PromiseLike<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const state = {
        ncs: deviceState(fx.sim),
        events: fx.runtime.events.list().slice(-12),
        log: fx.logger.entries.slice(-6).map((e) => e.message),
      };
      reject(new Error(`No answer within 10 s for ${what}: ${JSON.stringify(state)}`));
    }, 10_000);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Turns of the virtual clock's zero step until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 20_000 && !cond(); i++) await clock.advance(0);
  if (!cond()) throw new Error(`Gave up waiting for ${what}`);
}

const events: ExecutionEvent[] = [];
let fx: HttpFixture;
let grpc: GrpcInferenceServer;
let client: OipClient;

const served = (m: string) => fx.repository.get(m)!.served!;
const executions = (m: string): number[] => served(m).instances.map((i) => i.executions);

describe("instance groups, warm-up and readiness", () => {
  beforeAll(async () => {
    fx = await httpFixture({
      files: {
        "relu.neff": relu(),
        "pair.neff": relu("pair.neff"),
        "pair.json": enc({ vnc: 0, instances: 2 }),
        "everywhere.neff": relu("everywhere.neff"),
        "everywhere.json": enc({ instances: "per-core" }),
        "spin.neff": spin(),
        "spin.json": enc({ vnc: 0, maxQueue: 4, warmup: false }), // spin never ends on its own
      },
      runtime: { clock, execTimeoutSeconds: TIMEOUT_MS / 1000, onExecution: (e) => events.push(e) },
    });
    grpc = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics });
    client = oipClient(`127.0.0.1:${(await grpc.listen("127.0.0.1", 0)).port}`);
  });
  afterAll(async () => {
    client?.close();
    await grpc?.close();
    await fx?.close();
  });

  test('ModelRepository.load() puts N instances on consecutive cores, or one per logical core with "per-core"', async () => {
    expect(served("pair").vncs).toEqual([0, 1]);
    expect(served("everywhere").vncs).toEqual(Array.from({ length: fx.runtime.visibleVncCount }, (_, k) => k));
    expect(fx.runtime.visibleVncCount).toBeGreaterThan(1);
    const meta = await (await fx.app.request("/v2/models/everywhere")).json();
    expect(meta.instances).toEqual(
      served("everywhere").vncs.map((vnc, k) => ({ name: `everywhere_${k}`, vnc, ready: true })),
    );
  });

  test("each instance ran one warm-up execution before its model was ready; a model without warm-up ran none", () => {
    const byHandle = new Map<number, number>();
    for (const e of events) if (e.phase === "end") byHandle.set(e.model, (byHandle.get(e.model) ?? 0) + 1);
    for (const m of ["relu", "pair", "everywhere"]) {
      expect({ m, runs: served(m).instances.map((i) => byHandle.get(i.handle) ?? 0) })
        .toEqual({ m, runs: served(m).instances.map(() => 1) });
      expect(executions(m).every((n) => n === 0)).toBe(true); // warm-up is not counted as the instance's work
    }
    expect(byHandle.get(served("spin").instances[0].handle)).toBeUndefined();
  });

  test("ServedModel.infer() sends each request to the least busy instance: idle instances take turns", async () => {
    for (let k = 0; k < 6; k++) expect((await fx.app.request("/v2/models/pair/infer", reluReq())).status).toBe(200);
    expect(executions("pair")).toEqual([3, 3]);
    const all = await Promise.all(Array.from({ length: 20 }, () => fx.app.request("/v2/models/pair/infer", reluReq())));
    expect(all.map((r) => r.status)).toEqual(new Array(20).fill(200));
    expect(executions("pair").reduce((a, b) => a + b)).toBe(26);
  });

  test("ServedModel.infer() prefers the instance whose logical core runs fewer executions of other models", async () => {
    const before = executions("pair");
    // Taking turns alone would send one of the next three requests to instance 0, on the busy core 0.
    const running = fx.app.request("/v2/models/spin/infer", spinReq()); // occupies logical core 0
    await until(() => served("spin").instances[0].busy && hostWaits(fx.sim) > 0, "spin to run on core 0");
    for (let k = 0; k < 3; k++) expect((await fx.app.request("/v2/models/pair/infer", reluReq())).status).toBe(200);
    expect(executions("pair")).toEqual([before[0], before[1] + 3]); // all on core 1
    await timeOut();
    expect((await running).status).toBe(504);
    expect((await fx.app.request("/v2/repository/models/spin/load", control())).status).toBe(200); // a load of the (not poisoned) spin: a no-op
  });

  test("GET /metrics shows each model's instance count and each instance's readiness, load and executions", async () => {
    const text = await (await fx.app.request("/metrics")).text();
    expect(text).toMatch(/^nrt_model_instances\{model="pair",version="1"\} 2$/m);
    expect(text).toMatch(
      new RegExp(`^nrt_model_instances\\{model="everywhere",version="1"\\} ${fx.runtime.visibleVncCount}$`, "m"),
    );
    const [e0, e1] = executions("pair");
    expect(text).toMatch(
      new RegExp(
        `^nrt_model_instance_execution_count\\{model="pair",version="1",instance="pair_0",vnc="0"\\} ${e0}$`,
        "m",
      ),
    );
    expect(text).toMatch(
      new RegExp(
        `^nrt_model_instance_execution_count\\{model="pair",version="1",instance="pair_1",vnc="1"\\} ${e1}$`,
        "m",
      ),
    );
    expect(text).toMatch(/^nrt_model_instance_ready\{model="pair",version="1",instance="pair_1",vnc="1"\} 1$/m);
    expect(text).toMatch(/^nrt_model_instance_busy\{model="pair",version="1",instance="pair_0",vnc="0"\} 0$/m);
    expect(text).toMatch(/^# TYPE nrt_model_instance_execution_count counter$/m);
  });

  test("a REST request whose client leaves while it waits for an instance is dropped before it runs", async () => {
    const outcomesBefore = fx.metrics.modelSummary("spin");
    const [ranBefore] = executions("spin"); // a timeout does not poison spin (Band A): no reload resets the count
    const running = fx.app.request("/v2/models/spin/infer", spinReq());
    await until(() => served("spin").instances[0].busy && hostWaits(fx.sim) > 0, "spin to run");
    const leaving = new AbortController();
    const leave = fx.app.request("/v2/models/spin/infer", spinReq({ signal: leaving.signal }));
    const queued = Promise.resolve(leave).catch((e) => e);
    await until(() => served("spin").queued === 1, "the second request to queue");
    leaving.abort();
    await queued;
    await until(() => served("spin").queued === 0, "the queue to drop the request");
    expect(served("spin").inflight).toBe(1);
    await timeOut();
    expect((await running).status).toBe(504);
    await until(() => served("spin").inflight === 0, "the running request to end");
    expect(executions("spin")).toEqual([ranBefore + 1]); // the dropped request never executed
    const after = fx.metrics.modelSummary("spin");
    expect(after.failure - outcomesBefore.failure).toBe(2); // the timeout and the dropped request
    expect(after.executions - outcomesBefore.executions).toBe(1);
    expect((await fx.app.request("/v2/repository/models/spin/load", control())).status).toBe(200);
  });

  test("a gRPC ModelInfer cancelled while it waits for an instance is dropped before it runs", async () => {
    const [ranBefore] = executions("spin");
    const running = fx.app.request("/v2/models/spin/infer", spinReq());
    await until(() => served("spin").instances[0].busy && hostWaits(fx.sim) > 0, "spin to run");
    const call = client.startInfer({
      model_name: "spin",
      inputs: [{ name: "x", datatype: "FP32", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
    });
    await until(() => served("spin").queued === 1, "the call to queue");
    call.cancel();
    expect((await failure(call.result)).code).toBe(Code.CANCELLED);
    await until(() => served("spin").queued === 0, "the queue to drop the call");
    await timeOut();
    expect((await running).status).toBe(504);
    await until(() => served("spin").inflight === 0 && grpc.activeCalls === 0, "the calls to end");
    expect(executions("spin")).toEqual([ranBefore + 1]);
    expect((await fx.app.request("/v2/repository/models/spin/load", control())).status).toBe(200);
  });

  test("a model whose warm-up fails is UNAVAILABLE with the reason, leaves no device memory, and keeps the server unready", async () => {
    const memory = () =>
      Array.from({ length: fx.runtime.visibleVncCount }, (_, v) => fx.runtime.memoryStats(v).bytesUsed);
    const before = memory();
    fx.files["trapped.neff"] = trap(); // warm-up on: its one execution faults
    await fx.app.request("/v2/repository/index", { method: "POST" });
    const load = await answersWithin(
      fx.app.request("/v2/repository/models/trapped/load", control()),
      "the load of trapped (its warm-up faults)",
    );
    expect(load.status).toBe(500);
    expect((await load.json()).error).toMatch(
      /^Warm-up of model "trapped" on logical core \d+ failed: .*\(NRT_[A-Z_]+\)$/,
    );
    const entry = (await (await fx.app.request("/v2/repository/index", { method: "POST" })).json())
      .find((e: { name: string }) => e.name === "trapped");
    expect(entry.state).toBe("UNAVAILABLE");
    expect(entry.reason).toMatch(/^load failed: Warm-up of model "trapped" on logical core \d+ failed: /);
    expect(memory()).toEqual(before);
    const ready = await fx.app.request("/v2/health/ready");
    expect(ready.status).toBe(503);
    expect((await ready.json()).error).toMatch(
      /^Server is not ready: model "trapped" is not ready \(load failed: Warm-up/,
    );
    expect(await client.serverReady()).toEqual({ ready: false });
    // Unloading it says the server no longer wants it.
    expect((await fx.app.request("/v2/repository/models/trapped/unload", control())).status).toBe(200);
    expect((await fx.app.request("/v2/health/ready")).status).toBe(200);
    expect(await client.serverReady()).toEqual({ ready: true });
    delete fx.files["trapped.neff"];
  });

  test('ModelRepository.load() refuses an instance count out of range and "per-core" with a first core', async () => {
    for (
      const [config, why] of [
        [{ instances: 65 }, `"instances" must be an integer from 1 to 64 or "per-core"`],
        [{ instances: "all" }, `"instances" must be an integer from 1 to 64 or "per-core"`],
        [{ instances: "per-core", vnc: 1 }, `"vnc" cannot be given with "instances": "per-core"`],
        [{ warmup: "yes" }, `"warmup" must be true or false`],
      ] as const
    ) {
      fx.files["odd.neff"] = relu();
      fx.files["odd.json"] = enc(config);
      await fx.app.request("/v2/repository/index", { method: "POST" });
      const res = await fx.app.request("/v2/repository/models/odd/load", control());
      expect({ config, status: res.status, error: (await res.json()).error })
        .toEqual({ config, status: 400, error: `Cannot load model "odd": odd.json ${why}` });
    }
    await fx.app.request("/v2/repository/models/odd/unload", control());
    delete fx.files["odd.neff"];
    delete fx.files["odd.json"];
  });
});
