// Table-free float64 elementary functions for the op kernels. A kernel module may carry no data segment
// (docs/kernel-abi.md), so these use range reduction plus series whose coefficients are code immediates. Each is
// accurate to a few float64 ulps over the range a float32 result can need, far below float32 rounding.

const LOG2E: f64 = 1.4426950408889634;
const LN2_HI: f64 = 6.93147180369123816490e-01;
const LN2_LO: f64 = 1.90821492927058770002e-10;
const SQRT_HALF: f64 = 0.7071067811865476;
const TWO_OVER_SQRT_PI: f64 = 1.1283791670955126;
const ROUNDER: f64 = 6755399441055744.0; // 1.5 · 2^52

/** 2^k for an integer k in [-1022, 1023], from its exponent bits. */
@inline function pow2(k: f64): f64 {
  return reinterpret<f64>((<i64>k + 1023) << 52);
}

/** e^r for |r| <= ln2 / 2: Taylor series to r^13 (truncation below 2^-60). */
@inline function expReduced(r: f64): f64 {
  let p: f64 = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r + 1.0;
}

/** e^x. Saturates to +Infinity above 709 and to 0 below -745 (far outside float32's range); NaN stays NaN. */
export function exp64(x: f64): f64 {
  if (!(x < 709.0)) return x != x ? x : Infinity;
  if (x < -745.0) return 0.0;
  const k = nearest<f64>(x * LOG2E);
  const r = x - k * LN2_HI - k * LN2_LO;
  const p = expReduced(r);
  // Split 2^k in two so that k down to -1075 stays exact (a subnormal product is still correct for float32).
  if (k < -1000.0) return p * pow2(k + 500.0) * pow2(-500.0);
  return p * pow2(k);
}

/**
 * e^x in both float64 lanes of `x`, for SIMD builds only (call it under `if (ASC_FEATURE_SIMD)`). x is clamped to
 * [-708, 709], so every result is a normal float64: below e^-708 the true value rounds to 0 in float32 anyway.
 * The polynomial is the Taylor series to r^11 (relative truncation below 1e-14), evaluated by Estrin's scheme
 * for a short dependency chain; 2^k is added into the exponent bits. NaN stays NaN (its k is garbage, but
 * NaN plus anything in the exponent is still NaN).
 */
export function exp64x2(x: v128): v128 {
  // pmin/pmax are single instructions (min/max must order NaN and signed zeros); a NaN x passes through both.
  const c = f64x2.pmax(f64x2.pmin(x, f64x2.splat(709.0)), f64x2.splat(-708.0));
  // Adding 1.5 · 2^52 rounds x · log2(e) to the nearest integer k, which then sits in the low mantissa bits.
  const t = f64x2.add(f64x2.mul(c, f64x2.splat(LOG2E)), f64x2.splat(ROUNDER));
  const k = f64x2.sub(t, f64x2.splat(ROUNDER));
  const r = f64x2.sub(f64x2.sub(c, f64x2.mul(k, f64x2.splat(LN2_HI))), f64x2.mul(k, f64x2.splat(LN2_LO)));
  const r2 = f64x2.mul(r, r);
  const r4 = f64x2.mul(r2, r2);
  const r8 = f64x2.mul(r4, r4);
  const p01 = f64x2.add(f64x2.splat(1.0), r);
  const p23 = f64x2.add(f64x2.splat(0.5), f64x2.mul(r, f64x2.splat(1.0 / 6.0)));
  const p45 = f64x2.add(f64x2.splat(1.0 / 24.0), f64x2.mul(r, f64x2.splat(1.0 / 120.0)));
  const p67 = f64x2.add(f64x2.splat(1.0 / 720.0), f64x2.mul(r, f64x2.splat(1.0 / 5040.0)));
  const p89 = f64x2.add(f64x2.splat(1.0 / 40320.0), f64x2.mul(r, f64x2.splat(1.0 / 362880.0)));
  const pab = f64x2.add(f64x2.splat(1.0 / 3628800.0), f64x2.mul(r, f64x2.splat(1.0 / 39916800.0)));
  const q0 = f64x2.add(p01, f64x2.mul(r2, p23));
  const q1 = f64x2.add(p45, f64x2.mul(r2, p67));
  const q2 = f64x2.add(p89, f64x2.mul(r2, pab));
  const p = f64x2.add(f64x2.add(q0, f64x2.mul(r4, q1)), f64x2.mul(r8, q2));
  // k · 2^52 added to the bits of p multiplies it by 2^k (p and p · 2^k are normal for k in [-1022, 1023]).
  const e = i64x2.shl(i64x2.sub(t, i64x2.splat(reinterpret<i64>(ROUNDER))), 52);
  return i64x2.add(p, e);
}

