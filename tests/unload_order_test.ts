/**
 * Unload in the seed's order and the model-id cache (seed lifecycle-error-model §3.1–§3.2, §2.2 step 7;
 * runtime-synthesis §4.6): `nn_ref_decrement`, return at once while another handle still references the interned
 * model; otherwise RUNNING → STOPPING first, stop the async worker, drain, unstage, STOPPED, vNC released last.
 * `DLR_MODEL_STATE` values are the seed's literals (§1.2): RUNNING 2, STOPPING 3, STOPPED 4.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { MemoryLogger, type Model, NrtError, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const RELU = oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)]);

async function init(asyncDepth = 0) {
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

async function io(rt: Runtime, vnc = 0) {
  const ins = new TensorSet(), outs = new TensorSet();
  const x = await rt.allocateTensor({ size: 256, name: "x", vnc });
  await x.write(new Uint8Array(Float32Array.from({ length: 64 }, (_, i) => i - 32).buffer));
  ins.add("x", x);
  outs.add("y", await rt.allocateTensor({ size: 256, name: "y", vnc }));
  return { ins, outs };
}

const status = (p: Promise<unknown>): Promise<number> =>
  p.then(() => 0, (e) => (e instanceof NrtError ? e.status : -1));

/** The unload's steps, in the order they happened, for model `handle`. */
function unloadSteps(events: readonly string[], handle: number): string[] {
  return events
    .filter((e) =>
      e.includes(`model=${handle}`) &&
      /^(kmgr_unload_nn|kmetric_unload|kmgr_async_exec_model_stop|kmgr_async_exec_poll|kmgr_unstage_kelf_model|nrt_vnc_usage_dec)/
        .test(e)
    )
    .map((e) => e.replace(/ ?(vnc|model)=\d+/g, ""));
}

