import { afterAll, describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import { NotificationKind, TpbErrorId, TpbErrorMask } from "@nrt/core/isa";
import { exec, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

describe("kernel faults become TPB_ERROR records and statuses, never a crashed process (seed lifecycle-error-model §4.3, §7)", () => {
  const cases = [
    { fn: "trap", what: "a wasm `unreachable` trap", mask: TpbErrorMask.Q7_TRAP, status: NrtStatus.NRT_HW_ERROR },
    {
      fn: "oob",
      what: "a load far outside the core's memory",
      mask: TpbErrorMask.Q7_OOB,
      status: NrtStatus.NRT_EXEC_OOB,
    },
    {
      fn: "bad_dram",
      what: "dram_addr_to_soc_addr outside [0x80000, 0x90000)",
      mask: TpbErrorMask.Q7_OOB,
      status: NrtStatus.NRT_EXEC_OOB,
    },
  ];
  for (const c of cases) {
    test(
      `${c.what}: one fatal TPB_ERROR per core with mask 0x${
        c.mask.toString(16)
      }, status ${c.status}, not fail-stop: the model re-runs and faults again, the core serves`,
      async () => {
        const h = await harness({ visibleCores: [0] });
        try {
          const bad = await load(h.rt, oneOpNeff("faults", c.fn, [f32("x", 64)], [f32("y", 64)]), 0);
          const before = h.sim.records(0, 0).length;
          expect(await exec(bad)).toBe(c.status);
          const errors = h.sim.records(0, 0).slice(before).filter((r) => r.kind === NotificationKind.TPB_ERROR);
          expect(errors.map((r) => r.q7).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
          expect(errors.every((r) => r.code === TpbErrorId.FATAL && r.mask === c.mask)).toBe(true);
          expect(
            h.log.messages().filter((m) =>
              m.startsWith("(FATAL-RT-UNDEFINED-STATE) [ND 0][NC 0] TPB_ERROR error_id 0x0a")
            ).length,
          ).toBe(8);
          // Band A/B, not fail-stop (seed lifecycle-error-model §4.1): the model is not poisoned, and its next execute
          // really runs on the device and faults the same way.
          expect(h.rt.poisonedStatus(bad.model)).toBeUndefined();
          const again = h.sim.records(0, 0).length;
          expect(await exec(bad)).toBe(c.status);
          expect(h.sim.records(0, 0).slice(again).filter((r) => r.kind === NotificationKind.TPB_ERROR).length).toBe(8);
          await bad.model.unload();
          const ok = await load(h.rt, RELU_NEFF, 0);
          expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
        } finally {
          await h.rt.close();
        }
      },
      30_000,
    );
  }
});
