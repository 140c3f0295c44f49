/**
 * The simulated device as an agent of its own, as hardware is: it runs in a Worker (or, inline, on the host's
 * thread), maps the device's registers and memory from `SharedArrayBuffer`s the host maps too, and reacts to the
 * host the way a device reacts to a driver:
 *
 * - a **doorbell** is a store into the shared semaphore and an entry in a shared ring plus `Atomics.notify`; the
 *   agent wakes on `Atomics.waitAsync`, with no message on the path;
 * - a **completion** is the agent's store of the notification-queue head plus `Atomics.notify`, which wakes the
 *   host's wait;
 * - register writes the device must take (run-stall, swap table, stream table) and the mapping of new allocations
 *   come as ordered control messages; a doorbell carries the count of control messages the host had sent when it
 *   rang, and is not played before the agent has taken them; a message carries the count of doorbells rung before
 *   it, and the agent plays those before the message (neither passes the other, as PCIe orders posted writes).
 *
 * The sequencer, the DMA queues, the notification writer, the file-IO manager and the fault ports all run here; the
 * Q7 clusters are this agent's own Workers (started by the host for it, `worker_spawn.ts`), signalled through their
 * shared memory.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the driver ABI; completion is poll-driven, the host sleeps on `comp_efd`),
 * §3.3 (the doorbell is one semaphore increment), §3.5 (the completion record). The agent, its rings and its
 * messages are ours.
 *
 * @module
 */
import type { SiliconSpec } from "@nrt/core/hal";
import { DeviceLogWriter, LogKind, writeTimelineEvent } from "./device_log.ts";
import type { ArmedFault } from "./fault_injector.ts";
import { type MappedAllocation, MemorySpace } from "./memory.ts";
import { type NcRegisterBuffers, NcRegisters } from "./nc_registers.ts";
import type { Q7BootEvent, Q7ClusterFactory, Q7CoreResult } from "./q7_complex.ts";
import { SimDevice } from "./sim_device.ts";
import { ucodeCoreWritten } from "./ucode_core.ts";

/** The doorbell ring: a header of 24 Int32 words, then entries of 4 (nc, semaphore, count, control sequence). */
export const DoorbellRing = {
  /** Entries written by the host (monotonic). */
  WRITTEN: 0,
  /** Entries taken by the agent (monotonic). */
  HANDLED: 1,
  /** Non-zero once the agent must stop. */
  STOP: 2,
  /** 1 while the agent sleeps on WRITTEN: the host notifies only then (a doorbell to a busy agent costs no wake). */
  SLEEPING: 3,
  // The words of the agent's local-op watchdog (local_watchdog.ts, ours).
  /**
   * The device clock's skew in µs, as a BigInt64 at this BigInt64 index (words 4–5): the host adds each `elapse`.
   */
  SKEW_US_I64: 2,
  /** Non-zero once the host closes the device: the watchdog stops a local op at once. */
  KILL_ALL: 6,
  /** The watchdog's bell (a counter rung with a notify). */
  WD_BELL: 7,
  /** 1 while the watchdog sleeps without a timeout: whoever starts a local op then rings its bell. */
  WD_SLEEPING: 8,
  /** Odd while a local op runs on the agent's thread; incremented when one starts and when it ends. */
  LOCAL_GEN: 9,
  /** The watchdog's id of the cluster running the local op. */
  LOCAL_CLUSTER: 10,
  /** The NeuronCore of the local op. */
  LOCAL_NC: 11,
  /** The local op's deadline (device clock, ms), as a Float64 at this Float64 index (words 12–13). */
  LOCAL_DEADLINE_F64: 6,
  /** Messages posted to the watchdog Worker (it takes them before parking again). */
  WD_POSTED: 14,
  /** Bit n set while the host's Q7 reset of NeuronCore n is on its way (the agent clears it when it takes it). */
  RESET_MASK: 15,
  /** Why the watchdog stopped the last local op it stopped: 1 its deadline passed, 2 a reset or close. */
  LOCAL_CAUSE: 16,
  /** The last cluster id the watchdog Worker has taken (ids are given in order): a cluster runs local ops after. */
  WD_ADOPTED: 17,
  HEADER_WORDS: 24,
  ENTRY_WORDS: 4,
  ENTRIES: 4096,
} as const;

/** Bytes of a doorbell ring buffer. */
export const DOORBELL_RING_BYTES: number = 4 *
  (DoorbellRing.HEADER_WORDS + DoorbellRing.ENTRIES * DoorbellRing.ENTRY_WORDS);

