// kbl_infer_errors and the kmetric_update_nds_* statistics (seed lifecycle-error-model §5.2): a real execute through
// the simulator per fault class the injector can raise, and the runtime's read-only statistics show exactly that
// class's flag counted once and the execution counted once under its final status. The nine flags' meanings are ours
// (packages/core/kmgr/kmetric.ts); the width, nine one-byte flags, is the seed's.
import { afterAll, describe, expect, test } from "bun:test";
import {
  INFER_ERROR_NAMES,
  InferErrorFlag,
  type InferErrorName,
  KBL_INFER_ERRORS_SIZE,
  type ModelExecutionStats,
  NrtStatus,
} from "@nrt/core";
import type { FaultSpec } from "@nrt/device-sim";
import { exec, execHung, type Harness, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const S = NrtStatus;

/** Each fault class, the final status it ends with and the one flag it raises (`null`: none). */
const CASES: ReadonlyArray<{ spec: Omit<FaultSpec, "nc">; status: number; flag: InferErrorName | null }> = [
  { spec: { kind: "nc-ue", metadata: 0xbeef }, status: S.NRT_EXEC_HW_ERR_NC_UE, flag: "NC_UE" },
  { spec: { kind: "hbm-ue" }, status: S.NRT_EXEC_HW_ERR_HBM_UE, flag: "HBM_UE" },
  { spec: { kind: "hbm-ue", repairable: true }, status: S.NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE, flag: "HBM_UE" },
  { spec: { kind: "dma-abort", engine: 3 }, status: S.NRT_EXEC_HW_ERR_DMA_ABORT, flag: "DMA_ABORT" },
  { spec: { kind: "oob" }, status: S.NRT_EXEC_OOB, flag: "OOB" },
  { spec: { kind: "collectives-hang" }, status: S.NRT_EXEC_HW_ERR_COLLECTIVES, flag: "COLLECTIVES" },
  { spec: { kind: "network-proxy" }, status: S.NRT_NETWORK_PROXY_FAILURE, flag: "NETWORK_PROXY" },
  { spec: { kind: "hang" }, status: S.NRT_TIMEOUT, flag: "TIMEOUT" },
  { spec: { kind: "tpb-error", mask: 0x10 }, status: S.NRT_HW_ERROR, flag: "TPB_FATAL" },
  { spec: { kind: "fp-nan" }, status: S.NRT_EXEC_COMPLETED_WITH_NUM_ERR, flag: "TPB_NONFATAL" },
  { spec: { kind: "recoverable" }, status: S.NRT_EXEC_COMPLETED_WITH_ERR, flag: "TPB_NONFATAL" },
  // A host-side NQ overflow is not an error of the inference: no flag, counted by its status only.
  { spec: { kind: "nq-overflow" }, status: S.NRT_EXEC_SW_NQ_OVERFLOW, flag: null },
];

function statsOf(h: Harness, handle: number): ModelExecutionStats {
  const s = h.rt.executionStats().find((m) => m.handle === handle);
  if (s === undefined) throw new Error(`No statistics for model ${handle}`);
  return s;
}

describe("kbl_infer_errors / kmetric_update_nds_* (seed lifecycle-error-model §5.2)", () => {
  test("kbl_infer_errors is nine one-byte flags, one name each", () => {
    expect(KBL_INFER_ERRORS_SIZE).toBe(9);
    expect(INFER_ERROR_NAMES.length).toBe(9);
    expect(INFER_ERROR_NAMES.map((n) => InferErrorFlag[n])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  test(
    "every fault class the injector raises: exactly its flag, once; the execution under its final status, once",
    async () => {
      const h = await harness({ visibleCores: [0, 1] });
      const { rt, sim } = h;
      try {
        for (const c of CASES) {
          const nc = 1;
          const victim = await load(rt, RELU_NEFF, nc);
          const handle = victim.model.handle;
          const before = statsOf(h, handle);
          expect(before.loaded).toBe(true);
          expect(before.cores.map((k) => k.nc)).toEqual([nc]);
          sim.faults.inject({ ...c.spec, nc, atExecution: 1 });
          const status = c.spec.kind === "hang" ? (await execHung(h, victim, 30_000)).status : await exec(victim);
          expect({ kind: c.spec.kind, status }).toEqual({ kind: c.spec.kind, status: c.status });
          await sim.elapse(0, 30_000); // the device's watchdog drops a run still stuck (collectives-hang)
          const after = statsOf(h, handle);
          const core = after.cores[0];
          const was = before.cores[0];
          expect(Object.keys(core.errors).length).toBe(9);
          const delta = Object.fromEntries(
            INFER_ERROR_NAMES.map((n) => [n, core.errors[n] - was.errors[n]]),
          );
          const expected = Object.fromEntries(INFER_ERROR_NAMES.map((n) => [n, n === c.flag ? 1 : 0]));
          expect({ kind: c.spec.kind, delta }).toEqual({ kind: c.spec.kind, delta: expected });
          expect(core.executions - was.executions).toBe(1);
          expect((core.byStatus[c.status] ?? 0) - (was.byStatus[c.status] ?? 0)).toBe(1);
          expect(after.failed - before.failed).toBe(1);
          expect(after.succeeded).toBe(before.succeeded);
          // The other core's models never moved.
          await victim.model.unload();
          const gone = statsOf(h, handle);
          expect(gone.loaded).toBe(false);
          expect(gone.cores).toEqual(after.cores); // statistics outlive the unload
        }
      } finally {
        await rt.close();
      }
    },
    120_000,
  );

  test(
    "a success counts under NRT_SUCCESS with no flag; a refused request on a poisoned model is not counted",
    async () => {
      const h = await harness({ visibleCores: [0] });
      try {
        const l = await load(h.rt, RELU_NEFF, 0);
        const zero = statsOf(h, l.model.handle);
        expect(zero).toMatchObject({ name: l.model.name, vnc: 0, succeeded: 0, failed: 0 });
        expect(zero.cores).toEqual([{
          nc: 0,
          executions: 0,
          byStatus: {},
          errors: Object.fromEntries(INFER_ERROR_NAMES.map((n) => [n, 0])),
        }]);
        expect(await exec(l)).toBe(S.NRT_SUCCESS);
        expect(await exec(l)).toBe(S.NRT_SUCCESS);
        h.sim.faults.inject({ kind: "nc-ue", nc: 0, atExecution: 1 });
        expect(await exec(l)).toBe(S.NRT_EXEC_HW_ERR_NC_UE);
        // Poisoned: refused before the device, not an execution.
        expect(await exec(l)).toBe(S.NRT_EXEC_HW_ERR_NC_UE);
        const s = statsOf(h, l.model.handle);
        expect({ succeeded: s.succeeded, failed: s.failed }).toEqual({ succeeded: 2, failed: 1 });
        expect(s.cores[0].executions).toBe(3);
        expect(s.cores[0].byStatus).toEqual({ [S.NRT_SUCCESS]: 2, [S.NRT_EXEC_HW_ERR_NC_UE]: 1 });
        expect(s.cores[0].errors.NC_UE).toBe(1);
      } finally {
        await h.rt.close();
      }
    },
    30_000,
  );
});
