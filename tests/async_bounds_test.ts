/**
 * What the async engines hold stays bounded, and close leaves no queued request half-answered.
 *
 * - NRT_2.0.0 implicit async (seed lifecycle-error-model §5.1, runtime-synthesis §6: backpressure is `NRT_QUEUE_FULL`
 *   7, an empty poll `NRT_QUEUE_EMPTY` 15): completions nobody polls are capped (ours: at the queue depth), and a
 *   submission beyond the cap is refused with 7 until a poll makes room; no completion is dropped.
 * - `nrta_*` at `nrt_close`: the requests queued before close are treated alike, in order — reads as executions —
 *   every one settles, and the device memory the runtime booked returns to zero (seed lifecycle-error-model §3.2:
 *   stop the async worker, drain, then tear down; §1.1: 14 after close).
 *
 * Statuses are the seed's literal numbers.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import {
  MemoryLogger,
  type Model,
  NrtaErrorTracker,
  NrtApi,
  type NrtaRequest,
  NrtError,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 64;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);

async function init(asyncDepth = 0): Promise<{ rt: Runtime; sim: DeviceSimPortal }> {
  const sim = new DeviceSimPortal();
  opened.push(sim);
  const rt = await Runtime.init({
    portal: sim,
    archPacks: [cayman],
    ownsPortal: false,
    visibleCores: [0, 1],
    virtualCoreSize: 1,
    asyncExecMaxInflightRequests: asyncDepth,
    logger: new MemoryLogger(),
  });
  return { rt, sim };
}

/** Host tensors. */
async function hostIo(rt: Runtime, model: Model) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) {
    const t = await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name, location: "host" });
    await t.write(new Uint8Array(Float32Array.from({ length: N }, (_, i) => (name === "a" ? i : 1)).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name: "out", location: "host" }));
  return { ins, outs };
}

const f32Bytes = (f: (i: number) => number) => new Uint8Array(Float32Array.from({ length: N }, (_, i) => f(i)).buffer);

/**
 * Device tensors (the staging path of an execution with host tensors reads them through the state guard, which the
 * executions' own path does not).
 */
async function deviceIo(rt: Runtime, model: Model) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) ins.add(name, await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name }));
  outs.add("out", await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name: "out" }));
  return { ins, outs, tensors: [ins.get("a"), ins.get("b"), outs.get("out")] };
}

/** Frees what the client allocated, after close (a no-op for tensors close already gave back). */
async function freeAll(tensors: readonly { free(): Promise<void> }[]): Promise<void> {
  await Promise.allSettled(tensors.map((t) => t.free()));
}

/** The status a promise settles with: 0 on success, the `NrtError`'s status, -1 for anything else. */
const status = (p: Promise<unknown>): Promise<number> =>
  p.then(() => 0, (e) => (e instanceof NrtError ? e.status : -1));

/** The status a synchronous call throws (0 when it returns). */
function thrown(f: () => unknown): number {
  try {
    f();
    return 0;
  } catch (e) {
    return e instanceof NrtError ? e.status : -1;
  }
}

