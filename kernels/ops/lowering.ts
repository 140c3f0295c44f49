/**
 * The lowering rules of the SPMD op library: {@linkcode lowerNode} turns one ONNX node (or a fused node of domain
 * "nrt") into the kernel calls that compute it on the 8 Q7 cores of a NeuronCore, and {@linkcode SUPPORTED_OPS}
 * lists what it supports. The kernels are the AssemblyScript libraries of `src/` (built into `wasm/`); README.md
 * documents each function's scalar arguments. Ours: the seeds say nothing about ONNX.
 *
 * Contract with the compiler (see op_node.ts):
 * - Shapes are static. A node whose input or output is empty is rejected (the compiler removes it).
 * - Inputs that steer the computation (Reshape's shape, Slice's starts, Clip's bounds, Reduce axes, ...) must be
 *   constants (`OpValue.constant`).
 * - Calls run in order. A call's outputs are write-only: a kernel writes every element and reads none, so the
 *   compiler need not initialize them. Scratch values (`KernelCall.scratch`) are named `<node name>#<what>` and
 *   live only between the node's calls.
 * - Every call fits one NeuronCore's SBUF with its inputs and outputs ({@linkcode LowerOptions.sbufBytes}, 24 MiB
 *   by default, the smallest generation); a node that would not is rejected rather than tiled.
 * - Tensors of rank > 4 are fine: kernels read only the data address from a descriptor and take shapes from
 *   their scalar arguments, so the runtime may describe such a tensor with any dims of the right byte size.
 *
 * Fused ops (domain "nrt") the compiler may form; their attributes are documented where they are lowered:
 * - `nrt.FusedGemm` (_lower_linalg.ts): Gemm or MatMul + bias Add + optional activation.
 * - `nrt.FusedConv` (_lower_conv.ts): Conv + activation.
 * - `nrt.LayerNorm` (_lower_norm.ts): the decomposed layer-normalization pattern.
 * The activations they take are in _lower_activation.ts.
 *
 * @example Lower a Relu
 * ```ts
 * import { lowerNode } from "./lowering.ts";
 * const x = { name: "x", dtype: "float32", shape: [2, 3] } as const;
 * const y = { name: "y", dtype: "float32", shape: [2, 3] } as const;
 * const calls = lowerNode({ name: "r", domain: "", opType: "Relu", attributes: {}, inputs: [x], outputs: [y] });
 * console.log(calls[0].library, calls[0].fn); // activation unary_f32
 * ```
 *
 * @module
 */
import { type KernelCall, type OpDtype, type OpNode, UnsupportedOpError } from "./op_node.ts";
import { checked, type LoweringRule, nonEmpty, SBUF_BYTES } from "./_lower_util.ts";
import { ELEMENTWISE_RULES } from "./_lower_elementwise.ts";
import { ACTIVATION_RULES } from "./_lower_activation.ts";
import { LINALG_RULES } from "./_lower_linalg.ts";
import { CONV_RULES } from "./_lower_conv.ts";
import { REDUCE_RULES } from "./_lower_reduce.ts";
import { NORM_RULES } from "./_lower_norm.ts";
import { SHAPE_RULES } from "./_lower_shape.ts";
import { CONCAT_RULES } from "./_lower_concat.ts";

export { BinaryOp, CompareOp } from "./_lower_elementwise.ts";
export { Activation, UnaryOp } from "./_lower_activation.ts";
export { ReduceKind } from "./_lower_reduce.ts";
export { callWork } from "./_work.ts";

/** One supported op: its domain, type, element types and attributes (with the values supported). */
export interface SupportedOp {
  /** `""` for ONNX ops, `"nrt"` for fused ops. */
  readonly domain: "" | "nrt";
  /** The op type. */
  readonly opType: string;
  /** Supported element types of the main data input. */
  readonly dtypes: readonly OpDtype[];
  /** Supported attributes and their supported values; any other attribute is rejected. */
  readonly attributes: Readonly<Record<string, string>>;
  /** Restrictions worth knowing (constant inputs, ranks). */
  readonly notes?: string;
}

const RULES: readonly LoweringRule[] = [
  ...ELEMENTWISE_RULES,
  ...ACTIVATION_RULES,
  ...LINALG_RULES,
  ...CONV_RULES,
  ...REDUCE_RULES,
  ...NORM_RULES,
  ...SHAPE_RULES,
  ...CONCAT_RULES,
];

const BY_KEY: ReadonlyMap<string, LoweringRule> = new Map(RULES.map((r) => [`${r.domain}:${r.opType}`, r]));

/** Every op {@linkcode lowerNode} supports, for error messages and documentation. */
export const SUPPORTED_OPS: readonly SupportedOp[] = RULES.map(({ domain, opType, dtypes, attributes, notes }) => ({
  domain,
  opType,
  dtypes,
  attributes,
  ...(notes ? { notes } : {}),
}));

/** Ops the compiler must fold into constants before lowering (their outputs depend only on static shapes). */
const FOLD_ONLY = new Set(["Shape", "Size", "ConstantOfShape", "Constant", "Range", "EyeLike"]);

/** Options of {@linkcode lowerNode}. */
export interface LowerOptions {
  /** SBUF bytes one call's inputs and outputs may use; default 24 MiB (the smallest NeuronCore generation). */
  readonly sbufBytes?: number;
}

/**
 * Lowers one node into kernel calls, run in order.
 *
 * @param node the node, with static shapes
 * @param options the SBUF budget
 * @returns the calls
 * @throws {UnsupportedOpError} naming what is unsupported: the op, an attribute value, a dtype, a rank, a
 *   non-constant input that must be constant, or a size beyond the SBUF budget
 */
export function lowerNode(node: OpNode, options: LowerOptions = {}): KernelCall[] {
  const rule = BY_KEY.get(`${node.domain}:${node.opType}`);
  if (!rule) {
    if (node.domain === "" && FOLD_ONLY.has(node.opType)) {
      throw new UnsupportedOpError(node, "the op must be constant-folded before lowering");
    }
    throw new UnsupportedOpError(node, "the op is not supported");
  }
  nonEmpty(node);
  return checked(node, rule.lower(node), options.sbufBytes ?? SBUF_BYTES);
}
