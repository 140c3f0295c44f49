/**
 * The host's view of what a simulated device reported through its trace buffers (`device_log.ts`): the notification
 * records of each NeuronCore, the Q7 lifecycle events, the sequencer's faults, the injected faults as they fired,
 * and the activity of each Q7 core. Read when asked; bounded (each list keeps its last entries). The timeline ring
 * (what traced runs recorded) is handed out whole to whoever takes it ({@linkcode DeviceTrace.takeTimeline}). Ours.
 *
 * @module
 */
import {
  decodeNotification,
  HwErrorCause,
  NotificationKind,
  type NotificationRecord,
  TpbErrorId,
  TpbErrorMask,
} from "@nrt/core/isa";
import { type DeviceLogReader, LogKind, payloadText, readTimelineEvent, type TimelineEvent } from "./device_log.ts";
import type { FiredFault } from "./fault_injector.ts";
import type { Q7BootEvent } from "./q7_complex.ts";

/** One timeline event and the NeuronCore that recorded it. */
export type NcTimelineEvent = TimelineEvent & { readonly nc: number };

/** How much of each list is kept. */
const KEEP = 4096;

/** One Q7 core as the trace saw it. */
export interface Q7CoreActivity {
  /** The core (PRID). */
  readonly core: number;
  /** `off` (no Worker), `running` an op, `idle` after one, or `faulted`. */
  readonly state: "off" | "running" | "idle" | "faulted";
  /** The function of the last op, if any. */
  readonly fn?: string;
  /** Ops run. */
  readonly runs: number;
  /** Why it faulted. */
  readonly detail?: string;
}

interface CoreTrack {
  state: Q7CoreActivity["state"];
  fn?: string;
  runs: number;
  detail?: string;
}

interface NcTrace {
  readonly records: NotificationRecord[];
  recordCount: number;
  readonly faults: Array<{ slot: number; mask: number; message: string }>;
  readonly cores: CoreTrack[];
  /** The last fatal error the NeuronCore reported, until a later completion. */
  fault?: string;
  /** The cores of the op in flight. */
  running: number[];
}

const EVENT_KINDS: readonly Q7BootEvent["kind"][] = [
  "released",
  "boot-failed",
  "cluster-started",
  "cluster-terminated",
];
const VIA: ReadonlyArray<Q7BootEvent["via"]> = [undefined, "host-csr", "evt-sem"];
const CORE_STATUS = ["ok", "trap", "oob", "abort", "missing-function"] as const;
const NO_Q7 = 0xff;

const hex = (n: number): string => `0x${n.toString(16)}`;

function maskText(mask: number): string {
  const names = Object.entries(TpbErrorMask).filter(([, bit]) => (mask & bit) !== 0).map(([name]) => name);
  return names.length > 0 ? names.join("|") : hex(mask);
}

function hwText(cause: number): string {
  return Object.entries(HwErrorCause).find(([, v]) => v === cause)?.[0] ?? `cause ${cause}`;
}

/** The trace of one device, from the trace buffers of its agents. */
export class DeviceTrace {
  readonly #device: number;
  readonly #readers: readonly DeviceLogReader[];
  readonly #ncs: NcTrace[];
  readonly #q7Events: Q7BootEvent[];
  readonly #firings: FiredFault[] = [];
  readonly #armedKinds: Map<number, FiredFault["kind"]>;
  readonly #timelines: readonly DeviceLogReader[];

