/**
 * One runtime over three generations: the same reference NEFF (built per target) gives identical outputs on
 * Sunda, Cayman and Mariana; the init/load/execute traces differ exactly at the run-stall path; Sunda forces the
 * virtual core size to 1 (seed: runtime-synthesis §2.1, §4.5).
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import { mariana, MARIANA_SPEC } from "@nrt/arch-mariana";
import { sunda, SUNDA_SPEC } from "@nrt/arch-sunda";
import { type CustomOpTensorSpec, MemoryLogger, Runtime, type RuntimeInitOptions, TensorSet } from "@nrt/core";
import { ncBlock, type SiliconSpec } from "@nrt/core/hal";
import { type TraceEntry, TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { container } from "tsyringe";
import { oneOpNeff } from "./_kernels.ts";
import { ArchPackToken, nrtPlugins, PortalToken } from "@nrt/cli";

const opened: DeviceSimPortal[] = [];
// Each simulated device owns Q7 Workers: close the portals so no Worker outlives the file.
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const SPECS = [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC] as const;

/** A container as the composition root builds it: all three packs, a (traced) simulator of `spec`. */
function setup(spec: SiliconSpec, agents?: "inline") {
  const sim = new DeviceSimPortal({ spec, agents });
  opened.push(sim);
  const trace = new TracingPortal(sim);
  const c = container.createChildContainer();
  c.register(ArchPackToken, { useValue: sunda });
  c.register(ArchPackToken, { useValue: cayman });
  c.register(ArchPackToken, { useValue: mariana });
  c.register(PortalToken, { useValue: trace });
  return {
    c,
    sim,
    trace,
    init: (o: Partial<RuntimeInitOptions> = {}) => Runtime.init({ ...nrtPlugins(c), logger: new MemoryLogger(), ...o }),
  };
}

const f32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "float32", shape });
const i32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "int32", shape });
const bytes = (a: Float32Array) => new Uint8Array(a.buffer);

/** Loads, runs once on DEVICE tensors, unloads; returns the outputs' bytes. */
async function run(rt: Runtime, neff: Uint8Array, inputs: Record<string, Uint8Array>, vnc = 0): Promise<Uint8Array[]> {
  const model = await rt.load(neff, vnc);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ vnc: vnc, size: t.size, name: t.name });
    await x.write(inputs[t.name]);
    ins.add(t.name, x);
  }
  for (const t of model.outputs) outs.add(t.name, await rt.allocateTensor({ vnc: vnc, size: t.size, name: t.name }));
  await model.execute(ins, outs);
  const out = [];
  for (const t of model.outputs) out.push(await outs.get(t.name).read());
  for (const s of [ins, outs]) for (const n of s.names()) await s.get(n).free();
  await model.unload();
  return out;
}

/** The reference workload, its NEFFs built for `target`. */
function workload(target: string): Array<{ neff: Uint8Array; inputs: Record<string, Uint8Array> }> {
  const n = 777;
  return [
    {
      neff: oneOpNeff("vector_add", "vector_add", [f32("a", [n]), f32("b", [n])], [f32("out", [n])], 8, [], target),
      inputs: {
        a: bytes(Float32Array.from({ length: n }, (_, i) => i / 3)),
        b: bytes(Float32Array.from({ length: n }, (_, i) => Math.cos(i))),
      },
    },
    {
      neff: oneOpNeff("relu", "relu", [f32("x", [n])], [f32("y", [n])], 8, [], target),
      inputs: { x: bytes(Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 10)) },
    },
    {
      neff: oneOpNeff("softmax", "softmax_rows", [f32("x", [6, 20])], [f32("y", [6, 20])], 8, [], target),
      inputs: { x: bytes(Float32Array.from({ length: 120 }, (_, i) => Math.tan(i) % 7)) },
    },
    {
      neff: oneOpNeff("matmul", "matmul", [f32("a", [9, 11]), f32("b", [11, 5])], [f32("c", [9, 5])], 8, [], target),
      inputs: {
        a: bytes(Float32Array.from({ length: 99 }, (_, i) => Math.sqrt(i))),
        b: bytes(Float32Array.from({ length: 55 }, (_, i) => 1 / (i + 1))),
      },
    },
    {
      neff: oneOpNeff("cpu_map", "cpu_map", [i32("x", [100])], [i32("y", [100])], 8, [], target),
      inputs: { x: new Uint8Array(400) },
    },
    {
      neff: oneOpNeff("reduce_sum", "sum_all", [f32("x", [50])], [f32("s", [1])], 1, [], target),
      inputs: { x: bytes(Float32Array.from({ length: 50 }, (_, i) => i * 1.5)) },
    },
  ];
}

