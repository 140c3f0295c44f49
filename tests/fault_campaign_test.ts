import { afterAll, describe, expect, test } from "bun:test";
import { isNrtStatus, NrtError, NrtStatus } from "@nrt/core";
import { isFailStop } from "../packages/core/status.ts";
import { exec, execHung, FAULT_CASES, harness, load, type Loaded, opened, RELU_NEFF } from "./_fault_harness.ts";
import { prng } from "../packages/core/_testing.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

describe("seeded random campaign of load / execute / inject / unload", () => {
  for (const seed of [0x5eed, 0xfa017]) {
    test(
      `seed 0x${
        seed.toString(16)
      }: every promise settles with a valid status, no success on a poisoned model, nothing left allocated`,
      async () => {
        const rnd = prng(seed);
        const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
        const h = await harness({ visibleCores: [0, 1] });
        const models: Array<Loaded & { vnc: number }> = [];
        // Poison belongs to the model, not the handle: loads of RELU on one core share one interned model (nrt_load_util
        // step 7), so the map is keyed by H_MODEL.
        const poisonedBy = new Map<number, number>();
        const poisoned = {
          get: (m: Loaded) => poisonedBy.get(m.model.handle),
          has: (m: Loaded) => poisonedBy.has(m.model.handle),
          set: (m: Loaded, s: number) => void poisonedBy.set(m.model.handle, s),
          // A handle's unload ends the poison only when no other live handle shares the model.
          delete: (m: Loaded) =>
            void (models.some((o) => o !== m && o.model.handle === m.model.handle) ||
              poisonedBy.delete(m.model.handle)),
        };
        const all: Array<Promise<unknown>> = [];
        let settled = 0, runs = 0, faults = 0, successes = 0;
        const track = <T>(p: Promise<T>): Promise<T> => {
          all.push(p);
          return p.finally(() => settled++);
        };
        const check = (m: Loaded, status: number): void => {
          expect(isNrtStatus(status)).toBe(true);
          const was = poisoned.get(m);
          if (was !== undefined) expect(status).toBe(was); // fail-stop (Band C): the same status, never a success
          else if (isFailStop(status)) poisoned.set(m, status); // Band A/B leave the model re-runnable
          if (status === NrtStatus.NRT_SUCCESS) successes++;
          runs++;
        };
        try {
          while (runs < 500) {
            const r = rnd();
            if (models.length === 0 || (r < 0.12 && models.length < 4)) {
              const vnc = pick([0, 1]);
              models.push({ ...(await track(load(h.rt, RELU_NEFF, vnc))), vnc });
            } else if (r < 0.2) {
              const m = models.splice(Math.floor(rnd() * models.length), 1)[0];
              // Sometimes race an execution with the unload: it runs first or meets a removed handle.
              if (rnd() < 0.5) {
                const [s] = await Promise.all([track(exec(m)), track(m.model.unload())]);
                check(m, s);
              } else {
                await track(m.model.unload());
              }
              poisoned.delete(m);
              const e = await m.model.execute(m.ins, m.outs).then(() => undefined, (x: unknown) => x);
              expect(e).toBeInstanceOf(NrtError);
              expect((e as NrtError).status).toBe(NrtStatus.NRT_INVALID_HANDLE);
            } else if (r < 0.45) {
              // Inject one fault on the target's core and run the target alone, so the fault is its own.
              const m = pick(models);
              const c = pick(FAULT_CASES);
              h.sim.faults.inject({ ...c.spec, nc: m.vnc, atExecution: 1 });
              faults++;
              const s = c.spec.kind === "hang" && !poisoned.has(m)
                ? (await track(execHung(h, m, 30_000))).status
                : await track(exec(m));
              if (!poisoned.has(m)) expect(s).toBe(c.status);
              else h.sim.faults.clear(); // a poisoned model never rang the doorbell: the fault is still armed
              await h.sim.elapse(0, 30_000); // the device's watchdog drops a run still stuck (collectives-hang)
              check(m, s);
              if (c.spec.kind === "dma-abort" && poisoned.has(m)) {
                // An aborted DMA engine stays aborted (the host never resets it): the operator's remedy is unload and
                // reload, whose stream install re-initialises the core's DMA queues. Until then any fault on the core
                // also reads as 1203.
                models.splice(models.indexOf(m), 1);
                await track(m.model.unload());
                poisoned.delete(m);
                models.push({ ...(await track(load(h.rt, RELU_NEFF, m.vnc))), vnc: m.vnc });
              }
            } else {
              // A burst of concurrent executions across both cores (FIFO per core).
              const burst = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => pick(models));
              const statuses = await Promise.all(burst.map((m) => track(exec(m))));
              burst.forEach((m, i) => check(m, statuses[i]));
            }
          }
        } finally {
          await h.rt.close();
        }
        await Promise.allSettled(all);
        expect(settled).toBe(all.length);
        expect(runs).toBeGreaterThanOrEqual(500);
        expect(faults).toBeGreaterThan(50);
        expect(successes).toBeGreaterThan(100);
        expect(h.sim.faults.pending()).toEqual([]);
        expect(await h.sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
      },
      60_000,
    );
  }
});
