/**
 * The device side of one simulated device, for the NeuronCores one device agent hosts: per NeuronCore the SBUF,
 * notification producer, Q7 cores, custom-op DMA, sequencer, file-IO manager and fault port, over the shared
 * registers and memory the host maps too, wired to the register writes that drive them (the doorbell, the run-stall
 * release, the swap-table and stream-table writes).
 *
 * Seed: runtime-synthesis §2.1 (run-stall release per generation), §3.3 (the doorbell: one semaphore increment
 * releases the stream), §3.6 (one op, 8 cores, end to end).
 *
 * @module
 */
import { type SiliconSpec, TpbEngType } from "@nrt/core/hal";
import { NotificationKind, TpbErrorId } from "@nrt/core/isa";
import { threadPacer } from "./collection_pacer.ts";
import type { TimelineSink } from "./device_log.ts";
import { DmaEngine } from "./dma_engine.ts";
import { type ArmedFault, NcFaults } from "./fault_injector.ts";
import { FileIoManager } from "./file_io_manager.ts";
import type { MemorySpace } from "./memory.ts";
import type { NcRegisters, StreamEntry } from "./nc_registers.ts";
import { NotificationProducer } from "./notification_queue.ts";
import { type Q7BootEvent, type Q7ClusterFactory, Q7Complex, type Q7Observer } from "./q7_complex.ts";
import { SbufStore } from "./sbuf.ts";
import { Sequencer, TpbFaultMask } from "./sequencer.ts";

/** The simulated parts of one NeuronCore. */
export interface SimNeuronCore {
  /** Registers (shared with the host). */
  readonly regs: NcRegisters;
  /** State buffer. */
  readonly sbuf: SbufStore;
  /** Notification producer. */
  readonly nq: NotificationProducer;
  /** The 8 Q7 cores. */
  readonly q7: Q7Complex;
  /** Custom-op DMA. */
  readonly dma: DmaEngine;
  /** SP/SEQ sequencer. */
  readonly sequencer: Sequencer;
  /** The device side of pool_stdio. */
  readonly fileIo: FileIoManager;
  /** Injected faults armed on this NeuronCore. */
  readonly faults: NcFaults;
  /**
   * The stream each doorbell semaphore releases (`null`: none), as the stream table last read (ours): a doorbell finds
   * its stream without decoding the table's slots again. Cleared at every write of the table (`streamTableWritten`),
   * the only way the table changes.
   */
  readonly streams: Map<number, StreamEntry | null>;
}

/** What the device reports besides its registers and memory (its trace buffer). */
export interface SimDeviceTrace {
  /** Every notification record pushed (16 bytes). */
  record(nc: number, bytes: Uint8Array): void;
  /** A Q7 lifecycle event. */
  q7Event(e: Q7BootEvent): void;
  /** A fault the sequencer raised or played. */
  sequencerFault(nc: number, f: { slot: number; mask: number; message: string }): void;
  /** An injected fault fired at run `run` of the NeuronCore. */
  fired(nc: number, f: ArmedFault, run: number): void;
  /** The ops of the NeuronCore's Q7 cores. */
  q7(nc: number): Q7Observer | undefined;
  /** Where the NeuronCore's traced runs record their timeline (`device_log.ts`). */
  timeline?(nc: number): TimelineSink | undefined;
}

/** Options of {@linkcode SimDevice}. */
export interface SimDeviceOptions {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** Device index. */
  readonly index: number;
  /** The registers of every NeuronCore of the device (index = NeuronCore). */
  readonly regs: readonly NcRegisters[];
  /** The NeuronCores this device side runs (default: all). */
  readonly ncs?: readonly number[];
  /** The device's memory, as mapped here. */
  readonly memory: MemorySpace;
  /** Creates Q7 clusters. */
  readonly q7Factory: Q7ClusterFactory;
  /** Where the device reports. */
  readonly trace: SimDeviceTrace;
  /** The sequencers' hang budget in ms (ours: the device's watchdog, `sequencer.ts`); 0 or absent: none. */
  readonly watchdogMs?: number;
}

/** The device side of one simulated device (the NeuronCores one agent hosts). */
export class SimDevice {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** Device memory as mapped here. */
  readonly memory: MemorySpace;
  /** NeuronCores by index (`undefined` for a NeuronCore another agent hosts). */
  readonly ncs: ReadonlyArray<SimNeuronCore | undefined>;
  /** This thread's collection pacer, told of each doorbell (collection_pacer.ts; ours). */
  readonly #pacer = threadPacer();

  /** Builds the NeuronCores this side runs, in their reset state (no Workers, no SBUF backing). */
  constructor(o: SimDeviceOptions) {
    const spec = o.spec;
    this.spec = spec;
    this.memory = o.memory;
    const hosted = new Set(o.ncs ?? o.regs.map((_, nc) => nc));
    this.ncs = o.regs.map((regs, nc) => {
      if (!hosted.has(nc)) return undefined;
      const sbuf = new SbufStore(spec.sbufBytesPerCore);
      const nq = new NotificationProducer(regs, o.memory, (bytes) => o.trace.record(nc, bytes));
      const q7 = new Q7Complex(nc, regs, sbuf, o.q7Factory, (e) => o.trace.q7Event(e), o.trace.q7(nc));
      const dma = new DmaEngine(spec, nc, o.memory, sbuf, regs.queueBytes);
      const fileIo = new FileIoManager(regs, o.memory, q7);
      const faults = new NcFaults((f, run) => o.trace.fired(nc, f, run));
      const sequencer = new Sequencer({
        spec,
        nc,
        regs,
        memory: o.memory,
        nq,
        q7,
        dma,
        faults,
        fileIo,
        onFault: (f) => o.trace.sequencerFault(nc, f),
        timeline: o.trace.timeline?.(nc),
        watchdogMs: o.watchdogMs,
      });
      return { regs, sbuf, nq, q7, dma, sequencer, fileIo, faults, streams: new Map() };
    });
  }

