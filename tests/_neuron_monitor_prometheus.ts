/**
 * A test reader of neuron-monitor's report stream that produces what AWS's `neuron-monitor-prometheus.py` (the
 * companion script of the Neuron Monitor User Guide, "neuron-monitor-prometheus.py") would expose for it: the same
 * metric families, names, label names and values, including the exporter's state across lines. Written from the
 * exporter's documented and observed behaviour; it is our test code, not the exporter.
 *
 * The exporter's paths, each taken here:
 * - it reads one report per line; a line that is not JSON prints "Unable to decode JSON" and is skipped;
 * - the instance labels (`instance_name`, `instance_id`, `instance_type`, `availability_zone`, `region`,
 *   `subnet_id`, and `ultraserver_id` when the report has one) come from the first report only;
 * - a non-empty `neuron_runtime_data` is walked runtime by runtime: a runtime whose `error` is not `""` is reported
 *   on stderr and skipped, the others add `runtime_tag` to the labels; an empty or missing list clears every
 *   gauge and counter instead (their families stay, with no sample);
 * - in a report (a runtime's `report`, or `system_data` when not `null`), a group with a handler and `error` `""` is
 *   processed, one with an error is reported on stderr, one without a handler is ignored;
 * - handlers: `neuroncore_counters` → `neuroncore_utilization_ratio` (÷100, label `neuroncore`);
 *   `neuron_runtime_vcpu_usage` → `neuron_runtime_vcpu_usage_ratio` (÷100, `usage_type` user/system);
 *   `memory_used` → `neuron_runtime_memory_used_bytes` (`memory_location` host/neuron_device) and
 *   `neuroncore_memory_usage_{constants,model_code,model_shared_scratchpad,runtime_memory,tensors}` (labels
 *   `memory_location`, always the string `None`, and `neuroncore`); `execution_stats` → counters
 *   `execution_errors_total` (`error_type`) and `execution_status_total` (`status_type`), incremented by each
 *   report's counts, and gauge `execution_latency_seconds` (`percentile`, from `total_latency` only, skipped when
 *   `null`); `neuron_hw_counters` → counter `hardware_ecc_events_total` (`event_type`, `neuron_device_index`) over
 *   `mem_ecc_corrected`, `mem_ecc_uncorrected`, `sram_ecc_corrected`, `sram_ecc_uncorrected`; `vcpu_usage` →
 *   `system_vcpu_count` and `system_vcpu_usage_ratio` (user = user+nice, system = system+io_wait+irq+soft_irq,
 *   capped at 100 %, ÷100); `memory_info` → `system_memory_{total,used}_bytes`, `system_swap_{total,used}_bytes`;
 * - info metrics `instance_info` (the instance labels) and `neuron_hardware_info` (`neuron_device_count`,
 *   `neuroncore_per_device_count` then the instance labels), each set once, never cleared.
 *
 * Metric objects follow the Python client (prometheus_client): a counter family is named without `_total` and has
 * `_total` and `_created` samples; an info family `x` has one sample `x_info` of value 1; label values are Python
 * `str()` of the value (so `None`, integers without a decimal point); a missing key, a wrong type, a negative counter
 * increment or labels that do not match a metric's label names stop the exporter, which here throws
 * {@linkcode ExporterStopped}. The exporter process's own collectors (`process_*`, `python_*`) are not modelled.
 *
 * @module
 */

/** A Prometheus metric type as prometheus_client names it. */
export type PromMetricType = "gauge" | "counter" | "info";

/** One sample. */
export interface PromSample {
  /** Sample name, e.g. `execution_status_total`. */
  readonly name: string;
  /** Labels in the metric's label-name order. */
  readonly labels: Readonly<Record<string, string>>;
  /** Value. */
  readonly value: number;
}

/** One metric family, as prometheus_client's `collect()` yields it. */
export interface PromFamily {
  /** Family name (a counter's without `_total`). */
  readonly name: string;
  /** Type. */
  readonly type: PromMetricType;
  /** Help text. */
  readonly help: string;
  /** Label names of the metric (empty for info metrics). */
  readonly labelNames: readonly string[];
  /** Samples, children in creation order. */
  readonly samples: readonly PromSample[];
}

/** The Python exceptions that stop the exporter. */
export type PythonError = "AttributeError" | "KeyError" | "TypeError" | "ValueError";

