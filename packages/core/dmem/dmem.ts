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
  /** Host-DRAM bytes per NeuronCore, by category (the HBM share of a row is the row minus this). Ours. */
  readonly #hostUsage = new Map<string, Float64Array>();
  /** HBM bytes booked per device: the cap applies to HBM only, not to pinned host DRAM (the NQ rings). */
  readonly #hbm = new Map<number, number>();
  /** Every live `dmem_t`: freeing one twice is a bug, not a no-op. */
  readonly #live = new WeakSet<Dmem>();

  /**
   * Creates a ledger over `portal`. `hbmBytes` is `aws_hal_get_hbm_size()`: the cap every HBM allocation is checked
   * against. The seed checks the per-core total `[nc][22]` against it; since the NeuronCores of a device share one
   * HBM (the driver's `ndl_memory_alloc` fails when the device is full), we check the device's HBM total, which
   * implies the per-core check.
   */
  constructor(portal: Portal, log: Logger, hbmBytes: number) {
    this.#portal = portal;
    this.#log = log;
    this.#hbmBytes = hbmBytes;
  }

  /** `aws_hal_get_hbm_size()`: the HBM cap of one device. */
  get hbmBytes(): number {
    return this.#hbmBytes;
  }

  /** `memory_usage_nc[nc][22]`: bytes booked on one NeuronCore, all categories, HBM and host DRAM. */
  coreTotal(device: number, nc: number): number {
    return this.#usage.get(`${device}:${nc}`)?.[DMA_MEM_USAGE_TOTAL] ?? 0;
  }

  /** HBM bytes booked on a device, all cores. */
  hbmUsed(device: number): number {
    return this.#hbm.get(device) ?? 0;
  }

  /** `memory_usage_nc[nc]` of a device (a copy): by category, HBM and host DRAM together. */
  usage(device: number, nc: number): Float64Array {
    return new Float64Array(this.#row(device, nc));
  }

  /**
   * The row of one location (ours: the seed's rows do not split HBM from host DRAM; neuron-monitor's report does),
   * by category with the total at index 22 (a copy).
   */
  usageAt(device: number, nc: number, location: MemoryLocation): Float64Array {
    const all = this.#row(device, nc);
    const host = this.#hostUsage.get(`${device}:${nc}`) ?? new Float64Array(DMA_MEM_USAGE_SLOTS);
    return location === "host" ? new Float64Array(host) : all.map((v, i) => v - host[i]);
  }

  /** The NeuronCores of `device` that have a row (booked something at some point), in index order. */
  cores(device: number): number[] {
    return [...this.#usage.keys()].map((k) => k.split(":").map(Number)).filter(([d]) => d === device).map(([, nc]) =>
      nc
    ).sort((a, b) => a - b);
  }

  /** Bytes booked on a device, all cores. */
  deviceTotal(device: number): number {
    let t = 0;
    for (const [k, row] of this.#usage) if (k.startsWith(`${device}:`)) t += row[DMA_MEM_USAGE_TOTAL];
    return t;
  }

  /**
   * Allocates and books one `dmem_t` (`dmem_alloc_aligned`; `align` is a power of two, default 64); exhaustion is
   * `NRT_RESOURCE` with the per-category breakdown logged.
   */
  async alloc(
    device: number,
    nc: number,
    bytes: number,
    usage: DmaMemUsageType,
    location: MemoryLocation = "hbm",
    align = 64,
  ): Promise<Dmem> {
    if (!Number.isSafeInteger(bytes) || bytes <= 0) {
      throw new RangeError(`Allocation size ${bytes} is not a positive integer`);
    }
    if (location === "hbm" && this.hbmUsed(device) + bytes > this.#hbmBytes) throw this.#oom(device, nc, bytes, usage);
    let memory: DeviceMemory;
    try {
      memory = await this.#portal.memAlloc({ device, nc, bytes, location, align });
    } catch (e) {
      if (e instanceof NrtError && e.status === NrtStatus.NRT_RESOURCE) throw this.#oom(device, nc, bytes, usage, e);
      throw e;
    }
    const row = this.#row(device, nc);
    row[usage] += bytes;
    row[DMA_MEM_USAGE_TOTAL] += bytes;
    if (location === "hbm") this.#hbm.set(device, this.hbmUsed(device) + bytes);
    else this.#hostRow(device, nc, usage, bytes);
    const d: Dmem = { memory, usage };
    this.#live.add(d);
    return d;
  }

  /**
   * Frees one `dmem_t` and unbooks it.
   *
   * @throws {RangeError} When `d` was already freed (a double free).
   */
  async free(d: Dmem): Promise<void> {
    if (!this.#live.has(d)) {
      throw new RangeError(
        `Double free of ${d.memory.bytes} bytes of ${USAGE_NAMES[d.usage]} at 0x${d.memory.pa.toString(16)}`,
      );
    }
    this.#live.delete(d);
    await this.#portal.memFree(d.memory);
    const row = this.#row(d.memory.device, d.memory.nc);
    row[d.usage] -= d.memory.bytes;
    row[DMA_MEM_USAGE_TOTAL] -= d.memory.bytes;
    if (d.memory.location === "hbm") this.#hbm.set(d.memory.device, this.hbmUsed(d.memory.device) - d.memory.bytes);
    else this.#hostRow(d.memory.device, d.memory.nc, d.usage, -d.memory.bytes);
  }

  /** The breakdown line users read to debug an out-of-memory load. */
  breakdown(device: number, nc: number): string {
    const row = this.#row(device, nc);
    const parts: string[] = [];
    for (let i = 0; i < DMA_MEM_USAGE_TOTAL; i++) if (row[i] > 0) parts.push(`${USAGE_NAMES[i]}=${row[i]}`);
    return `${parts.join(", ") || "nothing"} (total ${row[DMA_MEM_USAGE_TOTAL]} of ${this.#hbmBytes} bytes)`;
  }

  /**
   * The OOM forensic trail (`dml_dump`): the failed request with its core's breakdown, then one line per other core
   * of the device that holds memory, and the device's HBM total.
   */
  #oom(device: number, nc: number, bytes: number, usage: DmaMemUsageType, cause?: unknown): NrtError {
    const msg =
      `Cannot allocate ${bytes} bytes of ${USAGE_NAMES[usage]} on ND ${device} NC ${nc}: device memory is exhausted; ` +
      `usage: ${this.breakdown(device, nc)}`;
    this.#log.error(msg);
    for (const k of [...this.#usage.keys()].sort()) {
      const [d, other] = k.split(":").map(Number);
      if (d === device && other !== nc && this.coreTotal(d, other) > 0) {
        this.#log.error(`  ND ${d} NC ${other} usage: ${this.breakdown(d, other)}`);
      }
    }
    this.#log.error(`  ND ${device} HBM total: ${this.hbmUsed(device)} of ${this.#hbmBytes} bytes`);
    return new NrtError(NrtStatus.NRT_RESOURCE, msg, { cause });
  }

  #hostRow(device: number, nc: number, usage: DmaMemUsageType, delta: number): void {
    const k = `${device}:${nc}`;
    let row = this.#hostUsage.get(k);
    if (row === undefined) this.#hostUsage.set(k, row = new Float64Array(DMA_MEM_USAGE_SLOTS));
    row[usage] += delta;
    row[DMA_MEM_USAGE_TOTAL] += delta;
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
