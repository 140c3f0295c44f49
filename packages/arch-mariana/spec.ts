/**
 * Mariana (NC-v4) silicon spec.
 *
 * Seed facts: lifecycle-error-model §2.6 (`AL_HAL_TPB_ARCH_TYPE_MARIANA` = 4, NC-v4); runtime-synthesis §2.1
 * (Mariana releases run-stall like Cayman: host CSR 0x3000, 0xFF → 0x00 for all 8 Q7 cores at once), §1.2 ("the
 * register offsets genuinely differ across Sunda/Cayman/Mariana"), §4.5 (virtual core size default 2). The sizes
 * (8 NeuronCores per device, 144 GiB HBM, 32 MiB SBUF per core) are the issue's.
 *
 * Ours, where the seeds are silent: every BAR0 offset other than the run-stall CSR 0x3000, the semaphore/event
 * counts, the Q7 IRAM (256 KiB) and DRAM (512 KiB) sizes, the DMA counts, the custom-op queue bundle and the device
 * address map. The layout is deliberately not Cayman's: a 128 MiB NeuronCore block with the swap-table registers
 * right after the run-stall CSR (0x3040/0x3048), a 128-slot stream table at 0x8000, DMA at 128 KiB with 2 KiB engine
 * blocks, the Q7 IRAM windows at 16 MiB (512 KiB apart), the Q7 DRAM windows at 32 MiB (1 MiB apart) and the
 * semaphore/event windows at 80 MiB. The whole BAR0 of a device stays below 4 GiB, so an event address fits the
 * 32-bit one-value-read field of LOAD_POOL_ARGUMENT (seed: runtime-synthesis §3.2).
 *
 * @module
 */
import { type SiliconSpec, TpbArchType } from "@nrt/core/hal";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const KiB = 1024;

/** The Mariana silicon spec. */
export const MARIANA_SPEC: SiliconSpec = Object.freeze({
  arch: TpbArchType.AL_HAL_TPB_ARCH_TYPE_MARIANA,
  name: "mariana",
  generation: "NC-v4",
  // The seeds name no instance family for NC-v4.
  instances: Object.freeze([]),
  ncPerDevice: 8,
  hbmBytes: 144 * GiB,
  sbufBytesPerCore: 32 * MiB,
  semaphoresPerCore: 256,
  eventsPerCore: 256,
  dmaEngines: 16,
  dmaQueuesPerEngine: 16,
  q7CoresPerNc: 8,
  nxCoresPerNc: 5,
  q7IramBytes: 256 * KiB,
  q7DramBytes: 512 * KiB,
  defaultVirtualCoreSize: 2,
  forcedVirtualCoreSize: null,
  runStallRelease: "host-csr",
  hwDecode: true,
  csr: Object.freeze({
    ncBlockBase: 0,
    ncBlockStride: 0x800_0000,
    semaphoreRead: 0x500_0000,
    semaphoreSet: 0x500_0400,
    semaphoreIncrement: 0x500_0800,
    semaphoreDecrement: 0x500_0c00,
    event: 0x500_1000,
    // seed: runtime-synthesis §2.1 — the host run-stall CSR is 0x3000 on Cayman and Mariana alike.
    runStall: 0x3000,
    swapTable: 0x3040,
    swapFileIoTable: 0x3048,
    ucodeCore: 0x3050,
    streamTable: 0x8000,
    streamSlots: 128,
    notificationQueue: 0x9000,
    engineIp: 0x9100,
    dma: 0x2_0000,
    dmaEngineStride: 0x800,
    dmaQueueStride: 0x80,
    q7Iram: 0x100_0000,
    q7IramStride: 0x8_0000,
    q7Dram: 0x200_0000,
    q7DramStride: 0x10_0000,
  }),
  addressMap: Object.freeze({
    hbmBase: 0x400_0000_0000,
    hostDramBase: 0x600_0000_0000,
    sbufBase: 0x700_0000_0000,
    sbufStride: 0x400_0000,
  }),
  // seed: runtime-synthesis §3.1 — the custom-op bundle tuple {marker 16, rel_queue_idx, eng_lo, eng_hi}; values ours:
  // the 8 custom-op queues are queue 15 of engines 8..15.
  dmaQueueBundles: Object.freeze([Object.freeze({ marker: 16, relQueueIdx: 15, engLo: 8, engHi: 15 })]),
});