/** A trace entry with device addresses replaced by the register they hit, so traces of two layouts compare. */
function symbolic(spec: SiliconSpec, e: TraceEntry): string {
  if (e.op !== "barWrite" && e.op !== "barWrite32") {
    return `${e.op} nc${e.nc ?? "-"} ${e.op.startsWith("sem") ? `sem${e.target} ` : ""}${e.value}`;
  }
  const c = spec.csr;
  const nc = Math.floor((e.target - c.ncBlockBase) / c.ncBlockStride);
  const rel = e.target - ncBlock(spec, nc);
  const windows: Array<[string, number, number, number]> = [
    ["q7Iram", c.q7Iram, c.q7IramStride, spec.q7CoresPerNc],
    ["q7Dram", c.q7Dram, c.q7DramStride, spec.q7CoresPerNc],
    ["semaphoreIncrement", c.semaphoreIncrement, 4, spec.semaphoresPerCore],
    ["semaphoreSet", c.semaphoreSet, 4, spec.semaphoresPerCore],
    ["event", c.event, 4, spec.eventsPerCore],
    ["streamTable", c.streamTable, 16, c.streamSlots],
    ["ucodeCore", c.ucodeCore, 4, spec.nxCoresPerNc + spec.q7CoresPerNc],
  ];
  for (const [name, at, stride, count] of windows) {
    if (rel >= at && rel < at + stride * count && (rel - at) % stride === 0) {
      return `${e.op} nc${nc} ${name}[${(rel - at) / stride}] ${e.value}`;
    }
  }
  const named: Array<[string, number | null, number]> = [
    ["runStall", c.runStall, 4],
    ["swapTable", c.swapTable, 8],
    ["swapFileIoTable", c.swapFileIoTable, 8],
    ["notificationQueue", c.notificationQueue, 24],
  ];
  for (const [name, at, size] of named) {
    if (at !== null && rel >= at && rel < at + size) return `${e.op} nc${nc} ${name}+${rel - at} ${e.value}`;
  }
  return `${e.op} nc${nc} +0x${rel.toString(16)} ${e.value}`;
}

