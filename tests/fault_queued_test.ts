import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, NrtError, Runtime, TensorSet } from "@nrt/core";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { container } from "tsyringe";
import { oneOpNeff } from "./_kernels.ts";
import { nrtPlugins, PortalToken, ArchPackToken } from "@nrt/cli";
import { cayman } from "@nrt/arch-cayman";

const sim = new DeviceSimPortal();
afterAll(() => sim.close());

describe("fail-stop with executions queued behind a fault (seed lifecycle-error-model §5.5)", () => {
  test("an execution queued behind the faulting one returns the poison status without ringing the halted stream", async () => {
    const trace = new TracingPortal(sim);
    const c = container.createChildContainer();
    c.register(ArchPackToken, { useValue: cayman });
    c.register(PortalToken, { useValue: trace });
    const rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
    try {
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
      const bad = await rt.load(oneOpNeff("faults", "trap", [f32("x")], [f32("y")]));
      const good = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
      const ins = new TensorSet(), outs = new TensorSet();
      ins.add("x", await rt.allocateTensor({ location: "host", size: 32, name: "x" }));
      outs.add("y", await rt.allocateTensor({ location: "host", size: 32, name: "y" }));
      trace.clear();
      const results = await Promise.allSettled([bad.execute(ins, outs), bad.execute(ins, outs), good.execute(ins, outs)]);
      const [first, second, third] = results;
      expect(first.status).toBe("rejected");
      expect(second.status).toBe("rejected");
      const s1 = ((first as PromiseRejectedResult).reason as NrtError).status;
      expect(((second as PromiseRejectedResult).reason as NrtError).status).toBe(s1);
      expect(third.status).toBe("fulfilled"); // the other model on the core keeps serving
      // Two doorbells: the faulting run and the healthy model's; none for the queued poisoned request.
      expect(trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(2);
    } finally {
      await rt.close();
    }
  }, 60_000);
});
