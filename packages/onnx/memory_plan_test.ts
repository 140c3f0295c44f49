import { describe, expect, test } from "bun:test";
import { cnnModel, mlpModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import type { CompiledOnnxModel } from "./compiled_model.ts";
import { planMemory } from "./memory_plan.ts";

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
