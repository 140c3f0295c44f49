// Reductions over float32: the ONNX Reduce* family (any set of axes, after the lowering merged the kept and the
// reduced dimensions into two strided index spaces), Softmax / LogSoftmax / Hardmax over one axis, and
// ArgMax / ArgMin. Sums, products and exponentials are float64.
//
// A reduction whose output has fewer elements than there are cores runs as two calls: reduce_f32 with parts > 1
// writes per-part float64 partial states to a scratch value, and reduce_finish_f32 combines them (there is no
// cross-core communication inside one call).
import { customop_cleanup, customop_total_cpus, get_cpu_id, localScratch, nextInput, nextInt, nextOutput } from "./_abi";
import { exp64, exp64x2, log64 } from "./_math";
import { W_BYTES, walkAdvance, walkCount, walkInnerLeft, walkOff, walkRead, walkSeek, walkStride } from "./_walk";

// Reduction kinds (lowering.ts ReduceKind).
const SUM: i32 = 0;
const MEAN: i32 = 1;
const MAX: i32 = 2;
const MIN: i32 = 3;
const PROD: i32 = 4;
const SUM_SQUARE: i32 = 5;
const L1: i32 = 6;
const L2: i32 = 7;
const LOG_SUM: i32 = 8;
const LOG_SUM_EXP: i32 = 9;

/** The identity of a kind's combining operation. */
@inline function identity(kind: i32): f64 {
  if (kind == MAX || kind == LOG_SUM_EXP) return -Infinity;
  if (kind == MIN) return Infinity;
  if (kind == PROD) return 1;
  return 0;
}

/** Sum of f(x) over a run of n float32 at p with stride s (elements), in float64; f chosen by kind. */
@inline function runSum(kind: i32, p: i32, s: i32, n: i32, shift: f64): f64 {
  let acc: f64 = 0;
  let i = 0;
  if (ASC_FEATURE_SIMD && s == 1 && (kind == SUM || kind == MEAN || kind == LOG_SUM)) {
    let v = f64x2.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(p + (i << 2));
      v = f64x2.add(v, f64x2.promote_low_f32x4(x));
      v = f64x2.add(v, f64x2.promote_low_f32x4(v128.shuffle<f32>(x, x, 2, 3, 2, 3)));
    }
    acc = f64x2.extract_lane(v, 0) + f64x2.extract_lane(v, 1);
  }
  for (; i < n; i++) {
    const x = <f64>load<f32>(p + ((i * s) << 2));
    if (kind == SUM_SQUARE || kind == L2) acc += x * x;
    else if (kind == L1) acc += abs<f64>(x);
    else if (kind == LOG_SUM_EXP) acc += exp64(x - shift);
    else acc += x;
  }
  return acc;
}

/** Max (or min) of a run of n float32 at p with stride s. */
@inline function runExtreme(isMax: bool, p: i32, s: i32, n: i32, init: f32): f32 {
  let m = init;
  let i = 0;
  if (ASC_FEATURE_SIMD && s == 1 && n >= 4) {
    let v = f32x4.splat(init);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(p + (i << 2));
      v = isMax ? f32x4.max(v, x) : f32x4.min(v, x);
    }
    const a = f32x4.extract_lane(v, 0), b = f32x4.extract_lane(v, 1);
    const c = f32x4.extract_lane(v, 2), d = f32x4.extract_lane(v, 3);
    m = isMax ? max<f32>(max<f32>(a, b), max<f32>(c, d)) : min<f32>(min<f32>(a, b), min<f32>(c, d));
  }
  for (; i < n; i++) {
    const x = load<f32>(p + ((i * s) << 2));
    m = isMax ? max<f32>(m, x) : min<f32>(m, x);
  }
  return m;
}

/**
 * Reduces elements [start, end) of the reduced index space (walker at `rw`) from input base `px`; returns the
 * state (value, and for LogSumExp the shift in `out2`).
 */
function reduceRange(kind: i32, rw: i32, rank: i32, px: i32, start: i32, end: i32, out2: i32): f64 {
  const s = walkStride(rw, 0, rank - 1);
  let shift: f64 = 0;
  if (kind == LOG_SUM_EXP) {
    // First pass: the maximum, so that the exponentials cannot overflow.
    let m: f32 = -Infinity;
    let pos = start;
    if (pos < end) walkSeek(rw, rank, 1, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(rw, rank), end - pos);
      m = runExtreme(true, px + (walkOff(rw, 0) << 2), s, run, m);
      pos += run;
      walkAdvance(rw, rank, 1, run);
    }
    shift = <f64>m;
    store<f64>(out2, shift);
    if (shift == -Infinity) return 0;
  }
  let acc = identity(kind == LOG_SUM_EXP ? SUM : kind);
  let ext: f32 = kind == MAX ? -Infinity : Infinity;
  let pos = start;
  if (pos < end) walkSeek(rw, rank, 1, pos);
  while (pos < end) {
    const run = min(walkInnerLeft(rw, rank), end - pos);
    const p = px + (walkOff(rw, 0) << 2);
    if (kind == MAX || kind == MIN) ext = runExtreme(kind == MAX, p, s, run, ext);
    else if (kind == PROD) {
      for (let i = 0; i < run; i++) acc *= <f64>load<f32>(p + ((i * s) << 2));
    } else acc += runSum(kind, p, s, run, shift);
    pos += run;
    walkAdvance(rw, rank, 1, run);
  }
  return kind == MAX || kind == MIN ? <f64>ext : acc;
}

