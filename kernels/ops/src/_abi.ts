// The Q7 kernel ABI as AssemblyScript declarations (docs/kernel-abi.md), plus the argument readers and the
// partition arithmetic every op library shares. Files starting with "_" are helpers; build.mjs builds only the
// libraries that import them.
//
// The op kernels read only the data address of a tensor descriptor: shapes, strides and attributes travel as
// scalar arguments (customop_next_int), because descriptors hold rank <= 4 and ONNX tensors may have more.

/** The PRID rank 0..7 (seed: spmd-teardown §1 — get_cpu_id() is the silicon PRID). */
@external("env", "get_cpu_id")
export declare function get_cpu_id(): i32;

/** The running op's total_cpus attribute, 1 or 8 (seed: spmd-teardown §1.1). */
@external("env", "customop_total_cpus")
export declare function customop_total_cpus(): i32;

/** Address of the next input tensor descriptor, 0 when none is left. */
@external("env", "customop_next_tensor")
export declare function customop_next_tensor(): i32;

/** Address of the next output tensor descriptor, 0 when none is left. */
@external("env", "customop_return_tensor")
export declare function customop_return_tensor(): i32;

/** The next scalar argument, 0 when none is left. */
@external("env", "customop_next_int")
export declare function customop_next_int(): i64;

/** The commit fence (seed: spmd-teardown §4.2 — memw in customop_cleanup). Call it last. */
@external("env", "customop_cleanup")
export declare function customop_cleanup(): void;

/** Rebases a local DRAM address [0x80000, 0x90000) into this core's SoC slice (seed: spmd-teardown §3). */
@external("env", "dram_addr_to_soc_addr")
export declare function dram_addr_to_soc_addr(addr: i32): i32;

/** The first local DRAM address; dram_addr_to_soc_addr maps it to the start of this core's 64 KiB slice. */
export const LOCAL_DRAM: i32 = 0x80000;

/** Bytes of the local DRAM window a core may use as private scratch. */
export const LOCAL_DRAM_BYTES: i32 = 0x10000;

/** Data address of the next input tensor (0 when none is left). */
export function nextInput(): i32 {
  const d = customop_next_tensor();
  return d == 0 ? 0 : load<i32>(d);
}

/** Data address of the next output tensor (0 when none is left). */
export function nextOutput(): i32 {
  const d = customop_return_tensor();
  return d == 0 ? 0 : load<i32>(d);
}

/** The next scalar argument as an i32. */
@inline export function nextInt(): i32 {
  return <i32>customop_next_int();
}

/** The next scalar argument as a float64 (it travels as its IEEE-754 bit pattern). */
@inline export function nextF64(): f64 {
  return reinterpret<f64>(customop_next_int());
}

/** Elements per core when `n` elements are split over `total` cores: ceil(n / total). */
@inline export function chunkOf(n: i32, total: i32): i32 {
  return (n + total - 1) / total;
}

/** First item of core `cpu`'s share of `n`: min(n, cpu · chunk). */
@inline export function shareStart(n: i32, cpu: i32, total: i32): i32 {
  return min(n, cpu * chunkOf(n, total));
}

/** One past the last item of core `cpu`'s share of `n`: min(n, (cpu + 1) · chunk). */
@inline export function shareEnd(n: i32, cpu: i32, total: i32): i32 {
  return min(n, (cpu + 1) * chunkOf(n, total));
}

/** ceil(n / total) rounded up to a multiple of `align`, so that cores write whole cache lines. */
@inline export function alignedChunk(n: i32, total: i32, align: i32): i32 {
  return (chunkOf(n, total) + align - 1) / align * align;
}

/** This core's private scratch: the start of its SoC slice, reached through the local DRAM window. */
@inline export function localScratch(): i32 {
  return dram_addr_to_soc_addr(LOCAL_DRAM);
}

/** Maximum rank the strided walkers handle (after the lowering has merged contiguous dimensions). */
export const MAX_DIMS: i32 = 8;
