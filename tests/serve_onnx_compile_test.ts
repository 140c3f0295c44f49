/**
 * `nrt serve` compiles ONNX models off its thread (packages/cli/onnx_compiler.ts): while an upload's compile is held
 * inside its Worker, the other models answer; `--compile-timeout` stops a compile past it (504); a shutdown stops
 * the compile still running and leaves no Worker.
 */
import { beforeEach, describe, expect, test } from "bun:test";
import { parseServeArgs, startServer, UsageError } from "@nrt/cli";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { compileTestHooks, liveCompileWorkers } from "../packages/cli/onnx_compiler.ts";
import { SERVE_COMMAND } from "../packages/cli/serve.ts";
import { mlpModel } from "../packages/onnx/_test_models.ts";
import { oneOpNeff } from "./_kernels.ts";

const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const X8 = [1, -1, 2, -2, 3, -3, 4, -4];

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * A server over a folder holding relu.neff, with uploads allowed, a fresh ONNX cache (a cached NEFF would start no
 * Worker) and every compile Worker held (compile_worker.ts) until `release`.
 */
async function heldServer(options: { compileTimeoutSeconds?: number; drainTimeoutSeconds?: number } = {}) {
  const dir = await mkdtemp(join(tmpdir(), "nrt-serve-onnx-compile-"));
  const cache = await mkdtemp(join(tmpdir(), "nrt-serve-onnx-compile-xdg-"));
  const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
  await writeFile(join(dir, "relu.neff"), oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  const server = await startServer({
    models: dir,
    port: 0,
    admin: true,
    adminTokenFile: join(dir, ".token"),
    modelControl: "explicit",
    log: () => {},
    ...options,
  }).finally(() => {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
  });
  const hold = new Int32Array(new SharedArrayBuffer(8));
  compileTestHooks.hold = hold;
  const release = () => {
    Atomics.store(hold, 0, 1);
    Atomics.notify(hold, 0);
  };
  return {
    server,
    release,
    /** Waits until a held Worker is in the compiler. */
    entered: async () => {
      while (Atomics.load(hold, 1) === 0) await new Promise((r) => setTimeout(r, 1));
    },
    upload: () =>
      fetch(`${server.url}/v2/repository/models/mlp2/load`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.adminToken}` },
        body: JSON.stringify({
          parameters: {
            "file:1/model.onnx": base64(mlpModel()),
            config: JSON.stringify({ onnx: { inputShapes: { x: [2, 16] } } }),
          },
        }),
      }),
    relu: async () => {
      const res = await fetch(`${server.url}/v2/models/relu/infer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: X8 }] }),
      });
      return [res.status, (await res.json()).outputs?.[0].data];
    },
    cleanup: async () => {
      delete compileTestHooks.hold;
      release();
      await server.close();
      await rm(dir, { recursive: true, force: true });
      await rm(cache, { recursive: true, force: true });
    },
  };
}

describe("nrt serve compiles ONNX models off its thread", () => {
  // The Workers of other suites' compiles (their compile ended, their exit is under way) are gone first.
  beforeEach(async () => {
    while (liveCompileWorkers() > 0) await new Promise((r) => setTimeout(r, 1));
  });

  test("--compile-timeout S is parsed (1 to 86400) and listed by --help", () => {
    expect(parseServeArgs(["--compile-timeout", "1800"])).toEqual({ compileTimeoutSeconds: 1800 });
    expect(() => parseServeArgs(["--compile-timeout", "0"])).toThrow(UsageError);
    expect(() => parseServeArgs(["--compile-timeout", "86401"])).toThrow("--compile-timeout 86401");
    expect(SERVE_COMMAND.options["compile-timeout"].description).toContain("default 600");
    expect(SERVE_COMMAND.usage).toContain("[--compile-timeout S]");
  });

  test.if(hasServe)("while an upload compiles, the other models answer; then the upload loads", async () => {
    const s = await heldServer();
    try {
      const upload = s.upload();
      await s.entered();
      // The compile's Worker is blocked inside the compiler: the server's thread answers meanwhile.
      for (let i = 0; i < 3; i++) expect(await s.relu()).toEqual([200, X8.map((v) => Math.max(0, v))]);
      expect(liveCompileWorkers()).toBe(1);
      s.release();
      const res = await upload;
      expect([res.status, await res.json()]).toEqual([200, { name: "mlp2", state: "READY" }]);
    } finally {
      await s.cleanup();
    }
    expect(liveCompileWorkers()).toBe(0);
  }, 60_000);

  test.if(hasServe)("a compile past --compile-timeout is stopped: the upload answers 504", async () => {
    const s = await heldServer({ compileTimeoutSeconds: 1 });
    try {
      const res = await s.upload(); // held: it cannot end before the limit
      expect([res.status, await res.json()]).toEqual([504, {
        error: "Cannot compile mlp2.onnx: the compiler ran past its time limit (1 s) and was stopped (NRT_TIMEOUT)",
      }]);
      expect(await s.relu()).toEqual([200, X8.map((v) => Math.max(0, v))]);
    } finally {
      await s.cleanup();
    }
    expect(liveCompileWorkers()).toBe(0);
  }, 60_000);

  test.if(hasServe)("a shutdown stops the compile still running: no Worker is left", async () => {
    const s = await heldServer({ drainTimeoutSeconds: 0 });
    try {
      const upload = s.upload().then(async (r) => [r.status, (await r.json()).error], () => "connection closed");
      await s.entered();
      expect(liveCompileWorkers()).toBe(1);
      // Held, the compile would never end: only the shutdown's stop ends its Worker.
      expect(await s.server.close()).toEqual({ unfinished: 1, refused: 0 });
      expect(liveCompileWorkers()).toBe(0);
      expect([
        [503, "Cannot compile mlp2.onnx: the server is shutting down (NRT_CLOSED)"],
        "connection closed",
      ]).toContainEqual(await upload);
    } finally {
      await s.cleanup();
    }
  }, 60_000);
});
