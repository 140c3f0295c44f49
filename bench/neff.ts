/**
 * `bench/neff.ts`: `readNeff` on the real `matmul_large.neff` fixture against the limit built from nothing of ours:
 * the platform's gunzip (`node:zlib` `gunzipSync`) of the same payload plus a walk of its ustar headers (name, size,
 * next header) — the least any reader of the file must do. Both in one run, median of `RUNS`.
 *
 * Run: `bun bench/neff.ts` or `deno run -A bench/neff.ts` (`--json` for one JSON line).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { readNeff } from "@nrt/core";
import { readNeffHeader } from "@nrt/core/neff";
import { emit, RUNS, timeUs } from "./_timing.ts";

const file = new Uint8Array(readFileSync(new URL("../../shared/fixtures/neff/matmul_large.neff", import.meta.url)));
const header = readNeffHeader(file);
const payload = file.subarray(header.headerSize);

/** The bare reader: gunzip, then every ustar header's name and octal size, skipping the 512-byte-padded data. */
function bareRead(): number {
  const tar = gunzipSync(payload);
  let members = 0;
  for (let at = 0; at + 512 <= tar.byteLength;) {
    if (tar[at] === 0) break; // end-of-archive block
    let size = 0;
    for (let i = 124; i < 135 && tar[at + i] >= 0x30; i++) size = size * 8 + (tar[at + i] - 0x30);
    members++;
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return members;
}

const members = bareRead();
const ours = await timeUs(() => Promise.resolve(void readNeff(file)), RUNS);
const bare = await timeUs(() => Promise.resolve(void bareRead()), RUNS);
emit(
  "neff",
  `readNeff(matmul_large.neff, ${file.byteLength} B, ${members} members) vs node:zlib gunzip + ustar walk, median of ${RUNS} runs`,
  [
    {
      case: "matmul_large.neff",
      readNeff_us: Math.round(ours),
      gunzip_ustar_us: Math.round(bare),
      ratio: +(ours / bare).toFixed(2),
      goal: 1.3,
    },
  ],
);
