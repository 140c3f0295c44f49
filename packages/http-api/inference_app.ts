/**
 * The inference server as a Hono app over Web-standard `Request`/`Response` only: the Open Inference Protocol v2
 * REST endpoints (health, server and model metadata, model ready, infer), Triton's model repository, statistics and
 * binary tensor extensions, and Prometheus `/metrics`; optionally the live device dashboard (`GET /`, docs/dashboard.md) with its
 * operator actions behind `admin`. Composition roots hand `app.fetch` to `Bun.serve` or
 * `Deno.serve`; tests call `app.request(...)` without a port.
 *
 * Spec: ../shared/fixtures/oip/inference_rest.md and open_inference_rest.yaml; docs/rest-api.md for the status
 * mapping and the limits.
 *
 * @module
 */
import type { Logger, Runtime } from "@nrt/core";
import { type Context, Hono } from "hono";
import { RegExpRouter } from "hono/router/reg-exp-router";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { accessControl, type ModelControlMode } from "./access.ts";
import { BodyBudget, parseJson, readBody } from "./body.ts";
import { HttpError, toHttpError } from "./http_error.ts";
import { type InferPlan, parseInferRequest, requestBodyLimit } from "./infer_request.ts";
import { INFERENCE_HEADER_CONTENT_LENGTH, inferResponse } from "./infer_response.ts";
import { type FailureReason, InferenceMetrics } from "./metrics.ts";
import { DashboardMonitor } from "./dashboard/dashboard_monitor.ts";
import { type DashboardOptions, registerDashboard } from "./dashboard/dashboard_routes.ts";
import { instanceMetadata, modelMetadata } from "./model_metadata.ts";
import { isValidModelName, type ModelRepository, notReadyError, type RepositoryModel } from "./model_repository.ts";
import { readUpload, uploadBodyLimit } from "./model_upload.ts";
import { newTiming } from "./served_model.ts";
import { type NeuronActivity, neuronStatus } from "./neuron_activity.ts";
import { TRACE_VIEWER_HTML, TRACE_VIEWER_SCRIPT } from "./trace_viewer.ts";

/** Bounds on what one request, and all requests together, may make the server do (docs/security.md). */
export interface InferenceLimits {
  /** Largest request body in bytes, chunked or not (default 64 MiB); an inference is bounded by its model too. */
  readonly maxBodyBytes?: number;
  /** Largest JSON part of an inference request (default 4 MiB): larger tensors travel as binary data. */
  readonly maxJsonBytes?: number;
  /** Deepest JSON nesting (default 64). */
  readonly maxJsonDepth?: number;
  /** Most entries in an inference request's `outputs` (default 256). */
  readonly maxRequestedOutputs?: number;
  /** Request-body bytes held at once across requests (default: `maxBodyBytes`); beyond, requests wait. */
  readonly bodyBudgetBytes?: number;
  /** Longest wait for room in the body budget before a 503, ms (default 30 000). */
  readonly bodyBudgetWaitMs?: number;
  /** Longest time a request body may take to arrive, ms (default 60 000); then 408. */
  readonly bodyDeadlineMs?: number;
  /**
   * Largest model file a load may upload, in bytes before base64 (default 21 MiB: the 20 MiB NEFF payload cap and
   * 1 MiB of header and compression slack, as the repository's file cap).
   */
  readonly maxUploadBytes?: number;
}

/** The default {@linkcode InferenceLimits}. */
export const DEFAULT_LIMITS: Required<Omit<InferenceLimits, "bodyBudgetBytes">> = {
  maxBodyBytes: 64 * 1024 * 1024,
  maxJsonBytes: 4 * 1024 * 1024,
  maxJsonDepth: 64,
  maxRequestedOutputs: 256,
  bodyBudgetWaitMs: 30_000,
  bodyDeadlineMs: 60_000,
  maxUploadBytes: 21 * 1024 * 1024,
};

