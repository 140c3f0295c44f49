/**
 * The runtime's logger: five levels with `NEURON_RT_LOG_LEVEL`'s names (`ERROR`, `WARNING`, `INFO`, `DEBUG`,
 * `TRACE`), a console logger for composition roots, a {@linkcode MemoryLogger} that tests assert on, and a null
 * logger. A logger drops every message more verbose than its {@linkcode Logger.level}.
 *
 * @example Record log lines in a test
 * ```ts
 * import { LogLevel, MemoryLogger } from "@nrt/core";
 * const log = new MemoryLogger(LogLevel.WARNING);
 * log.warn("NEFF has no checksum", { neff: "model.neff" });
 * log.info("dropped: INFO is more verbose than WARNING");
 * console.log(log.messages()); // ["NEFF has no checksum"]
 * ```
 *
 * @module
 */

/**
 * Log levels, least to most verbose; the names are the values `NEURON_RT_LOG_LEVEL` documents. A logger at level
 * `L` emits the messages whose level is `<= L`.
 */
export const LogLevel = {
  ERROR: 0,
  WARNING: 1,
  INFO: 2,
  DEBUG: 3,
  TRACE: 4,
} as const;

/** One {@linkcode LogLevel} value. */
export type LogLevel = typeof LogLevel[keyof typeof LogLevel];

/** The name of a {@linkcode LogLevel}: `"ERROR"`, `"WARNING"`, `"INFO"`, `"DEBUG"` or `"TRACE"`. */
export type LogLevelName = keyof typeof LogLevel;

const NAMES: readonly LogLevelName[] = ["ERROR", "WARNING", "INFO", "DEBUG", "TRACE"];

/**
 * The name of a log level.
 *
 * @param level A {@linkcode LogLevel} value.
 * @returns Its name, e.g. `"WARNING"` for `1`.
 * @throws {RangeError} If `level` is not a {@linkcode LogLevel}.
 */
export function logLevelName(level: LogLevel): LogLevelName {
  const name = NAMES[level];
  if (name === undefined) throw new RangeError(`Cannot name log level ${level}: expected an integer from 0 to 4`);
  return name;
}

/**
 * Parses a level name as `NEURON_RT_LOG_LEVEL` spells it: `ERROR`, `WARNING` (or `WARN`), `INFO`, `DEBUG` or
 * `TRACE`, in any case. Surrounding whitespace is not accepted.
 *
 * @param text The name to parse.
 * @returns The level, or `undefined` if `text` names none.
 *
 * @example Parse a level
 * ```ts
 * import { LogLevel, parseLogLevel } from "@nrt/core";
 * console.log(parseLogLevel("warn") === LogLevel.WARNING); // true
 * ```
 */
export function parseLogLevel(text: string): LogLevel | undefined {
  const upper = text.toUpperCase();
  if (upper === "WARN") return LogLevel.WARNING;
  return Object.hasOwn(LogLevel, upper) ? LogLevel[upper as LogLevelName] : undefined;
}

/** The runtime's logging interface. Each method drops its message when the level is more verbose than `level`. */
export interface Logger {
  /** The most verbose level this logger emits. */
  readonly level: LogLevel;
  /** Logs at {@linkcode LogLevel.ERROR}. */
  error(message: string, fields?: Record<string, unknown>): void;
  /** Logs at {@linkcode LogLevel.WARNING}. */
  warn(message: string, fields?: Record<string, unknown>): void;
  /** Logs at {@linkcode LogLevel.INFO}. */
  info(message: string, fields?: Record<string, unknown>): void;
  /** Logs at {@linkcode LogLevel.DEBUG}. */
  debug(message: string, fields?: Record<string, unknown>): void;
  /** Logs at {@linkcode LogLevel.TRACE}. */
  trace(message: string, fields?: Record<string, unknown>): void;
}

/** One message recorded by a {@linkcode MemoryLogger}. */
export interface LogEntry {
  /** The level the message was logged at. */
  readonly level: LogLevel;
  /** The message text. */
  readonly message: string;
  /** The structured fields passed with the message, if any. */
  readonly fields?: Readonly<Record<string, unknown>>;
}

/** Where {@linkcode createConsoleLogger} writes: `console.error`'s signature. */
export type LogWrite = (...data: unknown[]) => void;

function checkLevel(level: LogLevel): LogLevel {
  logLevelName(level); // throws RangeError on a value outside LogLevel
  return level;
}

/** Builds a filtering {@linkcode Logger} over one emit function. */
function filteringLogger(
  level: LogLevel,
  emit: (level: LogLevel, message: string, fields?: Record<string, unknown>) => void,
): Logger {
  const at = (l: LogLevel) => (message: string, fields?: Record<string, unknown>): void => {
    if (l <= level) emit(l, message, fields);
  };
  return {
    level,
    error: at(LogLevel.ERROR),
    warn: at(LogLevel.WARNING),
    info: at(LogLevel.INFO),
    debug: at(LogLevel.DEBUG),
    trace: at(LogLevel.TRACE),
  };
}

