import { describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { NotificationKind } from "@nrt/core/isa";
import { CompletionReaper } from "./completion_reaper.ts";
import { NcRegisters, NcStatus, NqRegister, ReapWord } from "./nc_registers.ts";
import { NotificationProducer } from "./notification_queue.ts";

/** A device's registers with a 16-record NQ on every NeuronCore, a producer per NeuronCore, and its reaper. */
function device() {
  const regs = NcRegisters.forDevice(CAYMAN_SPEC);
  const memory = { writePa: () => true, readPa: () => undefined } as unknown as ConstructorParameters<
    typeof NotificationProducer
  >[1];
  const producers = regs.map((r) => {
    r.setNqRegister(NqRegister.BASE_LO, 0x1000);
    r.setNqRegister(NqRegister.CAPACITY, 16);
    return new NotificationProducer(r, memory);
  });
  const reaper = new CompletionReaper(regs[0].reap);
  const wait = (nc: number, signal?: AbortSignal) =>
    reaper.wait(regs[nc].nqWords, regs[nc].status, regs[nc].nqRegister(NqRegister.HEAD), signal);
  const done = (nc: number) =>
    producers[nc].push({
      code: 0,
      mask: 0,
      engine: 0,
      q7: 0xff,
      kind: NotificationKind.EXEC_DONE,
      model: 1,
      value: 1,
      aux: 0,
    });
  return { regs, reaper, wait, done };
}

/**
 * Runs `f` with a timer held: here the device publishes on the waiting thread itself, and Deno (2.9.6) settles a
 * `waitAsync` notified from its own thread only while its event loop has something pending (as `AgentLink.inline`).
 */
async function held(f: () => Promise<void>): Promise<void> {
  const keepAlive = setInterval(() => {}, 1_000);
  try {
    await f();
  } finally {
    clearInterval(keepAlive);
  }
}

/** Counts `Atomics.waitAsync` and `Atomics.notify` calls on `words` during `f`. */
async function countAtomics(words: Int32Array, f: () => Promise<void>): Promise<{ sleeps: number; notifies: number }> {
  const { waitAsync, notify } = Atomics;
  const n = { sleeps: 0, notifies: 0 };
  Atomics.waitAsync = ((a: Int32Array, i: number, v: number, t?: number) => {
    if (a.buffer === words.buffer) n.sleeps++;
    return waitAsync(a, i, v, t);
  }) as typeof Atomics.waitAsync;
  Atomics.notify = ((a: Int32Array, i: number, c?: number) => {
    if (a.buffer === words.buffer) n.notifies++;
    return notify(a, i, c);
  }) as typeof Atomics.notify;
  try {
    await f();
  } finally {
    Atomics.waitAsync = waitAsync;
    Atomics.notify = notify;
  }
  return n;
}

describe("CompletionReaper", () => {
  test("the NeuronCores of a device share one set of reap words (epoch 0, watching 1)", () => {
    expect([ReapWord.EPOCH, ReapWord.WATCHING]).toEqual([0, 1]);
    const { regs } = device();
    expect(new Set(regs.map((r) => r.reap.buffer)).size).toBe(1);
    expect(regs[0].reap.length).toBe(2);
  });

  test("completions of two NeuronCores published before the host looks cost one sleep and one wake", () =>
    held(async () => {
      const { regs, reaper, wait, done } = device();
      const n = await countAtomics(regs[0].reap, async () => {
        const a = wait(0), b = wait(1);
        expect(reaper.pending).toBe(2);
        expect(Atomics.load(regs[0].reap, ReapWord.WATCHING)).toBe(1);
        done(0);
        done(1);
        await Promise.all([a, b]);
      });
      // One sleep on the epoch; the first publish woke it, the second found it already woken (no waiter: no syscall).
      expect(n.sleeps).toBe(1);
      expect(n.notifies).toBe(2);
      expect(reaper.pending).toBe(0);
      expect(Atomics.load(regs[0].reap, ReapWord.WATCHING)).toBe(0);
      expect(regs.map((r) => Atomics.load(r.status, NcStatus.HOST_WAITERS))).toEqual(regs.map(() => 0));
    }));

  test("a head published with nobody watching advances the epoch and notifies no one", () =>
    held(async () => {
      const { regs, done } = device();
      const n = await countAtomics(regs[0].reap, () => {
        done(2);
        done(2);
        return Promise.resolve();
      });
      expect(n.notifies).toBe(0);
      expect(Atomics.load(regs[0].reap, ReapWord.EPOCH)).toBe(2);
    }));

  test("a wait whose head already moved returns at once; one on another core stays until its own head moves", () =>
    held(async () => {
      const { regs, reaper, done } = device();
      const seen = regs[3].nqRegister(NqRegister.HEAD);
      done(3);
      await reaper.wait(regs[3].nqWords, regs[3].status, seen);
      expect(reaper.pending).toBe(0);
      let settled = false;
      const other = reaper.wait(regs[1].nqWords, regs[1].status, 0).then(() => (settled = true));
      done(0); // another core's completion wakes the reaper, which looks and sleeps again
      await new Promise((r) => setTimeout(r, 20));
      expect(settled).toBe(false);
      expect(Atomics.load(regs[1].status, NcStatus.HOST_WAITERS)).toBe(1);
      done(1);
      await other;
      expect(Atomics.load(regs[1].status, NcStatus.HOST_WAITERS)).toBe(0);
    }));

  test("an aborted signal ends its waits at once, leaves the others, and the reaper stops once none is left", () =>
    held(async () => {
      const { regs, reaper, wait, done } = device();
      const ac = new AbortController();
      const a = wait(0, ac.signal), b = wait(0, ac.signal), c = wait(1);
      ac.abort();
      await Promise.all([a, b]);
      expect(Atomics.load(regs[0].status, NcStatus.HOST_WAITERS)).toBe(0);
      expect(reaper.pending).toBe(1);
      done(1);
      await c;
      expect(reaper.pending).toBe(0);
      // With every wait ended the reaper sleeps no more: it does not hold the event loop open.
      await new Promise((r) => setTimeout(r, 0));
      expect(Atomics.load(regs[0].reap, ReapWord.WATCHING)).toBe(0);
      // A signal aborted before the wait: no wait at all.
      await wait(2, ac.signal);
      expect(Atomics.load(regs[2].status, NcStatus.HOST_WAITERS)).toBe(0);
    }));

  test("close releases every wait, and any made after", () =>
    held(async () => {
      const { regs, reaper, wait } = device();
      const waits = [wait(0), wait(1), wait(1)];
      reaper.close();
      await Promise.all(waits);
      await wait(2);
      expect(regs.map((r) => Atomics.load(r.status, NcStatus.HOST_WAITERS))).toEqual(regs.map(() => 0));
      expect(reaper.pending).toBe(0);
    }));
});
