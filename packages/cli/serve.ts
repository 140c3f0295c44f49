/**
 * `nrt serve`: the REST inference server's composition root. It builds the runtime on the embedded simulated
 * device, scans a model repository directory, and hands the `@nrt/http-api` app to `Bun.serve` or `Deno.serve` —
 * the only place that knows about either. With `--demo` (what `npm start` runs) it first writes demo models built
 * from the reference kernels into the repository directory. It also serves the live device dashboard (`GET /`,
 * docs/dashboard.md): the runtime's executions and log are tapped through a `DashboardMonitor` (`onExecution` and a
 * logger that tees to the console and the dashboard's ring), the Q7 cores and the fault API through a
 * {@linkcode SimDeviceView}; `--admin` turns on its operator actions. SIGINT/SIGTERM shut it down gracefully: end
 * the dashboard's event streams, stop accepting, finish in-flight requests, unload, `nrt_close`, close the portal.
 *
 * @module
 */
import {
  buildCustomOpNeff,
  createConsoleLogger,
  type CustomOpTensorSpec,
  envFromProcess,
  type NeffTensor,
  type NrtArchName,
  Portal,
  resolveRuntimeConfig,
  Runtime,
} from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { createInferenceApp, DashboardMonitor, DEFAULT_LIMITS, dtypeInfo, ModelRepository, type RepositoryFiles } from "@nrt/http-api";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createNrtContainer, simulatedSpec } from "./container.ts";
import { SimDeviceView } from "./sim_device_view.ts";

const KERNELS = new URL("../../kernels/wasm/", import.meta.url);

/** Options of {@linkcode startServer}. */
export interface ServeOptions {
  /** The repository directory (default with `demo`: `nrt-demo-models/<arch>` in the temp directory). */
  readonly models?: string;
  /** Silicon to simulate: `sunda`, `cayman`, `mariana` or `trn1`/`inf2`/`trn2` (default: `NRT_ARCH`, else `cayman`). */
  readonly arch?: string;
  /** Port (default 8000; 0 picks a free one). */
  readonly port?: number;
  /** Interface to bind (default `127.0.0.1`). */
  readonly host?: string;
  /** Write the demo models into the repository first (those that are absent). */
  readonly demo?: boolean;
  /** Body size limit in bytes (default 64 MiB). */
  readonly maxBodyBytes?: number;
  /** Enable the dashboard's operator actions: load/unload models, inject and clear faults (`--admin`). */
  readonly admin?: boolean;
  /** Where progress lines go (default: console). */
  readonly log?: (line: string) => void;
}

/** A running server. */
export interface RunningServer {
  /** `http://host:port`. */
  readonly url: string;
  /** The port bound. */
  readonly port: number;
  /** A request that works against the server, as a `curl` command line. */
  readonly curl: string;
  /** The same request, for a client: path and body (`undefined` for a GET). */
  readonly example: { readonly path: string; readonly body: string | undefined };
  /** Graceful shutdown: stop accepting, finish in-flight requests, unload, close the runtime and the portal. */
  close(): Promise<void>;
}

interface Listener {
  readonly port: number;
  stop(): Promise<void>;
}

type Fetch = (req: Request) => Response | Promise<Response>;

interface BunLike {
  serve(o: { hostname: string; port: number; fetch: Fetch; maxRequestBodySize: number }): { port: number; stop(): Promise<void> };
}
interface DenoLike {
  serve(
    o: { hostname: string; port: number; onListen(addr: { port: number }): void },
    fetch: Fetch,
  ): { shutdown(): Promise<void>; finished: Promise<void> };
}

/** Binds `fetch` with the runtime's own server: the one place that names `Bun.serve` and `Deno.serve`. */
function listen(fetch: Fetch, host: string, port: number, maxBodyBytes: number): Promise<Listener> {
  const g = globalThis as unknown as { Bun?: BunLike; Deno?: DenoLike };
  if (g.Bun !== undefined) {
    // Bun refuses bodies past its own limit before the app sees them; leave room so the app's 413 answers first.
    const s = g.Bun.serve({ hostname: host, port, fetch, maxRequestBodySize: maxBodyBytes + 65536 });
    return Promise.resolve({ port: s.port, stop: () => s.stop() });
  }
  if (g.Deno !== undefined) {
    const deno = g.Deno;
    return new Promise((resolve) => {
      const s = deno.serve({ hostname: host, port, onListen: (a) => resolve({ port: a.port, stop: () => s.shutdown() }) }, fetch);
    });
  }
  return Promise.reject(new Error("Cannot serve: neither Bun.serve nor Deno.serve is available; run with bun or deno"));
}

