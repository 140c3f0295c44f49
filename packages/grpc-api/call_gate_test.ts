import { describe, expect, test } from "bun:test";
import { CallGate, type GateRefusal } from "./call_gate.ts";

function recorder(): { log: string[]; call(name: string): { admit(): void; refuse(why: GateRefusal): void } } {
  const log: string[] = [];
  return {
    log,
    call: (name) => ({ admit: () => log.push(`admit ${name}`), refuse: (why) => log.push(`refuse ${name} ${why}`) }),
  };
}

describe("CallGate", () => {
  test("CallGate.enter() admits up to maxActive, queues up to maxPending and refuses the rest", () => {
    const gate = new CallGate(2, 1);
    const r = recorder();
    for (const name of ["a", "b", "c", "d"]) gate.enter(r.call(name));
    expect(r.log).toEqual(["admit a", "admit b", "refuse d full"]);
    expect([gate.active, gate.pending]).toEqual([2, 1]);
  });

  test("CallGate.enter()'s release admits the waiting calls in FIFO order and does nothing twice", () => {
    const gate = new CallGate(1, 8);
    const r = recorder();
    const a = gate.enter(r.call("a"));
    gate.enter(r.call("b"));
    gate.enter(r.call("c"));
    a();
    a();
    expect(r.log).toEqual(["admit a", "admit b"]);
    expect([gate.active, gate.pending]).toEqual([1, 1]);
  });

  test("CallGate.enter()'s release takes a waiting call out of the queue", () => {
    const gate = new CallGate(1, 8);
    const r = recorder();
    const a = gate.enter(r.call("a"));
    const b = gate.enter(r.call("b"));
    gate.enter(r.call("c"));
    b();
    a();
    expect(r.log).toEqual(["admit a", "admit c"]);
    expect([gate.active, gate.pending]).toEqual([1, 0]);
  });

  test("CallGate.close() refuses the waiting and later calls and settles when the admitted ones end", async () => {
    const gate = new CallGate(1, 8);
    const r = recorder();
    const a = gate.enter(r.call("a"));
    gate.enter(r.call("b"));
    let idle = false;
    const closed = gate.close().then(() => (idle = true));
    gate.enter(r.call("c"));
    expect(r.log).toEqual(["admit a", "refuse b closed", "refuse c closed"]);
    await Promise.resolve();
    expect(idle).toBe(false);
    a();
    await closed;
    expect([idle, gate.active, gate.pending, gate.closed]).toEqual([true, 0, 0, true]);
  });

  test("CallGate() refuses bounds that are not integers in range", () => {
    expect(() => new CallGate(0, 1)).toThrow("Cannot create a call gate: maxActive 0 is not an integer of at least 1");
    expect(() => new CallGate(1, -1)).toThrow("Cannot create a call gate: maxPending -1 is not a non-negative integer");
  });
});
