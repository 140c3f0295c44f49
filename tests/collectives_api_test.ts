/**
 * The collectives API (issue 16 item 10, docs/collectives.md): `nrt_load_collectives` with the seed's statuses for a
 * bad global comm and bad replica groups, `nrta_cc_prepare`'s checks, `nrta_cc_schedule` on the COLLECTIVES unit,
 * `NRT_COLL_PENDING` for a release while a run is pending, an in-place all-reduce, and memory back to its baseline.
 * Seed values pinned as literals: NRT_INVALID 2, NRT_COLL_PENDING 1100, NRTA_XU_COLLECTIVES 4.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import {
  type Collective,
  MemoryLogger,
  type Model,
  NrtaCcDtype,
  NrtaCcOp,
  NrtaCcRedOp,
  NrtaErrorTracker,
  NrtApi,
  nrtaSeqXu,
  NrtError,
  type Ref,
  type Tensor,
} from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";

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

describe("nrt_load_collectives", () => {
  test("a bad global comm or bad replica groups is NRT_INVALID (2), loads nothing and books no memory", async () => {
    const { rt } = await harness({ visibleCores: [0, 1, 2, 3] });
    // The kernel library of a core stays staged after its first model unloads (shared per core, runtime-synthesis
    // §4.4): stage it once, so the baseline is what a load that fails after kbl_model_add must return to.
    await (await rt.load(RELU_NEFF, 1)).unload();
    const baseline = rt.memory().total;
    const bad: Array<[string, Parameters<typeof rt.loadCollectives>[1]]> = [
      ["g_device_count 0", { globalDeviceCount: 0 }],
      ["g_device_id = g_device_count", { globalDeviceId: 1, globalDeviceCount: 1 }],
      ["g_device_id negative", { globalDeviceId: -1 }],
      ["two devices", { globalDeviceId: 0, globalDeviceCount: 2 }],
      ["empty groups", { replicaGroups: [] }],
      ["an empty group", { replicaGroups: [[0, 1, 2, 3], []] }],
      ["a rank out of range", { replicaGroups: [[0, 1], [2, 4]] }],
      ["a rank twice", { replicaGroups: [[0, 1], [1, 2]] }],
      ["groups of two sizes", { replicaGroups: [[0, 1, 2], [3]] }],
      ["fewer ranks than comm channels", { replicaGroups: [[0, 1]] }],
      ["a fractional rank", { replicaGroups: [[0, 1.5], [2, 3]] }],
    ];
    for (const [what, o] of bad) {
      expect({ what, status: await statusOf(rt.loadCollectives(RELU_NEFF, { vnc: 1, ...o })) }).toEqual({
        what,
        status: 2,
      });
    }
    expect(rt.cores()[1].models).toEqual([]);
    expect(rt.memory().total).toBe(baseline);
    // The order (seed §2.1): the global comm is checked before the loader (nothing installed), the replica groups
    // after it (installed, then unloaded again).
    const installs = () => rt.events.list().filter((e) => e.startsWith("ucode_switch_libs nc=1 ")).length;
    let n = installs();
    expect(await statusOf(rt.loadCollectives(RELU_NEFF, { vnc: 1, globalDeviceCount: 2 }))).toBe(2);
    expect(installs()).toBe(n);
    expect(await statusOf(rt.loadCollectives(RELU_NEFF, { vnc: 1, replicaGroups: [[0, 1]] }))).toBe(2);
    expect(installs()).toBe(++n);
    expect(rt.memory().total).toBe(baseline);
    const m = await rt.loadCollectives(RELU_NEFF, { vnc: 1, replicaGroups: [[0, 1], [2, 3]] });
    expect(rt.collectives.commOf(m)).toEqual({
      globalDeviceId: 0,
      globalDeviceCount: 1,
      replicaGroups: [[0, 1], [2, 3]],
    });
    // Every collectives model of the runtime must agree on the groups.
    expect(await statusOf(rt.loadCollectives(RELU_NEFF, { vnc: 2, replicaGroups: [[0, 2], [1, 3]] }))).toBe(2);
    await m.unload();
    expect(rt.collectives.commOf(m)).toBeUndefined();
    await rt.close();
  });

  test("through the facade: 0 on success, 2 for a bad comm, and the comm is recorded", async () => {
    const api = new NrtApi();
    const sim = new DeviceSimPortal();
    await api.nrt_init({
      portal: sim,
      archPacks: [cayman],
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    const m: Ref<Model> = {};
    expect(await api.nrt_load_collectives(RELU_NEFF, 0, 1, 0, 2, m)).toBe(2);
    expect(await api.nrt_load_collectives(RELU_NEFF, 0, 1, 3, 1, m)).toBe(2);
    expect(await api.nrt_load_collectives(RELU_NEFF, 0, 1, 0, 1, m, [[0], [0]])).toBe(2);
    expect(m.value).toBeUndefined();
    expect(await api.nrt_load_collectives(RELU_NEFF, 0, 1, 0, 1, m, [[0], [1]])).toBe(0);
    expect(api.runtime!.collectives.commOf(m.value!)?.replicaGroups).toEqual([[0], [1]]);
    expect(await api.nrt_close()).toBe(0);
    expect(await api.nrt_load_collectives(RELU_NEFF, 0, 1, 0, 1, m)).toBe(14);
  });
});

describe("nrta_cc_prepare / nrta_cc_schedule", () => {
  /** Four logical cores in replica groups [0, 1] and [2, 3]; collectives models on 0 and 1 only. */
  async function twoRanks() {
    const h = await harness({ visibleCores: [0, 1, 2, 3] });
    for (const v of [0, 1]) await h.rt.loadCollectives(RELU_NEFF, { vnc: v, replicaGroups: [[0, 1], [2, 3]] });
    const baseline = h.rt.memory().total;
    const dev = (v: number, size: number, name: string) => h.rt.allocateTensor({ size, vnc: v, name });
    return { ...h, baseline, dev };
  }

  test("bad input is NRT_INVALID (2) and books nothing", async () => {
    const { rt, dev } = await twoRanks();
    const a = [await dev(0, 64, "a0"), await dev(1, 64, "a1")];
    const b = [await dev(0, 64, "b0"), await dev(1, 64, "b1")];
    const c2 = await dev(2, 64, "c2");
    const host = await rt.allocateTensor({ size: 64, vnc: 1, location: "host", name: "h1" });
    const before = rt.memory().total;
    const cases: Array<[string, unknown]> = [
      ["unknown op", { op: "broadcast", count: 16, inputs: a, outputs: b }],
      ["unknown reduction", { op: "all-reduce", reduce: "min", count: 16, inputs: a, outputs: b }],
      ["unknown type", { op: "all-reduce", dtype: "float16", count: 16, inputs: a, outputs: b }],
      ["count 0", { op: "all-reduce", count: 0, inputs: a, outputs: b }],
      ["tensors too small", { op: "all-reduce", count: 17, inputs: a, outputs: b }],
      ["all-gather output too small", { op: "all-gather", count: 16, inputs: a, outputs: b }],
      ["one output for two inputs", { op: "all-reduce", count: 16, inputs: a, outputs: [b[0]] }],
      ["a host tensor", { op: "all-reduce", count: 16, inputs: a, outputs: [b[0], host] }],
      ["input and output on different cores", { op: "all-reduce", count: 16, inputs: a, outputs: [b[1], b[0]] }],
      ["two ranks on one core", { op: "all-reduce", count: 16, inputs: [a[0], b[0]], outputs: [b[0], a[0]] }],
      ["a core without a collectives model", { op: "all-reduce", count: 16, inputs: [a[0], c2], outputs: [b[0], c2] }],
      ["ranks that are not a whole replica group", { op: "all-reduce", count: 16, inputs: [a[0]], outputs: [b[0]] }],
      ["reduce-scatter output overlapping an input", {
        op: "reduce-scatter",
        count: 4,
        inputs: a,
        outputs: [a[0].slice(0, 16), b[1]],
      }],
    ];
    for (const [what, o] of cases) {
      expect({ what, status: await statusOf(rt.collectives.prepare(o as never)) }).toEqual({ what, status: 2 });
    }
    expect(rt.collectives.live).toBe(0);
    expect(rt.memory().total).toBe(before);
    await rt.close();
  });

  test("schedule runs on the COLLECTIVES unit (4); a release while the run is pending is NRT_COLL_PENDING (1100)", async () => {
    const api = new NrtApi();
    const sim = new DeviceSimPortal();
    await api.nrt_init({
      portal: sim,
      archPacks: [cayman],
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    const rt = api.runtime!;
    for (const v of [0, 1]) expect(await api.nrt_load_collectives(RELU_NEFF, v, 1, 0, 1, {})).toBe(0);
    const baseline = rt.memory().total;
    const ins: Tensor[] = [], outs: Tensor[] = [];
    for (const v of [0, 1]) {
      const t: Ref<Tensor> = {};
      expect(await api.nrt_tensor_allocate(0, v, 16, `in${v}`, t)).toBe(0);
      await t.value!.write(new Uint8Array(Float32Array.from([1, 2, 3, 4].map((x) => x * (v + 1))).buffer));
      ins.push(t.value!);
      expect(await api.nrt_tensor_allocate(0, v, 32, `out${v}`, t)).toBe(0);
      outs.push(t.value!);
    }
    const afterTensors = rt.memory().total;
    const cc: Ref<Collective> = {};
    expect(await api.nrta_cc_prepare(9, NrtaCcRedOp.SUM, NrtaCcDtype.FLOAT32, 4, ins, outs, cc)).toBe(2);
    expect(await api.nrta_cc_prepare(NrtaCcOp.ALL_GATHER, NrtaCcRedOp.SUM, NrtaCcDtype.FLOAT32, 4, ins, outs, cc)).toBe(
      0,
    );
    expect(rt.memory().total).toBeGreaterThan(afterTensors);
    const err: Ref<NrtaErrorTracker> = {};
    expect(api.nrta_error_tracker_create(0, err)).toBe(0);
    const seq: Ref<bigint> = {};
    expect(api.nrta_cc_schedule(cc.value!, 1, err.value!, seq)).toBe(2); // the COLLECTIVES unit has one queue
    expect(api.nrta_cc_schedule(cc.value!, 0, err.value!, seq)).toBe(0);
    expect(nrtaSeqXu(seq.value!)).toBe(4);
    expect(cc.value!.pending).toBe(1);
    expect(await api.nrta_cc_release(cc.value!)).toBe(1100);
    await rt.nrta.drain();
    const done: Ref<boolean> = {};
    expect(api.nrta_is_completed(seq.value!, done)).toBe(0);
    expect(done.value).toBe(true);
    const last: Ref<bigint> = {};
    expect(api.nrta_get_sequence(0, 4, 0, last)).toBe(0); // rank 0's COLLECTIVES queue completed it
    expect(last.value).toBe(seq.value);
    expect(err.value!.list()).toEqual([]);
    const want = Float32Array.from([1, 2, 3, 4, 2, 4, 6, 8]);
    for (const o of outs) expect(new Float32Array((await o.read(0, 32)).slice().buffer)).toEqual(want);
    expect(await api.nrta_cc_release(cc.value!)).toBe(0);
    expect(rt.memory().total).toBe(afterTensors);
    for (const t of [...ins, ...outs]) expect(await api.nrt_tensor_free({ value: t })).toBe(0);
    expect(rt.memory().total).toBe(baseline);
    expect(await api.nrt_close()).toBe(0);
    expect(api.nrta_cc_schedule(cc.value!, 0, null, seq)).toBe(14);
  });

  test("an in-place all-reduce (input = output) is correct, and runs again with new data", async () => {
    const { rt, dev, baseline } = await twoRanks();
    const x = [await dev(0, 40, "x0"), await dev(1, 40, "x1")];
    await using cc = await rt.collectives.prepare({
      op: "all-reduce",
      reduce: "max",
      count: 10,
      inputs: x,
      outputs: x,
    });
    for (const round of [1, 2]) {
      await x[0].write(new Uint8Array(Float32Array.from({ length: 10 }, (_, i) => i * round).buffer));
      await x[1].write(new Uint8Array(Float32Array.from({ length: 10 }, (_, i) => (9 - i) * round).buffer));
      await cc.run();
      const want = Float32Array.from({ length: 10 }, (_, i) => Math.max(i, 9 - i) * round);
      for (const t of x) expect(new Float32Array((await t.read(0, 40)).slice().buffer)).toEqual(want);
    }
    expect(cc.phaseCount).toBe(2);
    await cc.release();
    for (const t of x) await t.free();
    expect(rt.memory().total).toBe(baseline);
    await rt.close();
    expect(rt.memory().total).toBe(0);
  });

  test("a collective and a model execution on the same cores take turns, and both are right", async () => {
    const h = await harness({ visibleCores: [0, 1] });
    const { rt } = h;
    for (const v of [0, 1]) await rt.loadCollectives(RELU_NEFF, { vnc: v });
    const relu = await load(rt, RELU_NEFF, 0);
    const x = [
      await rt.allocateTensor({ size: 64, vnc: 0, name: "x0" }),
      await rt.allocateTensor({ size: 64, vnc: 1, name: "x1" }),
    ];
    for (const [v, t] of x.entries()) {
      await t.write(new Uint8Array(Float32Array.from({ length: 16 }, (_, i) => i + 10 * v).buffer));
    }
    await using cc = await rt.collectives.prepare({ op: "all-reduce", count: 16, inputs: x, outputs: x });
    const order: string[] = [];
    await Promise.all([
      cc.run().then(() => order.push("collective")),
      relu.model.execute(relu.ins, relu.outs).then(() => order.push("execute")),
    ]);
    expect(order).toEqual(["collective", "execute"]); // the core FIFO keeps the issue order
    const sum = Float32Array.from({ length: 16 }, (_, i) => 2 * i + 10);
    for (const t of x) expect(new Float32Array((await t.read(0, 64)).slice().buffer)).toEqual(sum);
    const y = relu.outs.get(relu.model.outputs[0].name);
    expect(new Float32Array((await y.read(0, 64)).slice().buffer)).toEqual(
      Float32Array.from({ length: 16 }, (_, i) => Math.max(0, i - 8)),
    );
    await cc.release();
    await rt.close();
  });

  test("ranks on logical cores of two physical cores each (LNC 2) reduce through their first core's queues", async () => {
    const h = await harness({ visibleCores: [0, 1, 2, 3], virtualCoreSize: 2 });
    const { rt } = h;
    for (const v of [0, 1]) await rt.loadCollectives(RELU_NEFF, { vnc: v });
    const x = [
      await rt.allocateTensor({ size: 32, vnc: 0, name: "x0" }),
      await rt.allocateTensor({ size: 32, vnc: 1, name: "x1" }),
    ];
    await x[0].write(new Uint8Array(Float32Array.from([1, 5, -3, 8, 0, 2, 2, 9]).buffer));
    await x[1].write(new Uint8Array(Float32Array.from([4, 4, -1, 1, 0, 3, 1, 9]).buffer));
    const before = [0, 1, 2, 3].map((nc) => h.sim.queueBytes(0, nc).m2s.reduce((a, b) => a + b, 0));
    await using cc = await rt.collectives.prepare({ op: "all-reduce", reduce: "max", count: 8, inputs: x, outputs: x });
    await cc.run();
    for (const t of x) {
      expect(Array.from(new Float32Array((await t.read(0, 32)).slice().buffer))).toEqual([4, 5, -1, 8, 0, 3, 2, 9]);
    }
    // Physical cores 0 and 2 (the first of each logical core) moved 2 × 32 bytes each; 1 and 3 nothing.
    expect([0, 1, 2, 3].map((nc) => h.sim.queueBytes(0, nc).m2s.reduce((a, b) => a + b, 0) - before[nc])).toEqual([
      64,
      0,
      64,
      0,
    ]);
    await cc.release();
    await rt.close();
  });

  test("close releases a prepared collective: its COLLECTIVES memory is returned, and the handle answers 14", async () => {
    const { rt, dev } = await twoRanks();
    const a = [await dev(0, 64, "a0"), await dev(1, 64, "a1")];
    await a[0].write(new Uint8Array(Float32Array.from({ length: 16 }, (_, i) => i).buffer));
    await a[1].write(new Uint8Array(Float32Array.from({ length: 16 }, () => 100).buffer));
    const cc = await rt.collectives.prepare({ op: "all-reduce", count: 16, inputs: a, outputs: a });
    expect(rt.memory().cores[0].byUsage[13]).toBeGreaterThan(0); // DmaMemUsageType.COLLECTIVES
    // A run in flight when close starts finishes before close frees its programs.
    const running = cc.run();
    await rt.close();
    expect(await statusOf(running)).toBe(0);
    expect(cc.pending).toBe(0);
    expect(rt.memory().cores.map((c) => c.byUsage[13])).toEqual([0, 0, 0, 0]);
    expect(rt.memory().total).toBe(0); // close frees the two 64-byte tensors the test did not free too
    expect(cc.released).toBe(true);
    expect(await statusOf(cc.run())).toBe(14);
  });
});
