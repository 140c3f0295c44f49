import { afterAll, describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import { FIRED_FAULTS_KEPT } from "@nrt/device-sim";
import { exec, execHung, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

describe("execHung in one simulator past the firings its injector keeps", () => {
  test(
    "a hang after FIRED_FAULTS_KEPT firings is still seen firing, and times out at its budget",
    async () => {
      const h = await harness({ visibleCores: [0] });
      try {
        const l = await load(h.rt, RELU_NEFF, 0);
        // FIRED_FAULTS_KEPT recoverable faults, all due at the next run: they fire together and the run completes
        // with errors (the model stays usable).
        for (let i = 0; i < FIRED_FAULTS_KEPT; i++) h.sim.faults.inject({ kind: "recoverable", nc: 0, atExecution: 1 });
        expect(await exec(l)).toBe(NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR);
        expect(h.sim.faults.fired().length).toBe(FIRED_FAULTS_KEPT);
        // The list of firings stays FIRED_FAULTS_KEPT long from now on: the hang's firing must still be seen.
        h.sim.faults.inject({ kind: "hang", nc: 0, atExecution: 1 });
        const { status, waitedMs } = await execHung(h, l, 30_000);
        expect([status, waitedMs]).toEqual([NrtStatus.NRT_TIMEOUT, 30_000]);
        expect(h.sim.faults.firedDropped()).toBe(1);
      } finally {
        await h.rt.close();
      }
    },
    60_000,
  );
});