const f32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "float32", shape });

/**
 * The demo models, built from the reference kernels: `vector_add` (a, b FP32 [1024]), `relu` (x FP32 [8]),
 * `softmax` (x FP32 [2, 4], by rows) and `matmul` (a [4, 4] · b [4, 4]).
 *
 * @param target The NEFF target (`cayman`).
 * @returns NEFF bytes by file name.
 */
export async function buildDemoModels(target: string): Promise<Record<string, Uint8Array>> {
  const models: Array<{ name: string; lib: string; fn: string; inputs: CustomOpTensorSpec[]; outputs: CustomOpTensorSpec[] }> = [
    { name: "vector_add", lib: "vector_add", fn: "vector_add", inputs: [f32("a", [1024]), f32("b", [1024])], outputs: [f32("out", [1024])] },
    { name: "relu", lib: "relu", fn: "relu", inputs: [f32("x", [8])], outputs: [f32("y", [8])] },
    { name: "softmax", lib: "softmax", fn: "softmax_rows", inputs: [f32("x", [2, 4])], outputs: [f32("y", [2, 4])] },
    { name: "matmul", lib: "matmul", fn: "matmul", inputs: [f32("a", [4, 4]), f32("b", [4, 4])], outputs: [f32("c", [4, 4])] },
  ];
  const out: Record<string, Uint8Array> = {};
  for (const m of models) {
    const wasm = new Uint8Array(await readFile(new URL(`${m.lib}.wasm`, KERNELS)));
    out[`${m.name}.neff`] = buildCustomOpNeff({
      name: `${m.name}.neff`,
      target,
      inputs: m.inputs,
      outputs: m.outputs,
      libraries: [{ name: m.lib, wasm, totalCpus: 8, functions: [{ opcode: 1, name: m.fn }] }],
      calls: [{ opcode: 1, inputs: m.inputs.map((t) => t.name), outputs: m.outputs.map((t) => t.name) }],
    });
  }
  return out;
}

/** A repository over a directory, through `node:fs` (which Bun and Deno both provide). */
export function directoryFiles(dir: string): RepositoryFiles {
  return {
    list: async () => await readdir(dir),
    read: async (name) => {
      try {
        return new Uint8Array(await readFile(join(dir, name)));
      } catch (e) {
        if ((e as { code?: string }).code === "ENOENT") return undefined;
        throw e;
      }
    },
  };
}

const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);

/** A small JSON example input for a tensor, or `undefined` when it has no JSON form. */
function exampleData(t: NeffTensor): Array<number | boolean> | undefined {
  const info = dtypeInfo(t.dtype);
  if (info === undefined || !info.json) return undefined;
  const n = t.shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, (_, i) => {
    if (info.datatype === "BOOL") return i % 2 === 0;
    if (info.datatype.startsWith("UINT")) return i % 7;
    return (i % 7) - 3;
  });
}

/** The request `curl` shows: an inference of the smallest JSON-capable model, else server metadata. */
function exampleRequest(models: ReadonlyArray<{ name: string; inputs: readonly NeffTensor[] }>): { path: string; body: string | undefined } {
  const size = (m: { inputs: readonly NeffTensor[] }): number => m.inputs.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
  const usable = models.filter((m) => size(m) <= 64 && m.inputs.every((t) => exampleData(t) !== undefined)).sort((a, b) => size(a) - size(b));
  const m = usable[0];
  if (m === undefined) return { path: models.length > 0 ? `/v2/models/${models[0].name}` : "/v2", body: undefined };
  const inputs = m.inputs.map((t) => ({ name: t.name, shape: t.shape, datatype: dtypeInfo(t.dtype)!.datatype, data: exampleData(t) }));
  return { path: `/v2/models/${m.name}/infer`, body: JSON.stringify({ inputs }) };
}

/**
 * Starts the server: runtime, repository (scanned and loaded), app, listener.
 *
 * @param options Where the models are, what to simulate, where to listen.
 * @returns The running server.
 */
