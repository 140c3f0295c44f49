// Data movement for any dtype (by element size: 1, 2, 4 or 8 bytes): a plain copy (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity when the compiler cannot alias them), the strided copy behind Transpose, Slice, Expand and
// Tile, Concat, Split, Gather and Pad. Each core takes a contiguous share of the output.
import { alignedChunk, customop_cleanup, customop_next_int, customop_total_cpus, get_cpu_id, localScratch, nextInput, nextInt, nextOutput } from "./_abi";
import { W_BYTES, W_IDX, walkAdvance, walkCount, walkInnerLeft, walkOff, walkRead, walkSeek, walkStride } from "./_walk";

/** Copies one element of `size` bytes. */
@inline function copyElement(dst: i32, src: i32, size: i32): void {
  if (size == 4) store<u32>(dst, load<u32>(src));
  else if (size == 8) store<u64>(dst, load<u64>(src));
  else if (size == 2) store<u16>(dst, load<u16>(src));
  else store<u8>(dst, load<u8>(src));
}

/** Copies n elements of `size` bytes from src (stride s elements) to contiguous dst. */
@inline function copyRun(dst: i32, src: i32, s: i32, n: i32, size: i32): void {
  if (s == 1) memory.copy(dst, src, n * size);
  else if (size == 4) for (let i = 0; i < n; i++) store<u32>(dst + (i << 2), load<u32>(src + ((i * s) << 2)));
  else for (let i = 0; i < n; i++) copyElement(dst + i * size, src + i * s * size, size);
}

/** Y = X byte for byte. ints: byte count. Shares are 64-byte aligned. */
export function copy(): void {
  const px = nextInput(), py = nextOutput();
  const bytes = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const chunk = alignedChunk(bytes, total, 64);
    const start = min(bytes, cpu * chunk), end = min(bytes, (cpu + 1) * chunk);
    memory.copy(py + start, px + start, end - start);
  }
  customop_cleanup();
}

/**
 * Y[i0, …, ir-1] = X[offset + Σ i_d · stride_d] with Y contiguous; strides may be negative (Slice with a
 * negative step) or 0 (Expand). ints: element size, rank r (1..8), offset, r dims, r strides (elements).
 */
export function strided_copy(): void {
  const px = nextInput(), py = nextOutput();
  const size = nextInt(), rank = nextInt(), offset = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const w = localScratch();
    walkRead(w, rank, 1);
    const count = walkCount(w, rank);
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    const s = walkStride(w, 0, rank - 1);
    if (pos < end) walkSeek(w, rank, 1, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(w, rank), end - pos);
      copyRun(py + pos * size, px + (offset + walkOff(w, 0)) * size, s, run, size);
      pos += run;
      walkAdvance(w, rank, 1, run);
    }
  }
  customop_cleanup();
}

/**
 * Concatenation of n inputs along an axis: each output row (one per outer index) is input 0's row, then input
 * 1's, and so on. ints: element size, outer, n, then each input's row length in elements. Inputs: the n parts.
 */
export function concat(): void {
  const size = nextInt(), outer = nextInt(), n = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  const table = localScratch() + W_BYTES; // [address, row length] per input
  let rowLen = 0;
  for (let i = 0; i < n; i++) {
    const len = nextInt();
    store<i32>(table + (i << 3), nextInput());
    store<i32>(table + (i << 3), len, 4);
    rowLen += len;
  }
  const py = nextOutput();
  if (cpu < total && py != 0 && rowLen > 0) {
    const count = outer * rowLen;
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    while (pos < end) {
      const o = pos / rowLen;
      let within = pos % rowLen;
      let i = 0;
      while (within >= load<i32>(table + (i << 3), 4)) within -= load<i32>(table + (i++ << 3), 4);
      const len = load<i32>(table + (i << 3), 4);
      const run = min(len - within, end - pos);
      memory.copy(py + pos * size, load<i32>(table + (i << 3)) + (o * len + within) * size, run * size);
      pos += run;
    }
  }
  customop_cleanup();
}

/**
 * The inverse of concat: splits each row of the input into n outputs. ints: element size, outer, n, then each
 * output's row length in elements. Input X; outputs: the n parts.
 */
