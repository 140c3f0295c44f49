/**
 * The fault injector's collectives statuses hit a real collective in flight (issue 16 item 10, docs/collectives.md):
 * a collectives hang (1200) armed for the second phase of an all-reduce on one rank's NeuronCore, after the first
 * phase moved its bytes; a network-proxy failure (1206) in a scheduled reduce-scatter reaching the error tracker. The
 * seed's statuses reach the caller unchanged (lifecycle-error-model §4.3, §7), pinned as literals: 1200, 1206; the
 * collective is poisoned (Band C, ours for a collective), its release returns the memory, and the cores keep working.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { ccReference, NrtaCcDtype, NrtaCcOp, NrtaCcRedOp, NrtaErrorTracker, NrtError, type Tensor } from "@nrt/core";
import { exec, type Harness, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 0;
  } catch (e) {
    if (e instanceof NrtError) return e.status;
    throw e;
  }
}

const m2s = (h: Harness, nc: number) => h.sim.queueBytes(0, nc).m2s.reduce((a, b) => a + b, 0);

async function setup(n: number, sizes: { input: number; output: number }) {
  const h = await harness({ visibleCores: [...Array(n).keys()] });
  for (let v = 0; v < n; v++) await h.rt.loadCollectives(RELU_NEFF, { vnc: v });
  const baseline = h.rt.memory().total;
  const data = Array.from(
    { length: n },
    (_, v) => new Uint8Array(Float32Array.from({ length: sizes.input / 4 }, (_, i) => (v + 1) * 0.5 + i).buffer),
  );
  const ins: Tensor[] = [], outs: Tensor[] = [];
  for (let v = 0; v < n; v++) {
    ins.push(await h.rt.allocateTensor({ size: sizes.input, vnc: v, name: `in${v}` }));
    await ins[v].write(data[v]);
    outs.push(await h.rt.allocateTensor({ size: sizes.output, vnc: v, name: `out${v}` }));
  }
  return { h, baseline, data, ins, outs };
}

describe("injected collectives faults hit a collective in flight", () => {
  test("a collectives hang in phase 2 of an all-reduce: 1200 to the caller, the other ranks finished, the collective is poisoned", async () => {
    const count = 256;
    const { h, baseline, data, ins, outs } = await setup(4, { input: count * 4, output: count * 4 });
    const cc = await h.rt.collectives.prepare({ op: "all-reduce", count, inputs: ins, outputs: outs });
    const before = [0, 1, 2, 3].map((nc) => m2s(h, nc));
    // Runs on NeuronCore 2 from now: 1 = its phase-1 program, 2 = its phase-2 program.
    h.sim.faults.inject({ kind: "collectives-hang", nc: 2, atExecution: 2 });
    expect(await statusOf(cc.run())).toBe(1200);
    expect(h.sim.faults.fired().map((f) => [f.kind, f.nc])).toEqual([["collectives-hang", 2]]);
    // Phase 1 ran everywhere (each rank reduced its 64-element chunk of 4 inputs: 1024 B); phase 2 (4 chunks × 256 B
    // into the output) everywhere but on the hung NeuronCore 2.
    expect([0, 1, 2, 3].map((nc) => m2s(h, nc) - before[nc])).toEqual([2048, 2048, 1024, 2048]);
    const want = ccReference(NrtaCcOp.ALL_REDUCE, NrtaCcRedOp.SUM, NrtaCcDtype.FLOAT32, count, data)[0];
    for (const v of [0, 1, 3]) expect(await outs[v].read(0, count * 4)).toEqual(want);
    expect(await outs[2].read(0, count * 4)).toEqual(new Uint8Array(count * 4));
    const lines = h.log.entries.map((e) => e.message);
    expect(
      lines.some((l) =>
        /\[NC 2\] missing collectives status on model collective all-reduce\. Suspected hang in waiting for barrier/
          .test(l)
      ),
    ).toBe(true);
    expect(lines).toContain(
      "(FATAL-RT-UNDEFINED-STATE) [ND 0][NC 2] Suspected hang in collectives operation 2 out of 2",
    );
    // Poisoned: the next run answers 1200 without touching the device.
    expect(cc.poisoned).toBe(1200);
    const still = [0, 1, 2, 3].map((nc) => m2s(h, nc));
    expect(await statusOf(cc.run())).toBe(1200);
    expect([0, 1, 2, 3].map((nc) => m2s(h, nc))).toEqual(still);
    await cc.release();
    for (const t of [...ins, ...outs]) await t.free();
    expect(h.rt.memory().total).toBe(baseline);
    // The hung NeuronCore is not stuck: a model runs on it.
    const relu = await load(h.rt, RELU_NEFF, 2);
    expect(await exec(relu)).toBe(0);
    await h.rt.close();
  });

  test("a network-proxy failure in a scheduled reduce-scatter: 1206 in the error tracker, then a fresh collective runs", async () => {
    const count = 64;
    const { h, baseline, data, ins, outs } = await setup(2, { input: 2 * count * 4, output: count * 4 });
    const cc = await h.rt.collectives.prepare({ op: "reduce-scatter", count, inputs: ins, outputs: outs });
    h.sim.faults.inject({ kind: "network-proxy", nc: 1, atExecution: 1 });
    const errors = new NrtaErrorTracker(0);
    const req = cc.schedule({ errors });
    expect(await statusOf(req.done)).toBe(1206);
    expect(errors.list()).toEqual([{ seq_id: req.seq, error_code: 1206 }]);
    expect(h.rt.nrta.isCompleted(req.seq)).toBe(true);
    expect(h.log.entries.some((e) => /\[NC 1\] network proxy failure/.test(e.message))).toBe(true);
    expect(cc.poisoned).toBe(1206);
    await cc.release();
    // A new collective over the same buffers runs and matches the reference.
    await using again = await h.rt.collectives.prepare({ op: "reduce-scatter", count, inputs: ins, outputs: outs });
    await again.schedule().done;
    const want = ccReference(NrtaCcOp.REDUCE_SCATTER, NrtaCcRedOp.SUM, NrtaCcDtype.FLOAT32, count, data);
    for (const v of [0, 1]) expect(await outs[v].read(0, count * 4)).toEqual(want[v]);
    await again.release();
    for (const t of [...ins, ...outs]) await t.free();
    expect(h.rt.memory().total).toBe(baseline);
    await h.rt.close();
  });
});