/** The final value of a reduction state over `count` elements. */
@inline function finish(kind: i32, v: f64, shift: f64, count: i32): f32 {
  if (kind == MEAN) return <f32>(v / <f64>count);
  if (kind == L2) return <f32>sqrt<f64>(v);
  if (kind == LOG_SUM) return <f32>log64(v);
  if (kind == LOG_SUM_EXP) return shift == -Infinity ? -Infinity : <f32>(shift + log64(v));
  return <f32>v;
}

/**
 * ints: kind (0 Sum, 1 Mean, 2 Max, 3 Min, 4 Prod, 5 SumSquare, 6 L1, 7 L2, 8 LogSum, 9 LogSumExp), parts P,
 * kept rank rk, rk kept dims, their rk input strides, reduced rank rr, rr reduced dims, their rr input strides.
 * Input X; output Y float32 [kept elements] when P = 1, else float64 partial states [kept elements, P, 2].
 */
export function reduce_f32(): void {
  const px = nextInput(), py = nextOutput();
  const kind = nextInt(), parts = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  const kw = localScratch(), rw = kw + W_BYTES, tmp = rw + W_BYTES;
  const rk = nextInt();
  walkRead(kw, rk, 1);
  const rr = nextInt();
  walkRead(rw, rr, 1);
  if (cpu < total && py != 0) {
    const outs = walkCount(kw, rk), count = walkCount(rw, rr);
    const units = outs * parts;
    const per = (units + total - 1) / total;
    const end = min(units, (cpu + 1) * per);
    const partLen = (count + parts - 1) / parts;
    let u = min(units, cpu * per);
    if (u < end) walkSeek(kw, rk, 1, u / parts);
    while (u < end) {
      const o = u / parts, part = u % parts;
      const base = px + (walkOff(kw, 0) << 2);
      store<f64>(tmp, 0);
      const v = reduceRange(kind, rw, rr, base, min(count, part * partLen), min(count, (part + 1) * partLen), tmp);
      if (parts == 1) store<f32>(py + (o << 2), finish(kind, v, load<f64>(tmp), count));
      else {
        store<f64>(py + (u << 4), v);
        store<f64>(py + (u << 4), load<f64>(tmp), 8);
      }
      u++;
      if (u < end && u % parts == 0) walkAdvance(kw, rk, 1, 1);
    }
  }
  customop_cleanup();
}

/**
 * Combines the partial states of reduce_f32. ints: kind, parts P, kept elements, reduced element count.
 * Input the float64 partials [kept elements, P, 2]; output Y float32 [kept elements].
 */
export function reduce_finish_f32(): void {
  const pp = nextInput(), py = nextOutput();
  const kind = nextInt(), parts = nextInt(), outs = nextInt(), count = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const per = (outs + total - 1) / total;
    const end = min(outs, (cpu + 1) * per);
    for (let o = min(outs, cpu * per); o < end; o++) {
      let v = identity(kind == LOG_SUM_EXP ? SUM : kind);
      let shift: f64 = -Infinity;
      if (kind == LOG_SUM_EXP) {
        for (let p = 0; p < parts; p++) shift = max<f64>(shift, load<f64>(pp + ((o * parts + p) << 4), 8));
      }
      for (let p = 0; p < parts; p++) {
        const s = pp + ((o * parts + p) << 4);
        const x = load<f64>(s);
        if (kind == MAX) v = max<f64>(v, x);
        else if (kind == MIN) v = min<f64>(v, x);
        else if (kind == PROD) v *= x;
        else if (kind == LOG_SUM_EXP) {
          const m = load<f64>(s, 8);
          if (m != -Infinity) v += x * exp64(m - shift);
        } else v += x;
      }
      store<f32>(py + (o << 2), finish(kind, v, shift, count));
    }
  }
  customop_cleanup();
}

const SOFTMAX: i32 = 0;
const LOG_SOFTMAX: i32 = 1;

/** Elements of one softmax lane cached as float64 exponentials in the scratch (longer lanes recompute them). */
const CACHE_MAX: i32 = 6144;

