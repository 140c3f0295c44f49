/**
 * One execution as a Chrome Trace Event document (Google, "Trace Event Format": the JSON Object Format with
 * `traceEvents`; complete events `ph: "X"` with `ts`/`dur` in µs, instant events `ph: "i"`, metadata events
 * `ph: "M"` naming processes and threads), which Perfetto and `chrome://tracing` open. Built from the runtime's host
 * spans (`@nrt/core` `host_span.ts`) and the simulated device's timeline (`@nrt/device-sim` `device_log.ts`), both
 * on the clock every thread shares.
 *
 * Tracks (ours; `neuron-profile` draws its own views, which are not a published format):
 * - process "host: nrt runtime": thread "nrt_load" (the load and its stages), thread "nrt_execute" (the execution
 *   and its steps: `kmgr_exec_pre`, `kbl_compute_setup`, `doorbell`, `completion_wait`, NQ reads, stdio drain,
 *   copy-out), one thread per NeuronCore when an execution's steps act on several;
 * - one process per NeuronCore, "NeuronCore N", with threads "sequencer" (each run, the instructions nested in it,
 *   named by opcode), "DMA queue Q (M2S|S2M)" with each transfer's bytes and descriptors, "Q7 core C" with
 *   the kernel each ran, "notifications" (one instant event per record) and "stdio drain".
 *
 * `ts` is µs since the earliest event of the document (`otherData.origin_ms` keeps that moment on the shared clock,
 * ms); `dur` is real µs.
 *
 * @module
 */
import { NotificationKind, opcodeName } from "@nrt/core/isa";
import type { HostSpan } from "@nrt/core";
import type { NcTimelineEvent } from "@nrt/device-sim";

/** One trace event (the subset of fields this document uses). */
export interface TraceEvent {
  /** Name shown on the slice. */
  name: string;
  /** Category. */
  cat?: string;
  /** Phase: `X` complete, `i` instant, `M` metadata. */
  ph: "X" | "i" | "M";
  /** Timestamp, µs. */
  ts: number;
  /** Duration, µs (`X` only). */
  dur?: number;
  /** Process id (a track group). */
  pid: number;
  /** Thread id (a track). */
  tid: number;
  /** Instant scope (`t`: the thread). */
  s?: "t";
  /** Arguments shown on selection. */
  args?: Record<string, unknown>;
}

/** The document. */
export interface ChromeTrace {
  /** Every event. */
  traceEvents: TraceEvent[];
  /** `ms`: how viewers show times. */
  displayTimeUnit: "ms";
  /** Where the times come from. */
  otherData: { origin_ms: number; model: string; device: string };
}

/** What one traced execution produced. */
export interface ProfileInput {
  /** The model's name. */
  readonly model: string;
  /** The device, e.g. `cayman (NC-v3)`. */
  readonly device: string;
  /** Host spans of the load and the execution. */
  readonly spans: readonly HostSpan[];
  /** The device's timeline events. */
  readonly timeline: readonly NcTimelineEvent[];
}

const HOST_PID = 1;
const ncPid = (nc: number): number => 100 + nc;
/** By `DmaDirection`: 0 S2M (stream to memory: the outputs), 1 M2S (memory to stream: the inputs). */
const DIRECTIONS = ["S2M", "M2S"];

/** Thread ids of a NeuronCore's tracks. */
export const NcTrack = {
  SEQUENCER: 1,
  /** DMA queue `q` of direction `d` is `DMA + d * 32 + q`. */
  DMA: 100,
  /** Q7 core `c` is `Q7 + c`. */
  Q7: 200,
  NOTIFICATIONS: 300,
  STDIO: 301,
} as const;

/**
 * Builds the trace of one execution.
 *
 * @param input The host spans and the device timeline.
 * @returns The Chrome Trace Event document.
 * @throws {RangeError} When there is nothing to draw.
 */
