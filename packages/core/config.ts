/**
 * The runtime's configuration: the documented `NEURON_RT_*` environment variables, honoured with their libnrt
 * meaning, and the same knobs as typed {@linkcode RuntimeOptions}; an option set in code wins over its variable.
 * {@linkcode resolveRuntimeConfig} validates both and returns one frozen {@linkcode RuntimeConfig}; a bad value
 * throws an {@linkcode NrtError} with `NRT_INVALID` whose message names the variable (or option), the value and
 * the accepted form (ARCHITECTURE §9).
 *
 * Library code never reads the process environment: a composition root passes {@linkcode envFromProcess}`()` in.
 *
 * @example Resolve a configuration at a composition root
 * ```ts
 * import { envFromProcess, resolveRuntimeConfig } from "@nrt/core";
 * const config = resolveRuntimeConfig({ execTimeoutSeconds: 600 }, envFromProcess());
 * console.log(config.execTimeoutMs); // 600000
 * ```
 *
 * @module
 */
import { NrtError } from "./error.ts";
import { DEFAULT_MAX_DECOMPRESSED_BYTES } from "./neff/gzip.ts";
import { type LogLevel, LogLevel as LogLevels, type LogLevelName, parseLogLevel } from "./log.ts";
import { NrtStatus } from "./status.ts";

/**
 * The configuration knobs as code sets them. Every field is optional; a field that is set overrides the matching
 * `NEURON_RT_*` variable and is validated the same way.
 */
export interface RuntimeOptions {
  /** `NEURON_RT_VISIBLE_CORES`: the NeuronCores to use, as contiguous indices (`[0, 1]`) or the variable's text. */
  visibleCores?: readonly number[] | string;
  /** `NEURON_RT_NUM_CORES`: how many NeuronCores to use; 0 means all. Cannot be combined with `visibleCores`. */
  numCores?: number;
  /** `NEURON_RT_VIRTUAL_CORE_SIZE`: physical cores per logical NeuronCore, 1 or 2. */
  virtualCoreSize?: number;
  /** `NEURON_RT_EXEC_TIMEOUT`: the execution timeout in whole seconds. */
  execTimeoutSeconds?: number;
  /** `NEURON_RT_LOG_LEVEL`: a {@linkcode LogLevel} or its name (`"WARN"` is accepted for `"WARNING"`). */
  logLevel?: LogLevel | LogLevelName | "WARN" | Lowercase<LogLevelName | "WARN">;
  /** `NEURON_RT_VALIDATE_HASH`: check a NEFF's checksum before loading it. */
  validateHash?: boolean;
  /** `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`: 0 for synchronous execution, else the async queue depth. */
  asyncExecMaxInflightRequests?: number;
  /** `NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES`: 0 (off) or a power of two from 256 to 131072. */
  gpsimdStdoutQueueSizeBytes?: number;
  /** `NEURON_RT_ALLOW_LEGACY_NEFF`: accept NEFF versions older than the runtime supports by default. */
  allowLegacyNeff?: boolean;
  /**
   * `NRT_ARCH`: the generation a simulated device models — an arch pack's name or one of its instance families
   * (`cayman`, `trn2`); the composition root resolves it against the packs it registers.
   */
  arch?: string;
  /** `NRT_NEFF_MAX_BYTES` (ours): the largest decompressed NEFF payload `load` accepts, in bytes. */
  maxNeffBytes?: number;
}

/** A validated, fully resolved configuration; every default is filled in. Frozen. */
export interface RuntimeConfig {
  /** The NeuronCores to use, sorted, unique and contiguous; `undefined` means all of them. */
  readonly visibleCores: readonly number[] | undefined;
  /** How many NeuronCores to use; `undefined` means all of them. Never set together with `visibleCores`. */
  readonly numCores: number | undefined;
  /** Physical cores per logical NeuronCore; `undefined` means the architecture's default (Sunda forces 1). */
  readonly virtualCoreSize: 1 | 2 | undefined;
  /** The execution timeout in seconds. */
  readonly execTimeoutSeconds: number;
  /** {@linkcode RuntimeConfig.execTimeoutSeconds} in milliseconds, the unit the {@linkcode Clock} speaks. */
  readonly execTimeoutMs: number;
  /** The most verbose level to log. */
  readonly logLevel: LogLevel;
  /** Whether to check a NEFF's checksum before loading it. */
  readonly validateHash: boolean;
  /** 0: each execute runs synchronously; above 0: the depth of the async worker queue. */
  readonly asyncExecMaxInflightRequests: number;
  /** The GPSIMD stdout ring per NeuronCore in bytes, a multiple of the 256-byte entry; 0 turns it off. */
  readonly gpsimdStdoutQueueSizeBytes: number;
  /** Whether NEFF versions older than the default supported range are accepted. */
  readonly allowLegacyNeff: boolean;
  /** The architecture the simulator models; `undefined` lets the composition root choose. */
  readonly arch: string | undefined;
  /** The largest decompressed NEFF payload (and summed archive members) `load` accepts, in bytes. */
  readonly maxNeffBytes: number;
}

