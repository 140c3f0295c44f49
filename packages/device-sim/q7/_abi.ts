/**
 * Constants shared by the Q7 cluster (main thread) and its Workers: the Q7 local address map, the tensor
 * descriptor layout, the mailbox words of the control area, the per-core status records and the stdio ring.
 * The kernel-facing half is documented in docs/kernel-abi.md; keep the two in step.
 *
 * @module
 */
import { KernelDtype, MAX_TENSOR_RANK, TENSOR_DESC_BYTES, TensorDescField } from "@nrt/core/isa";

/** Bytes in one wasm page. */
export const PAGE_BYTES = 0x10000;

// ---- Q7 local address map -----------------------------------------------------------------------------------

/** The firmware DRAM image is copied here at boot; the image region is [0, 0x80000). */
export const IMAGE_BASE = 0x000000;
/** Size of the image region. */
export const IMAGE_BYTES = 0x080000;
/** The local DRAM window [0x80000, 0x90000) (seed: spmd-teardown §3 — the dram_addr_to_soc_addr aperture). */
export const LOCAL_DRAM_BASE = 0x080000;
/** Size of the local DRAM window. */
export const LOCAL_DRAM_BYTES = 0x010000;
/** SoC slice index of core 0; core c owns slice 9 + 2c (seed: spmd-teardown §3, `index = 9 + 2*cpu`). */
export const SOC_SLICE_FIRST_INDEX = 9;
/** The control area [0x180000, 0x200000), reserved to the simulator. */
export const CONTROL_BASE = 0x180000;
/** The SBUF window starts here and runs to the end of the memory. */
export const SBUF_BASE = 0x200000;

/** Number of Q7 cores per NeuronCore (seed: spmd-teardown §1 — get_cpu_count() is the constant 8). */
export const Q7_CORES = 8;

/** Q7 address of core `cpu`'s SoC slice for local DRAM address `addr` (seed: spmd-teardown §3). */
export function socAddress(cpu: number, addr: number): number {
  return ((SOC_SLICE_FIRST_INDEX + 2 * cpu) << 16) + (addr & 0xffff);
}

// ---- Tensor descriptors ---------------------------------------------------------------------------------------

/** Bytes per tensor descriptor (one definition: `@nrt/core/isa`). */
export const DESC_BYTES = TENSOR_DESC_BYTES;
/** Descriptor field offsets (all u32, little-endian), as the Worker script names them. */
export const DESC = {
  addr: TensorDescField.ADDR,
  bytes: TensorDescField.BYTES,
  dtype: TensorDescField.DTYPE,
  rank: TensorDescField.RANK,
  dims: TensorDescField.DIMS,
} as const;
/** Maximum tensor rank a descriptor holds. */
export const MAX_RANK = MAX_TENSOR_RANK;
/** Descriptor dtype codes. */
export const Dtype = KernelDtype;
/** One dtype code. */
export type Dtype = KernelDtype;

// ---- Control area: the mailbox ----------------------------------------------------------------------------

/** The mailbox: Int32 words at CONTROL_BASE, indexed by the MB_* constants. */
export const MAILBOX = CONTROL_BASE;
/** Command for the cores whose doorbell rang: one of the CMD_* values. */
export const MB_CMD = 0;
/** Library slot of the op (0 = the firmware). */
export const MB_LIB = 1;
/** Function id of the op (the host's id for a (slot, name) pair; the name is at FN_NAME). */
export const MB_FN = 2;
/** total_cpus of the op: 1 or 8. */
export const MB_TOTAL_CPUS = 3;
/** Sequence number of the op. */
export const MB_SEQ = 4;
/** Number of participating cores that have reported this op. */
export const MB_DONE = 5;
/** Sequence number of the last op all participants reported; the host waits on this word. */
export const MB_COMPLETE = 6;
/** Non-zero once the cluster is being terminated: every guarded loop traps (see _loop_guard.ts). */
export const MB_KILL = 7;
/** Entries ever written to the stdio ring (advanced atomically by the cores). */
export const MB_STDIO_WRITE = 8;
/** Entries the host has consumed (published by the host only). */
export const MB_STDIO_READ = 9;
/** Byte length of the function name at FN_NAME. */
export const MB_FN_NAME_LEN = 10;
/** A scratch word the cores' commit fences read-modify-write. */
export const MB_FENCE = 11;
/**
 * Threads that may still touch the memory (ours): a cluster counts in its Workers and the local-op watchdog before it
 * hands them the memory, and each counts itself out as it leaves it for good (a Worker at CMD_EXIT, the watchdog when
 * it forgets the cluster). Once the cluster is terminated and the count is 0, the memory may boot the next cluster of
 * its NeuronCore (`Q7ClusterOptions.memorySlot`).
 */
export const MB_USERS = 12;
/**
 * The doorbell words: Worker 0 (the one running core 0) parks on MB_DOORBELL, the other Workers on MB_DOORBELL + 1.
 * A one-core op rings Worker 0's word; an 8-core op rings both, waking the other Workers with one notify (one futex
 * wake instead of one per Worker: on a 2-CPU machine each separate wake preempted the dispatcher). Ours.
 */
export const MB_DOORBELL = 16;

/** The doorbell word Worker `worker` of the cluster parks on. */
export function doorbellWord(worker: number): number {
  return worker === 0 ? MB_DOORBELL : MB_DOORBELL + 1;
}
/**
 * First of 8 per-Worker counters of messages the cluster posted to the Worker (incremented before each
 * `postMessage`). A Worker whose counter is ahead of the messages it handled returns to its event loop instead of
 * parking, so a posted message is never stranded behind `Atomics.wait`.
 */
