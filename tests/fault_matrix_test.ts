import { afterAll, describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { LogLevel, NrtStatus } from "@nrt/core";
import { collectCustomOpQueues } from "@nrt/core/hal";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { SUNDA_SPEC } from "@nrt/arch-sunda";
import {
  bystanderNeff,
  exec,
  execHung,
  FAULT_CASES,
  harness,
  load,
  type Loaded,
  opened,
  RELU_NEFF,
  reluNeff,
} from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const ALL_NCS = [...Array(CAYMAN_SPEC.ncPerDevice).keys()];
const SERVE = 10;

describe("fault matrix: Cayman in full, Sunda and Mariana sampled (seed lifecycle-error-model §4.3–§4.5, §5.4, §5.5)", () => {
  test(
    "every fault kind × every NeuronCore: exact status, log line, fail-stop of the victim only, the other cores keep serving",
    async () => {
      const h = await harness({ visibleCores: ALL_NCS });
      const { rt, sim, trace, log } = h;
      const runStall = (e: { op: string; target: number }) =>
        e.op === "barWrite32" && e.target % CAYMAN_SPEC.csr.ncBlockStride === CAYMAN_SPEC.csr.runStall;
      try {
        // One healthy bystander model per NeuronCore, for the whole matrix.
        const healthy: Loaded[] = [];
        for (const nc of ALL_NCS) healthy.push(await load(rt, bystanderNeff(), nc));
        const served = new Array(ALL_NCS.length).fill(0);
        for (const c of FAULT_CASES) {
          for (const nc of ALL_NCS) {
            const victim = await load(rt, RELU_NEFF, nc);
            sim.faults.inject({ ...c.spec, nc, atExecution: 1 });
            log.clear();
            trace.clear();
            const status = c.spec.kind === "hang" ? (await execHung(h, victim, 30_000)).status : await exec(victim);
            expect({ fault: c.name, nc, status }).toEqual({ fault: c.name, nc, status: c.status });
            // A run the device is still stuck in (collectives-hang: the record came, the run never ends) is the
            // device's own to contain: its watchdog drops it once the budget has passed on the device's clock. The
            // host writes nothing on the fault path.
            await sim.elapse(0, 30_000);
            expect(log.messages().some((m) => c.line.test(m))).toBe(true);
            // Exactly one doorbell, never a run-stall write on the fault path (no retry, no reset).
            expect(trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(1);
            expect(trace.entries.filter(runStall)).toEqual([]);
            // Every fatal verdict is logged and reported with the per-engine instruction-pointer dump, POOL included.
            if (
              c.status !== NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR &&
              c.status !== NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR
            ) {
              expect(
                log.messages(LogLevel.ERROR).some((m) =>
                  /engine instruction pointers: PE=0x\w+ ACT=0x\w+ POOL=0x\w+ DVE=0x\w+ SP=0x\w+/.test(m)
                ),
              ).toBe(true);
            }
            // The host writes nothing to the device on the fault path: no stream-table write (no halt), no run-stall.
            expect(
              trace.entries.filter((e) =>
                e.op === "barWrite" && e.target % CAYMAN_SPEC.csr.ncBlockStride >= CAYMAN_SPEC.csr.streamTable &&
                e.target % CAYMAN_SPEC.csr.ncBlockStride <
                  CAYMAN_SPEC.csr.streamTable + 16 * CAYMAN_SPEC.csr.streamSlots
              ),
            ).toEqual([]);
            if (c.poisons) {
              expect(rt.poisonedStatus(victim.model)).toBe(c.status);
              trace.clear();
              expect(await exec(victim)).toBe(c.status);
              expect(trace.entries.filter((e) => e.op === "semaphoreIncrement")).toEqual([]);
            } else {
              // Band A/B: the model is re-runnable and the next execute really runs on the device.
              expect(rt.poisonedStatus(victim.model)).toBeUndefined();
              trace.clear();
              expect(await exec(victim)).toBe(NrtStatus.NRT_SUCCESS);
              expect(trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(1);
            }
            // The other model of the faulted core and every other core keep serving.
            expect(await exec(healthy[nc])).toBe(NrtStatus.NRT_SUCCESS);
            const others = ALL_NCS.filter((k) => k !== nc);
            const results = await Promise.all(others.map((k) => exec(healthy[k])));
            expect(results.every((s) => s === NrtStatus.NRT_SUCCESS)).toBe(true);
            for (const k of others) served[k]++;
            // Unload then reload: a healthy model on the same core.
            await victim.model.unload();
            const again = await load(rt, RELU_NEFF, nc);
            expect(await exec(again)).toBe(NrtStatus.NRT_SUCCESS);
            await again.model.unload();
          }
        }
        expect(served.every((n) => n >= SERVE)).toBe(true);
        expect(sim.faults.pending()).toEqual([]);
      } finally {
        await rt.close();
      }
      expect((await sim.memUsage(0)).allocations).toBe(0);
    },
    120_000,
  );

  test("a fault aimed at one Q7 core surfaces at the DRAIN join with that core in the record", async () => {
    const h = await harness({ visibleCores: [0] });
    try {
      const l = await load(h.rt, RELU_NEFF, 0);
      expect(await exec(l)).toBe(NrtStatus.NRT_SUCCESS);
      h.sim.faults.inject({ kind: "oob", nc: 0, q7: 5, atExecution: 1 });
      expect(await exec(l)).toBe(NrtStatus.NRT_EXEC_OOB);
      const last = h.sim.records(0, 0).at(-1)!;
      expect({ q7: last.q7, mask: last.mask, code: last.code }).toEqual({ q7: 5, mask: 0x2, code: 0x0a });
      expect(h.log.messages().some((m) => m.includes("on engine POOL Q7 core 5"))).toBe(true);
    } finally {
      await h.rt.close();
    }
  }, 30_000);

  test(
    "a device-wide fault (no nc) fires once on every NeuronCore; atExecution counts runs; 'now' hits the next run",
    async () => {
      const h = await harness({ visibleCores: [0, 1] });
      try {
        const a = await load(h.rt, RELU_NEFF, 0), b = await load(h.rt, RELU_NEFF, 1);
        h.sim.faults.inject({ kind: "hbm-ue", atExecution: 2 });
        expect(await exec(a)).toBe(NrtStatus.NRT_SUCCESS);
        expect(await exec(b)).toBe(NrtStatus.NRT_SUCCESS);
        expect(await exec(a)).toBe(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE);
        expect(await exec(b)).toBe(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE);
        expect(h.sim.faults.fired().map((f) => [f.kind, f.nc])).toEqual([["hbm-ue", 0], ["hbm-ue", 1]]);
        const c = await load(h.rt, RELU_NEFF, 0);
        h.sim.faults.inject({ kind: "recoverable", nc: 0 });
        expect(await exec(c)).toBe(NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR);
        expect(() => h.sim.faults.inject({ kind: "hang", nc: 9 })).toThrow(RangeError);
        expect(() => h.sim.faults.inject({ kind: "hang", atExecution: 0 })).toThrow(RangeError);
        expect(() => h.sim.faults.inject({ kind: "dma-abort", engine: 16 })).toThrow(RangeError);
        // The device-wide fault is still armed on the 6 NeuronCores this runtime does not drive.
        expect(h.sim.faults.pending().map((f) => f.ncs)).toEqual([[2, 3, 4, 5, 6, 7]]);
        const id = h.sim.faults.inject({ kind: "hang", nc: 1, atExecution: 5 }).id;
        expect(h.sim.faults.pending().at(-1)).toMatchObject({ id, ncs: [1] });
        expect(h.sim.faults.clear({ id })).toBe(1);
        expect(h.sim.faults.clear()).toBe(6);
      } finally {
        await h.rt.close();
      }
    },
    30_000,
  );

  test("the three collectives 'Suspected hang' strings", async () => {
    const h = await harness({ visibleCores: [0] });
    try {
      const cases = [
        [
          { variant: 0 as const },
          /missing collectives status on model relu\.neff\. Suspected hang in waiting for barrier$/,
        ],
        [{ variant: 1 as const, op: 3, total: 7 }, /Suspected hang in collectives operation 3 out of 7$/],
        [
          { variant: 2 as const, op: 3, total: 7 },
          /Suspected hang between the end of collectives operation 3 and the start of collectives operation 4 \(out of 7 total operations\)$/,
        ],
      ] as const;
      for (const [collectives, line] of cases) {
        const l = await load(h.rt, RELU_NEFF, 0);
        h.sim.faults.inject({ kind: "collectives-hang", nc: 0, collectives, atExecution: 1 });
        h.log.clear();
        expect(await exec(l)).toBe(NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES);
        expect(h.log.messages().filter((m) => line.test(m)).length).toBe(1);
        await l.model.unload();
      }
    } finally {
      await h.rt.close();
    }
  }, 30_000);

  for (const [arch, spec] of [["sunda", SUNDA_SPEC], ["mariana", MARIANA_SPEC]] as const) {
    test(
      `a sample on ${arch}: every fault kind on the first and the last NeuronCore, the other cores keep serving`,
      async () => {
        const ncs = [...Array(spec.ncPerDevice).keys()];
        const h = await harness({ arch, visibleCores: ncs });
        const neff = reluNeff(arch);
        try {
          const healthy: Loaded[] = [];
          for (const nc of ncs) healthy.push(await load(h.rt, bystanderNeff(arch), nc));
          for (const c of FAULT_CASES) {
            for (const nc of [0, ncs.length - 1]) {
              const victim = await load(h.rt, neff, nc);
              h.sim.faults.inject({
                ...c.spec,
                ...(c.spec.kind === "dma-abort" ? { engine: collectCustomOpQueues(spec)[0].engine } : {}),
                nc,
                atExecution: 1,
              });
              h.log.clear();
              const status = c.spec.kind === "hang" ? (await execHung(h, victim, 30_000)).status : await exec(victim);
              expect({ arch, fault: c.name, nc, status }).toEqual({ arch, fault: c.name, nc, status: c.status });
              await h.sim.elapse(0, 30_000); // the device's watchdog drops a run still stuck (collectives-hang)
              expect(h.log.messages().some((m) => c.line.test(m.replace(/DMA engine \d+/, "DMA engine 3")))).toBe(true);
              expect(h.rt.poisonedStatus(victim.model)).toBe(c.poisons ? c.status : undefined);
              expect((await Promise.all(healthy.map((l) => exec(l)))).every((s) => s === NrtStatus.NRT_SUCCESS)).toBe(
                true,
              );
              await victim.model.unload();
            }
          }
        } finally {
          await h.rt.close();
        }
        expect((await h.sim.memUsage(0)).allocations).toBe(0);
      },
      60_000,
    );
  }
});
