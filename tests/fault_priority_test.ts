import { afterAll, describe, expect, test } from "bun:test";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MemoryLogger, NrtStatus } from "@nrt/core";
import { DmaEngineState, dmaEngineStateAddr } from "@nrt/core/isa";
import {
  execRequestInitState,
  execRequestProcessErrors,
  type NcErrorScan,
} from "../packages/core/kmgr/exec_request.ts";
import { isErrorRecord } from "../packages/core/notification/notification_consume.ts";
import { ErpStep, ExecFatalStatus } from "../packages/core/state.ts";
import { buildCustomOpNeff } from "@nrt/core";
import { exec, execHung, FAULT_CASES, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";
import { kernel } from "./_kernels.ts";
import { createKhal } from "@nrt/core/hal";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

/** The seed's ranking (lifecycle-error-model §4.2), written out independently of `nrt_get_status_priority`. */
const PRIORITY: Readonly<Record<number, number>> = {
  0: 0,
  5: 2,
  6: 2,
  1003: 1,
  1004: 3,
  1006: 3,
  1200: 2,
  1201: 3,
  1202: 3,
  1203: 3,
  1204: 2,
  1205: 3,
  1206: 2,
};

const NQ_CAPACITY = 1024;

describe("nrt_get_status_priority across the NeuronCores of one request (seed lifecycle-error-model §4.2–§4.4)", () => {
  test("two NeuronCores faulting differently return the worse status, for every pair of fault kinds", async () => {
    // What the simulator really produces for each kind, as the host's per-NC scan sees it.
    const h = await harness({ visibleCores: [0] });
    const scans = new Map<string, { scan: Omit<NcErrorScan, "nc">; status: number }>();
    try {
      for (const c of FAULT_CASES) {
        const l = await load(h.rt, RELU_NEFF, 0);
        const before = h.sim.records(0, 0).length;
        h.sim.faults.inject({ ...c.spec, nc: 0, atExecution: 1 });
        const status = c.spec.kind === "hang" ? (await execHung(h, l, 30_000)).status : await exec(l);
        expect(status).toBe(c.status);
        const produced = h.sim.records(0, 0).slice(before);
        const aborted: number[] = [];
        for (let e = 0; e < 8; e++) {
          if (await h.sim.barRead32(0, 0, dmaEngineStateAddr(CAYMAN_SPEC, 0, e)) === DmaEngineState.ABORTED) {
            aborted.push(e);
          }
        }
        scans.set(c.name, {
          scan: {
            records: produced.filter(isErrorRecord),
            nqOverflow: produced.length > NQ_CAPACITY,
            abortedDmaEngines: aborted,
            timedOut: c.spec.kind === "hang",
          },
          status,
        });
        await l.model.unload(); // the next install re-initialises the DMA queues (an aborted engine included)
      }
    } finally {
      await h.rt.close();
    }

    const khal = createKhal(cayman);
    let pairs = 0;
    for (const [a, sa] of scans) {
      for (const [b, sb] of scans) {
        if (a === b) continue;
        const log = new MemoryLogger();
        const req = execRequestInitState();
        const step = execRequestProcessErrors({ khal, device: 0, modelName: "m", timeoutMs: 30_000, log }, req, [{
          nc: 0,
          ...sa.scan,
        }, { nc: 1, ...sb.scan }]);
        const expected = PRIORITY[sb.status] > PRIORITY[sa.status] ? sb.status : sa.status; // a tie keeps NC 0's
        expect({ a, b, rets: req.execRets, status: req.status }).toEqual({
          a,
          b,
          rets: [sa.status, sb.status],
          status: expected,
        });
        const soft = (s: number) =>
          s === NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR || s === NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR;
        expect(step).toBe(soft(sa.status) && soft(sb.status) ? ErpStep.ERP_STEP_CONTINUE : ErpStep.ERP_STEP_FATAL);
        pairs++;
      }
    }
    expect(pairs).toBe(FAULT_CASES.length * (FAULT_CASES.length - 1));
  }, 60_000);

  test("exec_fatal_status is bool[2][7]: several causes may be flagged on one NeuronCore, and per NeuronCore", () => {
    const khal = createKhal(cayman);
    const req = execRequestInitState();
    const oob = { code: 0x0a, mask: 0x2, engine: 2, q7: 1, kind: 0, model: 1, value: 4, aux: 0 };
    execRequestProcessErrors({ khal, device: 0, modelName: "m", timeoutMs: 1000, log: new MemoryLogger() }, req, [
      { nc: 4, records: [oob], nqOverflow: true },
      { nc: 5, records: [], timedOut: true },
    ]);
    expect(req.execFatalStatus.map((f) => f.length)).toEqual([7, 7]);
    expect(req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_OOB]).toBe(true);
    expect(req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_SW_NQ_OVERFLOW]).toBe(true);
    expect(req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_TIMEOUT]).toBe(false);
    expect(req.execFatalStatus[1][ExecFatalStatus.EXEC_FATAL_STATUS_TIMEOUT]).toBe(true);
    // 1006 (CRITICAL: inside (1004, 1205) and not 1200/1204) beats 1204 (HIGH) on NC 0, and NC 1's timeout (HIGH).
    expect(req.execRets).toEqual([NrtStatus.NRT_EXEC_OOB, NrtStatus.NRT_TIMEOUT]);
    expect(req.status).toBe(NrtStatus.NRT_EXEC_OOB);
    expect(req.errors.map((e) => [e.source, e.fatal, e.text])).toEqual([["tpb", true, khal.isaErrorText(0x0a)]]);
    expect(() =>
      execRequestProcessErrors({ khal, device: 0, modelName: "m", timeoutMs: 1, log: new MemoryLogger() }, req, [
        { nc: 0, records: [] },
        { nc: 1, records: [] },
        { nc: 2, records: [] },
      ])
    ).toThrow(RangeError);
  });
});

