// The GEMM micro-kernels shared by linalg and conv: a 4 × 8 (and 1 × 8) tile of C += A · B over a range of k,
// with B's 8 columns contiguous in memory (the original matrix or a packed panel). Products are summed in four
// float32 lanes for at most F32_RUN values of k, then added into float64 accumulators kept in the core's scratch,
// so the float32 error grows with F32_RUN, not with K. Also the fused epilogue activations.
import { erf64, sigmoid64, tanh64 } from "./_math";

/** Values of k summed in float32 before the float64 accumulators take them. */
const F32_RUN: i32 = 64;

/** Bytes per accumulator row: 8 float64. */
export const ACC_ROW_BYTES: i32 = 64;

/** Adds the float32 lanes of `c` (columns col..col+3) to the float64 accumulators at `acc`. */
@inline function flush(acc: i32, c: v128): void {
  const lo = f64x2.promote_low_f32x4(c);
  const hi = f64x2.promote_low_f32x4(v128.shuffle<f32>(c, c, 2, 3, 2, 3));
  v128.store(acc, f64x2.add(v128.load(acc), lo));
  v128.store(acc, f64x2.add(v128.load(acc, 16), hi), 16);
}

/**
 * acc[r][0..8) += Σ_k A(r, k) · B(k, 0..8) for r < 4 and k < kc. A(r, k) is the float32 at pa + r·ra + k·ka
 * (bytes); row k of B is 8 contiguous float32 at pb + k·kb; acc rows are ACC_ROW_BYTES apart.
 */
export function tile4x8(pa: i32, ra: i32, ka: i32, pb: i32, kb: i32, kc: i32, acc: i32): void {
  if (!ASC_FEATURE_SIMD) {
    for (let r = 0; r < 4; r++) tile1x8(pa + r * ra, ka, pb, kb, kc, acc + r * ACC_ROW_BYTES);
    return;
  }
  let k = 0;
  while (k < kc) {
    const kend = min(kc, k + F32_RUN);
    let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
    let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
    let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
    let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
    let a = pa + k * ka;
    let b = pb + k * kb;
    for (; k < kend; k++) {
      const b0 = v128.load(b), b1 = v128.load(b, 16);
      const a0 = v128.load32_splat(a);
      c00 = f32x4.add(c00, f32x4.mul(a0, b0));
      c01 = f32x4.add(c01, f32x4.mul(a0, b1));
      const a1 = v128.load32_splat(a + ra);
      c10 = f32x4.add(c10, f32x4.mul(a1, b0));
      c11 = f32x4.add(c11, f32x4.mul(a1, b1));
      const a2 = v128.load32_splat(a + 2 * ra);
      c20 = f32x4.add(c20, f32x4.mul(a2, b0));
      c21 = f32x4.add(c21, f32x4.mul(a2, b1));
      const a3 = v128.load32_splat(a + 3 * ra);
      c30 = f32x4.add(c30, f32x4.mul(a3, b0));
      c31 = f32x4.add(c31, f32x4.mul(a3, b1));
      a += ka;
      b += kb;
    }
    flush(acc, c00);
    flush(acc + 32, c01);
    flush(acc + ACC_ROW_BYTES, c10);
    flush(acc + ACC_ROW_BYTES + 32, c11);
    flush(acc + 2 * ACC_ROW_BYTES, c20);
    flush(acc + 2 * ACC_ROW_BYTES + 32, c21);
    flush(acc + 3 * ACC_ROW_BYTES, c30);
    flush(acc + 3 * ACC_ROW_BYTES + 32, c31);
  }
}

/** tile4x8 for one row. */
export function tile1x8(pa: i32, ka: i32, pb: i32, kb: i32, kc: i32, acc: i32): void {
  if (!ASC_FEATURE_SIMD) {
    tile1x8Scalar(pa, ka, pb, kb, kc, acc);
    return;
  }
  let k = 0;
  while (k < kc) {
    const kend = min(kc, k + F32_RUN);
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0);
    let a = pa + k * ka;
    let b = pb + k * kb;
    for (; k < kend; k++) {
      const a0 = v128.load32_splat(a);
      c0 = f32x4.add(c0, f32x4.mul(a0, v128.load(b)));
      c1 = f32x4.add(c1, f32x4.mul(a0, v128.load(b, 16)));
      a += ka;
      b += kb;
    }
    flush(acc, c0);
    flush(acc + 32, c1);
  }
}

/**
 * tile1x8 without SIMD, for builds that measure what SIMD brings: the same float32 runs and float64 flushes,
 * so the results are bit for bit those of the SIMD kernel.
 */
function tile1x8Scalar(pa: i32, ka: i32, pb: i32, kb: i32, kc: i32, acc: i32): void {
  let k = 0;
  while (k < kc) {
    const kend = min(kc, k + F32_RUN);
    let c0: f32 = 0, c1: f32 = 0, c2: f32 = 0, c3: f32 = 0, c4: f32 = 0, c5: f32 = 0, c6: f32 = 0, c7: f32 = 0;
    let a = pa + k * ka;
    let b = pb + k * kb;
    for (; k < kend; k++) {
      const x = load<f32>(a);
      c0 += x * load<f32>(b);
      c1 += x * load<f32>(b, 4);
      c2 += x * load<f32>(b, 8);
      c3 += x * load<f32>(b, 12);
      c4 += x * load<f32>(b, 16);
      c5 += x * load<f32>(b, 20);
      c6 += x * load<f32>(b, 24);
      c7 += x * load<f32>(b, 28);
      a += ka;
      b += kb;
    }
    store<f64>(acc, load<f64>(acc) + <f64>c0);
    store<f64>(acc, load<f64>(acc, 8) + <f64>c1, 8);
    store<f64>(acc, load<f64>(acc, 16) + <f64>c2, 16);
    store<f64>(acc, load<f64>(acc, 24) + <f64>c3, 24);
    store<f64>(acc, load<f64>(acc, 32) + <f64>c4, 32);
    store<f64>(acc, load<f64>(acc, 40) + <f64>c5, 40);
    store<f64>(acc, load<f64>(acc, 48) + <f64>c6, 48);
    store<f64>(acc, load<f64>(acc, 56) + <f64>c7, 56);
  }
}

