/**
 * The NRT_3.0.0 `nrta_*` family (seed runtime-synthesis §6; public `nrt_async.h` names and values): sequence ids,
 * execution-unit queues per logical core, completion queries, the error tracker, and copies overlapping compute.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { MemoryLogger, type Model, NrtApi, NrtaXu, NrtError, NrtStatus, type Ref, Runtime, TensorSet } from "@nrt/core";
import {
  NRTA_SEQ_NUM_MAX,
  type NrtaError,
  NrtaErrorTracker,
  nrtaSeq,
  nrtaSeqNum,
  nrtaSeqXu,
} from "../packages/core/nrta/nrta.ts";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { oneOpNeff } from "./_kernels.ts";

const containers: NrtContainer[] = [];
afterAll(async () => {
  for (const c of containers.splice(0)) await c.resolve(PortalToken).close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 256;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);
const TRAP = oneOpNeff("faults", "trap", [f32("a", N), f32("b", N)], [f32("out", N)]);
const bytesOf = (f: (i: number) => number) => new Uint8Array(Float32Array.from({ length: N }, (_, i) => f(i)).buffer);

function container(): NrtContainer {
  const c = createNrtContainer();
  containers.push(c);
  return c;
}

async function deviceIo(rt: Runtime, model: Model) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) ins.add(name, await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name }));
  outs.add("out", await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name: "out" }));
  return { ins, outs };
}

describe("nrta_* (NRT_3.0.0)", () => {
  test("nrta_seq_t carries the execution unit in the top 16 bits and the sequence number in the low 48", () => {
    expect(nrtaSeq(NrtaXu.NRTA_XU_COMPUTE, 5n)).toBe((3n << 48n) | 5n);
    expect(nrtaSeqXu(nrtaSeq(NrtaXu.NRTA_XU_COLLECTIVES, 9n))).toBe(4);
    expect(nrtaSeqNum(nrtaSeq(NrtaXu.NRTA_XU_TENSOR_WRITE, NRTA_SEQ_NUM_MAX))).toBe(2n ** 48n - 1n);
    expect([
      NrtaXu.NRTA_XU_TENSOR_READ,
      NrtaXu.NRTA_XU_TENSOR_WRITE,
      NrtaXu.NRTA_XU_TENSOR_OP,
      NrtaXu.NRTA_XU_COMPUTE,
      NrtaXu.NRTA_XU_COLLECTIVES,
    ]).toEqual([0, 1, 2, 3, 4]);
  });

  test("a write → execute → read chain runs in order and each unit counts its own sequence numbers", async () => {
    const rt = await Runtime.init({
      ...nrtPlugins(container()),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    try {
      const model = await rt.load(ADD);
      const { ins, outs } = await deviceIo(rt, model);
      const results: Uint8Array[] = [];
      const reqs = [];
      for (let k = 0; k < 4; k++) {
        const wa = rt.nrta.tensorWrite(ins.get("a"), bytesOf((i) => i * k));
        const wb = rt.nrta.tensorWrite(ins.get("b"), bytesOf(() => k), 0, { queue: 1 });
        const x = rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs), { after: [wa, wb] });
        const buf = new Uint8Array(N * 4);
        results.push(buf);
        const r = rt.nrta.tensorRead(buf, outs.get("out"), 0, N * 4, { after: [x] });
        reqs.push({ wa, wb, x, r });
        // The next writes must not overwrite the inputs before this execution ran.
        await x.done;
      }
      await Promise.all(reqs.map((q) => q.r.done));
      for (const [k, buf] of results.entries()) {
        expect(Array.from(new Float32Array(buf.buffer))).toEqual(Array.from({ length: N }, (_, i) => i * k + k));
      }
      expect(reqs.map((q) => nrtaSeqXu(q.wa.seq))).toEqual([1, 1, 1, 1]);
      expect(reqs.map((q) => nrtaSeqXu(q.x.seq))).toEqual([3, 3, 3, 3]);
      expect(reqs.map((q) => nrtaSeqXu(q.r.seq))).toEqual([0, 0, 0, 0]);
      expect(reqs.map((q) => nrtaSeqNum(q.x.seq))).toEqual([1n, 2n, 3n, 4n]);
      expect(reqs.map((q) => nrtaSeqNum(q.wa.seq))).toEqual([1n, 3n, 5n, 7n]); // two write queues share the unit's counter
      for (const q of reqs) for (const s of [q.wa, q.wb, q.x, q.r]) expect(rt.nrta.isCompleted(s.seq)).toBe(true);
      expect(rt.nrta.getSequence(0, NrtaXu.NRTA_XU_COMPUTE, 0)).toBe(reqs[3].x.seq);
      expect(rt.nrta.getSequence(1, NrtaXu.NRTA_XU_COMPUTE, 0)).toBe(nrtaSeq(NrtaXu.NRTA_XU_COMPUTE, 0n));
      expect(() => rt.nrta.isCompleted(nrtaSeq(NrtaXu.NRTA_XU_COMPUTE, 99n))).toThrow(NrtError);
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("host → device writes on the TENSOR_WRITE unit complete while an execution is still running", async () => {
    const rt = await Runtime.init({
      ...nrtPlugins(container()),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    try {
      const model = await rt.load(ADD);
      const { ins, outs } = await deviceIo(rt, model);
      const spare = await rt.allocateTensor({ size: N * 4, name: "next" });
      const order: string[] = [];
      const x = rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs));
      const w = rt.nrta.tensorWrite(spare, bytesOf((i) => i));
      const c = rt.nrta.tensorCopy(spare, 0, outs.get("out"), 0, 16, { queue: 1, after: [w, x] });
      await Promise.all([
        x.done.then(() => order.push("execute")),
        w.done.then(() => order.push("write")),
        c.done.then(() => order.push("copy")),
      ]);
      expect(order).toEqual(["write", "execute", "copy"]);
      expect(Array.from(new Float32Array((await outs.get("out").read(0, 16)).slice().buffer))).toEqual([0, 1, 2, 3]);
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "isCompleted() and drain() follow each queue: a request held back stays pending while the other queue's complete",
    async () => {
      const rt = await Runtime.init({ ...nrtPlugins(container()), logger: new MemoryLogger() });
      try {
        const t0 = await rt.allocateTensor({ size: 64, name: "t0" });
        const t1 = await rt.allocateTensor({ size: 64, name: "t1" });
        // A dependency that settles when the test says (a request on the COLLECTIVES unit whose run waits for the
        // gate): queue 0's first write waits on it, and its second on the first.
        const gate = Promise.withResolvers<void>();
        const held = rt.nrta.ccSchedule(0, () => gate.promise);
        const first = rt.nrta.tensorWrite(t0, new Uint8Array(64).fill(1), 0, { queue: 0, after: [held] });
        // 200 writes on queue 1 meanwhile, numbered between and after queue 0's two (the unit shares one counter).
        const others = [];
        for (let i = 0; i < 100; i++) others.push(rt.nrta.tensorWrite(t1, new Uint8Array(64).fill(i), 0, { queue: 1 }));
        const second = rt.nrta.tensorWrite(t0, new Uint8Array(64).fill(2), 0, { queue: 0 });
        for (let i = 0; i < 100; i++) others.push(rt.nrta.tensorWrite(t1, new Uint8Array(64).fill(i), 0, { queue: 1 }));
        await Promise.all(others.map((r) => r.done));
        let drained = false;
        const draining = rt.nrta.drain().then(() => (drained = true));
        for (const r of others) expect(rt.nrta.isCompleted(r.seq)).toBe(true);
        expect(nrtaSeqNum(first.seq)).toBe(1n);
        expect(nrtaSeqNum(second.seq)).toBe(102n);
        expect(rt.nrta.isCompleted(first.seq)).toBe(false);
        expect(rt.nrta.isCompleted(second.seq)).toBe(false);
        await new Promise((r) => setTimeout(r, 20));
        expect(drained).toBe(false); // queue 0 is still held
        gate.resolve();
        await draining;
        expect(rt.nrta.isCompleted(first.seq)).toBe(true);
        expect(rt.nrta.isCompleted(second.seq)).toBe(true);
        expect(Array.from((await t0.read()).subarray(0, 4))).toEqual([2, 2, 2, 2]);
        await rt.nrta.drain(); // nothing left: resolves at once
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("the nrta_* face keeps the C semantics: statuses, Ref out-parameters, the error tracker", async () => {
    const api = new NrtApi();
    const seq: Ref<bigint> = {};
    expect(api.nrta_is_completed(1n, {})).toBe(NrtStatus.NRT_UNINITIALIZED);
    await api.nrt_init({
      ...nrtPlugins(container()),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    try {
      const rt = api.runtime!;
      const trap: Ref<Model> = {}, ok: Ref<Model> = {};
      expect(await api.nrt_load(TRAP, 0, 1, trap)).toBe(NrtStatus.NRT_SUCCESS);
      expect(await api.nrt_load(ADD, 0, 1, ok)).toBe(NrtStatus.NRT_SUCCESS);
      const { ins, outs } = await deviceIo(rt, ok.value!);
      const tracker: Ref<NrtaErrorTracker> = {};
      expect(api.nrta_error_tracker_create(0, tracker)).toBe(NrtStatus.NRT_SUCCESS);
      expect(api.nrta_error_tracker_create(7, {})).toBe(NrtStatus.NRT_INVALID);
      expect(api.nrta_tensor_write(ins.get("a"), bytesOf((i) => i), 0, N * 4, 0, tracker.value!, seq)).toBe(
        NrtStatus.NRT_SUCCESS,
      );
      const write = seq.value!;
      expect(api.nrta_execute_schedule(trap.value!, ins, outs, 0, tracker.value!, seq)).toBe(NrtStatus.NRT_SUCCESS);
      const bad = seq.value!;
      expect(api.nrta_execute_schedule(ok.value!, ins, outs, 1, null, seq)).toBe(NrtStatus.NRT_INVALID); // compute has one queue
      expect(api.nrta_tensor_copy(ins.get("a"), 0, ins.get("b"), 0, 64, 2, null, seq)).toBe(NrtStatus.NRT_INVALID); // tensor op has two
      expect(api.nrta_is_completed(nrtaSeq(NrtaXu.NRTA_XU_COLLECTIVES, 1n), {})).toBe(NrtStatus.NRT_INVALID);
      await rt.nrta.drain();
      const done: Ref<boolean> = {};
      expect(api.nrta_is_completed(write, done)).toBe(NrtStatus.NRT_SUCCESS);
      expect(done.value).toBe(true);
      expect(api.nrta_is_completed(bad, done)).toBe(NrtStatus.NRT_SUCCESS);
      expect(done.value).toBe(true);
      const list: Ref<readonly NrtaError[]> = {}, count: Ref<number> = {};
      expect(api.nrta_error_tracker_get_list(tracker.value!, list, count)).toBe(NrtStatus.NRT_SUCCESS);
      expect(count.value).toBe(1);
      expect(list.value![0].seq_id).toBe(bad);
      expect(list.value![0].error_code).toBe(6); // the trap's NRT_HW_ERROR (Band A: it does not poison the model)
      expect(rt.poisonedStatus(trap.value!)).toBeUndefined();
      const last: Ref<bigint> = {};
      expect(api.nrta_get_sequence(0, NrtaXu.NRTA_XU_COMPUTE, 0, last)).toBe(NrtStatus.NRT_SUCCESS);
      expect(last.value).toBe(bad);
      expect(api.nrta_get_sequence(0, NrtaXu.NRTA_XU_COMPUTE, 1, last)).toBe(NrtStatus.NRT_INVALID);
      const buf = new Uint8Array(N * 4);
      expect(api.nrta_tensor_read(buf, ins.get("a"), 0, N * 4, 1, null, seq)).toBe(NrtStatus.NRT_SUCCESS);
      await rt.nrta.drain();
      expect(new Float32Array(buf.buffer)[N - 1]).toBe(N - 1);
      api.nrta_error_tracker_destroy(tracker.value!);
    } finally {
      await api.nrt_close();
    }
    expect(api.nrta_get_sequence(0, 3, 0, seq)).toBe(NrtStatus.NRT_CLOSED);
  }, 30_000);
});
