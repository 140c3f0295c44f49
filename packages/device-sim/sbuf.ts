/**
 * One NeuronCore's SBUF (State Buffer): the on-chip memory shared by its 8 Q7 cores and the custom-op DMA queues.
 * Until the Q7 cluster exists the SBUF is a lazily allocated buffer of its own; when the cluster starts, the contents
 * move into the cluster's shared `WebAssembly.Memory` at the Q7 SBUF window and the store keeps a view of that, so
 * DMA and kernels see one memory from then on, across Q7 resets too (the next cluster boots on the same memory).
 *
 * Seed: spmd-teardown §4.4 ("the SBUF is the inter-core shared memory"), runtime-synthesis §3.6 (the custom-op DMA
 * queues move HBM ↔ SBUF).
 *
 * @module
 */
import { Q7Map } from "@nrt/core/isa";

/** The SBUF of one NeuronCore. */
export class SbufStore {
  /** SBUF bytes. */
  readonly bytes: number;
  #view: Uint8Array | undefined;

  /** Creates an SBUF of `bytes` that costs nothing until first written. */
  constructor(bytes: number) {
    this.bytes = bytes;
  }

  /** Whether `[offset, offset + length)` lies inside the SBUF. */
  contains(offset: number, length: number): boolean {
    return offset >= 0 && length >= 0 && offset + length <= this.bytes;
  }

  /** Copies `length` bytes out at `offset` (the caller checked {@linkcode SbufStore.contains}). */
  read(offset: number, length: number): Uint8Array {
    return this.#view === undefined ? new Uint8Array(length) : this.#view.slice(offset, offset + length);
  }

  /** A view (no copy) of `length` bytes at `offset`, for the DMA engine; zeros while the SBUF is untouched. */
  view(offset: number, length: number): Uint8Array {
    return this.#view === undefined ? new Uint8Array(length) : this.#view.subarray(offset, offset + length);
  }

  /** Writes `data` at `offset` (the caller checked {@linkcode SbufStore.contains}). */
  write(offset: number, data: Uint8Array): void {
    (this.#view ??= new Uint8Array(this.bytes)).set(data, offset);
  }

  /**
   * Moves the SBUF into a Q7 cluster's memory at {@linkcode Q7Map.SBUF_BASE}; later accesses go there. When a cluster
   * goes away (a Q7 reset, a hang's recovery) the SBUF stays where it is: the NeuronCore's next cluster boots on the
   * same memory (`Q7ClusterOptions.memorySlot`), as hardware keeps its SBUF across a Q7 reset, and only a cluster on
   * another memory gets a copy (ours: every reset copied the 28 MiB out and back, and on Bun the device agent kept
   * those copies until its rare full collections).
   */
  attach(memory: WebAssembly.Memory): void {
    const target = new Uint8Array(memory.buffer, Q7Map.SBUF_BASE, this.bytes);
    if (this.#view !== undefined && this.#view.buffer !== target.buffer) target.set(this.#view);
    this.#view = target;
  }
}
