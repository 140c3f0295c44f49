/**
 * The SP/SEQ sequencer of one NeuronCore: a doorbell increment on a stream's semaphore releases one run of that
 * stream; runs are serialised FIFO; each run walks the 64-byte slots from slot 0 and executes the opcodes the
 * simulator models (`@nrt/core` isa.ts). A fault pushes a fatal TPB_ERROR record, marks the POOL engine's
 * instruction pointer and halts the stream without its completion — fail-stop, the host times out or reads the error.
 *
 * Seed: runtime-synthesis §3.2 (the per-op micro-program `[dma_config ×2][dma_config_size][LOAD_POOL_ARGUMENT
 * 0x107A][DRAIN 0x10A2][EVENT_SEMAPHORE 0x13]`), §3.3 (one semaphore write is the whole kickoff; EXTENDED_INST 0xF0
 * hands the op to the Q7 cluster), §3.5 (the 16-byte NQ record), spmd-teardown §4.3 (DRAIN is the join of all 8
 * cores; EVENT_SEMAPHORE update_mode 0x13 = increment on done), lifecycle-error-model §4.5 (error_id 0x0a FATAL in
 * the low byte, the subtype mask in the next 16 bits).
 *
 * Injected faults (`fault_injector.ts`) are taken at three points of a run: its start, every instruction boundary
 * ("now") and the DRAIN join (faults aimed at one Q7 core). Every record leaves through
 * {@linkcode Sequencer.pushRecord}. A stream-table write that removes the stream of the run in progress (an unload)
 * drops that run and, when the Q7 cores are still busy with its op, terminates their Workers. A run that neither
 * completes nor faults — a kernel in an endless loop, an injected hang — is the device's own to contain: its watchdog
 * (ours: `watchdogMs`, the management core's hang budget) drops it the same way once the budget has passed. The host
 * only times out and reports (lifecycle-error-model §5.5: no host-driven halt or reset on the fault path).
 *
 * @module
 */
import { collectCustomOpQueues, type SiliconSpec, TpbEngType } from "@nrt/core/hal";
import {
  ARG_HEADER_BYTES,
  type ArgTable,
  CollectivesHang,
  collectivesProgress,
  decodeArgTable,
  decodeInstruction,
  decodeOpcodeTable,
  DMA_ENGINE_STATE_OFFSET,
  DmaDirection,
  DmaEngineState,
  EVENT_UPDATE_MODE_INCREMENT,
  getU32,
  HBM_UE_REPAIRABLE,
  HwErrorCause,
  type Instruction,
  libraryKey,
  libraryTag,
  NotificationKind,
  type NotificationRecord,
  Opcode,
  OPCODE_TABLE_ENTRY_BYTES,
  OPCODE_TABLE_HEADER_BYTES,
  type OpcodeTable,
  type OpcodeTableEntry,
  opcodeTableLibraries,
  SLOT_BYTES,
  TENSOR_DESC_BYTES,
  TpbErrorId,
  TpbErrorMask,
} from "@nrt/core/isa";
import { NcCounter, type NcRegisters, NcStatus, NqRegister, type StreamEntry } from "./nc_registers.ts";
import { sharedClockMs, type TimelineSink } from "./device_log.ts";
import { type DmaEngine, DmaFault } from "./dma_engine.ts";
import { type ArmedFault, FaultKind, type FaultPhase, type NcFaults } from "./fault_injector.ts";
import type { FileIoManager } from "./file_io_manager.ts";
import type { MemorySpace } from "./memory.ts";
import type { NotificationProducer } from "./notification_queue.ts";
import type { ClusterHandle, Q7Complex, Q7CoreResult } from "./q7_complex.ts";
import type { Q7AbortSignal } from "./q7/q7_cluster.ts";

/**
 * Subtype mask bits of the simulator's TPB_ERROR records: `@nrt/core`'s `TpbErrorMask`, the encoding the host
 * classifier decodes (Q7 outcomes in the low nibble, sequencer-detected faults above, the soft causes on top).
 */
export const TpbFaultMask: typeof TpbErrorMask = TpbErrorMask;

const STATUS_MASK: Record<Q7CoreResult["status"], number> = {
  ok: 0,
  trap: TpbFaultMask.Q7_TRAP,
  oob: TpbFaultMask.Q7_OOB,
  abort: TpbFaultMask.Q7_ABORT,
  "missing-function": TpbFaultMask.Q7_MISSING_FUNCTION,
};

/** POOL instruction-pointer value after a fault: bit 31 set, slot index below (never 0). */
export const FAULT_IP_MARKER = 0x8000_0000;

/** What a sequencer works on. */
export interface SequencerDeps {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** NeuronCore index. */
  readonly nc: number;
  /** The NeuronCore's registers. */
  readonly regs: NcRegisters;
  /** Device memory. */
  readonly memory: MemorySpace;
  /** The NeuronCore's notification producer. */
  readonly nq: NotificationProducer;
  /** The NeuronCore's Q7 cores. */
  readonly q7: Q7Complex;
  /** The NeuronCore's custom-op DMA. */
  readonly dma: DmaEngine;
  /** Injected faults of the NeuronCore (none when omitted). */
  readonly faults?: NcFaults;
  /** The device side of pool_stdio (printf entries into the host's HBM rings). */
  readonly fileIo?: FileIoManager;
  /** Told of every fault the sequencer raises or plays (the device's trace buffer). */
  readonly onFault?: (fault: { slot: number; mask: number; message: string }) => void;
  /** Where a run records its timeline while the host set `NcStatus.TRACE` (none: never recorded). */
  readonly timeline?: TimelineSink;
  /**
   * The device's hang budget in ms (ours: the management core's watchdog): a run still in progress this long after
   * its doorbell was taken is dropped by the device itself — no completion, Q7 Workers busy with it terminated. 0 or
   * absent: no watchdog.
   */
  readonly watchdogMs?: number;
}

/** The cause a watchdog drop gives (the Q7 cluster's termination event and the sequencer fault say it). */
export const WATCHDOG_CAUSE = "watchdog";

class SequencerFault extends Error {
  constructor(readonly mask: number, message: string, readonly q7 = 0xff) {
    super(message);
  }
}

/** Thrown after the records of a fault are already posted: halt without another record. */
class StreamHalt extends Error {}

const DROPPED = Symbol("dropped");

interface Run {
  readonly entry: StreamEntry;
  /**
   * Device time (ms) the run's doorbell was taken, for the watchdog (ours): the budget counts from there, as the
   * host's wait does, so a run queued behind another (or behind the Q7 cores' recovery) is not given more time than
   * the host gives it.
   */
  readonly rungAt: number;
  readonly count: number;
  /** Shared-clock ms the run started (its busy time counts from there). */
  readonly started: number;
  /** How it ends, for the timeline. */
  outcome: "completed" | "faulted" | "dropped";
  model: number;
  slot: number;
  args: ArgTable | undefined;
  s2mBytes: number | undefined;
  dispatch: Promise<{ cores: Q7CoreResult[] }> | undefined;
  /** The cluster of the op dispatched last, until its DRAIN (which runs it if it was left for this thread). */
  q7?: ClusterHandle;
  /** The Q7 cores are still running this run's op. */
  q7Busy: boolean;
  /** Where this run records its timeline; `undefined` (the host did not ask) records nothing. */
  readonly trace: TimelineSink | undefined;
  /** The function of the op on the Q7 cores (for the timeline). */
  fn: string;
  /** The libraries this run's PREAMBLE loaded into the Q7 kernel_info_table (keys `addr:bytes`). */
  readonly loaded: Set<string>;
  /** Set when the run is dropped; the signal its Q7 dispatch watches. */
  readonly abort: RunDrop;
  /** Settles with DROPPED when the run is dropped; made on first use ({@linkcode droppedOf}). */
  dropped?: Promise<typeof DROPPED>;
  /** The op of the last EXTENDED_INST ran on this thread at its DRAIN: its dispatch has settled already. */
  joinedHere: boolean;
  /** That op's join, when the cluster handed it over (its dispatch resolved with it). */
  localJoin: { cores: Q7CoreResult[] } | undefined;
}

