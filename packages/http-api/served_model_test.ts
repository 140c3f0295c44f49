import { describe, expect, test } from "bun:test";
import { CoreLoad } from "./served_model.ts";

describe("CoreLoad", () => {
  test("started() and ended() count executions per logical core, never below zero", () => {
    const load = new CoreLoad();
    load.started(1);
    load.started(1);
    load.started(3);
    expect([load.running(0), load.running(1), load.running(3)]).toEqual([0, 2, 1]);
    load.ended(1);
    load.ended(3);
    load.ended(3);
    expect([load.running(1), load.running(3)]).toEqual([1, 0]);
  });

  test("start() returns a function that counts the execution finished once", () => {
    const load = new CoreLoad();
    const done = load.start(2);
    load.started(2);
    expect(load.running(2)).toBe(2);
    done();
    done();
    expect(load.running(2)).toBe(1);
  });
});
