/**
 * The device daemon's wire protocol: a compact, little-endian, length-prefixed binary framing of the
 * {@linkcode Portal} operations. One frame per request or response:
 *
 * ```
 * +0  u32  length of everything after this field (8 + body)
 * +4  u32  request id (chosen by the client; a response echoes it)
 * +8  u8   opcode (a response sets bit 7: RESPONSE | opcode)
 * +9  u8   status: 0 = ok, 1 = error (responses); a request sends 0, or POSTED (1) for a write whose success is not
 *           answered (a posted write, as on PCIe: only a failure comes back, and the client reports it at its next call)
 * +10 u16  reserved, 0
 * +12 ...  body: fixed fields, then (for bulk operations) the raw bytes up to the end of the frame
 * ```
 *
 * Bulk payloads (`barWrite` data, `memWrite` data, `memRead` results) travel as raw bytes at the end of the body,
 * never JSON-encoded. An error response's body is `u32 NrtStatus, u8 ErrorKind, UTF-8 message`. Byte quantities
 * (offsets, lengths, sizes, physical addresses) are `f64` so every JavaScript number — 96 GiB HBM addresses and the
 * negative offsets a caller may wrongly pass — crosses unchanged and the daemon's checks see what the caller sent;
 * indices and 32-bit register values are `u32`.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the driver ABI `ndl_*` this protocol carries one for one) and §3.5 (the
 * completion wait, here a cancellable long-poll request).
 *
 * @module
 */

/**
 * Protocol version carried in HELLO; a daemon refuses a client of another version. 3: a NOTIFICATION_WAIT answer
 * may carry a {@linkcode WakeSnapshot}.
 */
export const PROTOCOL_VERSION = 3;

/** The status byte of a request the daemon answers only when it fails (a posted write). Ours. */
export const POSTED = 1;

/** Bytes of the frame header, the length prefix included. */
export const HEADER_BYTES = 12;

/** Largest frame either side accepts (1 GiB): a corrupt length prefix cannot make the reader buffer forever. */
export const MAX_FRAME_BYTES: number = 1 << 30;

/**
 * Most bytes one MEM_READ or MEM_WRITE moves (64 MiB, ours): the client splits a larger copy into several, so no
 * frame nears {@linkcode MAX_FRAME_BYTES} and the answers a client has not taken yet stay bounded.
 */
export const MAX_TRANSFER_BYTES: number = 64 * 1024 * 1024;

/**
 * Largest request frame the daemon takes (ours): a MEM_WRITE of {@linkcode MAX_TRANSFER_BYTES} with its header and
 * fields, and room to spare; no BAR0 register window is larger (a BAR_WRITE of more is refused either way). A length
 * prefix announcing more closes the connection before any of the body is buffered.
 */
export const MAX_REQUEST_BYTES: number = MAX_TRANSFER_BYTES + 4096;

/** Longest client name HELLO accepts, in UTF-8 bytes (ours; `STATS` reports at most 255 of them). */
export const MAX_NAME_BYTES = 1024;

/** Bit 7 of the opcode byte marks a response. */
export const RESPONSE = 0x80;

/** One opcode per Portal operation, plus the session operations. */
export const Op = {
  /**
   * `u32 version, u32 pid, UTF-8 name` → `u32 version, u32 session id, f64 NeuronCore block base, f64 block stride`
   * (the BAR0 geometry, so the client can tell which NeuronCore a BAR write addresses).
   */
  HELLO: 0x01,
  /** Orderly goodbye: the daemon reclaims everything the session holds, then answers. */
  BYE: 0x02,
  /** Cancels a pending NOTIFICATION_WAIT: `u32 request id`. No response of its own. */
  CANCEL: 0x03,
  /** → `u32 count, count × (u32 index, u32 arch, u32 ncCount, f64 hbmBytes)`. */
  DEVICES: 0x10,
  /** `u32 device, u32 bar, u32 offset` → `u32 value`. */
  BAR_READ32: 0x11,
  /** `u32 device, u32 bar, u32 offset, u32 value`. */
  BAR_WRITE32: 0x12,
  /** `u32 device, u32 bar, u32 offset, raw bytes`. */
  BAR_WRITE: 0x13,
  /** `u32 device, u32 nc, f64 bytes, f64 align (0 = default), u8 location` → a DeviceMemory. */
  MEM_ALLOC: 0x20,
  /** `u32 id`. */
  MEM_FREE: 0x21,
  /** `u32 id, f64 offset, raw bytes`. */
  MEM_WRITE: 0x22,
  /** `u32 id, f64 offset, f64 length` → raw bytes. */
  MEM_READ: 0x23,
  /** `u32 device` → `f64 hbm, f64 host, u32 allocations`. */
  MEM_USAGE: 0x24,
  /** `u32 device, u32 nc, u32 semaphore, u32 value`. */
  SEM_INCREMENT: 0x30,
  /** `u32 device, u32 nc, u32 semaphore` → `u32 value`. */
  SEM_READ: 0x31,
  /** `u32 device, u32 nc, u32 semaphore, u32 value`. */
  SEM_SET: 0x32,
  /**
   * `u32 device, u32 nc, u32 head` → when the head moved or the wait was cancelled: empty, or a wake snapshot
   * ({@linkcode encodeWakeSnapshot}: what the host reads next on that NeuronCore, as it was at the wake).
   */
  NOTIFICATION_WAIT: 0x40,
  /** `u32 device, u32 count, count × u32 nc`: exclusive ownership for the session. */
  ACQUIRE_CORES: 0x50,
  /** `u32 device, u32 count, count × u32 nc`. */
  RELEASE_CORES: 0x51,
  /** → `u32 sessions, u32 waiters, u32 count, count × (u32 device, u32 nc, u32 pid, u32 session, UTF-8 name ≤ 255 with u8 length)`. */
  STATS: 0x60,
} as const;

