/**
 * Request statistics: Triton's statistics extension (`GET v2/models[/<m>]/stats`, durations in ns) and the
 * Prometheus text at `GET /metrics` — Triton's `nv_inference_*` counters under an `nrt_` prefix (durations in µs),
 * neuron-monitor's execution outcomes as `nrt_execution_status_total{status}`, and device memory per NeuronCore.
 *
 * Beside our own names, the names AWS's `neuron-monitor-prometheus.py` derives from neuron-monitor's report (Neuron
 * Monitor User Guide, "neuron-monitor-prometheus.py"), with its label names, so Neuron dashboards and alerts read
 * `nrt serve` unchanged: `neuroncore_utilization_ratio`, `neuron_runtime_memory_used_bytes`,
 * `neuroncore_memory_usage_{constants,model_code,model_shared_scratchpad,runtime_memory,tensors}`,
 * `execution_status_total`, `execution_errors_total`, `execution_latency_seconds`, `hardware_ecc_events_total`
 * ({@linkcode exporterFamilies}). Where the exporter's values come from a monitor period, ours (docs/neuron-tools.md):
 * utilization and latency percentiles cover the last minute, counters count since the server started.
 *
 * The runtime's own execution statistics (`Runtime.executionStats`, `kmetric_update_nds_*` of seed lifecycle-error-model
 * §5.2) per model and NeuronCore: `nrt_model_execution_status_total{status}` by final `NRT_STATUS`, with
 * neuron-monitor's `status_type` (`execution_summary`) and `error_type` (`error_summary`) of that status, and
 * `nrt_model_execution_error_flags_total{flag}` per `kbl_infer_errors` flag (ours: neuron-monitor has no per-flag
 * counter; {@linkcode executionStatsFamilies}).
 *
 * @module
 */
import { INFER_ERROR_NAMES, type ModelExecutionStats, NrtStatus, nrtStatusName, type Runtime } from "@nrt/core";
import process from "node:process";
import { MODEL_VERSION, type ModelRepository } from "./model_repository.ts";
import type { InferTiming, InstanceView } from "./served_model.ts";
import type { NeuronActivity } from "./neuron_activity.ts";
import { DEVICE_MEMORY_CATEGORIES, deviceMemoryBreakdown } from "./neuron/memory_categories.ts";
import {
  executionErrorKind,
  executionOutcome as monitorOutcome,
  latencyPercentiles,
  summarizeExecutions,
} from "./neuron/execution_outcomes.ts";

/** A count and a total duration (Triton's `StatisticDuration`, in ns). */
export interface StatDuration {
  /** Events. */
  count: number;
  /** Total nanoseconds. */
  ns: number;
}

/** One entry of `model_stats` (Triton's statistics extension). */
export interface ModelStatistics {
  /** Model name. */
  name: string;
  /** Version. */
  version: string;
  /** Milliseconds since the epoch of the last inference, 0 if none. */
  last_inference: number;
  /** Inferences performed (batch size 1 each). */
  inference_count: number;
  /** Executions performed. */
  execution_count: number;
  /** Durations by phase. */
  inference_stats: Record<
    "success" | "fail" | "queue" | "compute_input" | "compute_infer" | "compute_output" | "cache_hit" | "cache_miss",
    StatDuration
  >;
  /** Per-batch-size statistics (no dynamic batching: empty). */
  batch_stats: unknown[];
}

/** A model's counters at a glance (the dashboard's row), durations in µs. */
export interface ModelSummary {
  /** Successful requests. */
  readonly success: number;
  /** Failed requests. */
  readonly failure: number;
  /** Executions (successful or not). */
  readonly executions: number;
  /** Mean request time of the successful requests, arrival to response; 0 without any. */
  readonly meanRequestUs: number;
  /** Mean `nrt_execute` time of the successful requests; 0 without any. */
  readonly meanInferUs: number;
  /** Request time of the last request, successful or not; 0 without any. */
  readonly lastRequestUs: number;
}

