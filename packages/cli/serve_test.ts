/**
 * `startServer` (`nrt serve`): what it prints and leaves behind for the admin token, what `--demo` does to a folder of
 * the user's, and the version a Triton-style model is labelled with on `/metrics` and in its statistics.
 *
 * - An operator's token (`--admin-token-file`) is never printed: the dashboard line says which file holds it. A token
 *   made by the start without a file is printed once in the dashboard URL's fragment, percent-encoded, as before.
 * - The default token file a start wrote is removed at its shutdown; the operator's file stays.
 * - `--demo --models DIR` writes the demo models DIR does not have and keeps the user's models as they are.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { buildDemoModels, startServer } from "./serve.ts";

let home: string;
let demo: Record<string, Uint8Array>;
const saved = process.env.XDG_RUNTIME_DIR;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "nrt-serve-test-"));
  // The default token file goes under $XDG_RUNTIME_DIR/nrt: a folder of this test's own.
  await mkdir(join(home, "run"), { mode: 0o700 });
  process.env.XDG_RUNTIME_DIR = join(home, "run");
  demo = await buildDemoModels("cayman");
});

afterAll(async () => {
  if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
  else process.env.XDG_RUNTIME_DIR = saved;
  await rm(home, { recursive: true, force: true });
});

/** A repository folder holding the demo's relu only (quick to load). */
async function reluFolder(name: string): Promise<string> {
  const dir = join(home, name);
  await mkdir(dir);
  await writeFile(join(dir, "relu.neff"), demo["relu.neff"]);
  return dir;
}

describe("startServer({ admin }): the token in the log and on disk", () => {
  test("an operator's token from --admin-token-file is never printed; the dashboard line names its file", async () => {
    const file = join(home, "operator-token");
    // Any printable ASCII the server takes, as an operator may choose it.
    const secret = "operator+chosen/secret=token==";
    await writeFile(file, `${secret}\n`, { mode: 0o600 });
    const lines: string[] = [];
    const server = await startServer({
      models: await reluFolder("op"),
      admin: true,
      adminTokenFile: file,
      port: 0,
      log: (l) => lines.push(l),
    });
    try {
      expect(server.adminToken).toBe(secret);
      const log = lines.join("\n");
      for (const form of [secret, encodeURIComponent(secret)]) expect(log).not.toContain(form);
      expect(lines).toContain(
        `nrt: dashboard at ${server.url}/ (for operator actions open ${server.url}/#token=<token> with the token of ` +
          `${file}, percent-encoded; it is not printed)`,
      );
      expect(lines.some((l) => l.includes(`the admin token is in ${file} (mode 600)`))).toBe(true);
    } finally {
      await server.close();
    }
    // The operator's file is theirs: still there, unchanged.
    expect(await readFile(file, "utf8")).toBe(`${secret}\n`);
  });

  test("a token made at a missing --admin-token-file is not printed either, and the file stays for later starts", async () => {
    const file = join(home, "made-token");
    const lines: string[] = [];
    const server = await startServer({
      models: await reluFolder("made"),
      admin: true,
      adminTokenFile: file,
      port: 0,
      log: (l) => lines.push(l),
    });
    const token = server.adminToken!;
    try {
      expect((await readFile(file, "utf8")).trim()).toBe(token);
      expect(lines.filter((l) => l.includes(token))).toEqual([]);
    } finally {
      await server.close();
    }
    expect((await readFile(file, "utf8")).trim()).toBe(token);
  });

  test("without a file: the start's own token is printed once in the URL fragment; its default file goes at shutdown", async () => {
    const lines: string[] = [];
    const server = await startServer({
      models: await reluFolder("own"),
      admin: true,
      port: 0,
      log: (l) => lines.push(l),
    });
    const file = join(home, "run", "nrt", `admin-token-${server.port}`);
    let closed = false;
    try {
      const token = server.adminToken!;
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(lines.filter((l) => l.includes(token))).toEqual([
        `nrt: dashboard at ${server.url}/#token=${encodeURIComponent(token)}`,
      ]);
      expect((await readFile(file, "utf8")).trim()).toBe(token);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      await server.close();
      closed = true;
      expect(await readdir(join(home, "run", "nrt"))).toEqual([]);
    } finally {
      if (!closed) await server.close();
    }
  });
});

