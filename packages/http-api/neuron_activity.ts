/**
 * What a server's NeuronCores did, kept for the Neuron tools (ours): every execution's outcome and latency, and each
 * NeuronCore's busy time, heard through the runtime's `onExecution` hook, plus the read-only status document that
 * `GET /v2/neuron/status` serves and `nrt monitor` turns into neuron-monitor reports (docs/neuron-tools.md).
 *
 * - Busy time is the device's own (the simulator's per-NeuronCore busy counters, passed in as `busyMs`); without
 *   them (a device daemon) it is the host's view, the time each execution held its cores.
 * - An execution's total latency is the time it held its NeuronCores (from `start` to `end` of `onExecution`); its
 *   device latency is the busy time its first NeuronCore gained meanwhile (a NeuronCore runs one execution at a
 *   time, so that gain is the execution's own).
 * - Counts are cumulative since the activity was made and keyed by `NRT_STATUS`; latencies are kept in a ring of
 *   the last 4096 executions, each with a sequence number, so a reader polling every period takes only the new ones.
 *
 * The document carries raw numbers (dmem ledger rows by `DmaMemUsageType`, statuses, cumulative milliseconds);
 * how they fold into neuron-monitor's categories is the reader's (`@nrt/cli` `neuron/`).
 *
 * @module
 */
import type { ExecutionEvent, Runtime } from "@nrt/core";
import process from "node:process";
import { InFlight } from "./in_flight.ts";

/** One finished execution's latencies. */
export interface LatencySample {
  /** Sequence number of the sample (1, 2, …), in finishing order. */
  readonly seq: number;
  /** When it finished, ms of {@linkcode NeuronActivityOptions.now}'s clock. */
  readonly at: number;
  /** Time it held its NeuronCores, seconds. */
  readonly totalSeconds: number;
  /** Device busy time it caused, seconds. */
  readonly deviceSeconds: number;
}

/** Options of {@linkcode NeuronActivity}. */
export interface NeuronActivityOptions {
  /**
   * Milliseconds physical NeuronCore `nc` of the runtime's device has been busy, cumulative (the simulator's
   * `busyMs`). Absent: the time executions held the core, as the host saw it.
   */
  readonly busyMs?: (nc: number) => number;
  /** The clock, ms (default `performance.timeOrigin + performance.now()`). */
  readonly now?: () => number;
  /** Latency samples kept (default 4096). */
  readonly latencyCapacity?: number;
  /**
   * The process's command line as the status document shows it (default `process.argv` joined, which starts with the
   * runtime's absolute executable path; `nrt serve` passes the line as typed, as `nrt ls` shows it).
   */
  readonly command?: string;
}

interface Running {
  readonly at: number;
  readonly ncs: readonly number[];
  readonly busy0: number;
}

/** How long busy-time history is kept, ms (the longest window a reader may ask for). */
const HISTORY_MS = 10 * 60_000;

/**
 * The busy curve's resolution, ms: of any three consecutive points kept, the first and the last are at least this far
 * apart (a point closer than that to the one before the last replaces the last). A curve then keeps at most two
 * points per resolution step, 120,000 over {@linkcode HISTORY_MS}, whatever the execution rate, and a window's busy
 * time is exact to within this many ms of busy time at its start.
 */
const RESOLUTION_MS = 10;

/**
 * One NeuronCore's cumulative busy time against the clock, as points (ms, busy ms), oldest first, in two number
 * arrays from `head` on; the points before `head` are dropped and compacted away in bulk.
 */
class BusyCurve {
  readonly at: number[] = [];
  readonly busy: number[] = [];
  head = 0;

