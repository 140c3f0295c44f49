/**
 * The NEFF header hash. For `pkg_version` 2 it is the MD5 of every byte after the header (padding included),
 * stored as the digest's four 32-bit words each byte-reversed, then 16 zero bytes (ARCHITECTURE §5,
 * `../shared/fixtures/README.md`).
 *
 * @module
 */
import { createHash } from "node:crypto";
import { NEFF_HEADER_SIZE, NeffHeaderOffset } from "./header.ts";

/**
 * The MD5 digest of `bytes`, by the platform's `node:crypto` (Bun and Deno): on the 1.5 MB fixture NEFF it is the
 * difference between `readNeff` at 2.6× and at 1.3× a bare gunzip (bench/neff.ts); a JavaScript MD5 took 45% of it.
 */
export function md5(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("md5").update(bytes).digest());
}

/** The `pkg_version` whose hash field holds an MD5. */
export const NEFF_PKG_VERSION_MD5 = 2;

/** What the hash field says and whether it matches. */
export interface NeffHashReport {
  /** `"md5"` for pkg_version 2; `"none"` when another pkg_version leaves the field zero; `"unknown"` otherwise. */
  algorithm: "md5" | "none" | "unknown";
  /** For `"md5"`, the recorded digest in the usual MD5 byte order (comparable to `computed`); else the raw field. */
  stored: string;
  /** The MD5 of the bytes after the header (`""` when `algorithm` is not `"md5"`). */
  computed: string;
  /** Whether the recorded digest matches (false when there is nothing to verify). */
  valid: boolean;
}

/** Lowercase hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Reverses the bytes within each 32-bit word: the header stores the MD5 digest this way. */
function swapWords(digest: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  for (let w = 0; w < 16; w += 4) {
    out[w] = digest[w + 3];
    out[w + 1] = digest[w + 2];
    out[w + 2] = digest[w + 1];
    out[w + 3] = digest[w];
  }
  return out;
}

/**
 * The 32-byte hash field for a payload under `pkg_version` 2: the MD5 digest with each 32-bit word
 * byte-reversed, then 16 zero bytes.
 *
 * @param payload Every byte after the header, padding included.
 * @returns The 32-byte field.
 *
 * @example Compute the field for a payload
 * ```ts
 * import { neffHashField } from "./hash.ts";
 * console.log(neffHashField(new Uint8Array(10240)).length); // 32
 * ```
 */
export function neffHashField(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(32);
  out.set(swapWords(md5(payload)), 0);
  return out;
}

/**
 * Checks the hash field of a whole NEFF file against its payload.
 *
 * @param file The whole NEFF file (at least 1024 bytes; the header is not validated here).
 * @param pkgVersion The header's `pkg_version`.
 * @returns The report; the MD5 is always computed for pkg_version 2.
 *
 * @example Verify a NEFF's hash
 * ```ts
 * import { verifyNeffHash } from "./hash.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const file = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * console.log(verifyNeffHash(file, 2).valid);
 * ```
 */
export function verifyNeffHash(file: Uint8Array, pkgVersion: number): NeffHashReport {
  const field = file.subarray(NeffHeaderOffset.HASH, NeffHeaderOffset.HASH + 32);
  if (pkgVersion !== NEFF_PKG_VERSION_MD5) {
    const zero = field.every((b) => b === 0);
    return { algorithm: zero ? "none" : "unknown", stored: toHex(field), computed: "", valid: false };
  }
  const computed = md5(file.subarray(NEFF_HEADER_SIZE));
  const stored = swapWords(field.subarray(0, 16));
  const tailZero = field.subarray(16).every((b) => b === 0);
  const storedHex = toHex(stored);
  const computedHex = toHex(computed);
  return { algorithm: "md5", stored: storedHex, computed: computedHex, valid: tailZero && storedHex === computedHex };
}
