/**
 * Logical NeuronCores (seed runtime-synthesis §4.5, lifecycle-error-model §1.3 `exec_rets[2]`, §2.2 the vNC
 * reservation): counts, `NRT_LOAD_NOT_ENOUGH_NC` with the seed's message, LNC-2 requests that ring one doorbell per
 * physical core, and placement (`vnc: "auto"`, `Runtime.cores()`).
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import {
  buildCustomOpNeff,
  type ExecutionEvent,
  MemoryLogger,
  type Model,
  NrtApi,
  NrtError,
  NrtStatus,
  type Ref,
  Runtime,
  type RuntimeOptions,
  TensorSet,
} from "@nrt/core";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { container } from "tsyringe";
import { kernel, oneOpNeff } from "./_kernels.ts";
import { ArchPackToken, nrtPlugins, PortalToken } from "@nrt/cli";
import { cayman } from "@nrt/arch-cayman";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 256;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);
const lnc2 = (lib: string, fn: string) =>
  buildCustomOpNeff({
    name: `${fn}_lnc2.neff`,
    target: "cayman",
    lncSize: 2,
    inputs: [f32("a", N), f32("b", N)],
    outputs: [f32("out", N)],
    libraries: [{ name: lib, wasm: kernel(lib), totalCpus: 8, functions: [{ opcode: 1, name: fn }] }],
    calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
  });

function setup() {
  const sim = new DeviceSimPortal();
  opened.push(sim);
  const trace = new TracingPortal(sim);
  const c = container.createChildContainer();
  c.register(ArchPackToken, { useValue: cayman });
  c.register(PortalToken, { useValue: trace });
  return { c, trace, sim };
}

async function init(
  options: RuntimeOptions & { onExecution?: (e: ExecutionEvent) => void; env?: Record<string, string> } = {},
) {
  const { c, trace } = setup();
  const rt = await Runtime.init({ ...nrtPlugins(c), logger: new MemoryLogger(), ...options });
  return { rt, trace, container: c };
}

async function addIo(rt: Runtime, model: Model) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) {
    const t = await rt.allocateTensor({ location: "host", vnc: model.vnc, size: N * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: N }, (_, i) => (name === "a" ? i : 0.5)).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ location: "host", vnc: model.vnc, size: N * 4, name: "out" }));
  return { ins, outs };
}

describe("logical cores (seed runtime-synthesis §4.5)", () => {
  test("nrt_get_{total,visible}_{nc,vnc}_count report the device and the process's slice", async () => {
    const api = new NrtApi();
    const n: Ref<number> = {};
    expect(api.nrt_get_total_nc_count(n)).toBe(NrtStatus.NRT_UNINITIALIZED);
    const { c } = setup();
    expect(await api.nrt_init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() })).toBe(
      NrtStatus.NRT_SUCCESS,
    );
    const counts = () => {
      const out: number[] = [];
      for (
        const f of [
          api.nrt_get_total_nc_count,
          api.nrt_get_visible_nc_count,
          api.nrt_get_total_vnc_count,
          api.nrt_get_visible_vnc_count,
        ]
      ) {
        expect(f.call(api, n)).toBe(NrtStatus.NRT_SUCCESS);
        out.push(n.value!);
      }
      return out;
    };
    expect(counts()).toEqual([8, 2, 4, 1]); // Cayman: 8 NeuronCores, LNC 2 by default
    await api.nrt_close();
    expect(api.nrt_get_visible_vnc_count(n)).toBe(NrtStatus.NRT_CLOSED);
    const api1 = new NrtApi();
    await api1.nrt_init({
      ...nrtPlugins(setup().c),
      env: { NEURON_RT_VISIBLE_CORES: "0-3", NEURON_RT_VIRTUAL_CORE_SIZE: "1" },
      logger: new MemoryLogger(),
    });
    expect(api1.nrt_get_total_vnc_count(n)).toBe(NrtStatus.NRT_SUCCESS);
    expect(n.value).toBe(8);
    expect(api1.nrt_get_visible_vnc_count(n)).toBe(NrtStatus.NRT_SUCCESS);
    expect(n.value).toBe(4);
    await api1.nrt_close();
  }, 30_000);

  test("visible cores that split a logical core are refused naming NEURON_RT_VISIBLE_CORES", async () => {
    const e = await Runtime.init({ ...nrtPlugins(setup().c), visibleCores: [1, 2], logger: new MemoryLogger() }).catch((
      x,
    ) => x);
    expect(e).toBeInstanceOf(NrtError);
    expect(e.status).toBe(NrtStatus.NRT_INVALID);
    expect(e.message).toContain("NEURON_RT_VISIBLE_CORES");
  }, 30_000);

  test(
    "nrt_load on a logical core past the visible ones fails with NRT_LOAD_NOT_ENOUGH_NC and the seed's numbers",
    async () => {
      const { rt } = await init({ visibleCores: [0, 1] });
      const api = new NrtApi();
      try {
        const e = await rt.load(ADD, 1).catch((x) => x);
        expect(e).toBeInstanceOf(NrtError);
        expect(e.status).toBe(NrtStatus.NRT_LOAD_NOT_ENOUGH_NC);
        expect(e.message).toBe("Insufficient number of pncs, required: 4, available: 2");
        // An lnc_size-2 NEFF on logical cores of one physical core.
        const { rt: rt1 } = await init({ visibleCores: [0, 1], virtualCoreSize: 1 });
        const before = rt1.memory().total;
        const e2 = await rt1.load(lnc2("vector_add", "vector_add")).catch((x) => x);
        expect(e2.status).toBe(NrtStatus.NRT_LOAD_NOT_ENOUGH_NC);
        expect(e2.message).toBe("Insufficient number of pncs, required: 2, available: 1");
        expect(rt1.memory().total).toBe(before);
        // The reservation was released: both logical cores still take a model.
        await rt1.load(ADD, 0);
        await rt1.load(ADD, 1);
        await rt1.close();
        await api.nrt_init({ ...nrtPlugins(setup().c), visibleCores: [0, 1], logger: new MemoryLogger() });
        expect(await api.nrt_load(ADD, 1, 1, {})).toBe(NrtStatus.NRT_LOAD_NOT_ENOUGH_NC);
        expect(await api.nrt_load(ADD, 0, 1, {})).toBe(NrtStatus.NRT_SUCCESS);
      } finally {
        await rt.close();
        await api.nrt_close();
      }
    },
    30_000,
  );

  test(
    "an lnc_size-2 model runs on both physical cores of the LNC: one doorbell per core, exec_rets per core",
    async () => {
      const events: ExecutionEvent[] = [];
      const { rt, trace } = await init({ visibleCores: [0, 1], onExecution: (e) => events.push(e) });
      try {
        const model = await rt.load(lnc2("vector_add", "vector_add"));
        expect(rt.cores()[0].models[0].ncs).toEqual([0, 1]);
        const { ins, outs } = await addIo(rt, model);
        trace.clear();
        const outcome = await rt.run(model, ins, outs);
        expect(outcome).toEqual({
          status: NrtStatus.NRT_SUCCESS,
          execRets: [NrtStatus.NRT_SUCCESS, NrtStatus.NRT_SUCCESS],
        });
        const incs = trace.entries.filter((e) => e.op === "semaphoreIncrement");
        expect(incs).toHaveLength(2);
        expect(incs.every((e) => e.value === 1)).toBe(true);
        expect(events.map((e) => [e.phase, e.ncs])).toEqual([["start", [0, 1]], ["end", [0, 1]]]);
        expect(Array.from(new Float32Array((await outs.get("out").read()).slice().buffer))).toEqual(
          Array.from({ length: N }, (_, i) => i + 0.5),
        );
        // A single-graph (lnc_size 1) model on the same LNC stays on its first core: exactly one doorbell.
        const one = await rt.load(ADD);
        trace.clear();
        expect((await rt.run(one, ins, outs)).execRets).toEqual([NrtStatus.NRT_SUCCESS]);
        expect(trace.entries.filter((e) => e.op === "semaphoreIncrement")).toHaveLength(1);
        // A fault on both cores: each slot carries its core's status, the request the worst by priority.
        const trap = await rt.load(lnc2("faults", "trap"));
        const bad = await rt.run(trap, ins, outs);
        expect(bad.execRets).toHaveLength(2);
        expect(bad.execRets.every((s) => s !== NrtStatus.NRT_SUCCESS)).toBe(true);
        expect(bad.status).toBe(bad.execRets[0]);
        // A trap is 6 (Band A): not fail-stop, the model stays re-runnable (seed lifecycle-error-model §4.1).
        expect(bad.status).toBe(6);
        expect(rt.poisonedStatus(trap)).toBeUndefined();
      } finally {
        await rt.close();
      }
      expect(rt.memory().total).toBe(0);
    },
    30_000,
  );
});

describe("placement", () => {
  test('vnc: "auto" loads onto the least loaded logical core; Runtime.cores() lists models and memory', async () => {
    const { rt } = await init({ visibleCores: [0, 1, 2, 3], virtualCoreSize: 1 });
    try {
      const pinned = await rt.load(ADD, { vnc: 2 });
      const placed: number[] = [];
      for (let i = 0; i < 7; i++) placed.push((await rt.load(ADD, { vnc: "auto" })).vnc);
      expect(placed).toEqual([0, 1, 3, 0, 1, 2, 3]);
      const cores = rt.cores();
      // Each core holds two handles of ADD, which share one interned model (nrt_load_util step 7).
      expect(cores.map((c) => [c.vnc, c.ncs, c.models.length])).toEqual([[0, [0], 1], [1, [1], 1], [2, [2], 1], [
        3,
        [3],
        1,
      ]]);
      expect(cores[2].models[0]).toEqual({ handle: pinned.handle, name: "vector_add.neff", ncs: [2] });
      for (const c of cores) expect(c.memory.bytesUsed).toBe(rt.memory().cores.find((m) => m.nc === c.ncs[0])!.total);
      await pinned.unload();
      expect((await rt.load(ADD, { vnc: "auto" })).vnc).toBe(2);
    } finally {
      await rt.close();
    }
  }, 30_000);
});
