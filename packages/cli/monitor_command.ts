/**
 * `nrt monitor [-c CONFIG] [--url URL | --socket PATH]`: neuron-monitor for nrt (Neuron Monitor User Guide): one
 * JSON report per line on stdout, at the periods the configuration file sets (default: every group every 5 s), in
 * the report shape of `neuron/neuron_monitor.ts`, so `neuron-monitor-prometheus.py`, the CloudWatch agent and the
 * OpenTelemetry collector read it unchanged.
 *
 * Where the applications come from is ours (docs/neuron-tools.md):
 * - `--url URL`: one `nrt serve`, read at `URL/v2/neuron/status` (read-only, no credential);
 * - `--socket PATH`: the client processes of a device daemon (`nrt device-sim`); each one that is an announced
 *   `nrt serve` is read at its URL, any other is listed with its `error`;
 * - neither: every `nrt serve` and device daemon announced on this machine (`neuron_discovery.ts`), read the same
 *   way. With none running the reports still come, with an empty `neuron_runtime_data`, as neuron-monitor's do.
 *
 * `--count N` (ours) stops after N reports. `--arch` (ours) names the generation `neuron_hardware_info` describes
 * when no application reports a device (default `NRT_ARCH`, else Cayman).
 *
 * @module
 */
import { resolveRuntimeConfig } from "@nrt/core";
import type { NeuronStatus } from "@nrt/http-api";
import { readFile } from "node:fs/promises";
import process from "node:process";
import { type CommandSpec, formatHelp, parseCommandArgs, parseIntegerOption, usageError } from "./command_args.ts";
import { archPackNamed } from "./container.ts";
import { HostStats } from "./host_stats.ts";
import {
  buildMonitorReport,
  groupKey,
  type NeuronMonitorReport,
  type RuntimeReport,
  scheduleMonitorGroups,
  serializeMonitorReport,
  type SystemData,
} from "./neuron/neuron_monitor.ts";
import {
  defaultMonitorConfig,
  type MonitorConfig,
  NeuronMonitorConfigError,
  parseMonitorConfig,
  selectRuntime,
} from "./neuron/neuron_monitor_config.ts";
import { type DeviceTemplate, type RuntimeReading, StatusSnapshots } from "./neuron/status_snapshot.ts";
import { discover } from "./neuron_discovery.ts";
import { connectDeviceDaemon, parseAddress } from "./transports.ts";

