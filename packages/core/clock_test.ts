import { describe, expect, test } from "bun:test";
import { type Clock, SystemClock, VirtualClock } from "./clock.ts";

/** Settles `p` into a readable state after pending reactions have run, without awaiting the clock. */
async function stateOf(p: Promise<unknown>): Promise<"pending" | "resolved" | "rejected"> {
  let state: "pending" | "resolved" | "rejected" = "pending";
  p.then(() => (state = "resolved"), () => (state = "rejected"));
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return state;
}

/** Records the event types removed from `signal`'s listeners. */
function spyRemovals(signal: AbortSignal): string[] {
  const removed: string[] = [];
  const original = signal.removeEventListener.bind(signal);
  signal.removeEventListener = ((type: string, listener: EventListener, options?: EventListenerOptions) => {
    removed.push(type);
    original(type, listener, options);
  }) as typeof signal.removeEventListener;
  return removed;
}

describe("VirtualClock", () => {
  test("VirtualClock() starts at 0 or at the given time and stands still", async () => {
    expect(new VirtualClock().now()).toBe(0);
    const clock = new VirtualClock(1_000);
    const sleeping = clock.sleep(1);
    expect(await stateOf(sleeping)).toBe("pending");
    expect(clock.now()).toBe(1_000);
    expect(clock.pendingSleepers).toBe(1);
  });

  test("VirtualClock.advance() wakes a sleeper only once its deadline has passed", async () => {
    const clock = new VirtualClock();
    const sleeping = clock.sleep(100);
    await clock.advance(99);
    expect(await stateOf(sleeping)).toBe("pending");
    await clock.advance(1);
    expect(await stateOf(sleeping)).toBe("resolved");
    expect(clock.now()).toBe(100);
    expect(clock.pendingSleepers).toBe(0);
  });

  test("VirtualClock.advance() wakes sleepers in deadline order, ties in sleep order, at their deadlines", async () => {
    const clock = new VirtualClock();
    const woke: [string, number][] = [];
    const cases: [string, number][] = [["c", 30], ["a", 10], ["b1", 20], ["b2", 20], ["late", 31]];
    const sleeps = cases.map(([name, ms]) => clock.sleep(ms).then(() => woke.push([name, clock.now()])));
    await clock.advance(30);
    expect(woke).toEqual([["a", 10], ["b1", 20], ["b2", 20], ["c", 30]]);
    expect(clock.now()).toBe(30);
    expect(clock.pendingSleepers).toBe(1);
    await clock.advance(1);
    await Promise.all(sleeps);
    expect(woke.at(-1)).toEqual(["late", 31]);
  });

  test("VirtualClock.advance() wakes chained sleeps in the same advance", async () => {
    const clock = new VirtualClock();
    const ticks: number[] = [];
    const inner = async (): Promise<void> => {
      await clock.sleep(5);
      await clock.sleep(5);
    };
    const loop = (async () => {
      for (let i = 0; i < 5; i++) {
        await inner();
        ticks.push(clock.now());
      }
    })();
    await clock.advance(45);
    expect(ticks).toEqual([10, 20, 30, 40]);
    expect(clock.pendingSleepers).toBe(1);
    await clock.advance(5);
    await loop;
    expect(ticks).toEqual([10, 20, 30, 40, 50]);
  });

  test("VirtualClock.sleep(0) waits for the next advance, even advance(0)", async () => {
    const clock = new VirtualClock();
    const sleeping = clock.sleep(0);
    expect(await stateOf(sleeping)).toBe("pending");
    await clock.advance(0);
    expect(await stateOf(sleeping)).toBe("resolved");
    expect(clock.now()).toBe(0);
  });

  test("VirtualClock.sleep() rejects with the abort reason and drops the sleeper", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const reason = new Error("execution completed");
    const sleeping = clock.sleep(600_000, controller.signal);
    const other = clock.sleep(600_000);
    expect(clock.pendingSleepers).toBe(2);
    controller.abort(reason);
    await expect(sleeping).rejects.toBe(reason);
    expect(clock.pendingSleepers).toBe(1);
    await clock.advance(600_000);
    expect(await stateOf(other)).toBe("resolved");
  });

  test("VirtualClock.sleep() with an aborted signal rejects at once and queues nothing", async () => {
    const clock = new VirtualClock();
    const sleeping = clock.sleep(10, AbortSignal.abort("gone"));
    expect(clock.pendingSleepers).toBe(0);
    await expect(sleeping).rejects.toBe("gone");
  });

  test("VirtualClock.sleep() removes its abort listener when it wakes", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const removed = spyRemovals(controller.signal);
    const sleeping = clock.sleep(10, controller.signal);
    await clock.advance(10);
    expect(removed).toEqual(["abort"]);
    controller.abort();
    expect(await stateOf(sleeping)).toBe("resolved");
  });

  test("VirtualClock resolves 100 sleeps of 600 seconds in milliseconds of wall time", async () => {
    const clock = new VirtualClock();
    const start = performance.now();
    const sleeps = Array.from({ length: 100 }, (_, i) => clock.sleep(600_000 + i));
    await clock.advance(600_000 + 99);
    await Promise.all(sleeps);
    expect(clock.pendingSleepers).toBe(0);
    expect(performance.now() - start).toBeLessThan(500);
  });

  test("VirtualClock.runUntilIdle() wakes everything, moving time to the last deadline", async () => {
    const clock = new VirtualClock();
    const woke: number[] = [];
    void clock.sleep(300).then(() => woke.push(clock.now()));
    void clock.sleep(100).then(async () => {
      woke.push(clock.now());
      await clock.sleep(500);
      woke.push(clock.now());
    });
    expect(await clock.runUntilIdle()).toBe(3);
    expect(woke).toEqual([100, 300, 600]);
    expect(clock.now()).toBe(600);
    expect(await clock.runUntilIdle()).toBe(0);
  });

  test("VirtualClock.runUntilIdle() fails on a sleeper that always sleeps again", async () => {
    const clock = new VirtualClock();
    const stop = new AbortController();
    const ticker = (async () => {
      for (;;) await clock.sleep(1, stop.signal);
    })();
    await expect(clock.runUntilIdle(50)).rejects.toThrow(RangeError);
    expect(clock.now()).toBe(50);
    stop.abort();
    await expect(ticker).rejects.toBeDefined();
    expect(clock.pendingSleepers).toBe(0);
  });

  test("VirtualClock.advance() calls made together run one after the other", async () => {
    const clock = new VirtualClock();
    const woke: number[] = [];
    for (const ms of [10, 20, 30]) void clock.sleep(ms).then(() => woke.push(clock.now()));
    await Promise.all([clock.advance(15), clock.advance(15)]);
    expect(woke).toEqual([10, 20, 30]);
    expect(clock.now()).toBe(30);
  });

  test("VirtualClock rejects a negative, NaN or infinite delay", () => {
    const clock = new VirtualClock();
    for (const bad of [-1, NaN, Infinity]) {
      expect(() => clock.sleep(bad)).toThrow(RangeError);
      expect(() => clock.advance(bad)).toThrow(RangeError);
    }
    expect(() => new VirtualClock(-5)).toThrow(RangeError);
  });
});

