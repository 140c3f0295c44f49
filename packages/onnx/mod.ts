/**
 * `@nrt/onnx`: the ONNX compiler front end. {@linkcode compileOnnx} takes a trained ONNX model and compiles it
 * into GPSIMD custom-op kernel calls for the 8 simulated Q7 cores: it parses the model (with caps on untrusted
 * input), resolves dynamic dims from the given input shapes, infers shapes, folds constants, fuses, aliases views,
 * lowers every node through the op library (`kernels/ops/lowering.ts`) and plans intermediate memory. The result,
 * a {@linkcode CompiledOnnxModel}, is plain data the runtime side turns into a NEFF. {@linkcode OnnxBuilder}
 * writes ONNX models in code, for tests and examples.
 *
 * @example Compile a model built in code
 * ```ts
 * import { compileOnnx, OnnxBuilder } from "@nrt/onnx";
 * const b = new OnnxBuilder("relu");
 * b.output(b.node("Relu", [b.input("x", "float32", ["batch", 4])], {}, { outputs: ["y"] }), "float32", ["batch", 4]);
 * const compiled = compileOnnx(b.toBytes(), { inputShapes: { x: [2, 4] } });
 * console.log(compiled.calls.map((c) => `${c.library}.${c.fn}`)); // [ "activation.unary_f32" ]
 * ```
 *
 * @module
 */
export { compileOnnx, type CompileOptions, DEFAULT_SPMD_MIN_WORK } from "./compile.ts";
export type {
  CompiledCall,
  CompiledOnnxModel,
  CompiledTensor,
  CompiledWeight,
  CompileStats,
  IntermediateBuffer,
  MemoryReport,
  ValuePlacement,
} from "./compiled_model.ts";
export { OnnxCompileError, type OnnxErrorSite } from "./error.ts";
export { buildOnnxNeff, descriptorShape, type OnnxNeffOptions } from "./onnx_neff.ts";
export { DEFAULT_LIMITS, type OnnxLimits, OPSET_RANGE } from "./parse.ts";
export type { Lowering } from "./lower.ts";
/** The op library's shapes that this package's signatures name. */
export type { KernelCall, OpDtype, OpNode, OpValue } from "@nrt/ops";
export { OP_LIBRARY } from "./op_library.ts";
export {
  type BuilderAttribute,
  type BuilderDim,
  float,
  FloatAttr,
  type NodeOptions,
  OnnxBuilder,
  SubGraph,
} from "./onnx_builder.ts";
export { ConstTensor } from "./tensor.ts";
export { BUFFER_ALIGN, type MemoryPlan, planMemory, type PlannedBuffer, type PlanValue } from "./memory_plan.ts";