  /** Adds a point and drops the ones older than `keepFrom`, but the last before it. */
  add(at: number, busy: number, keepFrom: number): void {
    const n = this.at.length;
    if (n - this.head >= 2 && at - this.at[n - 2] < RESOLUTION_MS) {
      this.at[n - 1] = at;
      this.busy[n - 1] = busy;
    } else {
      this.at.push(at);
      this.busy.push(busy);
    }
    while (this.head + 1 < this.at.length && this.at[this.head + 1] < keepFrom) this.head++;
    if (this.head >= 1024 && this.head * 2 >= this.at.length) {
      this.at.splice(0, this.head);
      this.busy.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Points kept. */
  get length(): number {
    return this.at.length - this.head;
  }

  /**
   * The busy time at `t`: linear between the points around it, the first point's before them, and between the last
   * point and (`now`, `busyNow`) after them.
   */
  busyAt(t: number, now: number, busyNow: number): number {
    const at = this.at, busy = this.busy;
    // The last point at or before t (binary search), or head - 1 if none is.
    let lo = this.head, hi = at.length - 1, k = this.head - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (at[mid] <= t) {
        k = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (k < this.head) return busy[this.head];
    const aAt = at[k], aBusy = busy[k];
    const bAt = k + 1 < at.length ? at[k + 1] : now, bBusy = k + 1 < at.length ? busy[k + 1] : busyNow;
    return bAt <= aAt || t >= bAt ? bBusy : aBusy + ((bBusy - aBusy) * (t - aAt)) / (bAt - aAt);
  }
}

/** Executions and busy time of one runtime's NeuronCores. */
export class NeuronActivity {
  readonly #busyMs: ((nc: number) => number) | undefined;
  readonly #now: () => number;
  readonly #capacity: number;
  readonly #running = new InFlight<Running>();
  readonly #hostBusy = new Map<number, number>();
  readonly #history = new Map<number, BusyCurve>();
  readonly #statuses = new Map<number, number>();
  /**
   * The latency ring: sample `seq` is at slot `(seq - 1) % capacity`, three numbers a slot (when it finished, its total
   * and device seconds); the last `min(seq, capacity)` are kept. Numbers, not an object per sample: a ring of objects
   * kept for thousands of executions had every collection carry each new sample into the old generation. It grows to
   * the capacity as it fills.
   */
  #ring = new Float64Array(0);
  #seq = 0;
  /** When the activity was made, ms of its clock. */
  readonly since: number;
  /** The process's command line, as the status document shows it. */
  readonly command: string;
  /** Whether busy time is the device's own (`busyMs` given) or the host's view. */
  readonly deviceBusy: boolean;

  /**
   * Starts an empty record: no execution counted, every NeuronCore idle.
   *
   * @param options The device's busy counters, the clock and the latency ring's size.
   * @throws {RangeError} For a capacity that is not a positive integer.
   */
  constructor(options: NeuronActivityOptions = {}) {
    const capacity = options.latencyCapacity ?? 4096;
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`Cannot keep ${capacity} latency samples: expected a positive integer`);
    }
    this.#capacity = capacity;
    this.#busyMs = options.busyMs;
    this.deviceBusy = options.busyMs !== undefined;
    this.#now = options.now ?? (() => performance.timeOrigin + performance.now());
    this.since = this.#now();
    this.command = options.command ?? process.argv.join(" ");
  }

  /** The `Runtime` option `onExecution` (chain it with others'): counts, latencies and host busy time. */
  readonly onExecution = (e: ExecutionEvent): void => {
    const at = this.#now();
    if (e.phase === "start") {
      this.#running.set(e.seq, { at, ncs: e.ncs, busy0: this.#busyMs === undefined ? 0 : this.#busyMs(e.ncs[0]) });
      for (const nc of e.ncs) this.#mark(nc, at);
      return;
    }
    const r = this.#running.take(e.seq);
    if (r !== undefined) {
      for (const nc of r.ncs) this.#hostBusy.set(nc, (this.#hostBusy.get(nc) ?? 0) + (at - r.at));
      for (const nc of r.ncs) this.#mark(nc, at);
    }
    if (e.status === undefined) return; // the request could not be made: not an execution
    this.#statuses.set(e.status, (this.#statuses.get(e.status) ?? 0) + 1);
    if (r === undefined) return;
    const total = (at - r.at) / 1000;
    const device = this.#busyMs === undefined ? total : Math.max(0, this.#busyMs(r.ncs[0]) - r.busy0) / 1000;
    const seq = ++this.#seq;
    const slot = (seq - 1) % this.#capacity;
    if (3 * slot >= this.#ring.length) {
      const grown = new Float64Array(3 * Math.min(this.#capacity, Math.max(256, 2 * slot)));
      grown.set(this.#ring);
      this.#ring = grown;
    }
    this.#ring[3 * slot] = at;
    this.#ring[3 * slot + 1] = total;
    this.#ring[3 * slot + 2] = device;
  };

  /**
   * Records a point of `nc`'s busy curve, and drops points older than the history keeps (one is kept before). The
   * first point also stands for the time since the activity was made: a core gains busy time only while it runs an
   * execution, and every execution is heard.
   */
  #mark(nc: number, at: number): void {
    const busy = this.busyMs(nc);
    let h = this.#history.get(nc);
    if (h === undefined) {
      this.#history.set(nc, h = new BusyCurve());
      h.add(this.since, busy, -Infinity);
    }
    h.add(at, busy, at - HISTORY_MS);
  }

  /** Points kept of `nc`'s busy curve (at most two per 10 ms of history: memory stays bounded at any rate). */
  historyPoints(nc: number): number {
    return this.#history.get(nc)?.length ?? 0;
  }

  /**
   * Milliseconds physical NeuronCore `nc` has been busy: the device's counter, or the host's view (finished
   * executions plus the one running, up to now).
   */
  busyMs(nc: number): number {
    if (this.#busyMs !== undefined) return this.#busyMs(nc);
    let ms = this.#hostBusy.get(nc) ?? 0;
    const now = this.#now();
    for (const r of this.#running.values()) if (r.ncs.includes(nc)) ms += now - r.at;
    return ms;
  }

  /**
   * The share of the last `windowMs` (or of the time since the activity was made, if shorter) that `nc` was busy,
   * 0 to 1. Between two executions' starts and ends the busy curve is taken as linear.
   */
  utilization(nc: number, windowMs: number): number {
    const now = this.#now();
    const from = Math.max(now - windowMs, this.since);
    if (now <= from) return 0;
    const h = this.#history.get(nc);
    if (h === undefined) return 0; // no execution has run on it
    const busyNow = this.busyMs(nc);
    const busyFrom = h.busyAt(from, now, busyNow);
    return Math.min(1, Math.max(0, (busyNow - busyFrom) / (now - from)));
  }

  /** Finished executions by `NRT_STATUS`, cumulative. */
  statuses(): Record<number, number> {
    return Object.fromEntries(this.#statuses);
  }

  /** The latency samples kept with a sequence number above `after`, oldest first. */
  latencies(after = 0): LatencySample[] {
    const out: LatencySample[] = [];
    for (let seq = Math.max(Math.floor(after) + 1, this.#seq - this.#capacity + 1, 1); seq <= this.#seq; seq++) {
      const k = 3 * ((seq - 1) % this.#capacity);
      out.push({ seq, at: this.#ring[k], totalSeconds: this.#ring[k + 1], deviceSeconds: this.#ring[k + 2] });
    }
    return out;
  }

  /** The latency samples of the executions that finished in the last `windowMs`. */
  latenciesWithin(windowMs: number): LatencySample[] {
    const from = this.#now() - windowMs;
    return this.latencies().filter((s) => s.at >= from);
  }

  /** The clock's current reading, ms. */
  now(): number {
    return this.#now();
  }
}

/** The status document of `GET /v2/neuron/status` (ours; `schema` names its version). */
export interface NeuronStatus {
  /** `nrt-neuron-status/1`. */
  readonly schema: "nrt-neuron-status/1";
  /** The server's process id. */
  readonly pid: number;
  /** Its command line. */
  readonly command: string;
  /** `NEURON_PROCESS_TAG`, when set. */
  readonly tag?: string;
  /** The runtime's version. */
  readonly runtime_version: string;
  /** Milliseconds since the epoch now, and the activity clock's reading now (busy times are on that clock). */
  readonly time: { readonly epoch_ms: number; readonly clock_ms: number; readonly since_ms: number };
  /** The device. */
  readonly device: {
    readonly index: number;
    readonly arch: string;
    readonly generation: string;
    readonly physical_cores: number;
    readonly hbm_bytes: number;
    readonly virtual_core_size: number;
    /** Whether busy times are the device's own counters (else the host's view). */
    readonly device_busy: boolean;
  };
  /** The runtime's logical NeuronCores. */
  readonly cores: ReadonlyArray<{
    readonly vnc: number;
    readonly ncs: readonly number[];
    /** Cumulative busy ms of each physical core. */
    readonly busy_ms: readonly number[];
    /** Bytes booked on the physical cores, device (HBM) part, by `DmaMemUsageType`. */
    readonly device_memory: readonly number[];
    /** Bytes booked on the physical cores, host part, by `DmaMemUsageType`. */
    readonly host_memory: readonly number[];
  }>;
  /** Resident models. */
  readonly models: ReadonlyArray<
    { readonly handle: number; readonly name: string; readonly vnc: number; readonly ncs: readonly number[] }
  >;
  /** Finished executions by `NRT_STATUS`, cumulative. */
  readonly executions: Readonly<Record<string, number>>;
  /** The latency samples after the `after` query parameter. */
  readonly latency: readonly LatencySample[];
  /** The process's CPU time, cumulative µs (`process.cpuUsage()`). */
  readonly cpu: { readonly user_us: number; readonly system_us: number };
  /** The process's resident set, bytes. */
  readonly rss_bytes: number;
}

/**
 * The status document of a runtime and its activity.
 *
 * @param rt The runtime.
 * @param activity Its activity.
 * @param after Latency samples with a larger sequence number only.
 * @returns The document.
 */
export function neuronStatus(rt: Runtime, activity: NeuronActivity, after = 0): NeuronStatus {
  const memory = new Map(rt.memory().cores.map((c) => [c.nc, c]));
  const sum = (
    ncs: readonly number[],
    pick: (c: { byUsage: readonly number[]; byUsageHost: readonly number[] }, i: number) => number,
    n: number,
  ): number[] =>
    Array.from({ length: n }, (_, i) => ncs.reduce((a, nc) => a + (memory.has(nc) ? pick(memory.get(nc)!, i) : 0), 0));
  const slots = rt.memory().cores[0]?.byUsage.length ?? 0;
  const cores = rt.cores();
  const cpu = process.cpuUsage();
  const tag = process.env.NEURON_PROCESS_TAG;
  return {
    schema: "nrt-neuron-status/1",
    pid: process.pid,
    command: activity.command,
    ...(tag === undefined || tag === "" ? {} : { tag }),
    runtime_version: "0.1.0", // what nrt_get_version reports
    time: { epoch_ms: Date.now(), clock_ms: activity.now(), since_ms: activity.since },
    device: {
      index: rt.device.index,
      arch: rt.spec.name,
      generation: rt.spec.generation,
      physical_cores: rt.device.ncCount,
      hbm_bytes: rt.device.hbmBytes,
      virtual_core_size: rt.virtualCoreSize,
      device_busy: activity.deviceBusy,
    },
    cores: cores.map((c) => ({
      vnc: c.vnc,
      ncs: c.ncs,
      busy_ms: c.ncs.map((nc) => activity.busyMs(nc)),
      device_memory: sum(c.ncs, (m, i) => m.byUsage[i] - m.byUsageHost[i], slots),
      host_memory: sum(c.ncs, (m, i) => m.byUsageHost[i], slots),
    })),
    models: cores.flatMap((c) => c.models.map((m) => ({ handle: m.handle, name: m.name, vnc: c.vnc, ncs: m.ncs }))),
    executions: activity.statuses(),
    latency: activity.latencies(after),
    cpu: { user_us: cpu.user, system_us: cpu.system },
    rss_bytes: process.memoryUsage().rss,
  };
}
