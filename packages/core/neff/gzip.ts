/**
 * One gzip member (RFC 1952), decoded and written with the platform's zlib (`node:zlib`, which Bun and Deno both
 * provide): the member header is parsed here (FEXTRA/FNAME/FCOMMENT/FHCRC), the DEFLATE stream is inflated
 * natively, and the member's own CRC-32 and ISIZE trailer are checked. A real NEFF payload is one member followed
 * by zero padding (ARCHITECTURE §5): whatever follows the member is ignored, never decoded as another member, and
 * the file's last eight bytes are never taken for the trailer.
 *
 * The output cap is enforced by zlib while decoding (`maxOutputLength`), so a small hostile input cannot make the
 * decoder allocate past it. {@linkcode gunzipMemberAsync} decodes in chunks and yields to the event loop between
 * them, so a server stays responsive while it reads a large or hostile NEFF.
 *
 * Ours: the seeds say only that a NEFF is a gzipped tar read with libarchive (lifecycle-error-model §2.3).
 *
 * @module
 */
import zlib from "node:zlib";
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

/**
 * Default cap on a NEFF's decompressed payload: 20 MiB, about twice the largest real payload we know (the
 * 9,285,120-byte archive of `matmul_large.neff`). Raise it per runtime with `NRT_NEFF_MAX_BYTES`.
 */
export const DEFAULT_MAX_DECOMPRESSED_BYTES: number = 20 * 1024 * 1024;

/** Options for {@linkcode gunzipMember}. */
export interface GunzipOptions {
  /** Largest accepted decompressed size in bytes (default {@linkcode DEFAULT_MAX_DECOMPRESSED_BYTES}). */
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

interface MemberHeader {
  /** Offset of the DEFLATE stream. */
  readonly start: number;
  readonly mtime: number;
  readonly fileName?: string;
}

/** Parses the member header at the start of `input`. */
function readHeader(input: Uint8Array): MemberHeader {
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
    if ((zlib.crc32(input.subarray(0, pos)) & 0xffff) !== want) throw invalid("gzip payload has a bad header CRC");
    pos += 2;
  }
  if (pos >= input.length) throw invalid("gzip payload is truncated inside the header");
  return fileName === undefined ? { start: pos, mtime } : { start: pos, mtime, fileName };
}

/** Checks the trailer after a DEFLATE stream of `deflated` bytes and builds the result. */
function finish(input: Uint8Array, h: MemberHeader, deflated: number, data: Uint8Array): GunzipResult {
  const end = h.start + deflated;
  if (end + 8 > input.length) throw invalid("gzip payload is truncated before the member trailer");
  const view = new DataView(input.buffer, input.byteOffset + end, 8);
  const crc = view.getUint32(0, true);
  const isize = view.getUint32(4, true);
  const actual = zlib.crc32(data) >>> 0;
  if (crc !== actual) {
    throw invalid(`gzip member CRC-32 is ${hex8(crc)}, computed ${hex8(actual)}`);
  }
  if (isize !== data.length % 0x1_0000_0000) {
    throw invalid(`gzip member ISIZE is ${isize}, decoded ${data.length} bytes`);
  }
  const out: GunzipResult = { data, consumed: end + 8, mtime: h.mtime };
  if (h.fileName !== undefined) out.fileName = h.fileName;
  return out;
}

const hex8 = (n: number): string => n.toString(16).padStart(8, "0");

function checkCap(cap: number): number {
  if (!Number.isSafeInteger(cap) || cap < 0) {
    throw new RangeError(`maxOutputBytes must be a non-negative integer, got ${cap}`);
  }
  return cap;
}

function overCap(cap: number): NrtError {
  return invalid(`gzip payload decompresses to more than the ${cap}-byte cap (raise it with NRT_NEFF_MAX_BYTES)`);
}

