/**
 * The host's completion reaper of one simulated device: the completion waits (`Portal.notificationWait`) of all its
 * NeuronCores, watched by one sleeper. The device advances its reap epoch at every store of an NQ head and notifies it
 * while the reaper watches ({@linkcode ReapWord}); the reaper wakes, looks at the heads, and releases each wait whose
 * head moved, then sleeps again while any is left. Completions of several NeuronCores that land before the host gets
 * to look cost one wake and one sleep, not one each: under load the host finds most of them already published.
 *
 * Seed: runtime-synthesis §3.5 (the calling thread does not spin on a register; it blocks on a pooled completion
 * eventfd, `comp_efd`, that the libnrt reap thread signals once the NQ completion is seen). The reaper is that reap
 * thread's part on the host's event loop; one per device, the epoch word and its watch flag, are ours.
 *
 * @module
 */
import { NcStatus, NqRegister, ReapWord } from "./nc_registers.ts";

/** The NQ head's Int32 index in a NeuronCore's NQ block. */
const HEAD = NqRegister.HEAD >> 2;

const RESOLVED: Promise<void> = Promise.resolve();

/** One caller's completion wait (its `comp_efd`). */
interface ReapWait {
  /** The NeuronCore's NQ block, as Int32 words. */
  readonly words: Int32Array;
  /** The head the caller last saw: the wait ends when the device's head differs. */
  readonly want: number;
  /** The NeuronCore's status words (its count of pending waits). */
  readonly status: Int32Array;
  readonly resolve: () => void;
  /** The device's reap words (an abort wakes the reaper, which then drops the wait). */
  readonly reap: Int32Array;
  /** The waits on the caller's signal, and this wait's place among them. */
  aborts: AbortWaiters | undefined;
  slot: number;
  done: boolean;
}

/**
 * The waits in progress on each signal, told by one `abort` listener per signal (ours: the runtime passes one
 * long-lived signal per NeuronCore; adding and removing a listener at every wait was the largest item of the wait on
 * the host thread).
 */
const ABORT_WAITERS = new WeakMap<AbortSignal, AbortWaiters>();

/**
 * The waits on one signal. A wait's place is reused once it leaves: not a `Set`, whose storage a wait's add and delete
 * made JavaScriptCore rebuild every few executes, each rebuilt storage then surviving eden collections until a full
 * one. Ours.
 */
interface AbortWaiters {
  readonly waiting: Array<ReapWait | undefined>;
  readonly free: number[];
}

function abortWaiters(signal: AbortSignal): AbortWaiters {
  let set = ABORT_WAITERS.get(signal);
  if (set === undefined) {
    const waiters: AbortWaiters = set = { waiting: [], free: [] };
    ABORT_WAITERS.set(signal, waiters);
    signal.addEventListener("abort", () => {
      for (const w of waiters.waiting.slice()) if (w !== undefined) abandon(w);
    }, { once: true });
  }
  return set;
}

/** Ends a wait: its count and its place on the signal go, and its caller goes on. */
function settle(w: ReapWait): void {
  if (w.done) return;
  w.done = true;
  Atomics.sub(w.status, NcStatus.HOST_WAITERS, 1);
  const a = w.aborts;
  if (a !== undefined) {
    a.waiting[w.slot] = undefined;
    a.free.push(w.slot);
    w.aborts = undefined;
  }
  w.resolve();
}

/**
 * Ends a wait whose signal aborted, at once (a notify reaches an async sleeper only on a later task), and wakes the
 * reaper so that it drops the wait, and stops sleeping when no other is left.
 */
function abandon(w: ReapWait): void {
  settle(w);
  Atomics.notify(w.reap, ReapWord.EPOCH);
}

/** The completion waits of one device and their one sleeper. */
export class CompletionReaper {
  readonly #reap: Int32Array;
  #waits: ReapWait[] = [];
  #watching = false;
  #closed = false;

  /** @param reap The device's reap words ({@linkcode ReapWord}), the same buffer its NeuronCores' producers advance. */
  constructor(reap: Int32Array) {
    this.#reap = reap;
  }

  /** Completion waits pending. */
  get pending(): number {
    let n = 0;
    for (const w of this.#waits) if (!w.done) n++;
    return n;
  }

  /**
   * Resolves when the NQ head in `words` differs from `head`, when `signal` aborts, or when the reaper closes. Counts
   * itself in the NeuronCore's {@linkcode NcStatus.HOST_WAITERS} while it is pending.
   *
   * @param words The NeuronCore's NQ block as Int32 words.
   * @param status The NeuronCore's status words.
   * @param head The head the caller last saw.
   * @param signal Ends the wait early.
   */
  wait(words: Int32Array, status: Int32Array, head: number, signal?: AbortSignal): Promise<void> {
    const want = head | 0;
    if (Atomics.load(words, HEAD) !== want || signal?.aborted === true || this.#closed) return RESOLVED;
    const { promise, resolve } = Promise.withResolvers<void>();
    const w: ReapWait = {
      words,
      want,
      status,
      resolve,
      reap: this.#reap,
      aborts: undefined,
      slot: -1,
      done: false,
    };
    Atomics.add(status, NcStatus.HOST_WAITERS, 1);
    if (signal !== undefined) {
      const a = abortWaiters(signal);
      w.aborts = a;
      w.slot = a.free.pop() ?? a.waiting.length;
      a.waiting[w.slot] = w;
    }
    this.#waits.push(w);
    if (!this.#watching) void this.#watch();
    return promise;
  }

  /** Releases every wait and every later one at once (the portal closes). */
  close(): void {
    this.#closed = true;
    for (const w of this.#waits) settle(w);
    this.#waits = [];
    Atomics.notify(this.#reap, ReapWord.EPOCH);
  }

  /** Releases the waits whose head moved (or that ended otherwise) and keeps the rest; returns how many are left. */
  #look(): number {
    const waits = this.#waits;
    const closed = this.#closed;
    let kept = 0;
    for (let i = 0; i < waits.length; i++) {
      const w = waits[i];
      if (w.done) continue;
      if (closed || Atomics.load(w.words, HEAD) !== w.want) settle(w);
      else waits[kept++] = w;
    }
    waits.length = kept;
    return kept;
  }

  /**
   * The sleeper: loads the epoch, says it watches, looks at the heads, and sleeps on the epoch while waits are left.
   * Sequentially consistent with the device's head-store, epoch-advance, watch-load: a head published after the look
   * moved the epoch past the value it sleeps on, and found it watching.
   */
  async #watch(): Promise<void> {
    this.#watching = true;
    const reap = this.#reap;
    try {
      for (;;) {
        const epoch = Atomics.load(reap, ReapWord.EPOCH);
        Atomics.store(reap, ReapWord.WATCHING, 1);
        if (this.#look() === 0) return;
        const r = Atomics.waitAsync(reap, ReapWord.EPOCH, epoch);
        if (r.async) await r.value;
      }
    } finally {
      Atomics.store(reap, ReapWord.WATCHING, 0);
      this.#watching = false;
    }
  }
}
