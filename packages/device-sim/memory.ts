/**
 * Device memory of one simulated device: HBM and pinned host DRAM as two physical-address ranges, a first-fit
 * allocator over each, and PA → (allocation, offset) lookup for the sequencer's DMA.
 *
 * Capacity is accounted in full but backing is allocated lazily, per allocation, on its first write: a 96 GiB
 * device costs nothing idle, and an allocation that is only ever read reads zeros. Backing is a
 * `SharedArrayBuffer`, so Q7 Workers can later be handed a view of it.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (`ndl_memory_alloc` / `ndl_memory_free` / `ndl_memory_copy`), §4.3 (the
 * device allocator the runtime's two-tier dmem sits on).
 *
 * @module
 */
import { type DeviceMemory, type MemAllocRequest, type MemoryLocation, NrtError, NrtStatus } from "@nrt/core";

/** One physical range a location allocates from. */
export interface MemoryRange {
  /** First device physical address. */
  readonly base: number;
  /** Bytes of capacity. */
  readonly capacity: number;
}

/** A live allocation with its (lazy) backing. */
export interface SimAllocation extends DeviceMemory {
  /** Backing store, created on the first write. */
  backing: Uint8Array | undefined;
  /** Bumped on every write: decoded views of the allocation ({@linkcode DeviceMemoryMap.decodePa}) older than it are stale. */
  generation: number;
  /** Structures decoded from this allocation (instruction streams, ring and argument tables), by kind and range. */
  decoded?: Map<string, { generation: number; value: unknown }>;
}

interface Hole {
  start: number;
  end: number;
}

class RangeAllocator {
  readonly #holes: Hole[];
  used = 0;
  constructor(readonly range: MemoryRange) {
    this.#holes = range.capacity > 0 ? [{ start: range.base, end: range.base + range.capacity }] : [];
  }

  /** First fit: the lowest aligned address with `bytes` free behind it, or `undefined`. */
  take(bytes: number, align: number): number | undefined {
    for (let i = 0; i < this.#holes.length; i++) {
      const h = this.#holes[i];
      const at = Math.ceil(h.start / align) * align;
      if (at + bytes > h.end) continue;
      const pieces: Hole[] = [];
      if (at > h.start) pieces.push({ start: h.start, end: at });
      if (at + bytes < h.end) pieces.push({ start: at + bytes, end: h.end });
      this.#holes.splice(i, 1, ...pieces);
      this.used += bytes;
      return at;
    }
    return undefined;
  }

  /** Returns `[start, start + bytes)` to the free list, coalescing with its neighbours. */
  give(start: number, bytes: number): void {
    const end = start + bytes;
    let i = 0;
    while (i < this.#holes.length && this.#holes[i].start < start) i++;
    this.#holes.splice(i, 0, { start, end });
    const next = this.#holes[i + 1];
    if (next !== undefined && next.start === end) {
      this.#holes[i].end = next.end;
      this.#holes.splice(i + 1, 1);
    }
    const prev = this.#holes[i - 1];
    if (prev !== undefined && prev.end === start) {
      prev.end = this.#holes[i].end;
      this.#holes.splice(i, 1);
    }
    this.used -= bytes;
  }
}

/** Options of {@linkcode DeviceMemoryMap}. */
export interface DeviceMemoryMapOptions {
  /** Device index stamped into every allocation. */
  readonly device: number;
  /** HBM range. */
  readonly hbm: MemoryRange;
  /** Pinned host DRAM range. */
  readonly host: MemoryRange;
  /** Source of portal-unique allocation ids. */
  readonly nextId: () => number;
}

/** The memory of one simulated device. */
export class DeviceMemoryMap {
  readonly #device: number;
  readonly #nextId: () => number;
  readonly #ranges: Record<MemoryLocation, RangeAllocator>;
  /** Live allocations sorted by PA (binary-searched by {@linkcode DeviceMemoryMap.resolve}). */
  readonly #sorted: SimAllocation[] = [];
  readonly #byId = new Map<number, SimAllocation>();
  #backedBytes = 0;

  /** Creates the (empty) memory of one device. */
  constructor(options: DeviceMemoryMapOptions) {
    this.#device = options.device;
    this.#nextId = options.nextId;
    this.#ranges = { hbm: new RangeAllocator(options.hbm), host: new RangeAllocator(options.host) };
  }