/** The environment variables {@linkcode resolveRuntimeConfig} reads, in the order of {@linkcode RuntimeOptions}. */
export const RUNTIME_ENV_VARIABLES: readonly string[] = Object.freeze([
  "NEURON_RT_VISIBLE_CORES",
  "NEURON_RT_NUM_CORES",
  "NEURON_RT_VIRTUAL_CORE_SIZE",
  "NEURON_RT_EXEC_TIMEOUT",
  "NEURON_RT_LOG_LEVEL",
  "NEURON_RT_VALIDATE_HASH",
  "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS",
  "NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES",
  "NEURON_RT_ALLOW_LEGACY_NEFF",
  "NRT_ARCH",
  "NRT_NEFF_MAX_BYTES",
]);

/** libnrt's documented `NEURON_RT_EXEC_TIMEOUT` default, in seconds. */
export const DEFAULT_EXEC_TIMEOUT_SECONDS = 30;

/**
 * The GPSIMD stdout ring used when `NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES` is unset: 4096 bytes, 16 of the
 * 256-byte entries. The recovered code shows the ring's shape but not libnrt's default (seed: spmd-teardown §5.2:
 * entries = size / 0x100, power of two; §5.3: entry size 0x100), so this is our choice: a small ring per
 * NeuronCore, 4× the fixed 1 KiB stderr ring, enough for a kernel's debug prints between two drains.
 */
export const DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES = 4096;

/** seed: spmd-teardown §5.3 — `pool_stdio_get_entry_size` returns 0x100. */
const GPSIMD_STDIO_ENTRY_BYTES = 0x100;
/** The documented maximum (ARCHITECTURE §9); 512 entries. */
const MAX_GPSIMD_STDOUT_QUEUE_SIZE_BYTES = 131072;
/** `NEURON_RT_EXEC_TIMEOUT` is documented as an integer up to INT_MAX. */
const INT_MAX = 0x7fff_ffff;
/**
 * A bound on core indices and counts. The largest instance today has 128 physical NeuronCores (trn2: 16 devices ×
 * 8), so anything above 1023 is a typo; the bound also keeps a range like "0-4294967295" from allocating.
 */
const MAX_CORES = 1024;

type Fail = (expected: string) => never;

/** Renders a rejected value for a message: strings quoted and escaped (so whitespace shows), long ones cut. */
function show(value: unknown): string {
  if (typeof value === "string") {
    const quoted = JSON.stringify(value);
    return quoted.length > 66 ? `${quoted.slice(0, 63)}…"` : quoted;
  }
  if (Array.isArray(value)) return `[${value.map(show).join(",")}]`;
  if (typeof value === "bigint") return `${value}n`;
  return String(value);
}

/** A strict decimal: ASCII digits only, no sign, exponent, fraction or whitespace. */
function parseDecimal(text: string): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

function parseBoolean(text: string): boolean | undefined {
  switch (text.toLowerCase()) {
    case "1":
    case "true":
      return true;
    case "0":
    case "false":
      return false;
    default:
      return undefined;
  }
}

/** Sorted, unique, contiguous core indices, or `fail`. */
function contiguousCores(indices: readonly number[], fail: Fail, expected: string): readonly number[] {
  if (indices.length === 0) fail(expected);
  for (const i of indices) {
    if (!Number.isSafeInteger(i) || i < 0) fail(expected);
    if (i >= MAX_CORES) fail(`core indices from 0 to ${MAX_CORES - 1}`);
  }
  const sorted = [...new Set(indices)].sort((a, b) => a - b);
  if (sorted[sorted.length - 1]! - sorted[0]! !== sorted.length - 1) fail(expected);
  return Object.freeze(sorted);
}