describe("async completions nobody polls are bounded (NRT_QUEUE_FULL 7)", () => {
  test(
    "with depth Q and no callback, Q unpolled completions refuse the next submission with 7; a poll makes room",
    async () => {
      const Q = 2;
      const { rt } = await init(Q);
      try {
        const model = await rt.load(ADD, 0);
        const { ins, outs } = await hostIo(rt, model);
        const ids: number[] = [];
        for (let i = 0; i < Q; i++) ids.push(rt.submit(model, ins, outs));
        await rt.drainAsync(0);
        // Nothing in flight, Q completions waiting: refused, and no model reference is taken (nothing runs).
        expect(thrown(() => rt.submit(model, ins, outs))).toBe(7);
        expect(thrown(() => rt.submit(model, ins, outs))).toBe(7);
        // The other logical core has its own queue and its own cap.
        const other = await rt.load(ADD, 1);
        const io1 = await hostIo(rt, other);
        expect(typeof rt.submit(other, io1.ins, io1.outs)).toBe("number");
        await rt.drainAsync(1);
        // One poll, one place.
        const first = rt.tryPoll(0);
        expect(first.status).toBe(0);
        if (first.status === 0) expect(first.completion.id).toBe(ids[0]);
        ids.push(rt.submit(model, ins, outs));
        await rt.drainAsync(0);
        expect(thrown(() => rt.submit(model, ins, outs))).toBe(7);
        // Nothing was dropped: every accepted job is polled once, in order, then the queue is empty (15).
        const rest: number[] = [];
        for (let p = rt.tryPoll(0); p.status === 0; p = rt.tryPoll(0)) rest.push(p.completion.id);
        expect(rest).toEqual(ids.slice(1));
        expect(rt.tryPoll(0).status).toBe(15);
        expect(typeof rt.submit(model, ins, outs)).toBe("number");
        await rt.drainAsync(0);
        expect(rt.tryPoll(0).status).toBe(0);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("a client that submits for ever and never polls holds at most 2Q − 1 completions", async () => {
    const Q = 3;
    const { rt } = await init(Q);
    try {
      const model = await rt.load(ADD, 0);
      const { ins, outs } = await hostIo(rt, model);
      let accepted = 0, refused = 0;
      for (let round = 0; round < 40; round++) {
        // Submit until refused, as a client that ignores completions does; let what it queued finish.
        for (let k = 0; k < Q; k++) {
          const s = thrown(() => rt.submit(model, ins, outs));
          if (s === 0) accepted++;
          else {
            expect(s).toBe(7);
            refused++;
          }
        }
        await rt.drainAsync(0);
      }
      expect(refused).toBeGreaterThan(0);
      let held = 0;
      for (let p = rt.tryPoll(0); p.status === 0; p = rt.tryPoll(0)) held++;
      expect(held).toBe(accepted);
      expect(held).toBeLessThanOrEqual(2 * Q - 1);
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "nrt_execute in async mode returns 7 while the unpolled completions are at the cap; nrt_async_exec_poll frees it",
    async () => {
      const api = new NrtApi();
      const sim = new DeviceSimPortal();
      opened.push(sim);
      expect(
        await api.nrt_init({
          portal: sim,
          archPacks: [cayman],
          ownsPortal: false,
          visibleCores: [0, 1],
          virtualCoreSize: 1,
          asyncExecMaxInflightRequests: 1,
          logger: new MemoryLogger(),
        }),
      ).toBe(0);
      try {
        const rt = api.runtime!;
        const model = await rt.load(ADD, 0);
        const { ins, outs } = await hostIo(rt, model);
        expect(await api.nrt_execute(model, ins, outs)).toBe(0);
        expect(await api.nrt_async_drain_queued_execs(0)).toBe(0);
        expect(await api.nrt_execute(model, ins, outs)).toBe(7);
        expect(api.nrt_async_exec_poll(0, {})).toBe(0);
        expect(api.nrt_async_exec_poll(0, {})).toBe(15);
        expect(await api.nrt_execute(model, ins, outs)).toBe(0);
        expect(await api.nrt_async_drain_queued_execs(0)).toBe(0);
        // With a callback registered, completions do not queue: no cap applies.
        const seen: number[] = [];
        expect(api.nrt_async_exec_poll(0, {})).toBe(0);
        expect(api.nrt_register_async_exec_callback((_p, _m, _v, id) => seen.push(id))).toBe(0);
        for (let i = 0; i < 5; i++) {
          expect(await api.nrt_execute(model, ins, outs)).toBe(0);
          expect(await api.nrt_async_drain_queued_execs(0)).toBe(0);
        }
        expect(seen.length).toBe(5);
        expect(api.nrt_async_exec_poll(0, {})).toBe(15);
      } finally {
        expect(await api.nrt_close()).toBe(0);
      }
    },
    30_000,
  );
});

describe("close with nrta requests queued (nrta_tensor_write / nrta_execute_schedule / nrta_tensor_read)", () => {
  test(
    "every request scheduled before close settles with one status, reads as executions; nothing stays on the device",
    async () => {
      const { rt, sim } = await init();
      const model = await rt.load(ADD, 0);
      const { ins, outs, tensors } = await deviceIo(rt, model);
      const errors = new NrtaErrorTracker(0);
      const tracker = errors;
      const reqs: Array<{ kind: string; seq: bigint; done: Promise<void> }> = [];
      const bufs: Uint8Array[] = [];
      let prev: NrtaRequest[] = [];
      for (let k = 0; k < 3; k++) {
        // Writes on two queues after the previous round's read, the execution after them, the read after it.
        const wa = rt.nrta.tensorWrite(ins.get("a"), f32Bytes((i) => i * k), 0, { after: prev, errors });
        const wb = rt.nrta.tensorWrite(ins.get("b"), f32Bytes(() => k), 0, { queue: 1, after: prev, errors });
        const x = rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs), { after: [wa, wb], errors });
        const buf = new Uint8Array(N * 4);
        bufs.push(buf);
        const r = rt.nrta.tensorRead(buf, outs.get("out"), 0, N * 4, { after: [x], errors });
        reqs.push({ kind: "write", ...wa }, { kind: "write", ...wb }, { kind: "execute", ...x }, {
          kind: "read",
          ...r,
        });
        prev = [r];
      }
      // An execution and a read that name no request: each waits only for the one before it on its queue.
      const x2 = rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs), { errors });
      const r2 = rt.nrta.tensorRead(new Uint8Array(N * 4), outs.get("out"), 0, N * 4, { queue: 1, errors });
      reqs.push({ kind: "execute", ...x2 }, { kind: "read", ...r2 });
      const closing = rt.close(); // not awaited before the requests are
      const statuses = await Promise.all(reqs.map((q) => status(q.done)));
      await closing;
      // One answer for all of them: 0 when close drains its queues first, 14 (NRT_CLOSED) for each when it does not —
      // never a read refused with 14 while an execution scheduled before it ran (the reads were 14, the executions 0).
      expect(reqs.map((q, i) => [q.kind, statuses[i]])).toEqual(reqs.map((q) => [q.kind, statuses[0]]));
      expect(statuses[0]).toBe(0);
      const failed = statuses[0] === 14;
      expect(tracker.list().map((e) => e.error_code)).toEqual(failed ? statuses : []);
      expect(tracker.list().map((e) => e.seq_id).sort()).toEqual(failed ? reqs.map((q) => q.seq).sort() : []);
      // Drained: each read saw its own round's sum, 3k + k at element 3.
      if (!failed) expect(bufs.map((b) => new Float32Array(b.buffer)[3])).toEqual([0, 4, 8]);
      // After close: a new request is refused with 14.
      expect(thrown(() => rt.nrta.tensorRead(new Uint8Array(4), outs.get("out"), 0, 4))).toBe(14);
      // Nothing was left on the device: no execution's reference kept the model staged.
      await freeAll(tensors);
      expect(await sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
    },
    30_000,
  );

  test("close answers every queued execution alike and no execution's model reference outlives it", async () => {
    const { rt, sim } = await init();
    const model = await rt.load(ADD, 0);
    const { ins, outs, tensors } = await deviceIo(rt, model);
    const w = rt.nrta.tensorWrite(ins.get("a"), new Uint8Array(N * 4));
    const xs = Array.from({ length: 4 }, () => rt.nrta.executeSchedule(rt.prepareExecution(model, ins, outs)));
    const r = rt.nrta.tensorRead(new Uint8Array(N * 4), outs.get("out"), 0, N * 4, { after: [xs[3]] });
    const closing = rt.close();
    const all = await Promise.all([w, ...xs, r].map((q) => status(q.done)));
    await closing;
    expect(new Set(all).size).toBe(1);
    expect(all[0]).toBe(0);
    await freeAll(tensors);
    expect(await sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  }, 30_000);
});