export const MB_POSTED = 24;
/** Q7 address of the kill flag the loop guard polls. */
export const KILL_FLAG_ADDR = MAILBOX + 4 * MB_KILL;
/** The op's function name, UTF-8. */
export const FN_NAME = MAILBOX + 0x100;
/** Maximum bytes of a function name. */
export const FN_NAME_MAX = 0x100;

/** Run the op described in the mailbox. */
export const CMD_RUN = 1;
/** Return to the event loop: a message (library to instantiate) is waiting. */
export const CMD_YIELD = 2;
/** Leave the park loop and close the Worker. */
export const CMD_EXIT = 3;
/**
 * An op posted for the calling thread's own cores (`Q7ClusterOptions.localOpBytes`, ours): the mailbox holds it, but
 * no Worker runs it. Before this value a Worker that woke for another reason (a doorbell it had not consumed yet, from
 * a message it took in its event loop) found CMD_RUN and the new sequence number, and ran the op a second time beside
 * the agent; its late count in MB_DONE then kept the next op from ever joining.
 */
export const CMD_LOCAL = 4;

// ---- Control area: per-core status records ----------------------------------------------------------------

/** Per-core status records: core c's is at CORE_STATUS + c * CORE_STATUS_BYTES. */
export const CORE_STATUS = CONTROL_BASE + 0x1000;
/** Bytes per status record. */
export const CORE_STATUS_BYTES = 0x200;
/**
 * Record field offsets: status code i32, committed i32, elapsed ns f64, message length i32, start f64 (ms of the
 * shared clock `performance.timeOrigin + performance.now()`, for the timeline), message bytes.
 */
export const CS = { status: 0, committed: 4, elapsedNs: 8, messageLength: 16, startMs: 24, message: 32 } as const;
/** Maximum message bytes in a status record. */
export const CS_MESSAGE_MAX = CORE_STATUS_BYTES - CS.message;

/** Status codes in a record. */
export const Status = { none: 0, ok: 1, trap: 2, oob: 3, abort: 4, missingFunction: 5 } as const;
/** The names DispatchResult reports, by status code. */
export const STATUS_NAMES = ["none", "ok", "trap", "oob", "abort", "missing-function"] as const;

// ---- Control area: the argument block ---------------------------------------------------------------------

/** Argument block header: input count, output count, int count (i32 each). */
export const ARGS = CONTROL_BASE + 0x2000;
/** Input descriptors. */
export const ARG_INPUTS = ARGS + 0x100;
/** Output descriptors. */
export const ARG_OUTPUTS = ARG_INPUTS + 0x400;
/** Scalar arguments, i64 each. */
export const ARG_INTS = ARG_OUTPUTS + 0x400;
/** Maximum inputs (and, separately, outputs) per op. */
export const MAX_TENSORS = 0x400 / DESC_BYTES;
/** Maximum scalar arguments per op. */
export const MAX_INTS = 64;

// ---- Control area: the stdio staging ring -----------------------------------------------------------------

/** The stdio ring: STDIO_ENTRIES entries of 256 bytes (seed: spmd-teardown §5.3 — the device entry is 0x100). */
export const STDIO_RING = CONTROL_BASE + 0x40000;
/** Bytes per ring entry. */
export const STDIO_ENTRY_BYTES = 0x100;
/** Entries in the ring (a power of two). */
export const STDIO_ENTRIES = 0x40000 / STDIO_ENTRY_BYTES;
/** Entry header: u32 sequence (entry number + 1; 0 = never written), u8 stream, u8 cpu, u16 length, 8 reserved. */
export const STDIO_HEADER = { sequence: 0, stream: 4, cpu: 5, length: 6 } as const;
/** Header bytes; the text follows (seed: spmd-teardown §5.5 — +0x10 skips the 16-B entry header). */
export const STDIO_HEADER_BYTES = 0x10;
/** Text bytes per entry; longer writes take several entries. */
export const STDIO_TEXT_MAX = STDIO_ENTRY_BYTES - STDIO_HEADER_BYTES;

// ---- What the Worker script needs ------------------------------------------------------------------------

/**
 * The constants q7_worker.js uses, sent in its "init" message. The Worker script is plain JavaScript without
 * imports because `deno test` type-checks every TypeScript module a Worker loads, once per Worker (measured:
 * 8 Workers took 5.6 s instead of 0.16 s); receiving the layout keeps this file the single source of truth.
 */
export const WORKER_LAYOUT = {
  ARG_INPUTS,
  ARG_INTS,
  ARG_OUTPUTS,
  ARGS,
  CMD_EXIT,
  CMD_RUN,
  CMD_YIELD,
  CORE_STATUS,
  CORE_STATUS_BYTES,
  CS,
  CS_MESSAGE_MAX,
  DESC_BYTES,
  FN_NAME,
  LOCAL_DRAM_BASE,
  MAILBOX,
  MB_CMD,
  MB_COMPLETE,
  MB_DONE,
  MB_DOORBELL,
  MB_FENCE,
  MB_FN,
  MB_FN_NAME_LEN,
  MB_KILL,
  MB_LIB,
  MB_POSTED,
  MB_SEQ,
  MB_STDIO_WRITE,
  MB_TOTAL_CPUS,
  MB_USERS,
  Q7_CORES,
  SOC_SLICE_FIRST_INDEX,
  Status,
  STDIO_ENTRIES,
  STDIO_ENTRY_BYTES,
  STDIO_HEADER,
  STDIO_HEADER_BYTES,
  STDIO_RING,
  STDIO_TEXT_MAX,
} as const;

/** The type of {@linkcode WORKER_LAYOUT}. */
export type WorkerLayout = typeof WORKER_LAYOUT;
