/**
 * Ours: the admission gate that bounds the calls a server serves at once. A call enters when its headers arrive,
 * before its message is read: up to `maxActive` calls are admitted (their messages read, their work done), up to
 * `maxPending` more wait in FIFO order with their messages unread, and the rest are refused. So the request bytes
 * held in memory stay below `maxActive` messages whatever clients send. Closing the gate refuses the waiting calls
 * and every later one, while the admitted calls run to their end.
 *
 * @module
 */

/** Why the gate refused a call. */
export type GateRefusal = "full" | "closed";

/** What the gate does with one call. */
export interface GateCall {
  /** The call may read its message and run; called at most once. */
  admit(): void;
  /** The call must end now, unread; called at most once, never after `admit`. */
  refuse(why: GateRefusal): void;
}

interface Waiter {
  readonly call: GateCall;
  state: "pending" | "active" | "done";
}

/**
 * A FIFO admission gate.
 *
 * @example Admit one call at a time
 * ```ts
 * import { CallGate } from "@nrt/grpc-api";
 * const gate = new CallGate(1, 8);
 * const log: string[] = [];
 * const release = gate.enter({ admit: () => log.push("a"), refuse: () => log.push("refused a") });
 * gate.enter({ admit: () => log.push("b"), refuse: () => log.push("refused b") });
 * release(); // a ends: b is admitted
 * console.log(log); // ["a", "b"]
 * ```
 */
export class CallGate {
  /** Calls admitted at once, at most. */
  readonly maxActive: number;
  /** Calls waiting for admission, at most. */
  readonly maxPending: number;
  readonly #queue: Waiter[] = [];
  #active = 0;
  #closed = false;
  #idle: Array<() => void> = [];

  /**
   * Creates an open gate.
   *
   * @param maxActive Calls admitted at once (at least 1).
   * @param maxPending Calls that may wait (0 or more).
   * @throws {RangeError} For a bound that is not an integer in range.
   */
  constructor(maxActive: number, maxPending: number) {
    if (!Number.isSafeInteger(maxActive) || maxActive < 1) {
      throw new RangeError(`Cannot create a call gate: maxActive ${maxActive} is not an integer of at least 1`);
    }
    if (!Number.isSafeInteger(maxPending) || maxPending < 0) {
      throw new RangeError(`Cannot create a call gate: maxPending ${maxPending} is not a non-negative integer`);
    }
    this.maxActive = maxActive;
    this.maxPending = maxPending;
  }

  /** Calls admitted and not yet ended. */
  get active(): number {
    return this.#active;
  }

  /** Calls waiting for admission. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Whether the gate refuses new calls. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Admits a call now, queues it, or refuses it (synchronously, through `call`).
   *
   * @param call What to do when the call is admitted or refused.
   * @returns The call's end: releases its slot (admitting the next waiting call) or takes it out of the queue.
   *   Calling it again does nothing.
   */
  enter(call: GateCall): () => void {
    if (this.#closed) {
      call.refuse("closed");
      return () => {};
    }
    const w: Waiter = { call, state: "pending" };
    if (this.#active < this.maxActive) this.#admit(w);
    else if (this.#queue.length < this.maxPending) this.#queue.push(w);
    else {
      call.refuse("full");
      return () => {};
    }
    return () => this.#release(w);
  }

  /**
   * Refuses every waiting call and every later one; admitted calls keep running.
   *
   * @returns A promise that settles when no admitted call is left.
   */
  close(): Promise<void> {
    this.#closed = true;
    for (const w of this.#queue.splice(0)) {
      w.state = "done";
      w.call.refuse("closed");
    }
    return this.#whenIdle();
  }

  #admit(w: Waiter): void {
    w.state = "active";
    this.#active++;
    w.call.admit();
  }

  #release(w: Waiter): void {
    const was = w.state;
    w.state = "done";
    if (was === "pending") {
      this.#queue.splice(this.#queue.indexOf(w), 1);
    } else if (was === "active") {
      this.#active--;
      while (this.#active < this.maxActive && this.#queue.length > 0) this.#admit(this.#queue.shift()!);
      if (this.#active === 0) { for (const resolve of this.#idle.splice(0)) resolve(); }
    }
  }

  #whenIdle(): Promise<void> {
    if (this.#active === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}
