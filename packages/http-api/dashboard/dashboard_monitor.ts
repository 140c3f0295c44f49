/**
 * What the dashboard observes as it happens, through the runtime's existing hooks: executions entering and leaving
 * their NeuronCores (`Runtime` option `onExecution`), the host's timed steps of each execution (`onSpan`), and the
 * log, which carries the kernels' stdout (INFO) and stderr (WARNING) lines from pool_stdio
 * (`packages/core/stdio/pool_stdio.ts`). From them it keeps, per NeuronCore, its busy time over the last minute
 * (utilization per second) and the last execution's steps as a timeline, and per model a latency histogram. The
 * composition root creates one monitor, hands its hooks to `Runtime.init`, and passes it to `createInferenceApp`.
 * With `timeExecution` among them, the runtime times the steps of one execution of a model per NeuronCore every
 * {@linkcode STEP_SAMPLE_MS}, and a NeuronCore's last execution is its last timed one: of the same model as the one
 * that really ran last, and at most that much older. Ours: the seeds describe no dashboard.
 *
 * @example Wire a monitor into a runtime
 * ```ts ignore
 * const monitor = new DashboardMonitor();
 * const rt = await Runtime.init({
 *   ...nrtPlugins(container),
 *   logger: monitor.wrapLogger(createConsoleLogger()),
 *   onExecution: monitor.onExecution,
 *   onSpan: monitor.onSpan,
 *   timeExecution: monitor.timeExecution,
 * });
 * const app = createInferenceApp({ runtime: rt, repository, dashboard: { monitor } });
 * ```
 *
 * @module
 */
import {
  type ExecutionEvent,
  hostClockMs,
  type HostSpan,
  type Logger,
  LogLevel,
  type LogLevelName,
  logLevelName,
} from "@nrt/core";
import { InFlight } from "../in_flight.ts";

/** One line of the log ring. */
export interface DashboardLogEntry {
  /** Monotonic sequence number (the page asks for lines after the last one it has). */
  readonly seq: number;
  /** Milliseconds since the epoch. */
  readonly time: number;
  /** Level name. */
  readonly level: LogLevelName;
  /** The text. */
  readonly message: string;
  /** `stdout` or `stderr` for a kernel's output line; absent for the runtime's own messages. */
  readonly stream?: "stdout" | "stderr";
  /** The NeuronCore of a kernel line. */
  readonly nc?: number;
}

/** The execution a NeuronCore is running. */
export interface RunningExecution {
  /** `H_MODEL` of the model (`h_running_model`). */
  readonly model: number;
  /** Runtime-wide execution sequence number. */
  readonly seq: number;
  /** Milliseconds since the epoch when it took the core. */
  readonly since: number;
}

/** Seconds of history {@linkcode DashboardMonitor.utilization} covers. */
export const UTILIZATION_SECONDS = 60;

/** Upper bounds (µs, inclusive) of the latency histogram's buckets; a last bucket takes everything slower. */
export const LATENCY_BOUNDS_US: readonly number[] = [
  100,
  200,
  500,
  1_000,
  2_000,
  5_000,
  10_000,
  20_000,
  50_000,
  100_000,
];

/** A NeuronCore's busy share of each of the last {@linkcode UTILIZATION_SECONDS} seconds. */
export interface CoreUtilization {
  /** Busy fraction (0..1) per second, oldest first; the last entry is the second in progress. */
  readonly perSecond: readonly number[];
  /** Busy fraction over the whole window. */
  readonly window: number;
}

/** One host step of an execution, relative to the execution's start. */
export interface TimelineStep {
  /** The step (`kmgr_exec_pre`, `doorbell`, `completion_wait`, …, as `HostSpan.name`). */
  readonly name: string;
  /** Start, µs after the execution took its cores. */
  readonly startUs: number;
  /** End, µs after the execution took its cores. */
  readonly endUs: number;
  /** A short detail (bytes of a copy). */
  readonly detail?: string;
}

/** The last execution that ran on a NeuronCore, as a timeline of the host's steps. */
export interface LastExecution {
  /** `H_MODEL` of its model. */
  readonly model: number;
  /** Runtime-wide sequence number. */
  readonly seq: number;
  /** Its `NRT_STATUS` (0 on success), when it could be made. */
  readonly status: number | undefined;
  /** From taking the cores to releasing them, µs. */
  readonly durationUs: number;
  /** The host's steps on this NeuronCore and those of the whole request, in the order they ended. */
  readonly steps: readonly TimelineStep[];
}

