/**
 * Many models per NeuronCore (seed runtime-synthesis §4.1–§4.2, lifecycle-error-model §3): co-residence in one
 * core's model db, `h_running_model` + the per-core FIFO, the per-model ref count that makes unload wait, and the
 * placement view.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  type ExecutionEvent,
  MemoryLogger,
  type Model,
  NrtError,
  NrtStatus,
  Runtime,
  type RuntimeOptions,
  TensorSet,
} from "@nrt/core";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { namedOneOpNeff, oneOpNeff } from "./_kernels.ts";

const containers: NrtContainer[] = [];
// Each simulated device owns Q7 Workers: close the portals so no Worker outlives the file.
afterAll(async () => {
  for (const c of containers.splice(0)) await c.resolve(PortalToken).close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 64;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);
const RELU = oneOpNeff("relu", "relu", [f32("x", N)], [f32("y", N)]);
/** ADD under other names: models of their own on the same core (the same NEFF twice shares one interned model). */
const ADD_B = namedOneOpNeff("vector_add_b.neff", "vector_add", "vector_add", [f32("a", N), f32("b", N)], [
  f32("out", N),
]);
const ADD_WARM = namedOneOpNeff("vector_add_warm.neff", "vector_add", "vector_add", [f32("a", N), f32("b", N)], [
  f32("out", N),
]);
const bytes = (a: Float32Array) => new Uint8Array(a.buffer.slice(0));
const floats = (b: Uint8Array) => new Float32Array(b.slice().buffer);

async function init(options: RuntimeOptions & { onExecution?: (e: ExecutionEvent) => void } = {}): Promise<Runtime> {
  const container = createNrtContainer();
  containers.push(container);
  return await Runtime.init({
    ...nrtPlugins(container),
    visibleCores: [0, 1],
    virtualCoreSize: 1,
    logger: new MemoryLogger(),
    ...options,
  });
}

/** Host tensors for `model`, inputs filled from `data`. */
async function io(rt: Runtime, model: Model, data: Record<string, Float32Array>) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name });
    await x.write(bytes(data[t.name]));
    ins.add(t.name, x);
  }
  for (const t of model.outputs) {
    outs.add(t.name, await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name }));
  }
  const free = async () => {
    for (const s of [ins, outs]) for (const k of s.names()) await s.get(k).free();
  };
  return { ins, outs, free };
}

