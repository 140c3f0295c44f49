/**
 * The silicon spec every arch pack exports: plain data describing one NeuronCore generation. The runtime's Khal
 * implementations and the device simulator both read it, so a register offset lives in exactly one place.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b: "the register offsets genuinely differ across Sunda/Cayman/Mariana"),
 * §2.1 (Q7 IRAM/DRAM install, run-stall release), §4.1 (mla[32] × tpb[8]), §4.5 (virtual core size).
 *
 * @module
 */
import type { TpbArchType } from "./state.ts";

/** BAR0 register layout of one NeuronCore block. All offsets are relative to {@linkcode CsrLayout.ncBlockBase}. */
export interface CsrLayout {
  /** Byte distance between two NeuronCore blocks in BAR0. */
  readonly ncBlockStride: number;
  /** Offset of NeuronCore 0's block in BAR0. */
  readonly ncBlockBase: number;
  /** Semaphore read window (4-byte stride per semaphore). */
  readonly semaphoreRead: number;
  /** Semaphore set window. */
  readonly semaphoreSet: number;
  /** Semaphore increment window: a write adds the written value. */
  readonly semaphoreIncrement: number;
  /** Semaphore decrement window: a write subtracts the written value. */
  readonly semaphoreDecrement: number;
  /** Event (evt-accel) window, 4-byte stride; the "one value read" address of LOAD_POOL_ARGUMENT points here. */
  readonly event: number;
  /** Q7 run-stall CSR (one bit per Q7 core), or `null` when the generation has none (Sunda). */
  readonly runStall: number | null;
  /** 8-byte register: device address of the opcode → library table (`aws_hal_q7_swap_table`). */
  readonly swapTable: number;
  /** 8-byte register: device address of the stdio file-IO block (`aws_hal_q7_swap_file_io_table`). */
  readonly swapFileIoTable: number;
  /**
   * Per-core ucode control words (ours: the seeds do not say how `nrtucode_core_destroy` reaches the device): one u32
   * per core, the 5 NX cores first (word `i`), then the 8 Q7 cores (word `nxCoresPerNc + c`). A write is a
   * {@linkcode UcodeCoreCommand}, a read the core's {@linkcode UcodeCoreState} (spmd-teardown §6.2/§6.3).
   */
  readonly ucodeCore: number;
  /** Instruction-stream table: {@linkcode CsrLayout.streamSlots} entries of 16 bytes. */
  readonly streamTable: number;
  /** Number of entries of the instruction-stream table. */
  readonly streamSlots: number;
  /** Notification queue block: base lo/hi, capacity, head, tail, cause (6 × u32). */
  readonly notificationQueue: number;
  /** Per-engine instruction-pointer registers (5 × u32, `al_hal_tpb_eng_type` order). */
  readonly engineIp: number;
  /** DMA block: engines × {@linkcode CsrLayout.dmaEngineStride}; queue q at `q * dmaQueueStride`. */
  readonly dma: number;
  /** Byte distance between two DMA engines' register blocks. */
  readonly dmaEngineStride: number;
  /** Byte distance between two queues of one engine. */
  readonly dmaQueueStride: number;
  /** Q7 IRAM windows: core c at `q7Iram + c * q7IramStride`. */
  readonly q7Iram: number;
  /** Distance between two Q7 cores' IRAM windows. */
  readonly q7IramStride: number;
  /** Q7 DRAM windows: core c at `q7Dram + c * q7DramStride`. */
  readonly q7Dram: number;
  /** Distance between two Q7 cores' DRAM windows. */
  readonly q7DramStride: number;
}

/** Device physical address map used by the portal's allocations and the instruction streams. */
export interface AddressMap {
  /** First device address of HBM. */
  readonly hbmBase: number;
  /** First device address of pinned host DRAM. */
  readonly hostDramBase: number;
  /** Device address of NeuronCore 0's SBUF; core n at `sbufBase + n * sbufStride`. */
  readonly sbufBase: number;
  /** Distance between two NeuronCores' SBUF windows. */
  readonly sbufStride: number;
}

