// ext_isa: the base ext-ISA library every GPSIMD NEFF bundles as library 0 (ours: the simulator's stand-in for the
// base library of runtime-synthesis §3.1, `num_libs > 1` ⇔ custom ops). Two extended instructions, SPMD over the
// participating cores by byte ranges: ext_copy (output 0 = input 0) and ext_fill (every byte of output 0 = int 0).
import { customop_cleanup, customop_next_int, customop_next_tensor, customop_return_tensor, customop_total_cpus, get_cpu_id, shareEnd, shareStart, tensorBytes, tensorData } from "./_abi";

export function ext_copy(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && x != 0 && y != 0) {
    const n = min(tensorBytes(x), tensorBytes(y));
    const start = shareStart(n, cpu, total);
    memory.copy(tensorData(y) + start, tensorData(x) + start, shareEnd(n, cpu, total) - start);
  }
  customop_cleanup();
}

export function ext_fill(): void {
  const y = customop_return_tensor();
  const value = <i32>(customop_next_int() & 0xff);
  const cpu = get_cpu_id();
  const total = customop_total_cpus();
  if (cpu < total && y != 0) {
    const n = tensorBytes(y);
    const start = shareStart(n, cpu, total);
    memory.fill(tensorData(y) + start, <u8>value, shareEnd(n, cpu, total) - start);
  }
  customop_cleanup();
}
