/**
 * The runtime's source of time. Everything that waits (the execute timeout, polling loops, retry back-off) takes a
 * {@linkcode Clock} instead of calling `setTimeout` itself, so that tests run it on a {@linkcode VirtualClock}: a
 * 600-second `NEURON_RT_EXEC_TIMEOUT` then elapses in microseconds of wall time.
 *
 * @example Drive a timeout with a virtual clock
 * ```ts
 * import { VirtualClock } from "@nrt/core";
 * const clock = new VirtualClock();
 * let timedOut = false;
 * const wait = clock.sleep(30_000).then(() => { timedOut = true; });
 * await clock.advance(30_000);
 * await wait;
 * console.log(timedOut, clock.now()); // true 30000
 * ```
 *
 * @module
 */

/** A monotonic clock and a cancellable sleep. */
export interface Clock {
  /** Milliseconds since an arbitrary origin; never decreases. */
  now(): number;
  /**
   * Resolves once `ms` milliseconds have passed on this clock. If `signal` aborts first, the promise rejects with
   * `signal.reason` at once and the clock holds no timer for it any more.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function checkDelay(what: string, ms: number): void {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`Cannot ${what} ${String(ms)} ms: expected a finite, non-negative number`);
  }
}

/** The largest delay `setTimeout` honours; a larger one fires at once (WHATWG timers: a signed 32-bit integer). */
const MAX_TIMER_MS = 0x7fff_ffff;

/**
 * The real clock: `performance.now()` and `setTimeout`. A sleep longer than `setTimeout`'s 2^31−1 ms limit (about
 * 24.8 days, which a large `NEURON_RT_EXEC_TIMEOUT` can exceed) is split into several timers.
 *
 * @example Sleep with a deadline
 * ```ts
 * import { SystemClock } from "@nrt/core";
 * const clock = new SystemClock();
 * const start = clock.now();
 * await clock.sleep(5, AbortSignal.timeout(1_000));
 * console.log(clock.now() - start >= 4); // true
 * ```
 */
export class SystemClock implements Clock {
  /** `performance.now()`: monotonic milliseconds since the time origin. */
  now(): number {
    return performance.now();
  }

  /**
   * Waits `ms` real milliseconds.
   *
   * @param ms The delay; a finite number `>= 0`.
   * @param signal Cancels the wait: the promise rejects with `signal.reason` and the timer is cleared.
   * @returns A promise that settles when the delay passes or `signal` aborts.
   * @throws {RangeError} If `ms` is negative, NaN or infinite.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    checkDelay("sleep", ms);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const deadline = performance.now() + ms;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const arm = (remaining: number): void => {
        timer = setTimeout(() => {
          const left = deadline - performance.now();
          // Only a sleep split across several timers can have time left when one fires.
          if (remaining > MAX_TIMER_MS && left > 0) return arm(left);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        }, Math.min(remaining, MAX_TIMER_MS));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      arm(ms);
    });
  }
}

interface Sleeper {
  readonly deadline: number;
  readonly resolve: () => void;
  readonly signal?: AbortSignal;
  readonly onAbort?: () => void;
}

/**
 * Lets every pending microtask, including those the microtasks queue in turn, run: a macrotask boundary.
 * `setImmediate` (Bun, Deno 2, Node) costs ~10 µs and is not clamped the way nested `setTimeout(0)` is (4 ms).
 */
function macrotask(): Promise<void> {
  const g = globalThis as { setImmediate?: (fn: () => void) => unknown };
  return new Promise<void>((resolve) => {
    if (typeof g.setImmediate === "function") g.setImmediate(resolve);
    else setTimeout(resolve, 0);
  });
}

/**
 * A clock for tests: time stands still until {@linkcode VirtualClock.advance} or
 * {@linkcode VirtualClock.runUntilIdle} moves it. Sleepers wake in deadline order (ties in the order they slept),
 * and `now()` reads each sleeper's deadline while it wakes. Between two wake-ups the clock lets all pending
 * promise reactions run, so a sleeper that sleeps again, or an `async` chain of sleeps, is woken in the same
 * `advance` if its new deadline is in range.
 *
 * @example Time out a stuck execution
 * ```ts
 * import { VirtualClock } from "@nrt/core";
 * const clock = new VirtualClock();
 * const done = new AbortController();
 * const timeout = clock.sleep(600_000, done.signal).then(() => "timeout", () => "completed");
 * await clock.advance(600_000);
 * console.log(await timeout, clock.pendingSleepers); // "timeout" 0
 * ```
 */
export class VirtualClock implements Clock {
  #now: number;
  /** Sorted by deadline; equal deadlines in the order they slept. */
  readonly #sleepers: Sleeper[] = [];
  /** Serialises concurrent `advance` / `runUntilIdle` calls. */
  #moving: Promise<unknown> = Promise.resolve();

