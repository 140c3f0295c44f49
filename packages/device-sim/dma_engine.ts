/**
 * The custom-op DMA queues of one NeuronCore: the descriptor rings a DMA_CONFIG attaches, and the copies they make
 * between device memory (HBM or pinned host DRAM) and the NeuronCore's SBUF window
 * (`addressMap.sbufBase + nc * sbufStride + offset`). Each ring-table entry's index is the Q7 core whose queue pair
 * it is, so the byte counts per queue show each core's share.
 *
 * Seed: runtime-synthesis §3.1 (`dma_is_custom_op_dma_v2`: 16-byte bundle tuples `{marker 16, rel_queue_idx, eng_lo,
 * eng_hi}`), §3.6 ("relocated DMA-trigger WRITEs fire the 8 idx-16 custom-op DMA queues (HBM<->SBUF), each core's
 * pair selected by PRID"), spmd-teardown §2.1 (exactly 8 M2S/S2M pairs, one per pool core).
 *
 * @module
 */
import { isCustomOpQueue, KBIN_DMA_RING_TYPE_CUSTOM_OP, type SiliconSpec } from "@nrt/core/hal";
import {
  decodeRingTableEntry,
  DMA_DESCRIPTOR_BYTES,
  DmaDirection,
  getU32,
  RING_TABLE_ENTRY_BYTES,
} from "@nrt/core/isa";
import { cceFold } from "./collectives_cce.ts";
import { sharedClockMs } from "./device_log.ts";
import type { MemorySpace } from "./memory.ts";
import type { SbufStore } from "./sbuf.ts";

/** A DMA failure; the sequencer turns it into a TPB_ERROR record. */
export class DmaFault extends Error {
  /** Creates a fault with a sentence-case reason. */
  constructor(message: string) {
    super(message);
    this.name = "DmaFault";
  }
}

/** One attached ring. */
interface AttachedRing {
  readonly core: number;
  readonly engine: number;
  readonly queue: number;
  readonly count: number;
  readonly ringPa: number;
}

/** Bytes moved per custom-op queue (index = Q7 core), by direction. */
export interface QueueBytes {
  /** Memory → SBUF bytes per queue. */
  readonly m2s: number[];
  /** SBUF → memory bytes per queue. */
  readonly s2m: number[];
}

/** The per-queue byte counts of a stats array (M2S then S2M, `cores` each). */
export function queueBytesOf(stats: Float64Array, cores: number): QueueBytes {
  return { m2s: Array.from(stats.subarray(0, cores)), s2m: Array.from(stats.subarray(cores, 2 * cores)) };
}

/** The custom-op DMA of one NeuronCore. */
export class DmaEngine {
  readonly #spec: SiliconSpec;
  readonly #nc: number;
  readonly #memory: MemorySpace;
  readonly #sbuf: SbufStore;
  readonly #rings: Record<DmaDirection, AttachedRing[]> = { [DmaDirection.S2M]: [], [DmaDirection.M2S]: [] };
  /** Bytes moved per queue: M2S of core c at c, S2M at q7CoresPerNc + c (shared with the host). */
  readonly #stats: Float64Array;

  /** Creates the DMA of NeuronCore `nc`; `stats` receives the per-queue byte counts (default: a private array). */
  constructor(spec: SiliconSpec, nc: number, memory: MemorySpace, sbuf: SbufStore, stats?: Float64Array) {
    this.#spec = spec;
    this.#nc = nc;
    this.#memory = memory;
    this.#sbuf = sbuf;
    this.#stats = stats ?? new Float64Array(2 * spec.q7CoresPerNc);
  }

