/**
 * The neuron-monitor configuration file (`neuron-monitor -c FILE`), parsed and validated (Neuron Monitor User
 * Guide, "Configuration file example" and "JSON objects and fields in the configuration file"):
 *
 * ```json
 * { "period": "1s",
 *   "neuron_runtimes": [{ "tag_filter": ".*", "metrics": [{ "type": "neuroncore_counters" }, ...] }],
 *   "system_metrics": [{ "type": "vcpu_usage" }, { "period": "2s", "type": "neuron_hw_counters" }] }
 * ```
 *
 * - `period` may sit on the root, on a `neuron_runtimes` entry (applies to its metric groups) and on a metric group;
 *   the nearest one wins and the default is 5 seconds.
 * - `tag_filter` is an optional regex over the application tag; absent, every application matches.
 * - Without a configuration file every metric group is collected every 5 seconds for every application.
 *
 * Ours, where the guide is silent: periods are Go duration strings (`"500ms"`, `"1s"`, `"1m30s"`) and must be
 * positive; `tag_filter` is searched unanchored (Go's `MatchString`), with JavaScript regex syntax; an application
 * matched by several `neuron_runtimes` entries takes the first; `metrics` is required on an entry; unknown fields,
 * unknown group types and a group listed twice in one list are errors naming the field; a configuration that enables
 * no metric group gets one report per root `period`.
 *
 * @module
 */
import type { RuntimeMetricGroup, SystemMetricGroup } from "./snapshot.ts";

/** The runtime-level group types, in the guide's order. */
export const RUNTIME_METRIC_GROUPS: readonly RuntimeMetricGroup[] = Object.freeze([
  "neuroncore_counters",
  "memory_used",
  "neuron_runtime_vcpu_usage",
  "execution_stats",
]);

/** The system-level group types, in the guide's order. */
export const SYSTEM_METRIC_GROUPS: readonly SystemMetricGroup[] = Object.freeze([
  "vcpu_usage",
  "memory_info",
  "neuron_hw_counters",
]);

/** The period used when none is set anywhere (Neuron Monitor User Guide: "a default value of 5 seconds"). */
export const DEFAULT_PERIOD_SECONDS = 5;

/** One metric group to collect, with its resolved period. */
export interface MetricGroupPlan<T extends string> {
  /** The group type. */
  readonly type: T;
  /** Seconds between two collections. */
  readonly periodSeconds: number;
}

/** One `neuron_runtimes` entry, resolved. */
export interface RuntimeSelection {
  /** The `tag_filter` regex, `null` when absent (every application matches). */
  readonly tagFilter: RegExp | null;
  /** The groups collected for the matching applications, in the order listed. */
  readonly groups: readonly MetricGroupPlan<RuntimeMetricGroup>[];
}

/** A validated configuration. */
export interface MonitorConfig {
  /** `neuron_runtimes`, in order. */
  readonly runtimes: readonly RuntimeSelection[];
  /** `system_metrics`, in the order listed. */
  readonly system: readonly MetricGroupPlan<SystemMetricGroup>[];
  /**
   * The root `period` in seconds (default {@linkcode DEFAULT_PERIOD_SECONDS}). Ours: a configuration that enables no
   * metric group still gets one report per this period (the guide is silent; neuron-monitor waits for a group to fall
   * due, and none ever does).
   */
  readonly periodSeconds?: number;
}

/**
 * A configuration that cannot be used; `field` is the JSON path of the offending value (`""` for the document).
 *
 * @example Report the bad field
 * ```ts
 * import { NeuronMonitorConfigError, parseMonitorConfig } from "./neuron_monitor_config.ts";
 * try {
 *   parseMonitorConfig('{"period": "soon"}');
 * } catch (e) {
 *   if (e instanceof NeuronMonitorConfigError) console.log(e.field); // "period"
 * }
 * ```
 */
export class NeuronMonitorConfigError extends Error {
  /** JSON path of the offending value, e.g. `neuron_runtimes[0].metrics[1].type`. */
  readonly field: string;

