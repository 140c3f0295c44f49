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
import {
  createInferenceApp,
  DashboardMonitor,
  DEFAULT_LIMITS,
  dtypeInfo,
  type ModelControlMode,
  ModelRepository,
  type RepositoryFiles,
} from "@nrt/http-api";
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { adminToken, defaultAdminTokenFile, newAdminToken, writeAdminToken } from "./admin_token.ts";
import { join } from "node:path";
import process from "node:process";
import { createNrtContainer, simulatedSpec } from "./container.ts";
import { SimDeviceView } from "./sim_device_view.ts";
import { directoryFiles, ensurePrivateDir, privateCacheDir, writeModels } from "./repository_dir.ts";
import { onnxFiles } from "./onnx_source.ts";
import type { CompileTarget } from "./compile_command.ts";

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
  /**
   * Enable the dashboard's operator actions (load/unload models, inject and clear faults) behind a per-start bearer
   * token (`--admin`). Refused on a non-loopback host unless {@linkcode ServeOptions.adminTokenFile} is given.
   */
  readonly admin?: boolean;
  /** The admin token's file (`--admin-token-file`): an existing private file supplies it, a missing one is created. */
  readonly adminTokenFile?: string;
  /** Triton's model control (`--model-control`): `none` (default) or `explicit` (needs `--admin`). */
  readonly modelControl?: ModelControlMode;
  /** More `Host` names the server answers, as `host[:port]` (`--allowed-host`); loopback names are always allowed on a loopback bind. */
  readonly allowedHosts?: readonly string[];
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
  /** The admin token of this start (with `admin`). */
  readonly adminToken?: string;
  /** Graceful shutdown: stop accepting, finish in-flight requests, unload, close the runtime and the portal. */
  close(): Promise<void>;
}

interface Listener {
  readonly port: number;
  stop(): Promise<void>;
}

type Fetch = (req: Request) => Response | Promise<Response>;

interface BunServer {
  port: number;
  stop(): Promise<void>;
  timeout(req: Request, seconds: number): void;
}
interface BunLike {
  serve(o: {
    hostname: string;
    port: number;
    fetch: (req: Request, server: BunServer) => Response | Promise<Response>;
    error: (e: Error) => Response;
    maxRequestBodySize: number;
    idleTimeout: number;
    development: boolean;
  }): BunServer;
}
interface DenoLike {
  serve(
    o: { hostname: string; port: number; onListen(addr: { port: number }): void; onError(e: unknown): Response },
    fetch: Fetch,
  ): { shutdown(): Promise<void>; finished: Promise<void> };
}

/** What {@linkcode listen} needs besides the app. */
interface ListenOptions {
  readonly host: string;
  readonly port: number;
  /** Seconds a request may take before the connection is dropped (0: no limit). */
  readonly requestTimeoutSeconds: number;
}

/** The answer when something escapes the app: JSON, never the runtime's own error page. */
const internalError = (): Response =>
  new Response(JSON.stringify({ error: "Cannot answer the request: internal server error" }), {
    status: 500,
    headers: { "content-type": "application/json" },
  });

/**
 * Binds `fetch` with the runtime's own server: the one place that names `Bun.serve` and `Deno.serve`.
 *
 * Bun: `development: false` (its development error page shows stack, cwd and source), bodies are limited by the
 * app (Bun's own limit answers an empty 413, so it is set out of the way), and every request may run for
 * `requestTimeoutSeconds` instead of Bun's 10-second idle timeout, which would drop a request still executing
 * (`NEURON_RT_EXEC_TIMEOUT` defaults to 30 s). Idle keep-alive connections still close after 30 s.
 */
