/**
 * `kbl_model_add` in the seed's call order (lifecycle-error-model §2.6): `sequencer_setup_instr` →
 * `dma_ring_setup_queue_bundles` → `add_model` → … → `ucode_stage_libs`, then `ucode_switch_libs`. Pinned twice: by
 * the runtime's lifecycle events and by the device effects a tracing portal sees (the stream's memory write, the
 * stream-table write, the library's memory write, the swap-table write).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import {
  buildCustomOpNeff,
  extIsaLibrary,
  ExtIsaOpcode,
  isNrtError,
  MemoryLogger,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { ncBlock } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { kernel, reluLibrariesNeff } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const spec = CAYMAN_SPEC;

async function setup() {
  const sim = new DeviceSimPortal();
  opened.push(sim);
  const trace = new TracingPortal(sim);
  const rt = await Runtime.init({
    portal: trace,
    archPacks: [cayman],
    ownsPortal: false,
    visibleCores: [0],
    virtualCoreSize: 1,
    logger: new MemoryLogger(),
  });
  return { rt, trace, sim };
}

/** The seed's steps as the runtime's events name them, in the order they happened (device model id dropped). */
function steps(events: readonly string[]): string[] {
  const names = [
    "sequencer_setup_instr",
    "dma_ring_setup_queue_bundles",
    "add_model",
    "ucode_stage_libs",
    "ucode_switch_libs",
  ];
  return events.map((e) => e.split(" ")[0]).filter((n) => names.includes(n));
}

describe("kbl_model_add call order (seed lifecycle-error-model §2.6)", () => {
  test(
    "one shared ext-ISA library: the stream is set up and added before the library is staged, the swap last",
    async () => {
      const { rt, trace } = await setup();
      try {
        trace.clear();
        const before = rt.events.list().length;
        const wasm = extIsaLibrary().wasm;
        // A model with the base library only (num_libs == 1): its call is the base library's ext_copy.
        const model = await rt.load(buildCustomOpNeff({
          name: "copy",
          target: "cayman",
          inputs: [f32("x", 64)],
          outputs: [f32("y", 64)],
          libraries: [],
          calls: [{ opcode: ExtIsaOpcode.COPY, inputs: ["x"], outputs: ["y"] }],
        }));
        expect(steps(rt.events.list().slice(before))).toEqual([
          "sequencer_setup_instr",
          "dma_ring_setup_queue_bundles",
          "add_model",
          "ucode_stage_libs",
          "ucode_switch_libs",
        ]);
        // The same order in the device effects.
        const base = ncBlock(spec, 0);
        const e = trace.entries;
        const streamTable = e.findIndex((x) =>
          x.op === "barWrite" && x.target >= base + spec.csr.streamTable &&
          x.target < base + spec.csr.streamTable + 16 * spec.csr.streamSlots
        );
        const library = e.findIndex((x) => x.op === "memWrite" && x.value === wasm.byteLength);
        const swap = e.findIndex((x) => x.op === "barWrite" && x.target === base + spec.csr.swapTable);
        expect(streamTable).toBeGreaterThan(-1);
        expect(library).toBeGreaterThan(streamTable);
        expect(swap).toBeGreaterThan(library);
        // Every memWrite before the stream-table write belongs to the stream and its tables, not to the library.
        expect(e.slice(0, streamTable).some((x) => x.op === "memWrite" && x.value === wasm.byteLength)).toBe(false);
        // And the model runs (the libraries staged after add_model are in place before its first run).
        const ins = new TensorSet(), outs = new TensorSet();
        const x = await rt.allocateTensor({ size: 256, name: "x" });
        await x.write(new Uint8Array(Float32Array.from({ length: 64 }, (_, i) => i - 32).buffer));
        ins.add("x", x);
        const y = await rt.allocateTensor({ size: 256, name: "y" });
        outs.add("y", y);
        await model.execute(ins, outs);
        const out = new Float32Array((await y.read()).slice().buffer);
        expect(out[0]).toBe(-32);
        expect(out[63]).toBe(31);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test(
    "three per-model libraries (the base and two custom): all staged after add_model; a refused eleven-library model unwinds everything",
    async () => {
      const { rt, sim } = await setup();
      try {
        const two = buildCustomOpNeff({
          name: "two",
          target: "cayman",
          inputs: [f32("a", 8)],
          outputs: [f32("o", 8)],
          libraries: [
            { name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] },
            { name: "noop", wasm: kernel("noop"), totalCpus: 8, functions: [{ opcode: 2, name: "noop" }] },
          ],
          calls: [{ opcode: 1, inputs: ["a"], outputs: ["o"] }],
        });
        const before = rt.events.list().length;
        const m = await rt.load(two);
        expect(steps(rt.events.list().slice(before))).toEqual([
          "sequencer_setup_instr",
          "dma_ring_setup_queue_bundles",
          "add_model",
          "ucode_stage_libs",
          "ucode_stage_libs",
          "ucode_stage_libs",
          "ucode_switch_libs",
        ]);
        await m.unload();
        const allocations = (await sim.memUsage(0)).allocations;
        const ten = reluLibrariesNeff(10);
        const at = rt.events.list().length;
        const err = await rt.load(ten).then(() => undefined, (e: unknown) => e);
        if (!isNrtError(err)) throw new Error(`Expected the load to fail with an NrtError, got ${String(err)}`);
        expect(err.status).toBe(4); // NRT_RESOURCE
        expect(err.message).toContain("Exceeded max number of GPSIMD libs");
        // The refusal comes at ucode_stage_libs, after add_model: the stream was installed and is removed again.
        expect(steps(rt.events.list().slice(at))).toEqual([
          "sequencer_setup_instr",
          "dma_ring_setup_queue_bundles",
          "add_model",
        ]);
        expect((await sim.memUsage(0)).allocations).toBe(allocations);
        expect(sim.mappedRegisters(0, 0).streamEntry(0)).toBeUndefined();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
});