/** One NeuronCore generation, as data. */
export interface SiliconSpec {
  /** `al_hal_tpb_arch_type` of the generation. */
  readonly arch: TpbArchType;
  /** Lower-case pack name: `"sunda"`, `"cayman"`, `"mariana"` (or a third party's). */
  readonly name: string;
  /** Marketing generation, e.g. `"NC-v3"`. */
  readonly generation: string;
  /** Instance families built on it, e.g. `["trn2"]`. */
  readonly instances: readonly string[];
  /** Physical NeuronCores per device. */
  readonly ncPerDevice: number;
  /** HBM bytes per device. */
  readonly hbmBytes: number;
  /** SBUF bytes per NeuronCore (shared by its 8 Q7 cores). */
  readonly sbufBytesPerCore: number;
  /** Semaphores per NeuronCore. */
  readonly semaphoresPerCore: number;
  /** Events per NeuronCore. */
  readonly eventsPerCore: number;
  /** DMA engines per NeuronCore. */
  readonly dmaEngines: number;
  /** Queues per DMA engine. */
  readonly dmaQueuesPerEngine: number;
  /** Q7 (GPSIMD pool) cores per NeuronCore: 8 on every generation (seed: spmd-teardown §1). */
  readonly q7CoresPerNc: number;
  /** NX engine cores per NeuronCore: 5 (PE/ACT/POOL/DVE/SP; seed: runtime-synthesis §2.1). */
  readonly nxCoresPerNc: number;
  /** IRAM bytes per Q7 core (the image size gate). */
  readonly q7IramBytes: number;
  /** DRAM bytes per Q7 core (the image size gate). */
  readonly q7DramBytes: number;
  /** Default `NEURON_RT_VIRTUAL_CORE_SIZE`. */
  readonly defaultVirtualCoreSize: number;
  /** When set, the virtual core size is forced to this value whatever the config says (Sunda: 1). */
  readonly forcedVirtualCoreSize: number | null;
  /** How the Q7 cores leave run-stall: a host CSR write, or the sequencer's EVT_SEM fabric (Sunda). */
  readonly runStallRelease: "host-csr" | "evt-sem";
  /** Whether the generation ships hardware-decode blobs (Sunda ships none). */
  readonly hwDecode: boolean;
  /** BAR0 register layout. */
  readonly csr: CsrLayout;
  /** Device address map. */
  readonly addressMap: AddressMap;
  /**
   * The rows of the DMA queue-bundle allocation table (`v2_queue_bundle_alloc_table`, seed: runtime-synthesis §3.1):
   * the custom-op queues are those of the rows with marker 16 (`tdrv/dma_queue_bundle.ts`).
   */
  readonly dmaQueueBundles: readonly DmaQueueBundle[];
}

/** One row of the queue-bundle table: `{ marker, rel_queue_idx, eng_lo, eng_hi }` (seed: runtime-synthesis §3.1). */
export interface DmaQueueBundle {
  /** The ring type the bundle is for (16 = `KBIN_DMA_RING_TYPE_CUSTOM_OP`). */
  readonly marker: number;
  /** The queue index, relative to each engine of the bundle. */
  readonly relQueueIdx: number;
  /** First DMA engine of the bundle. */
  readonly engLo: number;
  /** Last DMA engine of the bundle (inclusive). */
  readonly engHi: number;
}

/**
 * What the host writes to a core's {@linkcode CsrLayout.ucodeCore} word at `tdrv_destroy` (seed: spmd-teardown §6.2,
 * §6.3: `ucode_core_print_logs(core); ucode_core_destroy(core)` for each of the 5 NX and 8 Q7 cores). The values are
 * ours.
 */
export const UcodeCoreCommand = {
  /** `ucode_core_print_logs`: the device moves the core's pending kernel output into the pool_stdio rings. */
  PRINT_LOGS: 1,
  /** `ucode_core_destroy` → `ucode_lib_core_destroy`: "device-side: stop image, free IRAM/DRAM". */
  DESTROY: 2,
} as const;
/** One ucode core command. */
export type UcodeCoreCommand = typeof UcodeCoreCommand[keyof typeof UcodeCoreCommand];

/** What a core's {@linkcode CsrLayout.ucodeCore} word reads (ours). */
export const UcodeCoreState = {
  /** Brought up (the reset state, and again after a new Pool image install). */
  LIVE: 0,
  /** Destroyed: its image is stopped and its IRAM/DRAM returned. */
  STOPPED: 1,
} as const;
/** One ucode core state. */
export type UcodeCoreState = typeof UcodeCoreState[keyof typeof UcodeCoreState];

/** BAR0 offset of a core's {@linkcode CsrLayout.ucodeCore} word: NX core `index`, or Q7 core `index`. */
export function ucodeCoreAddr(spec: SiliconSpec, nc: number, kind: "nx" | "q7", index: number): number {
  const count = kind === "nx" ? spec.nxCoresPerNc : spec.q7CoresPerNc;
  if (!Number.isInteger(index) || index < 0 || index >= count) {
    throw new RangeError(`${kind.toUpperCase()} core ${index} is outside 0..${count - 1}`);
  }
  return ncBlock(spec, nc) + spec.csr.ucodeCore + 4 * (kind === "nx" ? index : spec.nxCoresPerNc + index);
}

/** `KBIN_DMA_RING_TYPE_CUSTOM_OP` (seed: runtime-synthesis §2.3). */
export const KBIN_DMA_RING_TYPE_CUSTOM_OP = 16;

/** Byte offset in BAR0 of NeuronCore `nc`'s register block. */
export function ncBlock(spec: SiliconSpec, nc: number): number {
  return spec.csr.ncBlockBase + nc * spec.csr.ncBlockStride;
}
