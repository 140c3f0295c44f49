// nrt profile: one execution as a Chrome Trace Event document (Trace Event Format: the JSON Object Format,
// complete "X" events with ts/dur in µs, instant "i" events, "M" metadata naming processes and threads). Checked:
// the structure, the tracks, the nesting of every track's slices, and the ordering facts the seeds fix — one
// doorbell per execution on one NeuronCore (runtime-synthesis §3.3), and the DRAIN that joins the 8 Q7 cores
// ending after every core's kernel (spmd-teardown §4.3).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChromeTrace, TraceEvent } from "../packages/cli/neuron/chrome_trace.ts";
import { profileNeff } from "../packages/cli/profile_command.ts";
import { startServer } from "../packages/cli/serve.ts";
import { runNrt } from "./_cli.ts";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });

let dir: string;
let trace: ChromeTrace;

const slices = (pred: (e: TraceEvent) => boolean = () => true) =>
  trace.traceEvents.filter((e) => e.ph === "X" && pred(e));
const end = (e: TraceEvent) => e.ts + (e.dur ?? 0);
const threadName = (pid: number, tid: number) =>
  (trace.traceEvents.find((e) => e.ph === "M" && e.name === "thread_name" && e.pid === pid && e.tid === tid)?.args as {
    name: string;
  } | undefined)?.name;
const within = (inner: TraceEvent, outer: TraceEvent) => inner.ts >= outer.ts && end(inner) <= end(outer) + 1e-3;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nrt-profile-"));
  const neff = oneOpNeff("relu", "relu", [f32("x", [8])], [f32("y", [8])]);
  writeFileSync(join(dir, "relu.neff"), neff);
  writeFileSync(join(dir, "x.json"), JSON.stringify([1, -2, 3, -4, 5, -6, 7, -8]));
  trace = await profileNeff({ neff, file: "relu.neff", arch: "cayman", inputs: new Map([["x", join(dir, "x.json")]]) });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("nrt profile: the trace's structure", () => {
  test("every event has the fields its phase needs; times are µs from the earliest event", () => {
    expect(trace.displayTimeUnit).toBe("ms");
    expect(trace.otherData.model).toBe("relu.neff");
    expect(trace.otherData.origin_ms).toBeGreaterThan(0);
    for (const e of trace.traceEvents) {
      expect(["X", "i", "M"]).toContain(e.ph);
      expect(typeof e.name).toBe("string");
      expect(Number.isInteger(e.pid) && Number.isInteger(e.tid)).toBe(true);
      expect(e.ts).toBeGreaterThanOrEqual(0);
      if (e.ph === "X") expect(e.dur).toBeGreaterThanOrEqual(0);
      if (e.ph === "i") expect(e.s).toBe("t");
    }
    expect(Math.min(...slices().map((e) => e.ts))).toBe(0);
  });

  test("a track per host call, the sequencer, each DMA queue used, each of the 8 Q7 cores, the records, the stdio drain", () => {
    const names = trace.traceEvents.filter((e) => e.ph === "M" && e.name === "thread_name").map((e) =>
      (e.args as { name: string }).name
    );
    expect(names).toEqual(expect.arrayContaining([
      "nrt_load",
      "nrt_execute",
      "sequencer",
      ...Array.from({ length: 8 }, (_, c) => `Q7 core ${c}`),
      "notifications",
      "stdio drain",
      "DMA queue 0 (M2S)",
      "DMA queue 0 (S2M)",
    ]));
    const processes = trace.traceEvents.filter((e) => e.ph === "M" && e.name === "process_name").map((e) =>
      (e.args as { name: string }).name
    );
    expect(processes).toEqual(["host: nrt runtime", "NeuronCore 0"]);
  });

  test("the DMA queues carry the model's bytes: 32 in (x, 8 float32) and 32 out (y)", () => {
    const bytes = (dir: string) =>
      slices((e) => threadName(e.pid, e.tid)?.endsWith(`(${dir})`) === true).reduce(
        (a, e) => a + (e.args!.bytes as number),
        0,
      );
    expect(bytes("M2S")).toBe(32);
    expect(bytes("S2M")).toBe(32);
  });
});

describe("nrt profile: nesting", () => {
  test("on every track, two slices are either disjoint or one holds the other (viewers stack them so)", () => {
    const byTrack = new Map<string, TraceEvent[]>();
    for (const e of slices()) byTrack.set(`${e.pid}:${e.tid}`, [...(byTrack.get(`${e.pid}:${e.tid}`) ?? []), e]);
    for (const [track, list] of byTrack) {
      for (const a of list) {
        for (const b of list) {
          if (a === b) continue;
          const disjoint = end(a) <= b.ts + 1e-3 || end(b) <= a.ts + 1e-3;
          expect({ track, a: a.name, b: b.name, ok: disjoint || within(a, b) || within(b, a) }).toEqual({
            track,
            a: a.name,
            b: b.name,
            ok: true,
          });
        }
      }
    }
  });

  test("the load's stages lie in nrt_load, the execution's steps in nrt_execute, every instruction in its run", () => {
    const [load] = slices((e) => e.name === "nrt_load");
    for (const s of ["neff_parse", "kelf_load", "kbl_model_add"]) {
      expect(within(slices((e) => e.name === s)[0], load)).toBe(true);
    }
    const [exec] = slices((e) => e.name === "nrt_execute");
    const steps = slices((e) => e.cat === "host,execute" && e.name !== "nrt_execute");
    expect(steps.map((e) => e.name)).toEqual(
      expect.arrayContaining(["kmgr_exec_pre", "doorbell", "completion_wait", "copy_out"]),
    );
    for (const s of steps) expect(within(s, exec)).toBe(true);
    const [run] = slices((e) => e.cat === "device,sequencer");
    expect(run.args!.outcome).toBe("completed");
    for (const i of slices((e) => e.cat === "device,instruction")) expect(within(i, run)).toBe(true);
    expect(run.ts).toBeGreaterThanOrEqual(exec.ts); // the device ran once the host's nrt_execute was open
  });
});

