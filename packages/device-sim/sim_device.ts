/**
 * One simulated Neuron device: its memory, its BAR0 register file, and per NeuronCore the SBUF, notification
 * producer, Q7 cores, custom-op DMA and sequencer, wired to the BAR0 effects that drive them (the doorbell, the
 * run-stall release, the swap-table and stream-table writes).
 *
 * Seed: runtime-synthesis §2.1 (run-stall release per generation), §3.3 (the doorbell: one semaphore increment
 * releases the stream), §3.6 (one op, 8 cores, end to end).
 *
 * @module
 */
import { NotificationKind, type SiliconSpec, TpbEngType, TpbErrorId } from "@nrt/core";
import { Bar0, type Bar0Listener, type NcRegisters } from "./bar0.ts";
import { DmaEngine } from "./dma_engine.ts";
import type { FaultInjector } from "./fault_injector.ts";
import { FileIoManager } from "./file_io_manager.ts";
import { DeviceMemoryMap } from "./memory.ts";
import { NotificationProducer } from "./notification_queue.ts";
import { type Q7BootEvent, type Q7ClusterFactory, Q7Complex } from "./q7_complex.ts";
import { SbufStore } from "./sbuf.ts";
import { Sequencer, TpbFaultMask } from "./sequencer.ts";

/** The simulated parts of one NeuronCore. */
export interface SimNeuronCore {
  /** BAR0 registers. */
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
}

/** Options of {@linkcode SimDevice}. */
export interface SimDeviceOptions {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** Device index. */
  readonly index: number;
  /** HBM capacity in bytes. */
  readonly hbmBytes: number;
  /** Pinned host DRAM capacity in bytes. */
  readonly hostBytes: number;
  /** Portal-unique allocation ids. */
  readonly nextId: () => number;
  /** Creates Q7 clusters. */
  readonly q7Factory: Q7ClusterFactory;
  /** Q7 lifecycle events land here. */
  readonly q7Events: Q7BootEvent[];
  /** The portal's fault injector (each NeuronCore's sequencer polls its port). */
  readonly faults?: FaultInjector;
}

/** One simulated device. */
export class SimDevice implements Bar0Listener {
  /** The generation. */
  readonly spec: SiliconSpec;
  /** Device memory. */
  readonly memory: DeviceMemoryMap;
  /** BAR0. */
  readonly bar0: Bar0;
  /** NeuronCores. */
  readonly ncs: readonly SimNeuronCore[];

  /** Builds a device in its reset state (no Workers, no backing memory). */
  constructor(o: SimDeviceOptions) {
    const spec = o.spec;
    this.spec = spec;
    this.memory = new DeviceMemoryMap({
      device: o.index,
      hbm: { base: spec.addressMap.hbmBase, capacity: o.hbmBytes },
      host: { base: spec.addressMap.hostDramBase, capacity: o.hostBytes },
      nextId: o.nextId,
    });
    this.bar0 = new Bar0(spec, spec.ncPerDevice, this);
    this.ncs = Array.from({ length: spec.ncPerDevice }, (_, nc) => {
      const regs = this.bar0.nc(nc);
      const sbuf = new SbufStore(spec.sbufBytesPerCore);
      const nq = new NotificationProducer(regs, this.memory);
      const q7 = new Q7Complex(nc, regs, sbuf, o.q7Factory, o.q7Events);
      const dma = new DmaEngine(spec, nc, this.memory, sbuf);
      const fileIo = new FileIoManager(regs, this.memory, q7);
      const faults = o.faults?.port(o.index, nc);
      const sequencer = new Sequencer({ spec, nc, regs, memory: this.memory, nq, q7, dma, faults, fileIo });
      return { regs, sbuf, nq, q7, dma, sequencer, fileIo };
    });
  }

  /** The doorbell: each count on a registered stream's semaphore is consumed and releases one run. */
  semaphoreIncremented(nc: number, semaphore: number, by: number): void {
    const unit = this.ncs[nc];
    const stream = unit.regs.streamForDoorbell(semaphore);
    if (stream === undefined) return;
    const sems = unit.regs.semaphores;
    for (let n = Math.min(by, sems[semaphore]); n > 0; n--) {
      sems[semaphore]--;
      unit.sequencer.ring(stream);
    }
  }

  /** seed: runtime-synthesis §2.1 — Cayman/Mariana: host CSR 0xFF → 0x00 releases all 8 Q7 cores at once. */
  runStallWritten(nc: number, previous: number, value: number): void {
    const unit = this.ncs[nc];
    if (value !== 0) {
      unit.q7.stall();
      return;
    }
    if (previous === 0) return;
    const reason = unit.q7.release("host-csr");
    // A release with mismatched images is a boot failure the host can read; releasing nothing is only recorded.
    if (reason !== undefined && unit.regs.iram.some((x) => x !== undefined)) {
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

  /** Opcode-table caches of the NeuronCore are stale. */
  swapTableWritten(nc: number): void {
    this.ncs[nc].sequencer.swapTableWritten();
  }

  /** A stream slot was rewritten: installing a stream (re)initialises the NeuronCore's DMA queues. */
  streamTableWritten(nc: number, slot: number): void {
    const unit = this.ncs[nc];
    if (unit.regs.streamEntry(slot) !== undefined) unit.sequencer.resetDmaEngines();
    unit.sequencer.streamWritten(slot);
  }

  /** Terminates the NeuronCore's Q7 Workers and drops the stream blocked on them (no completion). */
  resetQ7(nc: number): void {
    const unit = this.ncs[nc];
    unit.q7.terminate("reset");
    unit.sequencer.dropCurrent();
  }

  /** Stops every Worker and releases every notification waiter. */
  close(): void {
    for (const unit of this.ncs) {
      unit.sequencer.shutdown();
      unit.q7.terminate("close");
      unit.nq.releaseAll();
    }
  }
}