  /**
   * @param device Device index.
   * @param ncCount NeuronCores of the device.
   * @param readers The trace buffers of its agents.
   * @param q7Events Where Q7 lifecycle events go (shared by the devices of a portal).
   * @param armedKinds Fault id → kind, to name the fired ones.
   * @param timelines The timeline rings of its agents.
   */
  constructor(
    device: number,
    ncCount: number,
    readers: readonly DeviceLogReader[],
    q7Events: Q7BootEvent[],
    armedKinds: Map<number, FiredFault["kind"]>,
    timelines: readonly DeviceLogReader[] = [],
  ) {
    this.#device = device;
    this.#timelines = timelines;
    this.#readers = readers;
    this.#q7Events = q7Events;
    this.#armedKinds = armedKinds;
    this.#ncs = Array.from({ length: ncCount }, () => ({
      records: [],
      recordCount: 0,
      faults: [],
      cores: Array.from({ length: 8 }, () => ({ state: "off" as const, runs: 0 })),
      running: [],
    }));
  }

  /** Reads what the agents appended since the last look. */
  update(): void {
    for (const reader of this.#readers) {
      for (const e of reader.drain()) {
        const t = this.#ncs[e.nc];
        if (t === undefined) continue;
        const v = new DataView(e.payload.buffer, e.payload.byteOffset, e.payload.byteLength);
        switch (e.kind) {
          case LogKind.RECORD: {
            const r = decodeNotification(e.payload, 0);
            push(t.records, r);
            t.recordCount++;
            this.#noteRecord(t, r);
            break;
          }
          case LogKind.Q7_EVENT: {
            const kind = EVENT_KINDS[v.getUint8(0)];
            const via = VIA[v.getUint8(1)];
            const detail = payloadText(e.payload, 2);
            push(this.#q7Events, {
              nc: e.nc,
              kind,
              ...(via === undefined ? {} : { via }),
              ...(detail === "" ? {} : { detail }),
            });
            if (kind === "cluster-terminated") {
              for (const c of t.cores) {
                if (c.state === "running") {
                  c.state = "faulted";
                  c.detail = "stopped while running (the run was dropped)";
                } else if (c.state === "idle") c.state = "off";
              }
            }
            break;
          }
          case LogKind.SEQ_FAULT:
            push(t.faults, {
              slot: v.getUint32(0, true),
              mask: v.getUint32(4, true),
              message: payloadText(e.payload, 8),
            });
            break;
          case LogKind.FIRED: {
            const id = v.getUint32(0, true);
            push(this.#firings, {
              id,
              kind: this.#armedKinds.get(id) ?? "tpb-error",
              device: this.#device,
              nc: e.nc,
              run: v.getUint32(4, true),
            });
            break;
          }
          case LogKind.Q7_DISPATCH: {
            const total = v.getUint8(0);
            const fn = payloadText(e.payload, 1);
            t.running = total === 8 ? [0, 1, 2, 3, 4, 5, 6, 7] : [0];
            for (const c of t.running) {
              const core = t.cores[c];
              core.state = "running";
              core.fn = fn;
              core.runs++;
              core.detail = undefined;
            }
            break;
          }
          case LogKind.Q7_JOIN: {
            const message = payloadText(e.payload, 8);
            for (let c = 0; c < 8; c++) {
              const code = v.getUint8(c);
              if (code === 255) continue;
              const core = t.cores[c];
              const status = CORE_STATUS[code] ?? "abort";
              core.state = status === "ok" ? "idle" : "faulted";
              core.detail = status === "ok" ? undefined : message === "" ? status : message;
            }
            t.running = [];
            break;
          }
        }
      }
    }
  }

  /** A record's effect on the NeuronCore's fault: fatal ones set it (and a named core's), completions clear it. */
  #noteRecord(t: NcTrace, r: NotificationRecord): void {
    if (r.kind === NotificationKind.EXEC_DONE) {
      t.fault = undefined;
    } else if (r.kind === NotificationKind.HW_ERROR) {
      t.fault = `HW_ERROR ${hwText(r.value)}`;
    } else if (r.kind === NotificationKind.TPB_ERROR && r.code === TpbErrorId.FATAL) {
      const what = `TPB_ERROR ${hex(r.code)} ${maskText(r.mask)}`;
      t.fault = r.q7 === NO_Q7 ? what : `${what} on Q7 core ${r.q7}`;
      const core = t.cores[r.q7];
      if (core !== undefined) {
        core.state = "faulted";
        core.detail ??= maskText(r.mask);
      }
    }
  }

  /** The NeuronCore's records (the last 4096), oldest first. */
  records(nc: number): readonly NotificationRecord[] {
    this.update();
    return this.#ncs[nc]?.records ?? [];
  }

  /** The sequencer's faults on the NeuronCore (the last 4096). */
  sequencerFaults(nc: number): ReadonlyArray<{ slot: number; mask: number; message: string }> {
    this.update();
    return this.#ncs[nc]?.faults ?? [];
  }

  /** Firings reported since the last call. */
  takeFirings(): FiredFault[] {
    this.update();
    return this.#firings.splice(0);
  }

  /** The NeuronCore's Q7 cores; `started` says whether their Workers exist now. */
  q7Activity(nc: number, started: boolean): Q7CoreActivity[] {
    this.update();
    const t = this.#ncs[nc];
    if (t === undefined) return [];
    return t.cores.map((c, core) => ({
      core,
      state: !started && c.state === "idle" ? "off" : c.state,
      runs: c.runs,
      ...(c.fn === undefined ? {} : { fn: c.fn }),
      ...(c.detail === undefined ? {} : { detail: c.detail }),
    }));
  }

  /**
   * The timeline events recorded since the last call (each agent's oldest first) and the entries lost since the last
   * call because the ring wrapped before they were read.
   */
  takeTimeline(): { events: NcTimelineEvent[]; lost: number } {
    const events: NcTimelineEvent[] = [];
    let lost = 0;
    for (const reader of this.#timelines) {
      const before = reader.lost;
      for (const entry of reader.drain()) {
        const e = readTimelineEvent(entry);
        if (e !== undefined) events.push({ ...e, nc: entry.nc });
      }
      lost += reader.lost - before;
    }
    return { events, lost };
  }

  /** The last fatal error the NeuronCore reported, until a later completion. */
  fault(nc: number): string | undefined {
    this.update();
    return this.#ncs[nc]?.fault;
  }
}

function push<T>(list: T[], x: T): void {
  list.push(x);
  if (list.length > KEEP) list.splice(0, list.length - KEEP);
}
