import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Q7Cluster } from "./q7/q7_cluster.ts";
import { SBUF_BASE } from "./q7/_abi.ts";
import { HostedWorkers, HostSpawner, type SpawnError, type SpawnRequest } from "./worker_spawn.ts";

const kernel = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../kernels/wasm/${name}.wasm`, import.meta.url)));

/** An agent's spawner wired to a host's workers on this thread, as the agent Worker and its host are (ours). */
function wired(): { spawner: HostSpawner; hosted: HostedWorkers; requests: SpawnRequest["spawn"][] } {
  const requests: SpawnRequest["spawn"][] = [];
  // Messages between the two sides go through a task, as they do between threads.
  const hosted = new HostedWorkers((error: SpawnError) => queueMicrotask(() => spawner.failed(error)));
  const spawner = new HostSpawner((request) => {
    requests.push(request.spawn);
    queueMicrotask(() => hosted.handle(request));
  });
  return { spawner, hosted, requests };
}

describe("device Workers started by the host for an agent (worker_spawn.ts, ours)", () => {
  test(
    "a Q7 cluster whose Workers the host started boots, runs relu on 8 cores over its ports, and stops them",
    async () => {
      const { spawner, hosted, requests } = wired();
      const cluster = await Q7Cluster.create({ sbufBytes: 1 << 20, workers: 2, spawn: spawner.spawn });
      try {
        expect(requests).toEqual(["start", "start"]);
        expect(hosted.size).toBe(2);
        await cluster.boot({ iram: kernel("stock_pool"), dram: new Uint8Array([3, 0, 0, 0]) });
        await cluster.prepare("relu", kernel("relu"));
        const n = 64, bytes = n * 4;
        const x = new Float32Array(cluster.memory.buffer, SBUF_BASE, n);
        const y = new Float32Array(cluster.memory.buffer, SBUF_BASE + bytes, n);
        for (let i = 0; i < n; i++) x[i] = i - 32;
        y.fill(Number.NaN);
        const t = (addr: number) => ({ addr, bytes, dtype: 0, dims: [n] });
        const result = await cluster.dispatch({
          key: "relu",
          fn: "relu",
          totalCpus: 8,
          args: { inputs: [t(SBUF_BASE)], outputs: [t(SBUF_BASE + bytes)] },
        });
        expect(result.cores.map((c) => c.status)).toEqual(Array(8).fill("ok"));
        expect(Array.from(y)).toEqual(Array.from(x, (v) => Math.max(0, v)));
      } finally {
        cluster.terminate();
      }
      // terminate() lets the Workers leave by themselves and stops them once they all left (or after its 1 s grace).
      for (const until = Date.now() + 5_000; requests.length < 4 && Date.now() < until;) {
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(requests).toEqual(["start", "start", "terminate", "terminate"]);
      expect(hosted.size).toBe(0);
    },
    30_000,
  );

  test("a host-started Worker whose script throws reaches the agent's onerror with the message", async () => {
    const { spawner, hosted } = wired();
    const w = spawner.spawn("q7-cores");
    try {
      const error = await new Promise<string>((resolve) => {
        w.onerror = (e) => resolve(e.message);
        // An init without memory: the Worker's script throws reading it.
        w.postMessage({ type: "init", worker: 0, cores: [0], layout: {} });
      });
      expect(error).toMatch(/\S/);
    } finally {
      w.terminate();
      hosted.close();
    }
    expect(hosted.size).toBe(0);
  }, 30_000);

  test("HostedWorkers.close() stops every Worker an agent left running", () => {
    const { spawner, hosted } = wired();
    spawner.spawn("q7-watchdog");
    spawner.spawn("q7-cores");
    return new Promise<void>((resolve) =>
      setTimeout(() => {
        expect(hosted.size).toBe(2);
        hosted.close();
        expect(hosted.size).toBe(0);
        resolve();
      }, 0)
    );
  });
});
