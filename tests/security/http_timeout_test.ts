/**
 * The server's timeouts agree with the runtime's (docs/security.md, finding 6): a request whose execution runs
 * longer than Bun's default 10-second idle timeout still gets its answer — the 504 of `NEURON_RT_EXEC_TIMEOUT`
 * (here 12 s) — and an unload waiting on that request gets its reply too. Real time: the HTTP server's timers are
 * what is tested, so the simulator's virtual clock cannot stand in.
 */
import { describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { startServer } from "@nrt/cli";
import { oneOpNeff } from "../_kernels.ts";

describe("nrt serve timeouts", () => {
  test(
    "a 12-second execution is answered 504 after NEURON_RT_EXEC_TIMEOUT, and a waiting unload is answered",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-timeout-"));
      const spin = oneOpNeff("faults", "spin", [{ name: "x", dtype: "float32", shape: [4] }], [{
        name: "y",
        dtype: "float32",
        shape: [4],
      }]);
      await writeFile(join(dir, "spin.neff"), spin);
      await writeFile(join(dir, "spin.json"), JSON.stringify({ warmup: false })); // spin never ends on its own: no warm-up
      const saved = process.env.NEURON_RT_EXEC_TIMEOUT;
      process.env.NEURON_RT_EXEC_TIMEOUT = "12";
      const server = await startServer({
        models: dir,
        port: 0,
        admin: true,
        adminTokenFile: join(dir, ".token"),
        modelControl: "explicit",
        log: () => {},
      });
      if (saved === undefined) delete process.env.NEURON_RT_EXEC_TIMEOUT;
      else process.env.NEURON_RT_EXEC_TIMEOUT = saved;
      try {
        const t0 = performance.now();
        const infer = fetch(`${server.url}/v2/models/spin/infer`, {
          method: "POST",
          body: JSON.stringify({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
        });
        await new Promise((r) => setTimeout(r, 200)); // the execution is running
        const unload = fetch(`${server.url}/v2/repository/models/spin/unload`, {
          method: "POST",
          body: "{}",
          headers: { "content-type": "application/json", authorization: `Bearer ${server.adminToken}` },
        });
        const res = await infer;
        const seconds = (performance.now() - t0) / 1000;
        expect(res.status).toBe(504);
        expect((await res.json()).error).toMatch(/NRT_TIMEOUT/);
        expect(seconds).toBeGreaterThan(10); // past Bun's default idle timeout: the connection was not dropped
        const unloaded = await unload;
        expect(unloaded.status).toBe(200);
        expect(await unloaded.json()).toEqual({ name: "spin", state: "UNAVAILABLE" });
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
    40_000,
  );
});