/** An execution as it ended, before its steps are laid out for the dashboard. */
interface RawExecution {
  readonly model: number;
  readonly seq: number;
  readonly status: number | undefined;
  readonly durationUs: number;
  readonly start: number;
  readonly taken: { readonly steps: readonly HostSpan[] };
}

/** A model's execution latencies, bucketed. */
export interface LatencyHistogram {
  /** Upper bounds of the buckets, µs ({@linkcode LATENCY_BOUNDS_US}); `counts` has one more entry for slower ones. */
  readonly boundsUs: readonly number[];
  /** Executions per bucket. */
  readonly counts: readonly number[];
}

/**
 * With the monitor's `timeExecution` passed to the runtime, the steps of at most one execution of a model per
 * NeuronCore are timed in this many ms (ours). A person reads the timeline at this pace; timing every execution's
 * steps (about ten clock reads and spans) cost `nrt serve --demo` 2–3% of its requests per second under load.
 */
export const STEP_SAMPLE_MS = 250;

/** Steps kept per execution (the host emits about ten). */
const MAX_STEPS = 64;

/** Options of {@linkcode DashboardMonitor}. */
export interface DashboardMonitorOptions {
  /** Log lines kept (default 500). */
  readonly logCapacity?: number;
  /** The most verbose level kept in the ring (default INFO, so kernel stdout is kept). */
  readonly logLevel?: LogLevel;
}

/** Observes executions and the log for the dashboard, and tells waiting streams when something changed. */
export class DashboardMonitor {
  readonly #capacity: number;
  readonly #level: LogLevel;
  readonly #log: DashboardLogEntry[] = [];
  /**
   * Per NeuronCore: what runs on it, its count and busy time, its last execution. One record per core, made at its
   * first execution and updated in place (ours: an execution's two events look one record up per core, where a map
   * per field took seven lookups and updates).
   */
  readonly #cores = new Map<number, CoreActivity>();
  /**
   * Steps of the executions in flight that the runtime times, by sequence number (every execution when the runtime
   * does not ask `timeExecution`). An untimed execution has no steps, and allocates nothing here.
   */
  readonly #steps = new InFlight<{ start: number; steps: HostSpan[] }>();
  readonly #latency = new Map<number, number[]>();
  readonly #closed = new AbortController();
  #seq = 0;
  #waiters: Array<() => void> = [];
  /**
   * Per NeuronCore: its last timed execution, when it started, its sequence number and its model (one record each,
   * updated in place). Empty unless the runtime asks `timeExecution`; otherwise only timed executions become a
   * NeuronCore's last.
   */
  readonly #timed = new Map<number, { at: number; seq: number; model: number }>();

