// relu: y = max(x, 0) over float32 (a NaN stays NaN, -0 becomes +0).
import { customop_cleanup, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorBytes, tensorData } from "./_abi";

export function relu(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && x != 0 && y != 0) {
    const n = tensorBytes(y) >>> 2;
    const end = shareEnd(n, cpu, total);
    const px = tensorData(x), py = tensorData(y);
    for (let i = shareStart(n, cpu, total); i < end; i++) {
      const off = i << 2;
      const v = load<f32>(px + off);
      store<f32>(py + off, v > 0 ? v : (v != v ? v : 0));
    }
  }
  customop_cleanup();
}