export function split(): void {
  const px = nextInput();
  const size = nextInt(), outer = nextInt(), n = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  const table = localScratch() + W_BYTES;
  let rowLen = 0;
  for (let i = 0; i < n; i++) {
    const len = nextInt();
    store<i32>(table + (i << 3), nextOutput());
    store<i32>(table + (i << 3), len, 4);
    rowLen += len;
  }
  if (cpu < total && rowLen > 0) {
    const count = outer * rowLen;
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    while (pos < end) {
      const o = pos / rowLen;
      let within = pos % rowLen;
      let i = 0;
      while (within >= load<i32>(table + (i << 3), 4)) within -= load<i32>(table + (i++ << 3), 4);
      const len = load<i32>(table + (i << 3), 4);
      const run = min(len - within, end - pos);
      memory.copy(load<i32>(table + (i << 3)) + (o * len + within) * size, px + pos * size, run * size);
      pos += run;
    }
  }
  customop_cleanup();
}

/**
 * Y[o, q, i] = X[o, idx[q], i] for data X [outer, axis, inner]; a negative index counts from the end and an index
 * out of range traps (the call faults rather than return something wrong). ints: element size, outer, axis,
 * inner, index count, index width (4 or 8 bytes). Inputs X, indices; output Y [outer, count, inner].
 */
export function gather(): void {
  const px = nextInput(), pi = nextInput(), py = nextOutput();
  const size = nextInt(), outer = nextInt(), axis = nextInt(), inner = nextInt();
  const count = nextInt(), width = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const rows = outer * count;
    const per = (rows + total - 1) / total;
    const end = min(rows, (cpu + 1) * per);
    const bytes = inner * size;
    for (let r = min(rows, cpu * per); r < end; r++) {
      const o = r / count, q = r % count;
      let idx = width == 8 ? load<i64>(pi + (q << 3)) : <i64>load<i32>(pi + (q << 2));
      if (idx < 0) idx += axis;
      if (idx < 0 || idx >= <i64>axis) unreachable();
      memory.copy(py + r * bytes, px + (o * axis + <i32>idx) * bytes, bytes);
    }
  }
  customop_cleanup();
}

const PAD_CONSTANT: i32 = 0;
const PAD_EDGE: i32 = 1;
const PAD_REFLECT: i32 = 2;

/** Maps a padded coordinate i (already shifted by the leading pad) into [0, n), or returns -1 for "constant". */
@inline function padIndex(mode: i32, i: i32, n: i32): i32 {
  if (i >= 0 && i < n) return i;
  if (mode == PAD_CONSTANT) return -1;
  if (mode == PAD_EDGE) return i < 0 ? 0 : n - 1;
  if (mode == PAD_REFLECT) {
    if (n == 1) return 0;
    const period = 2 * (n - 1);
    let j = i % period;
    if (j < 0) j += period;
    return j < n ? j : period - j;
  }
  // wrap
  const j = i % n;
  return j < 0 ? j + n : j;
}

/**
 * Pad with mode 0 constant, 1 edge, 2 reflect or 3 wrap. ints: element size, mode, rank r (1..8), r output dims,
 * r input dims, r leading pads (negative crops), the constant's raw little-endian bits. Input X; output Y.
 */
export function pad(): void {
  const px = nextInput(), py = nextOutput();
  const size = nextInt(), mode = nextInt(), rank = nextInt();
  const w = localScratch();
  const inDims = w + W_BYTES, lead = inDims + 32;
  walkRead(w, rank, 0);
  for (let d = 0; d < rank; d++) store<i32>(inDims + (d << 2), nextInt());
  for (let d = 0; d < rank; d++) store<i32>(lead + (d << 2), nextInt());
  const value = <u64>customop_next_int();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const count = walkCount(w, rank);
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    const last = rank - 1;
    const nLast = load<i32>(inDims + (last << 2)), padLast = load<i32>(lead + (last << 2));
    if (pos < end) walkSeek(w, rank, 0, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(w, rank), end - pos);
      // Source row for the outer indices, or -1 when the whole run is the constant.
      let row = 0;
      for (let d = 0; d < last; d++) {
        const at = load<i32>(w + W_IDX + (d << 2)) - load<i32>(lead + (d << 2));
        const i = padIndex(mode, at, load<i32>(inDims + (d << 2)));
        if (i < 0) {
          row = -1;
          break;
        }
        row = row * load<i32>(inDims + (d << 2)) + i;
      }
      const j0 = load<i32>(w + W_IDX + (last << 2));
      for (let t = 0; t < run; t++) {
        const dst = py + (pos + t) * size;
        const i = row < 0 ? -1 : padIndex(mode, j0 + t - padLast, nLast);
        if (i < 0) {
          if (size == 4) store<u32>(dst, <u32>value);
          else if (size == 8) store<u64>(dst, value);
          else if (size == 2) store<u16>(dst, <u16>value);
          else store<u8>(dst, <u8>value);
        } else copyElement(dst, px + (row * nLast + i) * size, size);
      }
      pos += run;
      walkAdvance(w, rank, 0, run);
    }
  }
  customop_cleanup();
}
