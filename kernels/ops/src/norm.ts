// Normalizations over float32: LayerNormalization (and the fused nrt.LayerNorm), BatchNormalization in
// inference mode, InstanceNormalization. Means and variances are float64, two-pass (mean, then the mean of the
// squared deviations), so there is no cancellation between E[x²] and E[x]².
import { alignedChunk, customop_cleanup, customop_total_cpus, get_cpu_id, nextF64, nextInput, nextInt, nextOutput } from "./_abi";

// Scale and bias modes of layer_norm_f32.
const PER_ELEMENT: i32 = 1;
const SCALAR: i32 = 2;

/** Mean of n float32 at p (stride 1). */
function meanOf(p: i32, n: i32): f64 {
  let i = 0;
  let s: f64 = 0;
  if (ASC_FEATURE_SIMD) {
    let v = f64x2.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(p + (i << 2));
      v = f64x2.add(v, f64x2.promote_low_f32x4(x));
      v = f64x2.add(v, f64x2.promote_low_f32x4(v128.shuffle<f32>(x, x, 2, 3, 2, 3)));
    }
    s = f64x2.extract_lane(v, 0) + f64x2.extract_lane(v, 1);
  }
  for (; i < n; i++) s += <f64>load<f32>(p + (i << 2));
  return s / <f64>n;
}

/** Mean of (x - mean)² over n float32 at p (stride 1). */
function varianceOf(p: i32, n: i32, mean: f64): f64 {
  let i = 0;
  let s: f64 = 0;
  if (ASC_FEATURE_SIMD) {
    const m = f64x2.splat(mean);
    let v = f64x2.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(p + (i << 2));
      const d0 = f64x2.sub(f64x2.promote_low_f32x4(x), m);
      const d1 = f64x2.sub(f64x2.promote_low_f32x4(v128.shuffle<f32>(x, x, 2, 3, 2, 3)), m);
      v = f64x2.add(v, f64x2.add(f64x2.mul(d0, d0), f64x2.mul(d1, d1)));
    }
    s = f64x2.extract_lane(v, 0) + f64x2.extract_lane(v, 1);
  }
  for (; i < n; i++) {
    const d = <f64>load<f32>(p + (i << 2)) - mean;
    s += d * d;
  }
  return s / <f64>n;
}

/**
 * Y = (X - mean) / sqrt(var + epsilon) · scale + bias over rows of n elements. ints: rows, n, epsilon (float64
 * bits), scale mode, bias mode (0 absent, 1 one value per element of a row, 2 one scalar), hasMean, hasInvStd.
 * Inputs X [rows, n], then scale and bias when present; outputs Y, then Mean [rows] and InvStdDev [rows] when
 * asked for. Rows are split over the cores.
 */
export function layer_norm_f32(): void {
  const px = nextInput();
  const rows = nextInt(), n = nextInt(), eps = nextF64();
  const scaleMode = nextInt(), biasMode = nextInt(), hasMean = nextInt() != 0, hasInv = nextInt() != 0;
  const ps = scaleMode != 0 ? nextInput() : 0, pb = biasMode != 0 ? nextInput() : 0;
  const py = nextOutput();
  const pm = hasMean ? nextOutput() : 0, pi = hasInv ? nextOutput() : 0;
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const per = (rows + total - 1) / total;
    const end = min(rows, (cpu + 1) * per);
    for (let r = min(rows, cpu * per); r < end; r++) {
      const x = px + ((r * n) << 2), y = py + ((r * n) << 2);
      const mean = meanOf(x, n);
      const inv = 1.0 / sqrt<f64>(varianceOf(x, n, mean) + eps);
      for (let i = 0; i < n; i++) {
        let v = (<f64>load<f32>(x + (i << 2)) - mean) * inv;
        if (scaleMode == PER_ELEMENT) v *= <f64>load<f32>(ps + (i << 2));
        else if (scaleMode == SCALAR) v *= <f64>load<f32>(ps);
        if (biasMode == PER_ELEMENT) v += <f64>load<f32>(pb + (i << 2));
        else if (biasMode == SCALAR) v += <f64>load<f32>(pb);
        store<f32>(y + (i << 2), <f32>v);
      }
      if (hasMean) store<f32>(pm + (r << 2), <f32>mean);
      if (hasInv) store<f32>(pi + (r << 2), <f32>inv);
    }
  }
  customop_cleanup();
}

/**
 * Inference-mode batch normalization over channel axis 1: Y = (X - mean[c]) · scale[c] / sqrt(var[c] + epsilon)
 * + B[c]. ints: N, C, inner (elements per channel per image), epsilon (float64 bits). Inputs X, scale, B, mean,
 * var; output Y. Elements are split over the cores.
 */
export function batch_norm_f32(): void {
  const px = nextInput(), ps = nextInput(), pb = nextInput(), pm = nextInput(), pv = nextInput();
  const py = nextOutput();
  const n = nextInt(), c = nextInt(), inner = nextInt(), eps = nextF64();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const count = n * c * inner;
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let i = min(count, cpu * chunk);
    while (i < end) {
      const ch = (i / inner) % c;
      const runEnd = min(end, (i / inner + 1) * inner);
      const mean = <f64>load<f32>(pm + (ch << 2));
      const a = <f64>load<f32>(ps + (ch << 2)) / sqrt<f64>(<f64>load<f32>(pv + (ch << 2)) + eps);
      const b = <f64>load<f32>(pb + (ch << 2));
      for (; i < runEnd; i++) store<f32>(py + (i << 2), <f32>((<f64>load<f32>(px + (i << 2)) - mean) * a + b));
    }
  }
  customop_cleanup();
}

/**
 * Instance normalization: each (image, channel) plane of `inner` elements normalized by its own mean and
 * variance, then Y = Ŷ · scale[c] + B[c]. ints: N, C, inner, epsilon (float64 bits). Inputs X, scale, B; output Y.
 * Planes are split over the cores.
 */
export function instance_norm_f32(): void {
  const px = nextInput(), ps = nextInput(), pb = nextInput();
  const py = nextOutput();
  const n = nextInt(), c = nextInt(), inner = nextInt(), eps = nextF64();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const planes = n * c;
    const per = (planes + total - 1) / total;
    const end = min(planes, (cpu + 1) * per);
    for (let p = min(planes, cpu * per); p < end; p++) {
      const ch = p % c;
      const x = px + ((p * inner) << 2), y = py + ((p * inner) << 2);
      const mean = meanOf(x, inner);
      const a = <f64>load<f32>(ps + (ch << 2)) / sqrt<f64>(varianceOf(x, inner, mean) + eps);
      const b = <f64>load<f32>(pb + (ch << 2));
      for (let i = 0; i < inner; i++) store<f32>(y + (i << 2), <f32>((<f64>load<f32>(x + (i << 2)) - mean) * a + b));
    }
  }
  customop_cleanup();
}
