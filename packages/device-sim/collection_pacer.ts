/**
 * Paces the garbage collector of a thread that runs a simulated device, on Bun. Ours: the seeds say nothing of a
 * host language's collector.
 *
 * JavaScriptCore counts the SharedArrayBuffers a thread holds towards its heap: the device's memories make about
 * 300 MB of the device agent's heap in `nrt serve --demo`, where its JS objects take a few MB. On a machine with
 * 16 GB or more it lets a heap grow to about four times its size after a collection before it collects again
 * (`heapGrowthMaxIncrease`), so the agent could gather nearly 900 MB of garbage on its own budget. Bun's idle timer
 * asks for an asynchronous collection every second and, once the heap has not grown for 30 seconds, every 30
 * seconds; it returns to its one-second pace only at one of those ticks. So the first load after half a minute of
 * quiet ran for up to 30 s with no collection, and with the pages kept (`MIMALLOC_PURGE_DELAY=-1`,
 * packages/cli/bin/bun_env.mjs) `nrt serve --demo` stayed at 680–850 MB resident where continuous load plateaus
 * at about 340 MB (docs/measurements.md, "resident memory after an idle spell").
 *
 * The pacer asks for the same asynchronous collection (`Bun.gc(false)`) every 250 ms while its device works (a
 * doorbell since the last tick), and stops its timer once a tick finds none: an idle device costs no wake-ups. A
 * one-second pace was enough for the agent's thread, not for a device on the HTTP thread (`--agents inline`), whose
 * heap takes the requests' garbage too: it still kept 500 MB. With 250 ms, after 40 s idle spells: 325 MB with the
 * agent, 265 MB inline, and the same requests per second as without it (eight alternating `wrk` rounds). Where there
 * is no `Bun.gc` {@linkcode threadPacer} does nothing: on Deno the same idle spells left `nrt serve --demo` at 278 MB.
 *
 * @module
 */

/** The interval between two collections while a device works, in ms (the measurement above). */
export const PACE_MS = 250;

/** The collection one tick asks for. */
export type Collect = () => void;

/** Asks for a collection once an interval while {@linkcode CollectionPacer.note} is called, and sleeps otherwise. */
export class CollectionPacer {
  readonly #collect: Collect | undefined;
  readonly #intervalMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #worked = false;
  #collections = 0;

  /**
   * @param collect The collection to ask for; `undefined` makes a pacer that never arms a timer.
   * @param intervalMs The interval between two collections while work goes on.
   */
  constructor(collect: Collect | undefined, intervalMs = PACE_MS) {
    this.#collect = collect;
    this.#intervalMs = intervalMs;
  }

  /** The device did work (a doorbell): arms the timer if it sleeps. One store and one test when it is armed. */
  note(): void {
    this.#worked = true;
    if (this.#timer === undefined && this.#collect !== undefined) this.#arm();
  }

  /** Whether the timer is armed. */
  get active(): boolean {
    return this.#timer !== undefined;
  }

  /** How many collections the pacer has asked for. */
  get collections(): number {
    return this.#collections;
  }

  /** Disarms the timer (a later {@linkcode note} arms it again). */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    this.#timer = setInterval(() => this.#tick(), this.#intervalMs);
    // The timer must not keep a process or a Worker alive on its own.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  #tick(): void {
    if (!this.#worked) return this.stop();
    this.#worked = false;
    this.#collections++;
    this.#collect!();
  }
}

let pacer: CollectionPacer | undefined;

/** This thread's pacer: on Bun it asks `Bun.gc(false)` for an asynchronous collection; elsewhere it does nothing. */
export function threadPacer(): CollectionPacer {
  if (pacer === undefined) {
    const bun = (globalThis as { Bun?: { gc?: (force: boolean) => void } }).Bun;
    const gc = bun?.gc;
    pacer = new CollectionPacer(typeof gc === "function" ? () => gc.call(bun, false) : undefined);
  }
  return pacer;
}
