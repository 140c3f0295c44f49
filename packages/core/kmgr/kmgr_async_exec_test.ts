// The NRT_2.0.0 async worker without a device: completions nobody polls are capped, and a submission beyond the cap is
// refused with the seed's backpressure status NRT_QUEUE_FULL (7) until a poll makes room; none is dropped (seed
// lifecycle-error-model §5.1, runtime-synthesis §6; the cap is ours). tests/async_bounds_test.ts drives a runtime.
import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import { type AsyncExecCompletion, AsyncExecWorker } from "./kmgr_async_exec.ts";

function thrown(f: () => unknown): number {
  try {
    f();
    return 0;
  } catch (e) {
    return e instanceof NrtError ? e.status : -1;
  }
}

describe("AsyncExecWorker: unpolled completions (NRT_QUEUE_FULL 7)", () => {
  test("the cap defaults to the depth; at the cap nothing is started, and a poll makes room", async () => {
    let id = 0;
    const w = new AsyncExecWorker(0, 2, () => ++id);
    expect(w.maxUnpolled).toBe(2);
    let runs = 0;
    const run = () => {
      runs++;
      return Promise.resolve();
    };
    w.submit(1, run);
    w.submit(1, run);
    await w.drain();
    expect([w.inflight, w.unpolled]).toEqual([0, 2]);
    expect(thrown(() => w.submit(1, run))).toBe(7);
    expect(thrown(() => w.checkCapacity())).toBe(7);
    expect(runs).toBe(2);
    expect(w.poll()?.id).toBe(1);
    expect(thrown(() => w.submit(1, run))).toBe(0);
    await w.drain();
    expect([w.poll()?.id, w.poll()?.id, w.poll()]).toEqual([2, 3, undefined]);
  });

  test("a client that never polls holds at most maxUnpolled + depth − 1 completions, all polled later", async () => {
    let id = 0;
    const w = new AsyncExecWorker(0, 4, () => ++id, undefined, 3);
    const run = () => Promise.resolve();
    // Two completions wait, under the cap: four more may start (the depth) and complete on top of them.
    w.submit(1, run);
    w.submit(1, run);
    await w.drain();
    let accepted = 2;
    while (thrown(() => w.submit(1, run)) === 0) accepted++;
    expect(accepted).toBe(6);
    await w.drain();
    expect(w.unpolled).toBe(3 + 4 - 1);
    for (let i = 0; i < 100; i++) {
      expect(thrown(() => w.submit(1, run))).toBe(7);
      await w.drain();
    }
    expect(w.unpolled).toBe(6);
    const got: AsyncExecCompletion[] = [];
    for (let c = w.poll(); c !== undefined; c = w.poll()) got.push(c);
    expect(got.map((c) => c.id)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  test("with a listener, completions do not queue and no cap applies", async () => {
    let id = 0;
    const w = new AsyncExecWorker(0, 1, () => ++id);
    const seen: number[] = [];
    w.listener = (c) => seen.push(c.id);
    for (let i = 0; i < 50; i++) {
      w.submit(1, () => Promise.resolve());
      await w.drain();
    }
    expect(seen.length).toBe(50);
    expect(w.unpolled).toBe(0);
  });

  test("a cap that is not a positive integer is refused", () => {
    expect(() => new AsyncExecWorker(0, 2, () => 1, undefined, 0)).toThrow(RangeError);
    expect(() => new AsyncExecWorker(0, 2, () => 1, undefined, 1.5)).toThrow(RangeError);
  });
});
