/**
 * The device → host error encodings both sides of the notification queue agree on: the TPB_ERROR subtype-mask bits,
 * the HW_ERROR causes (hardware-block errors outside the TPB engines), and the DMA engine state register the host's
 * `check_dma_queue_on_aborted_eng` reads.
 *
 * Seed: lifecycle-error-model §4.5 (a 16-byte TPB_ERROR record: `error_id` 0x09 NONFATAL / 0x0a FATAL in the low
 * byte, the subtype mask in the next 16 bits), §4.3 (the classifier's inputs: HBM UE repairable or not, DMA engine
 * state == 3 ⇒ aborted, out-of-bounds, collectives, network proxy, NQ overflow; the NC-UE record carries metadata),
 * §5.4 (the three collectives "Suspected hang" diagnostics), §5.5 (1003/1004 are the soft, FP/recoverable band).
 * The seeds fix the record position of `error_id` and the mask; the bit values, the HW_ERROR causes and the register
 * offset are ours and documented in `docs/faults.md`.
 *
 * @module
 */
import { ncBlock, type SiliconSpec } from "../silicon_spec.ts";

/**
 * Subtype-mask bits of a TPB_ERROR record (ours; the seed fixes only the field position). Q7 outcomes use the low
 * nibble, sequencer-detected faults the bits above, and the two soft (non-fatal, `error_id` 0x09) causes the top.
 */
export const TpbErrorMask = {
  /** A Q7 core trapped (wasm trap, `unreachable`). */
  Q7_TRAP: 0x0001,
  /** An access outside the core's windows (out-of-bounds): classified `NRT_EXEC_OOB` (1006). */
  Q7_OOB: 0x0002,
  /** A Q7 core was aborted, or the cluster failed as a whole. */
  Q7_ABORT: 0x0004,
  /** The opcode table names a function the image does not export. */
  Q7_MISSING_FUNCTION: 0x0008,
  /** An undecodable instruction slot, or a stream outside device memory. */
  BAD_INSTRUCTION: 0x0010,
  /** A DMA_CONFIG / DMA_CONFIG_SIZE / descriptor fault, or a DMA engine abort. */
  DMA: 0x0020,
  /** EXTENDED_INST names an opcode the current opcode table lacks, or the table is unreadable. */
  OPCODE: 0x0040,
  /** The Q7 cores are not running (held in run-stall, boot refused, cluster failed to start). */
  Q7_BOOT: 0x0080,
  /** EVENT_SEMAPHORE with an update mode other than 0x13, or a bad semaphore. */
  EVENT: 0x0100,
  /** LOAD_POOL_ARGUMENT names an unreadable or malformed argument table. */
  ARGUMENT: 0x0200,
  /**
   * Non-fatal: a Q7 core returned from its kernel without reaching `customop_cleanup`, its commit fence (seed:
   * spmd-teardown §4.2, "the precondition for the host completion gate to observe correct data"). The DRAIN join
   * still completes (the core did return), so the execution completes with its result flagged:
   * `NRT_EXEC_COMPLETED_WITH_ERR`. Ours: the seed does not say what the device reports for it.
   */
  Q7_UNCOMMITTED: 0x2000,
  /** Non-fatal: an FP numerical error (NaN / Inf); the execution completes, `NRT_EXEC_COMPLETED_WITH_NUM_ERR`. */
  NUMERICAL: 0x4000,
  /** Non-fatal: any other recoverable error; the execution completes, `NRT_EXEC_COMPLETED_WITH_ERR`. */
  RECOVERABLE: 0x8000,
} as const;

/** Value of a HW_ERROR record (`NotificationKind.HW_ERROR`): which hardware block failed. Ours. */
export const HwErrorCause = {
  /** Uncorrectable HBM ECC error; `mask` bit {@linkcode HBM_UE_REPAIRABLE} says repairable; `aux` = address (low 32). */
  HBM_UE: 1,
  /** Uncorrectable NeuronCore on-chip memory error; `aux` = the metadata word the host prints. */
  NC_UE: 2,
  /** The collectives proxy reports a stuck operation; `mask` = {@linkcode CollectivesHang}, `aux` = op progress. */
  COLLECTIVES: 3,
  /** The network (EFA) proxy failed; `aux` = proxy error code. */
  NETWORK_PROXY: 4,
} as const;
/** One HW_ERROR cause. */
export type HwErrorCause = typeof HwErrorCause[keyof typeof HwErrorCause];

/** `mask` bit of an HBM_UE record: the failing row can be repaired (→ 1205 instead of 1201). */
export const HBM_UE_REPAIRABLE = 0x0001;

/**
 * Where a collectives hang stopped (`mask` of a COLLECTIVES record) — it selects one of the three "Suspected hang"
 * strings (seed: lifecycle-error-model §5.4, .rodata 0x80c388 / 0x80c400 / 0x80c4b0).
 */
export const CollectivesHang = {
  /** No collectives status at all: "Suspected hang in waiting for barrier". */
  BARRIER: 0,
  /** Inside operation `op` of `total`. */
  IN_OPERATION: 1,
  /** Between the end of operation `op` and the start of `op + 1`. */
  BETWEEN_OPERATIONS: 2,
} as const;
/** One collectives-hang variant. */
export type CollectivesHang = typeof CollectivesHang[keyof typeof CollectivesHang];

/** Packs a COLLECTIVES record's `aux`: operation index (low 16 bits) and total operations (high 16 bits). */
export function collectivesProgress(op: number, total: number): number {
  return ((total & 0xffff) * 0x1_0000 + (op & 0xffff)) >>> 0;
}

/** Unpacks {@linkcode collectivesProgress}. */
export function decodeCollectivesProgress(aux: number): { op: number; total: number } {
  return { op: aux & 0xffff, total: (aux >>> 16) & 0xffff };
}

/**
 * Byte offset, inside one DMA engine's register block (`csr.dma + engine * dmaEngineStride`), of the engine state
 * word. Ours: word 3 of queue 0's M2S half, a word the simulated queues leave unused.
 */
export const DMA_ENGINE_STATE_OFFSET = 0x0c;

/** DMA engine state values; the seed pins only ABORTED = 3 (`check_dma_queue_on_aborted_eng`, §4.3). */
export const DmaEngineState = {
  IDLE: 0,
  RUNNING: 1,
  PAUSED: 2,
  ABORTED: 3,
} as const;
/** One DMA engine state. */
export type DmaEngineState = typeof DmaEngineState[keyof typeof DmaEngineState];

/** BAR0 offset of DMA engine `engine`'s state word on NeuronCore `nc`. */
export function dmaEngineStateAddr(spec: SiliconSpec, nc: number, engine: number): number {
  if (!Number.isInteger(engine) || engine < 0 || engine >= spec.dmaEngines) {
    throw new RangeError(`DMA engine ${engine} is outside 0..${spec.dmaEngines - 1}`);
  }
  return ncBlock(spec, nc) + spec.csr.dma + engine * spec.csr.dmaEngineStride + DMA_ENGINE_STATE_OFFSET;
}
