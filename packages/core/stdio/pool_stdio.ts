/**
 * `pool_stdio`: the Q7 printf back-channel of one NeuronCore, host side — the 0x440-byte HBM block the Q7 file-IO
 * table points at, its stdout and stderr rings (wired in slot [0] of the 8×2 arrays), and the per-progress-step
 * drain with its wraparound-aware copy-out and the read index published back to the device.
 *
 * Seed: spmd-teardown §5 byte for byte —
 * §5.1 `pool_stdio_block_t` (`stdout_queues[8]`, `stderr_queues[8]`, `hbm_space_dmem`) and `pool_stdio_queue_t`
 * (`q7_idx`, `queue_size_entries`, `host_queue_dmem`, `read_idx_ptr_write_only`, `write_idx_ptr`, `read_idx_local`);
 * §5.2 `pool_stdio_block_init` (`dmem_alloc_aligned(0x440, POOL_STDIO, 0x800)`, zeroed; stdout queue at base 0x400
 * with `pool_stdout_queue_size_bytes / 0x100` entries, stderr at 0x420 with `0x400 / 0x100 = 4`; the 0x280-byte info
 * table copied in; `aws_hal_q7_swap_file_io_table` pointed at the block);
 * §5.3 `pool_stdio_queue_init` (power-of-two entries; `entries * 0x100 + 4` bytes capped at 0x40000; the on-device
 * descriptor head u16 MAGIC 0x201 @+0, u8 0 @+2, u32 capacity @+0xc, u64 data PA @+0x10, head / write addresses
 * @+0x18 / +0x20);
 * §5.4 `pool_stdio_queue_available_count` (pending = write − read_idx_local, clamped to the capacity; an overrun is
 * logged, not fatal; the host keeps only the last `cap` entries);
 * §5.5 `pool_stdio_queue_consume_all_entries` (copy-out in one or two segments, each 0xf0-byte host record taken at
 * `0x100 * slot + 0x10` — the +0x10 skips the 16-byte entry header; `read_idx_local += n`, published as a u64 through
 * the host-write-only pointer so the device reuses slots; `nlog(stream_tag)` with 3 = stdout, 1 = stderr);
 * §5.6 the 8×2 block drain, run on every `exec_request_progress_one_step`;
 * §6.7 `pool_stdio_block_destroy` detaches the file-IO table before the frees.
 *
 * Ours (the seed leaves them open): the 0x280-byte info table is the 16 descriptors of 0x28 bytes (stdout [0..7],
 * then stderr [0..7]); the read indices live in the block at +0x400 / +0x420, the write index is the u32 in the 4
 * bytes after the ring's entries; descriptor addresses are device physical addresses; a clamped drain skips the
 * lost entries first so the `cap` it keeps are the newest, in order.
 *
 * @module
 */
import { DmaMemUsageType, type Dmem, type DmemLedger } from "../dmem/dmem.ts";
import { getU32 } from "../isa.ts";
import type { HalTarget, Khal } from "../khal.ts";
import type { Logger } from "../log.ts";

/** Bytes of the stdio HBM block (`dmem_alloc_aligned(0x440, …)`). */
export const POOL_STDIO_BLOCK_BYTES = 0x440;
/** Alignment of the block (0x800). */
export const POOL_STDIO_BLOCK_ALIGN = 0x800;
/** Slots of each of the two queue arrays: one per Q7 pool core (only [0] is wired). */
export const POOL_STDIO_SLOTS = 8;
/** Device ring entry size (`pool_stdio_get_entry_size` is `mov $0x100,%eax; ret`). */
export const POOL_STDIO_ENTRY_BYTES = 0x100;
/** The device entry header the host skips (`+0x10`). */
export const POOL_STDIO_ENTRY_HEADER_BYTES = 0x10;
/** Host record size: one device entry without its header. */
export const POOL_STDIO_RECORD_BYTES = 0xf0;
/** Magic of an on-device queue descriptor. */
export const POOL_STDIO_MAGIC = 0x201;
/** Bytes per on-device queue descriptor (ours: 16 of them fill the 0x280-byte info table). */
export const POOL_STDIO_DESCRIPTOR_BYTES = 0x28;
/** The info table copied into the block at offset 0. */
export const POOL_STDIO_INFO_TABLE_BYTES = 0x280;
/** Block offset of the stdout queue's host-write-only read index (the `0x400` base of its `queue_init`). */
export const POOL_STDIO_STDOUT_BASE = 0x400;
/** Block offset of the stderr queue's host-write-only read index (the `0x420` base). */
export const POOL_STDIO_STDERR_BASE = 0x420;
/** The stderr ring's fixed size in bytes: `0x400 / 0x100 = 4` entries. */
export const POOL_STDIO_STDERR_QUEUE_BYTES = 0x400;
/** Cap on one ring allocation. */
export const POOL_STDIO_MAX_QUEUE_ALLOC = 0x40000;
/** Alignment of a ring allocation (`align 0xe`, read as 2^0xe). */
export const POOL_STDIO_QUEUE_ALIGN = 1 << 0xe;

