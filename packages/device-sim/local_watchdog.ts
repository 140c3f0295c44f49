/**
 * The device agent's watchdog for the ops it runs on its own thread (ours). The agent runs an op whose kernel is quick
 * on its own instances of the 8 Q7 cores (`Q7ClusterOptions.localOpBytes`, `localLearnNs`) instead of waking the
 * cluster's Workers: the two thread hops cost more than the Workers' parallelism gains. While such an op runs, the
 * agent's event loop is blocked, so its sequencer's watchdog timer, an `elapse` and a `close` wait. This class starts
 * one more Worker (q7/q7_watchdog.js) that watches the doorbell ring's watchdog words instead and sets the running
 * cluster's kill flag when the op's deadline passes on the device clock (the shared clock plus every `elapse` the host
 * made, which the host adds to the ring's skew word as it sends the message), when the host sends a Q7 reset of the
 * op's NeuronCore, or when it closes the device. The kernel then traps at its next guard poll. At its deadline, the
 * sequencer drops the run as its own watchdog would have; after a reset or close, the op never joins and the message,
 * once the agent takes it, drops the run as it drops a run whose op spins on the Workers.
 *
 * Costs: the Worker starts with the first cluster that runs local ops; it polls every 5 ms while local ops ran in the
 * last second, and sleeps otherwise (starting an op then rings its bell once). Arming and disarming are plain stores.
 *
 * @module
 */
import { DoorbellRing } from "./device_agent.ts";
import type { Q7LocalWatchdog } from "./q7/q7_cluster.ts";
import { type SpawnedWorker, spawnHere, type WorkerSpawner } from "./worker_spawn.ts";

/** The word indices q7_watchdog.js reads (sent in its "init" message). */
const WATCHDOG_WORDS = {
  STOP: DoorbellRing.STOP,
  SKEW_US_I64: DoorbellRing.SKEW_US_I64,
  KILL_ALL: DoorbellRing.KILL_ALL,
  BELL: DoorbellRing.WD_BELL,
  SLEEPING: DoorbellRing.WD_SLEEPING,
  GEN: DoorbellRing.LOCAL_GEN,
  CLUSTER: DoorbellRing.LOCAL_CLUSTER,
  DEADLINE_F64: DoorbellRing.LOCAL_DEADLINE_F64,
  POSTED: DoorbellRing.WD_POSTED,
  NC: DoorbellRing.LOCAL_NC,
  RESET_MASK: DoorbellRing.RESET_MASK,
  CAUSE: DoorbellRing.LOCAL_CAUSE,
  ADOPTED: DoorbellRing.WD_ADOPTED,
  HEADER_BYTES: DoorbellRing.HEADER_WORDS * 4,
} as const;

/** Rings the watchdog's bell (wakes it if it sleeps or polls). */
function ringBell(ring: Int32Array): void {
  Atomics.add(ring, DoorbellRing.WD_BELL, 1);
  Atomics.notify(ring, DoorbellRing.WD_BELL);
}

/** Host side: adds an `elapse` to the device clock's skew the watchdog reads (before the message is sent). */
export function addClockSkew(doorbells: SharedArrayBuffer, ms: number): void {
  const skew = new BigInt64Array(doorbells, 0, DoorbellRing.HEADER_WORDS >> 1);
  Atomics.add(skew, DoorbellRing.SKEW_US_I64, BigInt(Math.round(ms * 1000)));
  ringBell(new Int32Array(doorbells));
}

/** Host side: a Q7 reset of NeuronCore `nc` is on its way; a local op of that NeuronCore is stopped at once. */
export function resetLocalOps(doorbells: SharedArrayBuffer, nc: number): void {
  if (nc >= 32) return;
  const ring = new Int32Array(doorbells);
  Atomics.or(ring, DoorbellRing.RESET_MASK, 1 << nc);
  ringBell(ring);
}

/** Host side: the device is closing; a local op still running is stopped at once. */
export function killLocalOps(doorbells: SharedArrayBuffer): void {
  const ring = new Int32Array(doorbells);
  Atomics.store(ring, DoorbellRing.KILL_ALL, 1);
  ringBell(ring);
}

/** The agent's side of the watchdog. */
export class LocalWatchdog {
  readonly #buffer: SharedArrayBuffer;
  readonly #ring: Int32Array;
  readonly #deadline: Float64Array;
  readonly #spawn: WorkerSpawner;
  #worker: SpawnedWorker | undefined;
  #nextId = 1;

