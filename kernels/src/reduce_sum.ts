// sum_all: a total_cpus = 1 library — core 0 sums the whole float32 input (in float64, in index order) into a
// one-element float32 output.
import { customop_cleanup, customop_next_tensor, customop_return_tensor, get_cpu_id, tensorBytes, tensorData } from "./_abi";

export function sum_all(): void {
  const x = customop_next_tensor();
  const y = customop_return_tensor();
  if (get_cpu_id() == 0 && x != 0 && y != 0) {
    const n = tensorBytes(x) >>> 2;
    const px = tensorData(x);
    let acc: f64 = 0;
    for (let i = 0; i < n; i++) acc += <f64>load<f32>(px + (i << 2));
    store<f32>(tensorData(y), <f32>acc);
  }
  customop_cleanup();
}