/** Maps a zlib failure (corrupt stream, truncation, cap) to `NRT_INVALID`. */
function zlibFailure(e: unknown, cap: number): NrtError {
  const code = (e as { code?: string }).code;
  if (code === "ERR_BUFFER_TOO_LARGE") return overCap(cap);
  const message = e instanceof Error ? e.message : String(e);
  if (code === "Z_BUF_ERROR" || /unexpected end/i.test(message)) {
    return invalid("gzip payload is truncated inside the DEFLATE stream");
  }
  return new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot read NEFF: gzip payload is not a valid DEFLATE stream (${message})`,
    { cause: e },
  );
}

/**
 * Decodes the one gzip member at the start of `input`, checks its CRC-32 and ISIZE, and ignores what follows.
 *
 * @param input Bytes starting with a gzip member (anything after the member is not decoded).
 * @param options The decompressed-size cap.
 * @returns The data and the bytes the member occupies.
 * @throws {NrtError} `NRT_INVALID` for a malformed member or one that exceeds the cap.
 *
 * @example Decode a member followed by padding
 * ```ts
 * import { gunzipMember, gzipMember } from "./gzip.ts";
 * const payload = new Uint8Array([...gzipMember(new TextEncoder().encode("hello")), 0, 0, 0, 0]);
 * const { data, consumed } = gunzipMember(payload, { maxOutputBytes: 64 << 20 });
 * console.log(data.length, consumed === payload.length - 4); // 5 true
 * ```
 */
export function gunzipMember(input: Uint8Array, options: GunzipOptions = {}): GunzipResult {
  const cap = checkCap(options.maxOutputBytes ?? DEFAULT_MAX_DECOMPRESSED_BYTES);
  const h = readHeader(input);
  let r: { buffer: Uint8Array; engine: { bytesWritten: number } };
  try {
    // `info` reports how much input the DEFLATE stream took: the trailer follows it.
    r = zlib.inflateRawSync(input.subarray(h.start), {
      info: true,
      maxOutputLength: Math.max(1, cap),
      chunkSize: 1 << 20,
    }) as unknown as typeof r;
  } catch (e) {
    throw zlibFailure(e, cap);
  }
  if (r.buffer.length > cap) throw overCap(cap);
  return finish(input, h, r.engine.bytesWritten, new Uint8Array(r.buffer.buffer, r.buffer.byteOffset, r.buffer.length));
}

/**
 * {@linkcode gunzipMember} decoded in chunks that yield to the event loop between them (where the platform's zlib
 * streams do; Deno's decode synchronously), for servers that read NEFFs while answering requests.
 *
 * @param input Bytes starting with a gzip member.
 * @param options The decompressed-size cap.
 * @returns The data and the bytes the member occupies.
 * @throws {NrtError} `NRT_INVALID` for a malformed member or one that exceeds the cap.
 *
 * @example Decode without blocking the event loop
 * ```ts
 * import { gunzipMemberAsync, gzipMember } from "./gzip.ts";
 * const r = await gunzipMemberAsync(gzipMember(new Uint8Array(1000)));
 * console.log(r.data.length); // 1000
 * ```
 */
export async function gunzipMemberAsync(input: Uint8Array, options: GunzipOptions = {}): Promise<GunzipResult> {
  const cap = checkCap(options.maxOutputBytes ?? DEFAULT_MAX_DECOMPRESSED_BYTES);
  const h = readHeader(input);
  const inflater = zlib.createInflateRaw();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const deflated = await new Promise<number>((resolve, reject) => {
    inflater.on("data", (c: Uint8Array) => {
      total += c.length;
      if (total > cap) {
        inflater.destroy();
        reject(overCap(cap));
      } else {
        chunks.push(c);
      }
    });
    inflater.on("error", (e: unknown) => reject(zlibFailure(e, cap)));
    inflater.on("end", () => resolve(inflater.bytesWritten));
    inflater.end(input.subarray(h.start));
  });
  const data = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    data.set(c, at);
    at += c.length;
  }
  return finish(input, h, deflated, data);
}

/** How {@linkcode gzipMember} compresses: zlib's default level, or stored blocks (level 0). */
export type GzipMode = "deflate" | "stored";

/**
 * Writes `data` as one gzip member (10-byte header without flags, MTIME 0, OS 255 "unknown") with the platform's
 * zlib. Deterministic for a given zlib and input.
 *
 * @param data The bytes to compress.
 * @param mode `"deflate"` (default) or `"stored"`.
 * @returns The member.
 *
 * @example Round trip
 * ```ts
 * import { gunzipMember, gzipMember } from "./gzip.ts";
 * const text = new TextEncoder().encode("neuron core ".repeat(100));
 * console.log(gunzipMember(gzipMember(text)).data.length); // 1200
 * ```
 */
export function gzipMember(data: Uint8Array, mode: GzipMode = "deflate"): Uint8Array {
  const body = zlib.deflateRawSync(data, { level: mode === "stored" ? 0 : 6 });
  const out = new Uint8Array(10 + body.length + 8);
  out.set([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  out.set(body, 10);
  const v = new DataView(out.buffer, 10 + body.length, 8);
  v.setUint32(0, zlib.crc32(data) >>> 0, true);
  v.setUint32(4, data.length % 0x1_0000_0000, true);
  return out;
}