/** An opcode value. */
export type Opcode = typeof Op[keyof typeof Op];

/** The class of error an error response carries, so the client rethrows the same type. */
export const ErrorKind = { NRT: 0, TYPE: 1, RANGE: 2, OTHER: 3 } as const;

/** Where a device allocation lives on the wire (`MemoryLocation`). */
export const LOCATION_CODE: Readonly<Record<"hbm" | "host", number>> = Object.freeze({ hbm: 0, host: 1 });

/** One decoded frame. */
export interface Frame {
  /** Request id. */
  readonly id: number;
  /** Opcode byte (with {@linkcode RESPONSE} on responses). */
  readonly op: number;
  /** 0 ok, 1 error. */
  readonly status: number;
  /** The body (a view into the received bytes; copy before keeping it past the handler). */
  readonly body: Uint8Array;
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/**
 * Builds one frame: fixed little-endian fields, then an optional raw tail.
 *
 * @example A BAR bulk write: 12 header bytes, 12 field bytes, then the data as is
 * ```ts
 * import { FrameBuilder, Op } from "./protocol.ts";
 * const f = new FrameBuilder(7, Op.BAR_WRITE, 12, 4).u32(0).u32(0).u32(0x100).finish(new Uint8Array([1, 2, 3, 4]));
 * console.log(f.byteLength); // 28
 * ```
 */
export class FrameBuilder {
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  readonly #tail: number;
  #at = HEADER_BYTES;

  /**
   * Starts a frame.
   *
   * @param id Request id.
   * @param op Opcode byte.
   * @param fixed Bytes of fixed fields that follow the header.
   * @param tail Bytes of the raw tail passed to {@linkcode FrameBuilder.finish}.
   * @param status Status byte (responses).
   */
  constructor(id: number, op: number, fixed: number, tail = 0, status = 0) {
    const total = HEADER_BYTES + fixed + tail;
    this.#bytes = new Uint8Array(total);
    this.#view = new DataView(this.#bytes.buffer);
    this.#tail = tail;
    this.#view.setUint32(0, total - 4, true);
    this.#view.setUint32(4, id >>> 0, true);
    this.#bytes[8] = op;
    this.#bytes[9] = status;
  }

  /** Appends a `u8`. */
  u8(v: number): this {
    this.#bytes[this.#at++] = v;
    return this;
  }

  /** Appends a `u32`; a value that is not a u32 becomes 0xFFFFFFFF, which names no device, core or register. */
  u32(v: number): this {
    this.#view.setUint32(this.#at, Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff ? v : 0xffff_ffff, true);
    this.#at += 4;
    return this;
  }

  /** Appends a 32-bit register value (taken modulo 2³², as a register write does). */
  word(v: number): this {
    this.#view.setUint32(this.#at, v >>> 0, true);
    this.#at += 4;
    return this;
  }

  /** Appends an `f64` (byte quantities). */
  f64(v: number): this {
    this.#view.setFloat64(this.#at, v, true);
    this.#at += 8;
    return this;
  }

  /** Appends raw bytes inside the fixed part (for variable fields sized up front). */
  bytes(b: Uint8Array): this {
    this.#bytes.set(b, this.#at);
    this.#at += b.byteLength;
    return this;
  }