  /**
   * Creates a virtual clock.
   *
   * @param startMs The initial reading of {@linkcode VirtualClock.now}; defaults to 0.
   * @throws {RangeError} If `startMs` is not a finite, non-negative number.
   */
  constructor(startMs = 0) {
    checkDelay("start a virtual clock at", startMs);
    this.#now = startMs;
  }

  /** The virtual time in milliseconds. */
  now(): number {
    return this.#now;
  }

  /** How many sleeps are waiting for time to move. */
  get pendingSleepers(): number {
    return this.#sleepers.length;
  }

  /**
   * Waits until virtual time reaches `now() + ms`. A zero delay still waits for the next `advance` (even
   * `advance(0)`), as a zero `setTimeout` waits for the next turn of the event loop.
   *
   * @param ms The delay; a finite number `>= 0`.
   * @param signal Cancels the wait: the promise rejects with `signal.reason` and the sleeper is removed.
   * @returns A promise that settles when the clock passes the deadline or `signal` aborts.
   * @throws {RangeError} If `ms` is negative, NaN or infinite.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    checkDelay("sleep", ms);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = signal && ((): void => {
        const i = this.#sleepers.indexOf(sleeper);
        if (i >= 0) this.#sleepers.splice(i, 1);
        reject(signal.reason);
      });
      const sleeper: Sleeper = { deadline: this.#now + ms, resolve, signal, onAbort };
      this.#insert(sleeper);
      if (signal && onAbort) signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Moves time forward by `ms`, waking every sleeper whose deadline falls within it, in deadline order, and
   * letting pending promise reactions run after each wake-up. Then `now()` is the old time plus `ms`.
   *
   * @param ms How far to move; a finite number `>= 0`.
   * @returns A promise that resolves once the clock has reached the new time.
   * @throws {RangeError} If `ms` is negative, NaN or infinite.
   */
  advance(ms: number): Promise<void> {
    checkDelay("advance a virtual clock by", ms);
    return this.#serialise(async () => {
      const target = this.#now + ms;
      await this.#wakeUntil(() => target);
      this.#now = target;
    });
  }

  /**
   * Wakes sleepers, earliest first, until none is left, moving time to each deadline; sleepers that sleep again
   * are woken too. Time stays at the last deadline woken.
   *
   * @param maxWakeUps A bound on wake-ups, so that a sleeper that always sleeps again (a ticker) fails the test
   *   instead of hanging it; defaults to 100 000.
   * @returns How many sleepers were woken.
   * @throws {RangeError} If more than `maxWakeUps` sleepers would be woken.
   */
  runUntilIdle(maxWakeUps = 100_000): Promise<number> {
    return this.#serialise(() => this.#wakeUntil(() => Infinity, maxWakeUps));
  }

  #serialise<T>(run: () => Promise<T>): Promise<T> {
    const result = this.#moving.then(run);
    this.#moving = result.catch(() => {});
    return result;
  }

  async #wakeUntil(limit: () => number, maxWakeUps = Infinity): Promise<number> {
    let woken = 0;
    // Let reactions already queued (e.g. a test that started an async chain just before advancing) sleep first.
    await macrotask();
    for (;;) {
      const next = this.#sleepers[0];
      if (next === undefined || next.deadline > limit()) return woken;
      if (woken >= maxWakeUps) {
        throw new RangeError(`Cannot run the virtual clock until idle: more than ${maxWakeUps} wake-ups`);
      }
      this.#sleepers.shift();
      this.#now = Math.max(this.#now, next.deadline);
      if (next.signal && next.onAbort) next.signal.removeEventListener("abort", next.onAbort);
      next.resolve();
      woken++;
      await macrotask();
    }
  }

  #insert(sleeper: Sleeper): void {
    // Binary search for the first sleeper strictly later than this one, so equal deadlines wake in FIFO order.
    let lo = 0;
    let hi = this.#sleepers.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#sleepers[mid]!.deadline <= sleeper.deadline) lo = mid + 1;
      else hi = mid;
    }
    this.#sleepers.splice(lo, 0, sleeper);
  }
}
