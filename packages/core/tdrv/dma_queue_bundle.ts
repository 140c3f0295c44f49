/**
 * The DMA queue-bundle allocation table (`v2_queue_bundle_alloc_table`) and the custom-op queue predicate that walks
 * it (`dma_is_custom_op_dma_v2`).
 *
 * Seed: runtime-synthesis §3.1 (`dma_is_custom_op_dma_v2(eng, queue)` walks `v2_queue_bundle_alloc_table` as 16-byte
 * tuples `{marker, rel_queue_idx, eng_lo, eng_hi}`; `marker == 16` (CUSTOM_OP) and the engine in range make a
 * custom-op DMA queue), spmd-teardown §2.1 (`ucode_stage_libs_table` scans 16 engines × 16 queues through that
 * predicate and stops at the 8th match), lifecycle-error-model §2.6 (`dma_queue_bundle_instance_lut_init` first in
 * `kbl_model_add`).
 *
 * Ours: each of the four tuple fields is a little-endian u32 (the seed gives the 16-byte size and the field order, not
 * the widths); the rows come from the generation's {@linkcode SiliconSpec.dmaQueueBundles}; the walk stops at the
 * first all-zero row or at the table's end; engines and queues are scanned within the spec's counts, which are 16 and
 * 16 on the three shipped generations.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { type DmaQueueBundle, KBIN_DMA_RING_TYPE_CUSTOM_OP, type SiliconSpec } from "../silicon_spec.ts";
import { NrtStatus } from "../status.ts";

/** Bytes per tuple of the table. */
export const QUEUE_BUNDLE_TUPLE_BYTES = 16;

/** `dma_queue_bundle_instance_lut_init`: the table of a generation's bundles, one 16-byte tuple each. */
export function encodeQueueBundleTable(bundles: readonly DmaQueueBundle[]): Uint8Array {
  const out = new Uint8Array(bundles.length * QUEUE_BUNDLE_TUPLE_BYTES);
  const v = new DataView(out.buffer);
  bundles.forEach((b, i) => {
    const at = i * QUEUE_BUNDLE_TUPLE_BYTES;
    v.setUint32(at, b.marker >>> 0, true);
    v.setUint32(at + 4, b.relQueueIdx >>> 0, true);
    v.setUint32(at + 8, b.engLo >>> 0, true);
    v.setUint32(at + 12, b.engHi >>> 0, true);
  });
  return out;
}

/** `dma_is_custom_op_dma_v2`: is queue `queue` of DMA engine `engine` a custom-op queue of `table`? */
export function dmaIsCustomOpDmaV2(table: Uint8Array, engine: number, queue: number): boolean {
  const v = new DataView(table.buffer, table.byteOffset, table.byteLength);
  for (let at = 0; at + QUEUE_BUNDLE_TUPLE_BYTES <= table.byteLength; at += QUEUE_BUNDLE_TUPLE_BYTES) {
    const marker = v.getUint32(at, true), rel = v.getUint32(at + 4, true);
    const lo = v.getUint32(at + 8, true), hi = v.getUint32(at + 12, true);
    if (marker === 0 && rel === 0 && lo === 0 && hi === 0) break;
    if (marker === KBIN_DMA_RING_TYPE_CUSTOM_OP && queue === rel && engine >= lo && engine <= hi) return true;
  }
  return false;
}

/** The spec's table, encoded once per spec object. */
const TABLES = new WeakMap<SiliconSpec, Uint8Array>();

/** The queue-bundle table of `spec`. */
export function queueBundleTable(spec: SiliconSpec): Uint8Array {
  let t = TABLES.get(spec);
  if (t === undefined) TABLES.set(spec, t = encodeQueueBundleTable(spec.dmaQueueBundles));
  return t;
}

/** Whether queue `queue` of engine `engine` is one of `spec`'s custom-op queues. */
export function isCustomOpQueue(spec: SiliconSpec, engine: number, queue: number): boolean {
  return dmaIsCustomOpDmaV2(queueBundleTable(spec), engine, queue);
}

/**
 * `ucode_stage_libs_table` (A): scans engines × queues in order through {@linkcode dmaIsCustomOpDmaV2} and collects
 * exactly 8 custom-op queues, one per Q7 core (spmd-teardown §2.1: `cmp $0x8 @0x3109b8`).
 *
 * @throws {NrtError} `NRT_RESOURCE` when fewer than 8 queues match.
 */
export function collectCustomOpQueues(spec: SiliconSpec): Array<{ engine: number; queue: number }> {
  const table = queueBundleTable(spec);
  const found: Array<{ engine: number; queue: number }> = [];
  for (let engine = 0; engine < spec.dmaEngines; engine++) {
    for (let queue = 0; queue < spec.dmaQueuesPerEngine; queue++) {
      if (dmaIsCustomOpDmaV2(table, engine, queue)) {
        found.push({ engine, queue });
        if (found.length === 8) return found;
      }
    }
  }
  throw new NrtError(
    NrtStatus.NRT_RESOURCE,
    `Cannot stage GPSIMD libraries: only ${found.length} custom-op DMA queues, 8 needed`,
  );
}