function listen(fetch: Fetch, o: ListenOptions): Promise<Listener> {
  const g = globalThis as unknown as { Bun?: BunLike; Deno?: DenoLike };
  if (g.Bun !== undefined) {
    const s = g.Bun.serve({
      hostname: o.host,
      port: o.port,
      fetch: (req, server) => {
        // Bun's per-request timeout takes whole seconds up to 255; 0 disables it.
        server.timeout(req, o.requestTimeoutSeconds > 255 ? 0 : o.requestTimeoutSeconds);
        // Without a usable Host (HTTP/1.0, empty, malformed) Bun gives a bare path as the URL; give the app an
        // absolute one naming this server, and keep the Host header as sent for the app's checks.
        if (req.url.startsWith("/")) {
          const authority = o.host.includes(":") && !o.host.startsWith("[") ? `[${o.host}]` : o.host;
          return fetch(new Request(`http://${authority}:${s.port}${req.url}`, req));
        }
        return fetch(req);
      },
      error: internalError,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      idleTimeout: 30,
      development: false,
    });
    return Promise.resolve({ port: s.port, stop: () => s.stop() });
  }
  if (g.Deno !== undefined) {
    const deno = g.Deno;
    return new Promise((resolve) => {
      const s = deno.serve({
        hostname: o.host,
        port: o.port,
        onListen: (a) => resolve({ port: a.port, stop: () => s.shutdown() }),
        onError: internalError,
      }, fetch);
    });
  }
  return Promise.reject(new Error("Cannot serve: neither Bun.serve nor Deno.serve is available; run with bun or deno"));
}

