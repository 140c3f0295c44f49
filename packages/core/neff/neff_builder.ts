/**
 * `buildNeff`: writes the NEFF layout the real files use (ARCHITECTURE §5, `../shared/fixtures/README.md`) — the
 * 1024-byte header, then one gzip member holding a ustar archive (or the plain archive), zero-padded to a
 * multiple of 10,240 bytes, with `data_size` covering the padding and, for `pkg_version` 2, the MD5 hash field.
 *
 * The builder is format-level: the caller supplies every member (`kelf-0.json`, `neff.json`, `sgNN/def.json`, …).
 *
 * @module
 */
import { md5 } from "./hash.ts";
import { gzipMember } from "./gzip.ts";
import { NEFF_PKG_VERSION_MD5, neffHashField } from "./hash.ts";
import { NEFF_HEADER_SIZE, writeNeffHeader } from "./header.ts";
import { writeTar } from "./tar.ts";

/** The payload is zero-padded to a multiple of this (a tar record of 20 blocks, as the real NEFFs are). */
export const NEFF_PAYLOAD_ALIGNMENT = 10240;

/** Options for {@linkcode buildNeff}. */
export interface BuildNeffOptions {
  /** The header `name` (at most 255 UTF-8 bytes). */
  name: string;
  /** Member path → contents; written sorted by path. */
  members: ReadonlyMap<string, Uint8Array> | Record<string, Uint8Array>;
  /** `true`: one gzip member (zlib's default level); `"stored"`: gzip without compression; `false`: a plain tar. Default true. */
  compress?: boolean | "stored";
  /** `pkg_version` (default 2, which records the MD5 hash; other values leave the hash field zero). */
  pkgVersion?: number;
  /** `neff_version_major` (default 2). */
  neffVersionMajor?: number;
  /** `neff_version_minor` (default 0). */
  neffVersionMinor?: number;
  /** `build_version` (default empty). */
  buildVersion?: string;
  /** `num_tpb` (default 1). */
  numTpb?: number;
  /** `requested_tpb_count` (default 1). */
  requestedTpbCount?: number;
  /** `tpb_per_node`, up to 64 bytes (default `[1, 0, …]`, as the real NEFFs have). */
  tpbPerNode?: Uint8Array;
  /** `lnc_size` (default 1). */
  lncSize?: number;
  /** `uuid`, 16 bytes (default: derived from the payload's MD5 in the RFC 4122 version-3 layout, so output is deterministic). */
  uuid?: Uint8Array;
  /** `feature_bits` (default 0). */
  featureBits?: bigint;
  /** The mtime recorded for every tar member (default 0). */
  mtime?: number;
}

/**
 * Builds a NEFF file.
 *
 * @param options The members and the header fields.
 * @returns The file bytes.
 * @throws {RangeError} For a member path or header field the format cannot hold.
 *
 * @example Build and read back
 * ```ts
 * import { buildNeff } from "./neff_builder.ts";
 * import { readNeffHeader } from "./header.ts";
 * const bytes = buildNeff({ name: "tiny.neff", members: { "info.json": new TextEncoder().encode("{}") } });
 * console.log(readNeffHeader(bytes).dataSize % 10240); // 0
 * ```
 */
export function buildNeff(options: BuildNeffOptions): Uint8Array {
  const tar = writeTar(options.members, { mtime: options.mtime ?? 0 });
  const compress = options.compress ?? true;
  const body = compress === false ? tar : gzipMember(tar, compress === "stored" ? "stored" : "deflate");
  const dataSize = Math.max(1, Math.ceil(body.length / NEFF_PAYLOAD_ALIGNMENT)) * NEFF_PAYLOAD_ALIGNMENT;
  const file = new Uint8Array(NEFF_HEADER_SIZE + dataSize);
  file.set(body, NEFF_HEADER_SIZE);
  const payload = file.subarray(NEFF_HEADER_SIZE);
  const pkgVersion = options.pkgVersion ?? NEFF_PKG_VERSION_MD5;
  let uuid = options.uuid;
  if (uuid === undefined) {
    uuid = md5(payload);
    uuid[6] = (uuid[6] & 0x0f) | 0x30; // version 3 (name-based, MD5)
    uuid[8] = (uuid[8] & 0x3f) | 0x80; // RFC 4122 variant
  }
  const tpbPerNode = options.tpbPerNode ?? new Uint8Array(64);
  if (options.tpbPerNode === undefined) tpbPerNode[0] = 1;
  file.set(
    writeNeffHeader({
      pkgVersion,
      dataSize,
      neffVersionMajor: options.neffVersionMajor ?? 2,
      neffVersionMinor: options.neffVersionMinor ?? 0,
      buildVersion: options.buildVersion ?? "",
      numTpb: options.numTpb ?? 1,
      hash: pkgVersion === NEFF_PKG_VERSION_MD5 ? neffHashField(payload) : new Uint8Array(32),
      uuid,
      name: options.name,
      requestedTpbCount: options.requestedTpbCount ?? 1,
      tpbPerNode,
      featureBits: options.featureBits ?? 0n,
      lncSize: options.lncSize ?? 1,
    }),
    0,
  );
  return file;
}
