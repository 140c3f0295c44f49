import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, NrtError, Runtime, TensorSet } from "@nrt/core";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { container } from "tsyringe";
import { namedOneOpNeff, oneOpNeff } from "./_kernels.ts";
import { ArchPackToken, nrtPlugins, PortalToken } from "@nrt/cli";
import { cayman } from "@nrt/arch-cayman";

const sims: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const s of sims.splice(0)) await s.close();
});

describe("fail-stop with executions queued behind a fault (seed lifecycle-error-model §4.1, §5.5)", () => {
  async function setup() {
    const sim = new DeviceSimPortal();
    sims.push(sim);
    const trace = new TracingPortal(sim);
    const c = container.createChildContainer();
    c.register(ArchPackToken, { useValue: cayman });
    c.register(PortalToken, { useValue: trace });
    const rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
    const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
    const ins = new TensorSet(), outs = new TensorSet();
    ins.add("x", await rt.allocateTensor({ location: "host", size: 32, name: "x" }));
    outs.add("y", await rt.allocateTensor({ location: "host", size: 32, name: "y" }));
    return { rt, sim, trace, f32, ins, outs };
  }

  test(
    "Band C: an execution queued behind the faulting one returns the poison status without ringing the doorbell",
    async () => {
      const { rt, sim, trace, f32, ins, outs } = await setup();
      try {
        const bad = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
        // Another NEFF: the same one twice on a core would be one interned model (nrt_load_util step 7).
        const good = await rt.load(namedOneOpNeff("good.neff", "relu", "relu", [f32("x")], [f32("y")]), { vnc: 0 });
        sim.faults.inject({ kind: "nc-ue", nc: 0, atExecution: 1 });
        trace.clear();
        const results = await Promise.allSettled([
          bad.execute(ins, outs),
          bad.execute(ins, outs),
          good.execute(ins, outs),
        ]);
        const [first, second, third] = results;
        expect(((first as PromiseRejectedResult).reason as NrtError).status).toBe(1202);
        expect(((second as PromiseRejectedResult).reason as NrtError).status).toBe(1202);
        expect(third.status).toBe("fulfilled"); // the other model on the core keeps serving
        // Two doorbells: the faulting run and the healthy model's; none for the queued poisoned request.
        expect(trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(2);
      } finally {
        await rt.close();
      }
    },
    60_000,
  );

  test(
    "Band A (a trap, status 6): the queued execution is not fail-stopped, it really runs and traps too",
    async () => {
      const { rt, trace, f32, ins, outs } = await setup();
      try {
        const bad = await rt.load(oneOpNeff("faults", "trap", [f32("x")], [f32("y")]));
        const good = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
        trace.clear();
        const results = await Promise.allSettled([
          bad.execute(ins, outs),
          bad.execute(ins, outs),
          good.execute(ins, outs),
        ]);
        const [first, second, third] = results;
        expect(((first as PromiseRejectedResult).reason as NrtError).status).toBe(6);
        expect(((second as PromiseRejectedResult).reason as NrtError).status).toBe(6);
        expect(third.status).toBe("fulfilled");
        expect(rt.poisonedStatus(bad)).toBeUndefined();
        // Three doorbells: both executions of the trapping model really ran on the device.
        expect(trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(3);
      } finally {
        await rt.close();
      }
    },
    60_000,
  );
});