describe("a two-NeuronCore request through the runtime (virtual core size 2)", () => {
  test(
    "each NeuronCore of the request faults differently: the worse status wins, for every pair of non-hang kinds",
    async () => {
      const h = await harness({ visibleCores: [0, 1], virtualCoreSize: 2 });
      const cases = FAULT_CASES.filter((c) => c.spec.kind !== "hang");
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [64] });
      const lnc2 = buildCustomOpNeff({
        name: "relu2.neff",
        target: "cayman",
        lncSize: 2,
        inputs: [f32("x")],
        outputs: [f32("y")],
        libraries: [{ name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
        calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
      });
      let pairs = 0;
      try {
        for (const a of cases) {
          for (const b of cases) {
            if (a === b) continue;
            const l = await load(h.rt, lnc2, 0);
            h.sim.faults.inject({ ...a.spec, nc: 0, atExecution: 1 });
            h.sim.faults.inject({ ...b.spec, nc: 1, atExecution: 1 });
            const status = await exec(l);
            const expected = PRIORITY[b.status] > PRIORITY[a.status] ? b.status : a.status;
            expect({ a: a.name, b: b.name, status }).toEqual({ a: a.name, b: b.name, status: expected });
            await l.model.unload();
            pairs++;
          }
        }
      } finally {
        await h.rt.close();
      }
      expect(pairs).toBe(cases.length * (cases.length - 1));
      expect(h.sim.faults.pending()).toEqual([]);
    },
    60_000,
  );
});

describe("ExecRequestState.fatal", () => {
  test("a soft 1004 outranks a fatal 1006 by the seed's priority, yet the request is flagged fatal", () => {
    const req = execRequestInitState();
    const rec = (code: number, mask: number) => ({
      code,
      mask,
      engine: 2,
      q7: 0xff,
      kind: 0,
      model: 1,
      value: 0,
      aux: 0,
    });
    const step = execRequestProcessErrors(
      { khal: createKhal(cayman), device: 0, modelName: "m", timeoutMs: 1, log: new MemoryLogger() },
      req,
      [
        { nc: 0, records: [rec(0x09, 0x8000)] },
        { nc: 1, records: [rec(0x0a, 0x2)] },
      ],
    );
    expect([req.status, req.fatal, step]).toEqual([
      NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR,
      true,
      ErpStep.ERP_STEP_FATAL,
    ]);
  });
});
