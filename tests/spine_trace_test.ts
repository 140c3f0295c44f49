import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MemoryLogger, NrtError, NrtStatus, Portal, readNeff, Runtime, TensorSet } from "@nrt/core";
import { UCODE_TOO_BIG } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { readFileSync } from "node:fs";
import { container } from "tsyringe";
import { kernel, oneOpNeff, reluLibrariesNeff } from "./_kernels.ts";
import { ArchPackToken, nrtPlugins, PortalToken } from "@nrt/cli";

const spec = CAYMAN_SPEC;
const opened: DeviceSimPortal[] = [];
// Each simulated device owns Q7 Workers: close the portals so no Worker outlives the file.
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

function setup() {
  const sim = new DeviceSimPortal();
  const trace = new TracingPortal(sim);
  const c = container.createChildContainer();
  c.register(ArchPackToken, { useValue: cayman });
  c.register(PortalToken, { useValue: trace });
  opened.push(sim);
  return { c, trace, sim };
}

async function runOnce(rt: Runtime, neff: Uint8Array, n: number) {
  const model = await rt.load(neff);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location: "host", size: t.size, name: t.name });
    await x.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i).buffer));
    ins.add(t.name, x);
  }
  for (const t of model.outputs) {
    outs.add(t.name, await rt.allocateTensor({ location: "host", size: t.size, name: t.name }));
  }
  return { model, ins, outs };
}

