/**
 * `bench/idle.ts`: the resident memory of a process that has started a runtime on a simulated Trn2 device (Cayman,
 * 8 NeuronCores) and loaded nothing, against the same process before it started one — the device agent's Worker,
 * its registers, rings and trace buffers; the goal is ≤ 100 MiB in all. RSS after a garbage collection where the
 * runtime offers one.
 *
 * Run: `bun bench/idle.ts` or `deno run -A bench/idle.ts` (`--json` for one JSON line).
 *
 * @module
 */
import "reflect-metadata";
import process from "node:process";
import { MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { emit } from "./_timing.ts";

const MiB = 1024 * 1024;
const gc = (): void => (globalThis as { Bun?: { gc(full: boolean): void } }).Bun?.gc(true);
const settle = () => new Promise((r) => setTimeout(r, 500));
const rss = async (): Promise<number> => {
  gc();
  await settle();
  return process.memoryUsage().rss / MiB;
};

const before = await rss();
const container = createNrtContainer({ arch: "trn2" });
const rt = await Runtime.init({ ...nrtPlugins(container), logger: new MemoryLogger() });
const idle = await rss();
await rt.close();
await container.resolve(PortalToken).close();
const after = await rss();
emit("idle", "Resident memory of an idle simulated Trn2 device (nothing loaded)", [
  {
    process_before_MiB: +before.toFixed(1),
    with_idle_device_MiB: +idle.toFixed(1),
    device_MiB: +(idle - before).toFixed(1),
    after_close_MiB: +after.toFixed(1),
    goal_MiB: 100,
  },
]);
process.exit(0);
