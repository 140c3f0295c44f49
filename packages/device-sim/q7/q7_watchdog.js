/**
 * The Worker of a {@linkcode LocalWatchdog} (local_watchdog.ts): the one thread that can stop a kernel spinning on the
 * device agent's own thread. The agent runs small ops itself (`Q7ClusterOptions.localOpBytes`, ours); while one runs,
 * the agent's event loop is blocked, so neither its sequencer's watchdog timer nor an `elapse` or `close` message can
 * reach it. This Worker watches the words the agent and the host write instead, and sets the kill flag of the
 * cluster running the op (the flag every guarded loop polls, _loop_guard.ts) when:
 * - the op's deadline (device clock: the shared clock plus the skew the host's `elapse` calls added) has passed,
 * - the host has sent a Q7 reset of the op's NeuronCore, or
 * - the host is closing the device.
 *
 * It polls every few ms while the agent has run local ops lately, and otherwise sleeps until the agent or the host
 * rings its bell, so an idle device costs no wake-ups and a busy one no notify per op.
 *
 * Plain JavaScript, like q7_worker.js: `deno test` type-checks every TypeScript module a Worker loads. The word
 * indices come in the "init" message (`WATCHDOG_WORDS` in local_watchdog.ts).
 *
 * Messages: `{ type: "init", ring, words }`, `{ type: "adopt", id, memory, killWord, usersWord }` (taken: the ADOPTED
 * word holds `id`), `{ type: "forget", id }` (then the Worker counts itself out of Int32 word `usersWord` of the memory,
 * the cluster's MB_USERS; -1: none, ours). Each is counted in the POSTED word and followed by a ring of the bell, so a
 * parked Worker returns to its event loop to take it. The Worker posts nothing back. A Worker the host started for a device
 * agent (worker_spawn.ts, ours) first gets `{ connect: port }` from the host, not counted: the messages then come over
 * that port.
 *
 * Ours: the seeds say nothing of how a simulator stops a kernel.
 *
 * @module
 */
import { parkLater } from "./_park_later.js";

/** @type {any} */
let W;
/** @type {Int32Array} */
let ring;
/** @type {BigInt64Array} */
let ring64;
/** @type {Float64Array} */
let ringF64;
/** @type {Map<number, { i32: Int32Array, word: number, users: number }>} cluster id → its kill flag and MB_USERS word */
const clusters = new Map();
let handled = 0;
/** Shared-clock ms of the last local op seen; polling continues for IDLE_MS after it. */
let lastActive = -Infinity;
const POLL_MS = 5;
const IDLE_MS = 1000;

function now() {
  return performance.timeOrigin + performance.now();
}

/**
 * Stops local op `gen` for `cause` (1 its deadline, 2 a reset or close): claims its end by moving the generation on
 * (the agent's disarm makes the same exchange, so exactly one of the two ends the op), then sets the kill flag of its
 * cluster. The cause is stored first: the agent reads it only once its own exchange failed.
 */
function kill(/** @type {number} */ gen, /** @type {number} */ cause) {
  const c = clusters.get(Atomics.load(ring, W.CLUSTER)); // read while the generation is still `gen`: the op's cluster
  Atomics.store(ring, W.CAUSE, cause);
  if (Atomics.compareExchange(ring, W.GEN, gen, gen + 1) !== gen) return; // the op ended first
  if (c !== undefined) Atomics.store(c.i32, c.word, 1);
}

function park() {
  for (;;) {
    if (Atomics.load(ring, W.POSTED) !== handled) return schedulePark(); // a message is waiting
    if (Atomics.load(ring, W.STOP) !== 0) {
      globalThis.close();
      return;
    }
    const bell = Atomics.load(ring, W.BELL);
    const gen = Atomics.load(ring, W.GEN);
    const t = now();
    if ((gen & 1) === 1) {
      lastActive = t;
      const deadline = ringF64[W.DEADLINE_F64];
      const skew = Number(Atomics.load(ring64, W.SKEW_US_I64)) / 1000;
      const left = deadline - (t + skew);
      const nc = Atomics.load(ring, W.NC);
      const reset = nc < 32 && (Atomics.load(ring, W.RESET_MASK) & (1 << nc)) !== 0;
      if (Atomics.load(ring, W.KILL_ALL) !== 0 || reset) {
        kill(gen, 2);
      } else if (left <= 0) {
        kill(gen, 1);
      } else {
        Atomics.wait(ring, W.BELL, bell, Math.min(left, POLL_MS));
      }
    } else if (t - lastActive < IDLE_MS) {
      Atomics.wait(ring, W.BELL, bell, POLL_MS);
      if (Atomics.load(ring, W.GEN) !== gen) lastActive = now();
    } else {
      Atomics.store(ring, W.SLEEPING, 1);
      if (Atomics.load(ring, W.GEN) === gen) Atomics.wait(ring, W.BELL, bell);
      Atomics.store(ring, W.SLEEPING, 0);
      lastActive = now();
    }
  }
}

/** Schedules park() once, in a later task (_park_later.js). */
const schedulePark = parkLater(park);

globalThis.onmessage = (/** @type {MessageEvent} */ e) => {
  if (e.data?.connect instanceof MessagePort) {
    e.data.connect.onmessage = onAgentMessage;
    return;
  }
  onAgentMessage(e);
};

/** One message of the agent. */
function onAgentMessage(/** @type {MessageEvent} */ e) {
  const msg = e.data;
  handled++;
  if (msg.type === "init") {
    W = msg.words;
    ring = new Int32Array(msg.ring);
    ring64 = new BigInt64Array(msg.ring, 0, W.HEADER_BYTES >> 3);
    ringF64 = new Float64Array(msg.ring, 0, W.HEADER_BYTES >> 3);
  } else if (msg.type === "adopt") {
    const buffer = msg.memory.buffer;
    clusters.set(msg.id, { i32: new Int32Array(buffer), word: msg.killWord, users: msg.usersWord });
    Atomics.store(ring, W.ADOPTED, msg.id); // a shared word, not a reply: nothing waits on this Worker's messages
  } else if (msg.type === "forget") {
    const c = clusters.get(msg.id);
    clusters.delete(msg.id);
    // Counted out of the memory's users: no kill of this cluster can come any more (kill() runs between messages),
    // so the memory may boot the NeuronCore's next cluster (ours).
    if (c !== undefined && c.users >= 0) {
      Atomics.sub(c.i32, c.users, 1);
      Atomics.notify(c.i32, c.users);
    }
  }
  schedulePark();
}
