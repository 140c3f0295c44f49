// The strided walker: visits a contiguous range of an output's elements in row-major order while tracking, for
// up to three operands, the element offset that each output index maps to (a stride of 0 broadcasts). The
// lowering merges dimensions first, so the innermost run is usually long and the walker's cost is per run, not
// per element. Its state lives in the core's private scratch (the SoC slice), because a kernel owns no memory.
import { MAX_DIMS, nextInt } from "./_abi";

/** Byte offsets of the walker state inside the scratch area `w` (i32 words). */
export const W_DIMS: i32 = 0;
export const W_IDX: i32 = W_DIMS + 4 * MAX_DIMS;
export const W_STR: i32 = W_IDX + 4 * MAX_DIMS; // operand k's strides at W_STR + 4 · MAX_DIMS · k
export const W_OFF: i32 = W_STR + 3 * 4 * MAX_DIMS; // operand k's running offset at W_OFF + 4 · k
/** Bytes of scratch the walker uses; kernels put their own scratch after it. */
export const W_BYTES: i32 = 256;

/** Dimension `d`. */
@inline export function walkDim(w: i32, d: i32): i32 {
  return load<i32>(w + W_DIMS + (d << 2));
}

/** Operand `k`'s stride (in elements) along dimension `d`. */
@inline export function walkStride(w: i32, k: i32, d: i32): i32 {
  return load<i32>(w + W_STR + ((k * MAX_DIMS + d) << 2));
}

/** Operand `k`'s current offset (in elements). */
@inline export function walkOff(w: i32, k: i32): i32 {
  return load<i32>(w + W_OFF + (k << 2));
}

/** Reads `rank` dimensions, then `rank` strides for each of `operands` operands, from the scalar arguments. */
export function walkRead(w: i32, rank: i32, operands: i32): void {
  for (let d = 0; d < rank; d++) store<i32>(w + W_DIMS + (d << 2), nextInt());
  for (let k = 0; k < operands; k++) {
    for (let d = 0; d < rank; d++) store<i32>(w + W_STR + ((k * MAX_DIMS + d) << 2), nextInt());
  }
}

/** Product of the `rank` dimensions. */
export function walkCount(w: i32, rank: i32): i32 {
  let n = 1;
  for (let d = 0; d < rank; d++) n *= walkDim(w, d);
  return n;
}

/** Positions the walker at row-major element `pos`: sets the index and every operand's offset. */
export function walkSeek(w: i32, rank: i32, operands: i32, pos: i32): void {
  for (let k = 0; k < operands; k++) store<i32>(w + W_OFF + (k << 2), 0);
  for (let d = rank - 1; d >= 0; d--) {
    const n = walkDim(w, d);
    const i = pos % n;
    pos /= n;
    store<i32>(w + W_IDX + (d << 2), i);
    for (let k = 0; k < operands; k++) {
      store<i32>(w + W_OFF + (k << 2), walkOff(w, k) + i * walkStride(w, k, d));
    }
  }
}

/** Elements left in the innermost dimension from the current index. */
@inline export function walkInnerLeft(w: i32, rank: i32): i32 {
  return walkDim(w, rank - 1) - load<i32>(w + W_IDX + ((rank - 1) << 2));
}

/** Moves `run` elements forward along the innermost dimension (run <= walkInnerLeft), carrying outwards. */
export function walkAdvance(w: i32, rank: i32, operands: i32, run: i32): void {
  let d = rank - 1;
  let i = load<i32>(w + W_IDX + (d << 2)) + run;
  for (let k = 0; k < operands; k++) {
    store<i32>(w + W_OFF + (k << 2), walkOff(w, k) + run * walkStride(w, k, d));
  }
  while (d > 0 && i == walkDim(w, d)) {
    // Wrap dimension d to 0 and step dimension d - 1.
    store<i32>(w + W_IDX + (d << 2), 0);
    for (let k = 0; k < operands; k++) {
      store<i32>(w + W_OFF + (k << 2), walkOff(w, k) - i * walkStride(w, k, d) + walkStride(w, k, d - 1));
    }
    d--;
    i = load<i32>(w + W_IDX + (d << 2)) + 1;
  }
  store<i32>(w + W_IDX + (d << 2), i);
}
