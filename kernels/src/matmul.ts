// matmul: C[M, N] = A[M, K] · B[K, N] over float32, each core taking its share of the rows of C.
// Each dot product accumulates in float64 and is rounded once.
import { customop_cleanup, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorData, tensorDim } from "./_abi";

export function matmul(): void {
  const a = customop_next_tensor();
  const b = customop_next_tensor();
  const c = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && a != 0 && b != 0 && c != 0) {
    const m = tensorDim(a, 0), k = tensorDim(a, 1), n = tensorDim(b, 1);
    const pa = tensorData(a), pb = tensorData(b), pc = tensorData(c);
    const end = shareEnd(m, cpu, total);
    for (let i = shareStart(m, cpu, total); i < end; i++) {
      const rowA = pa + ((i * k) << 2);
      const rowC = pc + ((i * n) << 2);
      for (let j = 0; j < n; j++) {
        let acc: f64 = 0;
        let pbj = pb + (j << 2);
        for (let t = 0; t < k; t++) {
          acc += <f64>load<f32>(rowA + (t << 2)) * <f64>load<f32>(pbj);
          pbj += n << 2;
        }
        store<f32>(rowC + (j << 2), <f32>acc);
      }
    }
  }
  customop_cleanup();
}
