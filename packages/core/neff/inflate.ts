/**
 * Decodes exactly one gzip member (RFC 1952: header with FEXTRA/FNAME/FCOMMENT/FHCRC, CRC-32 and ISIZE trailer)
 * holding a DEFLATE stream (RFC 1951: stored, fixed-Huffman and dynamic-Huffman blocks), and stops there.
 *
 * A real NEFF payload is one member followed by zero padding (ARCHITECTURE §5): the trailer checked is the
 * member's own, never the file's last eight bytes, and whatever follows the member is ignored. The output cap
 * is enforced while decoding, so a small input cannot make the decoder allocate past it.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { crc32 } from "./crc32.ts";

/** Default cap on decompressed bytes: 1 GiB. */
export const DEFAULT_MAX_DECOMPRESSED_BYTES: number = 1 << 30;

/** Options for {@linkcode gunzipMember}. */
export interface GunzipOptions {
  /** Largest accepted decompressed size in bytes (default 1 GiB). */
  maxOutputBytes?: number;
}

/** One decoded gzip member. */
export interface GunzipResult {
  /** The decompressed bytes. */
  data: Uint8Array;
  /** Input bytes the member occupies, header to trailer inclusive. */
  consumed: number;
  /** FNAME, when present. */
  fileName?: string;
  /** MTIME from the member header (seconds since the epoch; 0 when unset). */
  mtime: number;
}

