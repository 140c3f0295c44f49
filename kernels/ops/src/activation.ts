// Unary float32 ops over a contiguous tensor: each core takes a 16-element-aligned share. The piecewise-linear
// ops run 4 lanes at a time in SIMD; the transcendental ones are computed in float64 with the table-free
// functions of _math.ts and rounded once to float32.
import { alignedChunk, customop_cleanup, customop_total_cpus, get_cpu_id, nextF64, nextInput, nextInt, nextOutput } from "./_abi";
import { erf64, exp64, exp64x2, expm1_64, gelu64, geluTanh64, log1p64, log64, sigmoid64, tanh64 } from "./_math";

// Unary op codes (lowering.ts UnaryOp); p0 and p1 are the two float parameters.
const RELU: i32 = 0;
const LEAKY_RELU: i32 = 1; // p0 alpha
const SIGMOID: i32 = 2;
const TANH: i32 = 3;
const EXP: i32 = 4;
const LOG: i32 = 5;
const SQRT: i32 = 6;
const CLIP: i32 = 7; // p0 min, p1 max
const ERF: i32 = 8;
const GELU: i32 = 9;
const GELU_TANH: i32 = 10;
const NEG: i32 = 11;
const ABS: i32 = 12;
const RECIPROCAL: i32 = 13;
const FLOOR: i32 = 14;
const CEIL: i32 = 15;
const ROUND: i32 = 16; // half to even
const SOFTPLUS: i32 = 17;
const HARD_SIGMOID: i32 = 18; // p0 alpha, p1 beta
const HARD_SWISH: i32 = 19;
const ELU: i32 = 20; // p0 alpha
const SELU: i32 = 21; // p0 alpha, p1 gamma
const CELU: i32 = 22; // p0 alpha
const SOFTSIGN: i32 = 23;
const THRESHOLDED_RELU: i32 = 24; // p0 alpha
const SIGN: i32 = 25;
const MISH: i32 = 26;
const DIV_BY: i32 = 27; // p0 divisor (float32 division, as the last step of Mean)
const SILU: i32 = 28; // x · sigmoid(x)

@inline function hasSimd(op: i32): bool {
  return op == RELU || op == LEAKY_RELU || op == CLIP || op == NEG || op == ABS || op == SQRT ||
    op == RECIPROCAL || op == FLOOR || op == CEIL || op == ROUND || op == DIV_BY || op == THRESHOLDED_RELU;
}

/** True for the ops computed in float64 SIMD lanes (two at a time) around exp64x2. */
@inline function hasWide(op: i32): bool {
  return op == EXP || op == SIGMOID || op == TANH || op == SILU;
}

/** The wide ops on two float64 lanes. */
@inline function unaryWide(op: i32, x: v128): v128 {
  const one = f64x2.splat(1.0);
  if (op == EXP) return exp64x2(x);
  if (op == SIGMOID) return f64x2.div(one, f64x2.add(one, exp64x2(f64x2.neg(x))));
  if (op == SILU) return f64x2.div(x, f64x2.add(one, exp64x2(f64x2.neg(x))));
  // TANH: sign(x) · (1 - 2 / (e^(2|x|) + 1)), and |x| - |x|³/3 below 1e-4 where the former cancels.
  const a = f64x2.abs(x);
  const big = f64x2.sub(one, f64x2.div(f64x2.splat(2.0), f64x2.add(exp64x2(f64x2.add(a, a)), one)));
  const small = f64x2.sub(a, f64x2.mul(f64x2.mul(a, a), f64x2.mul(a, f64x2.splat(1.0 / 3.0))));
  const t = v128.bitselect(small, big, f64x2.lt(a, f64x2.splat(1e-4)));
  // Copy the sign of x (so that -0 stays -0).
  return v128.or(t, v128.and(x, f64x2.splat(-0.0)));
}

@inline function unaryV(op: i32, x: v128, p0: f32, p1: f32): v128 {
  if (op == RELU) return f32x4.max(x, f32x4.splat(0));
  if (op == LEAKY_RELU) return v128.bitselect(f32x4.mul(x, f32x4.splat(p0)), x, f32x4.lt(x, f32x4.splat(0)));
  if (op == CLIP) return f32x4.min(f32x4.max(x, f32x4.splat(p0)), f32x4.splat(p1));
  if (op == NEG) return f32x4.neg(x);
  if (op == ABS) return f32x4.abs(x);
  if (op == SQRT) return f32x4.sqrt(x);
  if (op == RECIPROCAL) return f32x4.div(f32x4.splat(1), x);
  if (op == FLOOR) return f32x4.floor(x);
  if (op == CEIL) return f32x4.ceil(x);
  if (op == ROUND) return f32x4.nearest(x);
  if (op == DIV_BY) return f32x4.div(x, f32x4.splat(p0));
  // THRESHOLDED_RELU
  return v128.and(x, f32x4.gt(x, f32x4.splat(p0)));
}

