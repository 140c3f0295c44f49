/**
 * The device agent's trace buffer: a ring of fixed 256-byte entries in a `SharedArrayBuffer` that the agent appends
 * to (every notification record, Q7 lifecycle events, sequencer faults, injected faults as they fire, Q7
 * dispatches and joins) and the host reads when it is asked — the simulator's observability, never on the runtime's
 * path. One writer (the agent), one reader (the host portal); a reader that falls more than a ring behind loses the
 * oldest entries and counts them. Fault firings have a ring of their own that cannot overrun: the host never has more
 * faults armed than it holds entries ({@linkcode FIRED_ENTRIES}, `FaultInjector`'s cap), and it drains the ring before
 * it arms another. Ours: the seeds describe no trace buffer.
 *
 * The device's timeline (what a profiler draws: each run of the sequencer, each instruction, each DMA queue's
 * transfers, each Q7 core's kernel, each notification record and the stdio flush, with start and end times) has a ring
 * of its own ({@linkcode TIMELINE_ENTRIES}), written only while the host set the NeuronCore's trace word
 * (`NcStatus.TRACE`), so that it never pushes the entries above out and a run that is not traced records nothing.
 * Times are milliseconds of the clock every thread shares, `performance.timeOrigin + performance.now()`.
 *
 * @module
 */
import { decodeNotification, encodeNotification, NOTIFICATION_BYTES, type NotificationRecord } from "@nrt/core/isa";

/** Entry kinds. */
export const LogKind = {
  /** A notification record pushed to the NQ (payload: the 16 record bytes). */
  RECORD: 1,
  /** A Q7 lifecycle event (payload: u8 kind, u8 via, UTF-8 detail). */
  Q7_EVENT: 2,
  /** A sequencer fault (payload: u32 slot, u32 mask, UTF-8 message). */
  SEQ_FAULT: 3,
  /** An injected fault fired (payload: u32 id, u32 run). */
  FIRED: 4,
  /** An op dispatched to the Q7 cores (payload: u8 total_cpus, UTF-8 function name). */
  Q7_DISPATCH: 5,
  /** An op joined (payload: 8 × u8 core status, UTF-8 first failure message). */
  Q7_JOIN: 6,
  /** Timeline: one run of the sequencer (f64 start, f64 end, u32 run, u16 model, u8 outcome). */
  RUN: 7,
  /** Timeline: one instruction (f64 start, f64 end, u32 run, u16 slot, u8 opcode, u8 0, f64 argument). */
  INSTRUCTION: 8,
  /** Timeline: one DMA queue's transfers of one DMA step (f64 start, f64 end, u32 run, u8 direction, u8 queue, u16 descriptors, f64 bytes). */
  DMA: 9,
  /** Timeline: one Q7 core's kernel (f64 start, f64 end, u32 run, u8 core, u8 status, UTF-8 function). */
  Q7_CORE: 10,
  /** Timeline: a notification record pushed (f64 time, f64 time, u32 run, the 16 record bytes). */
  NOTIFY: 11,
  /** Timeline: the file-IO manager's stdio flush into the host rings (f64 start, f64 end, u32 run, u32 entries). */
  STDIO: 12,
} as const;