  /** The NeuronCore `nc`, which this side must host. */
  unit(nc: number): SimNeuronCore {
    const u = this.ncs[nc];
    if (u === undefined) throw new RangeError(`NeuronCore ${nc} is not hosted here`);
    return u;
  }

  /**
   * The doorbell: `by` counts were added to a semaphore; each one still there on a registered stream's doorbell is
   * consumed and releases one run.
   */
  doorbell(nc: number, semaphore: number, by: number): void {
    const unit = this.unit(nc);
    this.#pacer.note();
    let stream = unit.streams.get(semaphore);
    if (stream === undefined) unit.streams.set(semaphore, stream = unit.regs.streamForDoorbell(semaphore) ?? null);
    if (stream === null) return;
    const sems = unit.regs.semaphores;
    for (let left = by; left > 0;) {
      const n = Atomics.load(sems, semaphore);
      if (n === 0) return;
      if (Atomics.compareExchange(sems, semaphore, n, n - 1) !== n) continue;
      left--;
      unit.sequencer.ring(stream);
    }
  }

  /** seed: runtime-synthesis §2.1 — Cayman/Mariana: host CSR 0xFF → 0x00 releases all 8 Q7 cores at once. */
  runStallWritten(nc: number, previous: number, value: number): void {
    const unit = this.unit(nc);
    if (value !== 0) {
      unit.q7.stall();
      return;
    }
    if (previous === 0) return;
    const reason = unit.q7.release("host-csr");
    // A release with mismatched images is a boot failure the host can read; releasing nothing is only recorded.
    if (reason !== undefined && [0, 1, 2, 3, 4, 5, 6, 7].some((c) => unit.regs.image("iram", c) !== undefined)) {
      unit.sequencer.pushRecord({
        code: TpbErrorId.FATAL,
        mask: TpbFaultMask.Q7_BOOT,
        engine: TpbEngType.POOL,
        q7: 0xff,
        kind: NotificationKind.TPB_ERROR,
        model: unit.sequencer.currentModel,
        value: 0,
        aux: 0,
      });
    }
  }

  /**
   * The swap-table register was written: the NeuronCore's opcode-table caches are stale, and when the Q7 cores are
   * running the new table's libraries are prepared in them now (the load waits for it), not at the first execute.
   */
  async swapTableWritten(nc: number): Promise<void> {
    const unit = this.unit(nc);
    unit.sequencer.swapTableWritten();
    if (unit.q7.state !== "running") return;
    const cluster = await unit.q7.cluster().catch(() => undefined);
    if (cluster === undefined) return;
    // The table's libraries go into the cores now (the load path staged them just before the swap).
    await unit.sequencer.stageTableLibraries(cluster);
  }

  /**
   * A stream slot was rewritten: installing a stream (re)initialises the NeuronCore's DMA queues and, when the Q7
   * cores are running, starts their Workers now, so that the first execution does not pay for them. Resolves once
   * they are up (a model's load waits for it).
   */
  async streamTableWritten(nc: number, slot: number): Promise<void> {
    const unit = this.unit(nc);
    unit.streams.clear();
    const entry = unit.regs.streamEntry(slot);
    if (entry !== undefined) {
      // The new stream's doorbell is looked up now, as its first doorbell would (ours: so that its first run does not
      // scan the stream table).
      unit.streams.set(entry.doorbell, unit.regs.streamForDoorbell(entry.doorbell) ?? null);
      unit.sequencer.resetDmaEngines();
    }
    unit.sequencer.streamWritten(slot);
    if (entry !== undefined) unit.sequencer.prefetchTables(entry);
    if (entry === undefined || unit.q7.state !== "running") return;
    const cluster = await unit.q7.cluster().catch(() => undefined);
    if (cluster === undefined) return;
    // The stream's libraries go into the cores now (the load path stages them), not at its first EXTENDED_INST.
    await unit.sequencer.stageLibraries(entry, cluster);
  }

  /** Terminates the NeuronCore's Q7 Workers and drops the stream blocked on them (no completion). */
  resetQ7(nc: number): void {
    const unit = this.unit(nc);
    unit.q7.terminate("reset");
    unit.sequencer.dropCurrent();
  }

  /** Resolves when every sequencer hosted here (or one NeuronCore's) has no run queued or in progress. */
  async whenIdle(nc?: number): Promise<void> {
    const units = nc === undefined ? this.ncs.filter((u): u is SimNeuronCore => u !== undefined) : [this.unit(nc)];
    for (const u of units) await u.sequencer.whenIdle();
  }

  /** Moves the device's clock `ms` ahead on every NeuronCore hosted here (the watchdog then checks its run). */
  elapse(ms: number): void {
    for (const u of this.ncs) u?.sequencer.elapse(ms);
  }

  /** Stops every Worker. */
  close(): void {
    for (const unit of this.ncs) {
      if (unit === undefined) continue;
      unit.sequencer.shutdown();
      unit.q7.terminate("close");
    }
  }
}