/** A rejection handled where the promise is awaited (one function for every run, not a closure per run). */
const ignoreRejection = (): void => {};

/**
 * The promise that settles when `run` is dropped (ours: made only by a run that waits on something a drop must end —
 * a Worker join, a cluster start, a library, a hanging fault — not by every run).
 */
function droppedOf(run: Run): Promise<typeof DROPPED> {
  if (run.dropped !== undefined) return run.dropped;
  const drop = run.abort;
  return run.dropped = drop.aborted
    ? Promise.resolve(DROPPED)
    : new Promise<typeof DROPPED>((resolve) => drop.addEventListener("abort", () => resolve(DROPPED)));
}

/**
 * A run's drop: the flag, the reason and the listeners an `AbortController` would give, without one (making an
 * `AbortController` and reading its signal cost about 0.5 µs on Bun, at every run; ours). It is the signal the run's
 * Q7 dispatch watches.
 */
class RunDrop implements Q7AbortSignal {
  aborted = false;
  reason: unknown = undefined;
  #listeners: Array<() => void> | undefined;

  /** Drops the run: its listeners are called once, in the order they were added. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = new DOMException("The operation was aborted.", "AbortError");
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners !== undefined) { for (const l of listeners) l(); }
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  addEventListener(_type: "abort", listener: () => void): void {
    if (!this.aborted) (this.#listeners ??= []).push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    const i = this.#listeners?.indexOf(listener) ?? -1;
    if (i >= 0) this.#listeners!.splice(i, 1);
  }
}

/** The sequencer of one NeuronCore. */
export class Sequencer {
  readonly #d: SequencerDeps;
  /** Runs to play, and library stagings, in order: one at a time on the NeuronCore's Q7 cores. */
  readonly #queue: Array<{ entry: StreamEntry; rungAt: number } | { stage: () => Promise<void>; settle: () => void }> =
    [];
  readonly #runCounts = new Map<number, number>();
  /** Decoded opcode tables by PA, until the next swap-table write. */
  readonly #tables = new Map<number, OpcodeTable>();
  /**
   * The library of each decoded opcode-table entry, and of each library a decoded table lists: its key and image reader,
   * made once, not at every ULIB_LOAD and EXTENDED_INST.
   */
  readonly #libraries = new WeakMap<object, { key: string; image: () => Uint8Array }>();
  #opcodeTablePa = 0;
  /** The loop taking the queue, while `#pumpActive`. */
  #pumping: Promise<void> | undefined;
  /**
   * Whether the loop runs. Set before it starts: a run can go from its doorbell to its end without a wait (a small op
   * runs on this thread at its DRAIN), and what it queues meanwhile (the watchdog's recovery) must join this loop,
   * not start a second one beside it.
   */
  #pumpActive = false;
  #current: Run | undefined;
  /** Records of the current run not yet published (between two of its waits); undefined while it waits. */
  #burst: NotificationRecord[] | undefined;
  #stopped = false;
  /**
   * The watchdog's timer (ours: one timer across runs, not one per run). A run arms it for its deadline; when the
   * sequencer goes idle it is left pending and fires at most once more, finds no run and stops. A run started
   * meanwhile keeps it: that run's deadline is later, so the timer re-arms for the rest when it fires.
   */
  #watchdog: ReturnType<typeof setTimeout> | undefined;
  /** The device-clock time (ms) the pending timer is due at. */
  #watchdogDue = 0;
  readonly #onWatchdog = (): void => {
    this.#watchdog = undefined;
    this.#checkWatchdog();
  };
  /** How far the device's clock is ahead of the shared clock (ms): {@linkcode Sequencer.elapse}. */
  #skewMs = 0;
  /** Device-side model id made current by the last MODEL_SWITCH. */
  currentModel = 0;
  /** Faults the sequencer raised, newest last (observability: the record says what, this says why). */
  readonly faults: Array<{ slot: number; mask: number; message: string }> = [];

