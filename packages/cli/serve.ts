/**
 * `nrt serve`: the inference server's composition root. It brings up the runtime on the embedded simulated device
 * (or on a device daemon's, `--device unix:PATH`), reads a model repository folder in its flat or Triton-style layout
 * (`--model-name` for a single model's folder, as KServe writes it), serves the Open Inference Protocol over REST
 * (`@nrt/http-api` on `Bun.serve` or `Deno.serve`) and over gRPC (`@nrt/grpc-api`, `--grpc-port`), both on the same
 * repository and counters. With `--demo` (what `npm start` runs) it first writes demo models built from the reference
 * kernels. It also serves the live device dashboard (`GET /`, docs/dashboard.md): executions and the log are tapped
 * through a `DashboardMonitor`, the Q7 cores and the fault API through a {@linkcode SimDeviceView}; `--admin` turns
 * on its operator actions and, with `--model-control explicit`, repository load, unload and upload.
 *
 * SIGINT/SIGTERM drain it: both listeners stop accepting (a request on a connection kept alive gets 503), the
 * requests and calls in flight finish up to `--drain-timeout`, then the ones still queued are refused, the models
 * unload (after the executions running), the runtime closes (`nrt_close`) and the process exits 0. Ours
 * (docs/rest-api.md, "Shutdown").
 *
 * @module
 */
import {
  createConsoleLogger,
  envFromProcess,
  type ExecutionEvent,
  type HostSpan,
  type Portal,
  resolveRuntimeConfig,
  Runtime,
} from "@nrt/core";
import { type DeviceAgentMode, DeviceSimPortal } from "@nrt/device-sim";
import type { GrpcInferenceServer } from "@nrt/grpc-api";
import {
  createInferenceApp,
  DashboardMonitor,
  DEFAULT_LIMITS,
  filesFromMap,
  InferenceMetrics,
  isValidModelName,
  type ModelControlMode,
  ModelRepository,
  NeuronActivity,
  type RepositoryFiles,
} from "@nrt/http-api";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { adminToken, defaultAdminTokenFile, newAdminToken, removeAdminToken, writeAdminToken } from "./admin_token.ts";
import { type CommandSpec, type OptionValues, parseArgsOptions } from "./command_args.ts";
import type { CompileTarget } from "./compile_command.ts";
import { createNrtContainer, nrtPlugins, PortalToken, simulatedSpec } from "./container.ts";
import { parseAgentMode } from "./device_daemon.ts";
import { DrainGate } from "./http_listener.ts";
import { announce, type Announced, NRT_RUNTIME_VERSION, ownCommandLine } from "./neuron_discovery.ts";
import { InspectRecorder } from "./inspect_recorder.ts";
import { serveHttp, shutdownSignals, signalExitCode } from "./platform.ts";
import { DEFAULT_COMPILE_TIMEOUT_MS, OnnxCompiler } from "./onnx_compiler.ts";
import { onnxFiles, type OnnxFilesOptions } from "./onnx_source.ts";
import { ensurePrivateDir, NEFF_FILE_SLACK_BYTES, privateCacheDir, writeModels } from "./repository_dir.ts";
import { layoutFiles } from "./repository_layout.ts";
import { buildDemoModels, demoModelConfigs, exampleRequest } from "./serve_demo.ts";
import { SimDeviceView } from "./sim_device_view.ts";
import { connectDeviceDaemon, formatAddress, parseAddress } from "./transports.ts";

export { buildDemoModels } from "./serve_demo.ts";

/** The usage line of `nrt serve`. */
export const SERVE_USAGE: string =
  "nrt serve --models DIR [--model-name NAME] [--arch A] [--agents M] [--device ADDRESS] [--host H] [--port P] [--grpc-port P]\n" +
  "          [--max-body BYTES] [--body-timeout S] [--drain-timeout S] [--compile-timeout S] [--demo]\n" +
  "          [--admin [--admin-token-file FILE]] [--model-control none|explicit] [--allowed-host NAME ...]";

/** What `nrt serve` does, under its usage line. */
export const SERVE_SUMMARY: string =
  "Serve the models of DIR over the Open Inference Protocol v2, REST on --port (default 8000) and gRPC on\n" +
  "--grpc-port (default 8001, 0: off), on the simulated device (or a device daemon's: --device unix:PATH).\n" +
  "DIR holds <name>.neff / <name>.onnx files or Triton-style <name>/<version>/model.neff folders; --model-name\n" +
  "names the single model of a folder holding <version>/model.neff. --demo writes the demo models first\n" +
  "(npm start), keeping any model DIR already has under a demo model's name; --admin enables the dashboard's\n" +
  "operator actions behind a per-start token (refused on a non-loopback host without --admin-token-file);\n" +
  "--model-control explicit allows repository load, unload and upload with that token (docs/security.md).\n" +
  "SIGTERM drains: in-flight requests get --drain-timeout seconds (default 25) before the server unloads and\n" +
  "exits 0";

/** Seconds a shutdown lets the requests in flight finish, by default (within Kubernetes' 30-second grace period). */
export const DEFAULT_DRAIN_SECONDS = 25;

/** `nrt serve`'s gRPC port unless `--grpc-port` says otherwise: 8001, as Triton's (ours). */
export const SERVE_GRPC_PORT = 8001;