export function buildChromeTrace(input: ProfileInput): ChromeTrace {
  const starts = [...input.spans.map((s) => s.start), ...input.timeline.map((e) => e.start)];
  if (starts.length === 0) throw new RangeError("Cannot build a trace: no host span and no device event was recorded");
  const origin = Math.min(...starts);
  const us = (ms: number): number => Math.round((ms - origin) * 1000 * 1000) / 1000;
  // Both ends rounded the same way, so slices that touch in time touch in the trace.
  const dur = (a: number, b: number): number => Math.max(0, Math.round((us(b) - us(a)) * 1000) / 1000);
  const events: TraceEvent[] = [];
  const named = new Set<string>();
  const meta = (pid: number, tid: number | undefined, name: string, sort: number): void => {
    const key = `${pid}:${tid ?? "p"}`;
    if (named.has(key)) return;
    named.add(key);
    if (tid === undefined) {
      events.push({ name: "process_name", ph: "M", ts: 0, pid, tid: 0, args: { name } });
      events.push({ name: "process_sort_index", ph: "M", ts: 0, pid, tid: 0, args: { sort_index: sort } });
    } else {
      events.push({ name: "thread_name", ph: "M", ts: 0, pid, tid, args: { name } });
      events.push({ name: "thread_sort_index", ph: "M", ts: 0, pid, tid, args: { sort_index: sort } });
    }
  };

  // Host: the load on one track, the execution's steps on one track per NeuronCore they act on.
  meta(HOST_PID, undefined, "host: nrt runtime", 0);
  const load = input.spans.filter((s) => s.seq === undefined);
  const exec = input.spans.filter((s) => s.seq !== undefined);
  for (const s of load) {
    meta(HOST_PID, 1, "nrt_load", 1);
    events.push({
      name: s.name,
      cat: "host,load",
      ph: "X",
      ts: us(s.start),
      dur: dur(s.start, s.end),
      pid: HOST_PID,
      tid: 1,
      args: { ...(s.nc === undefined ? {} : { nc: s.nc }), ...(s.detail === undefined ? {} : { detail: s.detail }) },
    });
  }
  const execNcs = [...new Set(exec.filter((s) => s.name !== "nrt_execute").map((s) => s.nc ?? -1))].sort((a, b) =>
    a - b
  );
  for (const s of exec) {
    // nrt_execute spans the whole request: on the first track; each step on its NeuronCore's track.
    const k = s.name === "nrt_execute" ? 0 : execNcs.indexOf(s.nc ?? -1);
    const tid = 2 + k;
    meta(HOST_PID, tid, execNcs.length > 1 && k >= 0 ? `nrt_execute (nc ${execNcs[k]})` : "nrt_execute", 2 + k);
    events.push({
      name: s.name,
      cat: "host,execute",
      ph: "X",
      ts: us(s.start),
      dur: dur(s.start, s.end),
      pid: HOST_PID,
      tid,
      args: {
        seq: s.seq,
        ...(s.nc === undefined ? {} : { nc: s.nc }),
        ...(s.detail === undefined ? {} : { detail: s.detail }),
      },
    });
  }

  // The device: one process per NeuronCore.
  for (const e of input.timeline) {
    const pid = ncPid(e.nc);
    meta(pid, undefined, `NeuronCore ${e.nc}`, 10 + e.nc);
    switch (e.kind) {
      case "run":
        meta(pid, NcTrack.SEQUENCER, "sequencer", 0);
        events.push({
          name: `run ${e.run}`,
          cat: "device,sequencer",
          ph: "X",
          ts: us(e.start),
          dur: dur(e.start, e.end),
          pid,
          tid: NcTrack.SEQUENCER,
          args: { run: e.run, model: e.model, outcome: e.outcome },
        });
        break;
      case "instruction": {
        meta(pid, NcTrack.SEQUENCER, "sequencer", 0);
        const name = opcodeName(e.opcode) ?? `opcode 0x${e.opcode.toString(16)}`;
        events.push({
          name,
          cat: "device,instruction",
          ph: "X",
          ts: us(e.start),
          dur: dur(e.start, e.end),
          pid,
          tid: NcTrack.SEQUENCER,
          args: { run: e.run, slot: e.slot, opcode: e.opcode, arg: e.arg },
        });
        break;
      }
      case "dma": {
        const tid = NcTrack.DMA + e.direction * 32 + e.queue;
        meta(pid, tid, `DMA queue ${e.queue} (${DIRECTIONS[e.direction] ?? `direction ${e.direction}`})`, tid);
        events.push({
          name: `${e.bytes} B`,
          cat: "device,dma",
          ph: "X",
          ts: us(e.start),
          dur: dur(e.start, e.end),
          pid,
          tid,
          args: { run: e.run, bytes: e.bytes, descriptors: e.descriptors, queue: e.queue, direction: e.direction },
        });
        break;
      }
      case "q7": {
        const tid = NcTrack.Q7 + e.core;
        meta(pid, tid, `Q7 core ${e.core}`, tid);
        events.push({
          name: e.fn,
          cat: "device,q7",
          ph: "X",
          ts: us(e.start),
          dur: dur(e.start, e.end),
          pid,
          tid,
          args: { run: e.run, core: e.core, status: e.status },
        });
        break;
      }
      case "notify":
        meta(pid, NcTrack.NOTIFICATIONS, "notifications", NcTrack.NOTIFICATIONS);
        events.push({
          name: Object.entries(NotificationKind).find(([, v]) => v === e.record.kind)?.[0] ??
            `record kind ${e.record.kind}`,
          cat: "device,notification",
          ph: "i",
          s: "t",
          ts: us(e.start),
          pid,
          tid: NcTrack.NOTIFICATIONS,
          args: { run: e.run, ...e.record },
        });
        break;
      case "stdio":
        meta(pid, NcTrack.STDIO, "stdio drain", NcTrack.STDIO);
        events.push({
          name: "stdio flush",
          cat: "device,stdio",
          ph: "X",
          ts: us(e.start),
          dur: dur(e.start, e.end),
          pid,
          tid: NcTrack.STDIO,
          args: { run: e.run, entries: e.entries },
        });
        break;
    }
  }
  return {
    traceEvents: events,
    displayTimeUnit: "ms",
    otherData: { origin_ms: origin, model: input.model, device: input.device },
  };
}
