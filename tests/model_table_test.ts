/**
 * The model table of a runtime: handles are per runtime and never wrap, and the 15-bit device model id a model's
 * records carry is a free id of its core, so more than 32,768 load/unload cycles never give two live models the same
 * id (a wrapped `handle & 0x7fff` once did). Ours (the seeds say only that H_MODEL indexes the model table).
 */
import { describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { MemoryLogger, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string) => ({ name, dtype: "float32", shape: [16] });

describe("the model table", () => {
  test(
    "33,000 load/unload cycles with a model resident throughout: handles keep growing, ids stay unique, both models still run",
    async () => {
      const sim = new DeviceSimPortal({ agents: "inline" });
      /** The model ids of the streams installed on NeuronCore 0, read from the device's stream table. */
      const liveIds = () => {
        const regs = sim.mappedRegisters(0, 0);
        return Array.from({ length: sim.spec.csr.streamSlots }, (_, slot) => regs.streamEntry(slot)?.model).filter((
          m,
        ) => m !== undefined);
      };
      await using rt = await Runtime.init({
        portal: sim,
        archPacks: [cayman],
        visibleCores: [0, 1],
        virtualCoreSize: 1,
        logger: new MemoryLogger(),
      });
      const neff = oneOpNeff("relu", "relu", [f32("x")], [f32("y")]);
      // The resident model is another NEFF: the same one twice on a core would share one interned model.
      await using resident = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")], 8, [1]));
      const ins = new TensorSet(), outs = new TensorSet();
      ins.add("x", await rt.allocateTensor({ size: 64, name: "x" }));
      outs.add("y", await rt.allocateTensor({ size: 64, name: "y" }));
      const CYCLES = 33_000;
      let last = resident.handle;
      for (let i = 0; i < CYCLES; i++) {
        const m = await rt.load(neff);
        expect(m.handle).toBeGreaterThan(last);
        last = m.handle;
        if (i === 0 || i === 32_767 || i === CYCLES - 1) {
          // Two live models, two distinct ids in the device's stream table (at i = 32,767 the transient model's
          // handle is 32,769: a wrapped handle would have given it the resident's id).
          const ids = liveIds();
          expect(ids.length).toBe(2);
          expect(new Set(ids).size).toBe(2);
          // Across the old wrap point the transient model and the resident one still answer as themselves.
          await m.execute(ins, outs);
          await resident.execute(ins, outs);
        }
        await m.unload();
      }
      expect(last - resident.handle).toBe(CYCLES);
      expect(rt.cores()[0].models.map((m) => m.handle)).toEqual([resident.handle]);
      const status = await rt.run(resident, ins, outs);
      expect(status.status).toBe(NrtStatus.NRT_SUCCESS);
    },
    600_000,
  );
});
