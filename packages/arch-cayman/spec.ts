/**
 * Cayman (NC-v3, Trn2) silicon spec.
 *
 * Seed facts: runtime-synthesis §2.1 (Cayman releases run-stall through host CSR 0x3000, 0xFF → 0x00 for all 8 Q7
 * cores at once; it ships hw_decode blobs, unlike Sunda), §4.5 (LNC: `NEURON_RT_VIRTUAL_CORE_SIZE` default 2),
 * lifecycle-error-model §2.6 (`AL_HAL_TPB_ARCH_TYPE_CAYMAN` = 3). The semaphore windows follow the public driver's
 * NC block layout (read +0x2701000, set +0x2701400, increment +0x2701800, decrement +0x2701c00, 4-byte stride).
 *
 * Ours, where the seeds are silent: the other BAR0 offsets (swap tables at 0x3010/0x3018 beside the run-stall CSR,
 * a 64-slot stream table at 0x4000, NQ 0x5000, engine IPs 0x6000, DMA 0x8000, Q7 IRAM windows at 8 MiB and DRAM
 * windows at 12 MiB), the Q7 IRAM (256 KiB) and DRAM (512 KiB) sizes (DRAM matches the Q7 image region
 * `[0, 0x80000)` of the kernel ABI), the DMA counts, the custom-op queue bundle and the device address map.
 *
 * @module
 */
import { type SiliconSpec, TpbArchType } from "@nrt/core/hal";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** The Cayman silicon spec. */
export const CAYMAN_SPEC: SiliconSpec = Object.freeze({
  arch: TpbArchType.AL_HAL_TPB_ARCH_TYPE_CAYMAN,
  name: "cayman",
  generation: "NC-v3",
  instances: Object.freeze(["trn2"]),
  ncPerDevice: 8,
  hbmBytes: 96 * GiB,
  sbufBytesPerCore: 28 * MiB,
  semaphoresPerCore: 256,
  eventsPerCore: 256,
  dmaEngines: 16,
  dmaQueuesPerEngine: 16,
  q7CoresPerNc: 8,
  nxCoresPerNc: 5,
  q7IramBytes: 256 * 1024,
  q7DramBytes: 512 * 1024,
  defaultVirtualCoreSize: 2,
  forcedVirtualCoreSize: null,
  runStallRelease: "host-csr",
  hwDecode: true,
  csr: Object.freeze({
    ncBlockBase: 0,
    ncBlockStride: 0x400_0000,
    semaphoreRead: 0x270_1000,
    semaphoreSet: 0x270_1400,
    semaphoreIncrement: 0x270_1800,
    semaphoreDecrement: 0x270_1c00,
    event: 0x270_2000,
    runStall: 0x3000,
    swapTable: 0x3010,
    swapFileIoTable: 0x3018,
    ucodeCore: 0x3020,
    streamTable: 0x4000,
    streamSlots: 64,
    notificationQueue: 0x5000,
    engineIp: 0x6000,
    dma: 0x8000,
    dmaEngineStride: 0x400,
    dmaQueueStride: 0x40,
    q7Iram: 0x80_0000,
    q7IramStride: 0x4_0000,
    q7Dram: 0xc0_0000,
    q7DramStride: 0x8_0000,
  }),
  addressMap: Object.freeze({
    hbmBase: 0x100_0000_0000,
    hostDramBase: 0x200_0000_0000,
    sbufBase: 0x300_0000_0000,
    sbufStride: 0x1000_0000,
  }),
  dmaQueueBundles: Object.freeze([Object.freeze({ marker: 16, relQueueIdx: 15, engLo: 0, engHi: 7 })]),
});