/**
 * Softmax, LogSoftmax or Hardmax along the middle dimension of [outer, n, inner]. ints: kind (0 Softmax,
 * 1 LogSoftmax, 2 Hardmax), outer, n, inner. Input X, output Y of the same shape; the outer · inner lanes are split
 * over the cores.
 */
export function softmax_f32(): void {
  const px = nextInput(), py = nextOutput();
  const kind = nextInt(), outer = nextInt(), n = nextInt(), inner = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const cache = localScratch();
    const lanes = outer * inner;
    const per = (lanes + total - 1) / total;
    const end = min(lanes, (cpu + 1) * per);
    for (let l = min(lanes, cpu * per); l < end; l++) {
      const off = ((l / inner) * n * inner + l % inner) << 2;
      const x = px + off, y = py + off, s = inner << 2;
      const top = runExtreme(true, x, inner, n, -Infinity);
      if (kind != SOFTMAX && kind != LOG_SOFTMAX) {
        // Hardmax: 1 at the first maximum.
        let hit = false;
        for (let i = 0; i < n; i++) {
          const isTop = !hit && load<f32>(x + i * s) == top;
          if (isTop) hit = true;
          store<f32>(y + i * s, isTop ? 1 : 0);
        }
        continue;
      }
      let sum: f64 = 0;
      const cached = n <= CACHE_MAX && kind == SOFTMAX;
      if (ASC_FEATURE_SIMD && inner == 1 && cached) {
        // A contiguous row: exponentials two float64 lanes at a time.
        const t = f64x2.splat(<f64>top);
        let acc = f64x2.splat(0);
        let i = 0;
        for (; i + 4 <= n; i += 4) {
          const v = v128.load(x + (i << 2));
          const e0 = exp64x2(f64x2.sub(f64x2.promote_low_f32x4(v), t));
          const e1 = exp64x2(f64x2.sub(f64x2.promote_low_f32x4(v128.shuffle<f32>(v, v, 2, 3, 2, 3)), t));
          v128.store(cache + (i << 3), e0);
          v128.store(cache + (i << 3), e1, 16);
          acc = f64x2.add(acc, f64x2.add(e0, e1));
        }
        sum = f64x2.extract_lane(acc, 0) + f64x2.extract_lane(acc, 1);
        for (; i < n; i++) {
          const e = exp64(<f64>load<f32>(x + (i << 2)) - <f64>top);
          store<f64>(cache + (i << 3), e);
          sum += e;
        }
        const inv = f64x2.splat(1.0 / sum);
        i = 0;
        for (; i + 4 <= n; i += 4) {
          const lo = f32x4.demote_f64x2_zero(f64x2.mul(v128.load(cache + (i << 3)), inv));
          const hi = f32x4.demote_f64x2_zero(f64x2.mul(v128.load(cache + (i << 3), 16), inv));
          v128.store(y + (i << 2), v128.shuffle<f32>(lo, hi, 0, 1, 4, 5));
        }
        for (; i < n; i++) store<f32>(y + (i << 2), <f32>(load<f64>(cache + (i << 3)) * f64x2.extract_lane(inv, 0)));
        continue;
      }
      for (let i = 0; i < n; i++) {
        const e = exp64(<f64>load<f32>(x + i * s) - <f64>top);
        if (cached) store<f64>(cache + (i << 3), e);
        sum += e;
      }
      if (kind == LOG_SOFTMAX) {
        const shift = <f64>top + log64(sum);
        for (let i = 0; i < n; i++) store<f32>(y + i * s, <f32>(<f64>load<f32>(x + i * s) - shift));
      } else {
        const inv: f64 = 1.0 / sum;
        for (let i = 0; i < n; i++) {
          const e = cached ? load<f64>(cache + (i << 3)) : exp64(<f64>load<f32>(x + i * s) - <f64>top);
          store<f32>(y + i * s, <f32>(e * inv));
        }
      }
    }
  }
  customop_cleanup();
}

/**
 * ArgMax (kind 0) or ArgMin (kind 1) along the middle dimension of [outer, n, inner], as int64. ints: kind,
 * select_last_index (0 or 1), outer, n, inner. Input X; output Y int64 [outer, inner].
 */
export function arg_f32(): void {
  const px = nextInput(), py = nextOutput();
  const kind = nextInt(), last = nextInt() != 0, outer = nextInt(), n = nextInt(), inner = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const lanes = outer * inner;
    const per = (lanes + total - 1) / total;
    const end = min(lanes, (cpu + 1) * per);
    for (let l = min(lanes, cpu * per); l < end; l++) {
      const x = px + (((l / inner) * n * inner + l % inner) << 2), s = inner << 2;
      let best = load<f32>(x);
      let at = 0;
      for (let i = 1; i < n; i++) {
        const v = load<f32>(x + i * s);
        const better = kind == 0 ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        if (better) {
          best = v;
          at = i;
        }
      }
      store<i64>(py + (l << 3), <i64>at);
    }
  }
  customop_cleanup();
}
