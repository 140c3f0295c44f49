/**
 * HTTP throughput of the inference server against a bare Hono route returning the same JSON, on the same
 * runtime, in one run: 64 concurrent connections from a client Worker, loopback only, bounded by a request count
 * and a time budget per target. Under Bun it then runs itself under Deno (and the other way round) and prints both
 * ratios; `--here` measures the current runtime only.
 *
 * Usage: `bun bench/http.ts [--requests N] [--seconds S] [--connections C] [--instances I] [--here]`
 *        `deno run -A bench/http.ts …`
 *
 * @module
 */
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { buildCustomOpNeff, type ExecutionEvent, MemoryLogger, Runtime } from "@nrt/core";
import { DrainGate } from "../packages/cli/http_listener.ts";
import { createInferenceApp, DashboardMonitor, filesFromMap, ModelRepository, NeuronActivity } from "@nrt/http-api";
import { Hono } from "hono";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import process from "node:process";
import type { LoadJob, LoadResult } from "./_http_client.ts";

type Fetch = (req: Request) => Response | Promise<Response>;
interface Server {
  readonly port: number;
  stop(): Promise<void>;
}

const g = globalThis as unknown as {
  Bun?: {
    version: string;
    serve(o: { hostname: string; port: number; fetch: Fetch }): { port: number; stop(force?: boolean): Promise<void> };
  };
  Deno?: {
    version: { deno: string };
    serve(
      o: { hostname: string; port: number; onListen(a: { port: number }): void },
      f: Fetch,
    ): { shutdown(): Promise<void> };
  };
};
const RUNTIME = g.Bun !== undefined ? "bun" : "deno";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function serve(fetch: Fetch): Promise<Server> {
  if (g.Bun !== undefined) {
    const s = g.Bun.serve({ hostname: "127.0.0.1", port: 0, fetch });
    return Promise.resolve({ port: s.port, stop: () => s.stop(true) });
  }
  const deno = g.Deno!;
  return new Promise((resolve) => {
    const s = deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen: (a) => resolve({ port: a.port, stop: () => s.shutdown() }),
    }, fetch);
  });
}

function load(job: LoadJob): Promise<LoadResult> {
  const w = new Worker(new URL("./_http_client.ts", import.meta.url), { type: "module" });
  return new Promise<LoadResult>((resolve, reject) => {
    w.onmessage = (
      e: MessageEvent<{ ok?: LoadResult; error?: string }>,
    ) => (e.data.ok ? resolve(e.data.ok) : reject(new Error(e.data.error)));
    w.onerror = (e) => reject(new Error(String((e as ErrorEvent).message)));
    w.postMessage(job);
  }).finally(() => w.terminate());
}

/** One measurement in this runtime. */
/** One runtime's figures: the plain app, the app with nrt serve's hooks, and the bare route. */
interface Measured {
  readonly runtime: string;
  readonly infer: LoadResult;
  readonly served: LoadResult;
  readonly bare: LoadResult;
  readonly ratio: number;
  readonly servedRatio: number;
}

