/**
 * The register file of one simulated NeuronCore, in `SharedArrayBuffer`s that the host portal and the device agent
 * (another thread) both map: the host reads and writes it as memory-mapped I/O, the device as its own registers.
 * Besides the BAR0 registers it holds the device's status words the host may read (Q7 state, DMA queue counters).
 *
 * Seed: runtime-synthesis §1.2 layer 4 (BAR0: the semaphore windows, the run-stall CSR, the Q7 IRAM/DRAM windows
 * written by the bulk image write), lifecycle-error-model §5.3 (the NQ head/tail/overflow registers), spmd-teardown
 * §6.2/§6.3 (the per-core state `ucode_core_destroy` leaves: image stopped, IRAM/DRAM freed). The layout inside the
 * buffers, and the per-core ucode words, are ours.
 *
 * @module
 */
import type { SiliconSpec } from "@nrt/core/hal";
import {
  decodeStreamEntry,
  NQ_CAUSE_OVERFLOW,
  NQ_REGISTER_BYTES,
  NqRegister,
  STREAM_ENTRY_BYTES,
  type StreamEntryFields,
} from "@nrt/core/isa";

// The NQ block and the stream-table entry are the host's formats: one definition, in `@nrt/core`'s isa.ts.
export { NQ_CAUSE_OVERFLOW, NqRegister, STREAM_ENTRY_BYTES };
/** Bytes of the engine instruction-pointer block (5 engines × u32). */
export const ENGINE_IP_BYTES = 20;

/** The Q7 cores' state as the device reports it: held in run-stall, running, or boot refused. */
export const Q7State = { STALLED: 0, RUNNING: 1, FAILED: 2 } as const;
/** One Q7 state. */
export type Q7State = typeof Q7State[keyof typeof Q7State];

/** Status words the device writes and the host reads (Int32 indices into {@linkcode NcRegisters.status}). */
export const NcStatus = {
  /** {@linkcode Q7State}. */
  Q7_STATE: 0,
  /** 1 while the Q7 cluster's Workers exist. */
  Q7_STARTED: 1,
  /** 1 while the Q7 cores run an op of the run in progress. */
  Q7_BUSY: 2,
  /** Entries the file-IO manager wrote over an unread stdout slot. */
  STDOUT_OVERRUNS: 3,
  /** Entries the file-IO manager wrote over an unread stderr slot. */
  STDERR_OVERRUNS: 4,
  /** Runs the sequencer started since the device was made. */
  RUNS: 5,
  /**
   * The host's completion waits pending on this NeuronCore (its callers blocked on their `comp_efd`), counted by the
   * host: a leak check reads it. The device wakes the host through the device's {@linkcode ReapWord}s. Ours.
   */
  HOST_WAITERS: 6,
  /**
   * Non-zero while the host asks the device to record its timeline (`device_log.ts`, the profiler's events). The
   * sequencer reads it once per run: with 0 a run records nothing and reads no clock beyond the busy counters. Ours.
   */
  TRACE: 7,
} as const;
const STATUS_WORDS = 8;

/**
 * Counters the device keeps for utilization (Float64 indices into {@linkcode NcRegisters.counters}), in milliseconds of
 * the clock host and device share (`performance.timeOrigin + performance.now()`). Ours.
 */
export const NcCounter = {
  /** Milliseconds the sequencer spent in finished runs (device busy time). */
  BUSY_MS: 0,
  /** When the run in progress started, or 0 when the sequencer is idle. */
  RUN_STARTED_MS: 1,
} as const;
const COUNTER_WORDS = 2;

/** Where each register lives in the two buffers of one NeuronCore. */
export interface NcRegisterLayout {
  /** Bytes of the register buffer. */
  readonly bytes: number;
  /** Bytes of the Q7 image buffer (8 × (IRAM + DRAM)). */
  readonly imageBytes: number;
  readonly semaphores: number;
  readonly events: number;
  readonly runStall: number;
  readonly status: number;
  readonly imageLengths: number;
  readonly queueBytes: number;
  readonly swapTable: number;
  readonly swapFileIo: number;
  /** The per-core ucode state words (5 NX, then 8 Q7). */
  readonly ucodeCore: number;
  readonly streamTable: number;
  readonly nq: number;
  readonly engineIp: number;
  readonly dma: number;
  readonly counters: number;
}

