/**
 * The contract between the ONNX compiler (`packages/onnx`, which parses, infers shapes, folds constants and fuses)
 * and the op library's lowering rules (`kernels/ops/lowering.ts`, which turns one node into kernel calls). Ours:
 * the seeds say nothing about ONNX.
 *
 * Every shape here is static: the compiler has resolved dynamic dimensions before lowering.
 *
 * @module
 */

/** A tensor element type by its NEFF dtype name (`docs/kernel-abi.md` dtype codes). */
export type OpDtype =
  | "float32"
  | "float16"
  | "bfloat16"
  | "float64"
  | "int8"
  | "uint8"
  | "int16"
  | "uint16"
  | "int32"
  | "uint32"
  | "int64"
  | "uint64"
  | "bool";

/** One value a node reads or writes. */
export interface OpValue {
  /** The value's name in the graph (unique). */
  readonly name: string;
  /** Element type. */
  readonly dtype: OpDtype;
  /** Static shape (rank 0 = scalar). */
  readonly shape: readonly number[];
  /** Little-endian bytes when the value is a constant (weights, folded values); absent for runtime values. */
  readonly constant?: Uint8Array;
}

/** An attribute value after decoding (ONNX `AttributeProto`). */
export type OpAttribute = number | string | readonly number[] | readonly string[] | OpValue;

/** One node to lower: an ONNX op (domain "") or a fused op of ours (domain "nrt"). */
export interface OpNode {
  /** Node name (for error messages; unique in the graph). */
  readonly name: string;
  /** `""` for ONNX ops, `"nrt"` for the fused ops the compiler forms. */
  readonly domain: "" | "nrt";
  /** The op type, e.g. `"Conv"` or, in domain `"nrt"`, a fused op. */
  readonly opType: string;
  /** Decoded attributes. */
  readonly attributes: Readonly<Record<string, OpAttribute>>;
  /** Inputs in ONNX order; `undefined` for an omitted optional input. */
  readonly inputs: ReadonlyArray<OpValue | undefined>;
  /** Outputs in ONNX order. */
  readonly outputs: readonly OpValue[];
  /**
   * The model's opset version for the node's domain (the `ai.onnx` import for domain `""`). Only ops whose
   * meaning changed between versions read it (Softmax, LogSoftmax and Hardmax before opset 13 flatten the axes
   * from `axis` on); absent means a current opset.
   */
  readonly opset?: number;
}

/** One kernel call a node lowers to, run in order. */
export interface KernelCall {
  /** Library (a `kernels/ops/wasm/<library>.wasm`). */
  readonly library: string;
  /** Exported function of the library. */
  readonly fn: string;
  /** Fan-out: 8 (SPMD over all Q7 cores) or 1 (core 0 only). */
  readonly totalCpus: 1 | 8;
  /**
   * Input value names in the order the kernel reads them with `customop_next_tensor`. They name node inputs,
   * constants or {@linkcode KernelCall.scratch} values.
   */
  readonly inputs: readonly string[];
  /** Output value names in the order `customop_return_tensor` returns them (node outputs or scratch values). */
  readonly outputs: readonly string[];
  /** Scalar arguments read with `customop_next_int`, in order (floats travel as their bit patterns). */
  readonly ints: readonly bigint[];
  /** Values this call introduces that live only between the node's calls (e.g. a partial-sum buffer). */
  readonly scratch?: readonly OpValue[];
}

/** Thrown when a node cannot be lowered; the compiler reports it with the node name and the supported list. */
export class UnsupportedOpError extends Error {
  /** The node. */
  readonly node: string;
  /** The op type. */
  readonly opType: string;

  /** Creates the error; `why` says what is unsupported (an attribute value, a dtype, a rank). */
  constructor(node: OpNode, why: string) {
    super(`Cannot lower node "${node.name}" (${node.domain === "" ? "" : `${node.domain}.`}${node.opType}): ${why}`);
    this.name = "UnsupportedOpError";
    this.node = node.name;
    this.opType = node.opType;
  }
}