async function measure(): Promise<Measured> {
  const connections = arg("connections", 64),
    requests = arg("requests", 20_000),
    seconds = arg("seconds", 10),
    instances = arg("instances", 4);
  const wasm = new Uint8Array(readFileSync(new URL("../kernels/wasm/relu.wasm", import.meta.url)));
  const neff = buildCustomOpNeff({
    name: "relu.neff",
    target: CAYMAN_SPEC.name,
    inputs: [{ name: "x", dtype: "float32", shape: [8] }],
    outputs: [{ name: "y", dtype: "float32", shape: [8] }],
    libraries: [{
      name: "relu",
      wasm,
      totalCpus: Number(process.env.CPUS ?? 8) as 1 | 8,
      functions: [{ opcode: 1, name: "relu" }],
    }],
    calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
  });
  // Two servers of the same model on two simulated devices: the plain app, and the app wired as `nrt serve` wires
  // it — the dashboard's and the Neuron tools' hooks on every execution (onExecution, onSpan) and the drain gate.
  const setup = async (hooks: boolean) => {
    const container = createNrtContainer({ agents: (process.env.AGENTS ?? "device") as "device" });
    const monitor = hooks ? new DashboardMonitor() : undefined;
    const activity = hooks ? new NeuronActivity() : undefined;
    const runtime = await Runtime.init({
      ...nrtPlugins(container),
      logger: new MemoryLogger(),
      ...(hooks
        ? {
          onExecution: (e: ExecutionEvent) => {
            monitor!.onExecution(e);
            activity!.onExecution(e);
          },
          onSpan: monitor!.onSpan,
        }
        : {}),
    });
    const files = filesFromMap({
      "relu.neff": neff,
      "relu.json": new TextEncoder().encode(JSON.stringify({ vnc: 0, instances })),
    });
    const repository = new ModelRepository({ runtime, files });
    await repository.scan();
    await repository.loadAll();
    const app = createInferenceApp({
      runtime,
      repository,
      ...(hooks ? { dashboard: { monitor: monitor! }, activity } : {}),
    });
    const fetch: Fetch = hooks ? new DrainGate(app.fetch).fetch : app.fetch;
    const close = async () => {
      monitor?.close();
      await repository.close();
      await runtime.close();
      await container.resolve(PortalToken).close();
    };
    return { app, fetch, close };
  };
  const plain = await setup(false), served = await setup(true);
  const app = plain.app;
  const body = JSON.stringify({
    inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, 4] }],
  });
  const sample = await app.request("/v2/models/relu/infer", { method: "POST", body });
  const json = await sample.text();
  if (sample.status !== 200) throw new Error(`The bench model does not run: ${json}`);
  const bare = new Hono();
  // The limit: a bare Hono route that parses the same request body and answers the same JSON (nothing of ours).
  const answer = JSON.parse(json);
  bare.post("/v2/models/relu/infer", async (c) => {
    const req = await c.req.json();
    if (!Array.isArray(req.inputs)) return c.json({ error: "no inputs" }, 400);
    return c.json(answer);
  });
  const inferServer = await serve(plain.fetch);
  const servedServer = await serve(served.fetch);
  const bareServer = await serve(bare.fetch);
  try {
    const job = (port: number, n: number): LoadJob => ({
      url: `http://127.0.0.1:${port}/v2/models/relu/infer`,
      body,
      connections,
      requests: n,
      seconds,
    });
    await load(job(inferServer.port, 500)); // warm-up: JIT, connections, staging buffers
    await load(job(servedServer.port, 500));
    await load(job(bareServer.port, 500));
    const infer = await load(job(inferServer.port, requests));
    const withHooks = await load(job(servedServer.port, requests));
    const bareResult = await load(job(bareServer.port, requests));
    const rps = (r: LoadResult) => r.completed / (r.elapsedMs / 1000);
    return {
      runtime: RUNTIME,
      infer,
      served: withHooks,
      bare: bareResult,
      ratio: rps(infer) / rps(bareResult),
      servedRatio: rps(withHooks) / rps(bareResult),
    };
  } finally {
    await inferServer.stop();
    await servedServer.stop();
    await bareServer.stop();
    await plain.close();
    await served.close();
  }
}

function report(r: Measured): string {
  const line = (name: string, x: LoadResult) =>
    `  ${name.padEnd(26)} ${String(Math.round(x.completed / (x.elapsedMs / 1000))).padStart(7)} req/s  ${
      String(x.completed).padStart(6)
    } requests  ` +
    `p50 ${x.p50Ms.toFixed(2)} ms  p99 ${x.p99Ms.toFixed(2)} ms  errors ${x.errors}`;
  return [
    `${r.runtime}:`,
    line("POST /infer (relu FP32[8])", r.infer),
    line("  with nrt serve's hooks", r.served),
    line("bare Hono route", r.bare),
    `  throughput ratio infer/bare: ${r.ratio.toFixed(2)}; with nrt serve's hooks: ${r.servedRatio.toFixed(2)}`,
  ].join("\n");
}

if (process.argv.includes("--child")) {
  console.log(JSON.stringify(await measure()));
  process.exit(0);
}

const here = await measure();
const results = [here];
if (!process.argv.includes("--here")) {
  const other = RUNTIME === "bun" ? "deno" : "bun";
  const bin = new URL(`../node_modules/.bin/${other}`, import.meta.url).pathname;
  if (existsSync(bin)) {
    const script = new URL(import.meta.url).pathname;
    const extra = process.argv.slice(2).filter((a) => a !== "--child");
    const argv = other === "deno" ? ["run", "-A", script, "--child", ...extra] : [script, "--child", ...extra];
    const child = spawnSync(bin, argv, { encoding: "utf8", maxBuffer: 1 << 20 });
    const last = child.stdout.trim().split("\n").pop() ?? "";
    if (child.status === 0 && last.startsWith("{")) results.push(JSON.parse(last));
    else console.error(`${other}: the child run failed (${child.status}): ${child.stderr.slice(-2000)}`);
  }
}
for (const r of results) console.log(report(r));
process.exit(0);
