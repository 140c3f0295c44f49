/**
 * `readNeff`: a whole NEFF file — header, hash, payload (one gzip member or a plain ustar archive, then zero
 * padding), members, graphs from `kelf-0.json`, subgraph definitions and the input/output signature
 * (ARCHITECTURE §5, `../shared/fixtures/README.md`). Hash checking follows `NEURON_RT_VALIDATE_HASH`: the hash
 * is always computed and reported; `validateHash` makes a mismatch fatal.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { asArray, asObject, asString, invalid, type JsonObject, parseJsonMember } from "./_json.ts";
import { type NeffHashReport, verifyNeffHash } from "./hash.ts";
import { NEFF_HEADER_SIZE, type NeffHeader, readNeffHeader } from "./header.ts";
import { DEFAULT_MAX_DECOMPRESSED_BYTES, gunzipMember, gunzipMemberAsync, type GunzipResult } from "./gzip.ts";
import { type NeffSignature, type NeffTensor, readNeffSignature } from "./neff_signature.ts";
import { readSubgraphDef, type SubgraphDef } from "./subgraph_def.ts";
import { DEFAULT_MAX_MEMBERS, readTar } from "./tar.ts";

/** Options for {@linkcode readNeff}. */
export interface ReadNeffOptions {
  /** Fail with `NRT_INVALID` when the header hash does not match (`NEURON_RT_VALIDATE_HASH`). Default false. */
  validateHash?: boolean;
  /** Cap on the decompressed payload, and on the summed member sizes (default 20 MiB, `NRT_NEFF_MAX_BYTES`). */
  maxDecompressedBytes?: number;
  /** Cap on the number of archive members (default 10,000). */
  maxMembers?: number;
}

/** One graph listed in `kelf-0.json`. */
export interface NeffGraph {
  /** The graph name, e.g. `sg00`. */
  name: string;
  /** The member holding its definition, e.g. `sg00/def.json`. */
  definition: string;
  /** The parsed definition. */
  def: SubgraphDef;
}

/** A parsed NEFF. */
export interface NeffFile {
  /** The 1024-byte header. */
  header: NeffHeader;
  /** The hash report (always computed). */
  hash: NeffHashReport;
  /** How the payload is stored. */
  payload: "gzip" | "tar";
  /** Bytes of the payload the gzip member or tar archive occupies (the rest is padding). */
  payloadBytes: number;
  /** Archive members by path (views into the decompressed archive). */
  members: Map<string, Uint8Array>;
  /** `target` from `kelf-0.json`, e.g. `cayman`. */
  target: string;
  /** `version` from `kelf-0.json`, when given. */
  kelfVersion?: string;
  /** The graphs in `kelf-0.json` order. */
  graphs: NeffGraph[];
  /** Inputs from `neff.json`. */
  inputs: NeffTensor[];
  /** Outputs from `neff.json`. */
  outputs: NeffTensor[];
  /** The parsed `kelf-0.json`. */
  kelf: JsonObject;
}

/** Offset of the ustar magic within the first archive block. */
const USTAR_MAGIC_OFFSET = 257;

function isUstar(b: Uint8Array): boolean {
  const m = [0x75, 0x73, 0x74, 0x61, 0x72]; // "ustar"
  return b.length >= 512 && m.every((c, i) => b[USTAR_MAGIC_OFFSET + i] === c);
}

function readPadding(data: Uint8Array, from: number): void {
  for (let i = from; i < data.length; i++) {
    if (data[i] !== 0) throw invalid(`payload has a non-zero byte at offset ${i} in the padding after the archive`);
  }
}

function readGraphs(
  members: ReadonlyMap<string, Uint8Array>,
): { kelf: JsonObject; target: string; version?: string; graphs: NeffGraph[] } {
  const kelf = asObject(parseJsonMember(members, "kelf-0.json", "graph list"), "kelf-0.json");
  const target = asString(kelf.target, "kelf-0.json target");
  const list = asArray(kelf.graphs, "kelf-0.json graphs");
  if (list.length === 0) throw invalid("kelf-0.json lists no graphs");
  const names = new Set<string>();
  const graphs = list.map((g, i) => {
    const o = asObject(g, `kelf-0.json graphs[${i}]`);
    const name = asString(o.name, `kelf-0.json graphs[${i}] name`);
    const definition = asString(o.definition, `kelf-0.json graphs[${i}] definition`);
    if (names.has(name)) throw invalid(`kelf-0.json lists graph "${name}" twice`);
    names.add(name);
    return { name, definition, def: readSubgraphDef(members, name, definition) };
  });
  const out: { kelf: JsonObject; target: string; version?: string; graphs: NeffGraph[] } = { kelf, target, graphs };
  if (kelf.version !== undefined) out.version = asString(kelf.version, "kelf-0.json version");
  return out;
}

