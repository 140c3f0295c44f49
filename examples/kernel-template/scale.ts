// scale: y = x * k for float32 tensors, where k is the call's first scalar argument.
// Each of the 8 Q7 cores takes its share of the elements, chosen by get_cpu_id() over customop_total_cpus().
// The imports come from the kernel ABI (docs/kernel-abi.md); `nrt pack` supplies _abi.ts when this folder has none.
import {
  customop_cleanup,
  customop_next_int,
  customop_next_tensor,
  customop_return_tensor,
  customop_total_cpus,
  get_cpu_id,
  shareEnd,
  shareStart,
  tensorBytes,
  tensorData,
} from "./_abi";

export function scale(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  const k = <f32> customop_next_int();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && x != 0 && y != 0) {
    const n = tensorBytes(y) >>> 2;
    const px = tensorData(x), py = tensorData(y);
    const end = shareEnd(n, cpu, total);
    for (let i = shareStart(n, cpu, total); i < end; i++) store<f32>(py + (i << 2), load<f32>(px + (i << 2)) * k);
  }
  customop_cleanup(); // the commit fence: this core's results are visible once the DRAIN joins all 8
}