/** e^x - 1 without cancellation near 0. */
export function expm1_64(x: f64): f64 {
  if (abs<f64>(x) < 0.25) {
    // Taylor series to x^15: truncation below 2^-64 relative for |x| < 0.25.
    let p: f64 = 1.0 / 1307674368000.0;
    p = p * x + 1.0 / 87178291200.0;
    p = p * x + 1.0 / 6227020800.0;
    p = p * x + 1.0 / 479001600.0;
    p = p * x + 1.0 / 39916800.0;
    p = p * x + 1.0 / 3628800.0;
    p = p * x + 1.0 / 362880.0;
    p = p * x + 1.0 / 40320.0;
    p = p * x + 1.0 / 5040.0;
    p = p * x + 1.0 / 720.0;
    p = p * x + 1.0 / 120.0;
    p = p * x + 1.0 / 24.0;
    p = p * x + 1.0 / 6.0;
    p = p * x + 0.5;
    p = p * x + 1.0;
    return p * x;
  }
  return exp64(x) - 1.0;
}

/** 2 · atanh(s) = log((1 + s) / (1 - s)) for |s| <= 0.1716: odd series to s^27 (truncation below 2^-60). */
@inline function twoAtanh(s: f64): f64 {
  const z = s * s;
  let p: f64 = 1.0 / 27.0;
  p = p * z + 1.0 / 25.0;
  p = p * z + 1.0 / 23.0;
  p = p * z + 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  p = p * z + 1.0;
  return 2.0 * s * p;
}