/** Options of {@linkcode createInferenceApp}. */
export interface InferenceAppOptions {
  /** The runtime the models run on. */
  readonly runtime: Runtime;
  /** The models. */
  readonly repository: ModelRepository;
  /** Request limits (defaults: {@linkcode DEFAULT_LIMITS}). */
  readonly limits?: InferenceLimits;
  /** Logger (default: the runtime's). */
  readonly logger?: Logger;
  /** Counters (default: a new set over `repository`, labelled with the versions it serves; pass one to read it from outside). */
  readonly metrics?: InferenceMetrics;
  /**
   * Serve the device dashboard at `GET /` and `GET /dashboard` with its JSON and event stream under `/v2/dashboard/`
   * (`true`: without a monitor or device view). Default: off.
   */
  readonly dashboard?: DashboardOptions | boolean;
  /**
   * The bearer token that enables the dashboard's operator actions (load/unload a model, inject and clear faults)
   * and explicit model control; without it the actions answer 403 (docs/security.md).
   */
  readonly adminToken?: string;
  /**
   * Triton's model-control mode: `"none"` (default) refuses `POST /v2/repository/models/{m}/load|unload` with
   * 403; `"explicit"` allows them with the admin token.
   */
  readonly modelControl?: ModelControlMode;
  /**
   * `Host` values the server answers (`host:port`); other hosts get 403 before routing. Pass them when bound to a
   * loopback address (DNS rebinding). Default: any. A function is asked at every request; return a new array when
   * the list changes (the same array is not read again).
   */
  readonly allowedHosts?: readonly string[] | (() => readonly string[] | undefined);
  /**
   * The NeuronCores' activity (hooked to the runtime's `onExecution`): serves the read-only status document
   * `GET /v2/neuron/status` that `nrt monitor` reads, and the neuron-monitor exporter's metric names on `/metrics`
   * (docs/neuron-tools.md). Default: neither.
   */
  readonly activity?: NeuronActivity;
  /**
   * The last execution as a Chrome Trace Event document (`nrt serve` with `NEURON_RT_INSPECT_ENABLE`): serves it,
   * read-only, at `GET /v2/neuron/trace` and drawn by the viewer page `GET /v2/neuron/trace/view`; `undefined`
   * before the first execution (docs/neuron-tools.md). Default: off.
   */
  readonly inspect?: () => unknown;
}

/** The server name in `GET /v2`. */
export const SERVER_NAME = "nrt";
/** The server version in `GET /v2`. */
export const SERVER_VERSION = "0.1.0";
/** The protocol extensions the server implements, as Triton names them. */
export const SERVER_EXTENSIONS: readonly string[] = ["binary_tensor_data", "model_repository", "statistics"];

const micros = (from: number): number => Math.round((performance.now() - from) * 1000);

function failureReason(status: number): FailureReason {
  if (status === 503) return "REJECTED";
  return status >= 500 ? "BACKEND" : "OTHER";
}

/**
 * The inference server as a Web-standard handler: `fetch` for a server (`Deno.serve`, `Bun.serve`), `request` to
 * call it in process (tests, embedding). It is a Hono app; only these two calls are its public surface.
 */
export interface InferenceApp {
  /** Answers one request. */
  fetch(request: Request): Response | Promise<Response>;
  /** Answers a request built from a path or URL and `RequestInit`, as `fetch` would (a path is on `http://localhost`). */
  request(input: string | Request | URL, init?: RequestInit): Response | Promise<Response>;
}

/**
 * Creates the inference server app.
 *
 * @param options Runtime, repository, limits, logger.
 * @returns A Hono app; serve `app.fetch`.
 *
 * @example Ask a server whether it is live
 * ```ts ignore
 * const app = createInferenceApp({ runtime: rt, repository: repo });
 * const res = await app.request("/v2/health/live");
 * console.log(res.status); // 200
 * ```
 */