/** Bytes per entry. */
export const LOG_ENTRY_BYTES = 256;
/** Entry header: u32 sequence (index + 1), u8 kind, u8 nc, u16 payload length. */
const HEADER = 8;
/** Payload bytes per entry. */
export const LOG_PAYLOAD_BYTES: number = LOG_ENTRY_BYTES - HEADER;
/** Entries in a trace ring. */
export const LOG_ENTRIES = 8192;
/** Buffer bytes of a ring of `entries`: a 64-byte control block (the write count), then the entries. */
export function logBufferBytes(entries: number): number {
  return 64 + entries * LOG_ENTRY_BYTES;
}
/** Entries in the ring of fault firings: the most firings that can be outstanding (armed faults × NeuronCores). */
export const FIRED_ENTRIES = 8192;
/** Buffer bytes of a trace ring. */
export const LOG_BUFFER_BYTES: number = logBufferBytes(LOG_ENTRIES);

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** The agent's end. */
export class DeviceLogWriter {
  readonly #entries: number;
  readonly #count: Int32Array;
  readonly #u8: Uint8Array;
  readonly #view: DataView;
  /** The whole buffer as Int32 words (the entries' sequence words). */
  readonly #words: Int32Array;
  /**
   * One payload's worth of scratch the entries are filled in and then copied from (ours): no allocation per append,
   * and no view per entry kept alive (25,000 live cells on the agent for its three 8192-entry rings).
   */
  readonly #scratch = new Uint8Array(LOG_PAYLOAD_BYTES);
  readonly #scratchView = new DataView(this.#scratch.buffer);
  #next = 0;

  /** Writes into `buffer` (made by the host, {@linkcode logBufferBytes} of its entries). */
  constructor(buffer: SharedArrayBuffer) {
    this.#entries = (buffer.byteLength - 64) / LOG_ENTRY_BYTES;
    this.#count = new Int32Array(buffer, 0, 1);
    this.#u8 = new Uint8Array(buffer, 64);
    this.#view = new DataView(buffer, 64);
    this.#words = new Int32Array(buffer);
    this.#next = Atomics.load(this.#count, 0);
  }

  /** Appends one entry; `fill` writes up to {@linkcode LOG_PAYLOAD_BYTES} payload bytes and returns how many. */
  append(kind: number, nc: number, fill: (payload: Uint8Array, view: DataView) => number): void {
    this.#commit(kind, nc, fill(this.#scratch, this.#scratchView));
  }