describe("spine traces (seed runtime-synthesis §2.1, §3.3; spmd-teardown §2.2, §6)", () => {
  test(
    "nrt_init writes, per Q7 core, DRAM before IRAM on all 8 cores, and releases CSR 0x3000 0xFF → 0x00",
    async () => {
      const { c, trace } = setup();
      const rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
      try {
        for (const nc of [0, 1]) {
          const base = nc * spec.csr.ncBlockStride;
          const images = trace.entries.filter((e) =>
            e.op === "barWrite" && e.target >= base + spec.csr.q7Iram &&
            e.target < base + spec.csr.q7Dram + 8 * spec.csr.q7DramStride
          );
          const seq = images.map((e) =>
            e.target >= base + spec.csr.q7Dram
              ? `D${(e.target - base - spec.csr.q7Dram) / spec.csr.q7DramStride}`
              : `I${(e.target - base - spec.csr.q7Iram) / spec.csr.q7IramStride}`
          );
          expect(seq).toEqual([
            "D0",
            "I0",
            "D1",
            "I1",
            "D2",
            "I2",
            "D3",
            "I3",
            "D4",
            "I4",
            "D5",
            "I5",
            "D6",
            "I6",
            "D7",
            "I7",
          ]);
          const stall = trace.entries.filter((e) => e.op === "barWrite32" && e.target === base + 0x3000).map((e) =>
            e.value
          );
          expect(stall).toEqual([0xff, 0x00]);
          const firstImage = trace.entries.indexOf(images[0]);
          const release = trace.entries.findIndex((e) =>
            e.op === "barWrite32" && e.target === base + 0x3000 && e.value === 0
          );
          expect(release).toBeGreaterThan(firstImage);
        }
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test(
    "nrt_load makes one swap-table call per NeuronCore; nrt_execute rings exactly one semaphore increment",
    async () => {
      const { c, trace } = setup();
      const rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
      try {
        const n = 4096;
        trace.clear();
        const { model, ins, outs } = await runOnce(
          rt,
          oneOpNeff("vector_add", "vector_add", [f32("a", n), f32("b", n)], [f32("out", n)]),
          n,
        );
        const swaps = trace.entries.filter((e) =>
          e.op === "barWrite" && (e.target % spec.csr.ncBlockStride) === spec.csr.swapTable
        );
        expect(swaps.length).toBe(1);
        for (let k = 0; k < 3; k++) {
          trace.clear();
          await model.execute(ins, outs);
          const incs = trace.entries.filter((e) => e.op === "semaphoreIncrement");
          expect(incs.length).toBe(1);
          expect(incs[0].value).toBe(1);
        }
        const out = new Float32Array((await outs.get("out").read()).slice().buffer);
        expect(out[10]).toBe(20);
        expect(out[n - 1]).toBe(2 * (n - 1));
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("a custom Pool image registered before init replaces the stock one silently; too big fails init", async () => {
    const { c, trace } = setup();
    const custom = { iram: kernel("noop"), dram: new Uint8Array(32).fill(7) };
    const rt = await Runtime.init({
      ...nrtPlugins(c),
      visibleCores: [0],
      virtualCoreSize: 1,
      poolUcode: custom,
      logger: new MemoryLogger(),
    });
    const iramWrites = trace.entries.filter((e) =>
      e.op === "barWrite" && e.target >= spec.csr.q7Iram && e.target < spec.csr.q7Iram + 8 * spec.csr.q7IramStride
    );
    expect(iramWrites.length).toBe(8);
    expect(iramWrites.every((e) => e.value === custom.iram.byteLength)).toBe(true);
    await rt.close();
    const big = { iram: new Uint8Array(spec.q7IramBytes + 1), dram: new Uint8Array(4) };
    const s2 = setup();
    const err = await Runtime.init({
      ...nrtPlugins(s2.c),
      visibleCores: [0],
      virtualCoreSize: 1,
      poolUcode: big,
      logger: new MemoryLogger(),
    }).catch((e) => e);
    expect(err).toBeInstanceOf(NrtError);
    expect(String(err.message)).toContain(UCODE_TOO_BIG);
    expect((await s2.sim.memUsage(0)).allocations).toBe(0);
  }, 30_000);

  test(
    "nrt_close destroys 5 NX then 8 Q7 cores per NeuronCore in the seed's order, also for total_cpus = 1",
    async () => {
      const { c } = setup();
      const rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
      await rt.load(oneOpNeff("reduce_sum", "sum_all", [f32("x", 64)], [f32("s", 1)], 1));
      await rt.close();
      for (const nc of [0, 1]) {
        const ev = rt.events.list().filter((e) => e.includes(`nc=${nc}`) && /destroy|halt|free_lib/.test(e)).map((e) =>
          e.replace(` nc=${nc}`, "").replace(/ users=\d+/, "")
        );
        const order = ev.map((e) => e.split(" ")[0]);
        const nx = ev.filter((e) => e.startsWith("ucode_core_destroy NX")).length;
        const q7 = ev.filter((e) => e.startsWith("ucode_core_destroy Q7")).length;
        expect(nx).toBe(5);
        expect(q7).toBe(8);
        expect(order[0]).toBe("hw_exec_queue_add_halt_request");
        const idx = (s: string) => order.indexOf(s);
        expect(ev.findIndex((e) => e.startsWith("ucode_core_destroy Q7"))).toBeGreaterThan(
          ev.findLastIndex((e) => e.startsWith("ucode_core_destroy NX")),
        );
        expect(idx("notification_destroy")).toBeGreaterThan(order.lastIndexOf("ucode_core_destroy"));
        expect(idx("pool_stdio_block_destroy")).toBeGreaterThan(idx("notification_destroy"));
        expect(idx("ucode_free_lib_set")).toBeGreaterThan(idx("pool_stdio_block_destroy"));
        expect(idx("model_db_destroy")).toBeGreaterThan(idx("ucode_free_lib_set"));
      }
      expect((await (c.resolve(PortalToken) as Portal).memUsage(0)).allocations).toBe(0);
      await expect(rt.load(new Uint8Array(2000))).rejects.toMatchObject({ status: NrtStatus.NRT_CLOSED });
    },
    30_000,
  );

  test("KELF refuses total_cpus 4 and cpu_id 1; staging refuses 10 libraries; nothing stays allocated", async () => {
    const { c, sim } = setup();
    const rt = await Runtime.init({
      ...nrtPlugins(c),
      visibleCores: [0],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    try {
      const before = (await sim.memUsage(0)).allocations;
      const bad4 = oneOpNeff("vector_add", "vector_add", [f32("a", 8), f32("b", 8)], [f32("o", 8)], 4);
      await expect(rt.load(bad4)).rejects.toMatchObject({ status: NrtStatus.NRT_INVALID });
      const err4 = await rt.load(bad4).catch((e) => e);
      expect(err4.message).toContain("UCode Library vector_add has invalid number of total cpus 4");
      // A string that spells a valid count is still not a count, and the message shows it as the string it is.
      const text8 = oneOpNeff(
        "vector_add",
        "vector_add",
        [f32("a", 8), f32("b", 8)],
        [f32("o", 8)],
        "8" as unknown as 8,
      );
      const errText = await rt.load(text8).catch((e) => e);
      expect(errText).toMatchObject({ status: NrtStatus.NRT_INVALID });
      expect(errText.message).toContain('UCode Library vector_add has invalid number of total cpus "8"');
      const { buildCustomOpNeff } = await import("@nrt/core");
      const cpu1 = buildCustomOpNeff({
        name: "cpu1",
        target: "cayman",
        inputs: [f32("a", 8)],
        outputs: [f32("o", 8)],
        libraries: [{
          name: "relu",
          wasm: kernel("relu"),
          totalCpus: 8,
          cpuId: 1,
          functions: [{ opcode: 1, name: "relu" }],
        }],
        calls: [{ opcode: 1, inputs: ["a"], outputs: ["o"] }],
      });
      await expect(rt.load(cpu1)).rejects.toMatchObject({ status: NrtStatus.NRT_INVALID });
      const ten = reluLibrariesNeff(10);
      const e10 = await rt.load(ten).catch((e) => e);
      expect(e10.status).toBe(NrtStatus.NRT_RESOURCE);
      expect(e10.message).toContain("Exceeded max number of GPSIMD libs");
      expect((await sim.memUsage(0)).allocations).toBe(before);
      // The vNC was released: a good model still loads on it.
      const ok = await rt.load(oneOpNeff("relu", "relu", [f32("a", 8)], [f32("o", 8)]));
      await ok.unload();
      // The base library and relu are a per-model set (num_libs 2), freed with the model (seed: runtime-synthesis §4.4).
      expect((await sim.memUsage(0)).allocations).toBe(before);
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("a real compiler NEFF is refused at load naming the engine, slot and opcode", async () => {
    const { c, sim } = setup();
    const rt = await Runtime.init({
      ...nrtPlugins(c),
      visibleCores: [0],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    try {
      const bytes = new Uint8Array(
        readFileSync(new URL("../../shared/fixtures/neff/matmul_small.neff", import.meta.url)),
      );
      expect(readNeff(bytes).target).toBe("cayman");
      const before = (await sim.memUsage(0)).allocations;
      const e = await rt.load(bytes).catch((x) => x);
      expect(e).toBeInstanceOf(NrtError);
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toMatch(/engine \w+ slot \d+ has opcode 0x[0-9a-f]+/);
      expect((await sim.memUsage(0)).allocations).toBe(before);
    } finally {
      await rt.close();
    }
  }, 30_000);
});
