/**
 * The Worker script of the Q7 cluster. One Worker runs one or more simulated Q7 cores (cores k, k + W, … of a
 * cluster of W Workers, `Q7ClusterOptions.workers`) with q7_cores.js, then parks on its doorbell word with
 * `Atomics.wait`; each ring runs one op from the mailbox on each of its participating cores in turn, reporting
 * into each core's status record, with no `postMessage` on the fast path.
 *
 * Plain JavaScript on purpose: `deno test` type-checks every TypeScript module a Worker loads, once per Worker
 * (5.6 s for 8 Workers instead of 0.16 s). The constants come in the "init" message (`WORKER_LAYOUT` in _abi.ts).
 *
 * At CMD_EXIT the Worker counts itself out of MB_USERS and closes: the memory may then boot the NeuronCore's next
 * cluster (ours).
 *
 * Messages from the cluster (counted in MB_POSTED and followed by a CMD_YIELD ring, so a parked Worker returns to
 * its event loop): `{ type: "init", memory, worker, cores, layout }`, `{ type: "load", slot, module }`,
 * `{ type: "unload", slot }` (the cluster evicted the slot's library, ours: its instances and cached exports are
 * dropped, and the slot may be loaded again with another library). Replies: `{ type: "ready" }`,
 * `{ type: "loaded", slot, error?, info? }`, `{ type: "unloaded", slot }`.
 *
 * A Worker the host started for a device agent (worker_spawn.ts, ours) first gets `{ connect: port }` from the host,
 * not counted in MB_POSTED: the cluster's messages then come, and its replies go, over that port.
 *
 * @module
 */
import { parkLater } from "./_park_later.js";
import { createQ7Cores } from "./q7_cores.js";

/** @type {any} WORKER_LAYOUT of _abi.ts (no type import: Deno would add _abi.ts to the graph and check it) */
let L;
/** This Worker's index in the cluster (0 runs core 0). */
let worker = 0;
/** @type {number[]} the simulated cores this Worker runs, ascending */
let cores = [];
/** @type {Int32Array} the control area as Int32 words, from the mailbox on */
let i32;
/** @type {import("./q7_cores.d.ts").Q7Cores} */
let q7;
let lastBell = 0;
let lastSeq = 0;
let handled = 0; // messages handled, compared with the cluster's MB_POSTED counter

/**
 * Kernels that may throw on this Worker before it collects their errors itself: every 1,024th (ours, Bun only).
 *
 * A kernel that traps or goes out of bounds leaves an engine error behind. JavaScriptCore counts such an error as the
 * ~180 bytes of its cell, but it holds ~1.3 KB more outside its heap (measured: 240,000 trapping cores on one Worker
 * grew its RSS by 0.34 GB); the Worker's heap also counts the cluster's 30 MiB memory, so its next collection waited
 * for 200,000–300,000 errors, and the run-loop timers that collect sooner never run on a parked Worker. A model whose
 * kernel traps stays loaded (status 6) and may be run again: 40,000 such executions took a process from 86 MB to
 * 517 MB, and a cluster's two Workers plateaued near 0.85 GB. A collection of this small heap every 1,024 errors takes
 * ~55 µs and keeps the Worker near its idle size. V8 needs none (Deno stayed flat in the same loop), so only Bun's
 * `gc` is called; the ops that return ok never reach it.
 */
const COLLECT_AFTER_THROWS = 1024;
/** @type {((sync: boolean) => void) | undefined} */
const collect = /** @type {{ Bun?: { gc(sync: boolean): void } }} */ (globalThis).Bun?.gc;
let thrown = 0;

/**
 * Parks on this Worker's doorbell word and runs each op rung. Returns to the event loop only when the cluster has
 * posted a message this Worker has not handled yet (MB_POSTED), or leaves the cluster on CMD_EXIT.
 */