const CORES_TEXT = 'an index, a range "A-B" or a contiguous comma list';

/** `NEURON_RT_VISIBLE_CORES` text: "3", "0-3" or "0,1,2" (any order, repeats allowed, must be contiguous). */
function parseVisibleCores(text: string, fail: Fail): readonly number[] {
  const range = /^([0-9]+)-([0-9]+)$/.exec(text);
  if (range) {
    const first = parseDecimal(range[1]!);
    const last = parseDecimal(range[2]!);
    if (first === undefined || last === undefined || first > last) fail(CORES_TEXT);
    if (last >= MAX_CORES) fail(`core indices from 0 to ${MAX_CORES - 1}`);
    return Object.freeze(Array.from({ length: last - first + 1 }, (_, k) => first + k));
  }
  const indices = text.split(",").map((part) => parseDecimal(part) ?? fail(CORES_TEXT));
  return contiguousCores(indices, fail, CORES_TEXT);
}

/** How one knob reads its variable's text and its option's value. */
interface Knob<K extends keyof RuntimeOptions, T> {
  readonly option: K;
  readonly variable: string;
  readonly fromText: (text: string, fail: Fail) => T;
  readonly fromOption: (value: unknown, fail: Fail) => T;
}

function integerKnob<K extends keyof RuntimeOptions>(
  option: K,
  variable: string,
  expected: string,
  accept: (n: number) => boolean,
): Knob<K, number> {
  const check = (n: number | undefined, fail: Fail): number =>
    n !== undefined && Number.isSafeInteger(n) && accept(n) ? n : fail(expected);
  return {
    option,
    variable,
    fromText: (text, fail) => check(parseDecimal(text), fail),
    fromOption: (value, fail) => check(typeof value === "number" ? value : undefined, fail),
  };
}

function booleanKnob<K extends keyof RuntimeOptions>(option: K, variable: string): Knob<K, boolean> {
  return {
    option,
    variable,
    fromText: (text, fail) => parseBoolean(text) ?? fail("0, 1, true or false"),
    fromOption: (value, fail) => typeof value === "boolean" ? value : fail("true or false"),
  };
}

const isPowerOfTwo = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;

const VISIBLE_CORES: Knob<"visibleCores", readonly number[]> = {
  option: "visibleCores",
  variable: "NEURON_RT_VISIBLE_CORES",
  fromText: parseVisibleCores,
  fromOption: (value, fail) => {
    if (typeof value === "string") return parseVisibleCores(value, fail);
    if (Array.isArray(value)) return contiguousCores(value, fail, "a non-empty list of contiguous core indices");
    return fail(`a list of core indices or ${CORES_TEXT}`);
  },
};

const NUM_CORES = integerKnob(
  "numCores",
  "NEURON_RT_NUM_CORES",
  `an integer from 0 (all NeuronCores) to ${MAX_CORES}`,
  (n) => n >= 0 && n <= MAX_CORES,
);

const VIRTUAL_CORE_SIZE = integerKnob(
  "virtualCoreSize",
  "NEURON_RT_VIRTUAL_CORE_SIZE",
  "1 or 2",
  (n) => n === 1 || n === 2,
);

const EXEC_TIMEOUT = integerKnob(
  "execTimeoutSeconds",
  "NEURON_RT_EXEC_TIMEOUT",
  `a whole number of seconds from 1 to ${INT_MAX}`,
  (n) => n >= 1 && n <= INT_MAX,
);

const LOG_LEVELS_TEXT = "ERROR, WARNING, INFO, DEBUG or TRACE";
const LOG_LEVEL: Knob<"logLevel", LogLevel> = {
  option: "logLevel",
  variable: "NEURON_RT_LOG_LEVEL",
  fromText: (text, fail) => parseLogLevel(text) ?? fail(LOG_LEVELS_TEXT),
  fromOption: (value, fail) => {
    if (typeof value === "string") return parseLogLevel(value) ?? fail(LOG_LEVELS_TEXT);
    if (typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= LogLevels.TRACE) {
      return value as LogLevel;
    }
    return fail(`${LOG_LEVELS_TEXT}, or a LogLevel from 0 to 4`);
  },
};

const VALIDATE_HASH = booleanKnob("validateHash", "NEURON_RT_VALIDATE_HASH");

