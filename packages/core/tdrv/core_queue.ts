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

/** A turn: a class, so that taking one makes no closures beyond its promise's resolvers (one per execute). */
class Turn implements CoreTurn {
  readonly ready: Promise<void>;
  #release: (() => void) | undefined;

  constructor(ready: Promise<void>, release: () => void) {
    this.ready = ready;
    this.#release = release;
  }

  [Symbol.dispose](): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}

/** The FIFO of one NeuronCore. */
export class CoreQueue {
  #tail: Promise<void> = Promise.resolve();

  /**
   * Takes the next turn on every queue of `queues` at once, in call order: the turn is ready when every earlier
   * turn on any of them has ended. Taking it never awaits, so two calls keep their order.
   */
  static acquire(queues: readonly CoreQueue[]): CoreTurn {
    const mine = Promise.withResolvers<void>();
    let ready: Promise<void>;
    if (queues.length === 1) {
      // One core (most requests): the turn is ready when the previous turn on it ends.
      ready = queues[0].#tail;
      queues[0].#tail = mine.promise;
    } else {
      const earlier: Array<Promise<void>> = [];
      for (const q of queues) {
        earlier.push(q.#tail);
        q.#tail = mine.promise;
      }
      ready = Promise.all(earlier).then(noop);
    }
    return new Turn(ready, mine.resolve);
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
