/**
 * One completion wake per execution: the device publishes the records of a run's last stretch (the NOTIFY,
 * EVENT_SEMAPHORE and EXEC_DONE after the DRAIN join) with one store of the NQ head, so the host's completion wait
 * (`Portal.notificationWait`, its `comp_efd`) wakes once and its one progress step finds EXEC_DONE
 * (`packages/device-sim/sequencer.ts`, ours). A fault's records still reach the host: the fault matrix tests them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import type { HostSpan } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { oneOpNeff } from "./_kernels.ts";

const container = createNrtContainer();
afterAll(async () => {
  await container.resolve(PortalToken).close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

describe("completion wakes", () => {
  test("each execution waits for its completion once and reads the notification queue once", async () => {
    const spans: HostSpan[] = [];
    const rt = await Runtime.init({
      onSpan: (s) => spans.push(s),
      ...nrtPlugins(container),
      logger: new MemoryLogger(),
    });
    try {
      const n = 1024;
      const model = await rt.load(oneOpNeff("vector_add", "vector_add", [f32("a", n), f32("b", n)], [f32("out", n)]));
      const ins = new TensorSet(), outs = new TensorSet();
      for (const name of ["a", "b"]) {
        const t = await rt.allocateTensor({ size: n * 4, name });
        await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i).buffer));
        ins.add(name, t);
      }
      const out = await rt.allocateTensor({ size: n * 4, name: "out" });
      outs.add("out", out);
      const runs = 30;
      for (let k = 0; k < runs; k++) await model.execute(ins, outs);
      const y = new Float32Array((await out.read()).slice().buffer);
      expect(y[n - 1]).toBe(2 * (n - 1));
      const executions = spans.filter((s) => s.name === "nrt_execute").map((s) => s.seq);
      expect(executions.length).toBe(runs);
      const count = (name: string) =>
        executions.map((seq) => spans.filter((s) => s.name === name && s.seq === seq).length);
      expect(count("completion_wait")).toEqual(new Array(runs).fill(1));
      expect(count("nq_read")).toEqual(new Array(runs).fill(1));
    } finally {
      await rt.close();
    }
  }, 30_000);
});
