/**
 * The device side of pool_stdio (the "on-device virtual file-I/O manager"): moves the Q7 kernels' printf entries
 * from the cluster's staging ring into the HBM rings the host described in the stdio block that
 * `aws_hal_q7_swap_file_io_table` pointed the Q7 file-IO table at, advancing each ring's write index.
 *
 * Seed: spmd-teardown §5 end to end ("Q7 kernel printf → device file-IO table writes a 256-B entry into the HBM ring
 * and advances write_idx → … host publishes read_idx back → Q7 reuses slots. Overflow is logged, not fatal"), §5.3
 * (the descriptor: u16 MAGIC 0x201 @+0, u32 capacity @+0xc, u64 data PA @+0x10, read / write index addresses
 * @+0x18 / +0x20), §5.4 (a Q7 faster than the host overruns the ring: the host keeps only the last `cap` entries).
 *
 * Ours: the manager runs when the sequencer joins a dispatch (DRAIN) — before the completion record, so the host
 * drains a run's output in the same progress step that sees the completion — and on a faulted join. A full ring is
 * overwritten (the newest entry replaces the oldest unread one) and counted as an overrun; the published read index
 * is what tells the device a slot is free again. At teardown, `ucode_core_print_logs` of Q7 core `c` (spmd-teardown
 * §6.2) moves only core `c`'s staged entries ({@linkcode FileIoManager.flushCore}); the other cores' wait, in order,
 * for their own.
 *
 * @module
 */
import {
  POOL_STDIO_DESCRIPTOR_BYTES,
  POOL_STDIO_ENTRY_BYTES,
  POOL_STDIO_ENTRY_HEADER_BYTES,
  POOL_STDIO_MAGIC,
  POOL_STDIO_RECORD_BYTES,
  POOL_STDIO_SLOTS,
  PoolStdioDescriptor,
} from "@nrt/core/isa";
import { type NcRegisters, NcStatus } from "./nc_registers.ts";
import type { MemorySpace } from "./memory.ts";
import type { Q7Complex } from "./q7_complex.ts";

const utf8 = new TextEncoder();
/** No staged entries (shared: a flush with nothing to move makes no array). */
const NONE: ReadonlyArray<{ cpu: number; stream: number; text: string }> = Object.freeze([]);

/** What the device knows about one stdio ring. */
export interface DeviceStdioQueue {
  /** Capacity in entries. */
  readonly capacity: number;
  /** Entries written so far (the device write index). */
  readonly writeIndex: number;
  /** The read index the host last published through its write-only pointer. */
  readonly readIndex: number;
  /** Entries written over an unread slot so far. */
  readonly overruns: number;
}

/** Q7 stream numbers of `q7_write` (docs/kernel-abi.md). */
const Q7_STDOUT = 1;
const Q7_STDERR = 2;

interface Descriptor {
  readonly capacity: number;
  readonly dataPa: number;
  readonly readIdxPa: number;
  readonly writeIdxPa: number;
}

function u64(v: DataView, at: number): number {
  return v.getUint32(at, true) + v.getUint32(at + 4, true) * 0x1_0000_0000;
}

/** The file-IO manager of one NeuronCore. */
export class FileIoManager {
  readonly #regs: NcRegisters;
  readonly #memory: MemorySpace;
  readonly #q7: Q7Complex | undefined;
  /** Entries dropped because no valid ring was described (stdout off, no block). */
  dropped = 0;
  /** Entries taken from the cluster by a per-core flush that belong to other cores (written at their turn). */
  #held: Array<{ cpu: number; stream: number; text: string }> = [];

  /**
   * Creates the manager over a NeuronCore's registers, the device memory and its Q7 cores. Without Q7 cores (the
   * host's copy) it only reads the rings' state ({@linkcode FileIoManager.queue}).
   */
  constructor(regs: NcRegisters, memory: MemorySpace, q7?: Q7Complex) {
    this.#regs = regs;
    this.#memory = memory;
    this.#q7 = q7;
  }

  /** The stdio block the file-IO table points at (0: none). */
  get blockPa(): number {
    return this.#regs.swapFileIoPa;
  }

