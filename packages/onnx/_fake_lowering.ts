/**
 * Private: a stand-in op library for the compiler's unit tests, independent of the real kernels: every supported
 * node lowers to one call `fake.<opType>` that reads all its inputs and writes all its outputs. Ours.
 *
 * @module
 */
import { type KernelCall, type OpNode, UnsupportedOpError } from "@nrt/ops";
import type { Lowering } from "./lower.ts";

/** The ops the fake library supports. */
export const FAKE_SUPPORTED_OPS: readonly string[] = [
  "Add",
  "AveragePool",
  "Concat",
  "Conv",
  "Div",
  "Erf",
  "Gather",
  "Gelu",
  "Gemm",
  "GlobalAveragePool",
  "Identity",
  "LayerNormalization",
  "MatMul",
  "MaxPool",
  "Mul",
  "Neg",
  "Pow",
  "ReduceMean",
  "Relu",
  "Reshape",
  "Sigmoid",
  "Slice",
  "Softmax",
  "Sqrt",
  "Sub",
  "Tanh",
  "Transpose",
  "nrt.FusedGemm",
  "nrt.LayerNorm",
];

/** A fake lowering over `ops` (default {@linkcode FAKE_SUPPORTED_OPS}); it refuses float64 to test that path. */
export function fakeLowering(ops: readonly string[] = FAKE_SUPPORTED_OPS): Lowering {
  return {
    supportedOps: ops,
    fusedActivations: ["Relu", "Gelu", "Sigmoid", "Tanh"],
    lowerNode(node: OpNode): KernelCall[] {
      if (node.inputs.some((v) => v?.dtype === "float64")) {
        throw new UnsupportedOpError(node, "dtype float64 is not supported (supported: float32)");
      }
      return [{
        library: "fake",
        fn: node.opType.toLowerCase(),
        totalCpus: 8,
        inputs: node.inputs.flatMap((v) => (v === undefined ? [] : [v.name])),
        outputs: node.outputs.map((v) => v.name),
        ints: [],
      }];
    },
  };
}