  #noteFault(f: { slot: number; mask: number; message: string }): void {
    this.faults.push(f);
    if (this.faults.length > 256) this.faults.splice(0, this.faults.length - 256);
    this.#d.onFault?.(f);
  }

  /** Creates the idle sequencer of one NeuronCore. */
  constructor(deps: SequencerDeps) {
    this.#d = deps;
  }

  /** Whether the Q7 cores are busy for the run in progress: running its op (a spinning kernel keeps this true) or preparing its library. */
  get q7Busy(): boolean {
    return this.#current?.q7Busy ?? false;
  }

  /** Queues one run of `entry` (FIFO behind any run in progress). */
  ring(entry: StreamEntry): void {
    if (this.#stopped) return;
    this.#queue.push({ entry, rungAt: this.#now() });
    this.#kick();
  }

  /** Resolves when no run is queued or in progress. */
  async whenIdle(): Promise<void> {
    while (this.#pumpActive) await this.#pumping;
  }

  /**
   * Takes the queue, unless that is under way: synchronously while its entries complete without a wait (the runs of a
   * loaded model), then in `#pumping`.
   */
  #kick(): void {
    if (this.#pumpActive) return;
    this.#pumpActive = true;
    let waiting: Promise<void> | undefined;
    try {
      waiting = this.#takeQueue();
    } finally {
      if (waiting === undefined) this.#pumpActive = false;
    }
    if (waiting !== undefined) this.#pumping = this.#pump(waiting);
  }

  /** Plays queued entries until one waits; returns what it waits on, or `undefined` once the queue is empty. */
  #takeQueue(): Promise<void> | undefined {
    for (let e = this.#queue.shift(); e !== undefined; e = this.#queue.shift()) {
      const waiting = "stage" in e ? e.stage().catch(ignoreRejection) : this.#run(e.entry, e.rungAt);
      if (waiting !== undefined) return waiting;
    }
    return undefined;
  }

  /**
   * The swap-table register was written: the opcode table changes and decoded tables are stale. The new table is read
   * now, and the libraries it names resolved for ULIB_LOAD and EXTENDED_INST alike, so that a stream's first run does
   * not (ours; the host bakes the table in `ucode_stage_libs` and then points the cores at it with the swap,
   * `ucode_switch_libs`: runtime-synthesis §3.1; the stream itself was installed before them). Best effort: a table
   * it cannot read is left for the run to report.
   */
  swapTableWritten(): void {
    this.#tables.clear();
    this.#opcodeTablePa = this.#d.regs.swapTablePa;
    if (this.#opcodeTablePa === 0) return;
    try {
      const table = this.#opcodeTable();
      for (const lib of librariesOf(table)) this.#libraryOf(lib, lib);
      for (const e of table.entries) if (e.libBytes > 0) this.#entryLibrary(e);
    } catch {
      // The run reports the table it cannot read.
    }
  }

  /**
   * A stream-table entry was rewritten: its run count starts again at 1. When the entry no longer describes the
   * stream a queued or running run belongs to (the host removed it — unload, or the halt of a faulted stream), those
   * runs are dropped without completion, and Q7 cores still busy with the running one are terminated.
   */
  streamWritten(slot: number): void {
    this.#runCounts.delete(slot);
    const now = this.#d.regs.streamEntry(slot);
    const same = (e: StreamEntry): boolean =>
      now !== undefined && now.pa === e.pa && now.slots === e.slots && now.doorbell === e.doorbell &&
      now.model === e.model;
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const q = this.#queue[i];
      if ("entry" in q && q.entry.slot === slot && !same(q.entry)) this.#queue.splice(i, 1);
    }
    const r = this.#current;
    if (r !== undefined && r.entry.slot === slot && !same(r.entry)) this.#drop(r, "stream halted");
  }

  /**
   * The custom-op libraries a stream's EXTENDED_INSTs can reach: those of the opcode table its MODEL_SWITCH names (or
   * of the swap-table register's). The device prepares them in its Q7 cores when the stream is installed, so the
   * first execute does not compile them. Best effort: a stream or table it cannot read yields none (the execute then
   * reports the fault).
   */
  librariesOf(entry: StreamEntry): Array<{ key: string; image: () => Uint8Array }> {
    try {
      const slots = this.#d.memory.decodePa(entry.pa, entry.slots * SLOT_BYTES, "stream", decodeStream) ?? [];
      const ul = slots.find((s): s is Extract<Instruction, { op: typeof Opcode.ULIB_LOAD }> =>
        typeof s !== "number" && s.op === Opcode.ULIB_LOAD
      );
      return ul === undefined ? [] : this.#librariesOfTable(ul.opcodeTable);
    } catch {
      return [];
    }
  }

  /**
   * Decodes the tables a stream's runs read (the ring tables of its DMA_CONFIGs, the argument tables of its
   * LOAD_POOL_ARGUMENTs) into the memory's decode cache when the stream is installed, so its first run does not
   * (ours: the cache is the simulator's). Best effort: what it cannot read is left for the run to report, and a table
   * the host rewrites later is decoded again then.
   */
  prefetchTables(entry: StreamEntry): void {
    try {
      const slots = this.#d.memory.decodePa(entry.pa, entry.slots * SLOT_BYTES, "stream", decodeStream);
      if (slots === undefined) return;
      for (const ins of slots) {
        if (typeof ins === "number") continue;
        if (ins.op === Opcode.DMA_CONFIG) this.#d.dma.prefetch(ins.queues, ins.ringTable);
        else if (ins.op === Opcode.LOAD_POOL_ARGUMENT) this.#loadArguments(ins.embeddingTableBase);
      }
    } catch {
      // The run reports the stream or table it cannot read.
    }
  }

  /** The libraries the opcode table at `pa` names; none for a table it cannot read (best effort, see above). */
  #librariesOfTable(pa: number): Array<{ key: string; image: () => Uint8Array }> {
    try {
      if (pa === 0) return [];
      const saved = this.#opcodeTablePa;
      this.#opcodeTablePa = pa;
      let table: OpcodeTable;
      try {
        table = this.#opcodeTable();
      } finally {
        this.#opcodeTablePa = saved;
      }
      const out = new Map<string, () => Uint8Array>();
      for (const l of opcodeTableLibraries(table)) out.set(libraryKey(l.tag, l.bytes), this.#imageReader(l));
      return [...out].map(([key, image]) => ({ key, image }));
    } catch {
      return [];
    }
  }

  /**
   * Stages the libraries of `entry` in `cluster` in the run order (never while an op of another run is on the
   * cores); resolves once they are prepared (or could not be: the execute reports that).
   */
  stageLibraries(
    entry: StreamEntry,
    cluster: { ensureLibrary(key: string, image: () => Uint8Array): Promise<void> | undefined },
  ): Promise<void> {
    return this.#stage(this.librariesOf(entry), cluster);
  }

  /**
   * Stages the libraries of the opcode table the swap-table register names (the host wrote the table before the
   * swap: `ucode_stage_libs` → `ucode_switch_libs`). Ours: with the stream installed before the libraries are staged
   * (lifecycle-error-model §2.6), the swap is the first moment the device can read them.
   */
  stageTableLibraries(
    cluster: { ensureLibrary(key: string, image: () => Uint8Array): Promise<void> | undefined },
  ): Promise<void> {
    return this.#stage(this.#librariesOfTable(this.#opcodeTablePa), cluster);
  }

  #stage(
    libs: Array<{ key: string; image: () => Uint8Array }>,
    cluster: { ensureLibrary(key: string, image: () => Uint8Array): Promise<void> | undefined },
  ): Promise<void> {
    if (libs.length === 0 || this.#stopped) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#queue.push({
        stage: async () => {
          try {
            await this.#prepareIn(cluster, libs);
          } finally {
            resolve();
          }
        },
        settle: resolve,
      });
      this.#kick();
    });
  }

  /** Prepares `libs` in `cluster`, in order, until the sequencer stops; a library that fails is left to its execute. */
  async #prepareIn(
    cluster: { ensureLibrary(key: string, image: () => Uint8Array): Promise<void> | undefined },
    libs: Iterable<{ key: string; image: () => Uint8Array }>,
  ): Promise<void> {
    for (const lib of libs) {
      if (this.#stopped) return;
      await cluster.ensureLibrary(lib.key, lib.image)?.catch(() => {});
    }
  }

  /** Drops the run in progress (no completion); queued runs proceed. Used by the portal's Q7 reset. */
  dropCurrent(): boolean {
    const r = this.#current;
    if (r === undefined) return false;
    r.abort.abort();
    return true;
  }

  #drop(r: Run, cause: string): void {
    if (r.abort.aborted) return;
    r.abort.abort();
    // A kernel that never returns keeps its Workers spinning: stop them. After the watchdog's drop the device boots
    // fresh ones at once; after a halt, the next EXTENDED_INST does.
    if (!r.q7Busy) return;
    this.#d.q7.terminate(cause);
    if (cause === WATCHDOG_CAUSE) this.#recoverQ7();
  }

  /**
   * After the watchdog stopped a hung kernel, boots a fresh Q7 cluster from the released image at once and prepares
   * in it the libraries of every stream installed on the NeuronCore and of the current opcode table, ahead of any run
   * queued meanwhile. Ours: the seed leaves the engine's recovery to the management core, not to libnrt
   * (lifecycle-error-model §5.5), and says no more; recovering at once means the next execute of a model left
   * loaded (a timeout does not poison it) does not pay the cluster's boot inside its own budget. The host sees no
   * call of its own for it. A close or an unload meanwhile stops the fresh cluster like any other.
   */
  #recoverQ7(): void {
    if (this.#stopped) return;
    this.#queue.unshift({
      stage: async () => {
        const cluster = await this.#d.q7.cluster();
        const libs = new Map<string, { key: string; image: () => Uint8Array }>();
        for (let slot = 0; slot < this.#d.spec.csr.streamSlots; slot++) {
          const entry = this.#d.regs.streamEntry(slot);
          if (entry !== undefined) { for (const l of this.librariesOf(entry)) libs.set(l.key, l); }
        }
        for (const l of this.#librariesOfTable(this.#opcodeTablePa)) libs.set(l.key, l);
        await this.#prepareIn(cluster, libs.values());
      },
      settle: () => {},
    });
    this.#kick();
  }

  /** Stops for good (portal close): queued runs are discarded and the run in progress is dropped. */
  shutdown(): void {
    this.#stopped = true;
    this.#disarmWatchdog();
    for (const q of this.#queue.splice(0)) if ("settle" in q) q.settle();
    this.dropCurrent();
  }

  /** Stdio the Q7 kernels wrote since the last call (the seam for the host-side pool_stdio rings). */
  stdioEntries(): Promise<Array<{ cpu: number; stream: number; text: string }>> {
    return Promise.resolve(this.#d.q7.drainStdio());
  }

  /** Posts one record to the NeuronCore's notification queue: the single exit of every device notification. */
  pushRecord(record: NotificationRecord): void {
    if (this.#burst !== undefined) this.#burst.push(record);
    else this.#d.nq.push(record);
    const r = this.#current;
    if (r?.trace !== undefined) this.#traceRecords(r, [record]);
  }

  /** Posts a burst of records (the per-core errors of one join) that the host sees all at once. */
  pushRecords(records: readonly NotificationRecord[]): void {
    if (this.#burst !== undefined) this.#burst.push(...records);
    else if (records.length > 0) this.#d.nq.pushAll(records);
    const r = this.#current;
    if (r?.trace !== undefined) this.#traceRecords(r, records);
  }

  /**
   * Publishes the records a run pushed since its last wait, with one store of the NQ head, and stops collecting
   * (ours): the records of instructions that run back to back without waiting — the NOTIFY, EVENT_SEMAPHORE and
   * EXEC_DONE records after the DRAIN join — reach the host together, so its completion wait wakes once per run
   * instead of once per record. Their order and content are unchanged; the seed does not say when the engines
   * publish their writes.
   */
  #publish(): void {
    const burst = this.#burst;
    this.#burst = undefined;
    if (burst !== undefined && burst.length > 0) this.#d.nq.pushAll(burst);
  }

  #traceRecords(r: Run, records: readonly NotificationRecord[]): void {
    const t = sharedClockMs();
    for (const record of records) r.trace!({ kind: "notify", start: t, end: t, run: r.count, record });
  }

  /** Takes the rest of the queue once an entry waits, waiting for each entry that does. */
  async #pump(first: Promise<void>): Promise<void> {
    try {
      for (let waiting: Promise<void> | undefined = first; waiting !== undefined; waiting = this.#takeQueue()) {
        await waiting;
      }
    } finally {
      this.#pumpActive = false;
    }
  }

  /**
   * Moves the device's clock `ms` ahead (simulator-only, ours): what a test does to the device's time when it runs the
   * host on a virtual clock, so that the watchdog sees the budget pass without waiting for it.
   */
  elapse(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`Cannot move the device clock by ${ms} ms`);
    this.#skewMs += ms;
    // A pending timer was set for a real delay the new skew has made stale: it goes. The run in progress is checked
    // (and re-armed) now; the next run arms one for its own deadline (already past, for a run rung before this).
    this.#disarmWatchdog();
    this.#checkWatchdog();
  }

  #now(): number {
    return sharedClockMs() + this.#skewMs;
  }

  /**
   * Arms the watchdog for the run in progress, unless the timer is already due no later than the run's deadline (it
   * re-arms itself for the rest when it fires).
   */
  #armWatchdog(): void {
    const budget = this.#d.watchdogMs ?? 0;
    const r = this.#current;
    if (budget <= 0 || r === undefined || this.#stopped) return;
    const due = r.rungAt + budget;
    if (this.#watchdog !== undefined && this.#watchdogDue <= due) return;
    this.#disarmWatchdog();
    this.#watchdogDue = due;
    this.#watchdog = setTimeout(this.#onWatchdog, Math.min(Math.max(0, due - this.#now()), 0x7fff_ffff));
  }

  #disarmWatchdog(): void {
    if (this.#watchdog !== undefined) clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
  }

  /**
   * The watchdog: a run past the budget is dropped by the device (no completion record; the host's own timeout
   * reports it) and Q7 cores busy with it are terminated; otherwise the timer is re-armed for the run in progress.
   */
  #checkWatchdog(): void {
    const budget = this.#d.watchdogMs ?? 0;
    const r = this.#current;
    if (budget <= 0 || r === undefined || r.abort.aborted) return;
    if (this.#now() - r.rungAt >= budget) {
      this.#dropOverBudget(r, budget);
      return;
    }
    this.#disarmWatchdog();
    this.#armWatchdog();
  }

  /**
   * Plays one run of `entry`. Synchronous (`undefined`) when no instruction waits, as for every run of a loaded model
   * whose op runs on this thread; otherwise a promise for the rest of the run (ours: no coroutine per run).
   */
  #run(entry: StreamEntry, rungAt: number): Promise<void> | undefined {
    const run = this.#begin(entry, rungAt);
    if (run === undefined) return undefined;
    let waiting: Promise<void> | undefined;
    try {
      const atStart = this.#fire(run, "run-start");
      waiting = atStart === undefined ? this.#fetch(run) : atStart.then(() => this.#fetch(run));
    } catch (e) {
      this.#failed(run, e);
    }
    if (waiting === undefined) {
      this.#end(run);
      return undefined;
    }
    return this.#endLater(run, waiting);
  }

  /** The rest of a run that waits: its end once its steps are done. */
  async #endLater(run: Run, waiting: Promise<void>): Promise<void> {
    try {
      await waiting;
    } catch (e) {
      this.#failed(run, e);
    } finally {
      this.#end(run);
    }
  }

  /** Starts a run: counts, marks it current, arms the watchdog. `undefined` for a run over budget already (dropped). */
  #begin(entry: StreamEntry, rungAt: number): Run | undefined {
    const { spec, q7 } = this.#d;
    const count = (this.#runCounts.get(entry.slot) ?? 0) + 1;
    this.#runCounts.set(entry.slot, count);
    // seed: runtime-synthesis §2.1 — on Sunda the Q7s leave run-stall under SEQ/SP, not by a host CSR write.
    if (spec.runStallRelease === "evt-sem" && q7.state !== "running") q7.release("evt-sem");
    const regs = this.#d.regs;
    // The trace word is read once per run: an untraced run reads no clock beyond the two of the busy counter.
    const trace = this.#d.timeline !== undefined && Atomics.load(regs.status, NcStatus.TRACE) !== 0
      ? this.#d.timeline
      : undefined;
    const started = sharedClockMs();
    const run: Run = {
      entry,
      rungAt,
      count,
      started,
      outcome: "completed",
      model: entry.model,
      slot: 0,
      args: undefined,
      s2mBytes: undefined,
      dispatch: undefined,
      q7Busy: false,
      abort: new RunDrop(),
      joinedHere: false,
      localJoin: undefined,
      trace,
      fn: "",
      loaded: new Set(),
    };
    regs.counters[NcCounter.RUN_STARTED_MS] = started;
    this.#current = run;
    // A run whose budget ran out while it was queued (it counts from the doorbell) is dropped before it starts.
    const budget = this.#d.watchdogMs ?? 0;
    if (budget > 0 && this.#now() - rungAt >= budget) {
      this.#dropOverBudget(run, budget);
      run.outcome = "dropped";
      this.#end(run);
      return undefined;
    }
    this.#armWatchdog();
    Atomics.add(regs.status, NcStatus.RUNS, 1);
    this.#d.faults?.runStarted();
    return run;
  }

  /** The fetch of the run's stream, then its instructions. */
  #fetch(run: Run): Promise<void> | undefined {
    const { entry } = run;
    // The fetch: slots decoded once per write of the stream's memory (the host writes it at load), not per run.
    const slots = this.#d.memory.decodePa(entry.pa, entry.slots * SLOT_BYTES, "stream", decodeStream);
    if (slots === undefined) {
      throw new SequencerFault(
        TpbFaultMask.BAD_INSTRUCTION,
        `Stream at 0x${entry.pa.toString(16)} (${entry.slots} slots) is not in device memory`,
      );
    }
    // Records collect between waits and are published before each wait and at the end (#publish).
    this.#burst = [];
    run.slot = 0;
    return this.#steps(run, slots);
  }

  /**
   * The instructions from `run.slot` on, in turn; once one waits (an injected fault, a Q7 cluster or library still
   * being prepared, an op on the Workers), a promise for the rest.
   */
  #steps(run: Run, slots: ReturnType<typeof decodeStream>): Promise<void> | undefined {
    for (; run.slot < run.entry.slots; run.slot++) {
      const ins = slots[run.slot];
      if (typeof ins === "number") {
        throw new SequencerFault(
          TpbFaultMask.BAD_INSTRUCTION,
          `Slot ${run.slot} holds an undecodable header 0x${ins.toString(16)}`,
        );
      }
      const atInstruction = this.#fire(run, "instruction");
      if (atInstruction !== undefined) return this.#stepsAfter(run, slots, ins, atInstruction, true);
      const t0 = run.trace === undefined ? 0 : sharedClockMs();
      const executing = this.#execute(ins, run);
      if (executing !== undefined) return this.#stepsAfter(run, slots, ins, executing, false, t0);
      if (this.#executed(run, ins, t0)) return undefined;
    }
    return undefined;
  }

  /**
   * Waits for what instruction `ins` waits on (its injected fault when `beforeExecute`, else its execution), with the
   * records so far published, then goes on with the rest of the run.
   */
  async #stepsAfter(
    run: Run,
    slots: ReturnType<typeof decodeStream>,
    ins: Instruction,
    waiting: Promise<void>,
    beforeExecute: boolean,
    t0 = 0,
  ): Promise<void> {
    this.#publish();
    await waiting;
    this.#burst = [];
    if (beforeExecute) {
      t0 = run.trace === undefined ? 0 : sharedClockMs();
      const executing = this.#execute(ins, run);
      if (executing !== undefined) {
        this.#publish();
        await executing;
        this.#burst = [];
      }
    }
    if (this.#executed(run, ins, t0)) return;
    run.slot++;
    const rest = this.#steps(run, slots);
    if (rest !== undefined) await rest;
  }

  /** After an instruction: `true` when the run was dropped meanwhile (it stops), else its timeline entry. */
  #executed(run: Run, ins: Instruction, t0: number): boolean {
    if (run.abort.aborted) {
      run.outcome = "dropped";
      return true;
    }
    run.trace?.({
      kind: "instruction",
      start: t0,
      end: sharedClockMs(),
      run: run.count,
      slot: run.slot,
      opcode: ins.op,
      arg: instructionArg(ins),
    });
    return false;
  }

  /** A run's instructions threw: a dropped or halted run just ends, anything else is a fault of the slot. */
  #failed(run: Run, e: unknown): void {
    run.outcome = run.abort.aborted ? "dropped" : "faulted";
    if (run.abort.aborted || e instanceof StreamHalt) return;
    const f = e instanceof SequencerFault ? e : new SequencerFault(TpbFaultMask.BAD_INSTRUCTION, String(e));
    this.#fault(run, f.mask, f.message, [f.q7]);
  }

  /** Ends a run, whatever its outcome: its records published, the cores idle, the busy time counted. */
  #end(run: Run): void {
    // An op handed to the cores and never joined still runs (a stream without its DRAIN).
    if (!run.abort.aborted && run.q7?.hasPending) this.#runPending(run);
    this.#publish();
    // A run that ends with its cores still marked busy was dropped mid-op or mid-prepare, and its cluster was
    // terminated (#drop): the cores are not busy any more.
    if (run.q7Busy) this.#setBusy(run, false);
    if (this.#current === run) this.#current = undefined;
    // The device's busy time (utilization): the run's span, whatever its outcome.
    const regs = this.#d.regs;
    const ended = sharedClockMs();
    regs.counters[NcCounter.BUSY_MS] += ended - run.started;
    regs.counters[NcCounter.RUN_STARTED_MS] = 0;
    run.trace?.({
      kind: "run",
      start: run.started,
      end: ended,
      run: run.count,
      model: run.model,
      outcome: run.outcome,
    });
  }

  /** Executes one instruction; only EXTENDED_INST and DRAIN return a promise (they wait on the Q7 cluster). */
  #execute(ins: Instruction, run: Run): Promise<void> | undefined {
    const { dma } = this.#d;
    switch (ins.op) {
      case Opcode.NOTIFY:
        this.pushRecord(this.#record(run, ins.kind, ins.kind === NotificationKind.EXEC_DONE ? run.count : ins.value));
        return;
      case Opcode.MODEL_SWITCH:
        run.model = ins.model;
        this.currentModel = ins.model;
        if (ins.opcodeTable !== 0) this.#opcodeTablePa = ins.opcodeTable;
        return;
      case Opcode.ULIB_LOAD:
        return this.#ulibLoad(ins, run);
      case Opcode.DMA_CONFIG:
        try {
          dma.configure(ins.direction, ins.queues, ins.ringTable);
        } catch (e) {
          throw dmaFault(e);
        }
        return;
      case Opcode.DMA_CONFIG_SIZE:
        try {
          dma.run(DmaDirection.M2S, ins.m2sBytes, dmaTimeline(run, DmaDirection.M2S));
        } catch (e) {
          throw dmaFault(e);
        }
        run.s2mBytes = ins.s2mBytes;
        return;
      case Opcode.LOAD_POOL_ARGUMENT:
        run.args = this.#loadArguments(ins.embeddingTableBase);
        return;
      case Opcode.EXTENDED_INST:
        return this.#extendedInst(ins.opcode, run);
      case Opcode.DRAIN_ARM:
        return;
      case Opcode.DRAIN:
        return this.#drain(run);
      case Opcode.EVENT_SEMAPHORE: {
        if (ins.updateMode !== EVENT_UPDATE_MODE_INCREMENT) {
          throw new SequencerFault(
            TpbFaultMask.EVENT,
            `EVENT_SEMAPHORE update mode 0x${ins.updateMode.toString(16)} is not 0x13`,
          );
        }
        const sems = this.#d.regs.semaphores;
        if (ins.semaphore >= sems.length) {
          throw new SequencerFault(TpbFaultMask.EVENT, `EVENT_SEMAPHORE names semaphore ${ins.semaphore}`);
        }
        const after = (Atomics.add(sems, ins.semaphore, Math.max(1, ins.value)) + Math.max(1, ins.value)) >>> 0;
        this.pushRecord(this.#record(run, NotificationKind.EVENT_SEMAPHORE, after));
        return;
      }
    }
  }

  #loadArguments(pa: number): ArgTable {
    const { memory } = this.#d;
    const header = memory.readPa(pa, ARG_HEADER_BYTES);
    const bad = (why: string): never => {
      throw new SequencerFault(TpbFaultMask.ARGUMENT, `Argument table at 0x${pa.toString(16)} ${why}`);
    };
    if (header === undefined) return bad("is not in device memory");
    const ni = getU32(header, 0), no = getU32(header, 4), nk = getU32(header, 8);
    if (ni + no > 1024 || nk > 1024) return bad("has implausible counts");
    const size = ARG_HEADER_BYTES + (ni + no) * TENSOR_DESC_BYTES + nk * 8;
    try {
      return memory.decodePa(pa, size, "args", decodeArgTable) ?? bad(`does not fit its ${size} B in device memory`);
    } catch (e) {
      if (e instanceof SequencerFault) throw e;
      return bad(`is malformed: ${(e as Error).message}`);
    }
  }

  #opcodeTable(): OpcodeTable {
    const pa = this.#opcodeTablePa;
    const cached = this.#tables.get(pa);
    if (cached !== undefined) return cached;
    const bad = (why: string): never => {
      throw new SequencerFault(TpbFaultMask.OPCODE, `Opcode table at 0x${pa.toString(16)} ${why}`);
    };
    if (pa === 0) return bad("is not set (no swap-table write or MODEL_SWITCH)");
    const header = this.#d.memory.readPa(pa, OPCODE_TABLE_HEADER_BYTES) ?? bad("is not in device memory");
    const n = getU32(header, 4);
    const bytes = this.#d.memory.readPa(pa, OPCODE_TABLE_HEADER_BYTES + Math.min(n, 97) * OPCODE_TABLE_ENTRY_BYTES) ??
      bad("is truncated");
    let table: OpcodeTable;
    try {
      table = decodeOpcodeTable(bytes);
    } catch (e) {
      return bad(`is malformed: ${(e as Error).message}`);
    }
    this.#tables.set(pa, table);
    return table;
  }

  /** The key and image reader of the library `lib` describes, kept with `owner` (an entry or a listed library). */
  #libraryOf(
    owner: object,
    lib: { addr: number; bytes: number; tag: number },
  ): { key: string; image: () => Uint8Array } {
    let l = this.#libraries.get(owner);
    if (l === undefined) {
      this.#libraries.set(owner, l = { key: libraryKey(lib.tag, lib.bytes), image: this.#imageReader(lib) });
    }
    return l;
  }

  /** `#libraryOf` for the library an opcode-table entry names; nothing is allocated once it is kept. */
  #entryLibrary(e: OpcodeTableEntry): { key: string; image: () => Uint8Array } {
    return this.#libraries.get(e) ?? this.#libraryOf(e, { addr: e.libAddr, bytes: e.libBytes, tag: e.libTag ?? 0 });
  }

  /**
   * Reads a staged library image for the Q7 cores to prepare, checking it against its content tag (ours): an image
   * that is not in device memory, or whose bytes do not hash to the tag the opcode table gives, is an OPCODE fault.
   */
  #imageReader(lib: { addr: number; bytes: number; tag: number }): () => Uint8Array {
    return () => {
      const image = this.#d.memory.readPa(lib.addr, lib.bytes);
      if (image === undefined) {
        throw new SequencerFault(TpbFaultMask.OPCODE, `Library at 0x${lib.addr.toString(16)} is not in device memory`);
      }
      if (libraryTag(image) !== lib.tag) {
        throw new SequencerFault(
          TpbFaultMask.OPCODE,
          `Library at 0x${lib.addr.toString(16)} does not match its tag 0x${lib.tag.toString(16)} in the opcode table`,
        );
      }
      return image;
    };
  }

  /**
   * ULIB_LOAD (ours): library `lib` of the opcode table the instruction names goes into the Q7 cores'
   * kernel_info_table for this run — compiled into the cluster if it is not there yet (the install usually did that),
   * then marked loaded. EXTENDED_INST resolves only libraries so loaded.
   */
  #ulibLoad(ins: Extract<Instruction, { op: typeof Opcode.ULIB_LOAD }>, run: Run): Promise<void> | undefined {
    const saved = this.#opcodeTablePa;
    this.#opcodeTablePa = ins.opcodeTable;
    let libs: Array<{ addr: number; bytes: number; tag: number }>;
    try {
      libs = librariesOf(this.#opcodeTable());
    } finally {
      this.#opcodeTablePa = saved;
    }
    if (libs.length !== ins.libs || ins.lib >= libs.length) {
      throw new SequencerFault(
        TpbFaultMask.OPCODE,
        `ULIB_LOAD ${ins.lib}/${ins.libs}: the opcode table at 0x${
          ins.opcodeTable.toString(16)
        } names ${libs.length} libraries`,
      );
    }
    const lib = libs[ins.lib];
    const { key, image } = this.#libraryOf(lib, lib);
    const q7 = this.#d.q7;
    if (q7.state !== "running") {
      throw new SequencerFault(TpbFaultMask.Q7_BOOT, `ULIB_LOAD ${ins.lib}/${ins.libs}: the Q7 cores are ${q7.state}`);
    }
    const cluster = q7.ready;
    const preparing = cluster?.ensureLibrary(key, image);
    if (cluster !== undefined && preparing === undefined) {
      run.loaded.add(key);
      return undefined;
    }
    return (async () => {
      const c = cluster ?? await Promise.race([q7.cluster().catch((e: unknown) => e as Error), droppedOf(run)]);
      if (c === DROPPED) return;
      if (c instanceof Error) {
        throw new SequencerFault(TpbFaultMask.Q7_BOOT, `Cannot start the Q7 cluster: ${c.message}`);
      }
      const p = cluster === undefined ? c.ensureLibrary(key, image) : preparing;
      if (p !== undefined) {
        const prepared = await this.#preparing(run, p);
        if (prepared === DROPPED) return;
        if (prepared instanceof SequencerFault) throw prepared;
        if (prepared instanceof Error) {
          throw new SequencerFault(TpbFaultMask.Q7_BOOT, `Cannot prepare library ${key}: ${prepared.message}`);
        }
      }
      run.loaded.add(key);
    })();
  }

  /**
   * EXTENDED_INST 0xF0: resolve the opcode, make sure the image is in the cluster, start the op on the cores.
   * Synchronous (`undefined`) when the cluster is up and the library prepared, as on every run of a loaded model; a
   * promise only when it has to wait for one of them (ours: no coroutine and no await on the run's path).
   */
  #extendedInst(opcode: number, run: Run): Promise<void> | undefined {
    const { q7 } = this.#d;
    if (q7.state !== "running") {
      throw new SequencerFault(
        TpbFaultMask.Q7_BOOT,
        `EXTENDED_INST 0x${opcode.toString(16)}: the Q7 cores are ${q7.state}`,
      );
    }
    const entries = this.#opcodeTable().entries;
    let entry: (typeof entries)[number] | undefined;
    for (let i = 0; i < entries.length && entry === undefined; i++) {
      if (entries[i].opcode === opcode) entry = entries[i];
    }
    if (entry === undefined) {
      throw new SequencerFault(
        TpbFaultMask.OPCODE,
        `EXTENDED_INST names opcode 0x${opcode.toString(16)}, absent from the opcode table`,
      );
    }
    if (entry.totalCpus !== 1 && entry.totalCpus !== 8) {
      throw new SequencerFault(
        TpbFaultMask.OPCODE,
        `Opcode 0x${opcode.toString(16)} declares total_cpus ${entry.totalCpus}, expected 1 or 8`,
      );
    }
    // The cluster is started at load (stream install); only a first op after a Q7 reset waits for it.
    const started = q7.ready;
    if (started === undefined) return this.#extendedInstOnStart(opcode, entry, run);
    return this.#dispatchEntry(opcode, entry, started, run);
  }

  /** The EXTENDED_INST of a run that found the Q7 cluster still starting: waits for it, then dispatches. */
  async #extendedInstOnStart(opcode: number, entry: OpcodeTableEntry, run: Run): Promise<void> {
    const started = await Promise.race([this.#d.q7.cluster().catch((e: unknown) => e as Error), droppedOf(run)]);
    if (started === DROPPED) return;
    if (started instanceof Error) {
      throw new SequencerFault(TpbFaultMask.Q7_BOOT, `Cannot start the Q7 cluster: ${started.message}`);
    }
    const dispatching = this.#dispatchEntry(opcode, entry, started, run);
    if (dispatching !== undefined) await dispatching;
  }

  /** Checks the op's library and dispatches it; a promise only when the library has to be prepared first. */
  #dispatchEntry(opcode: number, entry: OpcodeTableEntry, started: ClusterHandle, run: Run): Promise<void> | undefined {
    if (entry.libBytes <= 0) {
      this.#dispatchOp("", entry, started, run);
      return undefined;
    }
    const { key, image } = this.#entryLibrary(entry);
    if (!run.loaded.has(key)) {
      throw new SequencerFault(
        TpbFaultMask.OPCODE,
        `EXTENDED_INST 0x${opcode.toString(16)}: its library at 0x${
          entry.libAddr.toString(16)
        } was not loaded by a ULIB_LOAD of the stream's PREAMBLE`,
      );
    }
    const preparing = started.ensureLibrary(key, image);
    if (preparing === undefined) {
      this.#dispatchOp(key, entry, started, run);
      return undefined;
    }
    return this.#preparing(run, preparing).then((prepared) => {
      if (prepared === DROPPED) return;
      if (prepared instanceof SequencerFault) throw prepared;
      if (prepared instanceof Error) {
        throw new SequencerFault(TpbFaultMask.Q7_BOOT, `Cannot prepare library ${key}: ${prepared.message}`);
      }
      this.#dispatchOp(key, entry, started, run);
    });
  }

  /** Starts the op on the cores; its DRAIN joins it. */
  #dispatchOp(key: string, entry: OpcodeTableEntry, started: ClusterHandle, run: Run): void {
    const budget = this.#d.watchdogMs ?? 0;
    const op = {
      key,
      fn: entry.name,
      totalCpus: entry.totalCpus as 1 | 8,
      args: run.args ?? NO_ARGS, // the decoded table itself: the cluster only reads it
      deadlineMs: budget > 0 ? run.rungAt + budget : undefined,
    };
    run.fn = entry.name;
    run.dispatch = started.dispatch(op, run.abort);
    run.q7 = started;
    this.#setBusy(run, true);
    // An op left for this thread is joined at its DRAIN, which marks the cores idle; one on the Workers, when it joins.
    if (!started.hasPending) run.dispatch.then(() => this.#setBusy(run, false), () => {});
    else run.dispatch.catch(ignoreRejection); // joined (and reported) by DRAIN
  }

  /**
   * Runs the op of `run` that the cluster left for this thread, if one waits (a quick op, `localOpBytes`, ours): at the
   * DRAIN, after the records of the instructions between the EXTENDED_INST and it are published, as the cores would
   * have run beside them. If the cluster's watchdog stopped it at its deadline, the run is dropped as #checkWatchdog
   * drops it, and its op never joins.
   */
  #runPending(run: Run): void {
    const q7 = run.q7;
    run.q7 = undefined;
    if (q7 === undefined || !q7.hasPending) return;
    this.#publish();
    this.#burst = [];
    run.joinedHere = q7.runPending() && !q7.watchdogFired;
    // The join itself, when the cluster hands it over: the DRAIN then reads it at once.
    if (run.joinedHere) run.localJoin = q7.takeLocalJoin();
    if (!q7.watchdogFired || run.abort.aborted) return;
    run.dispatch?.catch(() => {});
    run.dispatch = new Promise<never>(() => {});
    this.#dropOverBudget(run, this.#d.watchdogMs ?? 0);
  }

  /** The watchdog's verdict on a run past its `budget` ms: the fault is noted and the run dropped (no completion). */
  #dropOverBudget(r: Run, budget: number): void {
    this.#noteFault({
      slot: r.slot,
      mask: 0,
      message: `${WATCHDOG_CAUSE}: run ${r.count} of stream slot ${r.entry.slot} exceeded ${budget} ms; dropped`,
    });
    this.#drop(r, WATCHDOG_CAUSE);
  }

  /**
   * Waits for a library the cluster is preparing for `run`, with the Q7 cores marked busy for it meanwhile: a run
   * dropped while its library is still being prepared terminates the cluster like a run dropped mid-op (`#drop`), so
   * the next run never finds the cluster still busy with a request of a run that is gone (it boots a fresh one).
   */
  async #preparing(run: Run, p: Promise<void>): Promise<void | Error | typeof DROPPED> {
    this.#setBusy(run, true);
    const prepared = await Promise.race([p.catch((e: unknown) => e as Error), droppedOf(run)]);
    this.#setBusy(run, false); // after a drop too: #drop has already seen the cores busy and terminated them
    return prepared;
  }

  /**
   * DRAIN 0x10A2: the join of the participating cores, then the output DMA. Synchronous (`undefined`) when the op ran
   * on this thread at the DRAIN (a small op) and nothing after the join waits (ours: no coroutine and no await on the
   * run's path); otherwise a promise.
   */
  #drain(run: Run): Promise<void> | undefined {
    this.#runPending(run);
    const dispatch = run.dispatch;
    if (dispatch === undefined) {
      this.#outputDma(run);
      return undefined;
    }
    const here = run.localJoin;
    if (here === undefined) return this.#awaitJoin(run, dispatch);
    run.localJoin = undefined;
    run.joinedHere = false;
    run.dispatch = undefined;
    if (run.q7Busy) this.#setBusy(run, false);
    return this.#afterJoin(run, here.cores);
  }

  /** The DRAIN of an op whose join is not at hand: awaits it, or the run's drop. */
  async #awaitJoin(run: Run, dispatch: Promise<{ cores: Q7CoreResult[] }>): Promise<void> {
    // An op that ran on this thread has settled already: nothing can drop the run before the join is read.
    const joined = run.joinedHere
      ? await this.#joinDispatch(dispatch)
      : await Promise.race([this.#joinDispatch(dispatch), droppedOf(run)]);
    run.joinedHere = false;
    run.dispatch = undefined;
    if (joined === DROPPED) return;
    if (run.q7Busy) this.#setBusy(run, false);
    const rest = this.#afterJoin(run, joined);
    if (rest !== undefined) await rest;
  }

  /** What the DRAIN does once the cores joined; a promise only when the stdio flush or an injected fault waits. */
  #afterJoin(run: Run, joined: Q7CoreResult[]): Promise<void> | undefined {
    if (run.trace !== undefined) {
      for (const c of joined) {
        if (!c.ran || c.startMs === undefined) continue;
        const end = c.startMs + (c.elapsedNs ?? 0) / 1e6;
        run.trace({ kind: "q7", start: c.startMs, end, run: run.count, core: c.cpu, status: c.status, fn: run.fn });
      }
    }
    // The file-IO manager moves the op's printf output to the host rings before any record of this run.
    const f0 = run.trace === undefined ? 0 : sharedClockMs();
    const flushed = this.#d.fileIo?.flush() ?? 0;
    if (flushed instanceof Promise) {
      return flushed.catch(() => 0).then((n) => this.#afterFlush(run, joined, f0, n));
    }
    return this.#afterFlush(run, joined, f0, flushed);
  }

  /** The rest of `#afterJoin` once the op's stdio is on the host rings. */
  #afterFlush(run: Run, joined: Q7CoreResult[], f0: number, flushed: number): Promise<void> | undefined {
    run.trace?.({ kind: "stdio", start: f0, end: sharedClockMs(), run: run.count, entries: flushed });
    const atJoin = this.#fire(run, "join");
    if (atJoin !== undefined) return atJoin.then(() => this.#checkJoin(run, joined));
    this.#checkJoin(run, joined);
    return undefined;
  }

  /** The join's verdict (a failed core halts the stream; an uncommitted one is flagged), then the output DMA. */
  #checkJoin(run: Run, joined: Q7CoreResult[]): void {
    let failed: Q7CoreResult[] | undefined;
    for (const c of joined) if (c.ran && c.status !== "ok") (failed ??= []).push(c);
    if (failed !== undefined) {
      const detail = failed.map((c) => `core ${c.cpu} ${c.status}${c.message === undefined ? "" : `: ${c.message}`}`)
        .join("; ");
      this.#fault(run, 0, `DRAIN: ${detail}`, failed.map((c) => c.cpu), failed.map((c) => STATUS_MASK[c.status]));
      throw new StreamHalt();
    }
    // A core that returned without its commit fence (customop_cleanup): the join completes, the result is
    // flagged with a non-fatal record per core (TpbErrorMask.Q7_UNCOMMITTED, docs/faults.md).
    let uncommitted: NotificationRecord[] | undefined;
    for (const c of joined) {
      if (!c.ran || c.committed) continue;
      this.#noteFault({
        slot: run.slot,
        mask: TpbFaultMask.Q7_UNCOMMITTED,
        message: `DRAIN: core ${c.cpu} returned without customop_cleanup`,
      });
      (uncommitted ??= []).push({
        code: TpbErrorId.NONFATAL,
        mask: TpbFaultMask.Q7_UNCOMMITTED,
        engine: TpbEngType.POOL,
        q7: c.cpu,
        kind: NotificationKind.TPB_ERROR,
        model: run.model,
        value: run.slot,
        aux: 0,
      });
    }
    if (uncommitted !== undefined) this.pushRecords(uncommitted);
    this.#outputDma(run);
  }

  /** The output DMA of a DRAIN (S2M), when the run's DMA_CONFIG_SIZE set one. */
  #outputDma(run: Run): void {
    if (run.s2mBytes === undefined) return;
    try {
      this.#d.dma.run(DmaDirection.S2M, run.s2mBytes, dmaTimeline(run, DmaDirection.S2M));
    } catch (e) {
      throw dmaFault(e);
    }
  }

  /** The cores' outcomes as the DRAIN sees them; a failed dispatch reads as every core aborted. */
  async #joinDispatch(dispatch: Promise<{ cores: Q7CoreResult[] }>): Promise<Q7CoreResult[]> {
    try {
      return (await dispatch).cores;
    } catch (e) {
      return failedJoin(e);
    }
  }

  /** Posts one fatal TPB_ERROR per named core and marks the POOL instruction pointer. */
  #fault(run: Run, mask: number, message: string, cores: number[], masks?: number[]): void {
    const slot = run.slot;
    this.#noteFault({ slot, mask: masks?.reduce((a, b) => a | b, 0) ?? mask, message });
    this.#d.regs.engineIp[TpbEngType.POOL] = (FAULT_IP_MARKER | slot) >>> 0;
    this.pushRecords(cores.map((core, i) => ({
      code: TpbErrorId.FATAL,
      mask: masks?.[i] ?? mask,
      engine: TpbEngType.POOL,
      q7: core,
      kind: NotificationKind.TPB_ERROR,
      model: run.model,
      value: slot,
      aux: 0,
    })));
  }

  /** Takes the injected faults due at `phase` and plays them; a halting fault ends the run without completion. */
  /**
   * Fires the faults due at `phase`. Synchronous (returns `undefined`) when nothing is due, which is every
   * instruction of a healthy run, so the fetch loop awaits only when a fault actually hangs the stream.
   */
  #fire(run: Run, phase: FaultPhase): Promise<void> | undefined {
    const due = this.#d.faults?.take(phase) ?? [];
    if (due.length === 0) return undefined;
    let outcome: "continue" | "halt" | "hang" = "continue";
    for (const f of due) {
      const o = this.#inject(run, f);
      if (o === "hang" || (o === "halt" && outcome === "continue")) outcome = o;
    }
    if (outcome === "hang") return droppedOf(run).then(() => Promise.reject(new StreamHalt())); // never completes; the device's watchdog (or an unload) drops it
    if (outcome !== "continue") throw new StreamHalt();
    return undefined;
  }

  /** Produces what the hardware would for one fault (docs/faults.md). */
  #inject(run: Run, f: ArmedFault): "continue" | "halt" | "hang" {
    const s = f.spec;
    const engine = s.kind === FaultKind.DMA_ABORT ? TpbEngType.POOL : s.engine ?? TpbEngType.POOL;
    const q7 = s.q7 ?? 0xff;
    const push = (kind: number, code: number, mask: number, value: number, aux: number): void => {
      this.pushRecord({ code, mask, engine, q7, kind, model: run.model, value, aux });
    };
    const tpb = (fatal: boolean, mask: number, aux = 0): void =>
      push(NotificationKind.TPB_ERROR, fatal ? TpbErrorId.FATAL : TpbErrorId.NONFATAL, mask, run.slot, aux);
    const hw = (cause: number, mask: number, aux: number): void => push(NotificationKind.HW_ERROR, 0, mask, cause, aux);
    let outcome: "continue" | "halt" | "hang" = "halt";
    switch (s.kind) {
      case FaultKind.TPB_ERROR:
        tpb(s.fatal ?? true, s.mask ?? 0);
        if (s.fatal === false) outcome = "continue";
        break;
      case FaultKind.OOB:
        tpb(true, TpbErrorMask.Q7_OOB);
        break;
      case FaultKind.FP_NAN:
        tpb(false, TpbErrorMask.NUMERICAL);
        outcome = "continue";
        break;
      case FaultKind.RECOVERABLE:
        tpb(false, TpbErrorMask.RECOVERABLE);
        outcome = "continue";
        break;
      case FaultKind.HBM_UE:
        hw(HwErrorCause.HBM_UE, s.repairable === true ? HBM_UE_REPAIRABLE : 0, s.metadata ?? 0xdead_b000);
        break;
      case FaultKind.NC_UE:
        hw(HwErrorCause.NC_UE, 0, s.metadata ?? 0x0000_0001);
        break;
      case FaultKind.NETWORK_PROXY:
        hw(HwErrorCause.NETWORK_PROXY, 0, s.metadata ?? 0x0000_0001);
        break;
      case FaultKind.DMA_ABORT: {
        const e = s.engine ?? collectCustomOpQueues(this.#d.spec)[0].engine; // default: the engine of Q7 core 0's queue
        this.#setDmaEngineState(e, DmaEngineState.ABORTED);
        tpb(true, TpbErrorMask.DMA, e);
        break;
      }
      case FaultKind.NQ_OVERFLOW: {
        // A burst the host ring cannot hold: capacity + 1 records before the host can read any.
        const capacity = this.#d.regs.nqRegister(NqRegister.CAPACITY);
        this.pushRecords(
          Array.from({ length: capacity + 1 }, () => this.#record(run, NotificationKind.EVENT_SEMAPHORE, 0)),
        );
        break;
      }
      case FaultKind.HANG:
        outcome = "hang";
        break;
      case FaultKind.COLLECTIVES_HANG: {
        const c = s.collectives ?? {};
        hw(
          HwErrorCause.COLLECTIVES,
          c.variant ?? CollectivesHang.BARRIER,
          collectivesProgress(c.op ?? 0, c.total ?? 0),
        );
        outcome = "hang";
        break;
      }
    }
    // The latch: the reporting engine's instruction pointer marks where the device stopped.
    if (outcome !== "continue") this.#d.regs.engineIp[engine] = (FAULT_IP_MARKER | run.slot) >>> 0;
    this.#noteFault({ slot: run.slot, mask: s.mask ?? 0, message: `injected ${s.kind} (fault ${f.id})` });
    return outcome;
  }

  #setBusy(run: Run, busy: boolean): void {
    run.q7Busy = busy;
    Atomics.store(this.#d.regs.status, NcStatus.Q7_BUSY, busy ? 1 : 0);
  }

  #setDmaEngineState(engine: number, state: number): void {
    const { spec, regs } = this.#d;
    new DataView(regs.dma.buffer, regs.dma.byteOffset, regs.dma.byteLength).setUint32(
      engine * spec.csr.dmaEngineStride + DMA_ENGINE_STATE_OFFSET,
      state >>> 0,
      true,
    );
  }

  /** A stream was installed: its DMA queues are (re)initialised, an aborted engine included. */
  resetDmaEngines(): void {
    const { spec } = this.#d;
    for (let e = 0; e < spec.dmaEngines; e++) this.#setDmaEngineState(e, DmaEngineState.IDLE);
  }

  #record(run: Run, kind: number, value: number): NotificationRecord {
    return { code: 0, mask: 0, engine: TpbEngType.POOL, q7: 0xff, kind, model: run.model, value, aux: 0 };
  }
}

