import { describe, expect, test } from "bun:test";
import { RuntimeEvents } from "./runtime_events.ts";

describe("RuntimeEvents", () => {
  test("keeps the last events in order within its capacity and counts what it dropped", () => {
    const e = new RuntimeEvents(3);
    for (const x of ["a", "b", "c", "d", "e"]) e.push(x);
    expect(e.list()).toEqual(["c", "d", "e"]);
    expect(e.dropped).toBe(2);
  });

  test("a subscriber sees later events until disposed; a throwing one is dropped", () => {
    const e = new RuntimeEvents();
    const seen: string[] = [];
    const sub = e.subscribe((x) => seen.push(x));
    e.subscribe(() => {
      throw new Error("bad listener");
    });
    e.push("one");
    sub[Symbol.dispose]();
    e.push("two");
    expect(seen).toEqual(["one"]);
    expect(e.list()).toEqual(["one", "two"]);
  });

  test("refuses a capacity that is not a positive integer", () => {
    expect(() => new RuntimeEvents(0)).toThrow(RangeError);
  });
});