describe("startServer({ demo, models }): the user's folder", () => {
  test("writes the demo models the folder lacks and keeps the user's own, files and configs untouched", async () => {
    const dir = join(home, "mine");
    await mkdir(join(dir, "matmul", "1"), { recursive: true });
    // The user's relu (softmax's NEFF, so it differs from the demo's), the user's matmul in Triton's layout, and a
    // config alone for softmax: each keeps the demo's model of that name out.
    await writeFile(join(dir, "relu.neff"), demo["softmax.neff"]);
    await writeFile(join(dir, "matmul", "1", "model.neff"), demo["matmul.neff"]);
    await writeFile(join(dir, "softmax.json"), '{"instances": 1}\n');
    const lines: string[] = [];
    const server = await startServer({ models: dir, demo: true, port: 0, log: (l) => lines.push(l) });
    try {
      expect(new Uint8Array(await readFile(join(dir, "relu.neff")))).toEqual(demo["softmax.neff"]);
      expect(await readFile(join(dir, "softmax.json"), "utf8")).toBe('{"instances": 1}\n');
      expect(lines).toContain(
        `nrt: --demo kept "matmul", "relu", "softmax" of ${dir} as it is: the folder already has a model of that name ` +
          "(remove it to get the demo's)",
      );
      expect((await readdir(dir)).sort()).toEqual([
        "matmul",
        "relu.neff",
        "softmax.json",
        "vector_add.json",
        "vector_add.neff",
      ]);
      // The user's relu is what is served: softmax's signature.
      const meta = await (await fetch(`${server.url}/v2/models/relu`)).json();
      expect(meta.inputs.map((t: { shape: number[] }) => t.shape)).toEqual([[2, 4]]);
    } finally {
      await server.close();
    }
    // A second start writes nothing: every demo model is there now.
    const again: string[] = [];
    const second = await startServer({ models: dir, demo: true, port: 0, log: (l) => again.push(l) });
    await second.close();
    expect(again).toContain(
      `nrt: --demo kept "matmul", "relu", "softmax", "vector_add" of ${dir} as it is: the folder already has a model ` +
        "of that name (remove it to get the demo's)",
    );
  });
});

describe("startServer(): a Triton-style model's version", () => {
  test("labels every /metrics family of the model and its statistics with the served version folder", async () => {
    const dir = join(home, "triton");
    await mkdir(join(dir, "relu", "3"), { recursive: true });
    await writeFile(join(dir, "relu", "3", "model.neff"), demo["relu.neff"]);
    const server = await startServer({ models: dir, port: 0, log: () => {} });
    try {
      const infer = await fetch(`${server.url}/v2/models/relu/versions/3/infer`, {
        method: "POST",
        body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, 2, 3, 4, 5, 6, 7, 8] }] }),
        headers: { "content-type": "application/json" },
      });
      expect(infer.status).toBe(200);
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const relu = text.split("\n").filter((l) => !l.startsWith("#") && l.includes('model="relu"'));
      const families = new Set(relu.map((l) => l.slice(0, l.indexOf("{"))));
      for (const f of ["nrt_inference_request_success", "nrt_model_ready", "nrt_model_instances"]) {
        expect(families.has(f)).toBe(true);
      }
      expect(families.has("nrt_model_execution_status_total")).toBe(true);
      expect(relu.filter((l) => !l.includes('model="relu",version="3"'))).toEqual([]);
      expect(relu).toContain('nrt_inference_request_success{model="relu",version="3"} 1');
      const stats = await (await fetch(`${server.url}/v2/models/relu/versions/3/stats`)).json();
      expect(stats.model_stats.map((s: { version: string; inference_count: number }) => [s.version, s.inference_count]))
        .toEqual([["3", 1]]);
    } finally {
      await server.close();
    }
  });
});
