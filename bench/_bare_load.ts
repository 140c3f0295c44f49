/**
 * A bare load of a NEFF, built from nothing of ours, for the benchmarks' limits (ours, benchmark only):
 *
 * - {@linkcode bareRead}: the platform's gunzip (`node:zlib` `gunzipSync`) of the NEFF's payload, then a walk of the
 *   ustar headers (name, octal size, next header) — the least any reader of the file must do;
 * - {@linkcode bareLoad}: that read, an MD5 of the payload (`node:crypto`), and a copy of every member's bytes into
 *   fresh shared memory, as a load stages a model's files into device memory;
 * - {@linkcode busyLoading}: bare loads back to back on the calling thread for as long as a load of ours took, so the
 *   limit's first run follows the same span of host work our first run follows, not an idle gap.
 *
 * The payload's offset comes from the NEFF's header, read once outside any timed span.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";

/** Walks the ustar headers of a gunzipped archive, calling `each` with every member's data offset and size. */
function walk(tar: Uint8Array, each?: (at: number, size: number) => void): number {
  let members = 0;
  for (let at = 0; at + 512 <= tar.byteLength;) {
    if (tar[at] === 0) break; // end-of-archive block
    let size = 0;
    for (let i = 124; i < 135 && tar[at + i] >= 0x30; i++) size = size * 8 + (tar[at + i] - 0x30);
    each?.(at + 512, size);
    members++;
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return members;
}

/** Gunzips `payload` and walks its ustar headers; returns the number of members. */
export function bareRead(payload: Uint8Array): number {
  return walk(gunzipSync(payload));
}

/** Gunzips and walks `payload`, hashes it, and copies every member into fresh shared memory; returns the bytes kept. */
export function bareLoad(payload: Uint8Array): number {
  const tar = gunzipSync(payload);
  createHash("md5").update(payload).digest();
  const files: Array<[number, number]> = [];
  let total = 0;
  walk(tar, (at, size) => {
    files.push([at, size]);
    total += size;
  });
  const device = new Uint8Array(new SharedArrayBuffer(Math.max(1, total)));
  let kept = 0;
  for (const [at, size] of files) {
    device.set(tar.subarray(at, at + size), kept);
    kept += size;
  }
  return kept;
}

/** Bare loads of `payload`, back to back on this thread, until `ms` have passed (at least one). */
export function busyLoading(payload: Uint8Array, ms: number): void {
  const end = performance.now() + ms;
  do bareLoad(payload); while (performance.now() < end);
}