describe("nrt_unload in the seed's order (lifecycle-error-model §3.2)", () => {
  test(
    "RUNNING → STOPPING first, the async worker stops and drains its queued work, then unstage, STOPPED, vNC last",
    async () => {
      const { rt, sim } = await init(2);
      try {
        const model = await rt.load(RELU);
        const { ins, outs } = await io(rt);
        expect(model.state).toBe(2);
        const slot = (): boolean =>
          Array.from({ length: sim.spec.csr.streamSlots }, (_, s) => sim.mappedRegisters(0, 0).streamEntry(s)).some((
            e,
          ) => e?.model !== undefined);
        // An async job holds the model's reference when the unload starts.
        const job = rt.submit(model, ins, outs);
        const before = rt.events.list().length;
        const unloading = rt.unload(model);
        // Synchronously: STOPPING, out of lookup; the stream is still installed (no unstage before the drain).
        expect(model.state).toBe(3);
        expect(await status(model.execute(ins, outs))).toBe(3); // NRT_INVALID_HANDLE
        expect(slot()).toBe(true);
        await unloading;
        expect(model.state).toBe(4);
        expect(slot()).toBe(false);
        // The queued job ran to completion before the unstage.
        const done = rt.tryPoll(0);
        expect(done.status).toBe(0);
        if (done.status === 0) expect([done.completion.id, done.completion.status]).toEqual([job, 0]);
        expect(unloadSteps(rt.events.list().slice(before), model.handle)).toEqual([
          "kmgr_unload_nn DMSTATE_STOPPING",
          "kmetric_unload_model_update_agg_neff_id",
          "kmgr_async_exec_model_stop",
          "kmgr_async_exec_poll drained",
          "kmgr_unstage_kelf_model",
          "kmgr_unload_nn DMSTATE_STOPPED",
          "nrt_vnc_usage_dec",
        ]);
        // A second unload of the handle: NRT_INVALID_HANDLE (3).
        expect(await status(rt.unload(model))).toBe(3);
        for (const s of [ins, outs]) for (const k of s.names()) await s.get(k).free();
      } finally {
        await rt.close();
      }
      expect((await sim.memUsage(0)).allocations).toBe(0);
    },
    30_000,
  );

  test("a synchronous execution in flight is drained after STOPPING and before the unstage", async () => {
    const { rt } = await init();
    try {
      const model = await rt.load(RELU);
      const { ins, outs } = await io(rt);
      const x = rt.prepareExecution(model, ins, outs); // takes the reference now, runs later
      const before = rt.events.list().length;
      const unloading = rt.unload(model);
      expect(model.state).toBe(3);
      // Nothing past the drain happened while the execution holds its reference.
      await Promise.resolve();
      expect(unloadSteps(rt.events.list().slice(before), model.handle)).toEqual([
        "kmgr_unload_nn DMSTATE_STOPPING",
        "kmetric_unload_model_update_agg_neff_id",
        "kmgr_async_exec_model_stop",
      ]);
      const counted = rt.executionStats().find((m) => m.handle === model.handle)!;
      expect([counted.loaded, counted.succeeded]).toEqual([false, 0]);
      await x.run();
      await unloading;
      // The execution the unload drained still counts for the model, listed as unloaded.
      expect(rt.executionStats().find((m) => m.handle === model.handle)?.succeeded).toBe(1);
      expect(unloadSteps(rt.events.list().slice(before), model.handle).slice(3)).toEqual([
        "kmgr_async_exec_poll drained",
        "kmgr_unstage_kelf_model",
        "kmgr_unload_nn DMSTATE_STOPPED",
        "nrt_vnc_usage_dec",
      ]);
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("the model-id cache of nrt_load_util step 7 (lifecycle-error-model §2.2, §3.2)", () => {
  test(
    "the same NEFF twice on one vNC shares its interned model; unload is decrement-and-return until the last handle",
    async () => {
      const { rt, sim } = await init();
      try {
        const baseline = (await sim.memUsage(0)).allocations;
        const a = await rt.load(RELU, { vnc: 0 });
        const booked = rt.memory().total;
        const allocations = (await sim.memUsage(0)).allocations;
        const adds = () => rt.events.list().filter((e) => e.startsWith("add_model nc=0")).length;
        const installs = adds();
        const b = await rt.load(RELU, { vnc: 0 });
        // Shared: the same H_MODEL, nothing installed or booked again.
        expect(b).not.toBe(a);
        expect(b.handle).toBe(a.handle);
        expect(adds()).toBe(installs);
        expect(rt.memory().total).toBe(booked);
        expect((await sim.memUsage(0)).allocations).toBe(allocations);
        // Another vNC is another model.
        const c = await rt.load(RELU, { vnc: 1 });
        expect(c.handle).not.toBe(a.handle);
        const withC = (await sim.memUsage(0)).allocations;
        // Unload of one handle: nn_ref_decrement, still referenced → return without teardown.
        const before = rt.events.list().length;
        await a.unload();
        expect(unloadSteps(rt.events.list().slice(before), a.handle)).toEqual([
          "kmgr_unload_nn still referenced: refs=1",
          "nrt_vnc_usage_dec",
        ]);
        expect(a.state).toBe(4);
        expect(b.state).toBe(2);
        expect((await sim.memUsage(0)).allocations).toBe(withC);
        const { ins, outs } = await io(rt);
        await b.execute(ins, outs);
        expect(new Float32Array((await outs.get("y").read()).slice().buffer)[40]).toBe(8);
        expect(await status(a.execute(ins, outs))).toBe(3); // this handle is unloaded: NRT_INVALID_HANDLE
        expect(await status(a.unload())).toBe(3);
        // The last handle tears down.
        await b.unload();
        expect(b.state).toBe(4);
        expect(unloadSteps(rt.events.list(), b.handle).filter((e) => e === "kmgr_unstage_kelf_model")).toHaveLength(1);
        for (const s of [ins, outs]) for (const k of s.names()) await s.get(k).free();
        await c.unload();
        // Everything is returned: RELU bundles the base library and relu, a per-model set freed with the model (§4.4).
        expect((await sim.memUsage(0)).allocations).toBe(baseline);
        // A new load after the last unload is a fresh model.
        const d = await rt.load(RELU, { vnc: 0 });
        expect(d.handle).toBeGreaterThan(c.handle);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("a poisoned (Band C) model is not handed out again: the next load of its NEFF is a fresh model", async () => {
    const { rt, sim } = await init();
    try {
      const a: Model = await rt.load(RELU, { vnc: 0 });
      const { ins, outs } = await io(rt);
      sim.faults.inject({ kind: "hbm-ue", nc: 0, atExecution: 1 });
      expect(await status(a.execute(ins, outs))).toBe(1201);
      expect(rt.poisonedStatus(a)).toBe(1201);
      const b = await rt.load(RELU, { vnc: 0 });
      expect(b.handle).not.toBe(a.handle);
      await b.execute(ins, outs);
      await a.unload();
      await b.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);
});
