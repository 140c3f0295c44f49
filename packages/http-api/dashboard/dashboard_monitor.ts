/**
 * What the dashboard observes as it happens, through the runtime's existing hooks: executions entering and leaving
 * their NeuronCores (`Runtime` option `onExecution`) and the log, which carries the kernels' stdout (INFO) and
 * stderr (WARNING) lines from pool_stdio (`packages/core/stdio/pool_stdio.ts`). The composition root creates one
 * monitor, hands its hooks to `Runtime.init`, and passes it to `createInferenceApp`.
 *
 * @example Wire a monitor into a runtime
 * ```ts ignore
 * const monitor = new DashboardMonitor();
 * const rt = await Runtime.init({ ...nrtPlugins(container), logger: monitor.wrapLogger(createConsoleLogger()), onExecution: monitor.onExecution });
 * const app = createInferenceApp({ runtime: rt, repository, dashboard: { monitor } });
 * ```
 *
 * @module
 */
import { type ExecutionEvent, type Logger, LogLevel, logLevelName, type LogLevelName } from "@nrt/core";


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
  readonly #running = new Map<number, RunningExecution>();
  readonly #executions = new Map<number, number>();
  readonly #closed = new AbortController();
  #seq = 0;
  #waiters: Array<() => void> = [];

  /**
   * Creates a monitor with an empty log ring.
   *
   * @param options Ring size and level.
   * @throws {RangeError} If `logCapacity` is not a positive integer.
   */
  constructor(options: DashboardMonitorOptions = {}) {
    const capacity = options.logCapacity ?? 500;
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`Cannot create a dashboard monitor: logCapacity ${capacity} is not a positive integer`);
    this.#capacity = capacity;
    this.#level = options.logLevel ?? LogLevel.INFO;
    logLevelName(this.#level);
  }

  /** The `Runtime` option `onExecution`: records which model each NeuronCore runs and counts executions. */
  readonly onExecution = (e: ExecutionEvent): void => {
    for (const nc of e.ncs) {
      if (e.phase === "start") {
        this.#running.set(nc, { model: e.model, seq: e.seq, since: Date.now() });
        this.#executions.set(nc, (this.#executions.get(nc) ?? 0) + 1);
      } else if (this.#running.get(nc)?.seq === e.seq) {
        this.#running.delete(nc);
      }
    }
    this.notify();
  };

  /**
   * A logger that forwards every call to `inner` (which still filters by its own level) and keeps the messages up to
   * the monitor's level in the ring — so kernel stdout reaches the dashboard even when the console shows errors only.
   *
   * @param inner Where messages go as before (e.g. the console logger).
   * @returns The tee; its `level` is the more verbose of the two.
   */
  wrapLogger(inner: Logger): Logger {
    const at = (level: LogLevel, forward: (m: string, f?: Record<string, unknown>) => void) => (message: string, fields?: Record<string, unknown>): void => {
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
    const stream = fields?.tag !== undefined && (fields.stream === "stdout" || fields.stream === "stderr") ? fields.stream : undefined;
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
    return this.#running.get(nc);
  }

  /** Executions that took NeuronCore `nc` so far. */
  executions(nc: number): number {
    return this.#executions.get(nc) ?? 0;
  }

  /** Says that something the dashboard shows changed (the app calls it after loads, unloads and faults). */
  notify(): void {
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