/** How `nrt monitor` is called. */
export const MONITOR_COMMAND = {
  name: "monitor",
  usage: "nrt monitor [-c CONFIG] [--url URL | --socket PATH] [--count N] [--arch A]",
  summary: "Print neuron-monitor JSON reports, one per line, of the nrt serve processes and device daemons on this\n" +
    "machine (or the one --url / --socket names), at the periods of the neuron-monitor CONFIG file (docs/neuron-tools.md).",
  options: {
    config: {
      type: "string",
      short: "c",
      value: "CONFIG",
      description: "a neuron-monitor configuration file (default: every group every 5 s)",
    },
    url: { type: "string", value: "URL", description: "read one nrt serve at URL (http://127.0.0.1:8000)" },
    socket: {
      type: "string",
      value: "PATH",
      description: "read the client processes of the device daemon at PATH (unix:PATH or HOST:PORT too)",
    },
    count: { type: "string", value: "N", description: "stop after N reports (default: run until SIGINT/SIGTERM)" },
    arch: {
      type: "string",
      value: "A",
      description: "the generation neuron_hardware_info describes when no application reports one",
    },
  },
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

/** Which applications to read. */
export type MonitorSource = { readonly kind: "discover" } | { readonly kind: "url"; readonly url: string } | {
  readonly kind: "socket";
  readonly address: string;
};

/** Options of {@linkcode MonitorCollector}. */
export interface MonitorCollectorOptions {
  /** The configuration. */
  readonly config: MonitorConfig;
  /** Which applications. */
  readonly source: MonitorSource;
  /** The generation shown when no application reports a device (default: `NRT_ARCH`, else Cayman). */
  readonly arch?: string;
  /** The environment (announcement folder, `NRT_ARCH`). */
  readonly env?: Record<string, string | undefined>;
  /** Longest wait for one application's status, ms (default 5000). */
  readonly timeoutMs?: number;
}

function template(arch: string | undefined, env: Record<string, string | undefined>): DeviceTemplate {
  const spec = archPackNamed(resolveRuntimeConfig(arch === undefined ? {} : { arch }, env).arch ?? "cayman").spec;
  return {
    archName: spec.name,
    generation: spec.generation,
    physicalCores: spec.ncPerDevice,
    hbmBytes: spec.hbmBytes,
    ...(spec.generation === "NC-v2"
      ? {}
      : { logicalNeuronCoreConfig: spec.forcedVirtualCoreSize ?? spec.defaultVirtualCoreSize }),
    instanceFamily: spec.instances[0] ?? "",
  };
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Collects reports: reads the applications, keeps their baselines and the group schedule. */
export class MonitorCollector {
  readonly #options: MonitorCollectorOptions;
  readonly #env: Record<string, string | undefined>;
  readonly #snapshots: StatusSnapshots;
  readonly #host = new HostStats();
  readonly #pidOfUrl = new Map<string, number>();
  readonly #lastCollected = new Map<string, number>();
  readonly #groupAt = new Map<string, number>();
  readonly #startedAt = performance.now() / 1000;
  #previous: NeuronMonitorReport | undefined;

  /**
   * Prepares a collector; nothing is read until {@linkcode MonitorCollector.collect}.
   *
   * @param options Configuration, source, generation, environment.
   * @throws {NrtError} `NRT_INVALID` for an unknown `arch`.
   */
  constructor(options: MonitorCollectorOptions) {
    this.#options = options;
    // The whole environment: the announcement folder's variables are not the runtime's (envFromProcess keeps only those).
    this.#env = options.env ?? process.env;
    this.#snapshots = new StatusSnapshots(template(options.arch, this.#env), this.#host.vcpuCount);
  }

  async #status(url: string): Promise<NeuronStatus> {
    const pid = this.#pidOfUrl.get(url);
    const after = pid === undefined ? 0 : this.#snapshots.lastSeq(pid);
    const res = await fetch(`${url.replace(/\/$/, "")}/v2/neuron/status?after=${after}`, {
      signal: AbortSignal.timeout(this.#options.timeoutMs ?? 5000),
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`${url} answered ${res.status} to GET /v2/neuron/status`);
    }
    const s = await res.json() as NeuronStatus;
    if (s.schema !== "nrt-neuron-status/1") {
      throw new Error(`${url} does not serve nrt's status document (schema ${JSON.stringify(s.schema)})`);
    }
    this.#pidOfUrl.set(url, s.pid);
    return s;
  }

  async #read(url: string, pid: number | undefined, command: string): Promise<RuntimeReading> {
    try {
      const status = await this.#status(url);
      return { pid: status.pid, command: status.command, status };
    } catch (e) {
      return { pid: pid ?? 0, command, error: `cannot read the status of ${url}: ${message(e)}` };
    }
  }

  /** The daemon's client processes, as readings: the announced servers among them read at their URLs. */
  async #daemonClients(address: string, servers: Map<number, string>, done: Set<number>): Promise<RuntimeReading[]> {
    const portal = await connectDeviceDaemon(parseAddress(address), { name: "nrt monitor" });
    try {
      const byPid = new Map<number, string>();
      for (const g of (await portal.stats()).grants) byPid.set(g.pid, g.name);
      const out: RuntimeReading[] = [];
      for (const [pid, name] of [...byPid].sort(([a], [b]) => a - b)) {
        if (done.has(pid)) continue;
        done.add(pid);
        const url = servers.get(pid);
        out.push(
          url === undefined
            ? {
              pid,
              command: name,
              error:
                `process ${pid} holds NeuronCores of the device daemon at ${address} but announces no status endpoint (not an nrt serve)`,
            }
            : await this.#read(url, pid, name),
        );
      }
      return out;
    } finally {
      await portal.close();
    }
  }

  /** What every application answered now. */
  async readings(): Promise<RuntimeReading[]> {
    const source = this.#options.source;
    if (source.kind === "url") return [await this.#read(source.url, this.#pidOfUrl.get(source.url), source.url)];
    const announced = await discover(this.#env);
    const servers = new Map<number, string>();
    for (const a of announced) if (a.kind === "serve") servers.set(a.pid, a.url);
    const done = new Set<number>();
    if (source.kind === "socket") return await this.#daemonClients(source.address, servers, done);
    const out: RuntimeReading[] = [];
    for (const a of announced) {
      if (a.kind !== "serve") continue;
      done.add(a.pid);
      out.push(await this.#read(a.url, a.pid, a.command));
    }
    for (const a of announced) {
      if (a.kind !== "device-sim") continue;
      try {
        out.push(...await this.#daemonClients(a.address, servers, done));
      } catch {
        // A daemon that stopped after announcing: its clients (if any) are gone with it.
      }
    }
    return out.sort((a, b) => a.pid - b.pid);
  }

  /**
   * Collects one report ("Execution model"): the groups due now are collected, each over the time since it was last
   * collected (its own baseline, so a group with a longer period loses nothing), the others are repeated from the
   * previous report; every group is collected on the first call, for a process seen for the first time, and with
   * `all`.
   *
   * @param all Collect every group now.
   * @returns The report and the delay until the next group falls due, ms.
   */
  async collect(all = false): Promise<{ report: NeuronMonitorReport; nextInMs: number }> {
    const config = this.#options.config;
    const nowS = performance.now() / 1000;
    const { due, nextAt } = scheduleMonitorGroups(config, this.#lastCollected, nowS);
    const readings = await this.readings();
    const previous = this.#previous;
    const known = new Set(previous?.neuron_runtime_data.filter((r) => r.error === "").map((r) => r.pid) ?? []);
    const fresh = readings.some((r) => r.status !== undefined && !known.has(r.pid));
    const isDue = (key: string): boolean => all || previous === undefined || due.has(key);
    const at = performance.now() / 1000;
    const periodOf = (type: string): number => Math.max(1e-3, at - (this.#groupAt.get(type) ?? this.#startedAt));
    // One piece per group type collected now, built from that type's own snapshot.
    const pieces = new Map<string, NeuronMonitorReport>();
    const runtimeTypes = [...new Set(config.runtimes.flatMap((r) => r.groups.map((g) => g.type)))];
    for (const type of runtimeTypes) {
      const keys = config.runtimes.map((_, e) => groupKey("runtime", type, e));
      if (!fresh && !keys.some(isDue)) continue;
      const snap = this.#snapshots.snapshot(readings, periodOf(type), this.#host.sample(false), type);
      const only: MonitorConfig = {
        runtimes: config.runtimes.map((r) => ({ ...r, groups: r.groups.filter((g) => g.type === type) })),
        system: [],
      };
      pieces.set(type, buildMonitorReport(snap, only));
      this.#groupAt.set(type, at);
    }
    for (const g of config.system) {
      if (!isDue(groupKey("system", g.type))) continue;
      const snap = this.#snapshots.snapshot(
        readings,
        periodOf(g.type),
        this.#host.sample(g.type === "vcpu_usage"),
        `system:${g.type}`,
      );
      pieces.set(g.type, buildMonitorReport(snap, { runtimes: [], system: [g] }));
      this.#groupAt.set(g.type, at);
    }
    // The report: every application and group the configuration selects, fresh or repeated.
    const base = buildMonitorReport(
      this.#snapshots.snapshot(readings, periodOf("report"), this.#host.sample(false), "report"),
      { runtimes: config.runtimes.map((r) => ({ ...r, groups: [] })), system: [] },
    );
    const neuron_runtime_data = base.neuron_runtime_data.map((entry) => {
      if (entry.error !== "") return entry;
      const selection = selectRuntime(config, entry.neuron_runtime_tag)!;
      const before = previous?.neuron_runtime_data.find((r) => r.pid === entry.pid && r.error === "")?.report;
      const report: Record<string, unknown> = {};
      for (const type of selection.groups.map((g) => g.type).sort()) {
        const piece = pieces.get(type)?.neuron_runtime_data.find((r) => r.pid === entry.pid)?.report;
        report[type] = piece?.[type] ?? before?.[type];
      }
      return { ...entry, report: report as RuntimeReport };
    });
    let system_data: SystemData | null = null;
    if (config.system.length > 0) {
      const data: Record<string, unknown> = {};
      for (const type of config.system.map((g) => g.type).sort()) {
        data[type] = pieces.get(type)?.system_data?.[type] ?? previous?.system_data?.[type];
      }
      system_data = data as SystemData;
    }
    const report: NeuronMonitorReport = {
      neuron_runtime_data,
      system_data,
      instance_info: base.instance_info,
      neuron_hardware_info: base.neuron_hardware_info,
    };
    for (const k of due) this.#lastCollected.set(k, nowS);
    if (all || previous === undefined) { for (const k of allKeys(config)) this.#lastCollected.set(k, nowS); }
    this.#previous = report;
    return { report, nextInMs: Math.max(0, (nextAt - performance.now() / 1000) * 1000) };
  }
}

function allKeys(config: MonitorConfig): string[] {
  return [
    ...config.runtimes.flatMap((r, e) => r.groups.map((g) => groupKey("runtime", g.type, e))),
    ...config.system.map((g) => groupKey("system", g.type)),
  ];
}

function sourceOf(values: { url?: string; socket?: string }): MonitorSource {
  if (values.url !== undefined && values.socket !== undefined) {
    throw usageError(MONITOR_COMMAND, "--url and --socket exclude each other");
  }
  if (values.url !== undefined) {
    let u: URL;
    try {
      u = new URL(values.url);
    } catch {
      throw usageError(MONITOR_COMMAND, `--url ${values.url} is not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw usageError(MONITOR_COMMAND, `--url ${values.url} is not an http or https URL`);
    }
    return { kind: "url", url: u.origin };
  }
  if (values.socket !== undefined) {
    const address = values.socket.startsWith("/") || values.socket.startsWith(".")
      ? `unix:${values.socket}`
      : values.socket;
    try {
      parseAddress(address);
    } catch (e) {
      throw usageError(MONITOR_COMMAND, `--socket ${values.socket}: ${message(e)}`);
    }
    return { kind: "socket", address };
  }
  return { kind: "discover" };
}

/** The longest delay one timer takes (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 0x7fff_ffff;

/** The timers {@linkcode runMonitor} waits with (tests pass their own). */
export interface MonitorTimers {
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

const SYSTEM_TIMERS: MonitorTimers = {
  setTimeout: (run, ms) => setTimeout(run, ms),
  clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

/**
 * Waits `ms` (a period of days or weeks included: in timers of at most {@linkcode MAX_TIMER_MS}), or until `signal`
 * aborts.
 */
async function sleep(ms: number, signal: AbortSignal, timers: MonitorTimers): Promise<void> {
  let left = Math.max(0, ms);
  do {
    if (signal.aborted) return;
    const step = Math.min(left, MAX_TIMER_MS);
    await new Promise<void>((resolve) => {
      // deno-lint-ignore prefer-const -- assigned once the timer is set; a timer that fires at once finds it unset
      let timer: unknown;
      const done = () => {
        if (timer !== undefined) timers.clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      signal.addEventListener("abort", done, { once: true });
      timer = timers.setTimeout(done, step);
    });
    left -= step;
  } while (left > 0);
}

/**
 * `nrt monitor`: prints reports until SIGINT/SIGTERM or `--count`.
 *
 * @param args The arguments after `monitor`.
 * @param write Where each report line goes (default: stdout).
 * @param signal Stops the loop.
 * @param timers The timers it waits with between reports (default: the platform's).
 * @returns 0.
 * @throws {UsageError} For a bad option or a configuration file that cannot be used (naming its field).
 */
export async function runMonitor(
  args: readonly string[],
  write: (line: string) => void = (l) => console.log(l.replace(/\n$/, "")),
  signal?: AbortSignal,
  timers: MonitorTimers = SYSTEM_TIMERS,
): Promise<number> {
  const { help, values } = parseCommandArgs(MONITOR_COMMAND, args);
  if (help) {
    write(formatHelp(MONITOR_COMMAND));
    return 0;
  }
  const source = sourceOf(values);
  const count = values.count === undefined
    ? Infinity
    : parseIntegerOption(MONITOR_COMMAND, "--count", values.count, 1, Number.MAX_SAFE_INTEGER);
  let config = defaultMonitorConfig();
  if (values.config !== undefined) {
    let text: string;
    try {
      text = await readFile(values.config, "utf8");
    } catch (e) {
      throw usageError(MONITOR_COMMAND, `cannot read the configuration file ${values.config}: ${message(e)}`);
    }
    try {
      config = parseMonitorConfig(text);
    } catch (e) {
      if (e instanceof NeuronMonitorConfigError) throw usageError(MONITOR_COMMAND, `${values.config}: ${e.message}`);
      throw e;
    }
  }
  const collector = new MonitorCollector({ config, source, arch: values.arch });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  signal?.addEventListener("abort", onSignal, { once: true });
  try {
    for (let n = 0; n < count && !stop.signal.aborted; n++) {
      const { report, nextInMs } = await collector.collect();
      write(serializeMonitorReport(report));
      if (n + 1 >= count) break;
      await sleep(nextInMs, stop.signal, timers);
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  return 0;
}
