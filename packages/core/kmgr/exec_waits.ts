/**
 * The `NEURON_RT_EXEC_TIMEOUT` budgets of the executions in flight, on one timer, and per NeuronCore the signal that
 * ends a completion wait whose budget ran out. Ours: the seed fixes what a timeout does (lifecycle-error-model §5.4:
 * `NRT_TIMEOUT` once the budget passes), not how the host counts it. One timer and one signal per NeuronCore, instead
 * of an `AbortController`, a timer and a race per execution: with the simulated portal's cheaper wait, the host
 * thread's CPU per execute went from 32–38 to 29–35 µs on Bun (4 executions in flight, in process).
 *
 * The budgets are kept in deadline order. The timer is armed for the earliest one and left armed when that execution
 * finishes while others still run: when it fires it drops the finished entries, ends the waits whose deadline passed,
 * and is armed again for the next one still running, so executions that overlap or follow each other re-arm it about
 * once per budget. When the last one finishes the timer is left armed too: it fires at its deadline (at most one
 * budget after that execution started), finds nothing live and stops, so an idle runtime holds at most that one timer
 * for at most one budget, and `close()` stops it at once. Stopping it as soon as the runtime went idle made the first
 * execute after every pause arm it again (a `setTimeout`, its `AbortController` and promise, cold): a no-op execute
 * after 2 ms of quiet took 92–107 µs with it against 75–87 without, and after 20 ms 171–230 against 151–182 (Bun,
 * alternating runs; docs/measurements.md, "the execute after a pause").
 *
 * A budget that passes ends its execution's wait (the portal's `notificationWait` settles when its signal aborts) and
 * the NeuronCore gets a fresh signal. Another execution whose wait on that NeuronCore ended with it finds its own
 * budget not passed and waits again.
 *
 * @module
 */
import type { Clock } from "../clock.ts";

/** The abort reason of an ended wait (one object: a new `Error` per abort would build a stack trace each time). */
const WAIT_ENDED = new Error("the execution's completion wait ended");

/** One execution's budget, as {@linkcode ExecWaits.arm} returns it. */
export interface ArmedBudget {
  /** The budget passed before the execution finished. */
  readonly expired: boolean;
  /** The execution finished: its budget no longer counts. */
  cancel(): void;
}

/**
 * One armed budget. A class, not an object with its own `cancel` closure: an execute arms one (ours: two allocations
 * less per execute).
 */
class Entry implements ArmedBudget {
  expired = false;
  live = true;
  readonly deadline: number;
  readonly nc: number;
  /** Dropped when the budget is cancelled: a finished entry waiting in the queue holds nothing of its execution. */
  expire: (() => void) | undefined;
  readonly #finished: (e: Entry) => void;

  constructor(deadline: number, nc: number, expire: (() => void) | undefined, finished: (e: Entry) => void) {
    this.deadline = deadline;
    this.nc = nc;
    this.expire = expire;
    this.#finished = finished;
  }

  cancel(): void {
    if (!this.live) return;
    this.live = false;
    this.expire = undefined;
    this.#finished(this);
  }
}

/** The execution budgets of one runtime. */
export class ExecWaits {
  readonly #clock: Clock;
  /**
   * Live and finished entries, earliest deadline first, from `#head` on; the places before it are emptied. The
   * finished entries at the front are dropped as they finish (executions mostly finish in the order they started):
   * one kept in the queue until a compaction was carried into the old generation by each eden collection, with its
   * `expire` closure (Bun: about 0.3 objects and 20 bytes per REST request, left to the next full collection).
   */
  #queue: Array<Entry | undefined> = [];
  #head = 0;
  /** Set while the timer's pass walks the queue: a budget cancelled from an `expire` call then leaves it in place. */
  #firing = false;
  #live = 0;
  readonly #signals = new Map<number, AbortController>();
  /** The armed timer: when it fires, and what cancels it. */
  #timer: { readonly at: number; readonly stop: AbortController } | undefined;
  #closed = false;

  /** Budgets counted on `clock` (virtual in tests). */
  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Budgets armed and not finished. */
  get armed(): number {
    return this.#live;
  }

  /** Entries the queue holds, finished ones not dropped yet included (bounded by about twice {@linkcode armed}). */
  get queued(): number {
    return this.#queue.length - this.#head;
  }

  /** The signal a completion wait on NeuronCore `nc` passes to the portal: aborted when the execution's budget ends. */
  signal(nc: number): AbortSignal {
    let c = this.#signals.get(nc);
    if (c === undefined) this.#signals.set(nc, c = new AbortController());
    return c.signal;
  }

  /** A budget cancelled while live. */
  readonly #finished = (_: Entry): void => {
    // Every budget finished: the queue empties, and the timer stays armed until it fires (see the module doc).
    if (--this.#live === 0) {
      this.#queue.length = 0;
      this.#head = 0;
      return;
    }
    if (this.#firing) return;
    const q = this.#queue;
    let head = this.#head;
    while (head < q.length && !q[head]!.live) q[head++] = undefined;
    // Compacted in place once the emptied front is most of the queue.
    if (head >= 64 && 2 * head >= q.length) {
      q.copyWithin(0, head);
      q.length -= head;
      head = 0;
    }
    this.#head = head;
  };

  /**
   * Counts an execution's budget on NeuronCore `nc` until `deadline` (clock ms). When it passes first, the budget reads
   * `expired`, `expire` (if given) is called and the NeuronCore's wait signal aborts.
   */
  arm(nc: number, deadline: number, expire?: () => void): ArmedBudget {
    const entry = new Entry(deadline, nc, expire, this.#finished);
    if (this.#closed) {
      entry.live = false;
      return entry;
    }
    // Finished entries wait for the timer, up to a budget long; under a steady load they are dropped here instead.
    if (this.#queue.length - this.#head > 2 * this.#live + 1024) {
      this.#queue = this.#queue.filter((e) => e?.live === true);
      this.#head = 0;
    }
    const q = this.#queue;
    let at = q.length;
    while (at > this.#head && q[at - 1]!.deadline > deadline) at--;
    q.splice(at, 0, entry);
    this.#live++;
    if (this.#timer === undefined || this.#timer.at > deadline) this.#arm(deadline);
    return entry;
  }

  /** Ends the completion wait pending on NeuronCore `nc`, if any; the NeuronCore gets a fresh signal. */
  interrupt(nc: number): void {
    const c = this.#signals.get(nc);
    this.#signals.delete(nc);
    c?.abort(WAIT_ENDED);
  }

  /** Stops the timer; budgets armed from now on never expire (the runtime is closing). */
  close(): void {
    this.#closed = true;
    this.#timer?.stop.abort();
    this.#timer = undefined;
    this.#queue = [];
    this.#head = 0;
    this.#live = 0;
  }

  #arm(at: number): void {
    this.#timer?.stop.abort();
    const stop = new AbortController();
    const timer = { at, stop };
    this.#timer = timer;
    this.#clock.sleep(Math.max(0, at - this.#clock.now()), stop.signal).then(() => {
      if (this.#timer === timer) this.#fire();
    }, () => {});
  }

  #fire(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    const q = this.#queue;
    let k = this.#head;
    this.#firing = true;
    try {
      for (; k < q.length && (!q[k]!.live || q[k]!.deadline <= now); k++) {
        const e = q[k]!;
        if (!e.live) continue;
        e.live = false;
        this.#live--;
        e.expired = true;
        e.expire?.();
        this.interrupt(e.nc);
      }
    } finally {
      this.#firing = false;
    }
    q.splice(0, k);
    this.#head = 0;
    if (q.length > 0) this.#arm(q[0]!.deadline);
  }
}