@inline function unaryS(op: i32, x: f32, p0: f32, p1: f32): f32 {
  const d = <f64>x;
  switch (op) {
    case RELU: return max<f32>(x, 0);
    case LEAKY_RELU: return x < 0 ? x * p0 : x;
    case SIGMOID: return <f32>sigmoid64(d);
    case TANH: return <f32>tanh64(d);
    case EXP: return <f32>exp64(d);
    case LOG: return <f32>log64(d);
    case SQRT: return sqrt<f32>(x);
    case CLIP: return min<f32>(max<f32>(x, p0), p1);
    case ERF: return <f32>erf64(d);
    case GELU: return <f32>gelu64(d);
    case GELU_TANH: return <f32>geluTanh64(d);
    case NEG: return -x;
    case ABS: return abs<f32>(x);
    case RECIPROCAL: return 1 / x;
    case FLOOR: return floor<f32>(x);
    case CEIL: return ceil<f32>(x);
    case ROUND: return nearest<f32>(x);
    case SOFTPLUS: return <f32>(d > 0 ? d + log1p64(exp64(-d)) : log1p64(exp64(d)));
    // The two below follow the float32 evaluation order of the ONNX definition, so that a result near 0 is
    // not a float64 rounding of a float32 cancellation.
    case HARD_SIGMOID: return max<f32>(0, min<f32>(1, p0 * x + p1));
    case HARD_SWISH: return x * max<f32>(0, min<f32>(1, <f32>(1.0 / 6.0) * x + <f32>0.5));
    case ELU: return x >= 0 ? x : <f32>(<f64>p0 * expm1_64(d));
    case SELU: return <f32>(d > 0 ? <f64>p1 * d : <f64>p1 * <f64>p0 * expm1_64(d));
    case CELU: return <f32>(max<f64>(0, d) + min<f64>(0, <f64>p0 * expm1_64(d / <f64>p0)));
    case SOFTSIGN: return <f32>(d / (1.0 + abs<f64>(d)));
    case THRESHOLDED_RELU: return x > p0 ? x : 0;
    case SIGN: return x > 0 ? 1 : (x < 0 ? -1 : x);
    case MISH: return <f32>(d * tanh64(d > 20 ? d : log1p64(exp64(d))));
    case DIV_BY: return x / p0;
    default: return <f32>(d * sigmoid64(d)); // SILU
  }
}

@inline function runUnary(op: i32, px: i32, py: i32, start: i32, end: i32, p0: f32, p1: f32): void {
  let i = start;
  if (ASC_FEATURE_SIMD && hasSimd(op)) {
    for (; i + 4 <= end; i += 4) v128.store(py + (i << 2), unaryV(op, v128.load(px + (i << 2)), p0, p1));
  }
  if (ASC_FEATURE_SIMD && hasWide(op)) {
    for (; i + 4 <= end; i += 4) {
      const x = v128.load(px + (i << 2));
      const lo = f32x4.demote_f64x2_zero(unaryWide(op, f64x2.promote_low_f32x4(x)));
      const hi = f32x4.demote_f64x2_zero(unaryWide(op, f64x2.promote_low_f32x4(v128.shuffle<f32>(x, x, 2, 3, 2, 3))));
      v128.store(py + (i << 2), v128.shuffle<f32>(lo, hi, 0, 1, 4, 5));
    }
  }
  for (; i < end; i++) store<f32>(py + (i << 2), unaryS(op, load<f32>(px + (i << 2)), p0, p1));
}

/**
 * float32 Y = op(X) elementwise. ints: op (see the codes above / lowering.ts), element count, p0 and p1 as
 * float64 bit patterns (0 when the op has no parameter).
 */
export function unary_f32(): void {
  const px = nextInput(), py = nextOutput();
  const op = nextInt(), n = nextInt();
  const p0 = <f32>nextF64(), p1 = <f32>nextF64();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const chunk = alignedChunk(n, total, 16);
    const start = min(n, cpu * chunk), end = min(n, (cpu + 1) * chunk);
    switch (op) {
      case RELU: runUnary(RELU, px, py, start, end, p0, p1); break;
      case LEAKY_RELU: runUnary(LEAKY_RELU, px, py, start, end, p0, p1); break;
      case CLIP: runUnary(CLIP, px, py, start, end, p0, p1); break;
      case NEG: runUnary(NEG, px, py, start, end, p0, p1); break;
      case ABS: runUnary(ABS, px, py, start, end, p0, p1); break;
      case SQRT: runUnary(SQRT, px, py, start, end, p0, p1); break;
      case RECIPROCAL: runUnary(RECIPROCAL, px, py, start, end, p0, p1); break;
      case FLOOR: runUnary(FLOOR, px, py, start, end, p0, p1); break;
      case CEIL: runUnary(CEIL, px, py, start, end, p0, p1); break;
      case ROUND: runUnary(ROUND, px, py, start, end, p0, p1); break;
      case DIV_BY: runUnary(DIV_BY, px, py, start, end, p0, p1); break;
      case THRESHOLDED_RELU: runUnary(THRESHOLDED_RELU, px, py, start, end, p0, p1); break;
      case SIGMOID: runUnary(SIGMOID, px, py, start, end, p0, p1); break;
      case TANH: runUnary(TANH, px, py, start, end, p0, p1); break;
      case EXP: runUnary(EXP, px, py, start, end, p0, p1); break;
      case LOG: runUnary(LOG, px, py, start, end, p0, p1); break;
      case ERF: runUnary(ERF, px, py, start, end, p0, p1); break;
      case SILU: runUnary(SILU, px, py, start, end, p0, p1); break;
      case GELU: runUnary(GELU, px, py, start, end, p0, p1); break;
      default: runUnary(op, px, py, start, end, p0, p1);
    }
  }
  customop_cleanup();
}