const ASYNC_INFLIGHT = integerKnob(
  "asyncExecMaxInflightRequests",
  "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS",
  `an integer from 0 (synchronous) to ${INT_MAX}`,
  (n) => n >= 0 && n <= INT_MAX,
);

const GPSIMD_STDOUT = integerKnob(
  "gpsimdStdoutQueueSizeBytes",
  "NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES",
  `0 (off) or a power of two from ${GPSIMD_STDIO_ENTRY_BYTES} to ${MAX_GPSIMD_STDOUT_QUEUE_SIZE_BYTES}`,
  // seed: spmd-teardown §5.3 — the entry count (size / 0x100) must be a power of two, so the size must be too.
  (n) => n === 0 || (isPowerOfTwo(n) && n >= GPSIMD_STDIO_ENTRY_BYTES && n <= MAX_GPSIMD_STDOUT_QUEUE_SIZE_BYTES),
);

const ALLOW_LEGACY_NEFF = booleanKnob("allowLegacyNeff", "NEURON_RT_ALLOW_LEGACY_NEFF");

const ARCH_TEXT = "a generation name such as cayman or trn2 (letters, digits and dashes)";
const ARCH: Knob<"arch", string> = {
  option: "arch",
  variable: "NRT_ARCH",
  fromText: (
    text,
    fail,
  ) => (/^[a-z0-9][a-z0-9-]{0,63}$/i.test(text.trim()) ? text.trim().toLowerCase() : fail(ARCH_TEXT)),
  fromOption: (value, fail) => typeof value === "string" ? ARCH.fromText(value, fail) : fail(ARCH_TEXT),
};

const MAX_NEFF_BYTES = integerKnob(
  "maxNeffBytes",
  "NRT_NEFF_MAX_BYTES",
  "a byte count from 1 MiB (1048576) to 16 GiB",
  (n) => n >= 1 << 20 && n <= 16 * 2 ** 30,
);

/** Where a knob's value came from, for messages. */
type Source = "option" | "env";

/**
 * Reads one knob: the option if it is set, else the variable if it is set and not empty (`export VAR=` is the
 * shell's way to clear one), else `undefined`.
 */
function read<K extends keyof RuntimeOptions, T>(
  knob: Knob<K, T>,
  options: RuntimeOptions,
  env: Record<string, string | undefined>,
  source?: Source,
): T | undefined {
  const value = options[knob.option];
  if (value !== undefined && source !== "env") {
    return knob.fromOption(value, (expected) => {
      throw new NrtError(NrtStatus.NRT_INVALID, `Invalid option ${knob.option} ${show(value)}: expected ${expected}`);
    });
  }
  const text = source === "option" ? undefined : env[knob.variable];
  if (text === undefined || text === "") return undefined;
  return knob.fromText(text, (expected) => {
    throw new NrtError(NrtStatus.NRT_INVALID, `Invalid ${knob.variable} ${show(text)}: expected ${expected}`);
  });
}

/**
 * Validates the configuration knobs and fills in the defaults. Each option that is set overrides its variable.
 * The NeuronCore selection (`visibleCores` / `numCores`) is one knob: if code sets either option, both variables
 * are ignored, so a stray variable in the shell cannot conflict with what the code chose.
 *
 * @param options Knobs set in code.
 * @param env The environment to read `NEURON_RT_*` and `NRT_ARCH` from; defaults to an empty one. Pass
 *   {@linkcode envFromProcess}`()` at a composition root. An empty value counts as unset.
 * @returns The frozen, fully resolved configuration.
 * @throws {NrtError} `NRT_INVALID` for a malformed or out-of-range value, naming the variable (or option), the
 *   value and the accepted form; also when both the visible cores and the core count are set.
 *
 * @example Options override the environment
 * ```ts
 * import { LogLevel, resolveRuntimeConfig } from "@nrt/core";
 * const config = resolveRuntimeConfig(
 *   { logLevel: "debug" },
 *   { NEURON_RT_LOG_LEVEL: "WARNING", NEURON_RT_VISIBLE_CORES: "0-3" },
 * );
 * console.log(config.logLevel === LogLevel.DEBUG, config.visibleCores); // true [0, 1, 2, 3]
 * ```
 *
 * @example A bad value names its variable
 * ```ts
 * import { NrtError, resolveRuntimeConfig } from "@nrt/core";
 * try {
 *   resolveRuntimeConfig({}, { NEURON_RT_VISIBLE_CORES: "0,2" });
 * } catch (e) {
 *   // Invalid NEURON_RT_VISIBLE_CORES "0,2": expected an index, a range "A-B" or a contiguous comma list
 *   console.log(e instanceof NrtError && e.message);
 * }
 * ```
 */
