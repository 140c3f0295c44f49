import { describe, expect, test } from "bun:test";
import {
  createConsoleLogger,
  createNullLogger,
  type Logger,
  LogLevel,
  type LogLevelName,
  logLevelName,
  MemoryLogger,
  parseLogLevel,
} from "./log.ts";

const ALL: [LogLevelName, keyof Omit<Logger, "level">][] = [
  ["ERROR", "error"],
  ["WARNING", "warn"],
  ["INFO", "info"],
  ["DEBUG", "debug"],
  ["TRACE", "trace"],
];

describe("LogLevel", () => {
  test("LogLevel orders ERROR=0 through TRACE=4", () => {
    expect(Object.entries(LogLevel)).toEqual([["ERROR", 0], ["WARNING", 1], ["INFO", 2], ["DEBUG", 3], ["TRACE", 4]]);
  });

  test("logLevelName() names every level and rejects anything else", () => {
    for (const [name] of ALL) expect(logLevelName(LogLevel[name])).toBe(name);
    expect(() => logLevelName(5 as LogLevel)).toThrow(RangeError);
    expect(() => logLevelName(-1 as LogLevel)).toThrow(RangeError);
  });

  test("parseLogLevel() accepts the documented names in any case, and WARN", () => {
    const cases: [string, LogLevel | undefined][] = [
      ["ERROR", LogLevel.ERROR],
      ["error", LogLevel.ERROR],
      ["WARNING", LogLevel.WARNING],
      ["Warn", LogLevel.WARNING],
      ["info", LogLevel.INFO],
      ["DEBUG", LogLevel.DEBUG],
      ["trace", LogLevel.TRACE],
      ["", undefined],
      ["VERBOSE", undefined],
      [" INFO", undefined],
      ["2", undefined],
      ["constructor", undefined],
      ["__proto__", undefined],
    ];
    for (const [text, level] of cases) expect([text, parseLogLevel(text)]).toEqual([text, level]);
  });
});

describe("MemoryLogger", () => {
  test("MemoryLogger() at TRACE records every level with its fields", () => {
    const log = new MemoryLogger();
    expect(log.level).toBe(LogLevel.TRACE);
    for (const [name, method] of ALL) log[method](`${name} line`, { n: LogLevel[name] });
    log.info("no fields");
    expect(log.entries).toEqual([
      ...ALL.map(([name]) => ({ level: LogLevel[name], message: `${name} line`, fields: { n: LogLevel[name] } })),
      { level: LogLevel.INFO, message: "no fields" },
    ]);
  });

  test("MemoryLogger() at each level drops the more verbose levels", () => {
    for (const [threshold] of ALL) {
      const log = new MemoryLogger(LogLevel[threshold]);
      for (const [name, method] of ALL) log[method](name);
      const kept = ALL.filter(([name]) => LogLevel[name] <= LogLevel[threshold]).map(([name]) => name);
      expect([threshold, log.messages()]).toEqual([threshold, kept]);
    }
  });

  test("MemoryLogger() at ERROR drops WARNING and below", () => {
    const log = new MemoryLogger(LogLevel.ERROR);
    log.warn("w");
    log.info("i");
    log.error("e");
    expect(log.messages()).toEqual(["e"]);
  });

  test("MemoryLogger.messages() filters by level and clear() forgets", () => {
    const log = new MemoryLogger();
    log.warn("a");
    log.debug("b");
    log.warn("c");
    expect(log.messages(LogLevel.WARNING)).toEqual(["a", "c"]);
    expect(log.messages(LogLevel.ERROR)).toEqual([]);
    log.clear();
    expect(log.entries).toEqual([]);
  });

  test("MemoryLogger() rejects a level outside LogLevel", () => {
    expect(() => new MemoryLogger(7 as LogLevel)).toThrow(RangeError);
  });
});

describe("createConsoleLogger()", () => {
  test("createConsoleLogger() writes a [nrt] LEVEL prefix and the fields", () => {
    const lines: unknown[][] = [];
    const log = createConsoleLogger(LogLevel.TRACE, (...data) => lines.push(data));
    for (const [name, method] of ALL) log[method](`msg ${name}`);
    log.warn("with fields", { nc: 3 });
    expect(lines).toEqual([
      ...ALL.map(([name]) => [`[nrt] ${name} msg ${name}`]),
      ["[nrt] WARNING with fields", { nc: 3 }],
    ]);
  });

  test("createConsoleLogger() defaults to ERROR and drops WARNING and below", () => {
    const lines: unknown[][] = [];
    const log = createConsoleLogger(undefined, (...data) => lines.push(data));
    expect(log.level).toBe(LogLevel.ERROR);
    log.warn("w");
    log.info("i");
    log.debug("d");
    log.trace("t");
    log.error("e");
    expect(lines).toEqual([["[nrt] ERROR e"]]);
  });

  test("createConsoleLogger() writes to console.error by default", () => {
    const original = console.error;
    const lines: unknown[][] = [];
    console.error = (...data: unknown[]) => {
      lines.push(data);
    };
    try {
      const log = createConsoleLogger(LogLevel.INFO);
      log.info("to stderr", { ok: true });
      log.debug("dropped");
    } finally {
      console.error = original;
    }
    expect(lines).toEqual([["[nrt] INFO to stderr", { ok: true }]]);
  });

  test("createConsoleLogger() rejects a level outside LogLevel", () => {
    expect(() => createConsoleLogger(9 as LogLevel)).toThrow(RangeError);
  });
});

describe("createNullLogger()", () => {
  test("createNullLogger() drops every message and reports ERROR", () => {
    const original = console.error;
    const lines: unknown[][] = [];
    console.error = (...data: unknown[]) => {
      lines.push(data);
    };
    try {
      const log = createNullLogger();
      expect(log.level).toBe(LogLevel.ERROR);
      for (const [, method] of ALL) log[method]("nothing", { x: 1 });
    } finally {
      console.error = original;
    }
    expect(lines).toEqual([]);
  });
});