/** The `nlog` stream tags of the drain (seed §5.5: `esi` = 3 for stdout, 1 for stderr). */
export const PoolStdioStreamTag = { STDOUT: 3, STDERR: 1 } as const;
/** One stream tag. */
export type PoolStdioStreamTag = typeof PoolStdioStreamTag[keyof typeof PoolStdioStreamTag];

/** On-device descriptor field offsets (seed §5.3). */
export const PoolStdioDescriptor = {
  MAGIC: 0x00,
  ZERO: 0x02,
  CAPACITY: 0x0c,
  DATA_PA: 0x10,
  READ_IDX_PA: 0x18,
  WRITE_IDX_PA: 0x20,
} as const;

/** `pool_stdio_queue_t`: one ring as the host tracks it. */
export interface PoolStdioQueue {
  /** `+0x08 initialized`. */
  readonly initialized: boolean;
  /** `+0x0c q7_idx`: the pool core the ring belongs to (0: this build wires slot [0] only). */
  readonly q7Idx: number;
  /** `+0x10 queue_size_entries`: capacity in 256-byte entries (a power of two). */
  readonly queueSizeEntries: number;
  /** `+0x18 host_queue_dmem`: the ring storage (`entries * 0x100 + 4` bytes; the last 4 hold the write index). */
  readonly hostQueueDmem: Dmem;
  /** `+0x20 read_idx_ptr_write_only`: block offset of the u64 read index the host publishes. */
  readonly readIdxOffset: number;
  /** `+0x28 write_idx_ptr`: offset in the ring storage of the u32 write index the device advances. */
  readonly writeIdxOffset: number;
  /** `+0x30 read_idx_local`: entries consumed so far (monotonic). */
  readIdxLocal: number;
  /** `nlog` stream tag of the ring. */
  readonly streamTag: PoolStdioStreamTag;
}

/** `pool_stdio_block_t` of one NeuronCore. */
export interface PoolStdioBlock {
  /** `name[256]`. */
  readonly name: string;
  /** `+0x100 initialized`. */
  initialized: boolean;
  /** The NeuronCore (`pcore`). */
  readonly nc: number;
  /** `stdout_queues[8]` (slot [0] wired when stdout is on). */
  readonly stdoutQueues: Array<PoolStdioQueue | undefined>;
  /** `stderr_queues[8]` (slot [0] wired). */
  readonly stderrQueues: Array<PoolStdioQueue | undefined>;
  /** `hbm_space_dmem`: the 0x440-byte block. */
  readonly hbmSpaceDmem: Dmem;
  /** Entries lost to overruns so far (logged, never fatal). */
  overruns: number;
}

/** What the stdio functions need. */
export interface PoolStdioServices {
  /** HAL (for `q7SwapFileIoTable`). */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Device-memory ledger. */
  readonly ledger: DmemLedger;
  /** Where drained text and overruns go. */
  readonly log: Logger;
}

/** What a drain needs: the portal and the logger. */
export type PoolStdioDrainServices = Pick<PoolStdioServices, "target" | "log">;

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

function setU64(v: DataView, at: number, x: number): void {
  v.setUint32(at, x >>> 0, true);
  v.setUint32(at + 4, Math.floor(x / 0x1_0000_0000) >>> 0, true);
}

