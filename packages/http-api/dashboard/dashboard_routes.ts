/**
 * The dashboard's routes: the page (`GET /`, `GET /dashboard`) and its script, the state document and its event
 * stream, and the operator actions — load/unload a model, inject or clear faults — which answer 403 unless the app
 * was created with `admin: true` (`nrt serve --admin`). See docs/dashboard.md.
 *
 * @module
 */
import type { Runtime } from "@nrt/core";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { AccessControl } from "../access.ts";
import { HttpError } from "../http_error.ts";
import type { InferenceMetrics } from "../metrics.ts";
import { isValidModelName, type ModelRepository } from "../model_repository.ts";
import { DASHBOARD_HTML } from "./dashboard_page.ts";
import { DASHBOARD_SCRIPT } from "./dashboard_script.ts";
import type { DashboardMonitor } from "./dashboard_monitor.ts";
import { type DashboardSources, dashboardState } from "./dashboard_state.ts";
import type { DeviceViewProvider, FaultControl } from "./device_view.ts";

/** Options of the dashboard (`createInferenceApp({ dashboard })`). */
export interface DashboardOptions {
  /**
   * Executions and log as they happen. Pass the one whose hooks the runtime was created with; without it the page
   * shows no running model per core and no log, and its event streams end only when clients go away.
   */
  readonly monitor?: DashboardMonitor;
  /** The device-side view (Q7 cores, faults), from the composition root. */
  readonly deviceView?: DeviceViewProvider;
  /** The fault API for the operator's fault injection (admin only). */
  readonly faults?: FaultControl;
  /** Longest gap between two events of `GET /v2/dashboard/events`, ms (default 2000). */
  readonly heartbeatMs?: number;
  /** Shortest gap between two events, ms, so that bursts coalesce (default 100). */
  readonly minIntervalMs?: number;
  /** Event streams open at once (default 16); one more answers 503 (docs/security.md). */
  readonly maxEventStreams?: number;
  /** Longest a client may take to accept one event, ms, before its stream is dropped (default 5000). */
  readonly writeTimeoutMs?: number;
}

/** What {@linkcode registerDashboard} needs from the app. */
export interface DashboardContext {
  /** Registers a route (and its 405 answer for other methods). */
  readonly on: (method: "GET" | "POST", path: string, handler: (c: Context) => Response | Promise<Response>) => void;
  /** Reads an optional JSON object body within the app's limits. */
  readonly readObject: (c: Context) => Promise<Record<string, unknown>>;
  readonly runtime: Runtime;
  readonly repository: ModelRepository;
  readonly metrics: InferenceMetrics;
  readonly monitor: DashboardMonitor;
  /** The app's access checks (admin token, JSON only). */
  readonly access: AccessControl;
  readonly options: DashboardOptions;
  readonly server: { readonly name: string; readonly version: string };
}

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "cache-control": "no-cache",
};

/** The headers of the event stream (`streamSSE`'s), for a HEAD that gets no stream. */
const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
};

const delay = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** Whether `p` settles within `ms` (its rejection counts as settled). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Adds the dashboard's routes to an app.
 *
 * @param x The app's route function, body reader, and what the dashboard shows and acts on.
 */
