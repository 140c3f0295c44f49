/**
 * `dmem`: the two-tier device allocator and the per-device usage ledger.
 *
 * Seed: runtime-synthesis §4.3 — device memory is carved through the driver portal (`ndl_memory_alloc`); the MODEL
 * allocator is created per model at stage time and freed in one call (`dmem_allocator_destroy`) at unload; every
 * `dmem_t` is booked under one of 23 `dma_mem_usage_type` slots in `memory_usage_nc[8][23]`, where `[nc][22]` is
 * the per-core total checked against the HBM size. SBUF is never allocated here (it is validated, §4.3 NOTE).
 *
 * @module
 */
import { NrtError } from "../error.ts";
import type { Logger } from "../log.ts";
import type { DeviceMemory, MemoryLocation, Portal } from "../portal.ts";
import { NrtStatus } from "../status.ts";

/** The usage categories (`dma_mem_usage_type`); index 22 of the ledger is the per-core total. */
export const DmaMemUsageType = {
  CODE: 0,
  TENSORS: 1,
  CONSTANTS: 2,
  SCRATCHPAD: 3,
  SHARED_SCRATCHPAD: 4,
  DMA_RINGS: 5,
  INSTRUCTIONS: 6,
  NOTIFICATIONS: 7,
  POOL_STDIO: 8,
  UCODE_LIBS: 9,
  UCODE_TABLE: 10,
  IO_STAGING: 11,
  ARG_TABLES: 12,
  COLLECTIVES: 13,
  PROFILER: 14,
  DEBUG: 15,
  HOST_INPUT: 16,
  HOST_OUTPUT: 17,
  RUNTIME: 18,
  DMA_DESCRIPTORS: 19,
  MISC: 20,
  UNCATEGORIZED: 21,
} as const;
/** One usage category. */
export type DmaMemUsageType = typeof DmaMemUsageType[keyof typeof DmaMemUsageType];
/** Ledger slots per NeuronCore: 22 categories + the total at index 22 (seed: `memory_usage_nc[8][23]`). */
export const DMA_MEM_USAGE_SLOTS = 23;
/** Index of the per-core total. */
export const DMA_MEM_USAGE_TOTAL = 22;

const USAGE_NAMES: readonly string[] = Object.keys(DmaMemUsageType).map((k) => k.toLowerCase());

/** One booked allocation. */
export interface Dmem {
  /** The portal allocation. */
  readonly memory: DeviceMemory;
  /** Category. */
  readonly usage: DmaMemUsageType;
}

/** The per-device ledger and the global (per-core) tier. */
export class DmemLedger {
  readonly #portal: Portal;
  readonly #log: Logger;
  readonly #hbmBytes: number;
  readonly #usage = new Map<string, Float64Array>();

  /** Creates a ledger over `portal`; `hbmBytes` is the per-device cap checked on every allocation. */
  constructor(portal: Portal, log: Logger, hbmBytes: number) {
    this.#portal = portal;
    this.#log = log;
    this.#hbmBytes = hbmBytes;
  }

  /** `memory_usage_nc[nc]` of a device (a copy). */
  usage(device: number, nc: number): Float64Array {
    return new Float64Array(this.#row(device, nc));
  }

  /** Bytes booked on a device, all cores. */
  deviceTotal(device: number): number {
    let t = 0;
    for (const [k, row] of this.#usage) if (k.startsWith(`${device}:`)) t += row[DMA_MEM_USAGE_TOTAL];
    return t;
  }

  /** Allocates and books one `dmem_t`; exhaustion is `NRT_RESOURCE` with the per-category breakdown logged. */
  async alloc(device: number, nc: number, bytes: number, usage: DmaMemUsageType, location: MemoryLocation = "hbm"): Promise<Dmem> {
    if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new RangeError(`Allocation size ${bytes} is not a positive integer`);
    if (location === "hbm" && this.deviceTotal(device) + bytes > this.#hbmBytes) throw this.#oom(device, nc, bytes, usage);
    let memory: DeviceMemory;
    try {
      memory = await this.#portal.memAlloc({ device, nc, bytes, location, align: 64 });
    } catch (e) {
      if (e instanceof NrtError && e.status === NrtStatus.NRT_RESOURCE) throw this.#oom(device, nc, bytes, usage, e);
      throw e;
    }
    const row = this.#row(device, nc);
    row[usage] += bytes;
    row[DMA_MEM_USAGE_TOTAL] += bytes;
    return { memory, usage };
  }

  /** Frees one `dmem_t` and unbooks it. */
  async free(d: Dmem): Promise<void> {
    await this.#portal.memFree(d.memory);
    const row = this.#row(d.memory.device, d.memory.nc);
    row[d.usage] -= d.memory.bytes;
    row[DMA_MEM_USAGE_TOTAL] -= d.memory.bytes;
  }

  /** The breakdown line users read to debug an out-of-memory load. */
  breakdown(device: number, nc: number): string {
    const row = this.#row(device, nc);
    const parts: string[] = [];
    for (let i = 0; i < DMA_MEM_USAGE_TOTAL; i++) if (row[i] > 0) parts.push(`${USAGE_NAMES[i]}=${row[i]}`);
    return `${parts.join(", ") || "nothing"} (total ${row[DMA_MEM_USAGE_TOTAL]} of ${this.#hbmBytes} bytes)`;
  }

  #oom(device: number, nc: number, bytes: number, usage: DmaMemUsageType, cause?: unknown): NrtError {
    const msg = `Cannot allocate ${bytes} bytes of ${USAGE_NAMES[usage]} on ND ${device} NC ${nc}: device memory is exhausted; ` +
      `usage: ${this.breakdown(device, nc)}`;
    this.#log.error(msg);
    return new NrtError(NrtStatus.NRT_RESOURCE, msg, { cause });
  }

  #row(device: number, nc: number): Float64Array {
    const k = `${device}:${nc}`;
    let row = this.#usage.get(k);
    if (row === undefined) this.#usage.set(k, row = new Float64Array(DMA_MEM_USAGE_SLOTS));
    return row;
  }
}

/** The MODEL tier: every allocation of one model, freed in one call (`dmem_allocator_destroy`). */
export class ModelAllocator {
  readonly #ledger: DmemLedger;
  readonly #items: Dmem[] = [];
  /** Device and core the model lives on. */
  readonly device: number;
  /** NeuronCore. */
  readonly nc: number;

  /** Creates an empty model allocator. */
  constructor(ledger: DmemLedger, device: number, nc: number) {
    this.#ledger = ledger;
    this.device = device;
    this.nc = nc;
  }

  /** Allocates one booked block owned by the model. */
  async alloc(bytes: number, usage: DmaMemUsageType, location: MemoryLocation = "hbm"): Promise<Dmem> {
    const d = await this.#ledger.alloc(this.device, this.nc, bytes, usage, location);
    this.#items.push(d);
    return d;
  }

  /** Bytes held. */
  get bytes(): number {
    return this.#items.reduce((a, d) => a + d.memory.bytes, 0);
  }

  /** Frees everything in one call. */
  async destroy(): Promise<void> {
    const items = this.#items.splice(0);
    let first: unknown;
    for (const d of items.reverse()) {
      try {
        await this.#ledger.free(d);
      } catch (e) {
        first ??= e;
      }
    }
    if (first !== undefined) throw first;
  }
}
