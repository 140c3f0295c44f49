/**
 * Collectives on one device (issue 16 item 10, docs/collectives.md): all-reduce, all-gather and reduce-scatter across
 * four logical cores of a simulated Cayman, for sum and max over float32 and bfloat16, every output checked bit for
 * bit against the host reference and within float tolerance against an exact (float64) sum; the bytes the device's
 * DMA queues moved; memory back to its baseline after release and after close.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { ccReference, fromBfloat16, NrtaCcDtype, NrtaCcOp, NrtaCcRedOp, type Runtime, type Tensor } from "@nrt/core";
import { type Harness, harness, opened, RELU_NEFF } from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

/** A small deterministic PRNG (xorshift32), so every run checks the same numbers. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_0000_0000;
  };
}

/** `n` elements of `dtype` with mixed signs and magnitudes (so float32 and bfloat16 rounding both matter). */
function randomBytes(dtype: number, n: number, rnd: () => number): Uint8Array {
  const f = Float32Array.from({ length: n }, () => (rnd() - 0.5) * 2 ** Math.floor(rnd() * 12 - 4));
  if (dtype === NrtaCcDtype.FLOAT32) return new Uint8Array(f.buffer);
  const out = new Uint8Array(2 * n);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < n; i++) {
    out[2 * i] = (u[i] >>> 16) & 0xff; // truncate to bfloat16: exactly representable inputs
    out[2 * i + 1] = u[i] >>> 24;
  }
  return out;
}

function values(dtype: number, b: Uint8Array): number[] {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return dtype === NrtaCcDtype.FLOAT32
    ? Array.from({ length: b.byteLength / 4 }, (_, i) => v.getFloat32(4 * i, true))
    : Array.from({ length: b.byteLength / 2 }, (_, i) => fromBfloat16(v.getUint16(2 * i, true)));
}

const OPS = {
  "all-reduce": NrtaCcOp.ALL_REDUCE,
  "all-gather": NrtaCcOp.ALL_GATHER,
  "reduce-scatter": NrtaCcOp.REDUCE_SCATTER,
} as const;
const RANKS = 4;

async function fourRanks(): Promise<Harness> {
  const h = await harness({ visibleCores: [0, 1, 2, 3] });
  for (let v = 0; v < RANKS; v++) await h.rt.loadCollectives(RELU_NEFF, { vnc: v });
  return h;
}

async function tensors(rt: Runtime, bytes: number[], name: string): Promise<Tensor[]> {
  return await Promise.all(bytes.map((size, v) => rt.allocateTensor({ size, vnc: v, name: `${name}${v}` })));
}

function m2sBytes(h: Harness): number {
  let n = 0;
  for (let nc = 0; nc < RANKS; nc++) n += h.sim.queueBytes(0, nc).m2s.reduce((a, b) => a + b, 0);
  return n;
}

describe("collectives move real bytes through the DMA queues and match the host reference", () => {
  // One runtime for every case (each prepares, runs and releases its own collective and tensors).
  let shared: Harness | undefined;
  const count = 1003; // not a multiple of 4 ranks × 8 queues: uneven chunks and shares
  for (const [opName, op] of Object.entries(OPS) as Array<[keyof typeof OPS, number]>) {
    for (const reduce of op === NrtaCcOp.ALL_GATHER ? (["sum"] as const) : (["sum", "max"] as const)) {
      for (const dtype of ["float32", "bfloat16"] as const) {
        test(`${opName} ${op === NrtaCcOp.ALL_GATHER ? "" : reduce + " "}over ${dtype}`, async () => {
          const h = shared ??= await fourRanks();
          const { rt } = h;
          const dt = dtype === "float32" ? NrtaCcDtype.FLOAT32 : NrtaCcDtype.BFLOAT16;
          const red = reduce === "sum" ? NrtaCcRedOp.SUM : NrtaCcRedOp.MAX;
          const e = dtype === "float32" ? 4 : 2;
          const inCount = op === NrtaCcOp.REDUCE_SCATTER ? RANKS * count : count;
          const outCount = op === NrtaCcOp.ALL_GATHER ? RANKS * count : count;
          const rnd = prng(0x5eed + op * 16 + red * 4 + dt);
          const data = Array.from({ length: RANKS }, () => randomBytes(dt, inCount, rnd));
          const baseline = rt.memory().total;
          const ins = await tensors(rt, data.map(() => inCount * e), "in");
          const outs = await tensors(rt, data.map(() => outCount * e), "out");
          for (const [i, t] of ins.entries()) await t.write(data[i]);
          const cc = await rt.collectives.prepare({ op: opName, reduce, dtype, count, inputs: ins, outputs: outs });
          const moved0 = m2sBytes(h);
          await cc.run();
          // Literal element counts per run: all-reduce reads each of the 4 inputs' 1003 elements once (into the scratch
          // chunks) and writes each of the 4 outputs' 1003 once: 8024. All-gather and reduce-scatter: each of the 4 ranks
          // reads 4 × 1003 elements: 16048.
          expect(cc.bytesPerRun).toBe((op === NrtaCcOp.ALL_REDUCE ? 8024 : 16048) * e);
          expect(m2sBytes(h) - moved0).toBe(cc.bytesPerRun);
          const want = ccReference(op as 0 | 1 | 2, red as 0 | 1, dt as 0 | 1, count, data);
          for (const [i, t] of outs.entries()) {
            const got = await t.read(0, outCount * e);
            expect(got).toEqual(want[i]);
          }
          // Not only self-consistent: the sum is within rounding of the exact sum, the max is the exact max.
          if (op !== NrtaCcOp.ALL_GATHER) {
            const xs = data.map((d) => values(dt, d));
            const got = values(dt, await outs[1].read(0, outCount * e));
            const base = op === NrtaCcOp.REDUCE_SCATTER ? count : 0;
            for (let j = 0; j < count; j++) {
              const col = xs.map((x) => x[base + j]);
              const exact = red === NrtaCcRedOp.SUM ? col.reduce((a, b) => a + b, 0) : Math.max(...col);
              const mag = col.reduce((a, b) => a + Math.abs(b), 0);
              expect(Math.abs(got[j] - exact)).toBeLessThanOrEqual(
                (dt === NrtaCcDtype.FLOAT32 ? 4 * 2 ** -24 : 4 * 2 ** -8) * mag,
              );
            }
          } else {
            expect(await outs[3].read(2 * count * e, count * e)).toEqual(data[2]);
          }
          await cc.release();
          for (const t of [...ins, ...outs]) await t.free();
          expect(rt.memory().total).toBe(baseline);
        });
      }
    }
  }

  test("after every case, close returns the runtime's memory to zero", async () => {
    const h = shared ??= await fourRanks();
    expect(h.rt.collectives.live).toBe(0);
    await h.rt.close();
    expect(h.rt.memory().total).toBe(0);
    expect((await h.sim.memUsage(0)).allocations).toBe(0);
  });
});