export function registerDashboard(x: DashboardContext): void {
  const { on, repository: repo, monitor, options } = x;
  const sources: DashboardSources = {
    runtime: x.runtime,
    repository: repo,
    metrics: x.metrics,
    monitor,
    deviceView: options.deviceView,
    admin: x.access.admin,
    faultApi: options.faults !== undefined,
    server: x.server,
  };
  const heartbeatMs = options.heartbeatMs ?? 2000;
  const minIntervalMs = options.minIntervalMs ?? 100;
  const maxStreams = options.maxEventStreams ?? 16;
  const writeTimeoutMs = options.writeTimeoutMs ?? 5000;
  let streams = 0;

  const page = (c: Context): Response =>
    c.body(DASHBOARD_HTML, 200, { "content-type": "text/html; charset=utf-8", ...SECURITY_HEADERS });
  on("GET", "/", page);
  on("GET", "/dashboard", page);
  on(
    "GET",
    "/dashboard/app.js",
    (c) => c.body(DASHBOARD_SCRIPT, 200, { "content-type": "text/javascript; charset=utf-8", ...SECURITY_HEADERS }),
  );

  /** `?after=N` / `Last-Event-ID`: the last log line the client has. */
  const logAfter = (v: string | undefined): number => {
    const n = Number(v ?? 0);
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  };
  on("GET", "/v2/dashboard/state", (c) => c.json(dashboardState(sources, logAfter(c.req.query("after")))));
  on("GET", "/v2/dashboard/events", (c) => {
    // Each stream costs a state document per event: their number is capped, and a client that stops reading is
    // dropped instead of buffering events for ever.
    if (streams >= maxStreams) {
      throw new HttpError(
        503,
        `Cannot open a dashboard event stream: ${maxStreams} are open; poll GET /v2/dashboard/state instead`,
      );
    }
    // A HEAD gets the stream's headers and nothing else: no slot, no stream. Hono answers HEAD with the GET route and
    // drops the body, so a stream started here would hold its slot until its first write timed out, and a page that
    // sends HEADs (no-cors, from any origin) could keep the dashboard's own stream out. Ours.
    if (c.req.method === "HEAD") return c.body(null, 200, SSE_HEADERS);
    streams++;
    let counted = true;
    const done = (): void => {
      if (counted) streams--;
      counted = false;
    };
    return streamSSE(c, async (stream) => {
      const gone = new AbortController();
      stream.onAbort(() => gone.abort());
      const stop = AbortSignal.any([gone.signal, monitor.closed]);
      let after = logAfter(c.req.header("last-event-id"));
      try {
        while (!stop.aborted) {
          const state = dashboardState(sources, after);
          after = state.log.at(-1)?.seq ?? after;
          const written = stream.writeSSE({ event: "state", id: String(after), data: JSON.stringify(state) });
          if (!(await settlesWithin(written, writeTimeoutMs))) {
            x.runtime.log.warn(
              `Dashboard event stream dropped: the client did not take an event within ${writeTimeoutMs} ms`,
            );
            break;
          }
          await monitor.changed(heartbeatMs, stop);
          await delay(minIntervalMs, stop);
        }
      } finally {
        done();
      }
    }, (e) => {
      done();
      x.runtime.log.warn(`Dashboard event stream ended: ${e.message}`);
      return Promise.resolve();
    });
  });

  /** Operator actions need the admin token and a JSON body; checked before anything else of the request is read. */
  const admin = (c: Context, what: string): void => {
    x.access.requireAdmin(c, what);
    x.access.requireJson(c, what);
  };
  const change = (what: "load" | "unload") => async (c: Context): Promise<Response> => {
    const name = c.req.param("m") ?? "";
    admin(c, `${what} model ${JSON.stringify(name.slice(0, 128))}`);
    if (!isValidModelName(name)) {
      throw new HttpError(
        400,
        `Invalid model name ${
          JSON.stringify(name.slice(0, 128))
        }: use 1 to 128 of A-Z a-z 0-9 _ . - and no leading dot`,
      );
    }
    await x.readObject(c);
    const m = repo.get(name);
    if (m === undefined) throw new HttpError(404, `Cannot find model "${name}": it is not in the repository`);
    x.runtime.log.info(`Operator ${what}s model "${name}"`);
    try {
      await (what === "load" ? repo.load(name) : repo.unload(name));
    } finally {
      monitor.notify();
    }
    return c.json({ name, state: m.state });
  };
  on("POST", "/v2/dashboard/models/:m/load", change("load"));
  on("POST", "/v2/dashboard/models/:m/unload", change("unload"));

  const faults = (): FaultControl => {
    if (options.faults === undefined) {
      throw new HttpError(501, "Cannot change faults: this device has no fault API (the simulator has one)");
    }
    return options.faults;
  };
  on("POST", "/v2/dashboard/faults", async (c) => {
    admin(c, "inject a fault");
    const api = faults();
    const spec = await x.readObject(c);
    let armed: { id: number; ncs: readonly number[] };
    try {
      armed = api.inject(spec);
    } catch (e) {
      if (e instanceof RangeError || e instanceof TypeError) throw new HttpError(400, e.message, { cause: e });
      throw e;
    }
    x.runtime.log.warn(
      `Operator injected fault ${armed.id} ${JSON.stringify(spec)} on NeuronCore(s) ${armed.ncs.join(", ")}`,
    );
    monitor.notify();
    return c.json({ id: armed.id, ncs: armed.ncs });
  });
  on("POST", "/v2/dashboard/faults/clear", async (c) => {
    admin(c, "clear faults");
    const api = faults();
    await x.readObject(c);
    const cleared = api.clear();
    x.runtime.log.info(`Operator cleared ${cleared} armed fault(s)`);
    monitor.notify();
    return c.json({ cleared });
  });
}