/** What an agent is made from. */
export interface AgentInit {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** Device index. */
  readonly device: number;
  /** The NeuronCores this agent runs. */
  readonly ncs: readonly number[];
  /** Every NeuronCore's register buffers (index = NeuronCore). */
  readonly regs: readonly NcRegisterBuffers[];
  /** The doorbell ring ({@linkcode DOORBELL_RING_BYTES}). */
  readonly doorbells: SharedArrayBuffer;
  /** The trace buffer (`device_log.ts`). */
  readonly log: SharedArrayBuffer;
  /** The ring of fault firings (`device_log.ts`, lossless). */
  readonly fired: SharedArrayBuffer;
  /** The timeline ring (`device_log.ts`), written only by runs the host asked to trace. */
  readonly timeline: SharedArrayBuffer;
  /** Allocations made before the agent started. */
  readonly mapped: readonly MappedAllocation[];
  /** The device's hang budget in ms (ours: the sequencers' watchdog); 0 or absent: none. */
  readonly watchdogMs?: number;
}

/**
 * Control messages, host → agent, numbered in order. `rung` is the number of doorbells the host had rung when it sent
 * the message: the agent plays those first, so a message never passes a doorbell rung before it (ours; as on PCIe,
 * where a later request does not pass an earlier posted write).
 */
export type AgentMessage =
  & { readonly rung?: number }
  & (
    | { readonly seq: number; readonly t: "map"; readonly m: MappedAllocation }
    | { readonly seq: number; readonly t: "unmap"; readonly id: number }
    | {
      readonly seq: number;
      readonly t: "run-stall";
      readonly nc: number;
      readonly previous: number;
      readonly value: number;
    }
    | { readonly seq: number; readonly t: "swap-table"; readonly nc: number }
    | { readonly seq: number; readonly t: "stream-table"; readonly nc: number; readonly slot: number }
    | {
      readonly seq: number;
      readonly t: "ucode-core";
      readonly nc: number;
      readonly word: number;
      readonly command: number;
    }
    | { readonly seq: number; readonly t: "arm"; readonly nc: number; readonly fault: ArmedFault }
    | { readonly seq: number; readonly t: "disarm"; readonly id: number | undefined }
    | { readonly seq: number; readonly t: "reset-q7"; readonly nc: number }
    | { readonly seq: number; readonly t: "when-idle"; readonly nc: number | undefined; readonly doorbells: number }
    | { readonly seq: number; readonly t: "stdio"; readonly nc: number }
    | { readonly seq: number; readonly t: "elapse"; readonly ms: number }
    | { readonly seq: number; readonly t: "heap-cells"; readonly collect: boolean | "eden" }
    | { readonly seq: number; readonly t: "close" }
  );

/** A reply, agent → host: the sequence number of the message it answers, and its value or error text. */
export interface AgentReply {
  readonly re: number;
  readonly value?: unknown;
  readonly error?: string;
}

/**
 * The JS cells live on this thread's heap, from JavaScriptCore's per-type counts (`bun:jsc`), after a full collection
 * when `collect` is `true`, after an eden collection when it is `"eden"`; `undefined` where the engine does not count
 * them (V8). A diagnostic (ours): two readings around N executes, the first collected, give what one execute allocates
 * on the device's thread (`bench/alloc.ts`); two eden readings, what it leaves in the old generation.
 */
function heapCells(collect: boolean | "eden"): number | undefined {
  // Bun's synchronous `import.meta.require` (absent elsewhere) loads its engine module without a dynamic import.
  const require = (import.meta as { require?: (id: string) => unknown }).require;
  if ((globalThis as { Bun?: unknown }).Bun === undefined || require === undefined) return undefined;
  const jsc = require("bun:jsc") as {
    heapStats(): { objectTypeCounts: Record<string, number> };
    gcAndSweep(): void;
    edenGC(): void;
  };
  if (collect === "eden") jsc.edenGC();
  else if (collect) jsc.gcAndSweep();
  let n = 0;
  for (const v of Object.values(jsc.heapStats().objectTypeCounts)) n += v;
  return n;
}

const STATUS_CODE: Record<Q7CoreResult["status"], number> = { ok: 0, trap: 1, oob: 2, abort: 3, "missing-function": 4 };
const Q7_EVENT_CODE: Record<Q7BootEvent["kind"], number> = {
  released: 0,
  "boot-failed": 1,
  "cluster-started": 2,
  "cluster-terminated": 3,
};

/** The device side of one agent. */
export class DeviceAgent {
  readonly #device: SimDevice;
  readonly #memory = new MemorySpace();
  readonly #ring: Int32Array;
  readonly #log: DeviceLogWriter;
  #handledControl = 0;
  readonly #controlWaiters: Array<{ seq: number; resolve: () => void }> = [];
  #handledDoorbells = 0;
  readonly #loop: Promise<void>;
  #closed = false;

