/**
 * `@nrt/core/hal`: what an arch-pack author needs — the {@linkcode ArchPack} a generation is described by, the
 * `Khal` contract `createKhal` builds from it, the silicon spec, and the shared error-record decoder.
 *
 * Seed: runtime-synthesis §1.2 layer 3b (the per-arch `kaena_khal`), lifecycle-error-model §4.5.
 *
 * @example A HAL from a shipped pack
 * ```ts
 * import { createKhal } from "@nrt/core/hal";
 * import { cayman } from "@nrt/arch-cayman";
 * console.log(createKhal(cayman).spec.ncPerDevice); // 8
 * ```
 *
 * @module
 */
export {
  type ArchPack,
  createKhal,
  type HalTarget,
  type Khal,
  type NotificationQueue,
  type PoolUcodeOverride,
  stockPoolImage,
  type StreamBinding,
  UCODE_TOO_BIG,
  type UcodeImage,
} from "../khal.ts";
export {
  type AddressMap,
  type CsrLayout,
  type DmaQueueBundle,
  KBIN_DMA_RING_TYPE_CUSTOM_OP,
  ncBlock,
  type SiliconSpec,
  ucodeCoreAddr,
  UcodeCoreCommand,
  UcodeCoreState,
} from "../silicon_spec.ts";
export {
  collectCustomOpQueues,
  dmaIsCustomOpDmaV2,
  encodeQueueBundleTable,
  isCustomOpQueue,
  QUEUE_BUNDLE_TUPLE_BYTES,
} from "../tdrv/dma_queue_bundle.ts";
export { decodeInferErrorSubtype, type ErrorTables, isaErrorTextFrom } from "../notification/error_subtype.ts";
export { AL_HAL_TPB_MAX_ENG, TpbArchType, TpbEngType } from "../state.ts";