/**
 * `pool_stdio_block_init`: allocates and zeroes the block, wires the stdout ring (`stdoutQueueBytes / 0x100`
 * entries; 0 = off) and the 4-entry stderr ring in slot [0], copies the info table in and points the Q7 file-IO table
 * at the block. On failure everything allocated is freed again.
 *
 * @param s Services.
 * @param nc The NeuronCore.
 * @param stdoutQueueBytes `NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES`: 0 or a power of two ≥ 256.
 * @returns The initialised block.
 * @throws {RangeError} If the stdout size is not 0 or a power-of-two multiple of 256 bytes.
 */
export async function poolStdioBlockInit(
  s: PoolStdioServices,
  nc: number,
  stdoutQueueBytes: number,
): Promise<PoolStdioBlock> {
  const entriesStdout = Math.floor(stdoutQueueBytes / POOL_STDIO_ENTRY_BYTES);
  if (stdoutQueueBytes !== 0 && (!isPowerOfTwo(entriesStdout) || stdoutQueueBytes % POOL_STDIO_ENTRY_BYTES !== 0)) {
    // seed §5.3: `lea -1; test; jne` → the queue is refused unless its entry count is a power of two.
    throw new RangeError(
      `Cannot initialize pool stdio: the stdout queue of ${stdoutQueueBytes} bytes is not a power-of-two number of 256-byte entries`,
    );
  }
  const device = s.target.device;
  const block = await s.ledger.alloc(
    device,
    nc,
    POOL_STDIO_BLOCK_BYTES,
    DmaMemUsageType.POOL_STDIO,
    "hbm",
    POOL_STDIO_BLOCK_ALIGN,
  );
  const sb: PoolStdioBlock = {
    name: `nd${device}_nc${nc}_pool_stdio`,
    initialized: false,
    nc,
    stdoutQueues: new Array(POOL_STDIO_SLOTS).fill(undefined),
    stderrQueues: new Array(POOL_STDIO_SLOTS).fill(undefined),
    hbmSpaceDmem: block,
    overruns: 0,
  };
  try {
    const image = new Uint8Array(POOL_STDIO_BLOCK_BYTES); // dmem_memset(0, 0x440) + the info table below
    const info = new DataView(image.buffer);
    if (entriesStdout > 0) {
      sb.stdoutQueues[0] = await poolStdioQueueInit(
        s,
        sb,
        info,
        0,
        entriesStdout,
        POOL_STDIO_STDOUT_BASE,
        PoolStdioStreamTag.STDOUT,
      );
    }
    const entriesStderr = POOL_STDIO_STDERR_QUEUE_BYTES / POOL_STDIO_ENTRY_BYTES;
    sb.stderrQueues[0] = await poolStdioQueueInit(
      s,
      sb,
      info,
      POOL_STDIO_SLOTS,
      entriesStderr,
      POOL_STDIO_STDERR_BASE,
      PoolStdioStreamTag.STDERR,
    );
    await s.target.portal.memWrite(block.memory, 0, image); // dmem_buf_copyin of the info table (and the zeroes)
    await s.khal.q7SwapFileIoTable(s.target, nc, block.memory.pa);
    sb.initialized = true;
    return sb;
  } catch (e) {
    await poolStdioBlockDestroy(s, sb).catch(() => {});
    throw e;
  }
}