export function createInferenceApp(options: InferenceAppOptions): InferenceApp {
  const { runtime: rt, repository: repo } = options;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const budget = new BodyBudget(options.limits?.bodyBudgetBytes ?? limits.maxBodyBytes, limits.bodyBudgetWaitMs);
  const log = options.logger ?? rt.log;
  const metrics = options.metrics ?? new InferenceMetrics({ repository: repo });
  const dashboard = options.dashboard === true ? {} : options.dashboard === false ? undefined : options.dashboard;
  const monitor = dashboard === undefined ? undefined : dashboard.monitor ?? new DashboardMonitor();
  const access = accessControl({
    adminToken: options.adminToken,
    modelControl: options.modelControl,
    allowedHosts: options.allowedHosts,
  });
  const app = new Hono();
  const allowed = new Map<string, string[]>();

  // Host and Origin before any route (docs/security.md): checked first by every handler, and by the 404/405 handler.
  // Not a middleware, and no 405 route per path beside the real one: a request then matches one handler, which Hono
  // calls directly instead of composing a chain for it (ours: about ten allocations less per request).
  const on = (method: "GET" | "POST", path: string, handler: (c: Context) => Response | Promise<Response>): void => {
    app.on(method, path, (c) => {
      access.checkRequest(c);
      return handler(c);
    });
    const list = allowed.get(path) ?? [];
    list.push(...(method === "GET" ? ["GET", "HEAD"] : [method]));
    allowed.set(path, list);
  };

  /** The model named in the path; 400 for a name that could be a path, 404 for an unknown model or version. */
  const modelOf = (c: Context): RepositoryModel => {
    const { m, v } = c.req.param() as { m: string; v?: string };
    return repo.lookup(m, v);
  };

  /** Reads an optional JSON object body (repository endpoints); control bodies are small unless `limit` says otherwise. */
  const optionalObject = async (c: Context, limit = 64 * 1024): Promise<Record<string, unknown>> => {
    const bytes = await readBody(c.req.raw, Math.min(limits.maxBodyBytes, limit), {
      deadlineMs: limits.bodyDeadlineMs,
    });
    if (bytes.length === 0) return {};
    const v = parseJson(bytes, limits.maxJsonDepth);
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      throw new HttpError(400, "Cannot read the request: the body must be a JSON object");
    }
    return v as Record<string, unknown>;
  };

  // Health (inference_rest.md "Health/Readiness/Liveness Probes").
  on("GET", "/v2/health/live", (c) => c.json({ live: true }));
  on("GET", "/v2/health/ready", (c) => {
    // Ready: the runtime is up and every model the server was asked to serve is loaded, warmed up and not poisoned.
    const r = repo.readiness();
    if (!r.ready) throw new HttpError(503, `Server is not ready: ${r.reason}`);
    return c.json({ ready: true });
  });

  // Server metadata ("Server Metadata").
  const serverMetadata = (c: Context): Response =>
    c.json({ name: SERVER_NAME, version: SERVER_VERSION, extensions: SERVER_EXTENSIONS });
  on("GET", "/v2", serverMetadata);
  on("GET", "/v2/", serverMetadata);

  // Statistics extension. `GET /v2/models/stats` (every model's) is answered by the `/v2/models/:m` route below, so
  // that "stats" is never taken for a model name: a static route beside the `:m` routes makes Hono fall back from its
  // RegExpRouter (0.3 µs per match) to its trie router (1.35 µs, and garbage per match) for every request (ours).
  const allStats = (c: Context): Response =>
    c.json({ model_stats: repo.models().map((m) => metrics.modelStatistics(m.name)) });
  const stats = (c: Context): Response => c.json({ model_stats: [metrics.modelStatistics(modelOf(c).name)] });
  on("GET", "/v2/models/:m/stats", stats);
  on("GET", "/v2/models/:m/versions/:v/stats", stats);

  // Model metadata ("Model Metadata"): platform "neuron", protocol datatypes, and the instances (ours).
  const metadata = (c: Context): Response => {
    const m = modelOf(c);
    return c.json({ ...modelMetadata(m), instances: instanceMetadata(m) });
  };
  on("GET", "/v2/models/:m", (c) => c.req.param("m") === "stats" ? allStats(c) : metadata(c));
  on("GET", "/v2/models/:m/versions/:v", metadata);

  // Model ready ("Model Ready").
  const ready = (c: Context): Response => {
    const m = modelOf(c);
    if (m.state !== "READY" || m.reason !== "") throw notReadyError(m);
    return c.json({ name: m.name, ready: true });
  };
  on("GET", "/v2/models/:m/ready", ready);
  on("GET", "/v2/models/:m/versions/:v/ready", ready);

  // Inference ("Inference"; binary tensor data extension).
  const infer = async (c: Context): Promise<Response> => {
    const t0 = performance.now();
    const m = modelOf(c);
    const timing = newTiming();
    try {
      const served = m.served;
      if (m.state !== "READY" || served === undefined || served.notReadyReason !== undefined) {
        await c.req.raw.body?.cancel().catch(() => {});
        throw notReadyError(m);
      }
      // The model's signature bounds the body before a byte is read; the budget bounds all bodies together.
      const limit = requestBodyLimit(served, limits.maxBodyBytes);
      const declared = Number(c.req.header("content-length") ?? NaN);
      const want = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
      // Most requests find room at once: they go on without awaiting a promise for it.
      const release = budget.tryReserve(want) ?? await budget.reserve(want);
      try {
        const body = await readBody(c.req.raw, limit, { deadlineMs: limits.bodyDeadlineMs });
        const plan = parseInferRequest(body, c.req.header(INFERENCE_HEADER_CONTENT_LENGTH) ?? null, served, limits);
        // The request's signal aborts when the client leaves: a request still queued is then dropped unrun. It is
        // read only if the request has to wait (Deno warns once a served request's signal is read): the request
        // itself is passed, not a closure over this handler's context.
        const outputs = await served.infer(plan.inputs, outputNames(plan), timing, c.req.raw);
        const res = inferResponse(m.name, m.version, plan, outputs);
        metrics.recordRequest(m.name, micros(t0), timing);
        return res;
      } finally {
        release();
      }
    } catch (e) {
      const err = toHttpError(e);
      metrics.recordRequest(m.name, micros(t0), timing, failureReason(err.status));
      throw err;
    } finally {
      monitor?.notify();
    }
  };
  on("POST", "/v2/models/:m/infer", infer);
  on("POST", "/v2/models/:m/versions/:v/infer", infer);

  // Model repository extension.
  on("POST", "/v2/repository/index", async (c) => {
    const body = await optionalObject(c);
    if (body.ready !== undefined && typeof body.ready !== "boolean") {
      throw new HttpError(400, `Cannot read the request: "ready" must be a boolean`);
    }
    await repo.scan();
    const index = repo.index().filter((e) => body.ready !== true || (e.state === "READY" && e.reason === ""));
    return c.json(index);
  });
  const unload = async (c: Context): Promise<Response> => {
    const m = modelOf(c);
    access.requireModelControl(c, `unload model "${m.name}"`);
    await optionalObject(c);
    try {
      await repo.unload(m.name);
    } finally {
      monitor?.notify();
    }
    return c.json({ name: m.name, state: m.state });
  };
  // A load from the repository's files, or an upload (Triton's "file:<version>/<name>" parameter) that adds or
  // replaces the model. The credential is checked before a byte of the body is read; the body, and then the file's
  // base64 text, are bounded before anything is decoded.
  const load = async (c: Context): Promise<Response> => {
    const name = c.req.param("m") ?? "";
    if (!isValidModelName(name)) modelOf(c); // the 400 for a name that could be a path
    access.requireModelControl(c, `load model "${name}"`);
    const limit = repo.writable ? uploadBodyLimit(limits.maxUploadBytes) : undefined;
    const declared = Number(c.req.header("content-length") ?? NaN);
    const release = limit === undefined
      ? undefined
      : await budget.reserve(Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, limit) : limit);
    try {
      const body = await optionalObject(c, limit);
      const upload = readUpload(name, body, limits.maxUploadBytes);
      try {
        if (upload !== undefined) await repo.upload(name, upload);
        else await repo.load(modelOf(c).name);
      } finally {
        monitor?.notify();
      }
    } finally {
      release?.();
    }
    const m = modelOf(c);
    return c.json({ name: m.name, state: m.state });
  };
  on("POST", "/v2/repository/models/:m/load", load);
  on("POST", "/v2/repository/models/:m/unload", unload);

  // Prometheus.
  on(
    "GET",
    "/metrics",
    async (c) =>
      c.body(await metrics.render(rt, repo, options.activity), 200, {
        "content-type": "text/plain; version=0.0.4; charset=utf-8",
      }),
  );

  // The Neuron tools' status document (ours, docs/neuron-tools.md): read-only, no credential, behind the Host check.
  const activity = options.activity;
  if (activity !== undefined) {
    on("GET", "/v2/neuron/status", (c) => {
      const text = c.req.query("after") ?? "0";
      if (!/^[0-9]{1,15}$/.test(text)) {
        throw new HttpError(400, `Cannot read the status: after=${text.slice(0, 32)} is not a sequence number`);
      }
      return c.json(neuronStatus(rt, activity, Number(text)));
    });
  }
  const inspect = options.inspect;
  if (inspect !== undefined) {
    on("GET", "/v2/neuron/trace", (c) => {
      const trace = inspect();
      if (trace === undefined) {
        throw new HttpError(404, "Cannot answer the trace: no execution has finished since the server started");
      }
      return c.json(trace);
    });
    // The viewer page (ours): same-origin script only, as the dashboard.
    const headers = {
      "content-security-policy":
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
      "x-content-type-options": "nosniff",
      "cache-control": "no-cache",
    };
    on(
      "GET",
      "/v2/neuron/trace/view",
      (c) => c.body(TRACE_VIEWER_HTML, 200, { "content-type": "text/html; charset=utf-8", ...headers }),
    );
    on(
      "GET",
      "/v2/neuron/trace/view.js",
      (c) => c.body(TRACE_VIEWER_SCRIPT, 200, { "content-type": "text/javascript; charset=utf-8", ...headers }),
    );
  }

  if (dashboard !== undefined && monitor !== undefined) {
    registerDashboard({
      on,
      readObject: optionalObject,
      runtime: rt,
      repository: repo,
      metrics,
      monitor,
      access,
      options: dashboard,
      server: { name: SERVER_NAME, version: SERVER_VERSION },
    });
  }

  // A request no route takes: a known path with another method is 405 with Allow, any other 404.
  const known = new RegExpRouter<readonly string[]>();
  for (const [path, methods] of allowed) known.add("ALL", path, methods);
  app.notFound((c) => {
    access.checkRequest(c);
    // c.req.path, never new URL(c.req.url): a request without a valid Host has no URL to parse (docs/security.md).
    const methods = known.match(c.req.method, c.req.path)[0][0]?.[0];
    if (methods !== undefined) {
      throw new HttpError(
        405,
        `Cannot ${c.req.method} ${c.req.path.slice(0, 256)}: allowed methods are ${methods.join(", ")}`,
        { headers: { allow: methods.join(", ") } },
      );
    }
    return c.json({ error: `Cannot ${c.req.method} ${c.req.path.slice(0, 256)}: no such endpoint` }, 404);
  });
  app.onError((e, c) => {
    const err = toHttpError(e);
    // A 503 (busy, not ready) or 504 is the client's to retry, not a server fault: logging each would let a flood of them
    // flood the log (docs/security.md).
    if (err.status === 500) log.error(`${c.req.method} ${c.req.path.slice(0, 256)}: ${err.message}`);
    else if (err.status > 500) log.debug(`${c.req.method} ${c.req.path.slice(0, 256)}: ${err.message}`);
    return c.json({ error: err.message }, err.status as ContentfulStatusCode, err.headers);
  });
  return app;
}

/** The names of the outputs a plan returns (a loop, not `map` with a callback: this runs at every request). */
function outputNames(plan: InferPlan): string[] {
  const names: string[] = [];
  for (const o of plan.outputs) names.push(o.tensor.name);
  return names;
}