/** Replaces setTimeout/clearTimeout/performance.now for one test, recording the timers. */
function withFakeTimers<T>(run: (fake: FakeTimers) => Promise<T>): Promise<T> {
  const g = globalThis as unknown as Record<"setTimeout" | "clearTimeout", unknown>;
  const saved = { setTimeout: g.setTimeout, clearTimeout: g.clearTimeout, now: performance.now };
  const fake = new FakeTimers();
  g.setTimeout = (fn: () => void, ms: number) => fake.set(fn, ms);
  g.clearTimeout = (id: number) => fake.timers.delete(id);
  Object.defineProperty(performance, "now", { value: () => fake.time, configurable: true, writable: true });
  return run(fake).finally(() => {
    g.setTimeout = saved.setTimeout;
    g.clearTimeout = saved.clearTimeout;
    Object.defineProperty(performance, "now", { value: saved.now, configurable: true, writable: true });
  });
}

class FakeTimers {
  time = 0;
  nextId = 1;
  readonly timers = new Map<number, { fn: () => void; ms: number }>();
  readonly delays: number[] = [];
  set(fn: () => void, ms: number): number {
    this.delays.push(ms);
    this.timers.set(this.nextId, { fn, ms });
    return this.nextId++;
  }
  /** Fires the only pending timer after moving time by its delay. */
  fire(): void {
    const [[id, timer]] = [...this.timers];
    this.timers.delete(id!);
    this.time += timer!.ms;
    timer!.fn();
  }
}

describe("SystemClock", () => {
  test("SystemClock.now() never decreases", () => {
    const clock: Clock = new SystemClock();
    let last = clock.now();
    for (let i = 0; i < 1000; i++) {
      const t = clock.now();
      expect(t).toBeGreaterThanOrEqual(last);
      last = t;
    }
  });

  test("SystemClock.sleep() resolves after the delay", async () => {
    const clock = new SystemClock();
    const start = clock.now();
    await clock.sleep(5);
    expect(clock.now() - start).toBeGreaterThanOrEqual(4);
  });

  test("SystemClock.sleep() rejects promptly on abort and clears its timer", async () => {
    await withFakeTimers(async (fake) => {
      const clock = new SystemClock();
      const controller = new AbortController();
      const sleeping = clock.sleep(600_000, controller.signal);
      expect(fake.timers.size).toBe(1);
      controller.abort(new Error("done"));
      await expect(sleeping).rejects.toThrow("done");
      expect(fake.timers.size).toBe(0);
    });
  });

  test("SystemClock.sleep() with an aborted signal rejects at once and sets no timer", async () => {
    await withFakeTimers(async (fake) => {
      const sleeping = new SystemClock().sleep(10, AbortSignal.abort("gone"));
      expect(fake.delays).toEqual([]);
      await expect(sleeping).rejects.toBe("gone");
    });
  });

  test("SystemClock.sleep() splits a delay beyond setTimeout's 2^31-1 ms limit", async () => {
    await withFakeTimers(async (fake) => {
      const max = 2 ** 31 - 1;
      const sleeping = new SystemClock().sleep(max + 1_000);
      fake.fire();
      expect(await stateOf(sleeping)).toBe("pending");
      fake.fire();
      expect(await stateOf(sleeping)).toBe("resolved");
      expect(fake.delays).toEqual([max, 1_000]);
    });
  });

  test("SystemClock.sleep() removes its abort listener once it resolves", async () => {
    await withFakeTimers(async (fake) => {
      const controller = new AbortController();
      const removed = spyRemovals(controller.signal);
      const sleeping = new SystemClock().sleep(10, controller.signal);
      fake.fire();
      expect(removed).toEqual(["abort"]);
      controller.abort();
      expect(await stateOf(sleeping)).toBe("resolved");
    });
  });

  test("SystemClock.sleep() rejects a negative, NaN or infinite delay", () => {
    for (const bad of [-1, NaN, Infinity]) expect(() => new SystemClock().sleep(bad)).toThrow(RangeError);
  });
});
