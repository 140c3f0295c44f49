/**
 * `bench/neff.ts`: `readNeff` on the real `matmul_large.neff` fixture against the limit built from nothing of ours:
 * the platform's gunzip (`node:zlib` `gunzipSync`) of the same payload plus a walk of its ustar headers (name, size,
 * next header) — the least any reader of the file must do (`_bare_load.ts`). Both in one run, median of `RUNS`.
 *
 * Run: `bun bench/neff.ts` or `deno run -A bench/neff.ts` (`--json` for one JSON line).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { readNeff } from "@nrt/core";
import { readNeffHeader } from "@nrt/core/neff";
import { bareRead } from "./_bare_load.ts";
import { emit, RUNS, timeUs } from "./_timing.ts";

const file = new Uint8Array(readFileSync(new URL("../../shared/fixtures/neff/matmul_large.neff", import.meta.url)));
const header = readNeffHeader(file);
const payload = file.subarray(header.headerSize);

const members = bareRead(payload);
const ours = await timeUs(() => Promise.resolve(void readNeff(file)), RUNS);
const bare = await timeUs(() => Promise.resolve(void bareRead(payload)), RUNS);
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