describe("nrt profile: the ordering facts", () => {
  test("one doorbell, rung before the sequencer's run starts", () => {
    const bells = slices((e) => e.name === "doorbell");
    expect(bells.length).toBe(1);
    const [run] = slices((e) => e.cat === "device,sequencer");
    expect(bells[0].ts).toBeLessThanOrEqual(run.ts);
  });

  test("each of the 8 Q7 cores ran the kernel once, and DRAIN ends after every core's span", () => {
    const q7 = slices((e) => e.cat === "device,q7");
    expect(q7.map((e) => e.args!.core).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(q7.every((e) => e.name === "relu" && e.args!.status === "ok")).toBe(true);
    const drains = slices((e) => e.name === "DRAIN");
    expect(drains.length).toBe(1);
    for (const core of q7) expect(end(drains[0])).toBeGreaterThanOrEqual(end(core));
    const [stdio] = slices((e) => e.cat === "device,stdio");
    expect(stdio.ts).toBeGreaterThanOrEqual(Math.max(...q7.map(end)));
  });

  test("the records: EXEC_DONE is the last, after the stdio flush", () => {
    const records = trace.traceEvents.filter((e) => e.ph === "i").sort((a, b) => a.ts - b.ts);
    expect(records.at(-1)?.name).toBe("EXEC_DONE");
    const [stdio] = slices((e) => e.cat === "device,stdio");
    expect(records.at(-1)!.ts).toBeGreaterThanOrEqual(end(stdio));
  });
});

describe("nrt profile: the command", () => {
  test("-o writes the trace file; bad arguments exit 2", async () => {
    const out = join(dir, "trace.json");
    const r = await runNrt([
      "profile",
      join(dir, "relu.neff"),
      "--input",
      `x=${join(dir, "x.json")}`,
      "-o",
      out,
      "--arch",
      "cayman",
    ]);
    expect(r.code).toBe(0);
    const written = JSON.parse(readFileSync(out, "utf8")) as ChromeTrace;
    expect(written.traceEvents.filter((e) => e.name === "doorbell").length).toBe(1);
    expect((await runNrt(["profile"])).code).toBe(2);
    const bad = await runNrt(["profile", join(dir, "relu.neff"), "--input", "x"]);
    expect([bad.code, bad.err.split("\n")[0]]).toEqual([
      2,
      "Cannot parse nrt profile arguments: --input x is not NAME=FILE.json",
    ]);
    const unknown = await runNrt(["profile", join(dir, "relu.neff"), "--input", `z=${join(dir, "x.json")}`]);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('the model has no input "z"');
  });
});

describe("nrt serve with NEURON_RT_INSPECT_ENABLE", () => {
  test("GET /v2/neuron/trace answers the last execution with the same tracks and facts; off, the route is absent", async () => {
    const server = await startServer({
      models: dir,
      port: 0,
      grpcPort: "off",
      arch: "cayman",
      inspect: true,
      log: () => {},
    });
    const plain = await startServer({ models: dir, port: 0, grpcPort: "off", arch: "cayman", log: () => {} });
    try {
      const res = await fetch(`${server.url}/v2/models/relu/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -2, 3, -4, 5, -6, 7, -8] }],
        }),
      });
      expect(res.status).toBe(200);
      await res.body?.cancel();
      const answer = await fetch(`${server.url}/v2/neuron/trace`);
      const t = await answer.json() as ChromeTrace;
      expect({ status: answer.status, body: answer.status === 200 ? "trace" : t }).toEqual({
        status: 200,
        body: "trace",
      });
      const x = t.traceEvents.filter((e) => e.ph === "X");
      expect(x.filter((e) => e.name === "nrt_execute").map((e) => e.args!.detail)).toEqual(["relu.neff"]);
      expect(x.filter((e) => e.name === "doorbell").length).toBe(1);
      const q7 = x.filter((e) => e.cat === "device,q7");
      expect(q7.map((e) => e.args!.core).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      const [drain] = x.filter((e) => e.name === "DRAIN");
      for (const core of q7) expect(end(drain)).toBeGreaterThanOrEqual(end(core));
      expect((await fetch(`${plain.url}/v2/neuron/trace`)).status).toBe(404);
    } finally {
      await server.close();
      await plain.close();
    }
  });
});
