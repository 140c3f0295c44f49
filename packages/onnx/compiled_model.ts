/**
 * `CompiledOnnxModel`: what {@linkcode compileOnnx} hands the runtime side, a plain data structure (no classes,
 * no functions) from which a NEFF is built: the model's interface, its weights, the intermediate buffers to
 * allocate at load, where every value lives, and the kernel calls to run in order. Ours.
 *
 * How to execute it: allocate `buffers`; bind `inputs`, `outputs` and `weights`; for each call in order, describe
 * every value it names at its placement (`values[name]`: storage, offset, dtype, shape) and dispatch
 * `library.fn` on `totalCpus` Q7 cores with those tensor descriptors and `ints`.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";

/** A model input or output. */
export interface CompiledTensor {
  /** Name (the ONNX graph input/output name). */
  readonly name: string;
  /** Element type. */
  readonly dtype: OpDtype;
  /** Static shape (dynamic dims resolved from the input shapes given at compile time). */
  readonly shape: readonly number[];
}

/** A constant the calls read: an initializer, a folded value, or a constant a lowering made. */
export interface CompiledWeight {
  /** Value name the calls use. */
  readonly name: string;
  /** Element type. */
  readonly dtype: OpDtype;
  /** Shape. */
  readonly shape: readonly number[];
  /** Little-endian element data. */
  readonly bytes: Uint8Array;
}

/** A device buffer for intermediate values, allocated at load and shared by values whose lifetimes differ. */
export interface IntermediateBuffer {
  /** Id, 0-based; {@linkcode ValuePlacement.buffer} refers to it. */
  readonly id: number;
  /** Size in bytes (a multiple of 64). */
  readonly bytes: number;
}

/** Where one value named by a call lives. */
export interface ValuePlacement {
  /**
   * The storage: a model `"input"` or `"output"` tensor (the caller's), a `"weight"`, or an intermediate
   * `"buffer"`. A view (Reshape, Squeeze, …) lives where its source lives.
   */
  readonly storage: "input" | "output" | "weight" | "buffer";
  /** For `input`, `output` and `weight`: the tensor's name in `inputs`, `outputs` or `weights`. */
  readonly tensor?: string;
  /** For `buffer`: the buffer id. */
  readonly buffer?: number;
  /** Byte offset inside the storage. */
  readonly offset: number;
  /** For a view (Reshape, Squeeze, …): the value whose bytes it shares, which owns the storage. */
  readonly aliasOf?: string;
  /** Element type of the value (a view may differ in shape from its storage's other values, never in bytes). */
  readonly dtype: OpDtype;
  /** Shape of the value. */
  readonly shape: readonly number[];
  /** Byte size of the value. */
  readonly byteLength: number;
}

/** One kernel dispatch. */
export interface CompiledCall {
  /** The graph node it comes from (for messages and profiles). */
  readonly node: string;
  /** That node's op type (`"Conv"`, `"nrt.FusedGemm"`). */
  readonly opType: string;
  /** Kernel library (`kernels/ops/wasm/<library>.wasm`). */
  readonly library: string;
  /** Exported function of the library. */
  readonly fn: string;
  /** 8 (SPMD over all Q7 cores) or 1 (core 0). */
  readonly totalCpus: 1 | 8;
  /** Value names in `customop_next_tensor` order; each has an entry in {@linkcode CompiledOnnxModel.values}. */
  readonly inputs: readonly string[];
  /** Value names in `customop_return_tensor` order. */
  readonly outputs: readonly string[];
  /** Scalar arguments in `customop_next_int` order. */
  readonly ints: readonly bigint[];
}

/** Memory figures of the plan. */
export interface MemoryReport {
  /** Bytes if every intermediate value had its own buffer (sizes rounded up to 64). */
  readonly naiveBytes: number;
  /** Bytes of the planned buffers. */
  readonly plannedBytes: number;
  /** Bytes of the weights. */
  readonly weightBytes: number;
}

/** What the passes did, for reports and tests. */
export interface CompileStats {
  /** Nodes in the parsed graph (top level). */
  readonly nodes: number;
  /** Nodes evaluated at compile time (Constant, Shape chains, all-constant nodes, inlined branches' nodes). */
  readonly folded: number;
  /** `If` nodes whose taken branch was inlined. */
  readonly inlinedIfs: number;
  /** Nodes dropped because no output depends on them. */
  readonly dead: number;
  /** Decomposed GELUs fused into `Gelu`. */
  readonly gelu: number;
  /** `nrt.FusedGemm` nodes formed. */
  readonly fusedGemm: number;
  /** `nrt.LayerNorm` nodes formed. */
  readonly layerNorm: number;
  /** `nrt.FusedConv` nodes formed. */
  readonly fusedConv: number;
  /** Transposes fused into a gemm operand (`permA`/`permB`). */
  readonly transposedOperands: number;
  /** View nodes turned into aliases. */
  readonly aliased: number;
  /** Nodes lowered to kernel calls. */
  readonly lowered: number;
  /** Calls that run on one core because their work is below `spmdMinWork`. */
  readonly singleCore: number;
}

/** The compiled model. */
export interface CompiledOnnxModel {
  /** Model name (the ONNX graph's name). */
  readonly name: string;
  /** The NeuronCore generation asked for (`--target`); the compiled calls do not depend on it. */
  readonly target: "sunda" | "cayman" | "mariana";
  /** The model's default-domain opset. */
  readonly opset: number;
  /** Runtime inputs, in the model's order. */
  readonly inputs: readonly CompiledTensor[];
  /** Outputs, in the model's order. */
  readonly outputs: readonly CompiledTensor[];
  /** Constants the calls read. */
  readonly weights: readonly CompiledWeight[];
  /** Intermediate buffers to allocate at load. */
  readonly buffers: readonly IntermediateBuffer[];
  /** Every value a call names → where it lives. */
  readonly values: Readonly<Record<string, ValuePlacement>>;
  /** Kernel libraries the calls use, sorted. */
  readonly libraries: readonly string[];
  /** The calls, in execution order. */
  readonly calls: readonly CompiledCall[];
  /** Memory figures. */
  readonly memory: MemoryReport;
  /** Pass statistics. */
  readonly stats: CompileStats;
}
