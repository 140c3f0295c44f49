import { describe, expect, test } from "bun:test";
import { CollectionPacer, threadPacer } from "./collection_pacer.ts";

/** Resolves once `done()` holds, polling every 5 ms; rejects after `ms`. */
async function until(done: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error("The condition did not hold in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("CollectionPacer", () => {
  test("asks for a collection while work goes on, then disarms once an interval passes without work", async () => {
    let asked = 0;
    const pacer = new CollectionPacer(() => asked++, 10);
    expect(pacer.active).toBe(false);
    pacer.note();
    expect(pacer.active).toBe(true);
    await until(() => asked >= 1);
    // No further work: the next tick finds none and disarms, without asking again.
    await until(() => !pacer.active);
    const settled = asked;
    await new Promise((r) => setTimeout(r, 50));
    expect(asked).toBe(settled);
    expect(pacer.collections).toBe(settled);
    // Work again: armed again.
    pacer.note();
    expect(pacer.active).toBe(true);
    await until(() => asked > settled);
    pacer.stop();
    expect(pacer.active).toBe(false);
  });

  test("keeps asking once per tick as long as each tick finds work", async () => {
    let asked = 0;
    const pacer = new CollectionPacer(() => asked++, 5);
    const work = setInterval(() => pacer.note(), 1);
    try {
      pacer.note();
      await until(() => asked >= 3);
      expect(pacer.active).toBe(true);
    } finally {
      clearInterval(work);
      pacer.stop();
    }
  });

  test("a pacer without a collection never arms a timer", () => {
    const pacer = new CollectionPacer(undefined, 5);
    pacer.note();
    expect(pacer.active).toBe(false);
    expect(pacer.collections).toBe(0);
  });

  test("the thread's pacer collects through Bun.gc where it exists, and is inert elsewhere", () => {
    const pacer = threadPacer();
    expect(threadPacer()).toBe(pacer);
    const onBun = typeof (globalThis as { Bun?: { gc?: unknown } }).Bun?.gc === "function";
    pacer.note();
    expect(pacer.active).toBe(onBun);
    pacer.stop();
  });
});