  /** The doorbell ring whose watchdog words this watchdog reads and writes. */
  get ring(): SharedArrayBuffer {
    return this.#buffer;
  }

  /**
   * A watchdog over the agent's doorbell ring; its Worker starts with the first {@linkcode LocalWatchdog.adopt}, with
   * `spawn` (default: on this thread).
   */
  constructor(doorbells: SharedArrayBuffer, spawn: WorkerSpawner = spawnHere) {
    this.#spawn = spawn;
    this.#buffer = doorbells;
    this.#ring = new Int32Array(doorbells);
    this.#deadline = new Float64Array(doorbells, 0, DoorbellRing.HEADER_WORDS >> 1);
  }

  #post(message: unknown): void {
    const w = this.#worker ??= this.#start();
    Atomics.add(this.#ring, DoorbellRing.WD_POSTED, 1);
    w.postMessage(message);
    ringBell(this.#ring);
  }

  #start(): SpawnedWorker {
    const w = this.#spawn("q7-watchdog");
    this.#worker = w;
    this.#post({ type: "init", ring: this.#buffer, words: WATCHDOG_WORDS });
    return w;
  }

  /**
   * Watches a cluster's memory (its kill flag is Int32 word `killWord`) and returns the cluster's id. Nothing waits for
   * the Worker: {@linkcode LocalWatchdog.ready} says when it has the memory. When it forgets the cluster, the Worker
   * subtracts 1 from Int32 word `usersWord` of the memory, if given (the cluster counted it among the memory's users).
   */
  adopt(memory: WebAssembly.Memory, killWord: number, usersWord = -1): number {
    const id = this.#nextId++;
    this.#post({ type: "adopt", id, memory, killWord, usersWord });
    return id;
  }

  /** Whether the Worker has taken cluster `id` (it takes them in order), so it can stop that cluster's local ops. */
  ready(id: number): boolean {
    return Atomics.load(this.#ring, DoorbellRing.WD_ADOPTED) >= id;
  }

  /** Stops watching cluster `id` (the Worker then counts itself out of the memory's users, see `adopt`). */
  forget(id: number): void {
    if (this.#worker !== undefined) this.#post({ type: "forget", id });
  }

  /**
   * A local op of cluster `id` (NeuronCore `nc`) starts, to be stopped at `deadlineMs` (device clock); returns its
   * generation.
   */
  arm(id: number, nc: number, deadlineMs: number): number {
    const ring = this.#ring;
    ring[DoorbellRing.LOCAL_CLUSTER] = id;
    ring[DoorbellRing.LOCAL_NC] = nc;
    this.#deadline[DoorbellRing.LOCAL_DEADLINE_F64] = deadlineMs;
    const gen = Atomics.add(ring, DoorbellRing.LOCAL_GEN, 1) + 1;
    if (Atomics.load(ring, DoorbellRing.WD_SLEEPING) !== 0) ringBell(ring);
    return gen;
  }

  /**
   * The local op `gen` ended; returns `undefined` when it ended by itself, else why the watchdog stopped it. Both sides
   * end an op by moving its generation on with one compare-exchange, so exactly one of them does: a kill that loses
   * finds the op over and does nothing.
   */
  disarm(gen: number): "deadline" | "stopped" | undefined {
    if (Atomics.compareExchange(this.#ring, DoorbellRing.LOCAL_GEN, gen, gen + 1) === gen) return undefined;
    return Atomics.load(this.#ring, DoorbellRing.LOCAL_CAUSE) === 1 ? "deadline" : "stopped";
  }

  /** The {@linkcode Q7LocalWatchdog} of the clusters of NeuronCore `nc`. */
  forCore(nc: number): Q7LocalWatchdog {
    return {
      adopt: (memory, killWord, usersWord) => this.adopt(memory, killWord, usersWord),
      ready: (id) => this.ready(id),
      forget: (id) => this.forget(id),
      arm: (id, deadlineMs) => this.arm(id, nc, deadlineMs),
      disarm: (gen) => this.disarm(gen),
    };
  }

  /** Stops the Worker (the agent is closing). */
  stop(): void {
    const w = this.#worker;
    if (w === undefined) return;
    this.#worker = undefined;
    Atomics.store(this.#ring, DoorbellRing.STOP, 1);
    ringBell(this.#ring);
    w.terminate();
  }
}