/** Options of {@linkcode InferenceMetrics}. */
export interface InferenceMetricsOptions {
  /**
   * The repository whose models the requests are for: each request is then counted under the version its model was
   * served as when it was recorded, as Triton counts each version apart. Without it the counters are kept per model
   * and labelled with the version served when they are read (ours).
   */
  readonly repository?: Pick<ModelRepository, "get">;
}

/** Why a request failed, as Triton's `nv_inference_request_failure{reason}` says it. */
export type FailureReason = "REJECTED" | "BACKEND" | "OTHER";

class Counter {
  count = 0;
  us = 0;
  add(us: number): void {
    this.count++;
    this.us += us;
  }
}

class ModelCounters {
  /** The sum of some counters (one model's versions). */
  static sum(list: Iterable<ModelCounters>): ModelCounters {
    const out = new ModelCounters();
    for (const m of list) {
      for (const k of ["success", "fail", "queue", "input", "infer", "output"] as const) {
        out[k].count += m[k].count;
        out[k].us += m[k].us;
      }
      for (const r of ["REJECTED", "BACKEND", "OTHER"] as const) out.failures[r] += m.failures[r];
      out.executions += m.executions;
      out.last = Math.max(out.last, m.last);
      if (m.lastSeq >= out.lastSeq) {
        out.lastSeq = m.lastSeq;
        out.lastUs = m.lastUs;
      }
    }
    return out;
  }

  readonly success = new Counter();
  readonly fail = new Counter();
  readonly failures: Record<FailureReason, number> = { REJECTED: 0, BACKEND: 0, OTHER: 0 };
  readonly queue = new Counter();
  readonly input = new Counter();
  readonly infer = new Counter();
  readonly output = new Counter();
  executions = 0;
  /** When the last execution ended (ms since the epoch), 0 before the first. */
  last = 0;
  /** The metrics' sequence number of the last request recorded here (which of a model's versions had the last). */
  lastSeq = 0;
  /** Request time of the last request, µs. */
  lastUs = 0;
}

/** neuron-monitor's execution outcome names, by `NRT_STATUS`. */
function executionOutcome(status: number): string {
  switch (status) {
    case NrtStatus.NRT_SUCCESS:
      return "completed";
    case NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR:
      return "completed_with_err";
    case NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR:
      return "completed_with_num_err";
    case NrtStatus.NRT_TIMEOUT:
      return "timed_out";
    case NrtStatus.NRT_INVALID:
    case NrtStatus.NRT_EXEC_BAD_INPUT:
      return "incorrect_input";
    case NrtStatus.NRT_QUEUE_FULL:
    case NrtStatus.NRT_EXEC_NC_BUSY:
      return "failed_to_queue";
    default:
      return status === NrtStatus.NRT_HW_ERROR || status === NrtStatus.NRT_EXEC_UNIT_UNRECOVERABLE ||
          (status >= 1200 && status <= 1206)
        ? "hardware_error"
        : "failed";
  }
}

const OUTCOMES = [
  "completed",
  "completed_with_err",
  "completed_with_num_err",
  "timed_out",
  "incorrect_input",
  "failed_to_queue",
  "hardware_error",
  "failed",
];

/** The server's counters. */
export class InferenceMetrics {
  /**
   * Counters by model, then by the version the requests were served as; `""` holds the requests recorded without a
   * repository to say the version (counted under whichever version is served when they are read).
   */
  readonly #models = new Map<string, Map<string, ModelCounters>>();
  readonly #repository: Pick<ModelRepository, "get"> | undefined;
  /** The version each model was last shown as (`render`), for counters recorded without a known version. */
  readonly #shownAs = new Map<string, string>();
  #seq = 0;
  readonly #outcomes = new Map<string, number>(OUTCOMES.map((o) => [o, 0]));
  /** `H_MODEL` → the repository model it was served as, while the runtime lists the handle. */
  readonly #served = new Map<number, { readonly model: string; readonly version: string }>();
  /** Each handle's samples at the last scrape. */
  readonly #lastSeen = new Map<number, ExecSamples>();
  /** The last samples of the handles the runtime no longer lists (unloaded), summed by label: counters never drop. */
  readonly #carried: ExecSamples = { status: new Map(), flags: new Map() };

