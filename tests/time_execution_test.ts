/**
 * The runtime's `timeExecution` option (ours): it is asked once per execution, and only the executions it accepts
 * have their host steps timed and heard by `onSpan`; a load's steps are heard whatever it says. The dashboard's
 * monitor samples with it: one timed execution of a model per NeuronCore every `STEP_SAMPLE_MS`, and a NeuronCore's
 * last execution is its last timed one. And execution listeners that throw: `timeExecution` or `onExecution` fail the
 * execution, whose core's turn and model reference still go back; `onSpan`, heard mid-protocol, is logged once.
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { type HostSpan, MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { DashboardMonitor, STEP_SAMPLE_MS } from "@nrt/http-api";
import { oneOpNeff } from "./_kernels.ts";

/** A container of its own per runtime: closing a runtime closes the portal it owns. */
const containers: Array<ReturnType<typeof createNrtContainer>> = [];
function plugins() {
  const c = createNrtContainer();
  containers.push(c);
  return nrtPlugins(c);
}
afterAll(async () => {
  for (const c of containers) await c.resolve(PortalToken).close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

/** relu FP32[8] loaded, with its input written (-4..3). */
async function relu(rt: Runtime) {
  const n = 8;
  const model = await rt.load(oneOpNeff("relu", "relu", [f32("x", n)], [f32("y", n)]));
  const x = await rt.allocateTensor({ size: n * 4, name: "x" });
  const y = await rt.allocateTensor({ size: n * 4, name: "y" });
  const ins = new TensorSet(), outs = new TensorSet();
  ins.add("x", x);
  outs.add("y", y);
  await x.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i - 4).buffer));
  return { model, ins, outs, x, y };
}

