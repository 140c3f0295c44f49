import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import process from "node:process";
import { Dtype, SBUF_BASE } from "./_abi.ts";
import { Q7Cluster } from "./q7_cluster.ts";

function kernel(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(`../../../kernels/wasm/${name}.wasm`, import.meta.url)));
}

const MB = 1 << 20;

/** The process's RSS after a collection of this thread's heap where the engine offers one (Bun): the host's own
 * garbage (the dispatch results) is not what is measured. */
function rss(): number {
  (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun?.gc(true);
  return process.memoryUsage().rss;
}

describe("q7_worker.js", () => {
  test(
    "a Worker whose kernel traps 160,000 times stays near its size: it collects the engine's errors as it goes",
    async () => {
      // One Worker runs the 8 cores, so every trap is its own. Before, JavaScriptCore let a parked Worker keep ~1.3 KB
      // per trap until its next collection, 200,000–300,000 errors away: this loop grew the RSS by ~300 MB.
      const cluster = await Q7Cluster.create({ sbufBytes: 28 << 20, workers: 1 });
      try {
        await cluster.boot({ iram: kernel("stock_pool"), dram: new Uint8Array(4) });
        await cluster.prepare("faults", kernel("faults"));
        const t = { addr: SBUF_BASE, bytes: 256, dtype: Dtype.float32, dims: [64] };
        const op = {
          key: "faults",
          fn: "trap",
          totalCpus: 8 as const,
          args: { inputs: [t], outputs: [{ ...t, addr: SBUF_BASE + 256 }] },
        };
        const run = async (n: number) => {
          for (let i = 0; i < n; i++) {
            const r = await cluster.dispatch(op);
            if (r.cores[7].status !== "trap") throw new Error(`core 7 reported ${r.cores[7].status}, expected trap`);
          }
        };
        await run(2_000); // the Worker's and the host's own first allocations
        const before = rss();
        await run(20_000);
        const grownMb = (rss() - before) / MB;
        expect(grownMb).toBeLessThan(64);
      } finally {
        cluster.terminate();
      }
    },
    60_000,
  );
});