  /** Bytes moved so far per queue (a copy). */
  queueBytes(): QueueBytes {
    return queueBytesOf(this.#stats, this.#spec.q7CoresPerNc);
  }

  /** DMA_CONFIG: reads `queues` ring-table entries at `ringTable` and attaches them for `direction`. */
  configure(direction: DmaDirection, queues: number, ringTable: number): void {
    if (queues > this.#spec.q7CoresPerNc) {
      throw new DmaFault(`DMA_CONFIG names ${queues} queues, the custom-op bundle has ${this.#spec.q7CoresPerNc}`);
    }
    // The ring table is decoded once per write of its memory (written at load), not per run.
    const rings = this.#memory.decodePa(ringTable, queues * RING_TABLE_ENTRY_BYTES, "rings", this.#decodeRings);
    if (rings === undefined) {
      throw new DmaFault(`Ring table at 0x${ringTable.toString(16)} (${queues} entries) is not in device memory`);
    }
    this.#rings[direction] = rings;
  }

  /**
   * Decodes the ring table a DMA_CONFIG names into the memory's decode cache without attaching it (ours): the
   * sequencer does this when a stream is installed, so the stream's first run finds the table decoded. Best effort:
   * a table it cannot read or decode is left for the run to report.
   */
  prefetch(queues: number, ringTable: number): void {
    if (queues > this.#spec.q7CoresPerNc) return;
    try {
      this.#memory.decodePa(ringTable, queues * RING_TABLE_ENTRY_BYTES, "rings", this.#decodeRings);
    } catch {
      // The run's DMA_CONFIG reports it.
    }
  }

  /** Decodes a ring table of `table.byteLength / RING_TABLE_ENTRY_BYTES` entries (one function: no closure per run). */
  readonly #decodeRings = (table: Uint8Array): AttachedRing[] => {
    const queues = table.byteLength / RING_TABLE_ENTRY_BYTES;
    const rings: AttachedRing[] = [];
    for (let core = 0; core < queues; core++) {
      const e = decodeRingTableEntry(table, core * RING_TABLE_ENTRY_BYTES);
      if (e.ringType !== KBIN_DMA_RING_TYPE_CUSTOM_OP) {
        throw new DmaFault(
          `Ring-table entry ${core} has ring type ${e.ringType}, expected ${KBIN_DMA_RING_TYPE_CUSTOM_OP} (custom op)`,
        );
      }
      if (!isCustomOpQueue(this.#spec, e.engine, e.queue)) {
        throw new DmaFault(
          `Ring-table entry ${core} names engine ${e.engine} queue ${e.queue}, not a custom-op queue of the queue-bundle table (dma_is_custom_op_dma_v2)`,
        );
      }
      rings.push({ core, engine: e.engine, queue: e.queue, count: e.count, ringPa: e.ringPa });
    }
    return rings;
  };

  /**
   * Runs every descriptor attached for `direction`; the total moved must equal `expected`. `onQueue`, when given (a
   * traced run), hears each queue's share: its start and end (ms of the shared clock), bytes and descriptors.
   */
  run(
    direction: DmaDirection,
    expected: number,
    onQueue?: (queue: number, start: number, end: number, bytes: number, descriptors: number) => void,
  ): void {
    const base = direction === DmaDirection.M2S ? 0 : this.#spec.q7CoresPerNc;
    let total = 0;
    for (const ring of this.#rings[direction]) {
      const t0 = onQueue === undefined ? 0 : sharedClockMs();
      const before = total;
      // The descriptors are read where the host wrote them, at every run (ours: no decoded copy to fill on a ring's
      // first run after the host re-materialises it). An empty ring reads none (most of the 16 rings of an op on 8
      // cores, for a small tensor).
      const n = ring.count;
      if (n > 0) {
        const a = this.#memory.allocationAt(ring.ringPa, n * DMA_DESCRIPTOR_BYTES);
        if (a === undefined) {
          throw new DmaFault(
            `Descriptor ring of queue ${ring.core} at 0x${ring.ringPa.toString(16)} is not in device memory`,
          );
        }
        const b = a.backing;
        for (let i = 0, o = ring.ringPa - a.pa; i < n; i++, o += DMA_DESCRIPTOR_BYTES) {
          const bytes = getU32(b, o + 16);
          this.#copy(u64(b, o), u64(b, o + 8), bytes, ring.core, i, getU32(b, o + 20));
          this.#stats[base + ring.core] += bytes;
          total += bytes;
        }
      }
      onQueue?.(ring.core, t0, sharedClockMs(), total - before, n);
    }
    if (total !== expected) {
      const name = direction === DmaDirection.M2S ? "M2S" : "S2M";
      throw new DmaFault(`${name} descriptors moved ${total} B, the DMA_CONFIG_SIZE expects ${expected} B`);
    }
  }

  #copy(src: number, dst: number, bytes: number, core: number, index: number, flags: number): void {
    const data = this.#read(src, bytes);
    if (flags !== 0 && data !== undefined) {
      // A compute-DMA descriptor (collectives_cce.ts): the destination is read, folded with the source, written back.
      const into = this.#read(dst, bytes);
      if (into === undefined) {
        throw new DmaFault(
          `Descriptor ${index} of queue ${core} (${bytes} B) has an unmapped destination 0x${dst.toString(16)}`,
        );
      }
      // Folded in place in the destination's view unless the source overlaps it (then on a copy); the write below
      // stores the bytes back through the memory, which marks the allocation written.
      const overlaps = into.buffer === data.buffer && into.byteOffset < data.byteOffset + bytes &&
        data.byteOffset < into.byteOffset + bytes;
      const folded = overlaps ? into.slice() : into;
      const bad = cceFold(flags, folded, data);
      if (bad !== undefined) throw new DmaFault(`Descriptor ${index} of queue ${core}: ${bad}`);
      this.#write(dst, folded);
      return;
    }
    if (data === undefined || !this.#write(dst, data)) {
      const which = data === undefined ? `source 0x${src.toString(16)}` : `destination 0x${dst.toString(16)}`;
      throw new DmaFault(`Descriptor ${index} of queue ${core} (${bytes} B) has an unmapped ${which}`);
    }
  }

  #sbufOffset(pa: number, length: number): number | undefined {
    const base = this.#spec.addressMap.sbufBase + this.#nc * this.#spec.addressMap.sbufStride;
    const off = pa - base;
    return this.#sbuf.contains(off, length) ? off : undefined;
  }

  #read(pa: number, length: number): Uint8Array | undefined {
    const off = this.#sbufOffset(pa, length);
    // A view, not a copy: the destination is a different buffer (HBM ↔ SBUF), so the one copy is the DMA itself.
    return off !== undefined ? this.#sbuf.view(off, length) : this.#memory.viewPa(pa, length);
  }

  #write(pa: number, data: Uint8Array): boolean {
    const off = this.#sbufOffset(pa, data.byteLength);
    if (off === undefined) return this.#memory.writePa(pa, data);
    this.#sbuf.write(off, data);
    return true;
  }
}

/** The little-endian u64 at `o` of `b`, as a number (a descriptor address, read in place; addresses stay below 2^53). */
function u64(b: Uint8Array, o: number): number {
  return getU32(b, o) + getU32(b, o + 4) * 0x1_0000_0000;
}
