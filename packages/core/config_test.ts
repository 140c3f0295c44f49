import { describe, expect, test } from "bun:test";
import {
  DEFAULT_EXEC_TIMEOUT_SECONDS,
  DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES,
  envFromProcess,
  resolveRuntimeConfig,
  RUNTIME_ENV_VARIABLES,
  type RuntimeConfig,
  type RuntimeOptions,
} from "./config.ts";
import { LogLevel } from "./log.ts";
import { invalidMessage } from "./_testing.ts";

/** Bun's `toStartWith`, which the npm `expect` that Deno runs lacks. */
function expectPrefix(text: string, prefix: string): void {
  expect(text.slice(0, prefix.length)).toBe(prefix);
}

/** Bun's `toEndWith`, which the npm `expect` that Deno runs lacks. */
function expectSuffix(text: string, suffix: string): void {
  expect(text.slice(-suffix.length)).toBe(suffix);
}

describe("resolveRuntimeConfig() defaults", () => {
  test("resolveRuntimeConfig() with no arguments gives libnrt's defaults", () => {
    expect(resolveRuntimeConfig()).toEqual(
      {
        visibleCores: undefined,
        numCores: undefined,
        virtualCoreSize: undefined,
        execTimeoutSeconds: DEFAULT_EXEC_TIMEOUT_SECONDS,
        execTimeoutMs: DEFAULT_EXEC_TIMEOUT_SECONDS * 1000,
        logLevel: LogLevel.ERROR,
        validateHash: false,
        asyncExecMaxInflightRequests: 0,
        gpsimdStdoutQueueSizeBytes: DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES,
        allowLegacyNeff: false,
        arch: undefined,
        maxNeffBytes: 20 * 1024 * 1024,
      } satisfies RuntimeConfig,
    );
    expect(DEFAULT_EXEC_TIMEOUT_SECONDS).toBe(30);
    expect(DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES).toBe(4096);
  });

  test("resolveRuntimeConfig() treats an empty variable as unset", () => {
    const env = Object.fromEntries(RUNTIME_ENV_VARIABLES.map((name) => [name, ""]));
    expect(resolveRuntimeConfig({}, env)).toEqual(resolveRuntimeConfig());
  });

  test("resolveRuntimeConfig() ignores unrelated variables", () => {
    expect(resolveRuntimeConfig({}, { NEURON_RT_LOG_LOCATION: "syslog", PATH: "/bin" })).toEqual(
      resolveRuntimeConfig(),
    );
  });

  test("resolveRuntimeConfig() returns a frozen config and a frozen core list", () => {
    const config = resolveRuntimeConfig({}, { NEURON_RT_VISIBLE_CORES: "0-1" });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.visibleCores)).toBe(true);
  });
});

