/**
 * The model repository over HTTP: load/unload concurrency, readiness while loading, unloading or poisoned, the
 * queue bound, per-model config, and the timeout mapping — on the virtual clock, so a hung kernel (faults.wasm
 * `spin`) holds a request exactly as long as the test wants.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { VirtualClock } from "@nrt/core";
import { parseModelConfig } from "@nrt/http-api";
import { control, hostWaits, type HttpFixture, httpFixture, post, testModels } from "./_http.ts";
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
const reads = new Map<string, number>();
const gates = new Map<string, Promise<void>>();
let fx: HttpFixture;

const enc = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
const reluReq = () =>
  post({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] });
const spinReq = () => post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] });
const addReq = (k: number) =>
  post({
    inputs: [{ name: "a", shape: [16], datatype: "FP32", data: new Array(16).fill(k) }, {
      name: "b",
      shape: [16],
      datatype: "FP32",
      data: new Array(16).fill(1),
    }],
  });

/** Yields to the event loop (the virtual clock's own zero step) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await clock.advance(0);
  expect(cond()).toBe(true);
}

function settled<T>(p: T | PromiseLike<T>): () => boolean {
  let done = false;
  Promise.resolve(p).then(() => (done = true), () => (done = true));
  return () => done;
}

describe("REST model repository", () => {
  beforeAll(async () => {
    const { "relu.neff": relu, "add.neff": add } = testModels();
    const spin = oneOpNeff("faults", "spin", [{ name: "x", dtype: "float32", shape: [4] }], [{
      name: "y",
      dtype: "float32",
      shape: [4],
    }]);
    fx = await httpFixture({
      files: {
        "relu.neff": relu,
        "add.neff": add,
        "spin.neff": spin,
        "spin.json": enc({ vnc: 3, maxQueue: 1, warmup: false }),
      },
      runtime: { clock, execTimeoutSeconds: TIMEOUT_MS / 1000 },
      wrapFiles: (f) => ({
        list: f.list,
        read: async (name) => {
          reads.set(name, (reads.get(name) ?? 0) + 1);
          await gates.get(name);
          return await f.read(name);
        },
      }),
    });
  });
  afterAll(async () => {
    await fx.close();
  });

  test("POST /v2/repository/models/{m}/load loads a model once when asked 8 times concurrently", async () => {
    expect((await fx.app.request("/v2/repository/models/relu/unload", control())).status).toBe(200);
    expect((await fx.app.request("/v2/models/relu/infer", reluReq())).status).toBe(503);
    reads.delete("relu.neff");
    const all = await Promise.all(
      Array.from({ length: 8 }, () => fx.app.request("/v2/repository/models/relu/load", control())),
    );
    expect(all.map((r) => r.status)).toEqual(new Array(8).fill(200));
    expect(reads.get("relu.neff")).toBe(1);
    expect((await fx.app.request("/v2/models/relu/infer", reluReq())).status).toBe(200);
  });

  test("POST /v2/repository/models/{m}/load does not block inference on other models", async () => {
    expect((await fx.app.request("/v2/repository/models/add/unload", control())).status).toBe(200);
    let open!: () => void;
    gates.set("add.neff", new Promise<void>((r) => (open = r)));
    const load = fx.app.request("/v2/repository/models/add/load", control());
    const loaded = settled(load);
    await until(() => fx.repository.get("add")!.state === "LOADING");
    const ready = await fx.app.request("/v2/models/add/ready");
    expect(ready.status).toBe(503);
    expect((await ready.json()).error).toBe('Model "add" is not ready: loading');
    expect((await fx.app.request("/v2/models/relu/infer", reluReq())).status).toBe(200);
    expect(loaded()).toBe(false);
    open();
    gates.delete("add.neff");
    expect(await (await load).json()).toEqual({ name: "add", state: "READY" });
    expect((await fx.app.request("/v2/models/add/ready")).status).toBe(200);
  });

  test("POST /v2/models/{m}/infer returns 503 when the queue is full and 504 when the execution times out", async () => {
    const running = fx.app.request("/v2/models/spin/infer", spinReq());
    await until(() => hostWaits(fx.sim) > 0); // the execution waits for its completion or the timeout
    const queued = fx.app.request("/v2/models/spin/infer", spinReq());
    await until(() => fx.repository.get("spin")!.served!.inflight === 2);
    const full = await fx.app.request("/v2/models/spin/infer", spinReq());
    expect(full.status).toBe(503);
    expect((await full.json()).error).toMatch(/1 requests are already waiting \(NRT_QUEUE_FULL\)/);
    expect((await fx.app.request("/v2/models/relu/infer", reluReq())).status).toBe(200);
    await timeOut();
    const timedOut = await running;
    expect(timedOut.status).toBe(504);
    expect((await timedOut.json()).error).toMatch(/NRT_TIMEOUT/);
    // NRT_TIMEOUT is Band A, not fail-stop (seed lifecycle-error-model §4.1): the queued request really runs next,
    // spins, and times out too; the model stays ready.
    await until(() => hostWaits(fx.sim) > 0 && fx.repository.get("spin")!.served!.inflight === 1);
    await timeOut();
    const second = await queued;
    expect(second.status).toBe(504);
    expect((await second.json()).error).toMatch(/NRT_TIMEOUT/);
    expect((await fx.app.request("/v2/models/spin/ready")).status).toBe(200);
  });

  test("GET /v2/models/{m}/ready returns 503 while the model unloads, and unload waits for the running request", async () => {
    expect((await fx.app.request("/v2/repository/models/spin/load", control())).status).toBe(200); // a load of a ready model
    expect((await fx.app.request("/v2/models/spin/ready")).status).toBe(200);
    const running = fx.app.request("/v2/models/spin/infer", spinReq());
    await until(() => hostWaits(fx.sim) > 0);
    const unload = fx.app.request("/v2/repository/models/spin/unload", control());
    const unloaded = settled(unload);
    await until(() => fx.repository.get("spin")!.state === "UNLOADING");
    const ready = await fx.app.request("/v2/models/spin/ready");
    expect(ready.status).toBe(503);
    expect((await ready.json()).error).toBe('Model "spin" is not ready: unloading');
    expect((await fx.app.request("/v2/models/spin/infer", spinReq())).status).toBe(503);
    expect((await fx.app.request("/v2/models/relu/infer", reluReq())).status).toBe(200);
    const index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.find((e: { name: string }) => e.name === "spin")).toEqual({
      name: "spin",
      version: "1",
      state: "UNLOADING",
      reason: "unloading",
    });
    expect(unloaded()).toBe(false);
    await timeOut();
    expect((await running).status).toBe(504);
    expect(await (await unload).json()).toEqual({ name: "spin", state: "UNAVAILABLE" });
    expect((await (await fx.app.request("/v2/models/spin/ready")).json()).error).toBe(
      'Model "spin" is not ready: not loaded',
    );
  });

  test("POST /v2/repository/index picks up a NEFF added to the directory and drops one removed", async () => {
    fx.files["relu2.neff"] = fx.files["relu.neff"];
    fx.files["relu2.json"] = enc({ vnc: 0 }); // not logical core 3, where spin timed out
    let index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.find((e: { name: string }) => e.name === "relu2")).toEqual({
      name: "relu2",
      version: "1",
      state: "UNAVAILABLE",
      reason: "not loaded",
    });
    expect((await fx.app.request("/v2/models/relu2")).status).toBe(503);
    expect((await fx.app.request("/v2/repository/models/relu2/load", control())).status).toBe(200);
    expect((await fx.app.request("/v2/models/relu2/infer", reluReq())).status).toBe(200);
    delete fx.files["relu2.neff"];
    delete fx.files["relu2.json"];
    expect((await fx.app.request("/v2/repository/models/relu2/unload", control())).status).toBe(200);
    index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.map((e: { name: string }) => e.name)).toEqual(["add", "relu", "spin"]);
    expect((await fx.app.request("/v2/models/relu2")).status).toBe(404);
  });

  test("POST /v2/repository/models/{m}/load places instances from the model config and spreads requests over them", async () => {
    fx.files["add.json"] = enc({ vnc: 1, instances: 2 });
    expect((await fx.app.request("/v2/repository/models/add/unload", control())).status).toBe(200);
    expect((await fx.app.request("/v2/repository/models/add/load", control())).status).toBe(200);
    expect(fx.repository.get("add")!.served!.vncs).toEqual([1, 2]);
    const res = await Promise.all(
      Array.from({ length: 8 }, (_, k) => fx.app.request("/v2/models/add/infer", addReq(k))),
    );
    const outs = await Promise.all(res.map(async (r) => (await r.json()).outputs[0].data[0]));
    expect(outs).toEqual(Array.from({ length: 8 }, (_, k) => k + 1));
  });

  test("POST /v2/repository/models/{m}/load returns 400 for a bad config, a core that is not there included", async () => {
    fx.files["bad.neff"] = fx.files["relu.neff"];
    fx.files["bad.json"] = enc({ instances: 0 });
    await fx.app.request("/v2/repository/index", { method: "POST" });
    const bad = await fx.app.request("/v2/repository/models/bad/load", control());
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toBe(
      'Cannot load model "bad": bad.json "instances" must be an integer from 1 to 64 or "per-core"',
    );
    // A logical core the runtime does not have is the config's mistake, named with the cores there are: not nrt_load's
    // NRT_LOAD_NOT_ENOUGH_NC (503), which says to retry.
    const n = fx.runtime.visibleVncCount;
    const cores = `from 0 to ${n - 1}: the runtime has ${n} visible logical cores`;
    for (const config of [{ vnc: 99 }, { vnc: n }, { vnc: n, instances: 2 }]) {
      fx.files["bad.json"] = enc(config);
      const far = await fx.app.request("/v2/repository/models/bad/load", control());
      expect([far.status, (await far.json()).error]).toEqual([
        400,
        `Cannot load model "bad": bad.json "vnc" must be ${cores}`,
      ]);
    }
    // The last core is there, and instances from it wrap around to the first.
    fx.files["bad.json"] = enc({ vnc: n - 1, instances: 2 });
    expect((await fx.app.request("/v2/repository/models/bad/load", control())).status).toBe(200);
    expect(fx.repository.get("bad")!.served!.vncs).toEqual([n - 1, 0]);
    await fx.app.request("/v2/repository/models/bad/unload", control());
    fx.files["bad.json"] = enc({ vnc: 99 });
    expect((await fx.app.request("/v2/repository/models/bad/load", control())).status).toBe(400);
    expect(() => parseModelConfig("m", enc({ vnc: 1 }), "m.json", 1)).toThrow(
      'Cannot load model "m": m.json "vnc" must be 0: the runtime has 1 visible logical core',
    );
    expect(parseModelConfig("m", enc({ vnc: 99 }), "m.json")).toEqual({ vnc: 99 }); // no runtime, no core check
    const index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.find((e: { name: string }) => e.name === "bad").reason).toMatch(/^load failed: /);
    expect((await fx.app.request("/v2/repository/models/nope/load", control())).status).toBe(404);
  });
});