function park() {
  const bell = worker === 0 ? L.MB_DOORBELL : L.MB_DOORBELL + 1; // _abi.ts doorbellWord
  const posted = L.MB_POSTED + worker;
  for (;;) {
    if (Atomics.load(i32, posted) !== handled) return; // a message is on its way: let this task end
    Atomics.wait(i32, bell, lastBell);
    lastBell = Atomics.load(i32, bell);
    // The sequence number first, then the command, then the sequence number again: the cluster stores the command
    // last and the sequence number before it, so an op is whole and meant for the Workers only if the command says
    // CMD_RUN and the number did not move meanwhile (q7_cluster.ts #post). A wake for something else must not run an
    // op being written, or one the cluster's own thread runs (CMD_LOCAL).
    const seq = Atomics.load(i32, L.MB_SEQ);
    const cmd = Atomics.load(i32, L.MB_CMD);
    if (cmd === L.CMD_RUN) {
      // One run per op, and only on Workers with a participating core: a late wake may see an op rung for others.
      if (
        seq !== lastSeq && cores[0] < Atomics.load(i32, L.MB_TOTAL_CPUS) && Atomics.load(i32, L.MB_SEQ) === seq
      ) {
        lastSeq = seq;
        const threw = q7.runOp(seq);
        if (threw !== 0 && (thrown += threw) >= COLLECT_AFTER_THROWS && collect !== undefined) {
          thrown = 0;
          collect(false);
        }
      }
    } else if (cmd === L.CMD_EXIT) {
      leave();
      return;
    }
  }
}

/**
 * Leaves the cluster for good: counts this Worker out of MB_USERS (the last thing it does with the memory, which may
 * then boot the NeuronCore's next cluster, ours) and closes.
 */
function leave() {
  Atomics.sub(i32, L.MB_USERS, 1);
  Atomics.notify(i32, L.MB_USERS);
  globalThis.close();
}

/** Schedules park() once, in a later task (_park_later.js). */
const schedulePark = parkLater(park);

/** Where the cluster is: this Worker's own scope, or the port a host-started Worker was handed. */
/** @type {{ postMessage(message: unknown): void }} */
let cluster = globalThis;

/** Replies to the cluster, then parks again. */
function replyThenPark(/** @type {unknown} */ message) {
  cluster.postMessage(message);
  schedulePark();
}

globalThis.onmessage = (/** @type {MessageEvent} */ e) => {
  if (e.data?.connect instanceof MessagePort) {
    const port = e.data.connect;
    port.onmessage = onClusterMessage;
    cluster = port;
    return;
  }
  onClusterMessage(e);
};

/** One message of the cluster. */
function onClusterMessage(/** @type {MessageEvent} */ e) {
  const msg = e.data;
  handled++;
  if (msg.type === "init") {
    L = msg.layout;
    worker = msg.worker;
    cores = msg.cores;
    const memory = msg.memory;
    q7 = createQ7Cores({ layout: L, memory, cores });
    i32 = new Int32Array(memory.buffer, L.MAILBOX, (memory.buffer.byteLength - L.MAILBOX) >> 2);
    lastBell = Atomics.load(i32, worker === 0 ? L.MB_DOORBELL : L.MB_DOORBELL + 1);
    lastSeq = Atomics.load(i32, L.MB_SEQ);
    // Terminated before this Worker took its memory: the exit was rung before the bell was read, so no wake will come.
    if (Atomics.load(i32, L.MB_CMD) === L.CMD_EXIT) return leave();
    replyThenPark({ type: "ready" });
  } else if (msg.type === "load") {
    try {
      replyThenPark({ type: "loaded", slot: msg.slot, info: q7.load(msg.slot, msg.module) });
    } catch (e) {
      replyThenPark({
        type: "loaded",
        slot: msg.slot,
        error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
      });
    }
  } else if (msg.type === "unload") {
    q7.unload(msg.slot);
    replyThenPark({ type: "unloaded", slot: msg.slot });
  }
}