/**
 * Reads a NEFF file.
 *
 * @param bytes The whole file.
 * @param options Hash validation and the archive caps.
 * @returns The parsed NEFF.
 * @throws {NrtError} `NRT_INVALID` for anything malformed (or a hash mismatch under `validateHash`),
 * `NRT_UNSUPPORTED_NEFF_VERSION` for an unsupported NEFF version.
 *
 * @example Print a NEFF's signature
 * ```ts
 * import { readNeff } from "./neff_file.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const bytes = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * const neff = readNeff(bytes, { validateHash: true });
 * for (const t of neff.inputs) console.log(t.name, t.dtype, t.shape);
 * ```
 */
export function readNeff(bytes: Uint8Array, options: ReadNeffOptions = {}): NeffFile {
  const pre = readNeffPrelude(bytes, options);
  const member = pre.payload === "gzip" ? gunzipMember(pre.data, { maxOutputBytes: pre.cap }) : undefined;
  return readNeffArchive(pre, options, member);
}

/**
 * {@linkcode readNeff} with the gzip payload decoded in chunks that yield to the event loop (where the platform's
 * zlib streams do): what a server uses, so that reading a large or hostile NEFF does not stall its other requests.
 *
 * @param bytes The whole file.
 * @param options Hash validation and the archive caps.
 * @returns The parsed NEFF.
 * @throws {NrtError} As {@linkcode readNeff}.
 */
export async function readNeffAsync(bytes: Uint8Array, options: ReadNeffOptions = {}): Promise<NeffFile> {
  const pre = readNeffPrelude(bytes, options);
  const member = pre.payload === "gzip" ? await gunzipMemberAsync(pre.data, { maxOutputBytes: pre.cap }) : undefined;
  return readNeffArchive(pre, options, member);
}

interface Prelude {
  readonly header: NeffHeader;
  readonly hash: NeffHashReport;
  readonly cap: number;
  readonly data: Uint8Array;
  readonly payload: "gzip" | "tar";
}

/** Header, hash and payload kind: everything before the payload is decoded. */
function readNeffPrelude(bytes: Uint8Array, options: ReadNeffOptions): Prelude {
  const header = readNeffHeader(bytes);
  const hash = verifyNeffHash(bytes, header.pkgVersion);
  if (options.validateHash === true && !hash.valid) {
    const why = hash.algorithm === "md5"
      ? `hash mismatch (stored md5 ${hash.stored}, computed ${hash.computed})`
      : `hash cannot be validated (pkg_version ${header.pkgVersion} records no MD5)`;
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot load NEFF: ${why}`);
  }
  const cap = options.maxDecompressedBytes ?? DEFAULT_MAX_DECOMPRESSED_BYTES;
  const data = bytes.subarray(NEFF_HEADER_SIZE);
  if (data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b) return { header, hash, cap, data, payload: "gzip" };
  if (isUstar(data)) return { header, hash, cap, data, payload: "tar" };
  throw invalid("payload is neither a gzip member nor a ustar archive");
}

/** The archive (decoded gzip member, or the plain tar) → members, graphs and signature. */
function readNeffArchive(pre: Prelude, options: ReadNeffOptions, member: GunzipResult | undefined): NeffFile {
  const { header, hash, cap, data } = pre;
  let archive: Uint8Array;
  let payloadBytes: number;
  if (member !== undefined) {
    readPadding(data, member.consumed);
    archive = member.data;
    payloadBytes = member.consumed;
  } else {
    archive = data;
    payloadBytes = data.length;
  }
  const payload = pre.payload;
  const entries = readTar(archive, { maxMembers: options.maxMembers ?? DEFAULT_MAX_MEMBERS, maxTotalBytes: cap });
  const members = new Map<string, Uint8Array>();
  for (const e of entries) if (e.type === "file") members.set(e.name, e.data);
  const { kelf, target, version, graphs } = readGraphs(members);
  const sig: NeffSignature = readNeffSignature(members, graphs.map((g) => g.def));
  const out: NeffFile = {
    header,
    hash,
    payload,
    payloadBytes,
    members,
    target,
    graphs,
    inputs: sig.inputs,
    outputs: sig.outputs,
    kelf,
  };
  if (version !== undefined) out.kelfVersion = version;
  return out;
}