  /**
   * Starts the agent: maps the registers and the allocations made so far, and begins taking doorbells.
   *
   * @param init The shared buffers and the NeuronCores to run.
   * @param q7Factory Creates the Q7 clusters (this agent's Workers).
   */
  constructor(init: AgentInit, q7Factory: Q7ClusterFactory) {
    for (const m of init.mapped) this.#memory.map(m);
    this.#ring = new Int32Array(init.doorbells);
    this.#log = new DeviceLogWriter(init.log);
    const log = this.#log;
    const firings = new DeviceLogWriter(init.fired);
    const timeline = new DeviceLogWriter(init.timeline);
    const text = (kind: number, nc: number, head: (v: DataView) => number, t: string): void =>
      log.appendText(kind, nc, head, t);
    this.#device = new SimDevice({
      spec: init.spec,
      index: init.device,
      regs: init.regs.map((b) => new NcRegisters(init.spec, b)),
      ncs: init.ncs,
      memory: this.#memory,
      q7Factory,
      watchdogMs: init.watchdogMs,
      trace: {
        record: (nc, bytes) => log.appendBytes(LogKind.RECORD, nc, bytes),
        q7Event: (e) =>
          text(LogKind.Q7_EVENT, e.nc, (v) => {
            v.setUint8(0, Q7_EVENT_CODE[e.kind]);
            v.setUint8(1, e.via === "evt-sem" ? 2 : e.via === "host-csr" ? 1 : 0);
            return 2;
          }, e.detail ?? ""),
        sequencerFault: (nc, f) =>
          text(LogKind.SEQ_FAULT, nc, (v) => {
            v.setUint32(0, f.slot >>> 0, true);
            v.setUint32(4, f.mask >>> 0, true);
            return 8;
          }, f.message),
        fired: (nc, f, run) =>
          firings.append(LogKind.FIRED, nc, (_, v) => {
            v.setUint32(0, f.id >>> 0, true);
            v.setUint32(4, run >>> 0, true);
            return 8;
          }),
        timeline: (nc) => (e) => writeTimelineEvent(timeline, nc, e),
        q7: (nc) => ({
          dispatched: (op) => {
            log.head.setUint8(0, op.totalCpus);
            log.appendFilledText(LogKind.Q7_DISPATCH, nc, 1, op.fn);
          },
          joined: (r) => {
            const cores = r instanceof Error ? undefined : r.cores;
            let failed: Q7CoreResult | undefined;
            const v = log.head;
            for (let c = 0; c < 8; c++) {
              const core = cores?.[c];
              if (failed === undefined && core !== undefined && core.ran && core.status !== "ok") failed = core;
              v.setUint8(
                c,
                cores === undefined
                  ? STATUS_CODE.abort
                  : core === undefined || !core.ran
                  ? 255
                  : STATUS_CODE[core.status],
              );
            }
            log.appendFilledText(
              LogKind.Q7_JOIN,
              nc,
              8,
              r instanceof Error
                ? r.message
                : failed === undefined
                ? ""
                : `${failed.status}${failed.message === undefined ? "" : `: ${failed.message}`}`,
            );
          },
        }),
      },
    });
    this.#loop = this.#run();
  }

  /** Takes one control message; `reply` answers it (every message is answered once it has taken effect). */
  handle(msg: AgentMessage, reply: (r: AgentReply) => void): void {
    const answer = (p: Promise<unknown> | unknown): void => {
      Promise.resolve(p).then(
        (value) => reply(value === undefined ? { re: msg.seq } : { re: msg.seq, value }),
        (e: unknown) => reply({ re: msg.seq, error: e instanceof Error ? e.message : String(e) }),
      );
    };
    let result: Promise<unknown> | unknown;
    try {
      // Doorbells rung before this message take effect first: an `elapse` must see the run a doorbell rung just before
      // it started, not find the sequencer idle and let that run escape the watchdog.
      if (msg.rung !== undefined) this.#playRung(msg.rung);
      result = this.#apply(msg);
    } catch (e) {
      result = Promise.reject(e);
    }
    // In order: the state change of a message is made before the next message or any later doorbell is taken.
    this.#handledControl = msg.seq;
    for (let i = this.#controlWaiters.length - 1; i >= 0; i--) {
      if (this.#controlWaiters[i].seq <= msg.seq) this.#controlWaiters.splice(i, 1)[0].resolve();
    }
    answer(result);
  }

  #apply(msg: AgentMessage): Promise<unknown> | unknown {
    const d = this.#device;
    switch (msg.t) {
      case "map":
        this.#memory.map(msg.m);
        return;
      case "unmap":
        this.#memory.unmap(msg.id);
        return;
      case "run-stall":
        return d.runStallWritten(msg.nc, msg.previous, msg.value);
      case "swap-table":
        return d.swapTableWritten(msg.nc);
      case "stream-table":
        return d.streamTableWritten(msg.nc, msg.slot);
      case "ucode-core":
        return ucodeCoreWritten(d.unit(msg.nc), d.spec, msg.word, msg.command);
      case "arm":
        return d.unit(msg.nc).faults.arm(msg.fault);
      case "disarm":
        for (const u of d.ncs) u?.faults.disarm(msg.id);
        return;
      case "reset-q7":
        if (msg.nc < 32) Atomics.and(this.#ring, DoorbellRing.RESET_MASK, ~(1 << msg.nc));
        return d.resetQ7(msg.nc);
      case "when-idle":
        return this.#whenIdle(msg.nc, msg.doorbells);
      case "stdio":
        return d.unit(msg.nc).sequencer.stdioEntries();
      case "elapse":
        return d.elapse(msg.ms);
      case "heap-cells":
        return heapCells(msg.collect);
      case "close":
        return this.#close();
    }
  }

  /** Resolves once the doorbells up to `doorbells` are taken and the sequencers (or one) are idle. */
  async #whenIdle(nc: number | undefined, doorbells: number): Promise<void> {
    while (this.#handledDoorbells < doorbells && !this.#closed) {
      const seen = Atomics.load(this.#ring, DoorbellRing.HANDLED);
      if (seen >= doorbells) break;
      const w = Atomics.waitAsync(this.#ring, DoorbellRing.HANDLED, seen);
      if (w.async) await w.value;
    }
    await this.#device.whenIdle(nc);
  }

  #controlReached(seq: number): Promise<void> {
    if (this.#handledControl >= seq) return Promise.resolve();
    return new Promise((resolve) => this.#controlWaiters.push({ seq, resolve }));
  }

  /**
   * Plays the doorbells up to the `rung`-th now (those a control message was sent after). Each of them was rung after
   * control messages the agent has all taken by now, as messages are taken in order.
   */
  #playRung(rung: number): void {
    const upTo = Math.min(rung, Atomics.load(this.#ring, DoorbellRing.WRITTEN));
    while (this.#handledDoorbells < upTo && !this.#closed) {
      if (this.#handledControl < this.#ring[this.#entry() + 3]) return;
      this.#playOne();
    }
  }

  /** Word index of the next doorbell to play. */
  #entry(): number {
    return DoorbellRing.HEADER_WORDS + (this.#handledDoorbells % DoorbellRing.ENTRIES) * DoorbellRing.ENTRY_WORDS;
  }

  /** Plays the next doorbell and publishes the count taken. */
  #playOne(): void {
    const ring = this.#ring, at = this.#entry();
    try {
      this.#device.doorbell(ring[at], ring[at + 1], ring[at + 2]);
    } catch {
      // A doorbell for a NeuronCore this agent does not run: nothing to release.
    }
    this.#handledDoorbells++;
    Atomics.store(ring, DoorbellRing.HANDLED, this.#handledDoorbells);
    Atomics.notify(ring, DoorbellRing.HANDLED);
  }

  /** The doorbell loop: sleeps on the ring's write count, plays each doorbell in order. */
  async #run(): Promise<void> {
    const ring = this.#ring;
    for (;;) {
      const written = Atomics.load(ring, DoorbellRing.WRITTEN);
      while (this.#handledDoorbells < written) {
        const control = ring[this.#entry() + 3];
        if (this.#handledControl < control) {
          await this.#controlReached(control);
          // A message taken meanwhile may have played this doorbell (#playRung): look again.
          if (this.#closed) return;
          continue;
        }
        if (this.#closed) return;
        this.#playOne();
      }
      if (this.#closed || Atomics.load(ring, DoorbellRing.STOP) !== 0) return;
      // Asleep before the last look at WRITTEN (sequentially consistent with the host's store-then-check).
      Atomics.store(ring, DoorbellRing.SLEEPING, 1);
      if (Atomics.load(ring, DoorbellRing.WRITTEN) === written) {
        const w = Atomics.waitAsync(ring, DoorbellRing.WRITTEN, written);
        if (w.async) await w.value;
      }
      Atomics.store(ring, DoorbellRing.SLEEPING, 0);
    }
  }

  async #close(): Promise<void> {
    this.#closed = true;
    Atomics.store(this.#ring, DoorbellRing.STOP, 1);
    Atomics.notify(this.#ring, DoorbellRing.WRITTEN);
    this.#device.close();
    for (const w of this.#controlWaiters.splice(0)) w.resolve();
    await this.#loop;
  }
}