  /** Creates the error for `field`, with `why` after the colon of the message. */
  constructor(field: string, why: string, options?: ErrorOptions) {
    super(`Cannot use neuron-monitor config: ${field === "" ? "the document" : field} ${why}`, options);
    this.name = "NeuronMonitorConfigError";
    this.field = field;
  }
}

const UNIT_NS: Readonly<Record<string, number>> = {
  ns: 1,
  us: 1e3,
  "µs": 1e3,
  "μs": 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

/** Why `text` is not a positive Go duration, or its length in seconds. */
function goDuration(text: string): number | string {
  const re = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ns = 0;
  let at = 0;
  while (at < text.length) {
    re.lastIndex = at;
    const m = re.exec(text);
    if (m === null) return 'expected a duration such as "500ms", "1s" or "1m30s"';
    ns += Number(m[1]) * UNIT_NS[m[2]];
    at = re.lastIndex;
  }
  if (text.length === 0) return 'expected a duration such as "500ms", "1s" or "1m30s"';
  if (!(ns > 0)) return "expected a positive duration";
  return ns / 1e9;
}

/**
 * Parses a Go duration string (`time.ParseDuration`: `"300ms"`, `"1.5s"`, `"1m30s"`) into seconds. Ours: a sign
 * and a zero duration are refused, as a period must be positive.
 *
 * @throws {RangeError} When `text` is not a positive duration.
 *
 * @example Parse a period
 * ```ts
 * import { parseGoDuration } from "./neuron_monitor_config.ts";
 * console.log(parseGoDuration("1m30s")); // 90
 * ```
 */
export function parseGoDuration(text: string): number {
  const r = goDuration(text);
  if (typeof r === "string") throw new RangeError(`Cannot parse duration "${text}": ${r}`);
  return r;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return `"${v}"`;
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

function onlyKeys(obj: Json, path: string, allowed: readonly string[]): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) {
      const at = path === "" ? k : `${path}.${k}`;
      throw new NeuronMonitorConfigError(at, `is not a known field; expected one of ${allowed.join(", ")}`);
    }
  }
}

function period(obj: Json, path: string, inherited: number): number {
  if (!("period" in obj)) return inherited;
  const at = path === "" ? "period" : `${path}.period`;
  const v = obj.period;
  if (typeof v !== "string") throw new NeuronMonitorConfigError(at, `is ${describe(v)}, expected a duration string`);
  const r = goDuration(v);
  if (typeof r === "string") throw new NeuronMonitorConfigError(at, `is "${v}", ${r}`);
  return r;
}

function list(obj: Json, key: string, path: string): unknown[] {
  const at = path === "" ? key : `${path}.${key}`;
  const v = obj[key];
  if (!Array.isArray(v)) throw new NeuronMonitorConfigError(at, `is ${describe(v)}, expected an array`);
  return v;
}

function groups<T extends string>(
  items: unknown[],
  path: string,
  known: readonly T[],
  inherited: number,
): MetricGroupPlan<T>[] {
  const out: MetricGroupPlan<T>[] = [];
  items.forEach((item, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(item)) throw new NeuronMonitorConfigError(at, `is ${describe(item)}, expected an object`);
    onlyKeys(item, at, ["type", "period"]);
    if (!("type" in item)) throw new NeuronMonitorConfigError(`${at}.type`, "is missing");
    const type = item.type;
    if (typeof type !== "string" || !(known as readonly string[]).includes(type)) {
      throw new NeuronMonitorConfigError(`${at}.type`, `is ${describe(type)}, expected one of ${known.join(", ")}`);
    }
    if (out.some((g) => g.type === type)) {
      throw new NeuronMonitorConfigError(`${at}.type`, `is "${type}", which this list already enables`);
    }
    out.push({ type: type as T, periodSeconds: period(item, at, inherited) });
  });
  return out;
}

