import { describe, expect, test } from "bun:test";
import { cnnModel, mlpModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import type { CompiledOnnxModel } from "./compiled_model.ts";
import { BUFFER_ALIGN, type MemoryPlan, planMemory, type PlanValue } from "./memory_plan.ts";

/**
 * The first planner, kept as the reference the fast one must match value for value: for each value in decreasing
 * size, every buffer and every occupant is checked. Quadratic; fine for a few hundred values.
 */
function referencePlan(values: readonly PlanValue[]): MemoryPlan {
  const align = (n: number) => Math.max(BUFFER_ALIGN, Math.ceil(n / BUFFER_ALIGN) * BUFFER_ALIGN);
  const order = [...values].sort((a, b) => b.bytes - a.bytes || a.first - b.first || (a.name < b.name ? -1 : 1));
  const buffers: { bytes: number; lives: { first: number; last: number }[] }[] = [];
  const assignment = new Map<string, { buffer: number; offset: number }>();
  for (const v of order) {
    const size = align(v.bytes);
    let best = -1;
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i];
      if (b.bytes < size) continue; // sizes only decrease along `order`, so this happens only for equal-rounding ties
      if (b.lives.some((l) => l.first <= v.last && v.first <= l.last)) continue;
      if (best < 0 || b.bytes < buffers[best].bytes) best = i;
    }
    if (best < 0) {
      best = buffers.length;
      buffers.push({ bytes: size, lives: [] });
    }
    buffers[best].lives.push({ first: v.first, last: v.last });
    assignment.set(v.name, { buffer: best, offset: 0 });
  }
  const planned = buffers.map((b, id) => ({ id, bytes: b.bytes }));
  return {
    buffers: planned,
    assignment,
    naiveBytes: values.reduce((a, v) => a + align(v.bytes), 0),
    plannedBytes: planned.reduce((a, b) => a + b.bytes, 0),
  };
}

/** A seeded xorshift32: `next(n)` is an integer in [0, n), the same sequence on every run. */
function prng(seed: number): (n: number) => number {
  let s = Math.imul(seed, 0x9e3779b9) ^ 0x5bd1e995;
  return (n) => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return Math.floor(((s >>> 0) / 2 ** 32) * n);
  };
}

/** Sizes with ties after rounding: 0, 1, 63 and 64 all take 64 bytes; 65 … 128 take 128; 4000 and 4096, 4096. */
const SIZES = [0, 1, 63, 64, 65, 100, 127, 128, 129, 192, 200, 4000, 4096, 1 << 20];

/**
 * Random values: a few sizes drawn from {@linkcode SIZES} (so many equal and equal-rounding sizes), lifetimes in a
 * span of about twice as many calls, some short and some long, names in an order unrelated to the lifetimes.
 */
function randomValues(next: (n: number) => number, maxCount: number): PlanValue[] {
  const count = next(maxCount + 1), span = 1 + next(2 * count + 2);
  const sizes = Array.from({ length: 1 + next(5) }, () => SIZES[next(SIZES.length)]);
  return Array.from({ length: count }, (_, i) => {
    const first = next(span);
    return {
      name: `${next(1000)}_${i}`,
      bytes: sizes[next(sizes.length)],
      first,
      last: first + next(Math.max(1, span >> next(5))),
    };
  });
}

/** What a plan decides, for comparing two: every buffer and every value's place, in placement order. */
const decisions = (p: MemoryPlan) => ({
  buffers: p.buffers,
  assignment: [...p.assignment],
  naiveBytes: p.naiveBytes,
  plannedBytes: p.plannedBytes,
});

/** JSON that keeps infinite sizes apart from each other (plain JSON writes them all as null). */
const json = (x: unknown) => JSON.stringify(x, (_, v) => typeof v === "number" && !Number.isFinite(v) ? `${v}` : v);

/** The seeds (and inputs) whose fast plan differs from the reference plan. */
function mismatches(cases: number, make: (next: (n: number) => number) => PlanValue[]): unknown[] {
  const out: unknown[] = [];
  for (let seed = 1; seed <= cases; seed++) {
    const values = make(prng(seed));
    if (json(decisions(planMemory(values))) !== json(decisions(referencePlan(values)))) out.push({ seed, values });
  }
  return out;
}

