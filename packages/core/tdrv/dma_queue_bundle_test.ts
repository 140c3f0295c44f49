/**
 * `dma_is_custom_op_dma_v2` walks 16-byte `{marker, rel_queue_idx, eng_lo, eng_hi}` tuples and matches marker 16
 * (seed: runtime-synthesis §3.1); `ucode_stage_libs_table` scans engines × queues and stops at the 8th match (seed:
 * spmd-teardown §2.1). Literals are the seed's, not the code's constants.
 */
import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import type { SiliconSpec } from "../silicon_spec.ts";
import { collectCustomOpQueues, dmaIsCustomOpDmaV2, encodeQueueBundleTable } from "./dma_queue_bundle.ts";

const row = (marker: number, rel: number, lo: number, hi: number) => ({
  marker,
  relQueueIdx: rel,
  engLo: lo,
  engHi: hi,
});

/** Just the fields the scan reads. */
const spec = (bundles: ReturnType<typeof row>[]) =>
  ({ dmaEngines: 16, dmaQueuesPerEngine: 16, dmaQueueBundles: bundles }) as unknown as SiliconSpec;

describe("v2_queue_bundle_alloc_table", () => {
  test("one tuple is 16 bytes: marker, rel_queue_idx, eng_lo, eng_hi", () => {
    const t = encodeQueueBundleTable([row(16, 15, 0, 7), row(3, 2, 8, 9)]);
    expect(t.byteLength).toBe(32);
    const v = new DataView(t.buffer);
    expect([0, 4, 8, 12].map((o) => v.getUint32(o, true))).toEqual([16, 15, 0, 7]);
    expect([16, 20, 24, 28].map((o) => v.getUint32(o, true))).toEqual([3, 2, 8, 9]);
  });

  test("dma_is_custom_op_dma_v2 matches marker 16 only, the queue exactly and the engine in [eng_lo, eng_hi]", () => {
    const t = encodeQueueBundleTable([row(3, 15, 0, 15), row(16, 15, 2, 5)]);
    expect(dmaIsCustomOpDmaV2(t, 2, 15)).toBe(true);
    expect(dmaIsCustomOpDmaV2(t, 5, 15)).toBe(true);
    expect(dmaIsCustomOpDmaV2(t, 1, 15)).toBe(false); // only the marker-3 row covers engine 1
    expect(dmaIsCustomOpDmaV2(t, 6, 15)).toBe(false);
    expect(dmaIsCustomOpDmaV2(t, 3, 14)).toBe(false);
  });

  test("the walk visits every tuple and stops at an all-zero one", () => {
    const t = encodeQueueBundleTable([row(16, 1, 0, 0), row(16, 2, 1, 1), row(0, 0, 0, 0), row(16, 3, 2, 2)]);
    expect(dmaIsCustomOpDmaV2(t, 0, 1)).toBe(true);
    expect(dmaIsCustomOpDmaV2(t, 1, 2)).toBe(true);
    expect(dmaIsCustomOpDmaV2(t, 2, 3)).toBe(false);
  });

  test("the scan collects exactly 8 queues in engine-then-queue order across several marker-16 tuples", () => {
    const q = collectCustomOpQueues(spec([row(7, 15, 0, 15), row(16, 9, 6, 9), row(16, 4, 12, 15), row(16, 15, 0, 1)]));
    expect(q).toEqual([
      { engine: 0, queue: 15 },
      { engine: 1, queue: 15 },
      { engine: 6, queue: 9 },
      { engine: 7, queue: 9 },
      { engine: 8, queue: 9 },
      { engine: 9, queue: 9 },
      { engine: 12, queue: 4 },
      { engine: 13, queue: 4 },
    ]);
  });

  test("fewer than 8 custom-op queues is NRT_RESOURCE (4)", () => {
    let e: unknown;
    try {
      collectCustomOpQueues(spec([row(16, 15, 0, 6), row(15, 15, 7, 7)]));
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(4);
    expect((e as Error).message).toContain("only 7 custom-op DMA queues, 8 needed");
  });
});
