/**
 * Testing a serving stack's error handling with the simulator's fault injector: an uncorrectable HBM error on the
 * next execution returns `NRT_EXEC_HW_ERR_HBM_UE` (1201), the model stays RUNNING but poisoned (fail-stop), and
 * unload + reload recovers it. Run with `bun examples/fault_injection.ts` or `deno run -A examples/fault_injection.ts`.
 *
 * @module
 */
import { MemoryLogger, NrtError, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import type { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeffBytes } from "./_neff.ts";

/** Returns the status of each of the four executions: healthy, faulted, poisoned, and after reload. */
export async function main(log: (s: string) => void = console.log): Promise<number[]> {
  const container = createNrtContainer();
  const sim = container.resolve(PortalToken) as unknown as DeviceSimPortal;
  const logger = new MemoryLogger();
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1], logger });
  const statuses: number[] = [];
  try {
    const neff = await oneOpNeffBytes("relu", "relu", 64);
    let model = await rt.load(neff);
    const ins = new TensorSet(), outs = new TensorSet();
    ins.add("x", await rt.allocateTensor({ location: "host", size: 256, name: "x" }));
    outs.add("y", await rt.allocateTensor({ location: "host", size: 256, name: "y" }));
    const run = async (what: string) => {
      const status = await model.execute(ins, outs).then(() => 0, (e) => (e instanceof NrtError ? e.status : -1));
      statuses.push(status);
      log(`${what.padEnd(34)} → ${status}`);
    };
    await run("healthy");
    sim.faults.inject({ kind: "hbm-ue", nc: 0, atExecution: 1 }); // the next run on NeuronCore 0
    await run("HBM uncorrectable error injected");
    await run("poisoned: returns without the device");
    log(`log: ${logger.entries.find((e) => e.message.includes("Uncorrectable HBM"))?.message ?? "(none)"}`);
    await model.unload();
    model = await rt.load(neff);
    await run("after unload + reload");
  } finally {
    await rt.close();
    await sim.close();
  }
  return statuses;
}

if (import.meta.main) await main();