const align8 = (n: number): number => Math.ceil(n / 8) * 8;

/** The layout for a generation. */
export function ncRegisterLayout(spec: SiliconSpec): NcRegisterLayout {
  let at = 0;
  const take = (bytes: number): number => {
    const here = at;
    at = align8(at + bytes);
    return here;
  };
  const semaphores = take(4 * spec.semaphoresPerCore);
  const events = take(4 * spec.eventsPerCore);
  const runStall = take(4);
  const status = take(4 * STATUS_WORDS);
  const imageLengths = take(4 * 2 * spec.q7CoresPerNc);
  const queueBytes = take(8 * 2 * spec.q7CoresPerNc);
  const swapTable = take(8);
  const swapFileIo = take(8);
  const ucodeCore = take(4 * (spec.nxCoresPerNc + spec.q7CoresPerNc));
  const streamTable = take(STREAM_ENTRY_BYTES * spec.csr.streamSlots);
  const nq = take(NQ_REGISTER_BYTES);
  const engineIp = take(ENGINE_IP_BYTES);
  const dma = take(spec.dmaEngines * spec.csr.dmaEngineStride);
  const counters = take(8 * COUNTER_WORDS);
  return {
    bytes: at,
    imageBytes: spec.q7CoresPerNc * (spec.q7IramBytes + spec.q7DramBytes),
    semaphores,
    events,
    runStall,
    status,
    imageLengths,
    queueBytes,
    swapTable,
    swapFileIo,
    ucodeCore,
    streamTable,
    nq,
    engineIp,
    dma,
    counters,
  };
}

/** The shared buffers of one NeuronCore's registers, and its device's reap words (what crosses to the device agent). */
export interface NcRegisterBuffers {
  /** The register file and status words. */
  readonly regs: SharedArrayBuffer;
  /**
   * The buffer holding the 8 Q7 cores' IRAM and DRAM windows (pages are committed only when written): the device's
   * one image buffer ({@linkcode NcRegisters.forDevice}) or one of the NeuronCore's own.
   */
  readonly images: SharedArrayBuffer;
  /** Where this NeuronCore's windows start in {@linkcode NcRegisterBuffers.images}. */
  readonly imageOffset: number;
  /**
   * The device's reap words ({@linkcode ReapWord}), one buffer for all its NeuronCores
   * ({@linkcode NcRegisters.forDevice}), or one of the NeuronCore's own.
   */
  readonly reap: SharedArrayBuffer;
}

/**
 * The device's reap words (Int32 indices into {@linkcode NcRegisters.reap}): what wakes the host's reaper when any
 * NeuronCore of the device publishes a notification-queue head. The seed's host does not sleep on the queue: a
 * reap thread sees the NQ completion and signals the waiting caller's `comp_efd` (runtime-synthesis §3.5). The
 * simulated host keeps one reaper per device, asleep on {@linkcode ReapWord.EPOCH}; the words are ours.
 */
export const ReapWord = {
  /** Advanced by the device at every store of an NQ head, on any of its NeuronCores. */
  EPOCH: 0,
  /**
   * 1 while the host's reaper watches the epoch (it has completion waits pending). The device notifies the epoch only
   * then: a head published with nobody watching costs no wake-up, and one published while the reaper is already
   * woken, before it looks again, costs none either (the woken reaper sees every head at its next look).
   */
  WATCHING: 1,
} as const;
const REAP_BYTES = 8;