describe("one NEFF, three generations", () => {
  test("the same reference NEFF built per target gives identical outputs on sunda, cayman and mariana", async () => {
    const results: Uint8Array[][][] = [];
    for (const spec of SPECS) {
      const { init } = setup(spec);
      const rt = await init();
      try {
        expect(rt.spec).toBe(spec);
        const outs = [];
        for (const w of workload(spec.name)) outs.push(await run(rt, w.neff, w.inputs));
        results.push(outs);
      } finally {
        await rt.close();
      }
    }
    const [s, c, m] = results.map((r) => r.map((outs) => outs.map((o) => Array.from(o))));
    expect(s).toEqual(c);
    expect(m).toEqual(c);
    expect(new Set(new Int32Array(results[0][4][0].slice().buffer)).size).toBe(8); // cpu_map: all 8 cores worked
    expect(new Float32Array(results[0][5][0].slice().buffer)[0]).toBe(1.5 * (49 * 50) / 2);
  }, 30_000);

  test("init/load/execute traces differ between the packs only at the run-stall CSR writes", async () => {
    const traces: string[][] = [];
    const q7: Array<Array<[number, string, string | undefined]>> = [];
    for (const spec of SPECS) {
      // The device on the host's thread: it runs a stream to its end before the host looks, so how many reads the
      // host's notification drain takes does not depend on the machine's timing, and the traces compare exactly.
      const { init, trace, sim } = setup(spec, "inline");
      const rt = await init({ visibleCores: [0], virtualCoreSize: 1 });
      try {
        const w = workload(spec.name)[0];
        const bootedAtInit = sim.q7Events().filter((e) => e.kind === "released").length;
        await run(rt, w.neff, w.inputs);
        await run(rt, w.neff, w.inputs);
        q7.push([
          [bootedAtInit, "", undefined],
          ...sim.q7Events().filter((e) => e.kind === "released").map((e) =>
            [e.nc, e.kind, e.via] as [number, string, string | undefined]
          ),
        ]);
      } finally {
        await rt.close();
      }
      traces.push(trace.entries.map((e) => symbolic(spec, e)));
    }
    const [s, c, m] = traces;
    expect(m).toEqual(c);
    for (const t of traces) expect(t.filter((x) => x.includes(" +0x"))).toEqual([]); // every BAR write named a register
    const runStall = c.filter((x) => x.includes(" runStall+"));
    expect(runStall).toEqual(["barWrite32 nc0 runStall+0 255", "barWrite32 nc0 runStall+0 0"]);
    expect(s.some((x) => x.includes("runStall") || x.includes("+0x3000"))).toBe(false);
    expect(s).toEqual(c.filter((x) => !x.includes(" runStall+")));
    expect(s.filter((x) => x.startsWith("semaphoreIncrement")).length).toBe(2); // one doorbell per execute
    // Cayman and Mariana release the Q7s by the host CSR at init; Sunda's come online by EVT_SEM on the first run.
    expect(q7).toEqual([
      [[0, "", undefined], [0, "released", "evt-sem"]],
      [[1, "", undefined], [0, "released", "host-csr"]],
      [[1, "", undefined], [0, "released", "host-csr"]],
    ]);
  }, 30_000);
});

describe("Sunda forces the virtual core size to 1 (seed runtime-synthesis §4.5)", () => {
  test(
    "Sunda with NEURON_RT_VIRTUAL_CORE_SIZE=2 (env or option) runs with virtual core size 1 on both NeuronCores",
    async () => {
      for (const o of [{ env: { NEURON_RT_VIRTUAL_CORE_SIZE: "2" } }, { virtualCoreSize: 2 }]) {
        const { init } = setup(SUNDA_SPEC);
        const rt = await init(o);
        try {
          expect(rt.config.virtualCoreSize).toBe(2); // the configuration says 2 ...
          expect(rt.virtualCoreSize).toBe(1); // ... the pack forces 1
          expect(rt.visibleVncCount).toBe(2);
          const w = workload("sunda")[1];
          const [y] = await run(rt, w.neff, w.inputs, 1); // logical core 1 = physical core 1
          const x = new Float32Array(w.inputs.x.slice().buffer);
          expect(Array.from(new Float32Array(y.slice().buffer))).toEqual(Array.from(x, (v) => Math.max(v, 0)));
        } finally {
          await rt.close();
        }
      }
    },
    30_000,
  );

  test("Cayman and Mariana honour NEURON_RT_VIRTUAL_CORE_SIZE 1 and 2", async () => {
    for (const spec of [CAYMAN_SPEC, MARIANA_SPEC]) {
      for (const size of ["1", "2"]) {
        const { init } = setup(spec);
        const rt = await init({ env: { NEURON_RT_VIRTUAL_CORE_SIZE: size } });
        try {
          expect([spec.name, rt.virtualCoreSize, rt.visibleVncCount]).toEqual([
            spec.name,
            Number(size),
            8 / Number(size),
          ]);
        } finally {
          await rt.close();
        }
      }
    }
  });
});