/** The exporter would have stopped with a Python exception of `kind`. */
export class ExporterStopped extends Error {
  /** The Python exception class, e.g. `KeyError`. */
  readonly kind: PythonError;

  /** Creates the error. */
  constructor(kind: PythonError, message: string) {
    super(`Cannot process the neuron-monitor report: the exporter stops with ${kind}: ${message}`);
    this.name = "ExporterStopped";
    this.kind = kind;
  }
}

type Dict = Record<string, unknown>;

const isDict = (v: unknown): v is Dict => typeof v === "object" && v !== null && !Array.isArray(v);

function pyType(v: unknown): string {
  if (v === null || v === undefined) return "NoneType";
  if (Array.isArray(v)) return "list";
  if (typeof v === "string") return "str";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  return "dict";
}

/** `obj[key]` with Python's failures. */
function item(obj: unknown, key: string): unknown {
  if (!isDict(obj)) {
    const t = pyType(obj);
    if (t === "list") throw new ExporterStopped("TypeError", "list indices must be integers or slices, not str");
    throw new ExporterStopped("TypeError", `'${t}' object is not subscriptable`);
  }
  if (!Object.hasOwn(obj, key)) throw new ExporterStopped("KeyError", `'${key}'`);
  return obj[key];
}

/** `v.items()`: only a dict has it. */
function dict(v: unknown, what: string): Dict {
  if (!isDict(v)) {
    throw new ExporterStopped("AttributeError", `'${pyType(v)}' object has no attribute 'items' (${what})`);
  }
  return v;
}

function list(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) {
    // Iterating a dict walks its keys (strings), which the handlers then index with a str key.
    if (isDict(v)) return Object.keys(v);
    throw new ExporterStopped("TypeError", `'${pyType(v)}' object is not iterable (${what})`);
  }
  return v;
}

function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isDict(v)) return Object.keys(v).length > 0;
  return true;
}

/** Python's `repr(float)`: shortest round-trip digits, positional for 1e-4 ≤ |x| < 1e16. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mant, expText] = Math.abs(x).toExponential().split("e");
  const digits = mant.replace(".", "");
  const exp = Number(expText);
  const decpt = exp + 1;
  if (decpt > 16 || decpt < -3) {
    const m = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
    const e = Math.abs(exp).toString().padStart(2, "0");
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${e}`;
  }
  if (decpt <= 0) return `${sign}0.${"0".repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${"0".repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

/** prometheus_client's `floatToGoString`: how a sample value is written in the text exposition. */
export function floatToGoString(x: number): string {
  if (x === Infinity) return "+Inf";
  if (x === -Infinity) return "-Inf";
  if (Number.isNaN(x)) return "NaN";
  const s = pyFloatRepr(x);
  const dot = s.indexOf(".");
  if (x > 0 && dot > 6) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, "");
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

