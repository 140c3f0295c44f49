/**
 * The dashboard's HTTP side without a browser: the page and script routes, the state document after inferences, a
 * kernel trap, kernel printf and an injected fault, the event stream, and the operator endpoints — 403 without
 * `admin`, working with it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type CustomOpTensorSpec, LogLevel, MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, parseServeArgs, PortalToken, SimDeviceView, startServer } from "@nrt/cli";
import { DeviceSimPortal } from "@nrt/device-sim";
import {
  createInferenceApp,
  DashboardMonitor,
  type DashboardState,
  filesFromMap,
  type InferenceApp,
  ModelRepository,
} from "@nrt/http-api";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADMIN_TOKEN, control, post, testModels } from "./_http.ts";
import { oneOpNeff } from "./_kernels.ts";

const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const f32 = (name: string, n: number): CustomOpTensorSpec => ({ name, dtype: "float32", shape: [n] });

interface Server {
  readonly app: InferenceApp;
  readonly runtime: Runtime;
  readonly repository: ModelRepository;
  readonly portal: DeviceSimPortal;
  readonly monitor: DashboardMonitor;
  close(): Promise<void>;
}

/** A runtime wired the way `nrt serve` wires it: monitor hooks, the simulator's Q7 view and fault API. */
async function server(admin: boolean): Promise<Server> {
  const sim = new SimDeviceView();
  const container = createNrtContainer();
  const portal = container.resolve(PortalToken) as DeviceSimPortal;
  sim.attach(portal);
  const monitor = new DashboardMonitor();
  const runtime = await Runtime.init({
    ...nrtPlugins(container),
    logger: monitor.wrapLogger(new MemoryLogger(LogLevel.ERROR)),
    onExecution: monitor.onExecution,
    onSpan: monitor.onSpan,
    timeExecution: monitor.timeExecution,
  });
  const files = {
    ...testModels(),
    "hello.neff": oneOpNeff("faults", "printf", [f32("x", 64)], [f32("y", 64)], 1, [2]),
  };
  const repository = new ModelRepository({ runtime, files: filesFromMap(files) });
  await repository.scan();
  await repository.loadAll();
  const app = createInferenceApp({
    runtime,
    repository,
    adminToken: admin ? ADMIN_TOKEN : undefined,
    dashboard: { monitor, deviceView: sim.view, faults: sim.faults },
  });
  return {
    app,
    runtime,
    repository,
    portal,
    monitor,
    close: async () => {
      monitor.close();
      try {
        await repository.close();
        await runtime.close();
      } finally {
        await portal.close();
      }
    },
  };
}

const state = async (app: InferenceApp): Promise<DashboardState> => {
  const res = await app.request("/v2/dashboard/state");
  expect(res.status).toBe(200);
  return await res.json();
};
const relu = { inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, -3] }] };
const trapInput = { inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] };
const helloInput = {
  inputs: [{ name: "x", shape: [64], datatype: "FP32", data: Array.from({ length: 64 }, () => 0) }],
};