  /**
   * Moves every staged printf entry into its HBM ring. Does nothing (and leaves the entries staged, for
   * `DeviceSimPortal.stdioEntries`) while the file-IO table points nowhere.
   *
   * @returns The number of entries written.
   */
  flush(): number | Promise<number> {
    if (this.blockPa === 0 || this.#q7 === undefined || !this.#q7.started) {
      return this.blockPa === 0 ? 0 : this.#write(this.#take());
    }
    const staged = this.#q7.drainStdio();
    return staged instanceof Promise ? staged.then((s) => this.#write(this.#take(s))) : this.#write(this.#take(staged));
  }

  /**
   * `ucode_core_print_logs` of Q7 core `cpu` (ours: the seed names the call, spmd-teardown §6.2, not what it moves):
   * writes that core's staged printf entries into the HBM rings and keeps the other cores' for their own turn.
   * Nothing moves while the file-IO table points nowhere.
   *
   * @returns The number of ring entries written.
   */
  async flushCore(cpu: number): Promise<number> {
    if (this.blockPa === 0) return 0;
    const fresh = this.#q7 !== undefined && this.#q7.started ? await this.#q7.drainStdio() : [];
    const all = this.#take(fresh);
    this.#held = all.filter((e) => e.cpu !== cpu);
    return this.#write(all.filter((e) => e.cpu === cpu));
  }

  /** The held entries, then `fresh`, oldest first; the hold is emptied. */
  #take(
    fresh: ReadonlyArray<{ cpu: number; stream: number; text: string }> = NONE,
  ): ReadonlyArray<{ cpu: number; stream: number; text: string }> {
    if (this.#held.length === 0) return fresh.length === 0 ? NONE : [...fresh];
    const out = [...this.#held, ...fresh];
    this.#held = [];
    return out;
  }

  #write(staged: ReadonlyArray<{ cpu: number; stream: number; text: string }>): number {
    let written = 0;
    for (const e of staged) {
      const slot = e.stream === Q7_STDERR ? POOL_STDIO_SLOTS : e.stream === Q7_STDOUT ? 0 : -1;
      const d = slot < 0 ? undefined : this.#descriptor(slot);
      if (d === undefined) {
        this.dropped++;
        continue;
      }
      const bytes = utf8.encode(e.text);
      for (let off = 0; off < bytes.byteLength; off += POOL_STDIO_RECORD_BYTES) {
        this.#put(slot, d, e.stream, e.cpu, bytes.subarray(off, off + POOL_STDIO_RECORD_BYTES));
        written++;
      }
    }
    return written;
  }

  /** The device's view of the stdout (`stream` 1) or stderr (2) ring, or `undefined` when it is not described. */
  queue(stream: 1 | 2): DeviceStdioQueue | undefined {
    const slot = stream === Q7_STDERR ? POOL_STDIO_SLOTS : 0;
    const d = this.#descriptor(slot);
    if (d === undefined) return undefined;
    const overruns = Atomics.load(this.#regs.status, slot === 0 ? NcStatus.STDOUT_OVERRUNS : NcStatus.STDERR_OVERRUNS);
    return { capacity: d.capacity, writeIndex: this.#u32(d.writeIdxPa), readIndex: this.#u64(d.readIdxPa), overruns };
  }

  #descriptor(slot: number): Descriptor | undefined {
    const block = this.blockPa;
    if (block === 0) return undefined;
    const b = this.#memory.readPa(block + slot * POOL_STDIO_DESCRIPTOR_BYTES, POOL_STDIO_DESCRIPTOR_BYTES);
    if (b === undefined) return undefined;
    const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
    if (v.getUint16(PoolStdioDescriptor.MAGIC, true) !== POOL_STDIO_MAGIC) return undefined;
    const capacity = v.getUint32(PoolStdioDescriptor.CAPACITY, true);
    if (capacity === 0) return undefined;
    return {
      capacity,
      dataPa: u64(v, PoolStdioDescriptor.DATA_PA),
      readIdxPa: u64(v, PoolStdioDescriptor.READ_IDX_PA),
      writeIdxPa: u64(v, PoolStdioDescriptor.WRITE_IDX_PA),
    };
  }

  /** Writes one 256-byte entry at `write % capacity` and advances the write index. */
  #put(slot: number, d: Descriptor, stream: number, cpu: number, text: Uint8Array): void {
    const write = this.#u32(d.writeIdxPa);
    const read = this.#u64(d.readIdxPa);
    // The published read index frees slots; a write into an unread slot overwrites the oldest entry.
    if (write - read >= d.capacity) {
      Atomics.add(this.#regs.status, slot === 0 ? NcStatus.STDOUT_OVERRUNS : NcStatus.STDERR_OVERRUNS, 1);
    }
    const entry = new Uint8Array(POOL_STDIO_ENTRY_BYTES);
    const v = new DataView(entry.buffer);
    v.setUint32(0, (write + 1) >>> 0, true); // sequence
    entry[4] = stream;
    entry[5] = cpu; // q7_idx: per-core fan-out is by entry (seed §5.2 NOTE)
    v.setUint16(6, text.byteLength, true);
    entry.set(text, POOL_STDIO_ENTRY_HEADER_BYTES);
    this.#memory.writePa(d.dataPa + (write % d.capacity) * POOL_STDIO_ENTRY_BYTES, entry);
    const w = new Uint8Array(4);
    new DataView(w.buffer).setUint32(0, (write + 1) >>> 0, true);
    this.#memory.writePa(d.writeIdxPa, w);
  }

  #u32(pa: number): number {
    const b = this.#memory.readPa(pa, 4);
    return b === undefined ? 0 : new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true);
  }

  #u64(pa: number): number {
    const b = this.#memory.readPa(pa, 8);
    return b === undefined ? 0 : u64(new DataView(b.buffer, b.byteOffset, 8), 0);
  }
}