  /**
   * Creates the counters, all zero.
   *
   * @param options The repository whose served versions label the counts (`nrt serve` passes it).
   */
  constructor(options: InferenceMetricsOptions = {}) {
    this.#repository = options.repository;
  }

  #model(name: string, version: string): ModelCounters {
    let versions = this.#models.get(name);
    if (versions === undefined) this.#models.set(name, versions = new Map());
    let m = versions.get(version);
    if (m === undefined) versions.set(version, m = new ModelCounters());
    return m;
  }

  /**
   * A model's counters of one version: that version's, plus those recorded without a known version when `version`
   * is the one served now.
   */
  #countersOf(name: string, version: string, served: string): ModelCounters {
    const versions = this.#models.get(name);
    if (versions === undefined) return new ModelCounters();
    const own = versions.get(version), unknown = version === served ? versions.get("") : undefined;
    if (unknown === undefined) return own ?? new ModelCounters();
    return own === undefined ? unknown : ModelCounters.sum([own, unknown]);
  }

  /**
   * Records one inference request of a known model, under the version the repository serves it as now (given one).
   *
   * @param model Model name.
   * @param requestUs Time from the request's arrival to its response, µs.
   * @param timing The phases of the request.
   * @param failure Why it failed, or `undefined` on success.
   */
  recordRequest(model: string, requestUs: number, timing: InferTiming, failure?: FailureReason): void {
    const m = this.#model(model, this.#repository?.get(model)?.version ?? "");
    m.lastUs = requestUs;
    m.lastSeq = ++this.#seq;
    if (failure === undefined) {
      m.success.add(requestUs);
      m.queue.add(timing.queueUs);
      m.input.add(timing.inputUs);
      m.infer.add(timing.inferUs);
      m.output.add(timing.outputUs);
    } else {
      m.fail.add(requestUs);
      m.failures[failure]++;
    }
    if (timing.execStatus !== undefined) {
      m.executions++;
      m.last = Date.now();
      const o = executionOutcome(timing.execStatus);
      this.#outcomes.set(o, (this.#outcomes.get(o) ?? 0) + 1);
    }
  }

  /**
   * Triton's `model_stats` entry of one version of a model.
   *
   * @param name Model name.
   * @param version The version (default: the one the repository serves, else `"1"`).
   * @returns The statistics (zeros for a model without requests).
   */
  modelStatistics(name: string, version?: string): ModelStatistics {
    const served = this.#repository?.get(name)?.version ?? version ?? this.#shownAs.get(name) ?? MODEL_VERSION;
    const v = version ?? served;
    const m = this.#countersOf(name, v, served);
    const d = (c: Counter): StatDuration => ({ count: c.count, ns: c.us * 1000 });
    return {
      name,
      version: v,
      last_inference: m.last,
      inference_count: m.success.count,
      execution_count: m.executions,
      inference_stats: {
        success: d(m.success),
        fail: d(m.fail),
        queue: d(m.queue),
        compute_input: d(m.input),
        compute_infer: d(m.infer),
        compute_output: d(m.output),
        cache_hit: { count: 0, ns: 0 },
        cache_miss: { count: 0, ns: 0 },
      },
      batch_stats: [],
    };
  }

  /**
   * A model's counters at a glance, over every version it was served as.
   *
   * @param name Model name.
   * @returns Counts and mean/last durations (zeros for a model without requests).
   */
  modelSummary(name: string): ModelSummary {
    const m = ModelCounters.sum(this.#models.get(name)?.values() ?? []);
    const mean = (us: number): number => (m.success.count === 0 ? 0 : Math.round(us / m.success.count));
    return {
      success: m.success.count,
      failure: m.fail.count,
      executions: m.executions,
      meanRequestUs: mean(m.success.us),
      meanInferUs: mean(m.infer.us),
      lastRequestUs: m.lastUs,
    };
  }

  /** `nrt_execution_status_total`: executions by neuron-monitor's outcome name, every outcome present. */
  executionOutcomes(): Record<string, number> {
    return Object.fromEntries(this.#outcomes);
  }

  /**
   * The Prometheus text exposition of every counter, the model states and the device memory.
   *
   * @param rt The runtime (for device memory).
   * @param repo The repository (for the model list and readiness).
   * @param activity The NeuronCores' activity: adds the neuron-monitor exporter's names ({@linkcode exporterFamilies}).
   * @returns Text in the Prometheus exposition format 0.0.4.
   */
  async render(rt: Runtime, repo: ModelRepository, activity?: NeuronActivity): Promise<string> {
    const lines: string[] = [];
    const family = (name: string, type: string, help: string, samples: Array<[string, number]>): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) lines.push(`${name}${labels} ${v}`);
    };
    // One series per model and version: the version each model is served as (zeros without requests), then any
    // other version counted since the server started, then models no longer in the repository.
    const series: Array<{ readonly name: string; readonly version: string; readonly counters: ModelCounters }> = [];
    const inRepo = new Set<string>();
    const served = (name: string): string => repo.get(name)?.version ?? this.#shownAs.get(name) ?? MODEL_VERSION;
    for (const m of repo.models()) {
      inRepo.add(m.name);
      this.#shownAs.set(m.name, m.version);
      series.push({ name: m.name, version: m.version, counters: this.#countersOf(m.name, m.version, m.version) });
    }
    for (const [name, versions] of this.#models) {
      const now = served(name);
      for (const v of versions.keys()) {
        if ((inRepo.has(name) && (v === now || v === "")) || (!inRepo.has(name) && v === "" && versions.has(now))) {
          continue;
        }
        const version = v === "" ? now : v;
        series.push({ name, version, counters: this.#countersOf(name, version, now) });
      }
    }
    const lab = (n: string, version: string, extra = ""): string => `{model="${n}",version="${version}"${extra}}`;
    const per = (pick: (m: ModelCounters) => number): Array<[string, number]> =>
      series.map((x) => [lab(x.name, x.version), pick(x.counters)]);
    family(
      "nrt_inference_request_success",
      "counter",
      "Number of successful inference requests",
      per((m) => m.success.count),
    );
    const failures: Array<[string, number]> = [];
    for (const x of series) {
      for (const r of ["REJECTED", "BACKEND", "OTHER"] as const) {
        failures.push([lab(x.name, x.version, `,reason="${r}"`), x.counters.failures[r]]);
      }
    }
    family("nrt_inference_request_failure", "counter", "Number of failed inference requests", failures);
    family("nrt_inference_count", "counter", "Number of inferences performed", per((m) => m.success.count));
    family("nrt_inference_exec_count", "counter", "Number of model executions performed", per((m) => m.executions));
    family(
      "nrt_inference_request_duration_us",
      "counter",
      "Cumulative inference request duration in microseconds",
      per((m) => m.success.us + m.fail.us),
    );
    family(
      "nrt_inference_queue_duration_us",
      "counter",
      "Cumulative inference queuing duration in microseconds",
      per((m) => m.queue.us),
    );
    family(
      "nrt_inference_compute_input_duration_us",
      "counter",
      "Cumulative compute input duration in microseconds",
      per((m) => m.input.us),
    );
    family(
      "nrt_inference_compute_infer_duration_us",
      "counter",
      "Cumulative compute inference duration in microseconds",
      per((m) => m.infer.us),
    );
    family(
      "nrt_inference_compute_output_duration_us",
      "counter",
      "Cumulative inference compute output duration in microseconds",
      per((m) => m.output.us),
    );
    family(
      "nrt_inference_pending_request_count",
      "gauge",
      "Inference requests running or waiting for an instance",
      repo.models().map((m) => [lab(m.name, m.version), m.served?.inflight ?? 0]),
    );
    family(
      "nrt_model_ready",
      "gauge",
      "Whether the model is loaded and not poisoned (1) or not (0)",
      repo.models().map((m) => [lab(m.name, m.version), m.state === "READY" && m.reason === "" ? 1 : 0]),
    );
    instanceFamilies(family, repo);
    family(
      "nrt_execution_status_total",
      "counter",
      "Executions by outcome, as neuron-monitor's execution_stats names them",
      [...this.#outcomes].map(([o, v]) => [`{status="${o}"}`, v]),
    );
    const dev = rt.device.index;
    const booked = new Map(rt.memory().cores.map((c) => [c.nc, c.total]));
    family(
      "nrt_device_memory_used_bytes",
      "gauge",
      "Device memory booked by the runtime per NeuronCore (memory_usage_nc total)",
      Array.from({ length: rt.device.ncCount }, (_, nc) => [`{device="${dev}",core="${nc}"}`, booked.get(nc) ?? 0]),
    );
    try {
      const u = await rt.deviceMemory();
      family("nrt_device_memory_allocated_bytes", "gauge", "Device memory allocated through the portal, by location", [
        [`{device="${dev}",location="hbm"}`, u.hbm],
        [`{device="${dev}",location="host"}`, u.host],
      ]);
    } catch {
      // The portal is gone (shutting down): the ledger lines above still stand.
    }
    family("nrt_device_memory_total_bytes", "gauge", "HBM size of the device", [[
      `{device="${dev}"}`,
      rt.device.hbmBytes,
    ]]);
    for (const m of repo.models()) {
      for (const i of m.served?.instances ?? []) this.#served.set(i.handle, { model: m.name, version: m.version });
    }
    executionStatsFamilies(family, rt.executionStats(), {
      served: this.#served,
      loadedFor: (handle) => repo.modelOfHandle(handle),
      lastSeen: this.#lastSeen,
      carried: this.#carried,
    });
    if (activity !== undefined) exporterFamilies(family, rt, activity);
    return lines.join("\n") + "\n";
  }
}

// ---- Instance groups (docs/rest-api.md, "Instance groups"): one gauge per model, three series per instance. ----

type Family = (name: string, type: string, help: string, samples: Array<[string, number]>) => void;

/** The instance families of `/metrics`: instances per model, and each instance's readiness, load and executions. */
function instanceFamilies(family: Family, repo: ModelRepository): void {
  const models = repo.models();
  family(
    "nrt_model_instances",
    "gauge",
    "Instances of the model loaded (its instance group)",
    models.map((m) => [`{model="${m.name}",version="${m.version}"}`, m.served?.instances.length ?? 0]),
  );
  const per = (pick: (i: InstanceView) => number): Array<[string, number]> =>
    models.flatMap((m) =>
      (m.served?.instances ?? []).map((i): [string, number] => [
        `{model="${m.name}",version="${m.version}",instance="${m.name}_${i.index}",vnc="${i.vnc}"}`,
        pick(i),
      ])
    );
  family(
    "nrt_model_instance_ready",
    "gauge",
    "Whether the instance takes requests (1) or a fault poisoned it (0)",
    per((i) => (i.poisoned === undefined ? 1 : 0)),
  );
  family(
    "nrt_model_instance_busy",
    "gauge",
    "Whether the instance is running a request (1) or idle (0)",
    per((i) => (i.busy ? 1 : 0)),
  );
  family(
    "nrt_model_instance_execution_count",
    "counter",
    "Executions of the instance since it was loaded, warm-up excluded",
    per((i) => i.executions),
  );
}

// ---- The runtime's execution statistics (Runtime.executionStats; seed lifecycle-error-model §5.2). ----

/** Samples of `nrt_model_execution_status_total` and `nrt_model_execution_error_flags_total`, by label text. */
interface ExecSamples {
  readonly status: Map<string, number>;
  readonly flags: Map<string, number>;
}

/** What {@linkcode executionStatsFamilies} keeps between scrapes, and where it learns a handle's model. */
interface ExecStatsState {
  /** `H_MODEL` → the repository model and version it was loaded for, once known. */
  readonly served: Map<number, { readonly model: string; readonly version: string }>;
  /** The repository's own record of the handles it loaded (`ModelRepository.modelOfHandle`). */
  readonly loadedFor: (handle: number) => { readonly model: string; readonly version: string } | undefined;
  /** Each handle's samples at the last scrape. */
  readonly lastSeen: Map<number, ExecSamples>;
  /** The last samples of the handles the runtime no longer lists. */
  readonly carried: ExecSamples;
}

/**
 * `nrt_model_execution_status_total` and `nrt_model_execution_error_flags_total`: the runtime's per-model,
 * per-NeuronCore counts, summed over the handles a repository model was served as (a reload keeps its series
 * growing). Each handle is labelled with the repository model and version it was loaded for from its first
 * execution: the repository records a handle before its warm-up runs, so a scrape during a load shows the warm-up
 * under the model it warms up, not under a series of its own that the next scrape would drop (ours). Warm-up
 * executions are executions and are counted. Only a handle the repository did not load, or forgot (256 handles
 * unloaded after it), before any scrape saw it is labelled with the runtime's model name and an empty version. The
 * runtime lists a model until 256 more were unloaded after it (`Runtime.executionStats`); a handle it no longer lists
 * keeps the counts the last scrape saw in its series, so the counters never go down (ours), and only executions
 * after that scrape of a handle that left the list since (256 unloads between two scrapes) go uncounted.
 */
function executionStatsFamilies(
  family: Family,
  stats: readonly ModelExecutionStats[],
  { served, loadedFor, lastSeen, carried }: ExecStatsState,
): void {
  const add = (m: Map<string, number>, k: string, v: number): void => void m.set(k, (m.get(k) ?? 0) + v);
  const listed = new Set(stats.map((s) => s.handle));
  // A handle the runtime stopped listing was unloaded: its last counts stay in its series.
  for (const [handle, last] of lastSeen) {
    if (listed.has(handle)) continue;
    for (const [k, v] of last.status) add(carried.status, k, v);
    for (const [k, v] of last.flags) add(carried.flags, k, v);
    lastSeen.delete(handle);
    served.delete(handle);
  }
  const byStatus = new Map(carried.status);
  const byFlag = new Map(carried.flags);
  for (const s of stats) {
    let who = served.get(s.handle);
    if (who === undefined) {
      who = loadedFor(s.handle);
      if (who !== undefined) served.set(s.handle, who);
    }
    who ??= { model: s.name, version: "" };
    const mine: ExecSamples = { status: new Map(), flags: new Map() };
    for (const c of s.cores) {
      const base = { model: who.model, version: who.version, core: c.nc };
      for (const [code, n] of Object.entries(c.byStatus)) {
        const status = Number(code);
        const kind = executionErrorKind(status);
        add(
          mine.status,
          labelText({
            ...base,
            status: nrtStatusName(status),
            status_type: monitorOutcome(status),
            ...(kind === null ? {} : { error_type: kind }),
          }),
          n,
        );
      }
      for (const flag of INFER_ERROR_NAMES) {
        add(mine.flags, labelText({ ...base, flag: flag.toLowerCase() }), c.errors[flag]);
      }
    }
    lastSeen.set(s.handle, mine);
    for (const [k, v] of mine.status) add(byStatus, k, v);
    for (const [k, v] of mine.flags) add(byFlag, k, v);
  }
  family(
    "nrt_model_execution_status_total",
    "counter",
    "Executions by final NRT_STATUS per model and NeuronCore (kmetric_update_nds_exec_stats)",
    [...byStatus],
  );
  family(
    "nrt_model_execution_error_flags_total",
    "counter",
    "Executions that raised each kbl_infer_errors flag per model and NeuronCore (kmetric_update_nds_error_stats)",
    [...byFlag],
  );
}

// ---- neuron-monitor-prometheus.py's names (Neuron Monitor User Guide, "neuron-monitor-prometheus.py"). ----

/** The window utilization and latency percentiles cover, ms (ours: a scrape every 15-60 s sees it whole). */
export const EXPORTER_WINDOW_MS = 60_000;

const labelText = (labels: Record<string, string | number>): string =>
  `{${
    Object.entries(labels).map(([k, v]) =>
      `${k}="${String(v).replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")}"`
    ).join(",")
  }}`;

/**
 * The exporter's families for this server's runtime, with the exporter's label names: the instance labels
 * (`instance_name`, `instance_id`, `instance_type`, `availability_zone`, `region`, `subnet_id`; no EC2 metadata is
 * read, so only `instance_type`, the generation's instance family, is filled), `runtime_tag` (`NEURON_PROCESS_TAG`,
 * else the pid), and each family's own (`neuroncore`, `memory_location`, `status_type`, `error_type`, `percentile`,
 * `event_type`, `neuron_device_index`).
 */
function exporterFamilies(family: Family, rt: Runtime, activity: NeuronActivity, windowMs = EXPORTER_WINDOW_MS): void {
  const instance = {
    instance_name: "",
    instance_id: "",
    instance_type: rt.spec.instances[0] ?? "",
    availability_zone: "",
    region: "",
    subnet_id: "",
  };
  const tag = process.env.NEURON_PROCESS_TAG !== undefined && process.env.NEURON_PROCESS_TAG !== ""
    ? process.env.NEURON_PROCESS_TAG
    : String(process.pid);
  const rtLabels = { ...instance, runtime_tag: tag };
  const dev = rt.device.index;
  const vcs = Math.max(1, rt.virtualCoreSize);
  const perDevice = Math.max(1, Math.floor(rt.device.ncCount / vcs));
  const memory = new Map(rt.memory().cores.map((c) => [c.nc, c]));
  const cores = rt.cores().map((c) => {
    const index = dev * perDevice + Math.floor((c.ncs[0] ?? 0) / vcs);
    const device = Array.from(
      { length: memory.get(c.ncs[0])?.byUsage.length ?? 0 },
      (_, i) =>
        c.ncs.reduce((a, nc) => a + (memory.get(nc)?.byUsage[i] ?? 0) - (memory.get(nc)?.byUsageHost[i] ?? 0), 0),
    );
    const utilization = c.ncs.reduce((a, nc) => a + activity.utilization(nc, windowMs), 0) / Math.max(1, c.ncs.length);
    return { index, utilization, breakdown: deviceMemoryBreakdown(device) };
  });
  family(
    "neuroncore_utilization_ratio",
    "gauge",
    "NeuronCore utilization ratio",
    cores.map((c) => [labelText({ ...rtLabels, neuroncore: c.index }), c.utilization]),
  );
  const all = rt.memory().cores;
  const hbm = all.reduce((a, c) => a + c.hbm, 0), host = all.reduce((a, c) => a + c.host, 0);
  family("neuron_runtime_memory_used_bytes", "gauge", "Runtime memory used bytes", [
    [labelText({ ...rtLabels, memory_location: "host" }), host],
    [labelText({ ...rtLabels, memory_location: "neuron_device" }), hbm],
  ]);
  for (const cat of DEVICE_MEMORY_CATEGORIES) {
    family(
      `neuroncore_memory_usage_${cat}`,
      "gauge",
      `NeuronCore memory utilization for ${cat}`,
      cores.map((c) => [
        labelText({ ...rtLabels, memory_location: "None", neuroncore: c.index }),
        c.breakdown[cat],
      ]),
    );
  }
  const { execution_summary, error_summary } = summarizeExecutions(activity.statuses());
  family(
    "execution_status_total",
    "counter",
    "Execution status total",
    Object.entries(execution_summary).map(([k, v]) => [labelText({ ...rtLabels, status_type: k }), v]),
  );
  family(
    "execution_errors_total",
    "counter",
    "Execution errors total",
    Object.entries(error_summary).map(([k, v]) => [labelText({ ...rtLabels, error_type: k }), v]),
  );
  const p = latencyPercentiles(activity.latenciesWithin(windowMs).map((s) => s.totalSeconds));
  family(
    "execution_latency_seconds",
    "gauge",
    "Execution latency in seconds",
    p === null ? [] : Object.entries(p).map(([k, v]) => [labelText({ ...rtLabels, percentile: k }), v]),
  );
  // The simulator models no ECC: every counter stays 0.
  family(
    "hardware_ecc_events_total",
    "counter",
    "Hardware ecc events total",
    ["mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"].map((e) => [
      labelText({ ...instance, event_type: e, neuron_device_index: dev }),
      0,
    ]),
  );
}