export async function startServer(options: ServeOptions = {}): Promise<RunningServer> {
  const log = options.log ?? ((s: string) => console.log(s));
  const env = envFromProcess();
  const containerOptions = { arch: options.arch as NrtArchName | undefined, env };
  const spec = simulatedSpec(containerOptions); // throws NRT_INVALID for an unknown --arch
  // Demo NEFFs name their target, so each simulated generation gets its own folder.
  const dir = options.models ?? (options.demo ? join(tmpdir(), "nrt-demo-models", spec.name) : undefined);
  if (dir === undefined) throw new Error("Cannot serve: --models DIR is required (or --demo)");
  if (options.demo) {
    await mkdir(dir, { recursive: true });
    for (const [file, bytes] of Object.entries(await buildDemoModels(spec.name))) {
      if (!(await exists(join(dir, file)))) await writeFile(join(dir, file), bytes);
    }
  }
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes;
  // The dashboard's taps: executions and the log (kernel printf arrives at INFO/WARNING), Q7 dispatches and faults.
  const monitor = new DashboardMonitor();
  const sim = new SimDeviceView();
  const container = createNrtContainer({ ...containerOptions, q7Factory: sim.q7Factory() });
  const portal = container.resolve(Portal);
  if (portal instanceof DeviceSimPortal) sim.attach(portal);
  let runtime: Runtime;
  try {
    const logger = monitor.wrapLogger(createConsoleLogger(resolveRuntimeConfig({}, env).logLevel));
    runtime = await Runtime.init({ container, env, logger, onExecution: monitor.onExecution });
  } catch (e) {
    await portal.close();
    throw e;
  }
  let repository: ModelRepository | undefined;
  try {
    repository = new ModelRepository({ runtime, files: directoryFiles(dir) });
    const names = await repository.scan();
    const failed = await repository.loadAll();
    const app = createInferenceApp({
      runtime,
      repository,
      limits: { maxBodyBytes },
      dashboard: { monitor, deviceView: sim.view, faults: sim.faults },
      admin: options.admin === true,
    });
    const host = options.host ?? "127.0.0.1";
    const server = await listen(app.fetch, host, options.port ?? 8000, maxBodyBytes);
    const ready = repository.models().filter((m) => m.served !== undefined).map((m) => ({ name: m.name, inputs: m.served!.inputs }));
    const example = exampleRequest(ready);
    const curlHost = host === "127.0.0.1" || host === "0.0.0.0" || host === "::" ? "localhost" : host;
    const curl = `curl -s ${curlHost}:${server.port}${example.path}` + (example.body === undefined ? "" : ` -d '${example.body}'`);
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`;
    log(`nrt: ${names.length - failed.size} of ${names.length} model(s) from ${dir} ready on the simulated ${spec.name} device` +
      ` (${runtime.visibleVncCount} logical cores)`);
    log(`nrt: listening on ${url}`);
    log(`nrt: dashboard at ${url}/${options.admin ? " (operator actions on)" : ""}`);
    log(`try: ${curl}`);
    let closing: Promise<void> | undefined;
    const repo = repository;
    return {
      url,
      port: server.port,
      curl,
      example,
      close: () =>
        closing ??= (async () => {
          monitor.close(); // ends the dashboard's event streams, which the listener's stop would wait for
          await server.stop();
          try {
            await repo.close();
          } finally {
            await runtime.close();
            await portal.close();
          }
        })(),
    };
  } catch (e) {
    await repository?.close().catch(() => {});
    await runtime.close().catch(() => {});
    await portal.close();
    throw e;
  }
}

/** Parses `nrt serve` arguments. */
export function parseServeArgs(args: readonly string[]): ServeOptions {
  const o: { -readonly [K in keyof ServeOptions]: ServeOptions[K] } = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const value = (): string => {
      const v = args[++i];
      if (v === undefined) throw new Error(`Cannot parse nrt serve arguments: ${a} needs a value`);
      return v;
    };
    const int = (v: string, lo: number, hi: number): number => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < lo || n > hi) throw new Error(`Cannot parse nrt serve arguments: ${a} ${v} is not an integer from ${lo} to ${hi}`);
      return n;
    };
    if (a === "--models") o.models = value();
    else if (a === "--arch") o.arch = value();
    else if (a === "--port") o.port = int(value(), 0, 65535);
    else if (a === "--host") o.host = value();
    else if (a === "--max-body") o.maxBodyBytes = int(value(), 1, Number.MAX_SAFE_INTEGER);
    else if (a === "--demo") o.demo = true;
    else if (a === "--admin") o.admin = true;
    else throw new Error(`Cannot parse nrt serve arguments: unknown option "${a}"`);
  }
  return o;
}

/** Runs `nrt serve` until SIGINT or SIGTERM; returns the exit code. */
export async function runServe(args: readonly string[]): Promise<number> {
  const server = await startServer(parseServeArgs(args));
  const signal = await new Promise<string>((resolve) => {
    for (const s of ["SIGINT", "SIGTERM"] as const) process.once(s, () => resolve(s));
  });
  console.log(`nrt: ${signal}: finishing in-flight requests and shutting down`);
  await server.close();
  console.log("nrt: stopped");
  return 0;
}