/** `pool_stdio_queue_init.constprop.0`: allocates one ring and fills its descriptor `index` of the info table. */
async function poolStdioQueueInit(
  s: PoolStdioServices,
  sb: PoolStdioBlock,
  info: DataView,
  index: number,
  entries: number,
  base: number,
  streamTag: PoolStdioStreamTag,
): Promise<PoolStdioQueue> {
  const bytes = Math.min(entries * POOL_STDIO_ENTRY_BYTES + 4, POOL_STDIO_MAX_QUEUE_ALLOC);
  const ring = await s.ledger.alloc(
    s.target.device,
    sb.nc,
    bytes,
    DmaMemUsageType.POOL_STDIO,
    "hbm",
    POOL_STDIO_QUEUE_ALIGN,
  );
  const q: PoolStdioQueue = {
    initialized: true,
    q7Idx: 0,
    queueSizeEntries: entries,
    hostQueueDmem: ring,
    readIdxOffset: base,
    writeIdxOffset: entries * POOL_STDIO_ENTRY_BYTES,
    readIdxLocal: 0,
    streamTag,
  };
  try {
    await s.target.portal.memWrite(ring.memory, 0, new Uint8Array(bytes)); // zeroed, the write index included
  } catch (e) {
    await s.ledger.free(ring);
    throw e;
  }
  const d = index * POOL_STDIO_DESCRIPTOR_BYTES;
  info.setUint16(d + PoolStdioDescriptor.MAGIC, POOL_STDIO_MAGIC, true);
  info.setUint8(d + PoolStdioDescriptor.ZERO, 0);
  info.setUint32(d + PoolStdioDescriptor.CAPACITY, entries, true);
  setU64(info, d + PoolStdioDescriptor.DATA_PA, ring.memory.pa);
  setU64(info, d + PoolStdioDescriptor.READ_IDX_PA, sb.hbmSpaceDmem.memory.pa + base);
  setU64(info, d + PoolStdioDescriptor.WRITE_IDX_PA, ring.memory.pa + q.writeIdxOffset);
  return q;
}

/**
 * `pool_stdio_block_destroy` (seed: spmd-teardown §6.7, "detach Q7 file-IO table, dmem_free queues + 0x440 block"):
 * points the Q7 file-IO table at nothing (0), so the device stops writing into the rings, then frees every ring and
 * the block. A step that fails does not stop the later ones; the first error is thrown at the end.
 */
export async function poolStdioBlockDestroy(s: PoolStdioServices, sb: PoolStdioBlock): Promise<void> {
  sb.initialized = false;
  let first: unknown;
  try {
    await s.khal.q7SwapFileIoTable(s.target, sb.nc, 0);
  } catch (e) {
    first ??= e;
  }
  for (const list of [sb.stdoutQueues, sb.stderrQueues]) {
    for (let i = 0; i < list.length; i++) {
      const q = list[i];
      if (q === undefined) continue;
      list[i] = undefined;
      try {
        await s.ledger.free(q.hostQueueDmem);
      } catch (e) {
        first ??= e;
      }
    }
  }
  try {
    await s.ledger.free(sb.hbmSpaceDmem);
  } catch (e) {
    first ??= e;
  }
  if (first !== undefined) throw first;
}

/**
 * `pool_stdio_queue_available_count`: entries written since the last drain, clamped to the capacity. An overrun
 * (the Q7 outran the host) is logged, never fatal.
 *
 * @returns `{ write, pending, lost }`: the device write index, the entries to copy out, the entries lost.
 */
export async function poolStdioQueueAvailableCount(
  s: PoolStdioDrainServices,
  q: PoolStdioQueue,
): Promise<{ write: number; pending: number; lost: number }> {
  if (!q.initialized) return { write: q.readIdxLocal, pending: 0, lost: 0 };
  return availableFrom(q, await readWriteIndex(s, q));
}

/** Reads a ring's device write index (the u32 after its entries). */
function readWriteIndex(s: PoolStdioDrainServices, q: PoolStdioQueue): Promise<Uint8Array> {
  return s.target.portal.memRead(q.hostQueueDmem.memory, q.writeIdxOffset, 4);
}

/** Entries pending in `q` given the bytes of its device write index, clamped to the capacity. */
function availableFrom(q: PoolStdioQueue, w: Uint8Array): { write: number; pending: number; lost: number } {
  const write32 = getU32(w, 0);
  // The device cursor is a u32; the local one is monotonic: pending = write − read (mod 2^32).
  const pending = (write32 - q.readIdxLocal) >>> 0;
  const write = q.readIdxLocal + pending;
  const cap = q.queueSizeEntries;
  if (cap >= pending) return { write, pending, lost: 0 };
  return { write, pending: cap, lost: pending - cap };
}

/**
 * `pool_stdio_queue_consume_all_entries`: copies the pending entries out (one segment, or two when the run wraps to
 * the ring base), skipping each 16-byte entry header, advances `read_idx_local`, publishes it through the
 * host-write-only read pointer, and logs each record under its stream tag.
 *
 * @returns The drained texts, oldest first.
 */
