import { describe, expect, test } from "bun:test";
import { InFlight } from "./in_flight.ts";

describe("InFlight (ours)", () => {
  test("holds each sequence number's value until it is taken, and reuses the places it frees", () => {
    const t = new InFlight<string>();
    t.set(7, "a");
    t.set(8, "b");
    t.set(0, "zero");
    expect(t.size).toBe(3);
    expect(t.get(8)).toBe("b");
    expect(t.get(0)).toBe("zero");
    expect(t.get(9)).toBeUndefined();
    expect(t.take(7)).toBe("a");
    expect(t.take(7)).toBeUndefined(); // taken once
    expect(t.get(7)).toBeUndefined();
    expect(t.size).toBe(2);
    t.set(9, "c"); // in 7's place
    expect([...t.values()].sort()).toEqual(["b", "c", "zero"]);
    // Sixty-four executions in flight, then all finished, then as many again, three times over.
    const u = new InFlight<number>();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 64; i++) u.set(round * 64 + i, i);
      expect(u.size).toBe(64);
      for (let i = 63; i >= 0; i--) expect(u.take(round * 64 + i)).toBe(i);
      expect(u.size).toBe(0);
    }
    expect([...u.values()]).toEqual([]);
  });
});