describe("multi-model NeuronCores (seed runtime-synthesis §4.1, §4.2)", () => {
  test("Runtime keeps several models resident on one core and runs each correctly", async () => {
    const rt = await init();
    try {
      const a = Float32Array.from({ length: N }, (_, i) => i - 20),
        b = Float32Array.from({ length: N }, (_, i) => 2 * i);
      const add1 = await rt.load(ADD), relu = await rt.load(RELU), add2 = await rt.load(ADD_B);
      expect(new Set([add1.handle, relu.handle, add2.handle]).size).toBe(3);
      expect(rt.cores()[0].models.map((m) => m.handle)).toEqual([add1.handle, relu.handle, add2.handle]);
      const x = await io(rt, add1, { a, b }), y = await io(rt, relu, { x: a }), z = await io(rt, add2, { a: b, b: a });
      for (let k = 0; k < 3; k++) {
        await Promise.all([add1.execute(x.ins, x.outs), relu.execute(y.ins, y.outs), add2.execute(z.ins, z.outs)]);
        expect(Array.from(floats(await x.outs.get("out").read()))).toEqual(Array.from(a, (v, i) => v + b[i]));
        expect(Array.from(floats(await y.outs.get("y").read()))).toEqual(Array.from(a, (v) => Math.max(v, 0)));
        expect(Array.from(floats(await z.outs.get("out").read()))).toEqual(Array.from(a, (v, i) => v + b[i]));
      }
      await relu.unload();
      expect(rt.cores()[0].models.map((m) => m.handle)).toEqual([add1.handle, add2.handle]);
      await add1.execute(x.ins, x.outs);
      for (const t of [x, y, z]) await t.free();
    } finally {
      await rt.close();
    }
    expect(rt.memory().total).toBe(0);
  }, 30_000);

  test(
    "64 concurrent executions on one core never overlap and complete in FIFO order with increasing sequence ids",
    async () => {
      const events: ExecutionEvent[] = [];
      const rt = await init({ onExecution: (e) => events.push(e) });
      try {
        const models = [await rt.load(ADD), await rt.load(RELU), await rt.load(ADD)];
        const a = Float32Array.from({ length: N }, (_, i) => i), b = new Float32Array(N).fill(1);
        const sets = await Promise.all(models.map((m) => io(rt, m, m.inputs.length === 2 ? { a, b } : { x: a })));
        const finished: number[] = [];
        await Promise.all(
          Array.from(
            { length: 64 },
            (_, i) => models[i % 3].execute(sets[i % 3].ins, sets[i % 3].outs).then(() => finished.push(i)),
          ),
        );
        expect(finished).toEqual([...Array(64).keys()]);
        // On the core: start, end, start, end, … with the sequence ids of the issue order.
        expect(events.map((e) => e.phase)).toEqual(
          Array.from({ length: 128 }, (_, i) => (i % 2 === 0 ? "start" : "end")),
        );
        const seqs = events.filter((e) => e.phase === "start").map((e) => e.seq);
        for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe(seqs[i - 1] + 1);
        expect(events.filter((e) => e.phase === "start").map((e) => e.model)).toEqual(
          Array.from({ length: 64 }, (_, i) => models[i % 3].handle),
        );
        expect(events.every((e) => e.ncs.length === 1 && e.ncs[0] === 0)).toBe(true);
        for (const s of sets) await s.free();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test(
    "Runtime.unload() waits for in-flight executions: 1,000 randomised cycles, correct output or NRT_INVALID_HANDLE, no double free",
    async () => {
      const rt = await init();
      let seed = 0x1234_5678;
      const random = () => {
        seed = (seed * 1103515245 + 12345) >>> 0;
        return seed / 2 ** 32;
      };
      try {
        const a = Float32Array.from({ length: N }, (_, i) => i * 0.25),
          b = Float32Array.from({ length: N }, (_, i) => 7 - i);
        const expected = Array.from(a, (v, i) => Math.fround(v + b[i]));
        const warm = await rt.load(ADD_WARM); // keeps the shared library staged: the ledger baseline below includes it
        const baseline = rt.memory().total;
        const tally = { ok: 0, invalidHandle: 0 };
        const start = performance.now();
        for (let cycle = 0; cycle < 1000; cycle++) {
          const model = await rt.load(ADD);
          const bufs = await io(rt, model, { a, b });
          const k = 1 + Math.floor(random() * 4);
          const unloadAt = Math.floor(random() * (k + 1)); // unload is issued before execution number `unloadAt`
          const execs: Array<Promise<string>> = [];
          let unload: Promise<void> | undefined;
          let unloadedAt = -1;
          let settled = 0;
          for (let i = 0; i <= k; i++) {
            if (i === unloadAt) {
              unload = model.unload().then(() => {
                unloadedAt = settled;
              });
            }
            if (i < k) {
              execs.push(
                model.execute(bufs.ins, bufs.outs).then(
                  async () => {
                    settled++;
                    const got = Array.from(floats(await bufs.outs.get("out").read()));
                    return got.every((v, j) => v === expected[j]) ? "ok" : "wrong output";
                  },
                  (e) => {
                    settled++;
                    return e instanceof NrtError && e.status === NrtStatus.NRT_INVALID_HANDLE
                      ? "invalid-handle"
                      : `unexpected ${String(e)}`;
                  },
                ),
              );
            }
          }
          const outcomes = await Promise.all(execs);
          await unload;
          for (const [i, o] of outcomes.entries()) {
            // Issued before the unload: must run and be right; issued after: cannot acquire the model.
            expect(o).toBe(i < unloadAt ? "ok" : "invalid-handle");
            if (o === "ok") tally.ok++;
            else tally.invalidHandle++;
          }
          // The unload completed only after every execution that held a reference had finished.
          expect(unloadedAt).toBe(outcomes.length);
          await bufs.free();
          expect(rt.memory().total).toBe(baseline);
        }
        console.log(
          `unload-during-execute: 1000 cycles in ${
            (performance.now() - start).toFixed(0)
          } ms (${tally.ok} ok, ${tally.invalidHandle} NRT_INVALID_HANDLE)`,
        );
        expect(tally.ok).toBeGreaterThan(0);
        expect(tally.invalidHandle).toBeGreaterThan(0);
        await warm.unload();
      } finally {
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    120_000,
  );

  test("Runtime.unload() removes the model from lookup first, then waits for its last reference", async () => {
    const rt = await init();
    try {
      const model = await rt.load(ADD);
      const bufs = await io(rt, model, { a: new Float32Array(N), b: new Float32Array(N) });
      const running = model.execute(bufs.ins, bufs.outs);
      const unloading = model.unload();
      // Removed from lookup at once: a new execution cannot acquire it, a second unload cannot find it.
      await expect(model.execute(bufs.ins, bufs.outs)).rejects.toMatchObject({ status: NrtStatus.NRT_INVALID_HANDLE });
      await expect(model.unload()).rejects.toMatchObject({ status: NrtStatus.NRT_INVALID_HANDLE });
      expect(rt.cores()[0].models).toEqual([]);
      await running;
      await unloading;
      await bufs.free();
    } finally {
      await rt.close();
    }
  }, 30_000);
});
