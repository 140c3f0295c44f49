/**
 * The 1024-byte NEFF header: reading with validation, and writing.
 *
 * Layout (little-endian, no magic number), read off the real NEFFs in `../shared/fixtures/README.md` and
 * ARCHITECTURE §5: `u64 pkg_version @0x000`, `u64 header_size @0x008` (1024), `u64 data_size @0x010`,
 * `u64 neff_version_major @0x018`, `u64 neff_version_minor @0x020`, `u8 build_version[128] @0x028`,
 * `u32 num_tpb @0x0A8`, `u8 hash[32] @0x0AC`, `u8 uuid[16] @0x0CC`, `char name[256] @0x0DC`,
 * `u32 requested_tpb_count @0x1DC`, `u8 tpb_per_node[64] @0x1E0`, `u64 feature_bits @0x220`,
 * `u32 lnc_size @0x228`, zero padding to 0x400.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

/** Size of the header in bytes; also the only accepted `header_size`. */
export const NEFF_HEADER_SIZE = 1024;

/** The NEFF major versions this runtime reads (the real fixtures are 2.0). */
export const SUPPORTED_NEFF_VERSION_MAJORS: readonly number[] = [1, 2];

/** Byte offsets of the header fields. */
export const NeffHeaderOffset = {
  PKG_VERSION: 0x000,
  HEADER_SIZE: 0x008,
  DATA_SIZE: 0x010,
  NEFF_VERSION_MAJOR: 0x018,
  NEFF_VERSION_MINOR: 0x020,
  BUILD_VERSION: 0x028,
  NUM_TPB: 0x0a8,
  HASH: 0x0ac,
  UUID: 0x0cc,
  NAME: 0x0dc,
  REQUESTED_TPB_COUNT: 0x1dc,
  TPB_PER_NODE: 0x1e0,
  FEATURE_BITS: 0x220,
  LNC_SIZE: 0x228,
} as const;

const BUILD_VERSION_LEN = 128;
const HASH_LEN = 32;
const UUID_LEN = 16;
const NAME_LEN = 256;
const TPB_PER_NODE_LEN = 64;

/** The decoded header. u64 fields are numbers (values above 2^53 − 1 are rejected) except `featureBits`. */
export interface NeffHeader {
  /** `pkg_version`; 2 selects the MD5 hash. */
  pkgVersion: number;
  /** `header_size`, always 1024. */
  headerSize: number;
  /** `data_size`: bytes after the header, padding included. */
  dataSize: number;
  /** `neff_version_major`. */
  neffVersionMajor: number;
  /** `neff_version_minor`. */
  neffVersionMinor: number;
  /** `build_version`, up to the first NUL. */
  buildVersion: string;
  /** `num_tpb`. */
  numTpb: number;
  /** The raw 32-byte `hash` field. */
  hash: Uint8Array;
  /** The 16-byte `uuid`. */
  uuid: Uint8Array;
  /** `name`, up to the first NUL. */
  name: string;
  /** `requested_tpb_count`. */
  requestedTpbCount: number;
  /** The 64-byte `tpb_per_node` table. */
  tpbPerNode: Uint8Array;
  /** `feature_bits`. */
  featureBits: bigint;
  /** `lnc_size` (logical NeuronCore size). */
  lncSize: number;
}