/**
 * The least size of a device's image buffer (ours): past glibc's highest dynamic mmap threshold (32 MiB on 64-bit).
 *
 * Deno's `SharedArrayBuffer`s come from glibc's `calloc`. Once a large buffer has been freed, glibc raises its mmap
 * threshold to that buffer's size (up to 32 MiB) and serves later ones up to it from the heap, whose freed chunks it
 * keeps; `calloc` zeroes a reused chunk, committing every page. Measured (Deno 2.9.6, 150 device cycles): 8 image
 * buffers of 6 MiB a device held 720 MB of the heap resident, though nothing wrote most of those pages. A buffer past
 * 32 MiB is always a mapping of its own, unmapped when freed, whose pages are committed only when written.
 */
export const DEVICE_IMAGE_BUFFER_MIN_BYTES: number = 32 * 1024 * 1024 + 64 * 1024;

/** A decoded stream-table entry and its table slot. */
export interface StreamEntry extends StreamEntryFields {
  /** Table slot. */
  readonly slot: number;
}

/** The registers of one NeuronCore, as views over its shared buffers; the same class on both sides. */
export class NcRegisters {
  /** The buffers (to hand to the other side). */
  readonly buffers: NcRegisterBuffers;
  /** Semaphore values (u32). */
  readonly semaphores: Uint32Array;
  /** Event values (u32). */
  readonly events: Uint32Array;
  /** Swap-table register bytes (u64 LE opcode-table PA). */
  readonly swapTable: Uint8Array;
  /** Swap file-IO table register bytes (u64 LE). */
  readonly swapFileIo: Uint8Array;
  /** Stream table bytes. */
  readonly streamTable: Uint8Array;
  /** Notification-queue block bytes. */
  readonly nq: Uint8Array;
  /** The NQ block as Int32 words (the head is waited on and notified through it). */
  readonly nqWords: Int32Array;
  /** Engine instruction pointers, `al_hal_tpb_eng_type` order. */
  readonly engineIp: Uint32Array;
  /** DMA engine/queue register bytes. */
  readonly dma: Uint8Array;
  /** Device status words ({@linkcode NcStatus}). */
  readonly status: Int32Array;
  /** The device's reap words ({@linkcode ReapWord}), shared by its NeuronCores. */
  readonly reap: Int32Array;
  /** Bytes moved per custom-op queue: M2S for core c at c, S2M at 8 + c. */
  readonly queueBytes: Float64Array;
  /** Utilization counters ({@linkcode NcCounter}), written by the device, read by the host. */
  readonly counters: Float64Array;
  readonly #runStall: Int32Array;
  readonly #ucodeCore: Int32Array;
  readonly #lengths: Uint32Array;
  readonly #imageBuffer: SharedArrayBuffer;
  readonly #spec: SiliconSpec;

