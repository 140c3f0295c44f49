/**
 * The limit for a device off the HTTP thread, with nothing of ours: a bare Worker over one SharedArrayBuffer that
 * applies relu to 8 floats per request. The host writes the slot, rings with a store and an `Atomics.notify` (only
 * when the Worker sleeps), and awaits the slot's word with `Atomics.waitAsync`: the same thread hops as the device
 * agent, without the runtime. Used by bench/http.ts. Ours.
 *
 * @module
 */

/** Layout of the shared buffer. */
export const BareRing = {
  WRITTEN: 0,
  SLEEPING: 1,
  STOP: 2,
  HEADER_WORDS: 4,
  SLOTS: 256,
  FLOATS: 8,
  DATA_OFFSET: 4096,
  DONE_OFFSET: 4096 + 256 * 8 * 4,
  BYTES: 4096 + 256 * 8 * 4 + 256 * 4,
} as const;

/** A bare device: relu over 8 floats per call, in a Worker. */
export class BareDevice {
  readonly #worker: Worker;
  readonly #ring: Int32Array;
  readonly #data: Float32Array;
  readonly #done: Int32Array;
  readonly #free: number[] = [];
  readonly #waiting: (() => void)[] = [];
  #written = 0;

  /**
   * @param inFlight Requests on the device at once (1 to {@linkcode BareRing.SLOTS}, the default); the others wait
   *   for a slot in order. A device that runs one execution per NeuronCore at a time has as many as it has cores.
   */
  constructor(inFlight: number = BareRing.SLOTS) {
    if (!Number.isInteger(inFlight) || inFlight < 1 || inFlight > BareRing.SLOTS) {
      throw new RangeError(`A bare device takes 1 to ${BareRing.SLOTS} requests at once, not ${inFlight}`);
    }
    const sab = new SharedArrayBuffer(BareRing.BYTES);
    this.#ring = new Int32Array(sab, 0, BareRing.HEADER_WORDS + BareRing.SLOTS);
    this.#data = new Float32Array(sab, BareRing.DATA_OFFSET, BareRing.SLOTS * BareRing.FLOATS);
    this.#done = new Int32Array(sab, BareRing.DONE_OFFSET, BareRing.SLOTS);
    for (let i = inFlight - 1; i >= 0; i--) this.#free.push(i);
    this.#worker = new Worker(new URL("./_bare_device_worker.ts", import.meta.url), { type: "module" });
    this.#worker.postMessage(sab);
  }

  /** relu of 8 floats, computed by the Worker. */
  async relu(x: ArrayLike<number>): Promise<number[]> {
    let slot = this.#free.pop();
    while (slot === undefined) {
      await new Promise<void>((r) => this.#waiting.push(r));
      slot = this.#free.pop();
    }
    try {
      const base = slot * BareRing.FLOATS;
      for (let i = 0; i < BareRing.FLOATS; i++) this.#data[base + i] = x[i];
      const before = Atomics.load(this.#done, slot);
      const ring = this.#ring;
      ring[BareRing.HEADER_WORDS + (this.#written % BareRing.SLOTS)] = slot;
      Atomics.store(ring, BareRing.WRITTEN, ++this.#written);
      if (Atomics.load(ring, BareRing.SLEEPING) !== 0) Atomics.notify(ring, BareRing.WRITTEN);
      while (Atomics.load(this.#done, slot) === before) {
        const w = Atomics.waitAsync(this.#done, slot, before);
        if (w.async) await w.value;
      }
      return Array.from(this.#data.subarray(base, base + BareRing.FLOATS));
    } finally {
      this.#free.push(slot);
      this.#waiting.shift()?.();
    }
  }

  /** The live JS cells of the Worker's heap (Bun), after a full collection there when `collect`; else `undefined`. */
  heapCells(collect: boolean): Promise<number | undefined> {
    return new Promise((resolve) => {
      const w = this.#worker;
      const onMessage = (e: MessageEvent<{ cells?: number }>) => {
        w.removeEventListener("message", onMessage);
        resolve(e.data.cells);
      };
      w.addEventListener("message", onMessage);
      w.postMessage({ cells: collect });
    });
  }

  /** Stops the Worker. */
  close(): void {
    Atomics.store(this.#ring, BareRing.STOP, 1);
    Atomics.notify(this.#ring, BareRing.WRITTEN);
    this.#worker.terminate();
  }
}