function invalid(why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot read NEFF: ${why}`);
}

function readU64(view: DataView, offset: number, field: string): number {
  const v = view.getBigUint64(offset, true);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw invalid(`${field} is ${v}, above 2^53 - 1`);
  return Number(v);
}

function readCString(bytes: Uint8Array): string {
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end < 0 ? bytes : bytes.subarray(0, end));
}

/** Options of {@linkcode readNeffHeader}. */
export interface ReadNeffHeaderOptions {
  /**
   * Whether an unsupported NEFF major version is refused here (default `true`). `nrt_load` reads the header with
   * `false`: its version gate runs in `neff_parse`, after the logical core is reserved (seed: lifecycle-error-model
   * §2.3, §2.7).
   */
  readonly checkVersion?: boolean;
}

/**
 * Reads and validates the header of a whole NEFF file: the file holds at least 1024 bytes, `header_size` is
 * 1024, the NEFF major version is supported, and `data_size` equals the bytes after the header.
 *
 * @param file The whole NEFF file.
 * @param options `checkVersion: false` leaves the version gate to the parse, as `nrt_load` does.
 * @returns The decoded header.
 * @throws {NrtError} `NRT_INVALID` for a malformed header, `NRT_UNSUPPORTED_NEFF_VERSION` for an unsupported version.
 *
 * @example Read the header of a NEFF
 * ```ts
 * import { readNeffHeader } from "./header.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const file = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * const h = readNeffHeader(file);
 * console.log(h.name, h.neffVersionMajor, h.dataSize);
 * ```
 */
export function readNeffHeader(file: Uint8Array, options: ReadNeffHeaderOptions = {}): NeffHeader {
  if (file.length < NEFF_HEADER_SIZE) {
    throw invalid(`file is ${file.length} bytes, shorter than the ${NEFF_HEADER_SIZE}-byte header`);
  }
  const view = new DataView(file.buffer, file.byteOffset, NEFF_HEADER_SIZE);
  const o = NeffHeaderOffset;
  const headerSize = readU64(view, o.HEADER_SIZE, "header_size");
  if (headerSize !== NEFF_HEADER_SIZE) throw invalid(`header_size is ${headerSize}, expected ${NEFF_HEADER_SIZE}`);
  const major = readU64(view, o.NEFF_VERSION_MAJOR, "neff_version_major");
  const minor = readU64(view, o.NEFF_VERSION_MINOR, "neff_version_minor");
  if (options.checkVersion !== false && !SUPPORTED_NEFF_VERSION_MAJORS.includes(major)) {
    const lo = Math.min(...SUPPORTED_NEFF_VERSION_MAJORS);
    const hi = Math.max(...SUPPORTED_NEFF_VERSION_MAJORS);
    throw new NrtError(
      NrtStatus.NRT_UNSUPPORTED_NEFF_VERSION,
      `Cannot read NEFF: version ${major}.${minor} is not supported, expected major version ${lo} to ${hi}`,
    );
  }
  const dataSize = readU64(view, o.DATA_SIZE, "data_size");
  const actual = file.length - NEFF_HEADER_SIZE;
  if (dataSize > actual) {
    throw invalid(`file is truncated: data_size is ${dataSize} but ${actual} bytes follow the header`);
  }
  if (dataSize < actual) {
    throw invalid(`file is oversized: data_size is ${dataSize} but ${actual} bytes follow the header`);
  }
  return {
    pkgVersion: readU64(view, o.PKG_VERSION, "pkg_version"),
    headerSize,
    dataSize,
    neffVersionMajor: major,
    neffVersionMinor: minor,
    buildVersion: readCString(file.subarray(o.BUILD_VERSION, o.BUILD_VERSION + BUILD_VERSION_LEN)),
    numTpb: view.getUint32(o.NUM_TPB, true),
    hash: file.slice(o.HASH, o.HASH + HASH_LEN),
    uuid: file.slice(o.UUID, o.UUID + UUID_LEN),
    name: readCString(file.subarray(o.NAME, o.NAME + NAME_LEN)),
    requestedTpbCount: view.getUint32(o.REQUESTED_TPB_COUNT, true),
    tpbPerNode: file.slice(o.TPB_PER_NODE, o.TPB_PER_NODE + TPB_PER_NODE_LEN),
    featureBits: view.getBigUint64(o.FEATURE_BITS, true),
    lncSize: view.getUint32(o.LNC_SIZE, true),
  };
}

/** The fields {@linkcode writeNeffHeader} writes; `headerSize` is always 1024. */
export type NeffHeaderInit = Omit<NeffHeader, "headerSize">;

function checkUint(value: number, max: number, field: string): void {
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new RangeError(`Cannot write NEFF header: ${field} is ${value}, expected an integer in [0, ${max}]`);
  }
}

function putBytes(out: Uint8Array, offset: number, bytes: Uint8Array, len: number, field: string): void {
  if (bytes.length > len) {
    throw new RangeError(`Cannot write NEFF header: ${field} is ${bytes.length} bytes, at most ${len}`);
  }
  out.set(bytes, offset);
}

/**
 * Writes a 1024-byte header. Strings are UTF-8 and must leave room for a terminating NUL.
 *
 * @param h The header fields.
 * @returns 1024 bytes.
 * @throws {RangeError} When a field does not fit.
 *
 * @example Write and read back a header
 * ```ts
 * import { writeNeffHeader } from "./header.ts";
 * const bytes = writeNeffHeader({
 *   pkgVersion: 2, dataSize: 0, neffVersionMajor: 2, neffVersionMinor: 0, buildVersion: "", numTpb: 1,
 *   hash: new Uint8Array(32), uuid: new Uint8Array(16), name: "a.neff", requestedTpbCount: 1,
 *   tpbPerNode: new Uint8Array(64), featureBits: 0n, lncSize: 1,
 * });
 * console.log(bytes.length); // 1024
 * ```
 */
export function writeNeffHeader(h: NeffHeaderInit): Uint8Array {
  const out = new Uint8Array(NEFF_HEADER_SIZE);
  const view = new DataView(out.buffer);
  const o = NeffHeaderOffset;
  const u64 = (offset: number, v: number, field: string) => {
    checkUint(v, Number.MAX_SAFE_INTEGER, field);
    view.setBigUint64(offset, BigInt(v), true);
  };
  const u32 = (offset: number, v: number, field: string) => {
    checkUint(v, 0xffffffff, field);
    view.setUint32(offset, v, true);
  };
  u64(o.PKG_VERSION, h.pkgVersion, "pkg_version");
  u64(o.HEADER_SIZE, NEFF_HEADER_SIZE, "header_size");
  u64(o.DATA_SIZE, h.dataSize, "data_size");
  u64(o.NEFF_VERSION_MAJOR, h.neffVersionMajor, "neff_version_major");
  u64(o.NEFF_VERSION_MINOR, h.neffVersionMinor, "neff_version_minor");
  const enc = new TextEncoder();
  putBytes(out, o.BUILD_VERSION, enc.encode(h.buildVersion), BUILD_VERSION_LEN - 1, "build_version");
  u32(o.NUM_TPB, h.numTpb, "num_tpb");
  putBytes(out, o.HASH, h.hash, HASH_LEN, "hash");
  if (h.uuid.length !== UUID_LEN) {
    throw new RangeError(`Cannot write NEFF header: uuid is ${h.uuid.length} bytes, expected 16`);
  }
  out.set(h.uuid, o.UUID);
  putBytes(out, o.NAME, enc.encode(h.name), NAME_LEN - 1, "name");
  u32(o.REQUESTED_TPB_COUNT, h.requestedTpbCount, "requested_tpb_count");
  putBytes(out, o.TPB_PER_NODE, h.tpbPerNode, TPB_PER_NODE_LEN, "tpb_per_node");
  if (h.featureBits < 0n || h.featureBits > 0xffffffffffffffffn) {
    throw new RangeError(`Cannot write NEFF header: feature_bits ${h.featureBits} does not fit in a u64`);
  }
  view.setBigUint64(o.FEATURE_BITS, h.featureBits, true);
  u32(o.LNC_SIZE, h.lncSize, "lnc_size");
  return out;
}
