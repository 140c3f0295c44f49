/**
 * The data plan of a collective: per phase and per rank, the DMA descriptors that rank's NeuronCore runs. All of it
 * is ours (`docs/collectives.md`): the seeds describe the host API and statuses of collectives, not their data path;
 * spmd-teardown §4.4 only says that a reduction across cores is data-movement-driven (the compute-DMA path).
 *
 * - all-gather: one phase; rank r copies every rank's input into its output, in rank order.
 * - reduce-scatter: one phase; rank r owns block r: it copies rank 0's block r into its output and folds ranks 1..R-1
 *   into it with compute-DMA descriptors, in rank order.
 * - all-reduce: two phases with a barrier between; phase 1 is a reduce-scatter of element chunks into a scratch
 *   buffer per rank, phase 2 an all-gather of the scratch chunks into every output. The input is read only in phase
 *   1 and the output written only in phase 2, so an in-place all-reduce (input = output) is correct.
 *
 * Every descriptor is then cut into 8 element-aligned shares, one per custom-op DMA queue of the NeuronCore (the 8
 * Q7 cores' queues, runtime-synthesis §3.1): the queues touch disjoint bytes, so the fold order of each byte is the
 * rank order whatever order the queues run in.
 *
 * @module
 */
import { DmaCceDtype, dmaCceFlags, DmaCceOp, type DmaDescriptor } from "../isa.ts";

/** The collective operations (ours: the `op` of `nrta_cc_prepare`). */
export const NrtaCcOp = {
  /** Every rank ends with the reduction of every rank's input. */
  ALL_REDUCE: 0,
  /** Every rank ends with every rank's input, concatenated in rank order. */
  ALL_GATHER: 1,
  /** Rank r ends with block r of the reduction. */
  REDUCE_SCATTER: 2,
} as const;
/** One collective operation. */
export type NrtaCcOp = typeof NrtaCcOp[keyof typeof NrtaCcOp];

/** The reductions (ours: the `redop` of `nrta_cc_prepare`). */
export const NrtaCcRedOp = {
  /** Sum. */
  SUM: 0,
  /** Maximum (a NaN anywhere gives NaN). */
  MAX: 1,
} as const;
/** One reduction. */
export type NrtaCcRedOp = typeof NrtaCcRedOp[keyof typeof NrtaCcRedOp];

/** Element types (ours: the `dtype` of `nrta_cc_prepare`). */
export const NrtaCcDtype = {
  /** IEEE float32. */
  FLOAT32: 0,
  /** bfloat16 (each fold computed in float32, rounded to nearest-even). */
  BFLOAT16: 1,
} as const;
/** One element type. */
export type NrtaCcDtype = typeof NrtaCcDtype[keyof typeof NrtaCcDtype];

/** Bytes per element. */
export function ccElementBytes(dtype: NrtaCcDtype): number {
  return dtype === NrtaCcDtype.BFLOAT16 ? 2 : 4;
}

/** Custom-op DMA queues per NeuronCore a rank spreads its descriptors over. */
export const CC_QUEUES = 8;

/** Device addresses of one rank. */
export interface RankAddresses {
  /** Input. */
  readonly input: number;
  /** Output. */
  readonly output: number;
  /** Scratch (all-reduce only: the rank's reduced chunk). */
  readonly scratch?: number;
}

/** Input and output bytes per rank, and the all-reduce scratch, for `count` elements. */
export function ccSizes(
  op: NrtaCcOp,
  dtype: NrtaCcDtype,
  count: number,
  ranks: number,
): { input: number; output: number; scratch: number } {
  const e = ccElementBytes(dtype);
  switch (op) {
    case NrtaCcOp.ALL_GATHER:
      return { input: count * e, output: ranks * count * e, scratch: 0 };
    case NrtaCcOp.REDUCE_SCATTER:
      return { input: ranks * count * e, output: count * e, scratch: 0 };
    default:
      return { input: count * e, output: count * e, scratch: Math.ceil(count / ranks) * e };
  }
}

/** First element of all-reduce chunk `k` of `ranks` (chunk k is `[chunkStart(k), chunkStart(k + 1))`). */
export function chunkStart(k: number, count: number, ranks: number): number {
  return Math.floor((k * count) / ranks);
}

/**
 * The descriptors of a collective: `[phase][rank]` → the rank's descriptors in order, before the split over queues.
 */
export function ccPlan(
  op: NrtaCcOp,
  red: NrtaCcRedOp,
  dtype: NrtaCcDtype,
  count: number,
  ranks: readonly RankAddresses[],
): DmaDescriptor[][][] {
  const e = ccElementBytes(dtype), R = ranks.length;
  const fold = dmaCceFlags(
    red === NrtaCcRedOp.MAX ? DmaCceOp.MAX : DmaCceOp.ADD,
    dtype === NrtaCcDtype.BFLOAT16 ? DmaCceDtype.BFLOAT16 : DmaCceDtype.FLOAT32,
  );
  const d = (
    src: number,
    dst: number,
    bytes: number,
    flags = 0,
  ): DmaDescriptor[] => (bytes === 0 ? [] : [flags === 0 ? { src, dst, bytes } : { src, dst, bytes, flags }]);
  /** Rank r folds block `off..off+bytes` of every input into `dst`, in rank order. */
  const reduceInto = (off: number, bytes: number, dst: number): DmaDescriptor[] =>
    ranks.flatMap((k, i) => d(k.input + off, dst, bytes, i === 0 ? 0 : fold));
  switch (op) {
    case NrtaCcOp.ALL_GATHER:
      return [ranks.map((r) => ranks.flatMap((k, i) => d(k.input, r.output + i * count * e, count * e)))];
    case NrtaCcOp.REDUCE_SCATTER:
      return [ranks.map((r, i) => reduceInto(i * count * e, count * e, r.output))];
    default: {
      const lo = (k: number) => chunkStart(k, count, R) * e, len = (k: number) => lo(k + 1) - lo(k);
      return [
        ranks.map((r, i) => reduceInto(lo(i), len(i), r.scratch!)),
        ranks.map((r) => ranks.flatMap((k, i) => d(k.scratch!, r.output + lo(i), len(i)))),
      ];
    }
  }
}

/** Cuts a rank's descriptors into `queues` element-aligned shares: `[queue]` → descriptors in order. */
export function splitOverQueues(
  descs: readonly DmaDescriptor[],
  elementBytes: number,
  queues = CC_QUEUES,
): DmaDescriptor[][] {
  const out: DmaDescriptor[][] = Array.from({ length: queues }, () => []);
  for (const desc of descs) {
    const elements = desc.bytes / elementBytes;
    const share = Math.ceil(elements / queues);
    for (let q = 0; q < queues; q++) {
      const a = Math.min(elements, q * share) * elementBytes, b = Math.min(elements, (q + 1) * share) * elementBytes;
      if (b > a) out[q].push({ ...desc, src: desc.src + a, dst: desc.dst + a, bytes: b - a });
    }
  }
  return out;
}