  /**
   * Appends the raw tail and returns the frame.
   *
   * @throws {RangeError} When the fields written do not fill the declared sizes.
   */
  finish(tail?: Uint8Array): Uint8Array {
    if (tail !== undefined) this.bytes(tail);
    if (this.#at !== this.#bytes.byteLength || (tail?.byteLength ?? 0) !== this.#tail) {
      throw new RangeError(
        `Frame op 0x${this.#bytes[8].toString(16)}: wrote ${this.#at} of ${this.#bytes.byteLength} bytes`,
      );
    }
    return this.#bytes;
  }
}

/** Reads the fixed fields of a frame body in order. */
export class BodyReader {
  readonly #body: Uint8Array;
  readonly #view: DataView;
  #at = 0;

  /** Reads `body`. */
  constructor(body: Uint8Array) {
    this.#body = body;
    this.#view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  }

  /** Next `u8`. */
  u8(): number {
    this.#need(1);
    return this.#body[this.#at++];
  }

  /** Next `u32`. */
  u32(): number {
    this.#need(4);
    const v = this.#view.getUint32(this.#at, true);
    this.#at += 4;
    return v;
  }

  /** Next `f64`. */
  f64(): number {
    this.#need(8);
    const v = this.#view.getFloat64(this.#at, true);
    this.#at += 8;
    return v;
  }

  /** Next `n` bytes (a view). */
  bytes(n: number): Uint8Array {
    this.#need(n);
    const b = this.#body.subarray(this.#at, this.#at + n);
    this.#at += n;
    return b;
  }

  /** Everything not read yet (a view): the raw tail. */
  rest(): Uint8Array {
    const b = this.#body.subarray(this.#at);
    this.#at = this.#body.byteLength;
    return b;
  }

  /** The rest as UTF-8 text. */
  text(): string {
    return fromUtf8.decode(this.rest());
  }

  #need(n: number): void {
    if (this.#at + n > this.#body.byteLength) {
      throw new RangeError(
        `Cannot decode frame body: field at ${this.#at} needs ${n} bytes, the body has ${this.#body.byteLength}`,
      );
    }
  }
}

/** UTF-8 bytes of `s`. */
export function encodeText(s: string): Uint8Array {
  return utf8.encode(s);
}

/**
 * Reassembles frames from a byte stream cut anywhere (the transport delivers chunks, not frames).
 *
 * @example Two frames arriving in three chunks
 * ```ts
 * import { FrameBuilder, FrameDecoder, Op } from "./protocol.ts";
 * const a = new FrameBuilder(1, Op.DEVICES, 0).finish();
 * const b = new FrameBuilder(2, Op.MEM_USAGE, 4).u32(0).finish();
 * const all = new Uint8Array([...a, ...b]);
 * const d = new FrameDecoder();
 * const got = [...d.push(all.subarray(0, 5)), ...d.push(all.subarray(5, 20)), ...d.push(all.subarray(20))];
 * console.log(got.map((f) => f.id)); // [1, 2]
 * ```
 */
export class FrameDecoder {
  #buf: Uint8Array = new Uint8Array(0);
  #len = 0;
  readonly #max: number;

  /**
   * Starts a decoder.
   *
   * @param maxFrameBytes The largest frame taken, its length prefix included (the daemon's:
   * {@linkcode MAX_REQUEST_BYTES}).
   */
  constructor(maxFrameBytes: number = MAX_FRAME_BYTES) {
    this.#max = maxFrameBytes;
  }