/** [variable, text, the fields it resolves to]. */
const GOOD_ENV: [string, string, Partial<RuntimeConfig>][] = [
  ["NEURON_RT_VISIBLE_CORES", "3", { visibleCores: [3] }],
  ["NEURON_RT_VISIBLE_CORES", "0", { visibleCores: [0] }],
  ["NEURON_RT_VISIBLE_CORES", "0-3", { visibleCores: [0, 1, 2, 3] }],
  ["NEURON_RT_VISIBLE_CORES", "5-5", { visibleCores: [5] }],
  ["NEURON_RT_VISIBLE_CORES", "0,1,2", { visibleCores: [0, 1, 2] }],
  ["NEURON_RT_VISIBLE_CORES", "6,4,5", { visibleCores: [4, 5, 6] }],
  ["NEURON_RT_VISIBLE_CORES", "1,1,2", { visibleCores: [1, 2] }],
  ["NEURON_RT_VISIBLE_CORES", "1023", { visibleCores: [1023] }],
  ["NEURON_RT_NUM_CORES", "1", { numCores: 1 }],
  ["NEURON_RT_NUM_CORES", "16", { numCores: 16 }],
  ["NEURON_RT_NUM_CORES", "0", { numCores: undefined }],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "1", { virtualCoreSize: 1 }],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "2", { virtualCoreSize: 2 }],
  ["NEURON_RT_EXEC_TIMEOUT", "1", { execTimeoutSeconds: 1, execTimeoutMs: 1000 }],
  ["NEURON_RT_EXEC_TIMEOUT", "600", { execTimeoutSeconds: 600, execTimeoutMs: 600_000 }],
  ["NEURON_RT_EXEC_TIMEOUT", "2147483647", { execTimeoutSeconds: 2147483647, execTimeoutMs: 2147483647000 }],
  ["NEURON_RT_LOG_LEVEL", "ERROR", { logLevel: LogLevel.ERROR }],
  ["NEURON_RT_LOG_LEVEL", "WARNING", { logLevel: LogLevel.WARNING }],
  ["NEURON_RT_LOG_LEVEL", "warn", { logLevel: LogLevel.WARNING }],
  ["NEURON_RT_LOG_LEVEL", "Info", { logLevel: LogLevel.INFO }],
  ["NEURON_RT_LOG_LEVEL", "debug", { logLevel: LogLevel.DEBUG }],
  ["NEURON_RT_LOG_LEVEL", "TRACE", { logLevel: LogLevel.TRACE }],
  ["NEURON_RT_VALIDATE_HASH", "1", { validateHash: true }],
  ["NEURON_RT_VALIDATE_HASH", "TRUE", { validateHash: true }],
  ["NEURON_RT_VALIDATE_HASH", "0", { validateHash: false }],
  ["NEURON_RT_VALIDATE_HASH", "False", { validateHash: false }],
  ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "0", { asyncExecMaxInflightRequests: 0 }],
  ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "8", { asyncExecMaxInflightRequests: 8 }],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "0", { gpsimdStdoutQueueSizeBytes: 0 }],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "256", { gpsimdStdoutQueueSizeBytes: 256 }],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "65536", { gpsimdStdoutQueueSizeBytes: 65536 }],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "131072", { gpsimdStdoutQueueSizeBytes: 131072 }],
  ["NEURON_RT_ALLOW_LEGACY_NEFF", "true", { allowLegacyNeff: true }],
  ["NEURON_RT_ALLOW_LEGACY_NEFF", "0", { allowLegacyNeff: false }],
  ["NRT_ARCH", "sunda", { arch: "sunda" }],
  ["NRT_ARCH", "cayman", { arch: "cayman" }],
  ["NRT_ARCH", "mariana", { arch: "mariana" }],
  // Core does not know the generations: it keeps the name (lower case); the composition root resolves it.
  ["NRT_ARCH", "trn1", { arch: "trn1" }],
  ["NRT_ARCH", "inf2", { arch: "inf2" }],
  ["NRT_ARCH", "TRN2", { arch: "trn2" }],
  ["NRT_ARCH", "next-gen", { arch: "next-gen" }],
  ["NRT_NEFF_MAX_BYTES", "1048576", { maxNeffBytes: 1048576 }],
  ["NRT_NEFF_MAX_BYTES", "104857600", { maxNeffBytes: 104857600 }],
];