describe("timeExecution", () => {
  test("only the executions it accepts are timed; loads always are", async () => {
    const spans: HostSpan[] = [];
    const asked: Array<[number, number, number]> = [];
    const rt = await Runtime.init({
      ...plugins(),
      logger: new MemoryLogger(),
      onSpan: (s) => spans.push(s),
      timeExecution: (seq, nc, model) => {
        asked.push([seq, nc, model]);
        return seq % 2 === 0;
      },
    });
    try {
      const n = 8;
      const { model, ins, outs, x, y } = await relu(rt);
      expect(spans.some((s) => s.name === "nrt_load")).toBe(true);
      const runs = 6;
      for (let k = 0; k < runs; k++) {
        await x.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i - k).buffer));
        await model.execute(ins, outs);
        // Untimed or not, the execution ran.
        expect(Array.from(new Float32Array((await y.read()).slice().buffer))).toEqual(
          Array.from({ length: n }, (_, i) => Math.max(0, i - k)),
        );
      }
      const seqs = asked.map(([seq]) => seq);
      expect(seqs.length).toBe(runs);
      expect(new Set(seqs).size).toBe(runs);
      // Asked with the execution's NeuronCore, the one its timed steps name, and its model's handle.
      const ncs = new Set(asked.map(([, nc]) => nc));
      expect([ncs.size, spans.find((s) => s.name === "nrt_execute")?.nc]).toEqual([1, asked[0][1]]);
      expect(asked.every(([, , m]) => m === model.handle)).toBe(true);
      const timed = seqs.filter((s) => s % 2 === 0);
      expect(timed.length).toBe(3);
      const executed = spans.filter((s) => s.name === "nrt_execute").map((s) => s.seq);
      expect(executed).toEqual(timed);
      // Every step heard belongs to a timed execution, and each timed one has its doorbell and completion wait.
      const stepSeqs = spans.filter((s) => s.seq !== undefined).map((s) => s.seq!);
      expect(stepSeqs.every((s) => s % 2 === 0)).toBe(true);
      for (const seq of timed) {
        const names = spans.filter((s) => s.seq === seq).map((s) => s.name);
        expect(names).toContain("doorbell");
        expect(names).toContain("completion_wait");
        expect(names).toContain("kmgr_exec_pre");
      }
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "a timeExecution that throws fails that execution only: its turn and model reference are given back",
    async () => {
      let calls = 0;
      const rt = await Runtime.init({
        ...plugins(),
        logger: new MemoryLogger(),
        onSpan: () => {},
        timeExecution: () => {
          if (++calls === 1) throw new Error("listener bug");
          return true;
        },
      });
      try {
        const { model, ins, outs, y } = await relu(rt);
        await expect(model.execute(ins, outs)).rejects.toThrow("listener bug");
        await model.execute(ins, outs); // the core's turn was given back
        expect(Array.from(new Float32Array((await y.read()).slice().buffer))).toEqual([0, 0, 0, 0, 0, 1, 2, 3]);
        await model.unload(); // and the model's reference: the unload does not wait for it
        expect(calls).toBe(2);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("an onExecution that throws as an execution ends fails it; its turn and reference go back", async () => {
    let fail = true;
    const rt = await Runtime.init({
      ...plugins(),
      logger: new MemoryLogger(),
      onExecution: (e) => {
        if (e.phase === "end" && fail) throw new Error("execution listener bug");
      },
    });
    try {
      const { model, ins, outs, y } = await relu(rt);
      await expect(model.execute(ins, outs)).rejects.toThrow("execution listener bug");
      fail = false;
      await model.execute(ins, outs);
      expect(Array.from(new Float32Array((await y.read()).slice().buffer))).toEqual([0, 0, 0, 0, 0, 1, 2, 3]);
      await model.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("an onSpan that throws is logged once and the executions go on", async () => {
    const log = new MemoryLogger();
    let heard = 0;
    const rt = await Runtime.init({
      ...plugins(),
      logger: log,
      onSpan: () => {
        heard++;
        throw new Error("span listener bug");
      },
    });
    try {
      const { model, ins, outs, y } = await relu(rt);
      for (let k = 0; k < 3; k++) await model.execute(ins, outs);
      expect(Array.from(new Float32Array((await y.read()).slice().buffer))).toEqual([0, 0, 0, 0, 0, 1, 2, 3]);
      const warnings = log.entries.filter((e) => e.message.includes("span listener bug"));
      expect([heard > 3 * 4, warnings.length]).toEqual([true, 1]);
      await model.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("the dashboard's monitor times one execution of a model per NeuronCore every STEP_SAMPLE_MS", () => {
    expect(STEP_SAMPLE_MS).toBe(250);
    const monitor = new DashboardMonitor();
    const run = (seq: number, nc: number, model: number, step: string): boolean => {
      const timed = monitor.timeExecution(seq, nc, model);
      monitor.onExecution({ phase: "start", ncs: [nc], model, seq });
      const t = performance.timeOrigin + performance.now();
      if (timed) monitor.onSpan({ name: step, start: t, end: t + 0.001, nc, seq });
      monitor.onExecution({ phase: "end", ncs: [nc], model, seq, status: 0 });
      return timed;
    };
    // The first execution on a core is timed; the next ones of the same model within the window are not, on that
    // core only; another model's is.
    expect([run(1, 0, 9, "a"), run(2, 0, 9, "b"), run(3, 1, 9, "c"), run(4, 1, 9, "d")])
      .toEqual([true, false, true, false]);
    // A core's last execution is its last timed one, with its steps; the untimed ones still count.
    expect([monitor.lastExecution(0)?.seq, monitor.lastExecution(0)?.steps.map((s) => s.name)]).toEqual([1, ["a"]]);
    expect(monitor.lastExecution(1)?.seq).toBe(3);
    expect([monitor.executions(0), monitor.latency(9).counts.reduce((a, b) => a + b, 0)]).toEqual([2, 4]);
    expect([run(5, 0, 7, "e"), run(6, 0, 7, "f"), run(7, 0, 9, "g")]).toEqual([true, false, true]);
    expect([monitor.lastExecution(0)?.model, monitor.lastExecution(0)?.seq]).toEqual([9, 7]);
  });

  test("after STEP_SAMPLE_MS without a timed execution, the next one is timed", async () => {
    const monitor = new DashboardMonitor();
    expect(monitor.timeExecution(1, 0, 9)).toBe(true);
    expect(monitor.timeExecution(2, 0, 9)).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(monitor.timeExecution(3, 0, 9)).toBe(true);
  });

  test("without timeExecution the monitor keeps every execution as the last", () => {
    const monitor = new DashboardMonitor();
    for (const seq of [1, 2]) {
      monitor.onExecution({ phase: "start", ncs: [0], model: 9, seq });
      monitor.onExecution({ phase: "end", ncs: [0], model: 9, seq, status: 0 });
    }
    expect(monitor.lastExecution(0)?.seq).toBe(2);
  });
});
