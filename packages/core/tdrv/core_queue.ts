/**
 * `CoreQueue`: the FIFO of one NeuronCore — the executions that take the core in turn (`h_running_model`
 * serialisation, seed: runtime-synthesis §4), the opcode-table swaps that must not land between another model's
 * MODEL_SWITCH and its EXTENDED_INST, and the teardown that waits for both. A turn is taken synchronously (so the
 * order is the order of the calls) and held until its disposable is disposed.
 *
 * @module
 */

/** A turn on one or more cores: dispose it to let the next one in. */
export interface CoreTurn extends Disposable {
  /** Resolves once every earlier turn on these cores has ended. */
  readonly ready: Promise<void>;
}

const noop = (): void => {};

/** The FIFO of one NeuronCore. */
export class CoreQueue {
  #tail: Promise<void> = Promise.resolve();

  /**
   * Takes the next turn on every queue of `queues` at once, in call order: the turn is ready when every earlier
   * turn on any of them has ended. Taking it never awaits, so two calls keep their order.
   */
  static acquire(queues: readonly CoreQueue[]): CoreTurn {
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    let ready: Promise<void>;
    if (queues.length === 1) {
      // One core (most requests): the turn is ready when the previous turn on it ends.
      ready = queues[0].#tail;
      queues[0].#tail = mine;
    } else {
      const earlier: Array<Promise<void>> = [];
      for (const q of queues) {
        earlier.push(q.#tail);
        q.#tail = mine;
      }
      ready = Promise.all(earlier).then(noop);
    }
    let released = false;
    return {
      ready,
      [Symbol.dispose]() {
        if (released) return;
        released = true;
        release();
      },
    };
  }

  /** Takes the next turn on this core. */
  acquire(): CoreTurn {
    return CoreQueue.acquire([this]);
  }

  /** Resolves once every turn taken so far has ended (teardown). */
  idle(): Promise<void> {
    return this.#tail;
  }
}
