/**
 * The device agent's trace buffer: a ring of fixed 256-byte entries in a `SharedArrayBuffer` that the agent appends
 * to (every notification record, Q7 lifecycle events, sequencer faults, injected faults as they fire, Q7
 * dispatches and joins) and the host reads when it is asked — the simulator's observability, never on the runtime's
 * path. One writer (the agent), one reader (the host portal); a reader that falls more than a ring behind loses the
 * oldest entries and counts them. Fault firings have a ring of their own that cannot overrun: the host never has more
 * faults armed than it holds entries ({@linkcode FIRED_ENTRIES}, `FaultInjector`'s cap), and it drains the ring before
 * it arms another. Ours: the seeds describe no trace buffer.
 *
 * @module
 */

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
  #next = 0;

  /** Writes into `buffer` (made by the host, {@linkcode logBufferBytes} of its entries). */
  constructor(buffer: SharedArrayBuffer) {
    this.#entries = (buffer.byteLength - 64) / LOG_ENTRY_BYTES;
    this.#count = new Int32Array(buffer, 0, 1);
    this.#u8 = new Uint8Array(buffer, 64);
    this.#view = new DataView(buffer, 64);
    this.#next = Atomics.load(this.#count, 0);
  }

  /** Appends one entry; `fill` writes up to {@linkcode LOG_PAYLOAD_BYTES} payload bytes and returns how many. */
  append(kind: number, nc: number, fill: (payload: Uint8Array, view: DataView) => number): void {
    const index = this.#next++;
    const at = (index % this.#entries) * LOG_ENTRY_BYTES;
    const payload = this.#u8.subarray(at + HEADER, at + LOG_ENTRY_BYTES);
    const n = fill(payload, new DataView(this.#view.buffer, this.#view.byteOffset + at + HEADER, LOG_PAYLOAD_BYTES));
    this.#view.setUint8(at + 4, kind);
    this.#view.setUint8(at + 5, nc);
    this.#view.setUint16(at + 6, n, true);
    // The sequence is stored last: a reader that sees it sees the entry.
    Atomics.store(new Int32Array(this.#view.buffer, this.#view.byteOffset + at, 1), 0, index + 1);
    Atomics.store(this.#count, 0, this.#next);
  }

  /** Appends an entry whose payload is `head` bytes then UTF-8 `text`, cut to fit. */
  appendText(kind: number, nc: number, head: (view: DataView) => number, text: string): void {
    this.append(kind, nc, (payload, view) => {
      const n = head(view);
      const bytes = utf8.encode(text);
      const room = LOG_PAYLOAD_BYTES - n;
      payload.set(bytes.subarray(0, room), n);
      return n + Math.min(room, bytes.length);
    });
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
  #read = 0;
  /** Entries lost because the reader fell more than a ring behind. */
  lost = 0;

  /** Reads `buffer`. */
  constructor(buffer: SharedArrayBuffer) {
    this.#entries = (buffer.byteLength - 64) / LOG_ENTRY_BYTES;
    this.#count = new Int32Array(buffer, 0, 1);
    this.#u8 = new Uint8Array(buffer, 64);
    this.#view = new DataView(buffer, 64);
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
      const seq = Atomics.load(new Int32Array(this.#view.buffer, this.#view.byteOffset + at, 1), 0);
      if (seq !== this.#read + 1) {
        // Overwritten by a newer entry while we read: lost.
        this.lost++;
        continue;
      }
      const n = this.#view.getUint16(at + 6, true);
      out.push({ kind: this.#view.getUint8(at + 4), nc: this.#view.getUint8(at + 5), payload: this.#u8.slice(at + HEADER, at + HEADER + n) });
    }
    return out;
  }
}

/** The UTF-8 text of a payload from byte `from`. */
export function payloadText(payload: Uint8Array, from: number): string {
  return fromUtf8.decode(payload.subarray(from));
}