  /**
   * Maps a NeuronCore's registers: over `buffers` when given (the other side's), else over new zeroed buffers in
   * the reset state (all 8 Q7 cores held in run-stall).
   */
  constructor(spec: SiliconSpec, buffers?: NcRegisterBuffers) {
    const l = ncRegisterLayout(spec);
    this.#spec = spec;
    const fresh = buffers === undefined;
    this.buffers = buffers ?? {
      regs: new SharedArrayBuffer(l.bytes),
      images: new SharedArrayBuffer(l.imageBytes),
      imageOffset: 0,
      reap: new SharedArrayBuffer(REAP_BYTES),
    };
    const b = this.buffers.regs;
    this.semaphores = new Uint32Array(b, l.semaphores, spec.semaphoresPerCore);
    this.events = new Uint32Array(b, l.events, spec.eventsPerCore);
    this.#runStall = new Int32Array(b, l.runStall, 1);
    this.status = new Int32Array(b, l.status, STATUS_WORDS);
    this.reap = new Int32Array(this.buffers.reap);
    this.#lengths = new Uint32Array(b, l.imageLengths, 2 * spec.q7CoresPerNc);
    this.#ucodeCore = new Int32Array(b, l.ucodeCore, spec.nxCoresPerNc + spec.q7CoresPerNc);
    this.queueBytes = new Float64Array(b, l.queueBytes, 2 * spec.q7CoresPerNc);
    this.counters = new Float64Array(b, l.counters, COUNTER_WORDS);
    this.swapTable = new Uint8Array(b, l.swapTable, 8);
    this.swapFileIo = new Uint8Array(b, l.swapFileIo, 8);
    this.streamTable = new Uint8Array(b, l.streamTable, STREAM_ENTRY_BYTES * spec.csr.streamSlots);
    this.nq = new Uint8Array(b, l.nq, NQ_REGISTER_BYTES);
    this.nqWords = new Int32Array(b, l.nq, NQ_REGISTER_BYTES / 4);
    this.engineIp = new Uint32Array(b, l.engineIp, 5);
    this.dma = new Uint8Array(b, l.dma, spec.dmaEngines * spec.csr.dmaEngineStride);
    this.#imageBuffer = this.buffers.images;
    if (fresh) Atomics.store(this.#runStall, 0, 0xff); // out of reset all 8 Q7 cores are stalled
  }

  /**
   * The registers of every NeuronCore of a device, in the reset state, their Q7 image windows in one buffer of at least
   * {@linkcode DEVICE_IMAGE_BUFFER_MIN_BYTES} (each NeuronCore's own would leave the freed ones in glibc's heap, every
   * page committed once reused, on Deno), and one set of reap words for all of them.
   */
  static forDevice(spec: SiliconSpec): NcRegisters[] {
    const l = ncRegisterLayout(spec);
    const images = new SharedArrayBuffer(Math.max(spec.ncPerDevice * l.imageBytes, DEVICE_IMAGE_BUFFER_MIN_BYTES));
    const reap = new SharedArrayBuffer(REAP_BYTES);
    return Array.from({ length: spec.ncPerDevice }, (_, nc) => {
      const r = new NcRegisters(spec, {
        regs: new SharedArrayBuffer(l.bytes),
        images,
        imageOffset: nc * l.imageBytes,
        reap,
      });
      r.runStall = 0xff; // out of reset all 8 Q7 cores are stalled
      return r;
    });
  }

  /** Run-stall CSR: one bit per Q7 core. */
  get runStall(): number {
    return Atomics.load(this.#runStall, 0);
  }

  set runStall(value: number) {
    Atomics.store(this.#runStall, 0, value & 0xff);
  }

  /** The opcode-table PA in the swap-table register. */
  get swapTablePa(): number {
    return u64(this.swapTable, 0);
  }

  /** The stdio block PA in the Q7 file-IO table register (0: none). */
  get swapFileIoPa(): number {
    return u64(this.swapFileIo, 0);
  }

  /** The valid stream-table entry whose doorbell is `semaphore`, if any (lowest slot first). */
  streamForDoorbell(semaphore: number): StreamEntry | undefined {
    for (let slot = 0; slot < this.#spec.csr.streamSlots; slot++) {
      const e = this.streamEntry(slot);
      if (e !== undefined && e.doorbell === semaphore) return e;
    }
    return undefined;
  }

  /** The stream-table entry of `slot`, or `undefined` when its valid bit is clear. */
  streamEntry(slot: number): StreamEntry | undefined {
    const e = decodeStreamEntry(this.streamTable, slot * STREAM_ENTRY_BYTES);
    return e === undefined ? undefined : { slot, ...e };
  }

  /** An NQ register (u32). */
  nqRegister(at: number): number {
    return Atomics.load(this.nqWords, at >> 2) >>> 0;
  }

  /** Sets an NQ register. */
  setNqRegister(at: number, value: number): void {
    Atomics.store(this.nqWords, at >> 2, value | 0);
  }

  /**
   * Publishes the NQ head (device side): stores it, advances the device's reap epoch, and notifies the epoch while
   * the host's reaper watches it. Sequentially consistent with the reaper's epoch-load, watch-store, then head-look:
   * either it sees the new head, or this sees it watching and the epoch moved past the value it sleeps on.
   */
  publishNqHead(head: number): void {
    Atomics.store(this.nqWords, NqRegister.HEAD >> 2, head | 0);
    Atomics.add(this.reap, ReapWord.EPOCH, 1);
    if (Atomics.load(this.reap, ReapWord.WATCHING) !== 0) Atomics.notify(this.reap, ReapWord.EPOCH);
  }

  /**
   * The state of a ucode core (`UcodeCoreState` of `@nrt/core/hal`): word `i` is NX core `i`, word `nx + c` Q7 core
   * `c`. Both sides map it; only the device writes it.
   */
  ucodeCoreState(word: number): number {
    return Atomics.load(this.#ucodeCore, word);
  }

  /** Sets a ucode core's state word (device side). */
  setUcodeCoreState(word: number, state: number): void {
    Atomics.store(this.#ucodeCore, word, state);
  }

  /** Number of ucode core words (NX cores, then Q7 cores). */
  get ucodeCoreCount(): number {
    return this.#ucodeCore.length;
  }

  /**
   * `ucode_core_destroy`'s device side for Q7 core `core` (seed: spmd-teardown §6.3, "stop image, free IRAM/DRAM"):
   * both windows are zeroed and hold no image any more.
   */
  clearImage(core: number): void {
    for (const kind of ["iram", "dram"] as const) {
      const i = this.#lengthIndex(kind, core);
      const n = this.#lengths[i];
      if (n > 0) new Uint8Array(this.#imageBuffer, this.#imageOffset(kind, core), n).fill(0);
      this.#lengths[i] = 0;
    }
  }

  /** The bytes installed in Q7 core `core`'s IRAM (`kind` "iram") or DRAM window, or `undefined` when none. */
  image(kind: "iram" | "dram", core: number): Uint8Array | undefined {
    const n = this.#lengths[this.#lengthIndex(kind, core)];
    if (n === 0) return undefined;
    return new Uint8Array(this.#imageBuffer, this.#imageOffset(kind, core), n);
  }

  /**
   * Writes `data` at `byte` of a Q7 window. A write at byte 0 starts a new image (its length is the data's); a
   * write further in patches the image and extends its length.
   */
  writeImage(kind: "iram" | "dram", core: number, byte: number, data: Uint8Array): void {
    const max = kind === "iram" ? this.#spec.q7IramBytes : this.#spec.q7DramBytes;
    if (byte + data.byteLength > max) {
      throw new RangeError(`Q7 ${kind} write of ${data.byteLength} B at ${byte} passes the ${max}-byte window`);
    }
    const at = this.#imageOffset(kind, core);
    const i = this.#lengthIndex(kind, core);
    const before = byte === 0 ? 0 : this.#lengths[i];
    new Uint8Array(this.#imageBuffer, at + byte, data.byteLength).set(data);
    this.#lengths[i] = Math.max(before, byte + data.byteLength);
    // Ours: an install brings a destroyed core back; the first write of `aws_hal_q7_ucode_eng_init` (core 0's DRAM at
    // byte 0) is the NeuronCore's bring-up, and brings its NX cores back too.
    const nx = this.#spec.nxCoresPerNc;
    Atomics.store(this.#ucodeCore, nx + core, 0);
    if (core === 0 && kind === "dram" && byte === 0) {
      for (let k = 0; k < nx; k++) {
        Atomics.store(this.#ucodeCore, k, 0);
      }
    }
  }

  #lengthIndex(kind: "iram" | "dram", core: number): number {
    return (kind === "iram" ? 0 : this.#spec.q7CoresPerNc) + core;
  }

  #imageOffset(kind: "iram" | "dram", core: number): number {
    const s = this.#spec;
    const per = s.q7IramBytes + s.q7DramBytes;
    return this.buffers.imageOffset + core * per + (kind === "iram" ? 0 : s.q7IramBytes);
  }
}

function u64(bytes: Uint8Array, at: number): number {
  const v = new DataView(bytes.buffer, bytes.byteOffset + at, 8);
  return v.getUint32(0, true) + v.getUint32(4, true) * 0x1_0000_0000;
}
