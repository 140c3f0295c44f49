/**
 * Fail-stop applies to Band C only (seed lifecycle-error-model §4.1: "Only Band-C codes carry the fail-stop
 * posture"; §5.5 and §6: a failed exec leaves the model RUNNING, a Band-C one RUNNING-but-poisoned for the operator's
 * `nrt_unload`; runtime-synthesis §5.6: "the model is NOT freed on exec error (it may be re-run or explicitly
 * unloaded)"). One table: every status × whether the next execute really runs on the device.
 *
 * Statuses are literal numbers from the seed's enum (§4.1), not the constants the code shares.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { isFailStop } from "../packages/core/status.ts";
import { exec, execHung, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

/** The 28 NRT_STATUS values of the seed (§4.1) and whether each is Band C (1200..1206). */
const ALL_28: ReadonlyArray<[number, boolean]> = [
  [0, false],
  [1, false],
  [2, false],
  [3, false],
  [4, false],
  [5, false],
  [6, false],
  [7, false],
  [9, false],
  [10, false],
  [11, false],
  [13, false],
  [14, false],
  [15, false],
  [101, false],
  [1002, false],
  [1003, false],
  [1004, false],
  [1005, false],
  [1006, false],
  [1100, false],
  [1200, true],
  [1201, true],
  [1202, true],
  [1203, true],
  [1204, true],
  [1205, true],
  [1206, true],
];

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

/**
 * Every status the simulated device can make the host return, how it is produced, and the seed's answer to "does
 * the next execute of the same model run on the device?" (Band C: no — poisoned, same status, no doorbell).
 */
const TABLE: ReadonlyArray<
  { status: number; how: string; fault?: Record<string, unknown>; kernel?: string; hang?: boolean; nextRuns: boolean }
> = [
  { status: 5, how: "injected hang (NRT_TIMEOUT)", fault: { kind: "hang" }, hang: true, nextRuns: true },
  { status: 6, how: "kernel trap (unexplained fatal TPB_ERROR, ours → NRT_HW_ERROR)", kernel: "trap", nextRuns: true },
  { status: 6, how: "injected fatal TPB_ERROR", fault: { kind: "tpb-error", mask: 0x10 }, nextRuns: true },
  { status: 1003, how: "injected FP NaN (soft)", fault: { kind: "fp-nan" }, nextRuns: true },
  { status: 1004, how: "injected recoverable error (soft)", fault: { kind: "recoverable" }, nextRuns: true },
  { status: 1006, how: "kernel out-of-bounds load", kernel: "oob", nextRuns: true },
  { status: 1006, how: "injected OOB", fault: { kind: "oob" }, nextRuns: true },
  { status: 1200, how: "injected collectives hang", fault: { kind: "collectives-hang" }, nextRuns: false },
  { status: 1201, how: "injected HBM UE", fault: { kind: "hbm-ue" }, nextRuns: false },
  { status: 1202, how: "injected NC UE", fault: { kind: "nc-ue" }, nextRuns: false },
  { status: 1203, how: "injected DMA abort", fault: { kind: "dma-abort" }, nextRuns: false },
  { status: 1204, how: "injected NQ overflow", fault: { kind: "nq-overflow" }, nextRuns: false },
  { status: 1205, how: "injected repairable HBM UE", fault: { kind: "hbm-ue", repairable: true }, nextRuns: false },
  { status: 1206, how: "injected network proxy failure", fault: { kind: "network-proxy" }, nextRuns: false },
];

describe("fail-stop is Band C only (seed lifecycle-error-model §4.1, §5.5, §6)", () => {
  test("all 28 NRT_STATUS values: only 1200..1206 carry the fail-stop posture", () => {
    expect(ALL_28.length).toBe(28);
    for (const [status, band] of ALL_28) {
      expect({ status, failStop: isFailStop(status) }).toEqual({ status, failStop: band });
    }
  });

  for (const row of TABLE) {
    test(
      `${row.status} (${row.how}): the next execute ${
        row.nextRuns ? "runs on the device" : "is refused with the same status, no doorbell"
      }`,
      async () => {
        const h = await harness({ visibleCores: [0] });
        try {
          const neff = row.kernel === undefined
            ? RELU_NEFF
            : oneOpNeff("faults", row.kernel, [f32("x", 64)], [f32("y", 64)]);
          const l = await load(h.rt, neff, 0);
          if (row.fault !== undefined) h.sim.faults.inject({ ...row.fault, nc: 0, atExecution: 1 } as never);
          h.trace.clear();
          const status = row.hang === true ? (await execHung(h, l, 30_000)).status : await exec(l);
          expect(status).toBe(row.status);
          // The host's only action on the fault path is log and report: one doorbell, no stream-table write (no halt).
          expect(h.trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(1);
          expect(h.trace.entries.filter((e) => e.op === "barWrite" && e.target >= 0x4000 && e.target < 0x5000)).toEqual(
            [],
          );
          // A run the device is still stuck in (1200's hang) is the device's own to drop: its watchdog, on its clock.
          await h.sim.elapse(0, 30_000);
          await h.sim.whenIdle(0, 0);
          expect(h.rt.poisonedStatus(l.model)).toBe(row.nextRuns ? undefined : row.status);
          h.trace.clear();
          const before = h.sim.records(0, 0).length;
          const next = await exec(l); // the injected hang fired once: this run completes
          const doorbells = h.trace.entries.filter((e) => e.op === "semaphoreIncrement").length;
          if (row.nextRuns) {
            // Re-runnable: the doorbell rang and the device ran the stream again (a kernel fault faults again; an
            // injected one fired once, so the run succeeds; a hang is armed once too).
            expect(doorbells).toBe(1);
            expect(h.sim.records(0, 0).length).toBeGreaterThan(before);
            expect(next).toBe(row.kernel !== undefined ? row.status : 0);
          } else {
            expect(doorbells).toBe(0);
            expect(h.sim.records(0, 0).length).toBe(before);
            expect(next).toBe(row.status);
          }
          // Unload frees a poisoned model as any other; the core serves a fresh load.
          await l.model.unload();
          const ok = await load(h.rt, RELU_NEFF, 0);
          expect(await exec(ok)).toBe(0);
        } finally {
          await h.rt.close();
        }
        expect((await h.sim.memUsage(0)).allocations).toBe(0);
      },
      30_000,
    );
  }
});
