/**
 * A table of the executions in flight, by sequence number, for the hooks that follow each execution from its start to
 * its end (the dashboard's steps, the Neuron tools' activity). Ours.
 *
 * Not a `Map`: a key added and deleted for every execution made JavaScriptCore (Bun) rebuild the map's storage every
 * few executions, and each storage it drops points to the next one, so an eden collection kept them all, and the
 * entries they held, until the next full collection (about 1 KB a request of the REST path's old generation).
 * Here a finished entry's place is reused in place. A lookup scans the sequence numbers in flight, which the
 * instances of the served models bound (tens).
 *
 * @module
 */

/** Entries by sequence number; at most as many places as entries were ever in flight at once. */
export class InFlight<T> {
  /** The sequence number in each place, -1 where the place is free. */
  readonly #seqs: number[] = [];
  readonly #values: Array<T | undefined> = [];
  /** Free places, reused last-freed first. */
  readonly #free: number[] = [];

  /** Enters `value` for `seq` (a non-negative sequence number not in flight). */
  set(seq: number, value: T): void {
    const at = this.#free.pop() ?? this.#seqs.length;
    this.#seqs[at] = seq;
    this.#values[at] = value;
  }

  /** The value in flight for `seq`, if any. */
  get(seq: number): T | undefined {
    const at = this.#seqs.indexOf(seq);
    return at < 0 ? undefined : this.#values[at];
  }

  /** Removes and returns the value in flight for `seq`, if any. */
  take(seq: number): T | undefined {
    const at = this.#seqs.indexOf(seq);
    if (at < 0) return undefined;
    const value = this.#values[at];
    this.#seqs[at] = -1;
    this.#values[at] = undefined;
    this.#free.push(at);
    return value;
  }

  /** The values in flight, in no particular order. */
  *values(): IterableIterator<T> {
    for (let at = 0; at < this.#seqs.length; at++) if (this.#seqs[at] >= 0) yield this.#values[at] as T;
  }

  /** How many entries are in flight. */
  get size(): number {
    return this.#seqs.length - this.#free.length;
  }
}
