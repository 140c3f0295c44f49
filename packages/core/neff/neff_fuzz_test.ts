/**
 * Seeded mutation fuzzing of `readNeff`: every mutant either parses or throws an `NrtError` with a defined
 * status; any other exception (a RangeError from a DataView, a TypeError from a missing field, …) is a bug.
 */
import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import { isNrtStatus } from "../status.ts";
import { neffHashField } from "./hash.ts";
import { NeffHeaderOffset } from "./header.ts";
import { buildNeff } from "./neff_builder.ts";
import { readNeff } from "./neff_file.ts";
import { readFixture, tinyMembers } from "./_testing.ts";
import { prng } from "../_testing.ts";

const U64_FIELDS = [
  NeffHeaderOffset.PKG_VERSION,
  NeffHeaderOffset.HEADER_SIZE,
  NeffHeaderOffset.DATA_SIZE,
  NeffHeaderOffset.NEFF_VERSION_MAJOR,
  NeffHeaderOffset.NEFF_VERSION_MINOR,
  NeffHeaderOffset.FEATURE_BITS,
];
const U32_FIELDS = [NeffHeaderOffset.NUM_TPB, NeffHeaderOffset.REQUESTED_TPB_COUNT, NeffHeaderOffset.LNC_SIZE];
const EDGE_U64 = [0n, 1n, 2n, 3n, 1023n, 1024n, 1025n, 0xffffffffn, (1n << 53n) - 1n, 1n << 53n, 0xffffffffffffffffn];

/** Sets data_size to the real length (and, sometimes, the hash too) so the mutant reaches the payload parser. */
function fixUp(m: Uint8Array, rnd: () => number): void {
  if (m.length < 1024) return;
  new DataView(m.buffer, m.byteOffset).setBigUint64(NeffHeaderOffset.DATA_SIZE, BigInt(m.length - 1024), true);
  if (rnd() < 0.5) m.set(neffHashField(m.subarray(1024)), NeffHeaderOffset.HASH);
}

function mutate(base: Uint8Array, rnd: () => number): Uint8Array {
  const int = (n: number) => Math.floor(rnd() * n);
  // Favour the first few KB, where the header, the gzip header and the first Huffman tables live.
  const pos = (len: number) => (rnd() < 0.5 ? int(Math.min(len, 4096)) : int(len));
  let m = base.slice();
  const ops = 1 + int(3);
  for (let k = 0; k < ops; k++) {
    const op = int(6);
    if (op === 0) m[pos(m.length)] ^= 1 << int(8);
    else if (op === 1) m[pos(m.length)] = int(256);
    else if (op === 2) {
      const at = pos(m.length);
      const run = 1 + int(64);
      for (let i = at; i < Math.min(m.length, at + run); i++) m[i] = int(256);
    } else if (op === 3) {
      const at = pos(m.length);
      const ins = new Uint8Array(1 + int(32)).map(() => int(256));
      const out = new Uint8Array(m.length + ins.length);
      out.set(m.subarray(0, at));
      out.set(ins, at);
      out.set(m.subarray(at), at + ins.length);
      m = out;
    } else if (op === 4) {
      const at = pos(m.length);
      const del = 1 + int(32);
      const out = new Uint8Array(Math.max(0, m.length - del));
      out.set(m.subarray(0, at));
      out.set(m.subarray(Math.min(m.length, at + del)), at);
      m = out.subarray(0, Math.max(0, m.length - del));
    } else if (m.length >= 1024) {
      const view = new DataView(m.buffer, m.byteOffset);
      if (rnd() < 0.6) {
        const f = U64_FIELDS[int(U64_FIELDS.length)];
        view.setBigUint64(
          f,
          rnd() < 0.7 ? EDGE_U64[int(EDGE_U64.length)] : BigInt(int(2 ** 32)) * BigInt(int(2 ** 32)),
          true,
        );
      } else {
        view.setUint32(U32_FIELDS[int(U32_FIELDS.length)], int(2 ** 32), true);
      }
    }
  }
  if (rnd() < 0.6) fixUp(m, rnd);
  return m;
}

/** Runs readNeff: `"parsed"`, `"refused"` (an NrtError with a defined status), or a description of anything else. */
function check(bytes: Uint8Array, validateHash: boolean): string {
  try {
    readNeff(bytes, { validateHash, maxDecompressedBytes: 8 << 20, maxMembers: 1000 });
    return "parsed";
  } catch (e) {
    if (e instanceof NrtError && isNrtStatus(e.status)) return "refused";
    return e instanceof Error ? `${e.name}: ${e.message}\n${e.stack}` : String(e);
  }
}

function tally(results: Map<string, number>, r: string): boolean {
  results.set(r, (results.get(r) ?? 0) + 1);
  return r === "parsed" || r === "refused";
}

function fuzz(base: Uint8Array, seed: number, count: number): { bad: string[]; parsed: number } {
  const rnd = prng(seed);
  const bad: string[] = [];
  const results = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const r = check(mutate(base, rnd), rnd() < 0.2);
    if (!tally(results, r)) bad.push(`seed ${seed} mutant ${i}: ${r}`);
  }
  return { bad, parsed: results.get("parsed") ?? 0 };
}

describe("readNeff() under mutation", () => {
  test("readNeff() parses or throws NrtError on 2,000 mutants of matmul_small.neff", async () => {
    const base = await readFixture("matmul_small.neff");
    const { bad } = fuzz(base, 0x5eed_0001, 2000);
    expect(bad.slice(0, 3)).toEqual([]);
  }, 120_000);

  test("readNeff() parses or throws NrtError on 2,000 mutants of a built NEFF", () => {
    const m = tinyMembers();
    m.set("sg00/const.npy", new Uint8Array(3000).map((_, i) => (i * i) & 0xff));
    const base = buildNeff({ name: "fuzz.neff", members: m });
    const { bad, parsed } = fuzz(base, 0x5eed_0002, 2000);
    expect(bad.slice(0, 3)).toEqual([]);
    expect(parsed).toBeGreaterThan(0); // some mutants (padding, header fields) must still parse
  }, 120_000);

  test("readNeff() parses or throws NrtError on a truncation at every offset of a built NEFF", () => {
    const base = buildNeff({ name: "trunc.neff", members: tinyMembers() });
    const tar = buildNeff({ name: "trunc.neff", members: tinyMembers(), compress: false });
    const bad: string[] = [];
    const results = new Map<string, number>();
    for (const file of [base, tar]) {
      for (let len = 0; len < file.length; len++) {
        const raw = file.slice(0, len);
        const p = check(raw, false);
        if (!tally(results, p)) bad.push(`raw truncation at ${len}: ${p}`);
        if (len < 1024) continue;
        // With data_size fixed up, the truncation reaches the gzip and tar readers.
        new DataView(raw.buffer).setBigUint64(NeffHeaderOffset.DATA_SIZE, BigInt(len - 1024), true);
        const q = check(raw, false);
        if (!tally(results, q)) bad.push(`fixed truncation at ${len}: ${q}`);
      }
    }
    expect(bad.slice(0, 3)).toEqual([]);
    expect(results.get("parsed") ?? 0).toBeGreaterThan(0); // cutting only padding leaves a readable NEFF
    expect(results.get("refused") ?? 0).toBeGreaterThan(base.length); // and every raw cut is refused
  }, 120_000);
});
