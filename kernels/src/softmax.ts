// softmax_rows: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)) over a float32 [rows, cols] tensor,
// each core taking its share of the rows. Exponentials and the row sum are computed in float64.
import { customop_cleanup, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorData, tensorDim, tensorRank } from "./_abi";

const LOG2E: f64 = 1.4426950408889634;
const LN2_HI: f64 = 6.93147180369123816490e-01;
const LN2_LO: f64 = 1.90821492927058770002e-10;

/** e^x for x ≤ 0 to float64 accuracy, without lookup tables (so the module carries no data segment). */
function expNonPositive(x: f64): f64 {
  // Below -120 the float32 result of the division is 0 anyway (the row sum is ≥ 1).
  if (x < -120.0) return 0.0;
  const k = nearest<f64>(x * LOG2E);
  const r = x - k * LN2_HI - k * LN2_LO; // |r| ≤ ln2 / 2
  // Taylor series to r^13: the truncation error is below 2^-60 for |r| ≤ 0.35.
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
  p = p * r + 1.0;
  // 2^k built from its exponent bits; k ≥ -174 here, so the result is a normal float64.
  return p * reinterpret<f64>((<i64>k + 1023) << 52);
}

export function softmax_rows(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && x != 0 && y != 0) {
    const rank = tensorRank(x);
    const rows = rank == 2 ? tensorDim(x, 0) : 1;
    const cols = rank == 2 ? tensorDim(x, 1) : (rank == 1 ? tensorDim(x, 0) : 1);
    const end = shareEnd(rows, cpu, total);
    const px = tensorData(x), py = tensorData(y);
    for (let r = shareStart(rows, cpu, total); r < end; r++) {
      const rx = px + ((r * cols) << 2);
      const ry = py + ((r * cols) << 2);
      let top = load<f32>(rx);
      for (let j = 1; j < cols; j++) top = max(top, load<f32>(rx + (j << 2)));
      // The output row doubles as scratch for the exponentials.
      let sum: f64 = 0;
      for (let j = 0; j < cols; j++) {
        const e = expNonPositive(<f64>load<f32>(rx + (j << 2)) - <f64>top);
        sum += e;
        store<f32>(ry + (j << 2), <f32>e);
      }
      const inv: f64 = 1.0 / sum;
      for (let j = 0; j < cols; j++) {
        store<f32>(ry + (j << 2), <f32>(<f64>load<f32>(ry + (j << 2)) * inv));
      }
    }
  }
  customop_cleanup();
}