describe("dashboard without admin", () => {
  let s: Server;
  beforeAll(async () => {
    s = await server(false);
  });
  afterAll(async () => {
    await s.close();
  });

  test("GET / and GET /dashboard serve the page, GET /dashboard/app.js its script", async () => {
    for (const path of ["/", "/dashboard"]) {
      const res = await s.app.request(path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      const html = await res.text();
      expect(html).toContain('<main id="main"');
      expect(html).toContain('<script src="dashboard/app.js" defer></script>');
    }
    const js = await s.app.request("/dashboard/app.js");
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(await js.text()).toContain('new EventSource("v2/dashboard/events")');
    expect((await s.app.request("/dashboard", { method: "DELETE" })).status).toBe(405);
  });

  test("the operator endpoints answer 403 with a JSON error and change nothing", async () => {
    const calls: Array<[string, unknown]> = [
      ["/v2/dashboard/models/relu/unload", {}],
      ["/v2/dashboard/models/relu/load", {}],
      ["/v2/dashboard/models/nope/load", {}],
      ["/v2/dashboard/faults", { kind: "hbm-ue", nc: 0 }],
      ["/v2/dashboard/faults/clear", {}],
    ];
    for (const [path, body] of calls) {
      const res = await s.app.request(path, post(body));
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
      const json = await res.json();
      expect(Object.keys(json)).toEqual(["error"]);
      expect(json.error).toContain("operator actions are disabled; start the server with --admin");
    }
    expect(s.repository.get("relu")?.state).toBe("READY");
    expect(s.portal.faults.pending()).toEqual([]);
    const st = await state(s.app);
    expect(st.server.admin).toBe(false);
    expect(st.models.find((m) => m.name === "relu")?.state).toBe("RUNNING");
  });

  test("the OIP repository endpoints refuse load and unload: model control is none by default", async () => {
    for (const what of ["unload", "load"]) {
      const res = await s.app.request(`/v2/repository/models/add/${what}`, post({}));
      expect(res.status).toBe(403);
      expect((await res.json()).error).toBe(
        `Cannot ${what} model "add": model control is off; start the server with --model-control explicit`,
      );
    }
    expect((await state(s.app)).models.find((m) => m.name === "add")?.state).toBe("RUNNING");
  });

  test("the state document reflects an inference: counters, outcome, executions per core, Q7 cores and memory", async () => {
    const before = await state(s.app);
    const model = before.models.find((m) => m.name === "relu")!;
    expect(model.ncs.length).toBe(1);
    const nc = model.ncs[0];
    const res = await s.app.request("/v2/models/relu/infer", post(relu));
    expect(res.status).toBe(200);
    const after = await state(s.app);
    const m = after.models.find((x) => x.name === "relu")!;
    expect(m.stats.success).toBe(before.models.find((x) => x.name === "relu")!.stats.success + 1);
    expect(m.stats.executions).toBeGreaterThan(0);
    expect(m.stats.meanRequestUs).toBeGreaterThan(0);
    expect(after.executionStatus.completed).toBe(before.executionStatus.completed + 1);
    const core = after.devices[0].cores[nc];
    expect(core.executions).toBe(before.devices[0].cores[nc].executions + 1);
    expect(core.models).toContain("relu");
    expect(core.state).toBe("idle");
    // relu fans out to all 8 Q7 cores.
    expect(core.q7?.map((q) => [q.state, q.fn])).toEqual(Array.from({ length: 8 }, () => ["idle", "relu"]));
    const mem = after.devices[0].memory;
    expect(mem.categories.length).toBe(22);
    expect(mem.categories.find((c) => c.name === "notifications")!.bytes).toBeGreaterThan(0);
    expect(mem.bookedBytes).toBe(mem.categories.reduce((a, c) => a + c.bytes, 0));
    expect(mem.hbmBytes).toBe(s.runtime.device.hbmBytes);
    // Time: the core was busy in the last minute, its last execution is relu's with the host's steps on a
    // timeline inside the execution, and relu's latency histogram counts its executions.
    expect(core.utilization.perSecond.length).toBe(60);
    expect(core.utilization.window).toBeGreaterThan(0);
    expect(core.utilization.perSecond.every((v) => v >= 0 && v <= 1)).toBe(true);
    const last = core.lastExecution!;
    expect([last.model, last.status]).toEqual(["relu", "NRT_SUCCESS"]);
    const names = last.steps.map((st) => st.name);
    expect(names.filter((n) => n === "doorbell")).toHaveLength(1); // one doorbell per execute (runtime-synthesis §3.3)
    expect(names).toContain("completion_wait");
    for (const st of last.steps) {
      expect(st.startUs).toBeLessThanOrEqual(st.endUs);
      expect(st.endUs).toBeLessThanOrEqual(last.durationUs + 1);
    }
    const doorbell = last.steps.find((st) => st.name === "doorbell")!,
      wait = last.steps.find((st) => st.name === "completion_wait")!;
    expect(wait.endUs).toBeGreaterThanOrEqual(doorbell.startUs);
    expect(m.latency.counts.length).toBe(m.latency.boundsUs.length + 1);
    expect(m.latency.counts.reduce((a, b) => a + b, 0)).toBe(m.stats.executions + 1); // + the warm-up execute
  });

  test("a trapping kernel marks its Q7 cores faulted; a trap (6) does not poison, a Band-C fault does", async () => {
    expect((await s.app.request("/v2/models/trap/infer", post(trapInput))).status).toBe(500);
    let st = await state(s.app);
    let m = st.models.find((x) => x.name === "trap")!;
    // NRT_HW_ERROR is Band A: not fail-stop (seed lifecycle-error-model §4.1).
    expect(m.state).not.toBe("POISONED");
    const core = st.devices[0].cores[m.ncs[0]];
    expect(core.state).not.toBe("faulted"); // the dashboard marks a core faulted while a resident model is poisoned
    expect(core.q7?.every((q) => q.state === "faulted" && q.fn === "trap")).toBe(true);
    expect(core.fault).toContain("Q7_TRAP");
    expect(st.executionStatus.failed + st.executionStatus.hardware_error).toBeGreaterThan(0);
    // A Band-C fault (1202) on the model's core poisons it until it is loaded again.
    s.portal.faults.inject({ kind: "nc-ue", nc: m.ncs[0], atExecution: 1 });
    expect((await s.app.request("/v2/models/trap/infer", post(trapInput))).status).toBe(500);
    st = await state(s.app);
    m = st.models.find((x) => x.name === "trap")!;
    expect(m.state).toBe("POISONED");
    expect(m.poisonedBy).toBe("NRT_EXEC_HW_ERR_NC_UE");
    expect(st.devices[0].cores[m.ncs[0]].state).toBe("faulted");
  });

  test("kernel printf reaches the state's log with its stream and NeuronCore", async () => {
    const seq = (await state(s.app)).log.at(-1)?.seq ?? 0;
    expect((await s.app.request("/v2/models/hello/infer", post(helloInput))).status).toBe(200);
    const res = await s.app.request(`/v2/dashboard/state?after=${seq}`);
    const st: DashboardState = await res.json();
    const nc = st.models.find((m) => m.name === "hello")!.ncs[0];
    expect(st.log.filter((l) => l.stream === "stdout").map((l) => [l.message, l.nc])).toEqual([[
      "line 0 from core 0",
      nc,
    ], ["line 1 from core 0", nc]]);
    expect(st.log.every((l) => l.seq > seq)).toBe(true);
  });

  test("GET /v2/dashboard/events streams state events until the monitor closes", async () => {
    const res = await s.app.request("/v2/dashboard/events");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    expect(text.startsWith("event: state\ndata: {")).toBe(true);
    const data = JSON.parse(text.split("\n").find((l) => l.startsWith("data: "))!.slice(6));
    expect(data.devices[0].generation).toBe("cayman");
    await reader.cancel();
  });
});

describe("dashboard with admin", () => {
  let s: Server;
  beforeAll(async () => {
    s = await server(true);
  });
  afterAll(async () => {
    await s.close();
  });

  test("an injected fault shows as armed, then fired: the model is POISONED with hardware_error, and reload recovers it", async () => {
    const nc = (await state(s.app)).models.find((m) => m.name === "relu")!.ncs[0];
    const armed = await s.app.request("/v2/dashboard/faults", control({ kind: "hbm-ue", nc, atExecution: 1 }));
    expect(armed.status).toBe(200);
    const { id, ncs } = await armed.json();
    expect(ncs).toEqual([nc]);
    let st = await state(s.app);
    expect(st.server.admin).toBe(true);
    expect(st.faults?.pending.map((f) => [f.id, f.kind, f.ncs])).toEqual([[id, "hbm-ue", [nc]]]);

    expect((await s.app.request("/v2/models/relu/infer", post(relu))).status).toBe(500);
    st = await state(s.app);
    const m = st.models.find((x) => x.name === "relu")!;
    expect([m.state, m.poisonedBy]).toEqual(["POISONED", "NRT_EXEC_HW_ERR_HBM_UE"]);
    expect(st.executionStatus.hardware_error).toBe(1);
    expect(st.faults?.pending).toEqual([]);
    expect(st.faults?.fired.map((f) => [f.id, f.kind, f.ncs])).toEqual([[id, "hbm-ue", [nc]]]);
    expect(st.devices[0].cores[nc].state).toBe("faulted");
    expect(st.devices[0].cores[nc].fault).toBe("HW_ERROR HBM_UE");
    expect(st.log.some((l) => l.message.includes("Uncorrectable HBM memory error"))).toBe(true);
    expect((await s.app.request("/v2/models/relu/infer", post(relu))).status).toBe(503);

    const reload = await s.app.request("/v2/dashboard/models/relu/load", control());
    expect(reload.status).toBe(200);
    expect(await reload.json()).toEqual({ name: "relu", state: "READY" });
    expect((await s.app.request("/v2/models/relu/infer", post(relu))).status).toBe(200);
    st = await state(s.app);
    expect(st.models.find((x) => x.name === "relu")!.state).toBe("RUNNING");
    expect(st.devices[0].cores[nc].state).toBe("idle");
    expect(st.devices[0].cores[nc].fault).toBe(null);
  });

  test("unload and load through the operator endpoints", async () => {
    const unload = await s.app.request("/v2/dashboard/models/add/unload", control());
    expect(await unload.json()).toEqual({ name: "add", state: "UNAVAILABLE" });
    expect((await state(s.app)).models.find((m) => m.name === "add")?.state).toBe("UNLOADED");
    const load = await s.app.request("/v2/dashboard/models/add/load");
    expect(load.status).toBe(405);
    expect((await s.app.request("/v2/dashboard/models/add/load", control())).status).toBe(200);
    expect((await state(s.app)).models.find((m) => m.name === "add")?.state).toBe("RUNNING");
  });

  test("bad requests: an unknown model is 404, a bad name or fault spec 400, clear reports what it disarmed", async () => {
    expect((await s.app.request("/v2/dashboard/models/nope/load", control())).status).toBe(404);
    expect((await s.app.request("/v2/dashboard/models/..%2Fetc/load", control())).status).toBe(400);
    for (const spec of [{ kind: "melt" }, { kind: "oob", nc: 99 }, { kind: "oob", q7: 8 }, [1], "x"]) {
      const res = await s.app.request("/v2/dashboard/faults", control(spec));
      expect({ spec, status: res.status }).toEqual({ spec, status: 400 });
      expect(typeof (await res.json()).error).toBe("string");
    }
    expect((await s.app.request("/v2/dashboard/faults", control({ kind: "hang", atExecution: 5 }))).status).toBe(200);
    const cleared = await s.app.request("/v2/dashboard/faults/clear", control());
    expect(await cleared.json()).toEqual({ cleared: s.runtime.device.ncCount });
    expect(s.portal.faults.pending()).toEqual([]);
  });

  test("without a fault API, fault injection answers 501", async () => {
    const app = createInferenceApp({
      runtime: s.runtime,
      repository: s.repository,
      adminToken: ADMIN_TOKEN,
      dashboard: true,
    });
    const res = await app.request("/v2/dashboard/faults", control({ kind: "oob" }));
    expect(res.status).toBe(501);
    expect((await state(app)).server.faultApi).toBe(false);
  });
});

describe("DashboardMonitor", () => {
  test("wrapLogger() forwards to the inner logger at its level and keeps INFO and above in a bounded ring", () => {
    const inner = new MemoryLogger(LogLevel.WARNING);
    const monitor = new DashboardMonitor({ logCapacity: 3 });
    const log = monitor.wrapLogger(inner);
    expect(log.level).toBe(LogLevel.INFO);
    log.info("line 0 from core 0", { nc: 2, stream: "stdout", tag: 3 });
    log.debug("not kept");
    log.warn("oops", { nc: 1, stream: "stderr", tag: 1 });
    log.error("bad");
    log.info("last");
    expect(inner.messages()).toEqual(["oops", "bad"]);
    expect(monitor.log().map((e) => [e.seq, e.level, e.message, e.stream, e.nc])).toEqual([
      [2, "WARNING", "oops", "stderr", 1],
      [3, "ERROR", "bad", undefined, undefined],
      [4, "INFO", "last", undefined, undefined],
    ]);
    expect(monitor.log(3).map((e) => e.message)).toEqual(["last"]);
    expect(() => new DashboardMonitor({ logCapacity: 0 })).toThrow("logCapacity 0 is not a positive integer");
  });

  test("utilization, the last execution's steps and the latency histogram follow onExecution and onSpan", () => {
    const monitor = new DashboardMonitor();
    expect(monitor.utilization(3).perSecond).toEqual(new Array(60).fill(0));
    expect(monitor.lastExecution(3)).toBeUndefined();
    monitor.onExecution({ phase: "start", ncs: [3], model: 9, seq: 5 });
    const t = performance.timeOrigin + performance.now();
    while (performance.timeOrigin + performance.now() === t); // the clock moves on
    // Running: the execution in progress counts as busy up to now.
    expect(monitor.utilization(3).perSecond[59]).toBeGreaterThan(0);
    monitor.onSpan({ name: "load_step", start: t, end: t + 1 }); // no seq: a load's step, not kept
    monitor.onSpan({ name: "doorbell", start: t, end: t + 0.002, nc: 3, seq: 5 });
    monitor.onSpan({ name: "other", start: t, end: t + 0.001, nc: 3, seq: 6 }); // another execution: not this one's
    monitor.onExecution({ phase: "end", ncs: [3], model: 9, seq: 5, status: 0 });
    const last = monitor.lastExecution(3)!;
    expect([last.model, last.seq, last.status, last.steps.map((st) => st.name)]).toEqual([9, 5, 0, ["doorbell"]]);
    expect(last.steps[0].endUs - last.steps[0].startUs).toBeCloseTo(2, 0); // µs, on a clock of ms since 1970
    expect(monitor.utilization(3).window).toBeGreaterThan(0);
    expect(monitor.utilization(2).window).toBe(0);
    const h = monitor.latency(9);
    expect(h.counts.reduce((a, b) => a + b, 0)).toBe(1);
    expect(h.boundsUs).toEqual([100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]);
    expect(monitor.latency(10).counts).toEqual(new Array(11).fill(0));
  });

  test("onExecution tracks the running model per core; changed() resolves on notify and on close", async () => {
    const monitor = new DashboardMonitor();
    const waiting = monitor.changed(60_000);
    monitor.onExecution({ phase: "start", ncs: [0, 1], model: 7, seq: 1 });
    await waiting;
    expect([monitor.running(0)?.model, monitor.running(1)?.model, monitor.executions(0)]).toEqual([7, 7, 1]);
    monitor.onExecution({ phase: "end", ncs: [0, 1], model: 7, seq: 1 });
    expect([monitor.running(0), monitor.executions(1)]).toEqual([undefined, 1]);
    const closing = monitor.changed(60_000);
    monitor.close();
    await closing;
    expect(monitor.closed.aborted).toBe(true);
    await monitor.changed(60_000); // resolves at once once closed
  });
});

describe("nrt serve --admin", () => {
  test("parseServeArgs() reads --admin", () => {
    expect(parseServeArgs(["--demo", "--admin"])).toEqual({ demo: true, admin: true });
  });

  test.if(hasServe)(
    "startServer() serves the dashboard; admin is off by default; close() ends open event streams",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-dashboard-serve-"));
      const lines: string[] = [];
      const server = await startServer({ models: dir, demo: true, arch: "cayman", port: 0, log: (l) => lines.push(l) });
      try {
        expect(lines).toContain(`nrt: dashboard at ${server.url}/ (read-only)`);
        const page = await fetch(`${server.url}/`);
        expect([page.status, (await page.text()).includes("<title>nrt dashboard</title>")]).toEqual([200, true]);
        const denied = await fetch(`${server.url}/v2/dashboard/faults`, {
          method: "POST",
          body: '{"kind":"oob"}',
          headers: { "content-type": "application/json" },
        });
        expect([denied.status, (await denied.json()).error]).toEqual([
          403,
          "Cannot inject a fault: operator actions are disabled; start the server with --admin",
        ]);
        const events = await fetch(`${server.url}/v2/dashboard/events`);
        const reader = events.body!.pipeThrough(new TextDecoderStream()).getReader();
        expect((await reader.read()).value?.startsWith("event: state\n")).toBe(true);
        // The stream is still open: close() must end it instead of waiting for it.
        await server.close();
        let done = false;
        while (!done) done = (await reader.read()).done;
        expect(done).toBe(true);
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
