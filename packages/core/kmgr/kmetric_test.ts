// kbl_infer_errors and kmetric_update_nds_* (seed lifecycle-error-model §5.2) without a device: the width, the flags
// the classifier sets, and the order of the two updates. tests/kmetric_exec_stats_test.ts drives real executions.
import { describe, expect, test } from "bun:test";
import { MemoryLogger } from "../log.ts";
import { NrtStatus } from "../status.ts";
import { execRequestInitState, execRequestProcessErrors } from "./exec_request.ts";
import {
  INFER_ERROR_NAMES,
  InferErrorFlag,
  KBL_INFER_ERRORS_SIZE,
  kblInferErrorsInit,
  Kmetric,
  kmetricUpdate,
} from "./kmetric.ts";

const khal = { errorSubtype: () => 0, isaErrorText: () => "error" };
const ctx = { khal, device: 0, modelName: "m", timeoutMs: 1000, log: new MemoryLogger() };

describe("kmetric (seed lifecycle-error-model §5.2)", () => {
  test("kbl_infer_errors is bool[9]: nine one-byte flags, all clear at init", () => {
    expect(KBL_INFER_ERRORS_SIZE).toBe(9);
    const e = kblInferErrorsInit();
    expect(e.inferErrorFlags).toBeInstanceOf(Uint8Array);
    expect(e.inferErrorFlags.byteLength).toBe(9);
    expect([...e.inferErrorFlags]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(INFER_ERROR_NAMES).toEqual([
      "NC_UE",
      "HBM_UE",
      "DMA_ABORT",
      "OOB",
      "COLLECTIVES",
      "NETWORK_PROXY",
      "TIMEOUT",
      "TPB_FATAL",
      "TPB_NONFATAL",
    ]);
  });

  test("exec_request_process_errors sets one byte per class it saw, on the request's kbl_infer_errors", () => {
    const req = execRequestInitState();
    execRequestProcessErrors(ctx, req, [{ nc: 0, records: [], timedOut: true, abortedDmaEngines: [3] }]);
    const set = [...req.inferErrors.inferErrorFlags.entries()].filter(([, v]) => v !== 0).map(([i]) => i);
    expect(set).toEqual([InferErrorFlag.DMA_ABORT, InferErrorFlag.TIMEOUT]);
    // A host-side NQ overflow is no inference error: status 1204, no flag.
    const nq = execRequestInitState();
    execRequestProcessErrors(ctx, nq, [{ nc: 0, records: [], nqOverflow: true }]);
    expect(nq.status).toBe(NrtStatus.NRT_EXEC_SW_NQ_OVERFLOW);
    expect([...nq.inferErrors.inferErrorFlags]).toEqual(new Array(9).fill(0));
  });

  test("error stats first, then exec stats with the final status; counts per model and NeuronCore", () => {
    const calls: string[] = [];
    class Recording extends Kmetric {
      override updateNdsErrorStats(...a: Parameters<Kmetric["updateNdsErrorStats"]>): void {
        calls.push("error");
        super.updateNdsErrorStats(...a);
      }
      override updateNdsExecStats(...a: Parameters<Kmetric["updateNdsExecStats"]>): void {
        calls.push(`exec ${a[2]}`);
        super.updateNdsExecStats(...a);
      }
    }
    const k = new Recording();
    k.addModel(7, "m", 1, [2, 3]);
    const e = kblInferErrorsInit();
    e.inferErrorFlags[InferErrorFlag.TIMEOUT] = 1;
    kmetricUpdate({ sink: k, model: 7 }, 3, e, NrtStatus.NRT_TIMEOUT);
    kmetricUpdate({ sink: k, model: 7 }, 2, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
    expect(calls).toEqual(["error", "exec 5", "error", "exec 0"]);
    const [s] = k.snapshot(() => true);
    expect(s).toMatchObject({ handle: 7, name: "m", vnc: 1, loaded: true, succeeded: 1, failed: 1 });
    expect(s.cores.map((c) => [c.nc, c.executions, c.byStatus, c.errors.TIMEOUT])).toEqual([
      [2, 1, { 0: 1 }, 0],
      [3, 1, { 5: 1 }, 1],
    ]);
    expect(() => k.updateNdsErrorStats(7, 2, { inferErrorFlags: new Uint8Array(8) })).toThrow(RangeError);
    expect(() => k.updateNdsExecStats(8, 2, 0)).toThrow(RangeError);
  });

  test("forget (seed §3.2 kmetric_unload_model_update_agg) drops the entry, keeps its counts per NeuronCore", () => {
    const k = new Kmetric({ keepUnloaded: 0 });
    k.addModel(1, "a", 0, [0]);
    k.addModel(2, "b", 1, [1, 2]);
    const oob = kblInferErrorsInit();
    oob.inferErrorFlags[InferErrorFlag.OOB] = 1;
    kmetricUpdate({ sink: k, model: 1 }, 0, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
    kmetricUpdate({ sink: k, model: 1 }, 0, oob, NrtStatus.NRT_EXEC_OOB);
    kmetricUpdate({ sink: k, model: 2 }, 2, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
    const last = k.forget(1);
    expect(last).toMatchObject({ handle: 1, name: "a", loaded: false, succeeded: 1, failed: 1 });
    expect(last?.cores.map((c) => [c.nc, c.executions, c.byStatus, c.errors.OOB])).toEqual([
      [0, 2, { 0: 1, 1006: 1 }, 1],
    ]);
    // Listed no more; the other model untouched.
    expect(k.snapshot(() => true).map((m) => m.handle)).toEqual([2]);
    expect(k.size).toBe(1);
    expect(k.retired().map((c) => [c.nc, c.executions, c.byStatus, c.errors.OOB])).toEqual([
      [0, 2, { 0: 1, 1006: 1 }, 1],
    ]);
    // A late execution of a forgotten model counts in the aggregate; forgetting it again is a no-op.
    k.updateNdsExecStats(1, 0, 0);
    expect(k.forget(1)).toBeUndefined();
    k.forget(2);
    expect(k.snapshot(() => true)).toEqual([]);
    expect(k.retired().map((c) => [c.nc, c.executions])).toEqual([[0, 3], [1, 0], [2, 1]]);
  });

  test("loading and unloading for ever keeps one entry per loaded model and the last 256 unloaded, no more", () => {
    const k = new Kmetric();
    for (let h = 1; h <= 20_000; h++) {
      k.addModel(h, `m${h}`, h % 2, [h % 2]);
      kmetricUpdate({ sink: k, model: h }, h % 2, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
      if (h > 3) k.forget(h - 3); // three loaded at a time
    }
    expect(k.size).toBe(3);
    const listed = k.snapshot(() => true);
    expect(listed.length).toBe(3 + 256);
    // The last 256 unloaded (19,742 to 19,997, before the three loaded) are listed as not loaded, with their counts.
    expect(listed[0]).toMatchObject({ handle: 19_742, loaded: false, succeeded: 1 });
    expect(listed.filter((m) => m.loaded).map((m) => m.handle)).toEqual([19_998, 19_999, 20_000]);
    expect(listed.filter((m) => !m.loaded).length).toBe(256);
    // The counts of the others are all there, per NeuronCore: models 1 to 19,741, the odd ones on NeuronCore 1.
    expect(k.retired().map((c) => [c.nc, c.executions, c.byStatus[0]])).toEqual([
      [0, 9_870, 9_870],
      [1, 9_871, 9_871],
    ]);
  });

  test("an unloaded model stays listed with its final counts until 256 more were unloaded", () => {
    const k = new Kmetric({ keepUnloaded: 2 });
    for (const h of [1, 2, 3]) {
      k.addModel(h, `m${h}`, 0, [0]);
      kmetricUpdate({ sink: k, model: h }, 0, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
    }
    k.forget(1);
    k.forget(2);
    expect(k.snapshot(() => true).map((m) => [m.handle, m.loaded, m.succeeded])).toEqual([
      [1, false, 1],
      [2, false, 1],
      [3, true, 1],
    ]);
    expect(k.retired()).toEqual([]);
    k.forget(3); // the oldest leaves the list for the aggregate
    expect(k.snapshot(() => true).map((m) => m.handle)).toEqual([2, 3]);
    expect(k.retired().map((c) => [c.nc, c.executions])).toEqual([[0, 1]]);
    expect(() => new Kmetric({ keepUnloaded: -1 })).toThrow(RangeError);
  });

  test("an execution that ends after its model's forget (the unload drains it) still counts, listed or not", () => {
    const k = new Kmetric({ keepUnloaded: 1 });
    k.addModel(1, "a", 0, [0]);
    k.addModel(2, "b", 0, [0]);
    k.forget(1); // at STOPPING, before the drain (seed §3.2)
    kmetricUpdate({ sink: k, model: 1 }, 0, kblInferErrorsInit(), NrtStatus.NRT_SUCCESS);
    expect(k.snapshot(() => true).map((m) => [m.handle, m.loaded, m.succeeded])).toEqual([[1, false, 1], [2, true, 0]]);
    k.forget(2); // model 1 leaves the list; one of its executions ends later still
    const oob = kblInferErrorsInit();
    oob.inferErrorFlags[InferErrorFlag.OOB] = 1;
    kmetricUpdate({ sink: k, model: 1 }, 0, oob, NrtStatus.NRT_EXEC_OOB);
    expect(k.retired().map((c) => [c.nc, c.executions, c.byStatus, c.errors.OOB])).toEqual([
      [0, 2, { 0: 1, 1006: 1 }, 1],
    ]);
    // A model never registered is still a programming error.
    expect(() => k.updateNdsExecStats(9, 0, 0)).toThrow(RangeError);
  });
});
