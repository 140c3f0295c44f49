// vector_add: c = a + b over float32, each core adding its share of the elements.
import { customop_cleanup, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorBytes, tensorData } from "./_abi";

export function vector_add(): void {
  const a = customop_next_tensor();
  const b = customop_next_tensor();
  const c = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && a != 0 && b != 0 && c != 0) {
    const n = tensorBytes(c) >>> 2;
    const end = shareEnd(n, cpu, total);
    const pa = tensorData(a), pb = tensorData(b), pc = tensorData(c);
    for (let i = shareStart(n, cpu, total); i < end; i++) {
      const off = i << 2;
      store<f32>(pc + off, load<f32>(pa + off) + load<f32>(pb + off));
    }
  }
  customop_cleanup();
}