/** Python's `str()` of a JSON value used as a label value. */
function pyStr(v: unknown): string {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return Number.isInteger(v) && Math.abs(v) < 1e16 ? String(v) : pyFloatRepr(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

/** Python's `float(v)` of a JSON value. */
function pyFloat(v: unknown, what: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "string") {
    const t = v.trim().replaceAll("_", "").toLowerCase();
    if (/^[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?)$/.test(t)) return Number(t);
    if (/^[+-]?(inf|infinity)$/.test(t)) return t.startsWith("-") ? -Infinity : Infinity;
    if (/^[+-]?nan$/.test(t)) return NaN;
    throw new ExporterStopped("ValueError", `could not convert string to float: '${v}' (${what})`);
  }
  throw new ExporterStopped("TypeError", `float() argument must be a string or a real number, not '${pyType(v)}'`);
}

/** Python's `int(s)` of a NeuronCore key. */
function pyInt(v: unknown): number {
  if (typeof v === "string" && /^\s*[+-]?\d+(_\d+)*\s*$/.test(v)) return Number(v.replaceAll("_", "").trim());
  if (typeof v === "number" && Number.isFinite(v)) return Math.trunc(v);
  throw new ExporterStopped("ValueError", `invalid literal for int() with base 10: '${pyStr(v)}'`);
}

/** A number divided as the exporter does (`x / 100.0`): the operand must be numeric. */
function pyNumber(v: unknown, what: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  throw new ExporterStopped("TypeError", `unsupported operand type for ${what}: '${pyType(v)}'`);
}

interface Child {
  readonly values: readonly string[];
  value: number;
  readonly created: number;
}

class Metric {
  readonly children = new Map<string, Child>();
  infoLabels: Readonly<Record<string, string>> | undefined;

  constructor(
    readonly name: string,
    readonly type: PromMetricType,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly now: () => number,
  ) {}

  child(labels: Readonly<Record<string, unknown>>): Child {
    const keys = Object.keys(labels);
    if (keys.length !== this.labelNames.length || !keys.every((k) => this.labelNames.includes(k))) {
      throw new ExporterStopped("ValueError", `Incorrect label names for ${this.name}`);
    }
    const values = this.labelNames.map((k) => pyStr(labels[k]));
    const key = JSON.stringify(values);
    let c = this.children.get(key);
    if (c === undefined) this.children.set(key, c = { values, value: 0, created: this.now() });
    return c;
  }

  set(labels: Readonly<Record<string, unknown>>, value: unknown, what: string): void {
    this.child(labels).value = pyFloat(value, what);
  }

  inc(labels: Readonly<Record<string, unknown>>, amount: unknown, what: string): void {
    if (typeof amount !== "number" && typeof amount !== "boolean") {
      throw new ExporterStopped(
        "TypeError",
        `'<' not supported between instances of '${pyType(amount)}' and 'int' (${what})`,
      );
    }
    const n = Number(amount);
    if (n < 0) throw new ExporterStopped("ValueError", "Counters can only be incremented by non-negative amounts.");
    this.child(labels).value += n;
  }

  family(): PromFamily {
    const samples: PromSample[] = [];
    if (this.type === "info") {
      samples.push({ name: `${this.name}_info`, labels: this.infoLabels ?? {}, value: 1 });
    } else {
      for (const c of this.children.values()) {
        const labels = Object.fromEntries(this.labelNames.map((k, i) => [k, c.values[i]]));
        if (this.type === "counter") {
          samples.push({ name: `${this.name}_total`, labels, value: c.value });
          samples.push({ name: `${this.name}_created`, labels, value: c.created });
        } else samples.push({ name: this.name, labels, value: c.value });
      }
    }
    return { name: this.name, type: this.type, help: this.help, labelNames: this.labelNames, samples };
  }
}

/** The series names a metric registers (prometheus_client `_get_names`). */
function seriesNames(name: string, type: PromMetricType): string[] {
  if (type === "counter") return [name, `${name}_total`, `${name}_created`];
  if (type === "info") return [name, `${name}_info`];
  return [name];
}

type Labels = Record<string, unknown>;
type Group = Map<string, Metric>;
type Handler = (reader: NeuronMonitorPrometheusReader, group: Group, data: unknown, labels: Labels) => void;

const MEMORY_USAGE_TYPES = ["constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors"] as const;
const HW_COUNTERS = ["mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"] as const;

const HANDLERS: Readonly<Record<string, Handler>> = {
  neuroncore_counters(r, group, data, labels) {
    labels.neuroncore = null;
    const g = r.metric(group, "neuroncore_utilization_ratio", "gauge", "NeuronCore utilization ratio", labels);
    for (const [idx, nc] of Object.entries(dict(item(data, "neuroncores_in_use"), "neuroncores_in_use"))) {
      labels.neuroncore = pyInt(idx);
      g.set(labels, pyNumber(item(nc, "neuroncore_utilization"), "/") / 100.0, "neuroncore_utilization");
    }
  },
  neuron_runtime_vcpu_usage(r, group, data, labels) {
    labels.usage_type = null;
    const g = r.metric(group, "neuron_runtime_vcpu_usage_ratio", "gauge", "Runtime vCPU utilization ratio", labels);
    for (const field of ["user", "system"]) {
      labels.usage_type = field;
      g.set(labels, pyNumber(item(item(data, "vcpu_usage"), field), "/") / 100.0, field);
    }
  },
  memory_used(r, group, data, labels) {
    labels.memory_location = null;
    const g = r.metric(group, "neuron_runtime_memory_used_bytes", "gauge", "Runtime memory used bytes", labels);
    const used = item(data, "neuron_runtime_used_bytes");
    for (const location of ["host", "neuron_device"]) {
      labels.memory_location = location;
      g.set(labels, item(used, location), location);
    }
    labels.neuroncore = null;
    labels.memory_location = null;
    for (const type of MEMORY_USAGE_TYPES) {
      const name = `neuroncore_memory_usage_${type}`;
      const m = r.metric(group, name, "gauge", `NeuronCore memory utilization for ${type}`, labels);
      const perCore = dict(item(item(used, "usage_breakdown"), "neuroncore_memory_usage"), "neuroncore_memory_usage");
      for (const [idx, nc] of Object.entries(perCore)) {
        labels.neuroncore = pyInt(idx);
        m.set(labels, item(nc, type), type);
      }
    }
  },
  execution_stats(r, group, data, labels) {
    const errLabels: Labels = { ...labels, error_type: null };
    const errors = r.metric(group, "execution_errors_total", "counter", "Execution errors total", errLabels);
    const errorSummary = item(data, "error_summary");
    for (const type of list(errorSummary, "error_summary")) {
      errLabels.error_type = type;
      errors.inc(errLabels, item(errorSummary, String(type)), `error_summary.${type}`);
    }
    const statusLabels: Labels = { ...labels, status_type: null };
    const status = r.metric(group, "execution_status_total", "counter", "Execution status total", statusLabels);
    const summary = item(data, "execution_summary");
    for (const outcome of list(summary, "execution_summary")) {
      statusLabels.status_type = outcome;
      status.inc(statusLabels, item(summary, String(outcome)), `execution_summary.${outcome}`);
    }
    const latencyLabels: Labels = { ...labels, percentile: null };
    const latency = r.metric(
      group,
      "execution_latency_seconds",
      "gauge",
      "Execution latency in seconds",
      latencyLabels,
    );
    const total = item(item(data, "latency_stats"), "total_latency");
    if (total !== null) {
      for (const p of list(total, "total_latency")) {
        latencyLabels.percentile = p;
        latency.set(latencyLabels, item(total, String(p)), `total_latency.${p}`);
      }
    }
  },
  neuron_hw_counters(r, group, data, labels) {
    labels.event_type = null;
    labels.neuron_device_index = null;
    const c = r.metric(group, "hardware_ecc_events_total", "counter", "Hardware ecc events total", labels);
    for (const device of list(item(data, "neuron_devices"), "neuron_devices")) {
      for (const counter of HW_COUNTERS) {
        labels.event_type = counter;
        labels.neuron_device_index = item(device, "neuron_device_index");
        c.inc(labels, item(device, counter), counter);
      }
    }
  },
  vcpu_usage(r, group, data, labels) {
    const count = r.metric(group, "system_vcpu_count", "gauge", "System vCPU count", labels);
    const usage = item(data, "usage_data");
    const size = isDict(usage)
      ? Object.keys(usage).length
      : typeof usage === "string"
      ? usage.length
      : list(usage, "usage_data").length;
    count.set(labels, size, "usage_data");
    labels.usage_type = null;
    const ratio = r.metric(group, "system_vcpu_usage_ratio", "gauge", "System CPU utilization ratio", labels);
    const aggregation: Record<string, readonly string[]> = {
      user: ["user", "nice"],
      system: ["system", "io_wait", "irq", "soft_irq"],
    };
    for (const [field, parts] of Object.entries(aggregation)) {
      const average = item(data, "average_usage");
      const sum = parts.reduce((a, p) => a + pyNumber(item(average, p), "+"), 0);
      labels.usage_type = field;
      ratio.set(labels, Math.min(sum, 100.0) / 100.0, field);
    }
  },
  memory_info(r, group, data, labels) {
    for (const [source, prefix] of [["memory", "system_memory"], ["swap", "system_swap"]]) {
      for (const stat of ["total_bytes", "used_bytes"]) {
        const g = r.metric(group, `${prefix}_${stat}`, "gauge", `System ${source} ${stat} bytes`, labels);
        g.set(labels, item(data, `${source}_${stat}`), `${source}_${stat}`);
      }
    }
  },
};

/**
 * Other module-level functions of the exporter whose names a group name could select (`process_<group>` is looked
 * up among all of them): called with the wrong arguments, they stop it.
 */
const COLLIDING_GROUPS: ReadonlySet<string> = new Set([
  "data",
  "report_entries",
  "instance_info",
  "neuron_hardware_info",
]);

/** Options of {@linkcode NeuronMonitorPrometheusReader}. */
export interface ReaderOptions {
  /** Wall clock in seconds for `_created` samples (prometheus_client's `time.time()`). */
  readonly now?: () => number;
}

/**
 * Consumes neuron-monitor output line by line and keeps the metrics the exporter would expose.
 *
 * @example Read one report
 * ```ts ignore
 * const reader = new NeuronMonitorPrometheusReader({ now: () => 1000 });
 * reader.consumeLine(serializeMonitorReport(report));
 * reader.value("neuroncore_utilization_ratio", { neuroncore: "0" });
 * ```
 */
export class NeuronMonitorPrometheusReader {
  readonly #now: () => number;
  /** All metric objects by group name, then metric name (the exporter's `all_metric_objects`). */
  readonly #groups = new Map<string, Group>();
  /** Registration order (prometheus_client's registry). */
  readonly #registry: Metric[] = [];
  #instanceInfo: Metric | undefined;
  #hardwareInfo: Metric | undefined;
  #instanceLabels: Record<string, string> | undefined;
  /** What the exporter printed to stdout and stderr, in order. */
  readonly diagnostics: string[] = [];

  /** Creates a reader with no metric yet. */
  constructor(options: ReaderOptions = {}) {
    this.#now = options.now ?? (() => Date.now() / 1000);
  }

  /** The metric `name` of a group, created and registered on first use with the keys of `labels` as label names. */
  metric(group: Group, name: string, type: "gauge" | "counter", help: string, labels: Labels): Metric {
    const existing = group.get(name);
    if (existing !== undefined) return existing;
    const family = type === "counter" ? name.replace(/_total$/, "") : name;
    this.#register(family, type);
    const m = new Metric(family, type, help, Object.keys(labels), this.#now);
    group.set(name, m);
    this.#registry.push(m);
    return m;
  }

  /** prometheus_client refuses a metric whose series names clash with a registered one. */
  #register(family: string, type: PromMetricType): void {
    const taken = new Set(this.#registry.flatMap((m) => seriesNames(m.name, m.type)));
    const clash = seriesNames(family, type).filter((n) => taken.has(n));
    if (clash.length > 0) {
      throw new ExporterStopped("ValueError", `Duplicated timeseries in CollectorRegistry: {'${clash.join("', '")}'}`);
    }
  }

  #info(name: string, help: string, labels: Record<string, string>): Metric {
    this.#register(name, "info");
    const m = new Metric(name, "info", help, [], this.#now);
    m.infoLabels = labels;
    this.#registry.push(m);
    return m;
  }

  /**
   * Consumes text holding one or more report lines (as read from neuron-monitor's stdout).
   *
   * @throws {ExporterStopped} Where the exporter would stop.
   */
  consume(text: string): void {
    const lines = text.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    for (const line of lines) this.consumeLine(line);
  }

  /**
   * Consumes one line of neuron-monitor output.
   *
   * @throws {ExporterStopped} Where the exporter would stop.
   */
  consumeLine(line: string): void {
    let report: unknown;
    try {
      report = JSON.parse(line);
    } catch (e) {
      this.diagnostics.push(`Unable to decode JSON ${(e as Error).message}`);
      return;
    }
    if (this.#instanceLabels === undefined) this.#instanceLabels = instanceLabels(item(report, "instance_info"));
    this.#processData(report, this.#instanceLabels);
  }

  #processData(report: unknown, instance: Record<string, string>): void {
    if (!isDict(report)) {
      throw new ExporterStopped("AttributeError", `'${pyType(report)}' object has no attribute 'get'`);
    }
    const runtimes = Object.hasOwn(report, "neuron_runtime_data") ? report.neuron_runtime_data : [];
    if (truthy(runtimes)) {
      for (const runtime of list(runtimes, "neuron_runtime_data")) {
        const tag = item(runtime, "neuron_runtime_tag");
        const error = item(runtime, "error");
        if (error !== "") {
          this.diagnostics.push(`Runtime ${pyStr(tag)} error: ${pyStr(error)}`);
          continue;
        }
        this.#processEntries(item(runtime, "report"), { ...instance, runtime_tag: tag }, tag);
      }
    } else {
      for (const group of this.#groups.values()) for (const m of group.values()) m.children.clear();
    }
    const system = item(report, "system_data");
    if (system !== null) this.#processEntries(system, instance, undefined);
    this.#instanceInfo ??= this.#info("instance", "EC2 instance information", instance);
    const hw = item(report, "neuron_hardware_info");
    if (hw !== null && this.#hardwareInfo === undefined) {
      this.#hardwareInfo = this.#info("neuron_hardware", "Neuron Hardware Information", {
        neuron_device_count: pyStr(item(hw, "neuron_device_count")),
        neuroncore_per_device_count: pyStr(item(hw, "neuroncore_per_device_count")),
        ...instance,
      });
    }
  }

  #processEntries(entries: unknown, labels: Labels, tag: unknown): void {
    for (const [name, data] of Object.entries(dict(entries, "report"))) {
      const handler = Object.hasOwn(HANDLERS, name) ? HANDLERS[name] : undefined;
      if (handler === undefined && !COLLIDING_GROUPS.has(name)) continue;
      const error = item(data, "error");
      if (error !== "") {
        this.diagnostics.push(
          tag === undefined
            ? `Error getting ${name}: ${pyStr(error)}`
            : `Error getting ${name} for runtime tag ${pyStr(tag)}: ${pyStr(error)}`,
        );
        continue;
      }
      if (handler === undefined) throw new ExporterStopped("TypeError", `process_${name}() called with a metric group`);
      let group = this.#groups.get(name);
      if (group === undefined) this.#groups.set(name, group = new Map());
      handler(this, group, data, { ...labels });
    }
  }

  /** Every family in registration order, as prometheus_client's `collect()` yields them. */
  families(): PromFamily[] {
    return this.#registry.map((m) => m.family());
  }

  /** One family by name (a counter's without `_total`), or `undefined`. */
  family(name: string): PromFamily | undefined {
    return this.families().find((f) => f.name === name);
  }

  /** Every sample named `name` whose labels include `labels`. */
  samples(name: string, labels: Readonly<Record<string, string>> = {}): PromSample[] {
    return this.families().flatMap((f) => f.samples).filter((s) =>
      s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
    );
  }

  /**
   * The value of the one sample named `name` whose labels include `labels`, or `undefined` when none matches.
   *
   * @throws {RangeError} When several samples match.
   */
  value(name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
    const found = this.samples(name, labels);
    if (found.length > 1) throw new RangeError(`Cannot pick a value: ${found.length} samples of ${name} match`);
    return found[0]?.value;
  }

  /** The text exposition prometheus_client's `generate_latest` would serve for these families. */
  exposition(): string {
    const out: string[] = [];
    const escape = (s: string): string => s.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
    const line = (s: PromSample): string => {
      const labels = Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      const text = labels.map(([k, v]) => `${k}="${escape(v).replaceAll('"', '\\"')}"`).join(",");
      return `${s.name}${labels.length > 0 ? `{${text}}` : ""} ${floatToGoString(s.value)}\n`;
    };
    for (const f of this.families()) {
      const name = f.type === "counter" ? `${f.name}_total` : f.type === "info" ? `${f.name}_info` : f.name;
      out.push(`# HELP ${name} ${escape(f.help)}\n`, `# TYPE ${name} ${f.type === "info" ? "gauge" : f.type}\n`);
      const created = f.samples.filter((s) => s.name === `${f.name}_created`);
      for (const s of f.samples) if (!created.includes(s)) out.push(line(s));
      if (created.length > 0) {
        out.push(`# HELP ${f.name}_created ${escape(f.help)}\n`, `# TYPE ${f.name}_created gauge\n`);
        for (const s of created) out.push(line(s));
      }
    }
    return out.join("");
  }
}

/** `get_instance_labels`: the six instance labels, plus `ultraserver_id` when the report carries one. */
function instanceLabels(info: unknown): Record<string, string> {
  const labels: Record<string, unknown> = {
    instance_name: item(info, "instance_name"),
    instance_id: item(info, "instance_id"),
    instance_type: item(info, "instance_type"),
    availability_zone: item(info, "instance_availability_zone"),
    region: item(info, "instance_region"),
    subnet_id: item(info, "subnet_id"),
  };
  if (isDict(info) && Object.hasOwn(info, "ultraserver_id")) labels.ultraserver_id = info.ultraserver_id;
  return Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, pyStr(v)]));
}
