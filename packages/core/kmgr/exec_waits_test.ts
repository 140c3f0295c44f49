import { describe, expect, test } from "bun:test";
import { VirtualClock } from "../clock.ts";
import { ExecWaits } from "./exec_waits.ts";

describe("ExecWaits", () => {
  test("a budget that passes expires at its deadline and aborts its NeuronCore's wait signal, which is then renewed", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    const signal = waits.signal(3);
    let expiredAt: number | undefined;
    waits.arm(3, 1000, () => (expiredAt = clock.now()));
    await clock.advance(999);
    expect(expiredAt).toBeUndefined();
    expect(signal.aborted).toBe(false);
    await clock.advance(1);
    expect(expiredAt).toBe(1000);
    expect(signal.aborted).toBe(true);
    expect(waits.signal(3).aborted).toBe(false);
    expect(waits.signal(3)).not.toBe(signal);
    expect(waits.armed).toBe(0);
  });

  test("a cancelled budget never expires, and other NeuronCores' signals are left alone", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    const other = waits.signal(1);
    let expired = 0;
    const a = waits.arm(0, 500, () => expired++);
    a.cancel();
    a.cancel(); // idempotent
    await clock.advance(10_000);
    expect(expired).toBe(0);
    expect(other.aborted).toBe(false);
    expect(waits.armed).toBe(0);
  });

  test("budgets expire in deadline order, each at its own time, whatever the order they were armed in", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    const fired: Array<[number, number]> = [];
    waits.arm(0, 3000, () => fired.push([0, clock.now()]));
    waits.arm(1, 1000, () => fired.push([1, clock.now()]));
    const c = waits.arm(2, 2000, () => fired.push([2, clock.now()]));
    c.cancel();
    await clock.advance(5000);
    expect(fired).toEqual([[1, 1000], [0, 3000]]);
  });

  test("thousands of budgets that finish in time keep the queue bounded and fire nothing", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    let expired = 0;
    // Two in flight at a time, as executions on two NeuronCores: the live count never drops to zero.
    let prev = waits.arm(0, 60_000, () => expired++);
    for (let i = 1; i <= 10_000; i++) {
      const next = waits.arm(i % 2, 60_000 + i, () => expired++);
      prev.cancel();
      prev = next;
      expect(waits.queued).toBeLessThanOrEqual(2 * waits.armed + 1025);
    }
    prev.cancel();
    await clock.advance(120_000);
    expect(expired).toBe(0);
    expect(waits.armed).toBe(0);
  });

  test("interrupt() ends a pending wait; close() stops the timer and budgets armed after it never expire", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    const s = waits.signal(0);
    waits.interrupt(0);
    expect(s.aborted).toBe(true);
    let expired = 0;
    waits.arm(0, 100, () => expired++);
    waits.close();
    waits.arm(0, 200, () => expired++).cancel();
    waits.arm(1, 300, () => expired++);
    await clock.advance(1000);
    expect(expired).toBe(0);
  });
});

describe("ExecWaits on an idle runtime", () => {
  test("the timer outlives the last execution until its deadline, then stops; close() stops it at once", async () => {
    const clock = new VirtualClock();
    const waits = new ExecWaits(clock);
    waits.arm(0, 1000, () => {}).cancel();
    await new Promise((r) => setTimeout(r, 0));
    expect(clock.pendingSleepers).toBe(1); // idle, and still armed: the next execute does not arm it again
    let expired = 0;
    const next = waits.arm(0, 1500, () => expired++); // a later deadline: the armed timer serves it
    expect(clock.pendingSleepers).toBe(1);
    await clock.advance(1000); // the first deadline: nothing of it is live, and the timer is armed for the next
    expect(expired).toBe(0);
    expect(clock.pendingSleepers).toBe(1);
    next.cancel();
    await clock.advance(500); // fires at 1500, finds nothing live, and stops
    expect(expired).toBe(0);
    expect(clock.pendingSleepers).toBe(0);
    waits.arm(1, 3000, () => {}).cancel();
    expect(clock.pendingSleepers).toBe(1);
    waits.close();
    expect(clock.pendingSleepers).toBe(0);
  });
});