/**
 * The libraries of a decoded opcode table, listed once per decoded table: the same objects at every ULIB_LOAD, so
 * the sequencer keeps each one's key and image reader with it (`#libraryOf`).
 */
const TABLE_LIBRARIES = new WeakMap<OpcodeTable, Array<{ addr: number; bytes: number; tag: number }>>();

function librariesOf(table: OpcodeTable): Array<{ addr: number; bytes: number; tag: number }> {
  let libs = TABLE_LIBRARIES.get(table);
  if (libs === undefined) TABLE_LIBRARIES.set(table, libs = opcodeTableLibraries(table));
  return libs;
}

/** Decodes every slot of a stream: an instruction, or the raw header word of a slot the sequencer cannot decode. */
function decodeStream(bytes: Uint8Array): Array<Instruction | number> {
  const out: Array<Instruction | number> = [];
  for (let at = 0; at + SLOT_BYTES <= bytes.byteLength; at += SLOT_BYTES) {
    out.push(decodeInstruction(bytes, at) ?? (bytes[at] | (bytes[at + 1] << 8)));
  }
  return out;
}

/** The number a timeline shows with an instruction: the op of EXTENDED_INST, the M2S bytes, the record kind, … */
function instructionArg(ins: Instruction): number {
  switch (ins.op) {
    case Opcode.EXTENDED_INST:
      return ins.opcode;
    case Opcode.DMA_CONFIG_SIZE:
      return ins.m2sBytes;
    case Opcode.DMA_CONFIG:
      return ins.queues;
    case Opcode.NOTIFY:
      return ins.kind;
    case Opcode.MODEL_SWITCH:
      return ins.model;
    case Opcode.EVENT_SEMAPHORE:
      return ins.semaphore;
    default:
      return 0;
  }
}

/** The per-queue report of a traced run's DMA step (none for an untraced run). */
function dmaTimeline(
  run: Run,
  direction: number,
): ((queue: number, start: number, end: number, bytes: number, descriptors: number) => void) | undefined {
  const trace = run.trace;
  if (trace === undefined) return undefined;
  return (queue, start, end, bytes, descriptors) =>
    trace({ kind: "dma", start, end, run: run.count, direction, queue, bytes, descriptors });
}

/** The join of a dispatch that failed, as the DRAIN reads it: core 0 aborted. */
function failedJoin(e: unknown): Q7CoreResult[] {
  return [{ cpu: 0, ran: true, status: "abort", message: String(e), committed: false }];
}

/** The argument block of a stream without LOAD_POOL_ARGUMENT. */
const NO_ARGS: ArgTable = Object.freeze({ inputs: [], outputs: [], ints: [] });

/** What a DMA step throws, as the sequencer reports it: a `DmaFault` becomes a DMA sequencer fault. */
function dmaFault(e: unknown): unknown {
  return e instanceof DmaFault ? new SequencerFault(TpbFaultMask.DMA, e.message) : e;
}