  /**
   * Adds a chunk and returns every frame it completes, in order.
   *
   * @throws {RangeError} When a length prefix is smaller than a header or announces a frame larger than the
   * decoder's maximum (checked as soon as the prefix arrives, before the body is buffered).
   */
  push(chunk: Uint8Array): Frame[] {
    let data: Uint8Array;
    let start = 0;
    if (this.#len === 0) {
      data = chunk; // the common case: parse straight from the chunk, copy only a leftover
    } else {
      this.#append(chunk);
      data = this.#buf.subarray(0, this.#len);
    }
    const out: Frame[] = [];
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    while (data.byteLength - start >= 4) {
      const len = view.getUint32(start, true);
      if (len < HEADER_BYTES - 4 || len > this.#max - 4) {
        throw new RangeError(
          `Cannot decode frame: length ${len} is out of range (${HEADER_BYTES - 4} to ${this.#max - 4})`,
        );
      }
      if (data.byteLength - start < 4 + len) break;
      out.push({
        id: view.getUint32(start + 4, true),
        op: data[start + 8],
        status: data[start + 9],
        body: data.subarray(start + HEADER_BYTES, start + 4 + len),
      });
      start += 4 + len;
    }
    // Bodies parsed from the internal buffer are copied now: the leftover moved to its front below, and the next push,
    // would overwrite them (a frame completed by a chunk that also starts the next one lost its first bytes to it).
    const frames = data === chunk ? out : out.map((f) => ({ ...f, body: f.body.slice() }));
    const left = data.byteLength - start;
    if (left === 0) {
      this.#len = 0;
      if (this.#buf.byteLength > 1 << 20) this.#buf = new Uint8Array(0);
    } else if (data === chunk) {
      this.#len = 0;
      this.#append(chunk.subarray(start));
    } else {
      this.#buf.copyWithin(0, start, this.#len);
      this.#len = left;
    }
    return frames;
  }

  /** Bytes held for an incomplete frame. */
  get pending(): number {
    return this.#len;
  }

  /** Bytes of memory the decoder holds for incomplete frames (its buffer, which may be larger than `pending`). */
  get held(): number {
    return this.#buf.byteLength;
  }

  #append(chunk: Uint8Array): void {
    const need = this.#len + chunk.byteLength;
    if (need > this.#buf.byteLength) {
      const grown = new Uint8Array(Math.max(need, this.#buf.byteLength * 2, 4096));
      grown.set(this.#buf.subarray(0, this.#len));
      this.#buf = grown;
    }
    this.#buf.set(chunk, this.#len);
    this.#len = need;
  }
}

/**
 * What the daemon read on a NeuronCore at the moment it answered a NOTIFICATION_WAIT (ours): the reads the host
 * makes next — the NQ head and cause registers, the ring records between the host's tail and that head, the stdio
 * rings' write indices — so the client serves them without a round trip each. The client's
 * consistency rule is in `remote_portal.ts`.
 */
export interface WakeSnapshot {
  /** The id of the last request of the session the daemon had started when it took the snapshot. */
  readonly started: number;
  /** BAR0 words of the waited device: `[offset, value]`. */
  readonly words: ReadonlyArray<readonly [number, number]>;
  /** BAR0 offsets whose write the device only stores (the NQ tail): such a write leaves the snapshot valid. */
  readonly inert: readonly number[];
  /** Bytes of the session's allocations: `memory` id, `offset` in it, the bytes. */
  readonly ranges: ReadonlyArray<{ readonly memory: number; readonly offset: number; readonly bytes: Uint8Array }>;
}

/**
 * The answer to a NOTIFICATION_WAIT with a snapshot. Body: `u32 started, u32 words, words × (u32 offset, u32 value),
 * u32 inert, inert × u32 offset, u32 ranges, ranges × (u32 memory id, f64 offset, f64 length, raw bytes)`.
 */
export function encodeWakeSnapshot(id: number, snap: WakeSnapshot): Uint8Array {
  const fixed = 16 + 8 * snap.words.length + 4 * snap.inert.length +
    snap.ranges.reduce((n, r) => n + 20 + r.bytes.byteLength, 0);
  const b = new FrameBuilder(id, Op.NOTIFICATION_WAIT | RESPONSE, fixed).u32(snap.started).u32(snap.words.length);
  for (const [offset, value] of snap.words) b.u32(offset).word(value);
  b.u32(snap.inert.length);
  for (const offset of snap.inert) b.u32(offset);
  b.u32(snap.ranges.length);
  for (const r of snap.ranges) b.u32(r.memory).f64(r.offset).f64(r.bytes.byteLength).bytes(r.bytes);
  return b.finish();
}

/**
 * Decodes a NOTIFICATION_WAIT answer: `undefined` when it carries no snapshot (an empty body). The ranges' bytes
 * are views of `body`.
 *
 * @throws {RangeError} When the body is truncated.
 */
export function decodeWakeSnapshot(body: Uint8Array): WakeSnapshot | undefined {
  if (body.byteLength === 0) return undefined;
  const r = new BodyReader(body);
  const started = r.u32();
  const words = Array.from({ length: r.u32() }, () => [r.u32(), r.u32()] as const);
  const inert = Array.from({ length: r.u32() }, () => r.u32());
  const ranges = Array.from({ length: r.u32() }, () => {
    const memory = r.u32(), offset = r.f64(), length = r.f64();
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new RangeError(`Cannot decode a snapshot range of ${length} bytes`);
    }
    return { memory, offset, bytes: r.bytes(length) };
  });
  return { started, words, inert, ranges };
}
