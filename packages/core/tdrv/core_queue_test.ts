import { describe, expect, test } from "bun:test";
import { CoreQueue } from "./core_queue.ts";

describe("CoreQueue", () => {
  test("turns run in the order they were taken, one at a time per core", async () => {
    const q = new CoreQueue();
    const log: string[] = [];
    const work = async (name: string, ms: number) => {
      using turn = q.acquire();
      await turn.ready;
      log.push(`start ${name}`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`end ${name}`);
    };
    await Promise.all([work("a", 5), work("b", 0), work("c", 1)]);
    expect(log).toEqual(["start a", "end a", "start b", "end b", "start c", "end c"]);
  });

  test("a turn on two cores waits for the earlier turns of both, and a later turn on either waits for it", async () => {
    const [q0, q1] = [new CoreQueue(), new CoreQueue()];
    const order: string[] = [];
    const t0 = q0.acquire();
    const t1 = q1.acquire();
    const both = CoreQueue.acquire([q0, q1]);
    const after = q1.acquire();
    both.ready.then(() => order.push("both"));
    after.ready.then(() => order.push("after"));
    t1[Symbol.dispose]();
    await Promise.resolve();
    expect(order).toEqual([]); // q0's earlier turn still holds
    t0[Symbol.dispose]();
    await both.ready;
    await Promise.resolve();
    expect(order).toEqual(["both"]);
    both[Symbol.dispose]();
    await after.ready;
    expect(order).toEqual(["both", "after"]);
    after[Symbol.dispose]();
    await q0.idle();
    await q1.idle();
  });

  test("disposing a turn twice releases it once; an ended queue is idle", async () => {
    const q = new CoreQueue();
    const a = q.acquire();
    a[Symbol.dispose]();
    a[Symbol.dispose]();
    const b = q.acquire();
    await b.ready;
    b[Symbol.dispose]();
    await q.idle();
  });
});
