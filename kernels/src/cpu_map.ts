// cpu_map: writes each core's id over its share of an int32 output shaped like the input, so a test can see
// exactly which elements each core owned. Only the input's element count (from rank and dims) matters.
import { customop_cleanup, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorBytes, tensorData, tensorElements } from "./_abi";

export function cpu_map(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && x != 0 && y != 0) {
    const n = min(tensorElements(x), tensorBytes(y) >>> 2);
    const end = shareEnd(n, cpu, total);
    const py = tensorData(y);
    for (let i = shareStart(n, cpu, total); i < end; i++) store<i32>(py + (i << 2), cpu);
  }
  customop_cleanup();
}
