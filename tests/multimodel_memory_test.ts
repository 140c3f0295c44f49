/**
 * Device memory and library sharing across models (seed runtime-synthesis §4.3, §4.4): the ledger's categories and
 * per-core totals, `nrt_get_vnc_memory_stats`, out-of-memory on a small simulated HBM, and the ulib staging policy.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  buildCustomOpNeff,
  extIsaLibrary,
  ExtIsaOpcode,
  MemoryLogger,
  NrtApi,
  NrtError,
  NrtStatus,
  type NrtVncMemoryStats,
  type Ref,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { DmaMemUsageType } from "../packages/core/dmem/dmem.ts";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { kernel, oneOpNeff } from "./_kernels.ts";

const containers: NrtContainer[] = [];
afterAll(async () => {
  for (const c of containers.splice(0)) await c.resolve(PortalToken).close();
});

const MiB = 1 << 20;
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 64;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);

/**
 * A model with one library: the base ext-ISA library alone (runtime-synthesis §4.4, "==1 → the single EXT-ISA
 * library"), whose one call copies `a` into `out`.
 */
const COPY = buildCustomOpNeff({
  name: "copy",
  target: "cayman",
  inputs: [f32("a", N)],
  outputs: [f32("out", N)],
  libraries: [],
  calls: [{ opcode: ExtIsaOpcode.COPY, inputs: ["a"], outputs: ["out"] }],
});

/**
 * A NEFF carrying `count` libraries in all: the base ext-ISA library the builder adds, then `count - 1` custom ones
 * (images of `imageBytes`, or the real vector_add first), and one call of the first custom one.
 */
function multiLibNeff(count: number, imageBytes?: number, name = `libs${count}.neff`): Uint8Array {
  const libraries = Array.from({ length: count - 1 }, (_, i) => ({
    name: i === 0 ? "vector_add" : `lib${i}`,
    wasm: i === 0 && imageBytes === undefined
      ? kernel("vector_add")
      : new Uint8Array(imageBytes ?? 256 + i).fill(i + 1),
    totalCpus: 8,
    functions: [{ opcode: i + 1, name: i === 0 ? "vector_add" : `f${i}` }],
  }));
  return buildCustomOpNeff({
    name,
    target: "cayman",
    inputs: [f32("a", N), f32("b", N)],
    outputs: [f32("out", N)],
    libraries,
    calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
  });
}

async function init(hbmBytes?: number) {
  const container = createNrtContainer({ hbmBytes });
  containers.push(container);
  const log = new MemoryLogger();
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1], virtualCoreSize: 1, logger: log });
  return { rt, log, sim: container.resolve(PortalToken) };
}

/** Loads {@linkcode COPY} on `vnc`, copies 0..N-1 through it, unloads it. */
async function runCopy(rt: Runtime, vnc = 0): Promise<Float32Array> {
  const model = await rt.load(COPY, vnc);
  const ins = new TensorSet(), outs = new TensorSet();
  const a = await rt.allocateTensor({ vnc, size: N * 4, name: "a" });
  await a.write(new Uint8Array(Float32Array.from({ length: N }, (_, i) => i).buffer));
  ins.add("a", a);
  outs.add("out", await rt.allocateTensor({ vnc, size: N * 4, name: "out" }));
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  for (const s of [ins, outs]) for (const k of s.names()) await s.get(k).free();
  await model.unload();
  return out;
}

async function runAdd(rt: Runtime, vnc = 0): Promise<Float32Array> {
  const model = await rt.load(ADD, vnc);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) {
    const t = await rt.allocateTensor({ vnc: vnc, size: N * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: N }, (_, i) => (name === "a" ? i : 100)).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ vnc: vnc, size: N * 4, name: "out" }));
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  for (const s of [ins, outs]) for (const k of s.names()) await s.get(k).free();
  await model.unload();
  return out;
}