  /** Copies the scratch payload (`n` bytes filled) into the next entry and publishes it. */
  #commit(kind: number, nc: number, n: number): void {
    const index = this.#next++;
    const slot = index % this.#entries;
    const at = slot * LOG_ENTRY_BYTES;
    this.#u8.set(this.#scratch, at + HEADER);
    this.#u8[at + 4] = kind;
    this.#u8[at + 5] = nc;
    this.#u8[at + 6] = n;
    this.#u8[at + 7] = n >>> 8;
    // The sequence is stored last: a reader that sees it sees the entry.
    Atomics.store(this.#words, (64 + at) >> 2, index + 1);
    Atomics.store(this.#count, 0, this.#next);
  }

  /** Appends one entry whose payload is a copy of `bytes` (at most {@linkcode LOG_PAYLOAD_BYTES}; no closure made). */
  appendBytes(kind: number, nc: number, bytes: Uint8Array): void {
    this.#scratch.set(bytes);
    this.#commit(kind, nc, bytes.byteLength);
  }

  /**
   * The scratch payload's view: a caller writes an entry's head bytes into it, then calls
   * {@linkcode DeviceLogWriter.appendFilledText} (no closure made per entry).
   */
  get head(): DataView {
    return this.#scratchView;
  }

  /**
   * Appends an entry whose payload is the `n` head bytes written through {@linkcode DeviceLogWriter.head}, then UTF-8
   * `text`, cut to fit (at a character boundary).
   */
  appendFilledText(kind: number, nc: number, n: number, text: string): void {
    let written = 0;
    if (text.length > 0) {
      const tail = this.#tails[n] ??= this.#scratch.subarray(n);
      written = utf8.encodeInto(text, tail).written;
    }
    this.#commit(kind, nc, n + written);
  }

  /** Views of the scratch payload from each head length on (made once). */
  readonly #tails: Uint8Array[] = [];

  /** Appends an entry whose payload is `head` bytes then UTF-8 `text`, cut to fit (at a character boundary). */
  appendText(kind: number, nc: number, head: (view: DataView) => number, text: string): void {
    this.appendFilledText(kind, nc, head(this.#scratchView), text);
  }
}

/** One entry as the host reads it. */
export interface LogEntry {
  readonly kind: number;
  readonly nc: number;
  /** A copy of the payload. */
  readonly payload: Uint8Array;
}

/** The host's end. */
export class DeviceLogReader {
  readonly #entries: number;
  readonly #count: Int32Array;
  readonly #u8: Uint8Array;
  readonly #view: DataView;
  /** The whole buffer as Int32 words (the entries' sequence words). */
  readonly #words: Int32Array;
  #read = 0;
  /** Entries lost because the reader fell more than a ring behind. */
  lost = 0;

  /** Reads `buffer`. */
  constructor(buffer: SharedArrayBuffer) {
    this.#entries = (buffer.byteLength - 64) / LOG_ENTRY_BYTES;
    this.#count = new Int32Array(buffer, 0, 1);
    this.#u8 = new Uint8Array(buffer, 64);
    this.#view = new DataView(buffer, 64);
    this.#words = new Int32Array(buffer);
  }

  /** The entries appended since the last call, oldest first. */
  drain(): LogEntry[] {
    const written = Atomics.load(this.#count, 0);
    if (written - this.#read > this.#entries) {
      this.lost += written - this.#read - this.#entries;
      this.#read = written - this.#entries;
    }
    const out: LogEntry[] = [];
    for (; this.#read < written; this.#read++) {
      const at = (this.#read % this.#entries) * LOG_ENTRY_BYTES;
      const seq = Atomics.load(this.#words, (64 + at) >> 2);
      if (seq !== this.#read + 1) {
        // Overwritten by a newer entry while we read: lost.
        this.lost++;
        continue;
      }
      const n = this.#view.getUint16(at + 6, true);
      out.push({
        kind: this.#view.getUint8(at + 4),
        nc: this.#view.getUint8(at + 5),
        payload: this.#u8.slice(at + HEADER, at + HEADER + n),
      });
    }
    return out;
  }
}

/** The UTF-8 text of a payload from byte `from`. */
export function payloadText(payload: Uint8Array, from: number): string {
  return fromUtf8.decode(payload.subarray(from));
}

// ---- The timeline ---------------------------------------------------------------------------------------------

/** Entries in a timeline ring (one traced one-op execution writes about 40). */
export const TIMELINE_ENTRIES = 8192;
/** Buffer bytes of a timeline ring. */
export const TIMELINE_BUFFER_BYTES: number = logBufferBytes(TIMELINE_ENTRIES);

/** How a run ended. */
export type RunOutcome = "completed" | "faulted" | "dropped";
const OUTCOMES: readonly RunOutcome[] = ["completed", "faulted", "dropped"];
/** How a Q7 core ended its kernel (the cluster's statuses). */
export type Q7CoreOutcome = "ok" | "trap" | "oob" | "abort" | "missing-function";
const CORE_OUTCOMES: readonly Q7CoreOutcome[] = ["ok", "trap", "oob", "abort", "missing-function"];

/** Fields every timeline event has. */
export interface TimelineBase {
  /** Start, ms of the shared clock. */
  readonly start: number;
  /** End, ms of the shared clock (= start for a point in time). */
  readonly end: number;
  /** The sequencer's run count of the stream the event belongs to (1 for the first run after install). */
  readonly run: number;
}

/** One event of the device's timeline. */
export type TimelineEvent =
  | TimelineBase & { readonly kind: "run"; readonly model: number; readonly outcome: RunOutcome }
  | TimelineBase & {
    readonly kind: "instruction";
    readonly slot: number;
    readonly opcode: number;
    readonly arg: number;
  }
  | TimelineBase & {
    readonly kind: "dma";
    readonly direction: number;
    readonly queue: number;
    readonly descriptors: number;
    readonly bytes: number;
  }
  | TimelineBase & { readonly kind: "q7"; readonly core: number; readonly status: Q7CoreOutcome; readonly fn: string }
  | TimelineBase & { readonly kind: "notify"; readonly record: NotificationRecord }
  | TimelineBase & { readonly kind: "stdio"; readonly entries: number };

/** Where the device reports timeline events of one NeuronCore. */
export type TimelineSink = (e: TimelineEvent) => void;

/** The shared clock, in milliseconds (the same on the host and in every Worker). */
export function sharedClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Appends one timeline event of NeuronCore `nc` (the agent's end). */
export function writeTimelineEvent(log: DeviceLogWriter, nc: number, e: TimelineEvent): void {
  const head = (v: DataView): number => {
    v.setFloat64(0, e.start, true);
    v.setFloat64(8, e.end, true);
    v.setUint32(16, e.run >>> 0, true);
    return 20;
  };
  switch (e.kind) {
    case "run":
      return log.append(LogKind.RUN, nc, (_, v) => {
        const n = head(v);
        v.setUint16(n, e.model & 0xffff, true);
        v.setUint8(n + 2, OUTCOMES.indexOf(e.outcome));
        return n + 3;
      });
    case "instruction":
      return log.append(LogKind.INSTRUCTION, nc, (_, v) => {
        const n = head(v);
        v.setUint16(n, e.slot, true);
        v.setUint8(n + 2, e.opcode);
        v.setFloat64(n + 4, e.arg, true);
        return n + 12;
      });
    case "dma":
      return log.append(LogKind.DMA, nc, (_, v) => {
        const n = head(v);
        v.setUint8(n, e.direction);
        v.setUint8(n + 1, e.queue);
        v.setUint16(n + 2, Math.min(e.descriptors, 0xffff), true);
        v.setFloat64(n + 4, e.bytes, true);
        return n + 12;
      });
    case "q7":
      return log.appendText(LogKind.Q7_CORE, nc, (v) => {
        const n = head(v);
        v.setUint8(n, e.core);
        v.setUint8(n + 1, CORE_OUTCOMES.indexOf(e.status));
        return n + 2;
      }, e.fn);
    case "notify":
      return log.append(LogKind.NOTIFY, nc, (p, v) => {
        const n = head(v);
        encodeNotification(e.record, p, n);
        return n + NOTIFICATION_BYTES;
      });
    case "stdio":
      return log.append(LogKind.STDIO, nc, (_, v) => {
        const n = head(v);
        v.setUint32(n, e.entries >>> 0, true);
        return n + 4;
      });
  }
}

/** A timeline event as the host reads it, or `undefined` for an entry of another kind. */
export function readTimelineEvent(entry: LogEntry): TimelineEvent | undefined {
  const p = entry.payload;
  if (p.byteLength < 20) return undefined;
  const v = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const base = { start: v.getFloat64(0, true), end: v.getFloat64(8, true), run: v.getUint32(16, true) };
  switch (entry.kind) {
    case LogKind.RUN:
      return { kind: "run", ...base, model: v.getUint16(20, true), outcome: OUTCOMES[v.getUint8(22)] ?? "faulted" };
    case LogKind.INSTRUCTION:
      return {
        kind: "instruction",
        ...base,
        slot: v.getUint16(20, true),
        opcode: v.getUint8(22),
        arg: v.getFloat64(24, true),
      };
    case LogKind.DMA:
      return {
        kind: "dma",
        ...base,
        direction: v.getUint8(20),
        queue: v.getUint8(21),
        descriptors: v.getUint16(22, true),
        bytes: v.getFloat64(24, true),
      };
    case LogKind.Q7_CORE:
      return {
        kind: "q7",
        ...base,
        core: v.getUint8(20),
        status: CORE_OUTCOMES[v.getUint8(21)] ?? "abort",
        fn: payloadText(p, 22),
      };
    case LogKind.NOTIFY:
      return { kind: "notify", ...base, record: decodeNotification(p, 20) };
    case LogKind.STDIO:
      return { kind: "stdio", ...base, entries: v.getUint32(20, true) };
  }
  return undefined;
}