  /**
   * Creates a monitor with an empty log ring.
   *
   * @param options Ring size and level.
   * @throws {RangeError} If `logCapacity` is not a positive integer.
   */
  constructor(options: DashboardMonitorOptions = {}) {
    const capacity = options.logCapacity ?? 500;
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`Cannot create a dashboard monitor: logCapacity ${capacity} is not a positive integer`);
    }
    this.#capacity = capacity;
    this.#level = options.logLevel ?? LogLevel.INFO;
    logLevelName(this.#level);
  }

  /** The `Runtime` option `onExecution`: records which model each NeuronCore runs and counts executions. */
  readonly onExecution = (e: ExecutionEvent): void => {
    const now = hostClockMs();
    const ncs = e.ncs;
    if (e.phase === "start") {
      // The runtime asked `timeExecution` before this event, so a timed execution is known here.
      if (this.#timedNow(ncs[0], e.seq)) this.#steps.set(e.seq, { start: now, steps: [] });
      const since = Date.now();
      for (const nc of ncs) {
        let c = this.#cores.get(nc);
        if (c === undefined) this.#cores.set(nc, c = new CoreActivity());
        c.running = { model: e.model, seq: e.seq, since };
        c.executions++;
        c.started = now;
      }
      this.notify();
      return;
    }
    let start: number | undefined;
    for (const nc of ncs) {
      const c = this.#cores.get(nc);
      if (c === undefined || c.running?.seq !== e.seq) continue;
      const from = c.started ?? now;
      start ??= from;
      c.running = undefined;
      c.started = undefined;
      addBusy(c.busy, from, now);
    }
    const taken = this.#steps.take(e.seq);
    if (start !== undefined) {
      const durationUs = (now - start) * 1000;
      // Sampled, a NeuronCore's last execution is its last timed one: an untimed one has no steps to lay out.
      if (taken !== undefined && this.#timedNow(ncs[0], e.seq)) {
        const raw: RawExecution = { model: e.model, seq: e.seq, status: e.status, durationUs, start, taken };
        for (const nc of ncs) this.#cores.get(nc)!.last = { raw };
      }
      let counts = this.#latency.get(e.model);
      if (counts === undefined) this.#latency.set(e.model, counts = new Array(LATENCY_BOUNDS_US.length + 1).fill(0));
      let k = 0;
      while (k < LATENCY_BOUNDS_US.length && durationUs > LATENCY_BOUNDS_US[k]) k++;
      counts[k]++;
    }
    this.notify();
  };

  /** Whether execution `seq` on NeuronCore `nc` is timed: every one without `timeExecution`, else the sampled one. */
  #timedNow(nc: number, seq: number): boolean {
    return this.#timed.size === 0 || this.#timed.get(nc)?.seq === seq;
  }

  /**
   * The `Runtime` option `timeExecution`: times an execution unless one of the same model on its first NeuronCore was
   * timed in the last {@linkcode STEP_SAMPLE_MS} ms. So an execution after a quiet spell, or of another model than the
   * last timed one, is always timed.
   */
  readonly timeExecution = (seq: number, nc: number, model: number): boolean => {
    const now = hostClockMs();
    const last = this.#timed.get(nc);
    if (last === undefined) {
      this.#timed.set(nc, { at: now, seq, model });
      return true;
    }
    if (now - last.at < STEP_SAMPLE_MS && last.model === model) return false;
    last.at = now;
    last.seq = seq;
    last.model = model;
    return true;
  };

  /**
   * The `Runtime` option `onSpan`: keeps the host's steps of each execution in flight (loads' steps are ignored).
   * Cheap and non-throwing: it runs on the execute path.
   */
  readonly onSpan = (span: HostSpan): void => {
    if (span.seq === undefined) return;
    const entry = this.#steps.get(span.seq);
    if (entry !== undefined && entry.steps.length < MAX_STEPS) entry.steps.push(span);
  };

  /**
   * NeuronCore `nc`'s busy share of each of the last {@linkcode UTILIZATION_SECONDS} seconds, from the executions
   * that held it (the one running now counts up to now).
   */
  utilization(nc: number): CoreUtilization {
    const now = hostClockMs(), current = Math.floor(now / 1000);
    const c = this.#cores.get(nc);
    const m = c?.busy;
    const running = c?.started;
    const perSecond: number[] = [];
    let busy = 0, span = 0;
    for (let sec = current - UTILIZATION_SECONDS + 1; sec <= current; sec++) {
      const from = sec * 1000, to = Math.min(now, from + 1000);
      let ms = m?.get(sec) ?? 0;
      if (running !== undefined && running < to) ms += to - Math.max(from, running);
      const length = Math.max(to - from, 1e-9);
      perSecond.push(Math.min(1, ms / length));
      busy += Math.min(ms, length);
      span += length;
    }
    return { perSecond, window: span > 0 ? busy / span : 0 };
  }

  /** The last execution that finished on NeuronCore `nc`, with the host's steps, or `undefined`. */
  lastExecution(nc: number): LastExecution | undefined {
    const last = this.#cores.get(nc)?.last;
    if (last === undefined) return undefined;
    if (last.view !== undefined) return last.view;
    const { raw } = last;
    // Each NeuronCore of the request keeps the steps that act on it (its doorbell, its wait) and the shared ones.
    const steps = raw.taken.steps.filter((sp) => sp.nc === undefined || sp.nc === nc).map((sp) => ({
      name: sp.name,
      startUs: Math.max(0, (sp.start - raw.start) * 1000),
      endUs: Math.max(0, (sp.end - raw.start) * 1000),
      ...(sp.detail === undefined ? {} : { detail: sp.detail }),
    }));
    last.view = { model: raw.model, seq: raw.seq, status: raw.status, durationUs: raw.durationUs, steps };
    return last.view;
  }

  /** The latency histogram of the model with handle `model` (all zero before its first execution). */
  latency(model: number): LatencyHistogram {
    return {
      boundsUs: LATENCY_BOUNDS_US,
      counts: this.#latency.get(model) ?? new Array(LATENCY_BOUNDS_US.length + 1).fill(0),
    };
  }

  /**
   * A logger that forwards every call to `inner` (which still filters by its own level) and keeps the messages up to
   * the monitor's level in the ring — so kernel stdout reaches the dashboard even when the console shows errors only.
   *
   * @param inner Where messages go as before (e.g. the console logger).
   * @returns The tee; its `level` is the more verbose of the two.
   */
  wrapLogger(inner: Logger): Logger {
    const at =
      (level: LogLevel, forward: (m: string, f?: Record<string, unknown>) => void) =>
      (message: string, fields?: Record<string, unknown>): void => {
        if (level <= this.#level) this.#record(level, message, fields);
        forward(message, fields);
      };
    return {
      level: Math.max(inner.level, this.#level) as LogLevel,
      error: at(LogLevel.ERROR, (m, f) => inner.error(m, f)),
      warn: at(LogLevel.WARNING, (m, f) => inner.warn(m, f)),
      info: at(LogLevel.INFO, (m, f) => inner.info(m, f)),
      debug: at(LogLevel.DEBUG, (m, f) => inner.debug(m, f)),
      trace: at(LogLevel.TRACE, (m, f) => inner.trace(m, f)),
    };
  }

  #record(level: LogLevel, message: string, fields?: Record<string, unknown>): void {
    const stream = fields?.tag !== undefined && (fields.stream === "stdout" || fields.stream === "stderr")
      ? fields.stream
      : undefined;
    const nc = typeof fields?.nc === "number" ? fields.nc : undefined;
    const entry: DashboardLogEntry = {
      seq: ++this.#seq,
      time: Date.now(),
      level: logLevelName(level),
      message,
      ...(stream === undefined ? {} : { stream }),
      ...(nc === undefined ? {} : { nc }),
    };
    this.#log.push(entry);
    if (this.#log.length > this.#capacity) this.#log.splice(0, this.#log.length - this.#capacity);
    this.notify();
  }

  /**
   * The log ring, oldest first.
   *
   * @param after Only the lines with a larger sequence number.
   * @returns The lines.
   */
  log(after = 0): DashboardLogEntry[] {
    return this.#log.filter((e) => e.seq > after);
  }

  /** The execution NeuronCore `nc` is running, or `undefined` when it is idle. */
  running(nc: number): RunningExecution | undefined {
    return this.#cores.get(nc)?.running;
  }

  /** Executions that took NeuronCore `nc` so far. */
  executions(nc: number): number {
    return this.#cores.get(nc)?.executions ?? 0;
  }

  /** Says that something the dashboard shows changed (the app calls it after loads, unloads and faults). */
  notify(): void {
    if (this.#waiters.length === 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  /**
   * Resolves at the next {@linkcode DashboardMonitor.notify}, after `timeoutMs`, when `signal` aborts or when the
   * monitor closes — whichever comes first.
   *
   * @param timeoutMs The longest wait.
   * @param signal Ends the wait early (the client went away).
   */
  changed(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed.signal.aborted || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters = this.#waiters.filter((w) => w !== done);
        signal?.removeEventListener("abort", done);
        this.#closed.signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener("abort", done, { once: true });
      this.#closed.signal.addEventListener("abort", done, { once: true });
      this.#waiters.push(done);
    });
  }

  /** Aborted by {@linkcode DashboardMonitor.close}: event streams end when it fires. */
  get closed(): AbortSignal {
    return this.#closed.signal;
  }

  /** Ends every event stream (call before stopping the HTTP server, which waits for open responses). */
  close(): void {
    this.#closed.abort();
    this.notify();
  }
}

/** One NeuronCore's activity as the monitor keeps it (ours). */
class CoreActivity {
  /** The execution running on it; undefined when idle. */
  running: RunningExecution | undefined = undefined;
  /** Executions that took it so far. */
  executions = 0;
  /** When the running execution took it (shared clock, ms); undefined when idle. */
  started: number | undefined = undefined;
  /** Busy ms per whole second of the shared clock (`second → ms`), the last minute only. */
  readonly busy = new Map<number, number>();
  /** Its last execution as it ended: the steps are laid out when the dashboard asks. */
  last: { raw: RawExecution; view?: LastExecution } | undefined = undefined;
}

/** Adds the busy time from `start` to `end` (shared clock, ms) to a core's per-second map. */
function addBusy(m: Map<number, number>, start: number, end: number): void {
  for (let t = start; t < end;) {
    const sec = Math.floor(t / 1000), until = Math.min(end, (sec + 1) * 1000);
    m.set(sec, (m.get(sec) ?? 0) + (until - t));
    t = until;
  }
  // Seconds too old to show are dropped once more are kept than shown, not at every execution (an iterator each).
  if (m.size <= UTILIZATION_SECONDS + 1) return;
  const oldest = Math.floor(end / 1000) - UTILIZATION_SECONDS;
  for (const sec of m.keys()) if (sec <= oldest) m.delete(sec);
}