function invalid(why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot read NEFF: ${why}`);
}

const LEN_BASE = new Uint16Array([3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]);
const LEN_EXTRA = new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]);
const DIST_BASE = new Uint16Array([1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]);
const DIST_EXTRA = new Uint8Array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]);
/** Order in which code-length code lengths are sent (RFC 1951 §3.2.7). */
const CLEN_ORDER = new Uint8Array([16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]);

/** A Huffman decoding table: entry `(symbol << 4) | length` indexed by the next `bits` input bits; 0 = no code. */
interface Table {
  entries: Uint32Array;
  bits: number;
}

/** Builds a full lookup table from code lengths (canonical codes, RFC 1951 §3.2.2). */
function buildTable(lengths: Uint8Array, what: string): Table {
  const count = new Uint16Array(16);
  let maxLen = 0;
  for (const l of lengths) {
    count[l]++;
    if (l > maxLen) maxLen = l;
  }
  count[0] = 0;
  let left = 1;
  for (let l = 1; l <= 15; l++) {
    left = (left << 1) - count[l];
    if (left < 0) throw invalid(`gzip payload has an over-subscribed ${what} Huffman code`);
  }
  const bits = Math.max(maxLen, 1);
  const entries = new Uint32Array(1 << bits);
  const next = new Uint16Array(16);
  let code = 0;
  for (let l = 1; l <= 15; l++) {
    code = (code + count[l - 1]) << 1;
    next[l] = code;
  }
  for (let sym = 0; sym < lengths.length; sym++) {
    const l = lengths[sym];
    if (l === 0) continue;
    const c = next[l]++;
    let rev = 0;
    for (let i = 0; i < l; i++) rev |= ((c >>> i) & 1) << (l - 1 - i);
    for (let i = rev; i < entries.length; i += 1 << l) entries[i] = (sym << 4) | l;
  }
  return { entries, bits };
}

const FIXED_LIT: Table = (() => {
  const l = new Uint8Array(288);
  l.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288);
  return buildTable(l, "literal/length");
})();
const FIXED_DIST: Table = buildTable(new Uint8Array(30).fill(5), "distance");

/**
 * Inflates a raw DEFLATE stream starting at `start`.
 *
 * @returns The output and the offset of the first byte after the final block.
 */
export function inflateRaw(input: Uint8Array, start: number, maxOutputBytes: number): { data: Uint8Array; end: number } {
  let pos = start;
  let bitBuf = 0;
  let bitCnt = 0;
  let out = new Uint8Array(Math.min(maxOutputBytes, Math.max(1 << 16, (input.length - start) * 4)));
  let outLen = 0;

  const need = (n: number): void => {
    while (bitCnt < n) {
      if (pos >= input.length) throw invalid("gzip payload is truncated inside the compressed data");
      bitBuf |= input[pos++] << bitCnt;
      bitCnt += 8;
    }
  };
  const bits = (n: number): number => {
    need(n);
    const v = bitBuf & ((1 << n) - 1);
    bitBuf >>>= n;
    bitCnt -= n;
    return v;
  };
  const decode = (t: Table): number => {
    // Fill up to t.bits, padding with zeros past the end; the code length found must not exceed the real bits.
    while (bitCnt < t.bits && pos < input.length) {
      bitBuf |= input[pos++] << bitCnt;
      bitCnt += 8;
    }
    const e = t.entries[bitBuf & ((1 << t.bits) - 1)];
    const len = e & 15;
    if (len === 0) throw invalid("gzip payload uses an undefined Huffman code");
    if (len > bitCnt) throw invalid("gzip payload is truncated inside the compressed data");
    bitBuf >>>= len;
    bitCnt -= len;
    return e >>> 4;
  };
  const ensure = (extra: number): void => {
    const want = outLen + extra;
    if (want > maxOutputBytes) throw invalid(`gzip payload decompresses to more than the ${maxOutputBytes}-byte cap`);
    if (want <= out.length) return;
    let size = out.length * 2;
    while (size < want) size *= 2;
    const grown = new Uint8Array(Math.min(size, maxOutputBytes));
    grown.set(out.subarray(0, outLen));
    out = grown;
  };

  let final = 0;
  while (!final) {
    final = bits(1);
    const type = bits(2);
    if (type === 0) {
      // Drop to the byte boundary: give back the whole bytes still buffered, discard the partial one.
      pos -= bitCnt >>> 3;
      bitBuf = 0;
      bitCnt = 0;
      if (pos + 4 > input.length) throw invalid("gzip payload is truncated inside a stored block header");
      const len = input[pos] | (input[pos + 1] << 8);
      const nlen = input[pos + 2] | (input[pos + 3] << 8);
      if ((len ^ 0xffff) !== nlen) throw invalid("gzip payload has a stored block whose LEN and NLEN disagree");
      pos += 4;
      if (pos + len > input.length) throw invalid("gzip payload is truncated inside a stored block");
      ensure(len);
      out.set(input.subarray(pos, pos + len), outLen);
      outLen += len;
      pos += len;
      continue;
    }
    let lit: Table;
    let dist: Table;
    if (type === 1) {
      lit = FIXED_LIT;
      dist = FIXED_DIST;
    } else if (type === 2) {
      const hlit = bits(5) + 257;
      const hdist = bits(5) + 1;
      const hclen = bits(4) + 4;
      if (hlit > 286 || hdist > 30) throw invalid("gzip payload has a dynamic block with too many codes");
      const clens = new Uint8Array(19);
      for (let i = 0; i < hclen; i++) clens[CLEN_ORDER[i]] = bits(3);
      const clTable = buildTable(clens, "code-length");
      const lens = new Uint8Array(hlit + hdist);
      for (let i = 0; i < lens.length;) {
        const sym = decode(clTable);
        if (sym < 16) {
          lens[i++] = sym;
          continue;
        }
        let rep: number;
        let val = 0;
        if (sym === 16) {
          if (i === 0) throw invalid("gzip payload repeats a code length before the first one");
          val = lens[i - 1];
          rep = 3 + bits(2);
        } else if (sym === 17) rep = 3 + bits(3);
        else rep = 11 + bits(7);
        if (i + rep > lens.length) throw invalid("gzip payload has code lengths that overrun the table");
        lens.fill(val, i, i + rep);
        i += rep;
      }
      if (lens[256] === 0) throw invalid("gzip payload has a dynamic block without an end-of-block code");
      lit = buildTable(lens.subarray(0, hlit), "literal/length");
      dist = buildTable(lens.subarray(hlit), "distance");
    } else {
      throw invalid("gzip payload uses the reserved block type 3");
    }
    for (;;) {
      const sym = decode(lit);
      if (sym < 256) {
        if (outLen >= out.length) ensure(1);
        out[outLen++] = sym;
        continue;
      }
      if (sym === 256) break;
      const li = sym - 257;
      if (li >= 29) throw invalid("gzip payload uses an invalid length code");
      const len = LEN_BASE[li] + bits(LEN_EXTRA[li]);
      const di = decode(dist);
      if (di >= 30) throw invalid("gzip payload uses an invalid distance code");
      const d = DIST_BASE[di] + bits(DIST_EXTRA[di]);
      if (d > outLen) throw invalid("gzip payload refers back before the start of the data");
      ensure(len);
      for (let k = 0; k < len; k++, outLen++) out[outLen] = out[outLen - d];
    }
  }
  // Unused whole bytes still in the bit buffer belong to what follows (the trailer).
  pos -= bitCnt >>> 3;
  return { data: out.subarray(0, outLen), end: pos };
}

/**
 * Decodes the one gzip member at the start of `input`, checks its CRC-32 and ISIZE, and ignores what follows.
 *
 * @param input Bytes starting with a gzip member (anything after the member is not read).
 * @param options The decompressed-size cap.
 * @returns The data and the bytes the member occupies.
 * @throws {NrtError} `NRT_INVALID` for a malformed member or one that exceeds the cap.
 *
 * @example Decode a member followed by padding
 * ```ts
 * import { gunzipMember } from "./inflate.ts";
 * import { gzipMember } from "./deflate.ts";
 * const payload = new Uint8Array([...gzipMember(new TextEncoder().encode("hello")), 0, 0, 0, 0]); // one member, then padding
 * const { data, consumed } = gunzipMember(payload, { maxOutputBytes: 64 << 20 });
 * console.log(data.length, consumed);
 * ```
 */
export function gunzipMember(input: Uint8Array, options: GunzipOptions = {}): GunzipResult {
  const cap = options.maxOutputBytes ?? DEFAULT_MAX_DECOMPRESSED_BYTES;
  if (!Number.isSafeInteger(cap) || cap < 0) throw new RangeError(`maxOutputBytes must be a non-negative integer, got ${cap}`);
  if (input.length < 18) throw invalid(`gzip payload is ${input.length} bytes, shorter than a gzip member`);
  if (input[0] !== 0x1f || input[1] !== 0x8b) throw invalid("payload does not start with the gzip magic 1f 8b");
  if (input[2] !== 8) throw invalid(`gzip payload uses compression method ${input[2]}, expected 8 (deflate)`);
  const flg = input[3];
  if (flg & 0xe0) throw invalid("gzip payload sets reserved header flags");
  const mtime = (input[4] | (input[5] << 8) | (input[6] << 16) | (input[7] << 24)) >>> 0;
  let pos = 10;
  if (flg & 4) { // FEXTRA
    if (pos + 2 > input.length) throw invalid("gzip payload is truncated inside the header");
    pos += 2 + (input[pos] | (input[pos + 1] << 8));
  }
  const zeroTerminated = (what: string): string => {
    const end = input.indexOf(0, pos);
    if (end < 0) throw invalid(`gzip payload has an unterminated ${what}`);
    const s = String.fromCharCode(...input.subarray(pos, Math.min(end, pos + 1024)));
    pos = end + 1;
    return s;
  };
  const fileName = flg & 8 ? zeroTerminated("file name") : undefined;
  if (flg & 16) zeroTerminated("comment");
  if (flg & 2) { // FHCRC: the low 16 bits of the CRC-32 of the header bytes before it
    if (pos + 2 > input.length) throw invalid("gzip payload is truncated inside the header");
    const want = input[pos] | (input[pos + 1] << 8);
    if ((crc32(input.subarray(0, pos)) & 0xffff) !== want) throw invalid("gzip payload has a bad header CRC");
    pos += 2;
  }
  if (pos >= input.length) throw invalid("gzip payload is truncated inside the header");
  const { data, end } = inflateRaw(input, pos, cap);
  if (end + 8 > input.length) throw invalid("gzip payload is truncated before the member trailer");
  const view = new DataView(input.buffer, input.byteOffset + end, 8);
  const crc = view.getUint32(0, true);
  const isize = view.getUint32(4, true);
  const actual = crc32(data);
  if (crc !== actual) {
    throw invalid(`gzip member CRC-32 is ${crc.toString(16).padStart(8, "0")}, computed ${actual.toString(16).padStart(8, "0")}`);
  }
  if (isize !== data.length % 0x1_0000_0000) throw invalid(`gzip member ISIZE is ${isize}, decoded ${data.length} bytes`);
  return fileName === undefined ? { data, consumed: end + 8, mtime } : { data, consumed: end + 8, mtime, fileName };
}