/** [variable, text] pairs that must be rejected. */
const BAD_ENV: [string, string][] = [
  ["NRT_NEFF_MAX_BYTES", "1048575"],
  ["NRT_NEFF_MAX_BYTES", "20MiB"],
  ["NRT_NEFF_MAX_BYTES", "17179869185"],
  ["NEURON_RT_VISIBLE_CORES", "0,2"],
  ["NEURON_RT_VISIBLE_CORES", "-1"],
  ["NEURON_RT_VISIBLE_CORES", "3-1"],
  ["NEURON_RT_VISIBLE_CORES", "0-"],
  ["NEURON_RT_VISIBLE_CORES", "-3"],
  ["NEURON_RT_VISIBLE_CORES", "0-1-2"],
  ["NEURON_RT_VISIBLE_CORES", "0,1,"],
  ["NEURON_RT_VISIBLE_CORES", ",0"],
  ["NEURON_RT_VISIBLE_CORES", "0, 1"],
  ["NEURON_RT_VISIBLE_CORES", " 3"],
  ["NEURON_RT_VISIBLE_CORES", "0-1,2"],
  ["NEURON_RT_VISIBLE_CORES", "a"],
  ["NEURON_RT_VISIBLE_CORES", "1e3"],
  ["NEURON_RT_VISIBLE_CORES", "+1"],
  ["NEURON_RT_VISIBLE_CORES", "1024"],
  ["NEURON_RT_VISIBLE_CORES", "0-4294967295"],
  ["NEURON_RT_NUM_CORES", "-1"],
  ["NEURON_RT_NUM_CORES", "1.5"],
  ["NEURON_RT_NUM_CORES", "12abc"],
  ["NEURON_RT_NUM_CORES", "1e3"],
  ["NEURON_RT_NUM_CORES", "+4"],
  ["NEURON_RT_NUM_CORES", " 4"],
  ["NEURON_RT_NUM_CORES", "4\n"],
  ["NEURON_RT_NUM_CORES", "0x10"],
  ["NEURON_RT_NUM_CORES", "١"],
  ["NEURON_RT_NUM_CORES", "1025"],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "0"],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "3"],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "4"],
  ["NEURON_RT_VIRTUAL_CORE_SIZE", "two"],
  ["NEURON_RT_EXEC_TIMEOUT", "0"],
  ["NEURON_RT_EXEC_TIMEOUT", "-5"],
  ["NEURON_RT_EXEC_TIMEOUT", "1.5"],
  ["NEURON_RT_EXEC_TIMEOUT", "30s"],
  ["NEURON_RT_EXEC_TIMEOUT", "1e3"],
  ["NEURON_RT_EXEC_TIMEOUT", "2147483648"],
  ["NEURON_RT_EXEC_TIMEOUT", "99999999999999999999"],
  ["NEURON_RT_LOG_LEVEL", "VERBOSE"],
  ["NEURON_RT_LOG_LEVEL", "3"],
  ["NEURON_RT_LOG_LEVEL", " INFO"],
  ["NEURON_RT_LOG_LEVEL", "constructor"],
  ["NEURON_RT_VALIDATE_HASH", "yes"],
  ["NEURON_RT_VALIDATE_HASH", "2"],
  ["NEURON_RT_VALIDATE_HASH", "true "],
  ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "-1"],
  ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4.0"],
  ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "many"],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "128"],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "1000"],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "262144"],
  ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "64k"],
  ["NEURON_RT_ALLOW_LEGACY_NEFF", "on"],
  ["NEURON_RT_ALLOW_LEGACY_NEFF", "-1"],
  ["NRT_ARCH", "trn 3"],
  ["NRT_ARCH", "x86/64"],
  ["NRT_ARCH", "-cayman"],
];

describe("resolveRuntimeConfig() reads each variable", () => {
  for (const [variable, text, fields] of GOOD_ENV) {
    test(`resolveRuntimeConfig() accepts ${variable}=${JSON.stringify(text)}`, () => {
      expect(resolveRuntimeConfig({}, { [variable]: text })).toMatchObject(fields);
    });
  }
});