export function resolveRuntimeConfig(
  options: RuntimeOptions = {},
  env: Record<string, string | undefined> = {},
): RuntimeConfig {
  const coresSource: Source = options.visibleCores !== undefined || options.numCores !== undefined ? "option" : "env";
  const visibleCores = read(VISIBLE_CORES, options, env, coresSource);
  const numCores = read(NUM_CORES, options, env, coresSource);
  // NEURON_RT_NUM_CORES=0 is libnrt's documented default and means "all": it selects nothing, so it combines.
  if (visibleCores !== undefined && numCores !== undefined && numCores !== 0) {
    const [a, b] = coresSource === "option"
      ? ["options visibleCores", "numCores"]
      : [VISIBLE_CORES.variable, NUM_CORES.variable];
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot combine ${a} and ${b}: set one of them, not both`);
  }
  const execTimeoutSeconds = read(EXEC_TIMEOUT, options, env) ?? DEFAULT_EXEC_TIMEOUT_SECONDS;
  return Object.freeze({
    visibleCores,
    numCores: numCores === 0 ? undefined : numCores,
    virtualCoreSize: read(VIRTUAL_CORE_SIZE, options, env) as 1 | 2 | undefined,
    execTimeoutSeconds,
    execTimeoutMs: execTimeoutSeconds * 1000,
    logLevel: read(LOG_LEVEL, options, env) ?? LogLevels.ERROR,
    validateHash: read(VALIDATE_HASH, options, env) ?? false,
    asyncExecMaxInflightRequests: read(ASYNC_INFLIGHT, options, env) ?? 0,
    gpsimdStdoutQueueSizeBytes: read(GPSIMD_STDOUT, options, env) ?? DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES,
    allowLegacyNeff: read(ALLOW_LEGACY_NEFF, options, env) ?? false,
    arch: read(ARCH, options, env),
    maxNeffBytes: read(MAX_NEFF_BYTES, options, env) ?? DEFAULT_MAX_DECOMPRESSED_BYTES,
  });
}

/** The parts of `Deno` and `process` that {@linkcode envFromProcess} touches. */
interface ProcessGlobals {
  Deno?: {
    env: { get(name: string): string | undefined };
    permissions?: { querySync?(descriptor: { name: "env"; variable: string }): { state: string } };
  };
  process?: { env?: Record<string, string | undefined> };
}

/**
 * The {@linkcode RUNTIME_ENV_VARIABLES} of this process, for a composition root to pass to
 * {@linkcode resolveRuntimeConfig}; library code takes an `env` record instead of calling this.
 *
 * Under Deno it reads only the variables it is allowed to, and never prompts: without `--allow-env` (or with
 * `--allow-env=NEURON_RT_EXEC_TIMEOUT`, say) the others are simply absent. It never throws; where no environment
 * can be read it returns `{}`.
 *
 * @returns The set variables among {@linkcode RUNTIME_ENV_VARIABLES}.
 *
 * @example Configure from the environment
 * ```ts
 * import { envFromProcess, resolveRuntimeConfig } from "@nrt/core";
 * const config = resolveRuntimeConfig({}, envFromProcess());
 * console.log(config.execTimeoutSeconds);
 * ```
 */
export function envFromProcess(): Record<string, string | undefined> {
  const g = globalThis as unknown as ProcessGlobals;
  const env: Record<string, string | undefined> = {};
  for (const name of RUNTIME_ENV_VARIABLES) {
    try {
      let value: string | undefined;
      if (g.Deno?.env) {
        // Asking first avoids Deno's interactive permission prompt on a terminal.
        const granted = g.Deno.permissions?.querySync?.({ name: "env", variable: name }).state === "granted";
        if (granted) value = g.Deno.env.get(name);
      } else {
        value = g.process?.env?.[name];
      }
      if (value !== undefined) env[name] = value;
    } catch {
      // No permission or no environment: the variable stays unset.
    }
  }
  return env;
}
