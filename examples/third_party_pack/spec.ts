/**
 * The silicon spec of "maverick-sim": a made-up generation a third party adds to nrt without touching the
 * repository. Arch id 5 is the next `al_hal_tpb_arch_type` after Mariana; the seeds know Maverick (v5) from
 * headers only (lifecycle-error-model §2.6: "Maverick (v5) is header-observed only"), so every number here is the
 * example's own: one NeuronCore of 8 Q7 cores, 1 GiB of HBM, a small BAR0 layout with the run-stall CSR at 0x3000
 * like Cayman and Mariana.
 *
 * @module
 */
import type { SiliconSpec, TpbArchType } from "@nrt/core/hal";

/** The example's `al_hal_tpb_arch_type`: outside the seed's enum {2, 3, 4}, hence the cast. */
export const MAVERICK_ARCH = 5 as TpbArchType;

/** The "maverick-sim" silicon spec. */
export const MAVERICK_SPEC: SiliconSpec = Object.freeze({
  arch: MAVERICK_ARCH,
  name: "maverick-sim",
  generation: "NC-v5 (simulated)",
  instances: Object.freeze([]),
  ncPerDevice: 1,
  hbmBytes: 1024 ** 3,
  sbufBytesPerCore: 8 * 1024 ** 2,
  semaphoresPerCore: 64,
  eventsPerCore: 64,
  dmaEngines: 8,
  dmaQueuesPerEngine: 4,
  q7CoresPerNc: 8,
  nxCoresPerNc: 5,
  q7IramBytes: 64 * 1024,
  q7DramBytes: 512 * 1024,
  defaultVirtualCoreSize: 1,
  forcedVirtualCoreSize: null,
  runStallRelease: "host-csr",
  hwDecode: false,
  csr: Object.freeze({
    ncBlockBase: 0x1000_0000,
    ncBlockStride: 0x100_0000,
    semaphoreRead: 0xf0_0000,
    semaphoreSet: 0xf0_0100,
    semaphoreIncrement: 0xf0_0200,
    semaphoreDecrement: 0xf0_0300,
    event: 0xf0_0400,
    runStall: 0x3000,
    swapTable: 0x3100,
    swapFileIoTable: 0x3108,
    ucodeCore: 0x3110,
    streamTable: 0x3200,
    streamSlots: 16,
    notificationQueue: 0x3400,
    engineIp: 0x3500,
    dma: 0x4000,
    dmaEngineStride: 0x200,
    dmaQueueStride: 0x40,
    q7Iram: 0x10_0000,
    q7IramStride: 0x1_0000,
    q7Dram: 0x20_0000,
    q7DramStride: 0x8_0000,
  }),
  addressMap: Object.freeze({
    hbmBase: 0x40_0000_0000,
    hostDramBase: 0x50_0000_0000,
    sbufBase: 0x60_0000_0000,
    sbufStride: 0x100_0000,
  }),
  // The 8 custom-op queues: queue 3 of engines 0..7.
  dmaQueueBundles: Object.freeze([Object.freeze({ marker: 16, relQueueIdx: 3, engLo: 0, engHi: 7 })]),
});