/** acc[r][0..8) += rows [0, rows) of A times B, with tile4x8 on groups of 4 rows and tile1x8 on the rest. */
export function tileRows(rows: i32, pa: i32, ra: i32, ka: i32, pb: i32, kb: i32, kc: i32, acc: i32): void {
  let r = 0;
  for (; r + 4 <= rows; r += 4) tile4x8(pa + r * ra, ra, ka, pb, kb, kc, acc + r * ACC_ROW_BYTES);
  for (; r < rows; r++) tile1x8(pa + r * ra, ka, pb, kb, kc, acc + r * ACC_ROW_BYTES);
}

/** Zeroes `rows` accumulator rows. */
export function clearAcc(acc: i32, rows: i32): void {
  memory.fill(acc, 0, rows * ACC_ROW_BYTES);
}

/**
 * Copies a kc × 8 panel of B into `panel` (rows of 8 contiguous float32), zero-filling columns at or past
 * `cols`: B(k, c) is the float32 at pb + k·kb + c·cb (bytes).
 */
export function packPanel(pb: i32, kb: i32, cb: i32, kc: i32, cols: i32, panel: i32): void {
  let src = pb;
  let dst = panel;
  if (cb == 4 && cols == 8) {
    for (let k = 0; k < kc; k++) {
      if (ASC_FEATURE_SIMD) {
        v128.store(dst, v128.load(src));
        v128.store(dst, v128.load(src, 16), 16);
      } else {
        memory.copy(dst, src, 32);
      }
      src += kb;
      dst += 32;
    }
    return;
  }
  for (let k = 0; k < kc; k++) {
    for (let c = 0; c < 8; c++) store<f32>(dst + (c << 2), c < cols ? load<f32>(src + c * cb) : 0);
    src += kb;
    dst += 32;
  }
}

/** Epilogue activation codes (lowering.ts Activation). */
export const ACT_NONE: i32 = 0;
export const ACT_RELU: i32 = 1;
export const ACT_LEAKY_RELU: i32 = 2; // p0 alpha
export const ACT_SIGMOID: i32 = 3;
export const ACT_TANH: i32 = 4;
export const ACT_GELU: i32 = 5;
export const ACT_GELU_TANH: i32 = 6;
export const ACT_CLIP: i32 = 7; // p0 min, p1 max
export const ACT_SILU: i32 = 8;
export const ACT_HARD_SWISH: i32 = 9;

/**
 * Stores an accumulator row plus `bias`, activated and rounded to float32, at y[0..cols). Without an activation,
 * a full row of 8 is converted in SIMD.
 */
export function storeRow(acc: i32, y: i32, cols: i32, bias: f64, act: i32, p0: f64, p1: f64): void {
  if (ASC_FEATURE_SIMD && act == ACT_NONE && cols == 8) {
    const b = f64x2.splat(bias);
    const v0 = f32x4.demote_f64x2_zero(f64x2.add(v128.load(acc), b));
    const v1 = f32x4.demote_f64x2_zero(f64x2.add(v128.load(acc, 16), b));
    const v2 = f32x4.demote_f64x2_zero(f64x2.add(v128.load(acc, 32), b));
    const v3 = f32x4.demote_f64x2_zero(f64x2.add(v128.load(acc, 48), b));
    v128.store(y, v128.shuffle<f32>(v0, v1, 0, 1, 4, 5));
    v128.store(y, v128.shuffle<f32>(v2, v3, 0, 1, 4, 5), 16);
    return;
  }
  for (let t = 0; t < cols; t++) {
    const v = load<f64>(acc + (t << 3)) + bias;
    store<f32>(y + (t << 2), <f32>(act == ACT_NONE ? v : activate(act, v, p0, p1)));
  }
}

/** The activation applied to a float64 pre-activation value before it is rounded to float32. */
export function activate(act: i32, v: f64, p0: f64, p1: f64): f64 {
  switch (act) {
    case ACT_NONE: return v;
    case ACT_RELU: return max<f64>(v, 0);
    case ACT_LEAKY_RELU: return v < 0 ? v * p0 : v;
    case ACT_SIGMOID: return sigmoid64(v);
    case ACT_TANH: return tanh64(v);
    case ACT_GELU: return 0.5 * v * (1.0 + erf64(v * 0.7071067811865476));
    case ACT_GELU_TANH: return 0.5 * v * (1.0 + tanh64(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case ACT_CLIP: return min<f64>(max<f64>(v, p0), p1);
    case ACT_SILU: return v * sigmoid64(v);
    default: return v * max<f64>(0, min<f64>(1, v / 6.0 + 0.5)); // ACT_HARD_SWISH
  }
}