describe("resolveRuntimeConfig() rejects a bad variable", () => {
  for (const [variable, text] of BAD_ENV) {
    test(`resolveRuntimeConfig() rejects ${variable}=${JSON.stringify(text)}, naming the variable`, () => {
      const message = invalidMessage(() => resolveRuntimeConfig({}, { [variable]: text }));
      expectPrefix(message, `Invalid ${variable} ${JSON.stringify(text)}: expected `);
    });
  }

  test("resolveRuntimeConfig() rejects a non-contiguous NEURON_RT_VISIBLE_CORES", () => {
    expect(invalidMessage(() => resolveRuntimeConfig({}, { NEURON_RT_VISIBLE_CORES: "0,2" }))).toBe(
      'Invalid NEURON_RT_VISIBLE_CORES "0,2": expected an index, a range "A-B" or a contiguous comma list',
    );
  });

  test("resolveRuntimeConfig() names the accepted form of each variable", () => {
    const cases: [string, string, string][] = [
      ["NEURON_RT_NUM_CORES", "x", "an integer from 0 (all NeuronCores) to 1024"],
      ["NEURON_RT_VIRTUAL_CORE_SIZE", "3", "1 or 2"],
      ["NEURON_RT_EXEC_TIMEOUT", "0", "a whole number of seconds from 1 to 2147483647"],
      ["NEURON_RT_LOG_LEVEL", "x", "ERROR, WARNING, INFO, DEBUG or TRACE"],
      ["NEURON_RT_VALIDATE_HASH", "x", "0, 1, true or false"],
      ["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "x", "an integer from 0 (synchronous) to 2147483647"],
      ["NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "x", "0 (off) or a power of two from 256 to 131072"],
      ["NEURON_RT_ALLOW_LEGACY_NEFF", "x", "0, 1, true or false"],
      ["NRT_ARCH", "x y", "a generation name such as cayman or trn2 (letters, digits and dashes)"],
      ["NEURON_RT_VISIBLE_CORES", "2000", "core indices from 0 to 1023"],
    ];
    for (const [variable, text, expected] of cases) {
      expectSuffix(invalidMessage(() => resolveRuntimeConfig({}, { [variable]: text })), `expected ${expected}`);
    }
  });

  test("resolveRuntimeConfig() shortens a very long bad value in the message", () => {
    const message = invalidMessage(() => resolveRuntimeConfig({}, { NRT_ARCH: "x".repeat(10_000) }));
    expect(message.length).toBeLessThan(200);
    expectPrefix(message, 'Invalid NRT_ARCH "xxx');
  });
});

/** [option, value, the fields it resolves to]. */
const GOOD_OPTIONS: [keyof RuntimeOptions, unknown, Partial<RuntimeConfig>][] = [
  ["visibleCores", [2, 3], { visibleCores: [2, 3] }],
  ["visibleCores", [3, 2, 3], { visibleCores: [2, 3] }],
  ["visibleCores", "4-7", { visibleCores: [4, 5, 6, 7] }],
  ["visibleCores", "1", { visibleCores: [1] }],
  ["numCores", 4, { numCores: 4 }],
  ["numCores", 0, { numCores: undefined }],
  ["virtualCoreSize", 1, { virtualCoreSize: 1 }],
  ["virtualCoreSize", 2, { virtualCoreSize: 2 }],
  ["execTimeoutSeconds", 600, { execTimeoutSeconds: 600, execTimeoutMs: 600_000 }],
  ["logLevel", LogLevel.TRACE, { logLevel: LogLevel.TRACE }],
  ["logLevel", "WARN", { logLevel: LogLevel.WARNING }],
  ["logLevel", "info", { logLevel: LogLevel.INFO }],
  ["validateHash", true, { validateHash: true }],
  ["validateHash", false, { validateHash: false }],
  ["asyncExecMaxInflightRequests", 0, { asyncExecMaxInflightRequests: 0 }],
  ["asyncExecMaxInflightRequests", 32, { asyncExecMaxInflightRequests: 32 }],
  ["gpsimdStdoutQueueSizeBytes", 0, { gpsimdStdoutQueueSizeBytes: 0 }],
  ["gpsimdStdoutQueueSizeBytes", 1024, { gpsimdStdoutQueueSizeBytes: 1024 }],
  ["allowLegacyNeff", true, { allowLegacyNeff: true }],
  ["arch", "mariana", { arch: "mariana" }],
  ["arch", "trn2", { arch: "trn2" }],
];

/** [option, value] pairs that must be rejected. */
const BAD_OPTIONS: [keyof RuntimeOptions, unknown][] = [
  ["visibleCores", [0, 2]],
  ["visibleCores", []],
  ["visibleCores", [-1, 0]],
  ["visibleCores", [0.5, 1]],
  ["visibleCores", [NaN]],
  ["visibleCores", [1024]],
  ["visibleCores", "0,2"],
  ["visibleCores", ""],
  ["visibleCores", 3],
  ["numCores", -1],
  ["numCores", 1.5],
  ["numCores", NaN],
  ["numCores", Infinity],
  ["numCores", "4"],
  ["virtualCoreSize", 0],
  ["virtualCoreSize", 4],
  ["virtualCoreSize", "2"],
  ["execTimeoutSeconds", 0],
  ["execTimeoutSeconds", 0.5],
  ["execTimeoutSeconds", -30],
  ["execTimeoutSeconds", 2 ** 31],
  ["execTimeoutSeconds", "30"],
  ["logLevel", "verbose"],
  ["logLevel", 5],
  ["logLevel", -1],
  ["logLevel", 1.5],
  ["validateHash", "true"],
  ["validateHash", 1],
  ["asyncExecMaxInflightRequests", -1],
  ["asyncExecMaxInflightRequests", 2.5],
  ["gpsimdStdoutQueueSizeBytes", 100],
  ["gpsimdStdoutQueueSizeBytes", 128],
  ["gpsimdStdoutQueueSizeBytes", 3000],
  ["gpsimdStdoutQueueSizeBytes", 262144],
  ["allowLegacyNeff", "false"],
  ["arch", "trn 3"],
  ["arch", 1],
  ["arch", null],
];

describe("resolveRuntimeConfig() reads each option", () => {
  for (const [option, value, fields] of GOOD_OPTIONS) {
    test(`resolveRuntimeConfig() accepts option ${option} ${JSON.stringify(value)}`, () => {
      expect(resolveRuntimeConfig({ [option]: value } as RuntimeOptions)).toMatchObject(fields);
    });
  }
});

describe("resolveRuntimeConfig() rejects a bad option", () => {
  for (const [option, value] of BAD_OPTIONS) {
    test(`resolveRuntimeConfig() rejects option ${option} ${String(value)}, naming the option`, () => {
      const message = invalidMessage(() => resolveRuntimeConfig({ [option]: value } as RuntimeOptions));
      expectPrefix(message, `Invalid option ${option} `);
      expect(message).toContain(": expected ");
    });
  }

  test("resolveRuntimeConfig() quotes a bad string option and lists a bad array", () => {
    expect(invalidMessage(() => resolveRuntimeConfig({ visibleCores: "0,2" }))).toBe(
      'Invalid option visibleCores "0,2": expected an index, a range "A-B" or a contiguous comma list',
    );
    expect(invalidMessage(() => resolveRuntimeConfig({ visibleCores: [0, 2] }))).toBe(
      "Invalid option visibleCores [0,2]: expected a non-empty list of contiguous core indices",
    );
  });
});

describe("resolveRuntimeConfig() precedence", () => {
  test("resolveRuntimeConfig() lets each option override its variable", () => {
    const env = {
      NEURON_RT_VISIBLE_CORES: "0-1",
      NEURON_RT_VIRTUAL_CORE_SIZE: "2",
      NEURON_RT_EXEC_TIMEOUT: "30",
      NEURON_RT_LOG_LEVEL: "ERROR",
      NEURON_RT_VALIDATE_HASH: "0",
      NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS: "0",
      NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES: "0",
      NEURON_RT_ALLOW_LEGACY_NEFF: "0",
      NRT_ARCH: "sunda",
      NRT_NEFF_MAX_BYTES: "2097152",
    };
    const options: RuntimeOptions = {
      visibleCores: [4, 5],
      virtualCoreSize: 1,
      execTimeoutSeconds: 5,
      logLevel: "DEBUG",
      validateHash: true,
      asyncExecMaxInflightRequests: 4,
      gpsimdStdoutQueueSizeBytes: 512,
      allowLegacyNeff: true,
      arch: "cayman",
      maxNeffBytes: 4194304,
    };
    expect(resolveRuntimeConfig(options, env)).toEqual({
      visibleCores: [4, 5],
      numCores: undefined,
      virtualCoreSize: 1,
      execTimeoutSeconds: 5,
      execTimeoutMs: 5000,
      logLevel: LogLevel.DEBUG,
      validateHash: true,
      asyncExecMaxInflightRequests: 4,
      gpsimdStdoutQueueSizeBytes: 512,
      allowLegacyNeff: true,
      arch: "cayman",
      maxNeffBytes: 4194304,
    });
  });

  test("resolveRuntimeConfig() does not validate a variable that an option overrides", () => {
    expect(resolveRuntimeConfig({ execTimeoutSeconds: 10 }, { NEURON_RT_EXEC_TIMEOUT: "soon" }).execTimeoutSeconds)
      .toBe(10);
  });

  test("resolveRuntimeConfig() falls back to the variable where the option is undefined", () => {
    expect(resolveRuntimeConfig({ execTimeoutSeconds: undefined }, { NEURON_RT_EXEC_TIMEOUT: "45" }).execTimeoutMs)
      .toBe(45_000);
  });
});

describe("resolveRuntimeConfig() core selection", () => {
  test("resolveRuntimeConfig() rejects NEURON_RT_VISIBLE_CORES with NEURON_RT_NUM_CORES, naming both", () => {
    const message = invalidMessage(() =>
      resolveRuntimeConfig({}, { NEURON_RT_VISIBLE_CORES: "0-1", NEURON_RT_NUM_CORES: "2" })
    );
    expect(message).toContain("NEURON_RT_VISIBLE_CORES");
    expect(message).toContain("NEURON_RT_NUM_CORES");
  });

  test("resolveRuntimeConfig() rejects the visibleCores option with the numCores option, naming both", () => {
    const message = invalidMessage(() => resolveRuntimeConfig({ visibleCores: [0], numCores: 1 }));
    expect(message).toContain("visibleCores");
    expect(message).toContain("numCores");
  });

  test("resolveRuntimeConfig() lets NEURON_RT_NUM_CORES=0 (all) combine with NEURON_RT_VISIBLE_CORES", () => {
    const config = resolveRuntimeConfig({}, { NEURON_RT_VISIBLE_CORES: "2-3", NEURON_RT_NUM_CORES: "0" });
    expect(config.visibleCores).toEqual([2, 3]);
    expect(config.numCores).toBeUndefined();
  });

  test("resolveRuntimeConfig() ignores both core variables when code selects cores", () => {
    const env = { NEURON_RT_VISIBLE_CORES: "0-1", NEURON_RT_NUM_CORES: "2" };
    expect(resolveRuntimeConfig({ numCores: 3 }, env)).toMatchObject({ numCores: 3, visibleCores: undefined });
    expect(resolveRuntimeConfig({ visibleCores: "5" }, env)).toMatchObject({ numCores: undefined, visibleCores: [5] });
  });
});

describe("envFromProcess()", () => {
  test("envFromProcess() returns only runtime variables, as strings, without throwing", () => {
    const env = envFromProcess();
    for (const [name, value] of Object.entries(env)) {
      expect(RUNTIME_ENV_VARIABLES).toContain(name);
      expect(typeof value).toBe("string");
    }
  });

  test("envFromProcess() returns {} when the environment cannot be read", () => {
    const g = globalThis as unknown as Record<string, unknown>;
    const saved = { Deno: g.Deno, process: g.process };
    const throwing = {
      env: {
        get(): never {
          throw new Error("PermissionDenied");
        },
      },
      permissions: { querySync: () => ({ state: "granted" }) },
    };
    try {
      Object.defineProperty(globalThis, "Deno", { value: throwing, configurable: true, writable: true });
      expect(envFromProcess()).toEqual({});
      Object.defineProperty(globalThis, "Deno", {
        value: { env: { get: () => "1" }, permissions: { querySync: () => ({ state: "prompt" }) } },
        configurable: true,
        writable: true,
      });
      expect(envFromProcess()).toEqual({});
    } finally {
      Object.defineProperty(globalThis, "Deno", { value: saved.Deno, configurable: true, writable: true });
      if (saved.Deno === undefined) delete g.Deno;
    }
  });

  test("envFromProcess() reads process.env where there is no Deno", () => {
    const g = globalThis as unknown as Record<string, unknown>;
    const saved = { Deno: g.Deno, process: g.process };
    try {
      Object.defineProperty(globalThis, "Deno", { value: undefined, configurable: true, writable: true });
      Object.defineProperty(globalThis, "process", {
        value: { env: { NEURON_RT_LOG_LEVEL: "debug", NEURON_RT_LOG_LOCATION: "syslog" } },
        configurable: true,
        writable: true,
      });
      expect(envFromProcess()).toEqual({ NEURON_RT_LOG_LEVEL: "debug" });
      Object.defineProperty(globalThis, "process", { value: undefined, configurable: true, writable: true });
      expect(envFromProcess()).toEqual({});
    } finally {
      Object.defineProperty(globalThis, "process", { value: saved.process, configurable: true, writable: true });
      Object.defineProperty(globalThis, "Deno", { value: saved.Deno, configurable: true, writable: true });
      if (saved.Deno === undefined) delete g.Deno;
    }
  });

  test("envFromProcess() reads the granted runtime variables", () => {
    const g = globalThis as unknown as Record<string, unknown>;
    const saved = g.Deno;
    const values: Record<string, string> = { NEURON_RT_EXEC_TIMEOUT: "90", NRT_ARCH: "trn1", HOME: "/root" };
    try {
      Object.defineProperty(globalThis, "Deno", {
        value: {
          env: { get: (name: string) => values[name] },
          permissions: {
            querySync: (d: { variable: string }) => ({ state: d.variable === "NRT_ARCH" ? "denied" : "granted" }),
          },
        },
        configurable: true,
        writable: true,
      });
      expect(envFromProcess()).toEqual({ NEURON_RT_EXEC_TIMEOUT: "90" });
    } finally {
      Object.defineProperty(globalThis, "Deno", { value: saved, configurable: true, writable: true });
      if (saved === undefined) delete g.Deno;
    }
  });
});