function tagFilter(entry: Json, at: string): RegExp | null {
  if (!("tag_filter" in entry)) return null;
  const v = entry.tag_filter;
  if (typeof v !== "string") {
    throw new NeuronMonitorConfigError(`${at}.tag_filter`, `is ${describe(v)}, expected a regex string`);
  }
  try {
    return new RegExp(v);
  } catch (e) {
    throw new NeuronMonitorConfigError(`${at}.tag_filter`, `is "${v}", which is not a valid regex`, { cause: e });
  }
}

/**
 * Validates a parsed configuration document.
 *
 * @param doc The value of the JSON document.
 * @returns The resolved configuration: every group with its period.
 * @throws {NeuronMonitorConfigError} Naming the first offending field.
 */
export function validateMonitorConfig(doc: unknown): MonitorConfig {
  if (!isObject(doc)) throw new NeuronMonitorConfigError("", `is ${describe(doc)}, expected a JSON object`);
  onlyKeys(doc, "", ["period", "neuron_runtimes", "system_metrics"]);
  const root = period(doc, "", DEFAULT_PERIOD_SECONDS);
  const runtimes: RuntimeSelection[] = [];
  if ("neuron_runtimes" in doc) {
    list(doc, "neuron_runtimes", "").forEach((entry, i) => {
      const at = `neuron_runtimes[${i}]`;
      if (!isObject(entry)) throw new NeuronMonitorConfigError(at, `is ${describe(entry)}, expected an object`);
      onlyKeys(entry, at, ["tag_filter", "metrics", "period"]);
      if (!("metrics" in entry)) throw new NeuronMonitorConfigError(`${at}.metrics`, "is missing");
      const filter = tagFilter(entry, at);
      const inherited = period(entry, at, root);
      runtimes.push({
        tagFilter: filter,
        groups: groups(list(entry, "metrics", at), `${at}.metrics`, RUNTIME_METRIC_GROUPS, inherited),
      });
    });
  }
  const system = "system_metrics" in doc
    ? groups(list(doc, "system_metrics", ""), "system_metrics", SYSTEM_METRIC_GROUPS, root)
    : [];
  return { runtimes, system, periodSeconds: root };
}

/**
 * Parses and validates the text of a configuration file.
 *
 * @param text The file's contents.
 * @returns The resolved configuration.
 * @throws {NeuronMonitorConfigError} When the text is not JSON (field `""`) or a field is wrong.
 *
 * @example Collect the core counters every second
 * ```ts
 * import { parseMonitorConfig } from "./neuron_monitor_config.ts";
 * const c = parseMonitorConfig('{"period":"1s","neuron_runtimes":[{"metrics":[{"type":"neuroncore_counters"}]}]}');
 * console.log(c.runtimes[0].groups[0].periodSeconds); // 1
 * ```
 */
export function parseMonitorConfig(text: string): MonitorConfig {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new NeuronMonitorConfigError("", `is not JSON: ${(e as Error).message}`, { cause: e });
  }
  return validateMonitorConfig(doc);
}

/**
 * The configuration neuron-monitor runs without a file: every group, every 5 seconds, every application (Neuron
 * Monitor User Guide, "Not specifying any configuration file ...").
 */
export function defaultMonitorConfig(): MonitorConfig {
  return {
    runtimes: [{
      tagFilter: null,
      groups: RUNTIME_METRIC_GROUPS.map((type) => ({ type, periodSeconds: DEFAULT_PERIOD_SECONDS })),
    }],
    system: SYSTEM_METRIC_GROUPS.map((type) => ({ type, periodSeconds: DEFAULT_PERIOD_SECONDS })),
    periodSeconds: DEFAULT_PERIOD_SECONDS,
  };
}

/** The first `neuron_runtimes` entry whose `tag_filter` matches `tag`, or `undefined` when none does. */
export function selectRuntime(config: MonitorConfig, tag: string): RuntimeSelection | undefined {
  return config.runtimes.find((r) => r.tagFilter === null || r.tagFilter.test(tag));
}
