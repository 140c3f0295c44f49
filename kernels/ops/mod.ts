/**
 * `@nrt/ops`: the SPMD op library that `nrt compile` lowers ONNX nodes to — the node and kernel-call shapes, the
 * lowering rules (which ops, dtypes and attributes are supported, and the kernel calls each node becomes), and the
 * location of the compiled GPSIMD kernels (`wasm/<library>.wasm`, built from the AssemblyScript in `src/`).
 * Ours: the seeds say nothing about ONNX; the kernels follow the kernel ABI of docs/kernel-abi.md.
 *
 * @example Which ops the library lowers
 * ```ts
 * import { SUPPORTED_OPS } from "@nrt/ops";
 * console.log(SUPPORTED_OPS.some((op) => op.opType === "Gemm")); // true
 * ```
 *
 * @module
 */
export {
  type KernelCall,
  type OpAttribute,
  type OpDtype,
  type OpNode,
  type OpValue,
  UnsupportedOpError,
} from "./op_node.ts";
export {
  Activation,
  BinaryOp,
  callWork,
  CompareOp,
  lowerNode,
  type LowerOptions,
  ReduceKind,
  SUPPORTED_OPS,
  type SupportedOp,
  UnaryOp,
} from "./lowering.ts";

/** The folder of the compiled op libraries, `<library>.wasm` each. */
export const OP_LIBRARY_WASM_DIR: URL = new URL("./wasm/", import.meta.url);
