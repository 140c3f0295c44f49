/**
 * Smoke test of `nrt serve`'s composition root: the demo models are built into a fresh directory, the app is
 * served by `Bun.serve` or `Deno.serve` on a free loopback port, and the printed `curl` line returns an inference.
 */
import { describe, expect, test } from "bun:test";
import { parseServeArgs, startServer } from "@nrt/cli";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { oneOpNeff } from "./_kernels.ts";

const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

function curl(line: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile("sh", ["-c", line], { timeout: 20_000 }, (err, stdout) => resolve(err ? undefined : stdout));
  });
}

describe("nrt serve", () => {
  test("parseServeArgs() reads --models, --arch, --port, --host, --max-body and --demo", () => {
    expect(
      parseServeArgs([
        "--models",
        "m",
        "--arch",
        "cayman",
        "--port",
        "0",
        "--host",
        "::1",
        "--max-body",
        "1024",
        "--demo",
      ]),
    ).toEqual({
      models: "m",
      arch: "cayman",
      port: 0,
      host: "::1",
      maxBodyBytes: 1024,
      demo: true,
    });
    expect(() => parseServeArgs(["--port", "70000"])).toThrow("--port 70000 is not an integer from 0 to 65535");
    expect(() => parseServeArgs(["--models"])).toThrow(
      "Cannot parse nrt serve arguments: Option '--models <value>' argument missing",
    );
    expect(() => parseServeArgs(["--verbose"])).toThrow("Cannot parse nrt serve arguments: Unknown option '--verbose'");
    expect(() => parseServeArgs(["--model-control", "poll"])).toThrow("--model-control poll is not none or explicit");
    expect(parseServeArgs(["--agents", "inline"])).toEqual({ agents: "inline" });
    expect(parseServeArgs(["--agents=core"])).toEqual({ agents: "core" });
    expect(() => parseServeArgs(["--agents", "worker"])).toThrow(
      "Cannot parse nrt serve arguments: --agents worker is not one of inline, device, core",
    );
    expect(
      parseServeArgs([
        "--admin",
        "--admin-token-file",
        "t",
        "--model-control",
        "explicit",
        "--allowed-host",
        "a",
        "--allowed-host",
        "b",
      ]),
    )
      .toEqual({ admin: true, adminTokenFile: "t", modelControl: "explicit", allowedHosts: ["a", "b"] });
  });

  test.if(hasServe)(
    "--agents inline serves the demo with the device on the server's thread; --agents goes without --device",
    async () => {
      await expect(startServer({ models: "/nonexistent", agents: "inline", device: "unix:/tmp/x.sock" })).rejects
        .toThrow("--agents and --device exclude each other");
      const dir = await mkdtemp(join(tmpdir(), "nrt-serve-inline-"));
      const lines: string[] = [];
      const server = await startServer({
        models: dir,
        demo: true,
        port: 0,
        agents: "inline",
        log: (s) => lines.push(s),
      });
      try {
        expect(lines[0]).toMatch(/ready on the simulated cayman device \(on this thread\) \(4 logical cores\)$/);
        // Every instance of relu answers, each on its own logical core, and a wrong shape is still a 400.
        const body = JSON.stringify({
          inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, -3] }],
        });
        const answers = await Promise.all(
          Array.from(
            { length: 16 },
            () => fetch(`${server.url}/v2/models/relu/infer`, { method: "POST", body }).then((r) => r.json()),
          ),
        );
        for (const a of answers) expect(a.outputs[0].data).toEqual([0, 0, 0, 0, 1, 2, 3, 0]);
        const bad = await fetch(`${server.url}/v2/models/relu/infer`, {
          method: "POST",
          body: JSON.stringify({ inputs: [{ name: "x", shape: [3], datatype: "FP32", data: [1, 2, 3] }] }),
        });
        expect(bad.status).toBe(400);
        expect((await bad.json()).error).toContain("shape");
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  test.if(hasServe)(
    "startServer() serves the demo models on a free port and its curl line returns an inference",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-serve-test-"));
      const lines: string[] = [];
      const server = await startServer({ models: dir, demo: true, port: 0, log: (s) => lines.push(s) });
      try {
        // Each demo model with its config: one instance on every logical core (Triton's one per GPU).
        expect((await readdir(dir)).sort()).toEqual([
          "matmul.json",
          "matmul.neff",
          "relu.json",
          "relu.neff",
          "softmax.json",
          "softmax.neff",
          "vector_add.json",
          "vector_add.neff",
        ]);
        for (const m of ["matmul", "relu", "softmax", "vector_add"]) {
          const meta = await (await fetch(`${server.url}/v2/models/${m}`)).json() as {
            instances: Array<{ vnc: number }>;
          };
          expect(meta.instances.map((i) => i.vnc)).toEqual([0, 1, 2, 3]);
        }
        expect(lines[0]).toMatch(/^nrt: 4 of 4 model\(s\) from .* ready on the simulated cayman device/);
        expect(lines).toContain(`nrt: listening on http://127.0.0.1:${server.port}`);
        expect(lines).toContain(`try: ${server.curl}`);
        expect(server.curl).toBe(
          `curl -s localhost:${server.port}/v2/models/relu/infer -d '{"inputs":[{"name":"x","shape":[8],"datatype":"FP32","data":[-3,-2,-1,0,1,2,3,-3]}]}'`,
        );
        // What curl -d sends: a form content type, which the server ignores.
        const res = await fetch(`${server.url}${server.example.path}`, {
          method: "POST",
          body: server.example.body,
          headers: { "content-type": "application/x-www-form-urlencoded" },
        });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({
          model_name: "relu",
          model_version: "1",
          outputs: [{ name: "y", datatype: "FP32", shape: [8], data: [0, 0, 0, 0, 1, 2, 3, 0] }],
        });
        const out = await curl(server.curl);
        if (out !== undefined) expect(JSON.parse(out).outputs[0].data).toEqual([0, 0, 0, 0, 1, 2, 3, 0]);
        expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  test.if(hasServe)(
    "startServer() names a Triton-style model's config.json as its path in the load error, and logs each error once",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-serve-test-"));
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
      await mkdir(join(dir, "bad", "1"), { recursive: true });
      await writeFile(join(dir, "bad", "1", "model.neff"), oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
      await writeFile(join(dir, "bad", "config.json"), '{"vnc": 99}');
      await writeFile(join(dir, "junk.neff"), "not a NEFF");
      // The runtime's console logger writes errors with console.error.
      const logged: string[] = [];
      const error = console.error;
      console.error = (...a: unknown[]) => void logged.push(a.join(" "));
      let server;
      try {
        server = await startServer({ models: dir, port: 0, log: () => {} });
      } finally {
        console.error = error;
      }
      try {
        // Each load error once, with the model named once: the repository's own message already names it, the
        // runtime's (nrt_load) gets the prefix.
        const loads = logged.filter((l) => l.includes("Cannot load model"));
        expect(loads.length).toBe(2);
        for (const l of loads) expect(l.split("Cannot load model").length).toBe(2);
        expect(loads[0]).toContain(
          'Cannot load model "bad": bad/config.json "vnc" must be from 0 to 3: the runtime has 4 visible logical cores',
        );
        expect(loads[1]).toContain('Cannot load model "junk": ');
        const ready = await fetch(`${server.url}/v2/models/bad/ready`);
        expect(ready.status).toBe(503);
        expect((await ready.json()).error).toBe(
          'Model "bad" is not ready: load failed: Cannot load model "bad": bad/config.json "vnc" must be from 0 to 3: ' +
            "the runtime has 4 visible logical cores",
        );
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
