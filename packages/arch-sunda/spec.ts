/**
 * Sunda (NC-v2: Trn1, Inf2) silicon spec.
 *
 * Seed facts: lifecycle-error-model §2.6 (`AL_HAL_TPB_ARCH_TYPE_SUNDA` = 2, NC-v2); runtime-synthesis §2.1 (Sunda has
 * no host run-stall CSR — "Sunda is a no-op — its Q7s come online under SEQ/SP via the EVT_SEM fabric" — and "ships
 * ZERO v2 hw_decode blobs"), §4.5 (`NEURON_RT_VIRTUAL_CORE_SIZE`: "Sunda forces size 1"), spmd-teardown §1 (8 Q7
 * pool cores per NeuronCore, as on every generation). The sizes (2 NeuronCores per device, 32 GiB HBM as 2 × 16 GiB,
 * 24 MiB SBUF per core, 256 semaphores) are the issue's.
 *
 * Ours, where the seeds are silent (runtime-synthesis §1.2 says only that "the register offsets genuinely differ
 * across Sunda/Cayman/Mariana"): every BAR0 offset below, the Q7 IRAM (256 KiB) and DRAM (512 KiB) sizes (DRAM
 * covers the Q7 image region `[0, 0x80000)` of the kernel ABI), the event and DMA counts and the device address
 * map. The layout packs a NeuronCore block into 32 MiB: control registers in the first 64 KiB, DMA at 64 KiB, the
 * Q7 IRAM windows at 4 MiB, the Q7 DRAM windows at 8 MiB and the semaphore/event windows at 24 MiB.
 *
 * @module
 */
import { type SiliconSpec, TpbArchType } from "@nrt/core/hal";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const KiB = 1024;

/** The Sunda silicon spec. */
export const SUNDA_SPEC: SiliconSpec = Object.freeze({
  arch: TpbArchType.AL_HAL_TPB_ARCH_TYPE_SUNDA,
  name: "sunda",
  generation: "NC-v2",
  instances: Object.freeze(["trn1", "inf2"]),
  ncPerDevice: 2,
  hbmBytes: 2 * 16 * GiB,
  sbufBytesPerCore: 24 * MiB,
  semaphoresPerCore: 256,
  eventsPerCore: 256,
  dmaEngines: 16,
  dmaQueuesPerEngine: 16,
  q7CoresPerNc: 8,
  nxCoresPerNc: 5,
  q7IramBytes: 256 * KiB,
  q7DramBytes: 512 * KiB,
  // seed: runtime-synthesis §4.5 — Sunda forces the virtual core size to 1, whatever NEURON_RT_VIRTUAL_CORE_SIZE says.
  defaultVirtualCoreSize: 1,
  forcedVirtualCoreSize: 1,
  // seed: runtime-synthesis §2.1 — no host CSR: the Q7s leave run-stall under SEQ/SP through the EVT_SEM fabric.
  runStallRelease: "evt-sem",
  hwDecode: false,
  csr: Object.freeze({
    ncBlockBase: 0,
    ncBlockStride: 0x200_0000,
    semaphoreRead: 0x180_0000,
    semaphoreSet: 0x180_0400,
    semaphoreIncrement: 0x180_0800,
    semaphoreDecrement: 0x180_0c00,
    event: 0x180_1000,
    runStall: null,
    swapTable: 0x2010,
    swapFileIoTable: 0x2018,
    ucodeCore: 0x2020,
    streamTable: 0x2400,
    streamSlots: 64,
    notificationQueue: 0x2800,
    engineIp: 0x2c00,
    dma: 0x1_0000,
    dmaEngineStride: 0x400,
    dmaQueueStride: 0x40,
    q7Iram: 0x40_0000,
    q7IramStride: 0x4_0000,
    q7Dram: 0x80_0000,
    q7DramStride: 0x8_0000,
  }),
  addressMap: Object.freeze({
    hbmBase: 0x10_0000_0000,
    hostDramBase: 0x80_0000_0000,
    sbufBase: 0xc0_0000_0000,
    sbufStride: 0x200_0000,
  }),
  // seed: runtime-synthesis §3.1 — the custom-op bundle tuple {marker 16, rel_queue_idx, eng_lo, eng_hi}; values ours.
  dmaQueueBundles: Object.freeze([Object.freeze({ marker: 16, relQueueIdx: 15, engLo: 0, engHi: 7 })]),
});
