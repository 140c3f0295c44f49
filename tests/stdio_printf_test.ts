import { afterAll, describe, expect, test } from "bun:test";
import { LogLevel, NrtStatus } from "@nrt/core";
import { exec, harness, load, opened } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const printf = (lines: number, totalCpus = 1) =>
  oneOpNeff("faults", "printf", [f32("x", 64)], [f32("y", 64)], totalCpus, [lines]);

describe("kernel printf reaches the runtime's logger through pool_stdio (seed spmd-teardown §5, runtime-synthesis §3.5)", () => {
  test(
    "more lines than the ring holds between two drains: only the oldest are lost, the overflow is logged, the rest arrive in order across the wrap",
    async () => {
      // The default stdout ring: 4096 bytes = 16 entries.
      const h = await harness({ visibleCores: [0] });
      try {
        const flood = await load(h.rt, printf(40), 0);
        expect(await exec(flood)).toBe(NrtStatus.NRT_SUCCESS);
        const stdout = () => h.log.entries.filter((e) => e.fields?.tag === 3).map((e) => e.message);
        expect(stdout()).toEqual(Array.from({ length: 16 }, (_, k) => `line ${k + 24} from core 0`));
        expect(
          h.log.entries.filter((e) =>
            e.level === LogLevel.WARNING && e.message.includes("stdout queue overflow: 24 entries lost")
          ).length,
        ).toBe(1);
        // The device sees the read index the host published, and counted its overruns.
        expect(h.sim.stdioQueues(0, 0).stdout).toEqual({ capacity: 16, writeIndex: 40, readIndex: 40, overruns: 24 });
        // Ten more lines: slots 8..15 then 0..1 — across the wrap, in order, no loss.
        h.log.clear();
        const more = await load(h.rt, printf(10), 0);
        expect(await exec(more)).toBe(NrtStatus.NRT_SUCCESS);
        expect(stdout()).toEqual(Array.from({ length: 10 }, (_, k) => `line ${k} from core 0`));
        expect(h.log.messages().some((m) => m.includes("overflow"))).toBe(false);
        expect(h.sim.stdioQueues(0, 0).stdout).toEqual({ capacity: 16, writeIndex: 50, readIndex: 50, overruns: 24 });
      } finally {
        await h.rt.close();
      }
      expect((await h.sim.memUsage(0)).allocations).toBe(0);
    },
    30_000,
  );

  test("all 8 cores print: every line reaches the logger once, with its NeuronCore", async () => {
    const h = await harness({ visibleCores: [1] });
    try {
      const l = await load(h.rt, printf(1, 8), 0);
      expect(await exec(l)).toBe(NrtStatus.NRT_SUCCESS);
      const lines = h.log.entries.filter((e) => e.fields?.tag === 3);
      expect(lines.map((e) => e.message).sort()).toEqual(Array.from({ length: 8 }, (_, c) => `line 0 from core ${c}`));
      expect(lines.every((e) => e.fields?.nc === 1 && e.fields?.stream === "stdout")).toBe(true);
    } finally {
      await h.rt.close();
    }
  }, 30_000);
});
