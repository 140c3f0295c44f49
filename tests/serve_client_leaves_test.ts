// A REST client that disconnects while its request waits for an instance, against `nrt serve` as its own process
// (real sockets, so the runtime's own `request.signal` is what tells the server): the request leaves the queue at once
// and never executes. Under Deno, the server runs with the workspace's `"unstable": ["no-legacy-abort"]` (deno.json):
// `request.signal` then aborts only when the client goes, not after every successful response, and Deno prints no
// warning about the legacy behaviour (it did, once per process, the first time a queued request's signal was read).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { oneOpNeff } from "./_kernels.ts";
import { spawnServe } from "./_serve_process.ts";

const f32 = (name: string) => ({ name, dtype: "float32", shape: [4] });
const BODY = JSON.stringify({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] });

describe("nrt serve: a client that leaves while queued", () => {
  test(
    "its request leaves the queue when the connection closes, never executes, and the server prints no warning",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-leave-"));
      // faults.wasm `spin` never ends: the one instance stays busy until the 2 s execution timeout drops the run.
      writeFileSync(join(dir, "spin.neff"), oneOpNeff("faults", "spin", [f32("x")], [f32("y")]));
      writeFileSync(join(dir, "spin.json"), JSON.stringify({ vnc: 0, instances: 1, warmup: false }));
      const server = spawnServe(["--models", dir, "--port", "0", "--grpc-port", "0"], "runtime", {
        NEURON_RT_EXEC_TIMEOUT: "2",
      });
      try {
        const url = /listening on (\S+)/.exec(await server.line(/listening on /, 60_000))![1];
        const metric = async (name: string): Promise<number> => {
          const text = await (await fetch(`${url}/metrics`)).text();
          const m = new RegExp(`^${name}\\{model="spin"[^}]*\\} (\\d+)`, "m").exec(text);
          return m === null ? NaN : Number(m[1]);
        };
        const until = async (what: string, ok: () => Promise<boolean>) => {
          for (const end = Date.now() + 20_000; !(await ok());) {
            if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
            await new Promise((r) => setTimeout(r, 20));
          }
        };
        const infer = (signal?: AbortSignal) =>
          fetch(`${url}/v2/models/spin/infer`, { method: "POST", body: BODY, signal });
        let runningDone = false;
        const running = infer().then((r) => (runningDone = true, r));
        await until(
          "the first request to run",
          async () => (await metric("nrt_inference_pending_request_count")) === 1,
        );
        const leaving = new AbortController();
        const left = infer(leaving.signal).catch((e: unknown) => e);
        await until(
          "the second request to queue",
          async () => (await metric("nrt_inference_pending_request_count")) === 2,
        );
        leaving.abort();
        expect(((await left) as Error).name).toBe("AbortError");
        // The server sees the connection close and drops the queued request while the first still spins.
        await until("the queue to drop it", async () => (await metric("nrt_inference_pending_request_count")) === 1);
        expect(runningDone).toBe(false);
        const first = await running;
        expect(first.status).toBe(504); // NRT_TIMEOUT
        await first.body?.cancel();
        await until(
          "the first request to end",
          async () => (await metric("nrt_inference_pending_request_count")) === 0,
        );
        expect(await metric("nrt_model_instance_execution_count")).toBe(1); // the dropped request never ran
        server.kill("SIGTERM");
        expect(await server.exited(30_000)).toBe(0);
        expect(server.stderr.join("")).not.toContain("legacy");
      } finally {
        server.kill();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
