/**
 * A small DEFLATE compressor (RFC 1951) — LZ77 with a hash chain, coded with the fixed Huffman code (§3.2.6) —
 * or stored blocks (§3.2.4), wrapped as one gzip member (RFC 1952) for the NEFF builder.
 *
 * @module
 */
import { crc32 } from "./crc32.ts";

/** How {@linkcode gzipMember} encodes the data. */
export type DeflateMode = "fixed" | "stored";

const WINDOW = 32768;
const MIN_MATCH = 3;
const MAX_MATCH = 258;
const MAX_CHAIN = 64;
const HASH_BITS = 15;

/** An LSB-first bit writer into a growable buffer. */
class BitWriter {
  #buf: Uint8Array;
  #len = 0;
  #acc = 0;
  #n = 0;

  constructor(capacity: number) {
    this.#buf = new Uint8Array(Math.max(64, capacity));
  }

  #byte(b: number): void {
    if (this.#len === this.#buf.length) {
      const grown = new Uint8Array(this.#buf.length * 2);
      grown.set(this.#buf);
      this.#buf = grown;
    }
    this.#buf[this.#len++] = b;
  }

  /** Writes the low `n` bits of `v` (n ≤ 16). */
  bits(v: number, n: number): void {
    this.#acc |= v << this.#n;
    this.#n += n;
    while (this.#n >= 8) {
      this.#byte(this.#acc & 0xff);
      this.#acc >>>= 8;
      this.#n -= 8;
    }
  }

  /** Writes a Huffman code of length `n`, most significant bit first. */
  code(c: number, n: number): void {
    let rev = 0;
    for (let i = 0; i < n; i++) rev |= ((c >>> i) & 1) << (n - 1 - i);
    this.bits(rev, n);
  }

  /** Pads to a byte boundary. */
  align(): void {
    if (this.#n > 0) this.bits(0, 8 - this.#n);
  }

  /** Appends whole bytes (the writer must be aligned). */
  bytes(b: Uint8Array): void {
    for (let i = 0; i < b.length; i++) this.#byte(b[i]);
  }

  /** The bytes written so far. */
  finish(): Uint8Array {
    this.align();
    return this.#buf.slice(0, this.#len);
  }
}

const LEN_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

/** Length 3..258 → code index 0..28. */
const LEN_CODE: Uint8Array = (() => {
  const t = new Uint8Array(MAX_MATCH + 1);
  for (let i = 0; i < 29; i++) for (let l = LEN_BASE[i]; l < (i === 28 ? 259 : LEN_BASE[i + 1]); l++) t[l] = i;
  t[258] = 28;
  return t;
})();

function distCode(d: number): number {
  let i = 0;
  while (i < 29 && DIST_BASE[i + 1] <= d) i++;
  return i;
}

/** Writes literal/length symbol `sym` with the fixed code (RFC 1951 §3.2.6). */
function fixedLit(w: BitWriter, sym: number): void {
  if (sym < 144) w.code(0x30 + sym, 8);
  else if (sym < 256) w.code(0x190 + sym - 144, 9);
  else if (sym < 280) w.code(sym - 256, 7);
  else w.code(0xc0 + sym - 280, 8);
}

function deflateFixed(data: Uint8Array, w: BitWriter): void {
  w.bits(1, 1); // BFINAL: one block
  w.bits(1, 2); // BTYPE 01: fixed Huffman
  const head = new Int32Array(1 << HASH_BITS).fill(-1);
  const prev = new Int32Array(WINDOW);
  const hash = (i: number) => ((data[i] << 10) ^ (data[i + 1] << 5) ^ data[i + 2]) & ((1 << HASH_BITS) - 1);
  const insert = (i: number) => {
    if (i + MIN_MATCH > data.length) return;
    const h = hash(i);
    prev[i & (WINDOW - 1)] = head[h];
    head[h] = i;
  };
  let i = 0;
  while (i < data.length) {
    let bestLen = 0;
    let bestDist = 0;
    if (i + MIN_MATCH <= data.length) {
      let cand = head[hash(i)];
      const maxLen = Math.min(MAX_MATCH, data.length - i);
      for (let chain = 0; cand >= 0 && i - cand <= WINDOW - 1 && chain < MAX_CHAIN; chain++) {
        if (data[cand + bestLen] === data[i + bestLen]) {
          let l = 0;
          while (l < maxLen && data[cand + l] === data[i + l]) l++;
          if (l > bestLen) {
            bestLen = l;
            bestDist = i - cand;
            if (l === maxLen) break;
          }
        }
        const p = prev[cand & (WINDOW - 1)];
        if (p >= cand) break; // the slot was overwritten by a newer position
        cand = p;
      }
    }
    if (bestLen >= MIN_MATCH) {
      const lc = LEN_CODE[bestLen];
      fixedLit(w, 257 + lc);
      w.bits(bestLen - LEN_BASE[lc], LEN_EXTRA[lc]);
      const dc = distCode(bestDist);
      w.code(dc, 5);
      w.bits(bestDist - DIST_BASE[dc], DIST_EXTRA[dc]);
      for (let k = 0; k < bestLen; k++) insert(i + k);
      i += bestLen;
    } else {
      fixedLit(w, data[i]);
      insert(i);
      i++;
    }
  }
  fixedLit(w, 256);
}

function deflateStored(data: Uint8Array, w: BitWriter): void {
  let off = 0;
  do {
    const len = Math.min(0xffff, data.length - off);
    const last = off + len >= data.length;
    w.bits(last ? 1 : 0, 1);
    w.bits(0, 2);
    w.align();
    w.bytes(new Uint8Array([len & 0xff, len >>> 8, ~len & 0xff, (~len >>> 8) & 0xff]));
    w.bytes(data.subarray(off, off + len));
    off += len;
  } while (off < data.length);
}

/**
 * Compresses `data` as a raw DEFLATE stream.
 *
 * @param data The bytes to compress.
 * @param mode `"fixed"` (LZ77 + fixed Huffman, the default) or `"stored"` (no compression).
 * @returns The DEFLATE stream.
 *
 * @example Compress and measure
 * ```ts
 * import { deflateRaw } from "./deflate.ts";
 * console.log(deflateRaw(new Uint8Array(1000)).length < 100); // true
 * ```
 */
export function deflateRaw(data: Uint8Array, mode: DeflateMode = "fixed"): Uint8Array {
  const w = new BitWriter(mode === "stored" ? data.length + 5 * Math.ceil(data.length / 0xffff + 1) : data.length / 2);
  if (mode === "stored") deflateStored(data, w);
  else deflateFixed(data, w);
  return w.finish();
}

/**
 * Wraps `data` as one gzip member: a 10-byte header (MTIME 0, OS 255 "unknown", no optional fields), the DEFLATE
 * stream, then CRC-32 and ISIZE.
 *
 * @param data The bytes to compress.
 * @param mode See {@linkcode deflateRaw}.
 * @returns The gzip member.
 *
 * @example Round-trip through the inflater
 * ```ts
 * import { gzipMember } from "./deflate.ts";
 * import { gunzipMember } from "./inflate.ts";
 * const data = new TextEncoder().encode("hello hello hello");
 * console.log(gunzipMember(gzipMember(data)).data.length); // 17
 * ```
 */
export function gzipMember(data: Uint8Array, mode: DeflateMode = "fixed"): Uint8Array {
  const body = deflateRaw(data, mode);
  const out = new Uint8Array(10 + body.length + 8);
  out.set([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  out.set(body, 10);
  const view = new DataView(out.buffer);
  view.setUint32(10 + body.length, crc32(data), true);
  view.setUint32(14 + body.length, data.length % 0x1_0000_0000, true);
  return out;
}