/** Natural logarithm: -Infinity at 0, NaN below 0, +Infinity at +Infinity. */
export function log64(x: f64): f64 {
  if (!(x > 0.0)) return x == 0.0 ? -Infinity : NaN;
  if (x == Infinity) return x;
  let bits = reinterpret<i64>(x);
  let e: i64 = (bits >>> 52) - 1023;
  if (e == -1023) {
    // Subnormal: scale by 2^64 first.
    bits = reinterpret<i64>(x * 18446744073709551616.0);
    e = (bits >>> 52) - 1023 - 64;
  }
  // m in [1, 2), then folded into [sqrt(1/2), sqrt(2)).
  let m = reinterpret<f64>((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e += 1;
  }
  const k = <f64>e;
  return twoAtanh((m - 1.0) / (m + 1.0)) + k * LN2_LO + k * LN2_HI;
}

/** log(1 + x) without cancellation near 0. */
export function log1p64(x: f64): f64 {
  // log(1 + x) = 2 atanh(x / (2 + x)); the series converges fast while |x / (2 + x)| <= 0.1716.
  if (x > -0.29 && x < 0.41) return twoAtanh(x / (2.0 + x));
  return log64(1.0 + x);
}

/** Hyperbolic tangent. */
export function tanh64(x: f64): f64 {
  const a = abs<f64>(x);
  if (a > 22.0) return x > 0 ? 1.0 : (x < 0 ? -1.0 : x);
  // tanh(a) = expm1(2a) / (expm1(2a) + 2), exact in relative terms near 0 thanks to expm1.
  const t = expm1_64(2.0 * a);
  const r = t / (t + 2.0);
  return x < 0 ? -r : r;
}

/** The logistic function 1 / (1 + e^-x). */
export function sigmoid64(x: f64): f64 {
  if (x >= 0) return 1.0 / (1.0 + exp64(-x));
  const e = exp64(x);
  return e / (1.0 + e);
}

/**
 * erfc(x) · e^(x²) · x for x >= 1, as s = 1/x runs over [1/6, 1]: a degree-22 Chebyshev interpolant in
 * t = (12 s - 7) / 5, fitted at the Chebyshev nodes to 40-digit values; its relative error is below 1e-15.
 */
function erfcScaled(s: f64): f64 {
  const tt = 2.0 * ((12.0 * s - 7.0) / 5.0);
  let b1: f64 = -0.0000000000000010848104035284727, b2: f64 = 0, t: f64;
  t = b1; b1 = tt * b1 - b2 + 0.000000000000002469283102127976; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.000000000000001072412086467131; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.000000000000044589552865471726; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.00000000000027739809817474475; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.0000000000011363840808202579; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.000000000003112229253610307; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.0000000000021671472524340318; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.000000000037867607999367434; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.00000000029478922180279153; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.0000000013416438565179651; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.0000000038195155219283578; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.00000000090712700878341242; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.000000069999188369066832; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.00000051882276098667201; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.0000022059099609177134; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.0000039686957443440532; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.000026743225983670516; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.00032014496358247313; b2 = t;
  t = b1; b1 = tt * b1 - b2 + 0.0017172451281468661; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.0022764645742360115; b2 = t;
  t = b1; b1 = tt * b1 - b2 + -0.066279631879652265; b2 = t;
  return 0.5 * tt * b1 - b2 + 0.49471361578208072;
}

/** The error function. */
export function erf64(x: f64): f64 {
  const a = abs<f64>(x);
  if (a != a) return x;
  let r: f64;
  if (a < 1.0) {
    // erf(a) = 2/sqrt(pi) · a · Σ (-1)^n a^(2n) / (n! (2n + 1)), to n = 16 (the next term is below 1e-16).
    const z = a * a;
    let p: f64 = 1.0 / (20922789888000.0 * 33.0);
    p = p * z - 1.0 / (1307674368000.0 * 31.0);
    p = p * z + 1.0 / (87178291200.0 * 29.0);
    p = p * z - 1.0 / (6227020800.0 * 27.0);
    p = p * z + 1.0 / (479001600.0 * 25.0);
    p = p * z - 1.0 / (39916800.0 * 23.0);
    p = p * z + 1.0 / (3628800.0 * 21.0);
    p = p * z - 1.0 / (362880.0 * 19.0);
    p = p * z + 1.0 / (40320.0 * 17.0);
    p = p * z - 1.0 / (5040.0 * 15.0);
    p = p * z + 1.0 / (720.0 * 13.0);
    p = p * z - 1.0 / (120.0 * 11.0);
    p = p * z + 1.0 / (24.0 * 9.0);
    p = p * z - 1.0 / (6.0 * 7.0);
    p = p * z + 1.0 / (2.0 * 5.0);
    p = p * z - 1.0 / 3.0;
    p = p * z + 1.0;
    r = TWO_OVER_SQRT_PI * a * p;
  } else if (a < 6.0) {
    const s = 1.0 / a;
    r = 1.0 - exp64(-a * a) * erfcScaled(s) * s;
  } else {
    r = 1.0;
  }
  return x < 0 ? -r : r;
}

/** True when `y` is an integer (finite). */
@inline function isInteger(y: f64): bool {
  return y == floor<f64>(y) && abs<f64>(y) < 9007199254740992.0;
}

/** x^y with the C pow special cases that float32 models meet (0, negative bases with integer exponents, ±inf). */
export function pow64(x: f64, y: f64): f64 {
  if (y == 0.0) return 1.0;
  if (x == 1.0) return 1.0;
  if (x != x || y != y) return NaN;
  if (y == 1.0) return x;
  if (y == 2.0) return x * x;
  if (y == 0.5 && x >= 0.0 && x != Infinity) return sqrt<f64>(x);
  const yInt = isInteger(y);
  if (yInt && abs<f64>(y) <= 64.0) {
    // Exact-ish repeated squaring: each product is rounded in float64, far below float32 rounding.
    let n = <i32>abs<f64>(y);
    let base = x;
    let acc: f64 = 1.0;
    while (n != 0) {
      if (n & 1) acc *= base;
      base *= base;
      n >>= 1;
    }
    return y < 0 ? 1.0 / acc : acc;
  }
  if (x < 0.0) {
    if (!yInt) return NaN;
    const oddY = abs<f64>(y) < 9007199254740992.0 && (<i64>y & 1) == 1;
    const m = pow64(-x, y);
    return oddY ? -m : m;
  }
  if (x == 0.0) return y < 0 ? Infinity : 0.0;
  if (x == Infinity) return y < 0 ? 0.0 : Infinity;
  // log64 is accurate to a few ulps; y·log(x) loses relative precision only when it is large, where the float32
  // result overflows or underflows anyway.
  return exp64(y * log64(x));
}

/** The Gaussian error linear unit x · Φ(x) = x/2 · (1 + erf(x / sqrt 2)). */
@inline export function gelu64(x: f64): f64 {
  return 0.5 * x * (1.0 + erf64(x * SQRT_HALF));
}

/** GELU with the tanh approximation x/2 · (1 + tanh(sqrt(2/pi) · (x + 0.044715 x³))). */
@inline export function geluTanh64(x: f64): f64 {
  return 0.5 * x * (1.0 + tanh64(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
