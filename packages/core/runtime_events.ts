/**
 * The runtime's lifecycle log: the steps of bring-up, staging and teardown (`ucode_nx_core_create nc=0 PE`, …) in
 * order, kept in a bounded ring (a long-running server loads and unloads without growing it) and offered to
 * subscribers as they happen. Ours.
 *
 * @module
 */

/** The lifecycle log of one runtime. */
export class RuntimeEvents {
  readonly #capacity: number;
  readonly #ring: string[] = [];
  #dropped = 0;
  readonly #listeners = new Set<(event: string) => void>();

  /** Keeps the last `capacity` events (default 4096). */
  constructor(capacity = 4096) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`Event log capacity ${capacity} is not a positive integer`);
    }
    this.#capacity = capacity;
  }

  /** Records one event and hands it to every subscriber (a throwing subscriber is dropped, not the event). */
  push(event: string): void {
    this.#ring.push(event);
    if (this.#ring.length > this.#capacity) {
      this.#ring.splice(0, this.#ring.length - this.#capacity);
      this.#dropped++;
    }
    for (const l of this.#listeners) {
      try {
        l(event);
      } catch {
        this.#listeners.delete(l);
      }
    }
  }

  /** The events kept, oldest first (a copy). */
  list(): string[] {
    return [...this.#ring];
  }

  /** Events that no longer fit the ring. */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * Calls `listener` with every later event; returns the subscription (dispose it, or `using` it, to stop).
   *
   * @example Watch a close
   * ```ts ignore
   * using sub = rt.events.subscribe((e) => console.log(e));
   * await rt.close();
   * ```
   */
  subscribe(listener: (event: string) => void): Disposable {
    this.#listeners.add(listener);
    return { [Symbol.dispose]: () => void this.#listeners.delete(listener) };
  }
}