/**
 * How `nrt serve` is called: its usage, summary and option table. {@linkcode parseServeArgs} parses by the table (with
 * its own strict messages) and `nrt serve --help` lists it.
 */
export const SERVE_COMMAND = {
  name: "serve",
  usage: SERVE_USAGE,
  summary: SERVE_SUMMARY,
  options: {
    models: {
      type: "string",
      value: "DIR",
      description: "the model repository folder (default with --demo: a private cache folder per generation)",
    },
    "model-name": {
      type: "string",
      value: "NAME",
      description: "serve DIR as the one model NAME: DIR holds <version>/model.neff, model.neff, config.json (KServe)",
    },
    arch: {
      type: "string",
      value: "A",
      description:
        "the generation to simulate: sunda, cayman, mariana or trn1/inf2/trn2 (default: NRT_ARCH, else cayman)",
    },
    device: {
      type: "string",
      value: "ADDRESS",
      description: "a device daemon's device (nrt device-sim): unix:PATH, a path, HOST:PORT on loopback, or PORT; " +
        "sim: the embedded simulator (default)",
    },
    agents: {
      type: "string",
      value: "M",
      description:
        "where the embedded simulator's device runs: device (default: a Worker per device), core (a Worker " +
        "per NeuronCore) or inline (on the server's main thread: no thread hop per request, for small machines)",
    },
    host: {
      type: "string",
      value: "H",
      description: "the interface REST and gRPC bind (default 127.0.0.1; 0.0.0.0 for every interface)",
    },
    port: { type: "string", value: "P", description: "the REST port (default 8000; 0: the OS picks one)" },
    "grpc-port": { type: "string", value: "P", description: "the gRPC port (default 8001; 0: no gRPC server)" },
    "max-body": {
      type: "string",
      value: "BYTES",
      description: "the largest request body, and the largest gRPC message (default 67108864, 64 MiB)",
    },
    "body-timeout": {
      type: "string",
      value: "S",
      description: `seconds a request body, or a gRPC message, may take to arrive: then 408 (gRPC DEADLINE_EXCEEDED) ` +
        `(1 to 3600, default ${DEFAULT_LIMITS.bodyDeadlineMs / 1000})`,
    },
    "drain-timeout": {
      type: "string",
      value: "S",
      description:
        `seconds SIGINT/SIGTERM lets requests in flight finish before refusing queued ones (0 to 3600, default ${DEFAULT_DRAIN_SECONDS})`,
    },
    "compile-timeout": {
      type: "string",
      value: "S",
      description: "seconds one ONNX model may take to compile: then it is stopped and its load fails " +
        `(1 to 86400, default ${DEFAULT_COMPILE_TIMEOUT_MS / 1000})`,
    },
    demo: {
      type: "boolean",
      description: "write the demo models into the repository first (what npm start runs); with --models DIR, a " +
        "model DIR already has under a demo model's name is kept and that demo model is not written",
    },
    admin: {
      type: "boolean",
      description: "turn on the dashboard's operator actions behind a per-start token (a non-loopback --host needs " +
        "--admin-token-file)",
    },
    "admin-token-file": {
      type: "string",
      value: "FILE",
      description: "with --admin: the token's file, read when it exists (private to this user), else created with a " +
        "new token; never printed nor removed (default: a new token each start, printed in the dashboard URL, in " +
        "$XDG_RUNTIME_DIR/nrt/admin-token-<port>, else ~/.nrt/…, removed at shutdown)",
    },
    "model-control": {
      type: "string",
      value: "MODE",
      description:
        "none (default) or explicit: repository load, unload and upload with the admin token (needs --admin)",
    },
    "allowed-host": {
      type: "string",
      multiple: true,
      value: "NAME",
      description: "a Host the server also answers, NAME or NAME:PORT (without it a loopback bind answers only " +
        "loopback names, another bind any Host)",
    },
  },
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

/**
 * How long the HTTP gate must see no request before the listener stops, once the requests in flight are done (ours,
 * see `DrainGate.quiet`): a request a client sent on a kept-alive connection before the drain then gets its 503 instead
 * of a reset.
 */
const DRAIN_QUIET_MS = 100;
/** The longest wait for that quiet spell once the requests in flight are done (clients that keep sending are refused). */
const DRAIN_QUIET_MAX_MS = 1000;

/**
 * Seconds the REST listener's per-request timeout leaves beyond the longest a request may legitimately take, so that
 * the server's own answer (an execution's result or its 504, a stalled body's 408) always comes before the transport
 * drops the connection. Ours.
 */
const REQUEST_TIMEOUT_MARGIN_SECONDS = 30;

/**
 * The REST listener's per-request timeout (Bun's; Deno.serve sets none), in whole seconds: the longer of the execution
 * timeout and the body deadline, plus a margin. Ours (docs/rest-api.md, "Limits"). Equal to the body deadline, Bun
 * would drop a stalled body's connection, with no answer, when its 408 was due (that 408 comes up to a second after
 * the deadline, `body.ts`): the deadline is counted too, not only the execution timeout.
 *
 * @param execTimeoutSeconds `NEURON_RT_EXEC_TIMEOUT`, the longest an execution may run.
 * @param bodyDeadlineMs The app's `bodyDeadlineMs`, the longest a request body may take to arrive.
 * @returns Seconds for `serveHttp`'s `requestTimeoutSeconds`.
 */
export function httpRequestTimeoutSeconds(execTimeoutSeconds: number, bodyDeadlineMs: number): number {
  return Math.ceil(Math.max(execTimeoutSeconds, bodyDeadlineMs / 1000)) + REQUEST_TIMEOUT_MARGIN_SECONDS;
}

/**
 * The REST listener's per-request timeout with model control on: none for a repository load (`POST
 * /v2/repository/models/NAME/load`, which may carry an ONNX upload), {@linkcode httpRequestTimeoutSeconds} for every
 * other request. Ours. A load's parts each have their own limit: its body the app's deadline (408), its compile
 * `--compile-timeout` after the compiles queued before it (one at a time), its warm-up the execution timeout; and
 * only the admin token reaches it. With one transport timeout for all, Bun dropped an upload compiling past 90 s (the
 * defaults) unanswered, although the server went on to load the model.
 *
 * @param execTimeoutSeconds `NEURON_RT_EXEC_TIMEOUT`.
 * @param bodyDeadlineMs The app's `bodyDeadlineMs`.
 * @returns Seconds (0: no limit) for `serveHttp`'s `requestTimeoutSeconds`, chosen per request.
 */
export function httpLoadRequestTimeout(execTimeoutSeconds: number, bodyDeadlineMs: number): (req: Request) => number {
  const base = httpRequestTimeoutSeconds(execTimeoutSeconds, bodyDeadlineMs);
  return (req) => (req.method === "POST" && isRepositoryLoad(req.url) ? 0 : base);
}

/** Whether a URL (absolute, or a bare path as Bun gives without a `Host`) names `/v2/repository/models/*\/load`. */
function isRepositoryLoad(url: string): boolean {
  const start = url.startsWith("/") ? 0 : url.indexOf("/", url.indexOf("://") + 3);
  if (start < 0 || !url.startsWith(LOAD_PREFIX, start)) return false;
  const q = url.indexOf("?", start);
  const end = q < 0 ? url.length : q;
  // One path segment between the prefix and "/load": the model's name.
  const slash = url.indexOf("/", start + LOAD_PREFIX.length);
  return slash > start + LOAD_PREFIX.length && slash === end - 5 && url.startsWith("/load", slash);
}

const LOAD_PREFIX = "/v2/repository/models/";

/** Options of {@linkcode startServer}. */
export interface ServeOptions {
  /** The repository directory (default with `demo`: a private cache folder). */
  readonly models?: string;
  /** The model whose files are at the top of `models` (`<version>/model.neff`, `model.neff`, `config.json`). */
  readonly modelName?: string;
  /** Silicon to simulate: `sunda`, `cayman`, `mariana` or `trn1`/`inf2`/`trn2` (default: `NRT_ARCH`, else `cayman`). */
  readonly arch?: string;
  /**
   * The device: absent for the embedded simulator, or the address of a device daemon (`nrt device-sim`):
   * `unix:PATH`, a path, `HOST:PORT` on a loopback host, or `PORT`.
   */
  readonly device?: string;
  /**
   * Where the embedded simulator's device runs (`--agents`, ours): `"device"` (default) an agent Worker per device,
   * `"core"` one per NeuronCore, `"inline"` on the server's main thread. Inline, an execute crosses no thread
   * boundary: on a machine with 2 CPUs `nrt serve --demo` then answered 1.0–1.57× the requests per second, and
   * 0.79–0.92× once the `nrt` command kept the allocator's pages (docs/architecture.md §5); the device's steps and
   * small ops run between the server's requests.
   */
  readonly agents?: DeviceAgentMode;
  /** REST port (default 8000; 0 picks a free one). */
  readonly port?: number;
  /**
   * gRPC port: a number (0 picks a free one), or `"off"`. Absent: no gRPC server — `nrt serve` passes 8001 unless
   * `--grpc-port` says otherwise, and `--grpc-port 0` is `"off"`.
   */
  readonly grpcPort?: number | "off";
  /** Interface both protocols bind (default `127.0.0.1`). */
  readonly host?: string;
  /**
   * Write the demo models into the repository first. Into the private cache folder (no `models`) they are rewritten
   * at every start; into the user's `models` folder only the demo models it does not have are written: a model of
   * the same name already there (any of its files or its folder) is the user's, kept as it is and named in the log.
   * Ours.
   */
  readonly demo?: boolean;
  /** Body size limit in bytes (default 64 MiB); also the largest gRPC message. */
  readonly maxBodyBytes?: number;
  /** Seconds a shutdown lets in-flight requests finish before it refuses the queued ones (default 25). */
  readonly drainTimeoutSeconds?: number;
  /** Seconds a request body (a gRPC message) may take to arrive (default 60, the app's `bodyDeadlineMs`). */
  readonly bodyTimeoutSeconds?: number;
  /** Seconds one ONNX model may take to compile before it is stopped and its load fails (default 600). */
  readonly compileTimeoutSeconds?: number;
  /**
   * Enable the dashboard's operator actions (load/unload models, inject and clear faults) behind a per-start bearer
   * token (`--admin`). Refused on a non-loopback host unless {@linkcode ServeOptions.adminTokenFile} is given.
   */
  readonly admin?: boolean;
  /**
   * The admin token's file (`--admin-token-file`): an existing private file supplies it, a missing one is created.
   * It is the operator's: the token is never logged (the dashboard line says where it is) and the file is never
   * removed. Without it, the token of this start is printed once in the dashboard URL's fragment and its default file
   * is removed at shutdown. Ours (docs/security.md).
   */
  readonly adminTokenFile?: string;
  /** Triton's model control (`--model-control`): `none` (default) or `explicit` (needs `--admin`). */
  readonly modelControl?: ModelControlMode;
  /** More `Host` names the server answers, as `host[:port]` (`--allowed-host`); loopback names are always allowed on a loopback bind. */
  readonly allowedHosts?: readonly string[];
  /** Where progress lines go (default: console). */
  readonly log?: (line: string) => void;
  /**
   * Announce the server to `nrt ls` and `nrt monitor` on this machine (`neuron_discovery.ts`; the environment names
   * the folder): `nrt serve` does; default off.
   */
  readonly announce?: Record<string, string | undefined>;
  /**
   * Trace every execution and answer the last one at `GET /v2/neuron/trace` (`NEURON_RT_INSPECT_ENABLE=1` for
   * `nrt serve`; the embedded simulator only). Default off.
   */
  readonly inspect?: boolean;
}

/** What a shutdown did. */
export interface ShutdownReport {
  /** Requests and calls still running when the drain deadline passed (0 when all finished in time). */
  readonly unfinished: number;
  /** Queued requests refused at the deadline. */
  readonly refused: number;
}

/** A running server. */
export interface RunningServer {
  /** `http://host:port`. */
  readonly url: string;
  /** The REST port bound. */
  readonly port: number;
  /** The gRPC port bound, when gRPC is on. */
  readonly grpcPort: number | undefined;
  /** A request that works against the server, as a `curl` command line. */
  readonly curl: string;
  /** The same request, for a client: path and body (`undefined` for a GET). */
  readonly example: { readonly path: string; readonly body: string | undefined };
  /** The admin token of this start (with `admin`). */
  readonly adminToken?: string;
  /**
   * Graceful shutdown: stop accepting on both protocols, let the requests in flight finish up to the drain deadline,
   * refuse the ones still queued, unload, close the runtime and the device.
   */
  close(): Promise<ShutdownReport>;
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

/** The runtime on its device, and what closes the device. */
interface Device {
  readonly runtime: Runtime;
  readonly portal: Portal;
  /** The simulator, when it is embedded (the dashboard's device view reads it). */
  readonly sim: DeviceSimPortal | undefined;
}

/** Connects to a device daemon, retrying while it starts (a sidecar may come up after the server), for `waitMs`. */
async function connectDaemon(address: string, waitMs: number, log: (line: string) => void) {
  let parsed;
  try {
    parsed = parseAddress(address);
  } catch (e) {
    throw new UsageError(
      `Cannot parse nrt serve arguments: --device ${address}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if ("port" in parsed && !isLoopbackHost(parsed.hostname ?? "127.0.0.1")) {
    throw new UsageError(
      `Cannot use the device daemon at ${address}: it is not on a loopback address (the daemon serves local processes only)`,
    );
  }
  const deadline = Date.now() + waitMs;
  for (let attempt = 1;; attempt++) {
    try {
      return await connectDeviceDaemon(parsed, { name: "nrt serve" });
    } catch (e) {
      if (Date.now() >= deadline) {
        throw new Error(
          `Cannot connect to the device daemon at ${formatAddress(parsed)}: ${
            e instanceof Error ? e.message : String(e)
          }`,
          { cause: e },
        );
      }
      if (attempt === 1) log(`nrt: waiting for the device daemon at ${formatAddress(parsed)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** Brings up the runtime on the embedded simulator or on a device daemon. */
async function openDevice(
  options: ServeOptions,
  monitor: DashboardMonitor,
  log: (line: string) => void,
): Promise<Device & { readonly activity: NeuronActivity; readonly inspect?: InspectRecorder }> {
  const env = envFromProcess();
  const config = resolveRuntimeConfig({}, env);
  const containerOptions = { arch: options.arch, env, agents: options.agents };
  simulatedSpec(containerOptions); // throws NRT_INVALID for an unknown --arch
  const container = createNrtContainer(containerOptions);
  let portal: Portal = container.resolve(PortalToken);
  if (options.device !== undefined) {
    // The embedded simulator the container made is not used: the daemon is the device.
    await portal.close();
    portal = await connectDaemon(options.device, 60_000, log);
    container.register(PortalToken, { useValue: portal });
  }
  try {
    const logger = monitor.wrapLogger(createConsoleLogger(config.logLevel));
    // The Neuron tools' view (nrt monitor, /metrics): the simulator's own busy counters when it is embedded.
    const sim = portal instanceof DeviceSimPortal ? portal : undefined;
    let device = 0;
    const activity = new NeuronActivity({
      command: ownCommandLine(),
      ...(sim === undefined ? {} : { busyMs: (nc: number) => sim.busyMs(device, nc) }),
    });
    if (options.inspect === true && sim === undefined) {
      throw new UsageError(
        "Cannot serve: NEURON_RT_INSPECT_ENABLE traces the embedded simulator's timeline, which a device daemon does not share",
      );
    }
    const inspect = options.inspect === true ? new InspectRecorder() : undefined;
    const onExecution = (e: ExecutionEvent): void => {
      monitor.onExecution(e);
      activity.onExecution(e);
      inspect?.onExecution(e);
    };
    // The dashboard's timelines: the host's timed steps of one execution per NeuronCore every STEP_SAMPLE_MS; with
    // NEURON_RT_INSPECT_ENABLE, every execution's (the trace has them all).
    const onSpan = inspect === undefined ? monitor.onSpan : (s: HostSpan): void => {
      monitor.onSpan(s);
      inspect.onSpan(s);
    };
    const runtime = await Runtime.init({
      ...nrtPlugins(container),
      env,
      logger,
      onExecution,
      onSpan,
      ...(inspect === undefined ? { timeExecution: monitor.timeExecution } : {}),
    });
    device = runtime.device.index;
    if (inspect !== undefined && sim !== undefined) {
      inspect.attach(sim, device, `${runtime.spec.name} (${runtime.spec.generation})`);
    }
    return { runtime, portal, sim, activity, inspect };
  } catch (e) {
    await portal.close();
    throw e;
  }
}

/**
 * The private folder compiled ONNX models are cached in, or `undefined` (no disk cache, a warning) when it cannot be
 * made — a container with a read-only root filesystem and no home, for one.
 */
async function onnxCache(runtime: Runtime): Promise<string | undefined> {
  const cache = privateCacheDir();
  try {
    await ensurePrivateDir(join(cache, "onnx"), cache);
    return cache;
  } catch (e) {
    runtime.log.warn(
      `ONNX models are compiled at every load: cannot use the cache folder ${cache}: ${
        e instanceof Error ? e.message : String(e)
      }`,
    );
    return undefined;
  }
}

/**
 * The repository's files: the folder's layouts, `.onnx` served as the NEFF it compiles to (cached by content hash,
 * docs/onnx.md), uploads written in the model's layout and ONNX uploads compiled the same way, by `compiles`: its
 * compiler (one model at a time, off the server's thread) and the signal that stops them at shutdown.
 */
async function repositoryFiles(
  dir: string,
  options: ServeOptions,
  target: CompileTarget,
  runtime: Runtime,
  compiles: Pick<OnnxFilesOptions, "compiler" | "signal">,
): Promise<RepositoryFiles> {
  const disk = layoutFiles(dir, {
    modelName: options.modelName,
    maxFileBytes: runtime.config.maxNeffBytes + NEFF_FILE_SLACK_BYTES,
    warn: (m) => runtime.log.warn(m),
  });
  const onnx: OnnxFilesOptions = {
    target,
    cache: await onnxCache(runtime),
    log: (m) => runtime.log.info(m),
    ...compiles,
  };
  const served = onnxFiles(disk, onnx);
  return {
    list: served.list,
    read: served.read,
    version: disk.version,
    pathOf: disk.pathOf,
    write: disk.write,
    compile: async (model, bytes, config) => {
      const one = onnxFiles(
        filesFromMap({ [`${model}.onnx`]: bytes, ...(config === undefined ? {} : { [`${model}.json`]: config }) }),
        onnx,
      );
      return { neff: (await one.read(`${model}.neff`))!, config: await one.read(`${model}.json`) };
    },
  };
}

/**
 * Starts the server: runtime, repository (scanned, loaded, warmed up), the REST app and listener, the gRPC server.
 *
 * @param options Where the models are, what to simulate, where to listen.
 * @returns The running server.
 * @throws {UsageError} For options that contradict each other.
 */
export async function startServer(options: ServeOptions = {}): Promise<RunningServer> {
  const log = options.log ?? ((s: string) => console.log(s));
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopbackHost(host);
  if (options.admin === true && !loopback && options.adminTokenFile === undefined) {
    throw new UsageError(
      `Cannot serve: --admin on ${host} would hand fault injection and model control to the network; ` +
        "give --admin-token-file FILE to confirm, or bind to 127.0.0.1",
    );
  }
  if (options.adminTokenFile !== undefined && options.admin !== true) {
    throw new UsageError("Cannot serve: --admin-token-file needs --admin");
  }
  const modelControl = options.modelControl ?? "none";
  if (modelControl === "explicit" && options.admin !== true) {
    throw new UsageError(
      "Cannot serve: --model-control explicit needs --admin (its token authorizes load, unload and upload)",
    );
  }
  if (options.device !== undefined && options.agents !== undefined) {
    throw new UsageError(
      "Cannot serve: --agents and --device exclude each other (the device daemon chooses where its device runs)",
    );
  }
  if (options.device !== undefined && options.arch !== undefined) {
    throw new UsageError(
      "Cannot serve: --arch and --device exclude each other (the device daemon simulates its own generation)",
    );
  }
  if (options.modelName !== undefined && !isValidModelName(options.modelName)) {
    throw new UsageError(
      `Cannot serve: --model-name ${
        JSON.stringify(options.modelName.slice(0, 128))
      } is not a model name (1 to 128 of A-Z a-z 0-9 _ . -, no leading dot)`,
    );
  }
  if (options.models === undefined && options.demo !== true) {
    throw new UsageError("Cannot serve: --models DIR is required (or --demo)");
  }
  const drainMs = (options.drainTimeoutSeconds ?? DEFAULT_DRAIN_SECONDS) * 1000;
  // ONNX models compile in Workers, one at a time; the shutdown stops a compile still running.
  const compiler = new OnnxCompiler({
    timeoutMs: (options.compileTimeoutSeconds ?? DEFAULT_COMPILE_TIMEOUT_MS / 1000) * 1000,
  });
  const compiles = new AbortController();
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes;
  // The admin token: made (or read from --admin-token-file) before anything listens.
  let token: string | undefined;
  if (options.admin === true) {
    token = options.adminTokenFile === undefined ? newAdminToken() : (await adminToken(options.adminTokenFile)).token;
  }
  // The dashboard's taps: executions and the log (kernel printf arrives at INFO/WARNING), Q7 dispatches and faults.
  const monitor = new DashboardMonitor();
  const { runtime, portal, sim, activity, inspect } = await openDevice(options, monitor, log);
  const view = new SimDeviceView();
  if (sim !== undefined) view.attach(sim);
  const arch = runtime.spec.name as CompileTarget;
  let repository: ModelRepository | undefined;
  let grpc: GrpcInferenceServer | undefined;
  /** The default token file, once this start wrote it: removed at shutdown (or when the start fails after). */
  let ownTokenFile: string | undefined;
  const removeOwnTokenFile = async (): Promise<void> => {
    if (ownTokenFile === undefined || token === undefined) return;
    const file = ownTokenFile;
    ownTokenFile = undefined;
    try {
      await removeAdminToken(file, token);
    } catch (e) {
      runtime.log.warn(`Cannot remove the admin token file ${file}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  try {
    // Demo NEFFs name their target, so each simulated generation gets its own folder, private to this user.
    let dir = options.models;
    if (dir === undefined) {
      const cache = privateCacheDir();
      dir = join(cache, "demo-models", arch);
      await ensurePrivateDir(dir, cache);
    }
    if (options.demo) {
      // The private cache folder is ours and rewritten; the user's folder keeps every model it has.
      const { kept } = await writeModels(dir, { ...await buildDemoModels(arch), ...demoModelConfigs() }, {
        replace: options.models === undefined,
      });
      if (kept.length > 0) {
        log(
          `nrt: --demo kept ${kept.map((k) => `"${k}"`).join(", ")} of ${dir} as it is: the folder already has a ` +
            "model of that name (remove it to get the demo's)",
        );
      }
    }
    repository = new ModelRepository({
      runtime,
      files: await repositoryFiles(dir, options, arch, runtime, { compiler, signal: compiles.signal }),
      maxTensorBytes: maxBodyBytes,
    });
    const names = await repository.scan();
    const failed = await repository.loadAll();
    // One set for both protocols, each request counted under the version its model is served as.
    const metrics = new InferenceMetrics({ repository });
    // The Host names this server answers: on a loopback bind only its own (DNS rebinding), plus --allowed-host.
    let port = options.port ?? 8000;
    // Computed once per port (the port is known only once the listener is up), not at every request.
    let hostsOf: { readonly port: number; readonly list: readonly string[] | undefined } | undefined;
    const allowedHosts = (): readonly string[] | undefined => {
      if (hostsOf?.port === port) return hostsOf.list;
      const extra = (options.allowedHosts ?? []).flatMap((
        h,
      ) => (h.includes(":") && !h.startsWith("[") ? [h] : [h, `${h}:${port}`]));
      // A bare name (no port) is what HTTP/1.1 clients send for port 80, never what a browser sends to another port.
      const own = ["127.0.0.1", "localhost", "[::1]", host.includes(":") && !host.startsWith("[") ? `[${host}]` : host];
      const list = !loopback
        ? (extra.length > 0 ? extra : undefined)
        : [...own.flatMap((h) => [h, `${h}:${port}`]), ...extra];
      hostsOf = { port, list };
      return list;
    };
    // One set of limits for the app and the listener's timeout, which must outlast the body deadline.
    const bodyDeadlineMs = (options.bodyTimeoutSeconds ?? DEFAULT_LIMITS.bodyDeadlineMs / 1000) * 1000;
    const limits = { maxBodyBytes, bodyDeadlineMs };
    const app = createInferenceApp({
      runtime,
      repository,
      metrics,
      limits,
      dashboard: { monitor, deviceView: view.view, faults: view.faults },
      adminToken: token,
      modelControl,
      allowedHosts,
      activity,
      ...(inspect === undefined ? {} : { inspect: () => inspect.lastTrace() }),
    });
    const gate = new DrainGate(app.fetch);
    const server = await serveHttp(gate.fetch, {
      host,
      port,
      requestTimeoutSeconds: modelControl === "explicit"
        ? httpLoadRequestTimeout(runtime.config.execTimeoutSeconds, limits.bodyDeadlineMs)
        : httpRequestTimeoutSeconds(runtime.config.execTimeoutSeconds, limits.bodyDeadlineMs),
    });
    port = server.port;
    let grpcPort: number | undefined;
    if (options.grpcPort !== undefined && options.grpcPort !== "off") {
      // Loaded here, not with this module: grpc-js is 15–21 MiB resident and 65 ms to import, which every other
      // user of `@nrt/cli` (the composition root, the other commands, a server with `--grpc-port 0`) would pay.
      try {
        const { createGrpcInferenceServer } = await import("@nrt/grpc-api");
        grpc = createGrpcInferenceServer({
          runtime,
          repository,
          metrics,
          limits: { maxReceiveMessageBytes: maxBodyBytes, messageDeadlineMs: bodyDeadlineMs },
        });
        grpcPort = (await grpc.listen(host, options.grpcPort)).port;
      } catch (e) {
        await server.stop(true);
        throw e;
      }
    }
    // The default token file is named after the port, which only now is known (--port 0). This start made it, so
    // its shutdown removes it; a file of --admin-token-file is the operator's and stays.
    const tokenFile = options.adminTokenFile ?? (token === undefined ? undefined : defaultAdminTokenFile(port));
    if (token !== undefined && options.adminTokenFile === undefined) {
      await writeAdminToken(tokenFile!, token);
      ownTokenFile = tokenFile;
    }
    const ready = repository.models().filter((m) => m.served !== undefined).map((m) => ({
      name: m.name,
      inputs: m.served!.inputs,
    }));
    const example = exampleRequest(ready);
    const curlHost = host === "127.0.0.1" || host === "0.0.0.0" || host === "::" ? "localhost" : host;
    const curl = `curl -s ${curlHost}:${port}${example.path}` +
      (example.body === undefined ? "" : ` -d '${example.body}'`);
    const bracketed = host.includes(":") ? `[${host}]` : host;
    const url = `http://${bracketed}:${port}`;
    const where = sim === undefined
      ? `the ${arch} device of the daemon at ${options.device}`
      : `the simulated ${arch} device${
        sim.agents === "inline" ? " (on this thread)" : sim.agents === "core" ? " (a Worker per NeuronCore)" : ""
      }`;
    // Announced before the first line that says the server is up: whoever waits for "listening on" and then runs
    // nrt ls or nrt monitor finds it.
    let announced: Announced | undefined;
    if (options.announce !== undefined) {
      try {
        announced = await announce({
          kind: "serve",
          pid: process.pid,
          command: ownCommandLine(),
          url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "[::1]" : bracketed}:${port}`,
          runtimeVersion: NRT_RUNTIME_VERSION,
          ...(options.device === undefined
            ? { ncs: runtime.cores().flatMap((c) => c.ncs) }
            : { device: options.device }),
          started: Date.now(),
        }, options.announce);
      } catch (e) {
        runtime.log.warn(`Not announced to nrt ls / nrt monitor: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    log(
      `nrt: ${
        names.length - failed.size
      } of ${names.length} model(s) from ${dir} ready on ${where} (${runtime.visibleVncCount} logical cores)`,
    );
    log(`nrt: listening on ${url}`);
    if (grpcPort !== undefined) log(`nrt: gRPC (inference.GRPCInferenceService) on ${bracketed}:${grpcPort}`);
    if (token !== undefined) {
      log(
        `nrt: operator actions on; the admin token is in ${tokenFile} (mode 600); send it as "Authorization: Bearer <token>"`,
      );
      if (options.adminTokenFile === undefined) {
        // A token of this start only, which its file (removed at shutdown) holds too: printed once, in the fragment.
        log(`nrt: dashboard at ${url}/#token=${encodeURIComponent(token)}`);
      } else {
        // The operator's secret, kept across starts: never in the log (it would end up in the pod's logs).
        log(
          `nrt: dashboard at ${url}/ (for operator actions open ${url}/#token=<token> with the token of ${tokenFile}, ` +
            "percent-encoded; it is not printed)",
        );
      }
    } else {
      log(`nrt: dashboard at ${url}/ (read-only)`);
    }
    if (inspect !== undefined) {
      log(`nrt: inspect on (NEURON_RT_INSPECT_ENABLE): the last execution's trace at ${url}/v2/neuron/trace`);
    }
    if (modelControl === "explicit") {
      log("nrt: model control explicit: POST /v2/repository/models/<m>/load|unload with the admin token");
    }
    log(`try: ${curl}`);
    let closing: Promise<ShutdownReport> | undefined;
    const repo = repository;
    const rpc = grpc;
    const shutdown = async (): Promise<ShutdownReport> => {
      // Stop accepting: new requests (also on kept-alive connections) and calls are refused from here on.
      gate.close();
      await announced?.remove();
      // The token file this start made goes while the port is still ours (no later start can have written it yet).
      await removeOwnTokenFile();
      monitor.close(); // ends the dashboard's event streams, which the listener's stop would wait for
      // The listener stays open while the drain runs: a request on a kept-alive connection gets its 503 (and every
      // answer from here on closes its connection) instead of a reset from a listener closing idle connections.
      const grpcDrain = rpc?.drain(drainMs);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<"deadline">((r) => (timer = setTimeout(() => r("deadline"), drainMs)));
      const ended = await Promise.race([
        Promise.all([gate.quiet(DRAIN_QUIET_MS, DRAIN_QUIET_MAX_MS), grpcDrain]).then(() => "done" as const),
        deadline,
      ]);
      clearTimeout(timer);
      // A compile still running (an upload, or a load asked for over REST or gRPC) is stopped: its Worker ends.
      compiles.abort("the server is shutting down");
      let refused = 0;
      // REST's requests still running at the deadline, then gRPC's calls at its own (its drain reports them).
      let unfinished = ended === "done" ? 0 : gate.active;
      if (ended === "deadline") {
        // Requests still queued are refused; running executions cannot be stopped halfway and finish.
        refused = repo.refuseQueued("the server is shutting down");
        await server.stop(true);
      }
      try {
        unfinished += (await grpcDrain)?.unfinished ?? 0;
        await server.stop();
        await repo.close();
      } finally {
        await rpc?.close();
        await compiler.idle();
        await runtime.close();
        await portal.close();
      }
      return { unfinished, refused };
    };
    return {
      url,
      port,
      grpcPort,
      curl,
      example,
      adminToken: token,
      close: () => closing ??= shutdown(),
    };
  } catch (e) {
    await removeOwnTokenFile();
    compiles.abort("the server failed to start");
    await grpc?.close().catch(() => {});
    await compiler.idle();
    await repository?.close().catch(() => {});
    await runtime.close().catch(() => {});
    await portal.close();
    throw e;
  }
}

/**
 * Parses `nrt serve` arguments (`node:util` `parseArgs`).
 *
 * @param args The arguments after `serve`.
 * @returns The options given (defaults are applied by {@linkcode runServe}); `--grpc-port 0` is `grpcPort: "off"`.
 * @throws {UsageError} For an unknown option, a missing value or a value out of range.
 */
export function parseServeArgs(args: readonly string[]): ServeOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: parseArgsOptions(SERVE_COMMAND.options),
    });
  } catch (e) {
    throw new UsageError(`Cannot parse nrt serve arguments: ${e instanceof Error ? e.message : String(e)}`);
  }
  const v = parsed.values as OptionValues<typeof SERVE_COMMAND.options>;
  const int = (flag: string, text: string, lo: number, hi: number): number => {
    const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(n) || n < lo || n > hi) {
      throw new UsageError(`Cannot parse nrt serve arguments: --${flag} ${text} is not an integer from ${lo} to ${hi}`);
    }
    return n;
  };
  const o: { -readonly [K in keyof ServeOptions]: ServeOptions[K] } = {};
  if (v.models !== undefined) o.models = v.models;
  if (v["model-name"] !== undefined) {
    if (!isValidModelName(v["model-name"])) {
      throw new UsageError(
        `Cannot parse nrt serve arguments: --model-name ${
          JSON.stringify(v["model-name"].slice(0, 128))
        } is not a model name (1 to 128 of A-Z a-z 0-9 _ . -, no leading dot)`,
      );
    }
    o.modelName = v["model-name"];
  }
  if (v.arch !== undefined) o.arch = v.arch;
  if (v.device !== undefined && v.device !== "sim") o.device = v.device;
  if (v.agents !== undefined) o.agents = parseAgentMode(SERVE_COMMAND, v.agents);
  if (v.port !== undefined) o.port = int("port", v.port, 0, 65535);
  if (v["grpc-port"] !== undefined) {
    const p = int("grpc-port", v["grpc-port"], 0, 65535);
    o.grpcPort = p === 0 ? "off" : p;
  }
  if (v.host !== undefined) o.host = v.host;
  if (v["max-body"] !== undefined) o.maxBodyBytes = int("max-body", v["max-body"], 1, Number.MAX_SAFE_INTEGER);
  if (v["drain-timeout"] !== undefined) o.drainTimeoutSeconds = int("drain-timeout", v["drain-timeout"], 0, 3600);
  if (v["body-timeout"] !== undefined) o.bodyTimeoutSeconds = int("body-timeout", v["body-timeout"], 1, 3600);
  if (v["compile-timeout"] !== undefined) {
    o.compileTimeoutSeconds = int("compile-timeout", v["compile-timeout"], 1, 86400);
  }
  if (v.demo === true) o.demo = true;
  if (v.admin === true) o.admin = true;
  if (v["admin-token-file"] !== undefined) o.adminTokenFile = v["admin-token-file"];
  if (v["model-control"] !== undefined) {
    const m = v["model-control"];
    if (m !== "none" && m !== "explicit") {
      throw new UsageError(`Cannot parse nrt serve arguments: --model-control ${m} is not none or explicit`);
    }
    o.modelControl = m;
  }
  if (v["allowed-host"] !== undefined) o.allowedHosts = v["allowed-host"];
  return o;
}

/** Runs `nrt serve` until SIGINT or SIGTERM, then drains; returns the exit code. */
export async function runServe(args: readonly string[]): Promise<number> {
  const options = parseServeArgs(args);
  const inspect = /^(1|true|yes|on)$/i.test(process.env.NEURON_RT_INSPECT_ENABLE ?? "");
  const seconds = options.drainTimeoutSeconds ?? DEFAULT_DRAIN_SECONDS;
  // Listened for from before the server starts until the process ends (platform.ts: a Ctrl-C arrives twice through a
  // launcher). The first signal while starting stops at once, as the default action did; the first one after starts
  // the drain; a later one does not cut the drain short.
  const signals = shutdownSignals({
    onStarting: (s) => {
      console.log(`nrt: ${s} while starting: stopped`);
      process.exit(signalExitCode(s));
    },
    onAgain: (s) =>
      console.log(`nrt: ${s} again: still draining (up to ${seconds} s from the first signal); SIGKILL stops at once`),
  });
  const server = await startServer({
    ...options,
    grpcPort: options.grpcPort ?? SERVE_GRPC_PORT,
    announce: process.env,
    inspect,
  });
  const signal = await signals.started();
  console.log(`nrt: ${signal}: draining; refusing new requests, finishing those in flight (up to ${seconds} s)`);
  const report = await server.close();
  if (report.unfinished > 0) {
    console.log(
      `nrt: ${report.unfinished} request(s) still running at the deadline finished; ${report.refused} queued request(s) refused`,
    );
  }
  console.log("nrt: stopped");
  return 0;
}