  /** Allocates; throws `NrtError(NRT_RESOURCE)` when the location has no fitting hole. */
  alloc(request: MemAllocRequest): DeviceMemory {
    const { bytes, nc } = request;
    const align = request.align ?? 64;
    const location = request.location ?? "hbm";
    if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new RangeError(`Allocation size ${bytes} is not a positive integer`);
    if (!Number.isSafeInteger(align) || align <= 0 || !Number.isInteger(Math.log2(align))) {
      throw new RangeError(`Alignment ${align} is not a power of two`);
    }
    const range = this.#ranges[location];
    const pa = range.take(bytes, align);
    if (pa === undefined) {
      throw new NrtError(
        NrtStatus.NRT_RESOURCE,
        `Cannot allocate ${bytes} B of ${location} on device ${this.#device}: ` +
          `${range.used} of ${range.range.capacity} B in use, no fitting hole`,
      );
    }
    const a: SimAllocation = { id: this.#nextId(), device: this.#device, nc, pa, bytes, location, backing: undefined, generation: 0 };
    this.#sorted.splice(this.#lowerBound(pa), 0, a);
    this.#byId.set(a.id, a);
    return publicView(a);
  }

  /** Frees; a second free or a handle this device never issued throws `NrtError(NRT_INVALID)`. */
  free(memory: DeviceMemory): void {
    const a = this.#own(memory, "free");
    this.#byId.delete(a.id);
    this.#sorted.splice(this.#sorted.indexOf(a), 1);
    this.#ranges[a.location].give(a.pa, a.bytes);
    if (a.backing !== undefined) this.#backedBytes -= a.bytes;
    a.backing = undefined;
    a.generation++;
    a.decoded = undefined;
  }

  /** Copies `data` into an allocation at `offset` (bounds-checked: `NRT_INVALID`). */
  write(memory: DeviceMemory, offset: number, data: Uint8Array): void {
    const a = this.#own(memory, "write");
    this.#check(a, offset, data.byteLength, "write");
    this.#backing(a).set(data, offset);
    a.generation++;
  }

  /** Copies `length` bytes out of an allocation at `offset` (bounds-checked: `NRT_INVALID`). */
  read(memory: DeviceMemory, offset: number, length: number): Uint8Array {
    const a = this.#own(memory, "read");
    this.#check(a, offset, length, "read");
    return a.backing === undefined ? new Uint8Array(length) : a.backing.slice(offset, offset + length);
  }

  /** The allocation holding `[pa, pa + length)` entirely, with the offset of `pa` in it, or `undefined`. */
  resolve(pa: number, length: number): { allocation: SimAllocation; offset: number } | undefined {
    const i = this.#lowerBound(pa + 1) - 1;
    const a = this.#sorted[i];
    if (a === undefined || pa < a.pa || pa + length > a.pa + a.bytes) return undefined;
    return { allocation: a, offset: pa - a.pa };
  }

  /** Reads `length` bytes at a device PA, or `undefined` when no single allocation holds them. */
  readPa(pa: number, length: number): Uint8Array | undefined {
    const r = this.resolve(pa, length);
    if (r === undefined) return undefined;
    const b = r.allocation.backing;
    return b === undefined ? new Uint8Array(length) : b.slice(r.offset, r.offset + length);
  }

  /**
   * A view (no copy) of `length` bytes at a device PA for the DMA engine, or `undefined` when no single allocation
   * holds them; unbacked memory reads as zeros. The view is only valid until the next write to that allocation.
   */
  viewPa(pa: number, length: number): Uint8Array | undefined {
    const r = this.resolve(pa, length);
    if (r === undefined) return undefined;
    const b = r.allocation.backing;
    return b === undefined ? new Uint8Array(length) : b.subarray(r.offset, r.offset + length);
  }

  /**
   * `decode` applied to the bytes at a device PA, cached on the allocation until its next write: the sequencer's
   * fetch of instruction streams and tables, which the host writes once at load and the device reads every run.
   * Returns `undefined` when no single allocation holds the range; `decode` may throw (nothing is cached then).
   */
  decodePa<T>(pa: number, length: number, kind: string, decode: (bytes: Uint8Array) => T): T | undefined {
    const r = this.resolve(pa, length);
    if (r === undefined) return undefined;
    const a = r.allocation;
    const key = `${kind}:${r.offset}:${length}`;
    const hit = a.decoded?.get(key);
    if (hit !== undefined && hit.generation === a.generation) return hit.value as T;
    const b = a.backing;
    const value = decode(b === undefined ? new Uint8Array(length) : b.slice(r.offset, r.offset + length));
    (a.decoded ??= new Map()).set(key, { generation: a.generation, value });
    return value;
  }

  /** Writes at a device PA; returns `false` when no single allocation holds the range. */
  writePa(pa: number, data: Uint8Array): boolean {
    const r = this.resolve(pa, data.byteLength);
    if (r === undefined) return false;
    this.#backing(r.allocation).set(data, r.offset);
    r.allocation.generation++;
    return true;
  }

  /** Bytes and allocation count in use. */
  usage(): { hbm: number; host: number; allocations: number } {
    return { hbm: this.#ranges.hbm.used, host: this.#ranges.host.used, allocations: this.#byId.size };
  }

  /** Bytes of allocations that have real backing (observability: the lazy-backing invariant). */
  get backedBytes(): number {
    return this.#backedBytes;
  }

  #own(memory: DeviceMemory, what: string): SimAllocation {
    const a = this.#byId.get(memory.id);
    if (a === undefined || a.device !== memory.device || a.pa !== memory.pa || memory.device !== this.#device) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot ${what} device memory #${memory.id} at 0x${memory.pa.toString(16)}: not a live allocation of device ${this.#device}`,
      );
    }
    return a;
  }

  #check(a: SimAllocation, offset: number, length: number, what: string): void {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > a.bytes) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot ${what} device memory #${a.id}: range [${offset}, ${offset + length}) is outside its ${a.bytes} B`,
        { cause: new RangeError("Device memory access out of bounds") },
      );
    }
  }

  #backing(a: SimAllocation): Uint8Array {
    if (a.backing === undefined) {
      a.backing = new Uint8Array(new SharedArrayBuffer(a.bytes));
      this.#backedBytes += a.bytes;
    }
    return a.backing;
  }

  /** Index of the first allocation whose PA is ≥ `pa`. */
  #lowerBound(pa: number): number {
    let lo = 0, hi = this.#sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#sorted[mid].pa < pa) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

function publicView(a: SimAllocation): DeviceMemory {
  return Object.freeze({ id: a.id, device: a.device, nc: a.nc, pa: a.pa, bytes: a.bytes, location: a.location });
}
