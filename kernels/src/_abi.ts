// The Q7 kernel ABI as AssemblyScript declarations: every import comes from module "env" (docs/kernel-abi.md).
// Files starting with "_" are helpers shared by the kernels; build.mjs does not build them on their own.

/** The PRID rank 0..7 (seed: spmd-teardown §1 — get_cpu_id() is the silicon PRID). */
@external("env", "get_cpu_id")
export declare function get_cpu_id(): i32;

/** The cluster width: always 8 (seed: spmd-teardown §1 — a compile-time constant on the device). */
@external("env", "get_cpu_count")
export declare function get_cpu_count(): i32;

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

/** Appends bytes [ptr, ptr + len) to stream 1 (stdout) or 2 (stderr). */
@external("env", "q7_write")
export declare function q7_write(stream: i32, ptr: i32, len: i32): void;

// Tensor descriptor layout: 32 bytes, little-endian u32 fields (`@nrt/core/isa`'s TensorDescField; the kernels are
// AssemblyScript and cannot import it, so tests/kernel_abi_layout_test.ts holds the two equal).
export const DESC_FIELD_ADDR: i32 = 0;
export const DESC_FIELD_BYTES: i32 = 4;
export const DESC_FIELD_DTYPE: i32 = 8;
export const DESC_FIELD_RANK: i32 = 12;
export const DESC_FIELD_DIMS: i32 = 16;

/** The first local DRAM address; dram_addr_to_soc_addr maps it to the start of this core's slice. */
export const LOCAL_DRAM: i32 = 0x80000;

/** Data address of the tensor described at `desc`. */
@inline export function tensorData(desc: i32): i32 {
  return load<i32>(desc, DESC_FIELD_ADDR);
}

/** Byte size of the tensor described at `desc`. */
@inline export function tensorBytes(desc: i32): i32 {
  return load<i32>(desc, DESC_FIELD_BYTES);
}

/** Rank (0..4) of the tensor described at `desc`. */
@inline export function tensorRank(desc: i32): i32 {
  return load<i32>(desc, DESC_FIELD_RANK);
}

/** Dimension `i` of the tensor described at `desc`. */
@inline export function tensorDim(desc: i32, i: i32): i32 {
  return load<i32>(desc + (i << 2), DESC_FIELD_DIMS);
}

/** Element count from rank and dims (a rank-0 tensor holds one element). */
export function tensorElements(desc: i32): i32 {
  const rank = tensorRank(desc);
  let n = 1;
  for (let i = 0; i < rank; i++) n *= tensorDim(desc, i);
  return n;
}

/** Elements per core when `n` elements are split over `total` cores: ceil(n / total). */
@inline export function chunkOf(n: i32, total: i32): i32 {
  return (n + total - 1) / total;
}

/** First element of this core's share: cpu · chunk. */
@inline export function shareStart(n: i32, cpu: i32, total: i32): i32 {
  return min(n, cpu * chunkOf(n, total));
}

/** One past the last element of this core's share: min(n, (cpu + 1) · chunk). */
@inline export function shareEnd(n: i32, cpu: i32, total: i32): i32 {
  return min(n, (cpu + 1) * chunkOf(n, total));
}
