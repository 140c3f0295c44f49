/**
 * The REST goal as it is worded: `nrt serve --demo` in a process of its own against a bare Hono route (`Bun.serve`
 * or `Deno.serve`, parsing the request's JSON and answering the same JSON as relu's) in another, both loaded by `wrk`
 * (Debian's package; a third process) with 32 connections, in alternating rounds of `--seconds` (default 5), after a
 * warm-up of each. Every answer is checked (`_wrk.ts`). Unlike bench/http.ts, no client and no other server share the
 * servers' processes. Without `wrk` it says so and measures nothing.
 *
 * Usage: `bun bench/serve.ts [--rounds R] [--seconds S] [--connections C] [--deno] [--json]`
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { emit, inRounds, RUNTIME } from "./_timing.ts";
import { hasWrk, wrkLoad } from "./_wrk.ts";
import type { LoadResult } from "./_http_client.ts";

const BODY = JSON.stringify({
  inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, 4] }],
});
const PATH = "/v2/models/relu/infer";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

// The bare server, when this file is started as one: `--bare PORT ANSWER`.
const bareAt = process.argv.indexOf("--bare");
if (bareAt >= 0) {
  const { Hono } = await import("hono");
  const port = Number(process.argv[bareAt + 1]);
  const answer = JSON.parse(process.argv[bareAt + 2]);
  const app = new Hono();
  app.post(PATH, async (c) => {
    const req = await c.req.json();
    if (!Array.isArray(req.inputs)) return c.json({ error: "no inputs" }, 400);
    return c.json(answer);
  });
  const g = globalThis as {
    Bun?: { serve(o: { hostname: string; port: number; fetch: typeof app.fetch }): unknown };
    Deno?: { serve(o: { hostname: string; port: number }, f: typeof app.fetch): unknown };
  };
  if (g.Bun !== undefined) g.Bun.serve({ hostname: "127.0.0.1", port, fetch: app.fetch });
  else g.Deno!.serve({ hostname: "127.0.0.1", port }, app.fetch);
} else await main();

async function main(): Promise<void> {
  if (!hasWrk()) {
    console.log("bench/serve.ts: wrk is not installed (apt-get install wrk); nothing measured");
    return;
  }
  // The servers run on the runtime running this file, or on Deno with --deno.
  const deno = process.argv.includes("--deno") || RUNTIME === "deno";
  const runtime = deno ? "deno" : "bun";
  const bin = new URL(`../node_modules/.bin/${runtime}`, import.meta.url).pathname;
  const run = (args: string[]) => (deno ? ["run", "-A", ...args] : args);
  const rounds = arg("rounds", 4), seconds = arg("seconds", 5), connections = arg("connections", 32);
  const ports = { nrt: 18000 + (process.pid % 1000), bare: 19000 + (process.pid % 1000) };
  const dir = mkdtempSync(join(tmpdir(), "nrt-serve-bench-"));
  const children: ChildProcess[] = [];
  const start = (args: string[]) => {
    const child = spawn(bin, run(args), { stdio: ["ignore", "ignore", "inherit"] });
    children.push(child);
  };
  try {
    const cli = new URL("../packages/cli/main.ts", import.meta.url).pathname;
    start([cli, "serve", "--demo", "--models", dir, "--port", String(ports.nrt), "--grpc-port", "0"]);
    const answer = await answerOf(ports.nrt);
    const want = [0, 0, 0, 0, 1, 2, 3, 4];
    if (JSON.stringify(JSON.parse(answer).outputs[0].data) !== JSON.stringify(want)) {
      throw new Error(`nrt serve --demo answers relu wrongly: ${answer}`);
    }
    start([new URL(import.meta.url).pathname, "--bare", String(ports.bare), answer]);
    if ((await answerOf(ports.bare)) !== answer) throw new Error("The bare route's answer differs");
    const load = (port: number, s: number): Promise<LoadResult> =>
      wrkLoad({ url: `http://127.0.0.1:${port}${PATH}`, body: BODY, answer, connections, seconds: s });
    await load(ports.nrt, 5);
    await load(ports.bare, 5);
    const [nrt, bare] = await inRounds(rounds, 2, (k) => load(k === 0 ? ports.nrt : ports.bare, seconds));
    const rps = (r: LoadResult) => r.completed / (r.elapsedMs / 1000);
    const ratios = nrt.map((r, i) => rps(r) / rps(bare[i])).sort((a, b) => a - b);
    const row = (target: string, xs: LoadResult[]) => {
      const mid = (f: (r: LoadResult) => number) => xs.map(f).sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      return {
        target,
        reqPerS: Math.round(mid(rps)),
        p50Ms: +mid((r) => r.p50Ms).toFixed(2),
        p99Ms: +mid((r) => r.p99Ms).toFixed(2),
        p99MaxMs: +Math.max(...xs.map((r) => r.p99Ms)).toFixed(2),
        errors: xs.reduce((a, r) => a + r.errors, 0),
        wrong: xs.reduce((a, r) => a + (r.wrong ?? 0), 0),
      };
    };
    emit(
      "serve",
      `nrt serve --demo ÷ a bare Hono route, relu FP32[8] over REST, wrk with ${connections} connections, ` +
        `${rounds} alternating rounds of ${seconds} s (median round; ratio ${
          ratios[Math.floor(ratios.length / 2)].toFixed(2)
        }, ` +
        `range ${ratios[0].toFixed(2)}–${ratios[ratios.length - 1].toFixed(2)})`,
      [row("nrt serve --demo", nrt), row("bare Hono route", bare)],
      runtime,
    );
  } finally {
    for (const c of children) c.kill("SIGTERM");
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(0) : c.once("exit", r)))));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The answer of the server on `port` to the bench's body, once it answers (up to 60 s after it starts). */
async function answerOf(port: number): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}${PATH}`, { method: "POST", body: BODY });
      const text = await res.text();
      if (res.status === 200) return text;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`No answer on port ${port} within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