/**
 * A logger that writes `[nrt] LEVEL message` (and the fields object, when given) to `console.error`, so that log
 * lines never mix with a program's stdout.
 *
 * @param level The most verbose level to emit; defaults to {@linkcode LogLevel.ERROR}, libnrt's default.
 * @param write Where to write; defaults to `console.error`, looked up at each call.
 * @returns A {@linkcode Logger}.
 * @throws {RangeError} If `level` is not a {@linkcode LogLevel}.
 *
 * @example Log warnings and errors to stderr
 * ```ts
 * import { createConsoleLogger, LogLevel } from "@nrt/core";
 * const log = createConsoleLogger(LogLevel.WARNING);
 * log.warn("NeuronCore 3 is busy", { nc: 3 }); // [nrt] WARNING NeuronCore 3 is busy { nc: 3 }
 * log.debug("not shown");
 * ```
 */
export function createConsoleLogger(level: LogLevel = LogLevel.ERROR, write?: LogWrite): Logger {
  checkLevel(level);
  const out: LogWrite = write ?? ((...data) => console.error(...data));
  return filteringLogger(level, (l, message, fields) => {
    const line = `[nrt] ${NAMES[l]} ${message}`;
    if (fields === undefined) out(line);
    else out(line, fields);
  });
}

/**
 * A logger that drops every message. Its `level` is {@linkcode LogLevel.ERROR}, so code that checks
 * `logger.level >= LogLevel.DEBUG` before building costly fields skips that work too.
 *
 * @returns A {@linkcode Logger} that emits nothing.
 *
 * @example Silence a component
 * ```ts
 * import { createNullLogger } from "@nrt/core";
 * createNullLogger().error("never shown");
 * ```
 */
export function createNullLogger(): Logger {
  return filteringLogger(LogLevel.ERROR, () => {});
}

/**
 * A logger that keeps the messages it emits in memory, for tests to assert on.
 *
 * @example Assert on a log line
 * ```ts
 * import { LogLevel, MemoryLogger } from "@nrt/core";
 * const log = new MemoryLogger();
 * log.debug("staged 1 GPSIMD library", { nc: 0 });
 * console.log(log.entries[0]); // { level: 3, message: "staged 1 GPSIMD library", fields: { nc: 0 } }
 * ```
 */
export class MemoryLogger implements Logger {
  /** The most verbose level this logger records. */
  readonly level: LogLevel;
  readonly #entries: LogEntry[] = [];
  readonly #logger: Logger;

  /**
   * Creates an empty memory logger.
   *
   * @param level The most verbose level to record; defaults to {@linkcode LogLevel.TRACE}, i.e. everything.
   * @throws {RangeError} If `level` is not a {@linkcode LogLevel}.
   */
  constructor(level: LogLevel = LogLevel.TRACE) {
    this.level = checkLevel(level);
    this.#logger = filteringLogger(level, (l, message, fields) => {
      this.#entries.push(fields === undefined ? { level: l, message } : { level: l, message, fields });
    });
  }

  /** The recorded entries, oldest first. */
  get entries(): readonly LogEntry[] {
    return this.#entries;
  }

  /**
   * The recorded messages, oldest first.
   *
   * @param level If given, only the messages logged at exactly this level.
   * @returns The message texts.
   */
  messages(level?: LogLevel): string[] {
    return this.#entries.filter((e) => level === undefined || e.level === level).map((e) => e.message);
  }

  /** Forgets every recorded entry. */
  clear(): void {
    this.#entries.length = 0;
  }

  /** Records at {@linkcode LogLevel.ERROR}. */
  error(message: string, fields?: Record<string, unknown>): void {
    this.#logger.error(message, fields);
  }

  /** Records at {@linkcode LogLevel.WARNING} if `level` allows it. */
  warn(message: string, fields?: Record<string, unknown>): void {
    this.#logger.warn(message, fields);
  }

  /** Records at {@linkcode LogLevel.INFO} if `level` allows it. */
  info(message: string, fields?: Record<string, unknown>): void {
    this.#logger.info(message, fields);
  }

  /** Records at {@linkcode LogLevel.DEBUG} if `level` allows it. */
  debug(message: string, fields?: Record<string, unknown>): void {
    this.#logger.debug(message, fields);
  }

  /** Records at {@linkcode LogLevel.TRACE} if `level` allows it. */
  trace(message: string, fields?: Record<string, unknown>): void {
    this.#logger.trace(message, fields);
  }
}