export async function poolStdioQueueConsumeAllEntries(
  s: PoolStdioDrainServices,
  sb: PoolStdioBlock,
  q: PoolStdioQueue,
  available?: { write: number; pending: number; lost: number },
): Promise<string[]> {
  const { pending: n, lost, write } = available ?? await poolStdioQueueAvailableCount(s, q);
  if (n === 0) return [];
  const cap = q.queueSizeEntries;
  const stream = q.streamTag === PoolStdioStreamTag.STDOUT ? "stdout" : "stderr";
  if (lost > 0) {
    sb.overruns += lost;
    s.log.warn(
      `[ND ${s.target.device}][NC ${sb.nc}] pool stdio ${stream} queue overflow: ${lost} entries lost, keeping the last ${cap} ` +
        `(${cap * POOL_STDIO_RECORD_BYTES} bytes)`,
      { nc: sb.nc, stream, lost },
    );
    q.readIdxLocal = write - n; // the lost entries were overwritten: the newest `cap` start here
  }
  const start = q.readIdxLocal % cap;
  const headRun = cap - start;
  const ring = q.hostQueueDmem.memory;
  const segments: Array<[number, number]> = headRun >= n ? [[start, n]] : [[start, headRun], [0, n - headRun]];
  const records: Uint8Array[] = [];
  for (const [first, count] of segments) {
    const bytes = await s.target.portal.memRead(ring, first * POOL_STDIO_ENTRY_BYTES, count * POOL_STDIO_ENTRY_BYTES);
    for (let i = 0; i < count; i++) {
      const at = i * POOL_STDIO_ENTRY_BYTES + POOL_STDIO_ENTRY_HEADER_BYTES; // seed §5.5: +0x10 skips the header
      records.push(bytes.subarray(at, at + POOL_STDIO_RECORD_BYTES));
    }
  }
  q.readIdxLocal += n;
  const published = new Uint8Array(8);
  setU64(new DataView(published.buffer), 0, q.readIdxLocal);
  await s.target.portal.memWrite(sb.hbmSpaceDmem.memory, q.readIdxOffset, published);
  const decoder = new TextDecoder();
  const texts = records.map((r) => {
    const nul = r.indexOf(0);
    return decoder.decode(nul < 0 ? r : r.subarray(0, nul));
  });
  for (const text of texts) {
    const line = text.endsWith("\n") ? text.slice(0, -1) : text;
    const fields = { nc: sb.nc, stream, tag: q.streamTag };
    if (q.streamTag === PoolStdioStreamTag.STDOUT) s.log.info(line, fields);
    else s.log.warn(line, fields);
  }
  return texts;
}

/**
 * The block-level drain of `exec_request_progress_one_step`: for each of the 8 slots, the stdout queue (tag 3) then
 * the stderr queue (tag 1), each only when initialised.
 *
 * @returns Everything drained, in drain order.
 */
export async function poolStdioBlockDrain(
  s: PoolStdioDrainServices,
  sb: PoolStdioBlock | undefined,
): Promise<Array<{ tag: PoolStdioStreamTag; text: string }>> {
  const out: Array<{ tag: PoolStdioStreamTag; text: string }> = [];
  if (sb === undefined || !sb.initialized) return out;
  const queues: PoolStdioQueue[] = [];
  for (let i = 0; i < POOL_STDIO_SLOTS; i++) {
    const o = sb.stdoutQueues[i], e = sb.stderrQueues[i];
    if (o !== undefined && o.initialized) queues.push(o);
    if (e !== undefined && e.initialized) queues.push(e);
  }
  // Every write index is read at once (a remote portal pipelines the reads); the queues are then consumed in order.
  // The reads are joined as they are, without a coroutine per queue: this runs at every progress step.
  const reads: Array<Promise<Uint8Array>> = [];
  for (let k = 0; k < queues.length; k++) reads.push(readWriteIndex(s, queues[k]));
  const words = await Promise.all(reads);
  for (let k = 0; k < queues.length; k++) {
    const q = queues[k];
    const available = availableFrom(q, words[k]);
    if (available.pending === 0) continue;
    for (const text of await poolStdioQueueConsumeAllEntries(s, sb, q, available)) {
      out.push({ tag: q.streamTag, text });
    }
  }
  return out;
}