/** For every intermediate buffer, the lifetimes (call index ranges) of the storage roots placed in it. */
function lifetimesByBuffer(m: CompiledOnnxModel): Map<number, { first: number; last: number }[]> {
  const byValue = new Map<string, { buffer: number; first: number; last: number }>();
  m.calls.forEach((c, i) => {
    for (const name of [...c.inputs, ...c.outputs]) {
      const p = m.values[name];
      if (p.storage !== "buffer") continue;
      const key = p.aliasOf ?? name; // a view and its source are one storage

      const life = byValue.get(key);
      if (life === undefined) byValue.set(key, { buffer: p.buffer!, first: i, last: i });
      else life.last = i;
    }
  });
  const out = new Map<number, { first: number; last: number }[]>();
  for (const l of byValue.values()) out.set(l.buffer, [...(out.get(l.buffer) ?? []), l]);
  return out;
}

describe("planMemory()", () => {
  test("planMemory() reuses buffers along a chain: two buffers for any length", () => {
    const chain = Array.from({ length: 10 }, (_, i) => ({ name: `v${i}`, bytes: 4096, first: i, last: i + 1 }));
    const plan = planMemory(chain);
    expect(plan.buffers.length).toBe(2);
    expect(plan.naiveBytes).toBe(40960);
    expect(plan.plannedBytes).toBe(8192);
    for (let i = 0; i + 1 < 10; i++) {
      expect(plan.assignment.get(`v${i}`)!.buffer).not.toBe(plan.assignment.get(`v${i + 1}`)!.buffer);
    }
  });

  test("planMemory() never shares a buffer between overlapping lifetimes", () => {
    const all = Array.from({ length: 5 }, (_, i) => ({ name: `v${i}`, bytes: 100 * (i + 1), first: 0, last: 3 }));
    const plan = planMemory(all);
    expect(plan.buffers.length).toBe(5);
    expect(plan.plannedBytes).toBe(plan.naiveBytes);
  });

  test("planMemory() puts a small value in the smallest free buffer that fits (best fit)", () => {
    const plan = planMemory([
      { name: "big", bytes: 1 << 20, first: 0, last: 1 },
      { name: "mid", bytes: 1 << 12, first: 0, last: 1 },
      { name: "small", bytes: 100, first: 2, last: 3 },
    ]);
    expect(plan.assignment.get("small")!.buffer).toBe(plan.assignment.get("mid")!.buffer);
    expect(plan.buffers.map((b) => b.bytes)).toEqual([1 << 20, 1 << 12]);
  });

  test("planMemory() refuses duplicate names and inverted lifetimes", () => {
    expect(() => planMemory([{ name: "a", bytes: 1, first: 0, last: 0 }, { name: "a", bytes: 1, first: 1, last: 1 }]))
      .toThrow('value "a" appears twice');
    expect(() => planMemory([{ name: "a", bytes: 1, first: 2, last: 1 }])).toThrow('value "a" dies before it is born');
  });

  test("planMemory() refuses a size or lifetime that is NaN or not a number", () => {
    for (const odd of [{ bytes: NaN }, { first: NaN }, { last: NaN }, { bytes: "64" as unknown as number }]) {
      expect(() => planMemory([{ name: "a", bytes: 64, first: 0, last: 1, ...odd }]))
        .toThrow('value "a" has a size or lifetime that is not a number');
    }
  });

  test("planMemory() decides exactly as the reference planner: 4,000 random small plans", () => {
    expect(mismatches(4000, (next) => randomValues(next, 40))).toEqual([]);
  });

  test("planMemory() decides exactly as the reference planner: 200 random plans of up to 400 values", () => {
    expect(mismatches(200, (next) => randomValues(next, 400))).toEqual([]);
  });

  test("planMemory() decides exactly as the reference planner on sizes and times that are not call indices", () => {
    const odd = [-Infinity, -5, -0.5, 0, 0.25, 1.5, 2, 3, 7.75, 1e15, Infinity];
    expect(mismatches(1000, (next) => {
      const count = next(30);
      return Array.from({ length: count }, (_, i) => {
        const a = odd[next(odd.length)], b = odd[next(odd.length)];
        const bytes = [odd[next(odd.length)], SIZES[next(SIZES.length)], 64.5, 1e300][next(4)];
        return { name: `${next(100)}_${i}`, bytes, first: Math.min(a, b), last: Math.max(a, b) };
      });
    })).toEqual([]);
  });

  test("planMemory() decides exactly as the reference planner on chains, fans and nests", () => {
    expect(mismatches(300, (next) => {
      const count = next(200), size = () => SIZES[next(SIZES.length)];
      const shape = next(3);
      return Array.from({ length: count }, (_, i) => {
        // A chain with branches; many values alive at once; lifetimes nested around a middle call.
        const [first, last] = shape === 0
          ? [i, i + 1 + next(3)]
          : shape === 1
          ? [next(8), 8 + count + next(8)]
          : [count - i, count + i + next(2)];
        return { name: `v${i}`, bytes: next(4) === 0 ? size() : 4096, first, last };
      });
    })).toEqual([]);
  });

  test("planMemory() plans a 100,000-value chain in two buffers, taking turns", () => {
    const n = 100_000;
    const plan = planMemory(
      Array.from({ length: n }, (_, i) => ({ name: `v${i}`, bytes: 4096, first: i, last: i + 1 })),
    );
    expect(plan.buffers).toEqual([{ id: 0, bytes: 4096 }, { id: 1, bytes: 4096 }]);
    expect(plan.assignment.size).toBe(n);
    let alternates = true;
    for (let i = 0; i < n; i++) alternates &&= plan.assignment.get(`v${i}`)!.buffer === i % 2;
    expect(alternates).toBe(true);
  });

  test("planMemory() gives 25,000 values alive at once 25,000 buffers, and a 25,000-value chain after them 2", () => {
    // Each of r0 … r24999 is alive at call 24,999; a0 … a24999 form a chain after them (a Relu fan folded by Adds).
    const h = 25_000, values: PlanValue[] = [];
    for (let i = 0; i < h; i++) values.push({ name: `r${i}`, bytes: 64, first: i, last: h + i - 1 });
    for (let i = 0; i < h; i++) values.push({ name: `a${i}`, bytes: 64, first: h + i, last: h + i + 1 });
    const plan = planMemory(values);
    expect(plan.buffers.length).toBe(h);
    let placed = true;
    for (let i = 0; i < h; i++) {
      placed &&= plan.assignment.get(`r${i}`)!.buffer === i && plan.assignment.get(`a${i}`)!.buffer === i % 2;
    }
    expect(placed).toBe(true);
  });

  test("compileOnnx() plans less memory than one buffer per value, without overlapping lifetimes", () => {
    const models: [string, Uint8Array, number[]][] = [
      ["mlp", mlpModel(), [64, 16]],
      ["cnn", cnnModel(), [8, 3, 16, 16]],
      ["transformer", transformerModel(), [4, 8, 32]],
    ];
    for (const [name, bytes, shape] of models) {
      const m = compileOnnx(bytes, { inputShapes: { x: shape } });
      const { naiveBytes, plannedBytes } = m.memory;
      console.log(
        `${name} x=[${shape}]: ${m.buffers.length} buffers, planned ${plannedBytes} B vs naive ${naiveBytes} B (saves ${
          (100 * (1 - plannedBytes / naiveBytes)).toFixed(1)
        }%)`,
      );
      expect(plannedBytes).toBeLessThan(naiveBytes);
      expect(plannedBytes).toBe(m.buffers.reduce((a, b) => a + b.bytes, 0));
      for (const lives of lifetimesByBuffer(m).values()) {
        const sorted = [...lives].sort((a, b) => a.first - b.first);
        for (let i = 1; i < sorted.length; i++) expect(sorted[i].first).toBeGreaterThan(sorted[i - 1].last);
      }
      for (const p of Object.values(m.values)) {
        if (p.storage === "buffer") expect(p.offset + p.byteLength).toBeLessThanOrEqual(m.buffers[p.buffer!].bytes);
      }
    }
  });
});