/** Whether `host` is a loopback address or name (where only local processes can connect). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** A command-line mistake: `nrt` exits with 2. */
export class UsageError extends Error {
  /** Creates the error with a sentence-case message. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
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
  const config = resolveRuntimeConfig({}, env);
  const containerOptions = { arch: options.arch as NrtArchName | undefined, env };
  const spec = simulatedSpec(containerOptions); // throws NRT_INVALID for an unknown --arch
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopbackHost(host);
  if (options.admin === true && !loopback && options.adminTokenFile === undefined) {
    throw new UsageError(
      `Cannot serve: --admin on ${host} would hand fault injection and model control to the network; ` +
        "give --admin-token-file FILE to confirm, or bind to 127.0.0.1",
    );
  }
  if (options.adminTokenFile !== undefined && options.admin !== true) throw new UsageError("Cannot serve: --admin-token-file needs --admin");
  const modelControl = options.modelControl ?? "none";
  if (modelControl === "explicit" && options.admin !== true) {
    throw new UsageError("Cannot serve: --model-control explicit needs --admin (its token authorizes load and unload)");
  }
  // Demo NEFFs name their target, so each simulated generation gets its own folder, private to this user.
  let dir = options.models;
  if (dir === undefined && options.demo) {
    const cache = privateCacheDir();
    dir = join(cache, "demo-models", spec.name);
    await ensurePrivateDir(dir, cache);
  }
  if (dir === undefined) throw new UsageError("Cannot serve: --models DIR is required (or --demo)");
  if (options.demo) await writeModels(dir, await buildDemoModels(spec.name));
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes;
  // The admin token: made (or read from --admin-token-file) before anything listens.
  let token: string | undefined;
  if (options.admin === true) token = options.adminTokenFile === undefined ? newAdminToken() : (await adminToken(options.adminTokenFile)).token;
  // The dashboard's taps: executions and the log (kernel printf arrives at INFO/WARNING), Q7 dispatches and faults.
  const monitor = new DashboardMonitor();
  const sim = new SimDeviceView();
  const container = createNrtContainer(containerOptions);
  const portal = container.resolve(Portal);
  if (portal instanceof DeviceSimPortal) sim.attach(portal);
  let runtime: Runtime;
  try {
    const logger = monitor.wrapLogger(createConsoleLogger(config.logLevel));
    runtime = await Runtime.init({ container, env, logger, onExecution: monitor.onExecution });
  } catch (e) {
    await portal.close();
    throw e;
  }
  let repository: ModelRepository | undefined;
  try {
    const disk = directoryFiles(dir, { maxFileBytes: config.maxNeffBytes + (1 << 20), warn: (m) => runtime.log.warn(m) });
    // x.onnx is served as the NEFF it compiles to, cached by content hash (docs/onnx.md).
    const files = onnxFiles(disk, { target: spec.name as CompileTarget, cache: privateCacheDir(), log: (m) => runtime.log.info(m) });
    repository = new ModelRepository({ runtime, files });
    const names = await repository.scan();
    const failed = await repository.loadAll();
    // The Host names this server answers: on a loopback bind only its own (DNS rebinding), plus --allowed-host.
    let port = options.port ?? 8000;
    const allowedHosts = (): readonly string[] | undefined => {
      const extra = (options.allowedHosts ?? []).flatMap((h) => (h.includes(":") && !h.startsWith("[") ? [h] : [h, `${h}:${port}`]));
      if (!loopback) return extra.length > 0 ? extra : undefined;
      // A bare name (no port) is what HTTP/1.1 clients send for port 80, never what a browser sends to another port.
      const own = ["127.0.0.1", "localhost", "[::1]", host.includes(":") && !host.startsWith("[") ? `[${host}]` : host];
      return [...own.flatMap((h) => [h, `${h}:${port}`]), ...extra];
    };
    const app = createInferenceApp({
      runtime,
      repository,
      limits: { maxBodyBytes },
      dashboard: { monitor, deviceView: sim.view, faults: sim.faults },
      adminToken: token,
      modelControl,
      allowedHosts,
    });
    const server = await listen(app.fetch, { host, port, requestTimeoutSeconds: runtime.config.execTimeoutSeconds + 30 });
    port = server.port;
    // The default token file is named after the port, which only now is known (--port 0).
    const tokenFile = options.adminTokenFile ?? (token === undefined ? undefined : defaultAdminTokenFile(port));
    if (token !== undefined && options.adminTokenFile === undefined) await writeAdminToken(tokenFile!, token);
    const ready = repository.models().filter((m) => m.served !== undefined).map((m) => ({ name: m.name, inputs: m.served!.inputs }));
    const example = exampleRequest(ready);
    const curlHost = host === "127.0.0.1" || host === "0.0.0.0" || host === "::" ? "localhost" : host;
    const curl = `curl -s ${curlHost}:${port}${example.path}` + (example.body === undefined ? "" : ` -d '${example.body}'`);
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
    log(`nrt: ${names.length - failed.size} of ${names.length} model(s) from ${dir} ready on the simulated ${spec.name} device` +
      ` (${runtime.visibleVncCount} logical cores)`);
    log(`nrt: listening on ${url}`);
    if (token !== undefined) {
      log(`nrt: operator actions on; the admin token is in ${tokenFile} (mode 600); send it as "Authorization: Bearer <token>"`);
      log(`nrt: dashboard at ${url}/#token=${token}`);
    } else {
      log(`nrt: dashboard at ${url}/ (read-only)`);
    }
    if (modelControl === "explicit") log("nrt: model control explicit: POST /v2/repository/models/<m>/load|unload with the admin token");
    log(`try: ${curl}`);
    let closing: Promise<void> | undefined;
    const repo = repository;
    return {
      url,
      port,
      curl,
      example,
      adminToken: token,
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

/** Parses `nrt serve` arguments (`node:util` `parseArgs`). */
export function parseServeArgs(args: readonly string[]): ServeOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        models: { type: "string" },
        arch: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        "max-body": { type: "string" },
        demo: { type: "boolean" },
        admin: { type: "boolean" },
        "admin-token-file": { type: "string" },
        "model-control": { type: "string" },
        "allowed-host": { type: "string", multiple: true },
      },
    });
  } catch (e) {
    throw new UsageError(`Cannot parse nrt serve arguments: ${e instanceof Error ? e.message : String(e)}`);
  }
  const v = parsed.values;
  const int = (flag: string, text: string, lo: number, hi: number): number => {
    const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(n) || n < lo || n > hi) throw new UsageError(`Cannot parse nrt serve arguments: --${flag} ${text} is not an integer from ${lo} to ${hi}`);
    return n;
  };
  const o: { -readonly [K in keyof ServeOptions]: ServeOptions[K] } = {};
  if (v.models !== undefined) o.models = v.models;
  if (v.arch !== undefined) o.arch = v.arch;
  if (v.port !== undefined) o.port = int("port", v.port, 0, 65535);
  if (v.host !== undefined) o.host = v.host;
  if (v["max-body"] !== undefined) o.maxBodyBytes = int("max-body", v["max-body"], 1, Number.MAX_SAFE_INTEGER);
  if (v.demo === true) o.demo = true;
  if (v.admin === true) o.admin = true;
  if (v["admin-token-file"] !== undefined) o.adminTokenFile = v["admin-token-file"];
  if (v["model-control"] !== undefined) {
    const m = v["model-control"];
    if (m !== "none" && m !== "explicit") throw new UsageError(`Cannot parse nrt serve arguments: --model-control ${m} is not none or explicit`);
    o.modelControl = m;
  }
  if (v["allowed-host"] !== undefined) o.allowedHosts = v["allowed-host"];
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