describe("dmem (seed runtime-synthesis §4.3)", () => {
  test(
    "every allocation is booked under a category; the per-core totals and nrt_get_vnc_memory_stats agree",
    async () => {
      const { rt } = await init();
      try {
        const core0 = () => rt.memory().cores.find((c) => c.nc === 0)!;
        const row = core0().byUsage;
        expect(row[DmaMemUsageType.NOTIFICATIONS]).toBeGreaterThan(0);
        expect(row[DmaMemUsageType.POOL_STDIO]).toBeGreaterThan(0);
        const model = await rt.load(ADD);
        const after = core0().byUsage;
        for (
          const k of [
            DmaMemUsageType.DMA_DESCRIPTORS,
            DmaMemUsageType.UCODE_TABLE,
            DmaMemUsageType.ARG_TABLES,
            DmaMemUsageType.INSTRUCTIONS,
            DmaMemUsageType.UCODE_LIBS,
          ]
        ) {
          expect(after[k]).toBeGreaterThan(0);
        }
        let sum = 0;
        expect(after.length).toBe(22);
        for (let k = 0; k < 22; k++) sum += after[k];
        expect(core0().total).toBe(sum);
        expect(rt.memoryStats(0)).toEqual({ bytesUsed: sum, bytesLimit: 96 * 1024 * MiB });
        const api = new NrtApi();
        const stats: Ref<NrtVncMemoryStats> = {};
        expect(api.nrt_get_vnc_memory_stats(0, stats)).toBe(NrtStatus.NRT_UNINITIALIZED);
        await model.unload();
      } finally {
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    30_000,
  );

  test(
    "out of memory on a 4 MiB HBM returns NRT_RESOURCE, logs the usage per category, leaves nothing half-loaded, and a smaller load succeeds",
    async () => {
      const { rt, log, sim } = await init(4 * MiB);
      try {
        expect(rt.memoryStats(0).bytesLimit).toBe(4 * MiB);
        // Leave 1.5 MiB of HBM free; the big model stages two 1 MiB libraries.
        const filler = await rt.allocateTensor({
          vnc: 1,
          size: 4 * MiB - rt.memory().hbmUsed - 1.5 * MiB,
          name: "filler",
        });
        const before = { booked: rt.memory().total, portal: await sim.memUsage(0), events: rt.events.list().length };
        const e = await rt.load(multiLibNeff(3, MiB)).catch((x) => x);
        expect(e).toBeInstanceOf(NrtError);
        expect(e.status).toBe(NrtStatus.NRT_RESOURCE);
        expect(e.message).toContain("device memory is exhausted");
        const lines = log.messages().filter((m) => /usage|HBM total/.test(m)).join("\n");
        expect(lines).toMatch(/ucode_libs=\d+/);
        expect(lines).toMatch(/pool_stdio=\d+/);
        expect(lines).toMatch(/notifications=\d+/);
        expect(lines).toMatch(/NC 1 usage: .*tensors=\d+/);
        expect(lines).toContain(`of ${4 * MiB} bytes`);
        // Nothing half-loaded: same bytes booked, same device allocations, no resident model, the vNC released.
        expect(rt.memory().total).toBe(before.booked);
        expect(await sim.memUsage(0)).toEqual(before.portal);
        expect(rt.cores()[0].models).toEqual([]);
        expect(Array.from(await runAdd(rt))).toEqual(Array.from({ length: N }, (_, i) => i + 100));
        await filler.free();
      } finally {
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    30_000,
  );

  test(
    "a core out of stream slots fails the next load with NRT_RESOURCE, leaves nothing half-loaded, and loads again once one is unloaded",
    async () => {
      const { rt, sim } = await init();
      const models: Array<{ unload(): Promise<void> }> = [];
      try {
        // Distinct bytes (the ints differ), so no load is interned into another.
        const noop = (i: number) => oneOpNeff("noop", "noop", [f32("a", N)], [f32("out", N)], 8, [i]);
        let e: unknown;
        for (let i = 0; i < 1000 && e === undefined; i++) {
          const before = { booked: rt.memory().total, portal: await sim.memUsage(0) };
          try {
            models.push(await rt.load(noop(i), 0));
          } catch (x) {
            e = x;
            // Nothing half-loaded: the failed install gave back every byte and id it took.
            expect(rt.memory().total).toBe(before.booked);
            expect(await sim.memUsage(0)).toEqual(before.portal);
          }
        }
        expect(e).toBeInstanceOf(NrtError);
        expect((e as NrtError).status).toBe(4); // NRT_RESOURCE (seed lifecycle-error-model §2.7: kbl_model_add)
        expect((e as NrtError).message).toMatch(/^Cannot load NEFF ".*" on NeuronCore 0: no free /);
        expect(models.length).toBeGreaterThan(1);
        expect(rt.cores()[0].models.length).toBe(models.length);
        // The failure took nothing: one unload makes room for exactly one more model, which runs.
        await models.pop()!.unload();
        expect(Array.from(await runAdd(rt))).toEqual(Array.from({ length: N }, (_, i) => i + 100));
      } finally {
        for (const m of models) await m.unload();
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    60_000,
  );
});

describe("ulib sharing (seed runtime-synthesis §4.4)", () => {
  test(
    "two single-library (base ext-ISA only) models on one core stage the library once; another core stages its own; the set is freed at close",
    async () => {
      const { rt } = await init();
      const image = extIsaLibrary().wasm.byteLength;
      try {
        const m1 = await rt.load(COPY), m2 = await rt.load(COPY);
        expect(rt.events.list().filter((e) => e === "ucode_stage_libs nc=0 shared ext_isa")).toHaveLength(1);
        expect(rt.memory().cores.find((c) => c.nc === 0)!.byUsage[DmaMemUsageType.UCODE_LIBS]).toBe(image);
        const m3 = await rt.load(COPY, 1);
        expect(rt.events.list().filter((e) => e === "ucode_stage_libs nc=1 shared ext_isa")).toHaveLength(1);
        expect(rt.memory().cores.find((c) => c.nc === 1)!.byUsage[DmaMemUsageType.UCODE_LIBS]).toBe(image);
        for (const m of [m1, m2, m3]) await m.unload();
        // Cached per core until close (ucode_free_lib_set), not freed with the last model.
        expect(rt.memory().cores.find((c) => c.nc === 0)!.byUsage[DmaMemUsageType.UCODE_LIBS]).toBe(image);
        // The cached set still serves a new model on that core.
        expect(Array.from(await runCopy(rt, 1))).toEqual(Array.from({ length: N }, (_, i) => i));
      } finally {
        await rt.close();
      }
      expect(rt.events.list().filter((e) => e.startsWith("ucode_free_lib_set"))).toEqual([
        "ucode_free_lib_set nc=0",
        "ucode_free_lib_set nc=1",
      ]);
      expect(rt.memory().total).toBe(0);
    },
    30_000,
  );

  test("concurrent loads of a new single-library model on one core stage it exactly once", async () => {
    const { rt } = await init();
    try {
      const models = await Promise.all(Array.from({ length: 8 }, () => rt.load(COPY)));
      expect(rt.events.list().filter((e) => e.startsWith("ucode_stage_libs nc=0 shared"))).toHaveLength(1);
      for (const m of models) await m.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "2..9 libraries are staged per model, and more than 9 are refused with Exceeded max number of GPSIMD libs",
    async () => {
      const { rt } = await init();
      try {
        const base = rt.memory().cores.find((c) => c.nc === 0)!.byUsage[DmaMemUsageType.UCODE_LIBS];
        const two = [await rt.load(multiLibNeff(2)), await rt.load(multiLibNeff(2, undefined, "libs2b.neff"))]; // two models (one NEFF twice would share one)
        expect(rt.events.list().filter((e) => e.startsWith("ucode_stage_libs nc=0 model"))).toHaveLength(4);
        const perModel = extIsaLibrary().wasm.byteLength + kernel("vector_add").byteLength;
        expect(rt.memory().cores.find((c) => c.nc === 0)!.byUsage[DmaMemUsageType.UCODE_LIBS]).toBe(
          base + 2 * perModel,
        );
        const nine = await rt.load(multiLibNeff(9));
        const e = await rt.load(multiLibNeff(10)).catch((x) => x);
        expect(e).toBeInstanceOf(NrtError);
        expect(e.message).toContain("Exceeded max number of GPSIMD libs");
        for (const m of [...two, nine]) await m.unload();
        // Per-model sets go with their models.
        expect(rt.memory().cores.find((c) => c.nc === 0)!.byUsage[DmaMemUsageType.UCODE_LIBS]).toBe(base);
      } finally {
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    30_000,
  );
});
