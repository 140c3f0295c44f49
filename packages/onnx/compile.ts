/**
 * `compileOnnx`: ONNX model bytes → {@linkcode CompiledOnnxModel}. The pipeline: parse (caps on untrusted
 * input) → resolve input shapes, infer shapes and fold constants → fuse → alias views → lower each node to kernel
 * calls → choose each call's fan-out (8 cores, or 1 for little work) → plan intermediate memory → assemble. Ours.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";
import { aliasViews } from "./alias.ts";
import type {
  CompiledCall,
  CompiledOnnxModel,
  CompiledWeight,
  CompileStats,
  ValuePlacement,
} from "./compiled_model.ts";
import { DTYPE_BYTES } from "./dtype.ts";
import { OnnxCompileError } from "./error.ts";
import { type FoldedGraph, foldGraph } from "./fold.ts";
import { fuseGraph, type FusionStats } from "./fuse.ts";
import { type LoweredCall, lowerGraph, type Lowering } from "./lower.ts";
import { planMemory, type PlanValue } from "./memory_plan.ts";
import { OP_LIBRARY } from "./op_library.ts";
import { DEFAULT_LIMITS, type OnnxLimits, parseModel } from "./parse.ts";
import { ConstTensor, shapeSize } from "./tensor.ts";

/** Options of {@linkcode compileOnnx}. */
export interface CompileOptions {
  /** Sizes of inputs with dynamic dims (`--input-shape NAME=DIMS`), the whole shape per input name. */
  readonly inputShapes?: Readonly<Record<string, readonly number[]>>;
  /** The NeuronCore generation (`--target`), recorded in the result. Default `"cayman"`. */
  readonly target?: "sunda" | "cayman" | "mariana";
  /** Caps on untrusted input; unset fields keep {@linkcode DEFAULT_LIMITS}. */
  readonly limits?: Partial<OnnxLimits>;
  /** The op library. Default: `kernels/ops/lowering.ts`. */
  readonly lowering?: Lowering;
  /** Whether to fuse (default `true`); `false` lowers every op as the model writes it. */
  readonly fuse?: boolean;
  /** Largest constant folding may create, in bytes (default 64 MiB); larger results stay runtime ops. */
  readonly maxFoldBytes?: number;
  /**
   * Calls whose estimated work (the lowering's `callWork`: multiply-adds, window taps or elements touched) is below
   * this run on one Q7 core instead of 8: for them the 8-core dispatch and join cost more than the split saves.
   * Default {@linkcode DEFAULT_SPMD_MIN_WORK}; 0 keeps every call on 8 cores.
   */
  readonly spmdMinWork?: number;
}

/**
 * The default {@linkcode CompileOptions.spmdMinWork}: 65,536 multiply-adds (or elements) take tens of microseconds
 * on one core, about what joining 8 simulated cores costs (bench/onnx.ts). Ours.
 */
export const DEFAULT_SPMD_MIN_WORK = 1 << 16;

/** Graph outputs that no kernel could write as they stand: constants (copied from a weight) and duplicates. */
function fixOutputs(g: FoldedGraph): void {
  const inputs = new Set(g.inputs.map((v) => v.name));
  const seen = new Set<string>();
  for (const o of g.outputs) {
    if (seen.has(o)) throw new OnnxCompileError({}, `graph output "${o}" is listed twice`);
    seen.add(o);
    if (inputs.has(o)) {
      throw new OnnxCompileError(
        {},
        `graph output "${o}" is also a graph input; pass-through outputs are not supported`,
      );
    }
    const v = g.values.get(o)!;
    if (v.constant === undefined || v.constant.size === 0) continue; // an empty output needs no writing
    // A constant output: the runtime must still fill the caller's tensor, so copy it from a weight, named apart from
    // every value (an input may already be called "y/value").
    let src = `${o}/value`;
    for (let k = 1; g.values.has(src); k++) src = `${o}/value#${k}`;
    g.values.set(src, v);
    g.values.set(o, { dtype: v.dtype, shape: v.shape });
    g.nodes.push({ name: `${o}/copy`, domain: "", opType: "Identity", attributes: {}, inputs: [src], outputs: [o] });
  }
}

/**
 * Compiles an ONNX model into kernel calls for the Q7 cores.
 *
 * @example Compile a model and list its calls
 * ```ts ignore
 * import { compileOnnx } from "@nrt/onnx";
 * const compiled = compileOnnx(await Deno.readFile("mlp.onnx"), { inputShapes: { x: [8, 784] } });
 * for (const c of compiled.calls) console.log(c.node, `${c.library}.${c.fn}`, c.inputs, "→", c.outputs);
 * ```
 *
 * @param bytes The `.onnx` file.
 * @param options Input shapes, target, caps, the op library.
 * @returns The compiled model (see {@linkcode CompiledOnnxModel} for every field).
 * @throws {OnnxCompileError} for any model it cannot compile: malformed bytes, a cap exceeded, external data, an
 * unresolved dynamic dim, a shape error, an unsupported op, attribute or dtype.
 */
export function compileOnnx(bytes: Uint8Array, options: CompileOptions = {}): CompiledOnnxModel {
  const lowering = options.lowering ?? OP_LIBRARY;
  const limits: OnnxLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const model = parseModel(bytes, limits);
  const g = foldGraph(model, {
    inputShapes: options.inputShapes ?? {},
    limits,
    supportedOps: lowering.supportedOps,
    maxFoldBytes: options.maxFoldBytes ?? 64 << 20,
  });
  fixOutputs(g);
  const supported = new Set(lowering.supportedOps);
  const fusion: FusionStats = options.fuse === false
    ? { gelu: 0, fusedGemm: 0, layerNorm: 0, fusedConv: 0, transposedOperands: 0 }
    : fuseGraph(g, {
      activations: lowering.fusedActivations ?? [],
      gelu: supported.has("Gelu"),
      fusedGemm: supported.has("nrt.FusedGemm"),
      layerNorm: supported.has("nrt.LayerNorm"),
      fusedConv: supported.has("nrt.FusedConv"),
      gemmTranspose: lowering.fusedGemmPermutes === true,
    });
  const { rootOf, aliased } = aliasViews(g);
  const lowered = lowerGraph(g, lowering, model.opset);

  // Storage of every value a call names.
  const inputNames = new Set(g.inputs.map((v) => v.name)), outputNames = new Set(g.outputs);
  const typeOf = (name: string): { dtype: OpDtype; shape: readonly number[]; constant?: ConstTensor } => {
    const s = lowered.scratch.get(name);
    if (s !== undefined) {
      const c = s.constant === undefined ? undefined : new ConstTensor(s.dtype, s.shape, s.constant);
      return { dtype: s.dtype, shape: s.shape, constant: c };
    }
    return g.values.get(name)!;
  };
  const lifetimes = new Map<string, { first: number; last: number; bytes: number }>();
  const weights = new Map<string, CompiledWeight>();
  const written = new Set<string>();
  lowered.calls.forEach((call, i) => {
    for (const name of [...call.inputs, ...call.outputs]) {
      const root = rootOf.get(name) ?? name;
      const t = typeOf(name);
      if (t.constant !== undefined) {
        if (!weights.has(name)) weights.set(name, { name, dtype: t.dtype, shape: t.shape, bytes: t.constant.bytes });
        continue;
      }
      if (inputNames.has(root) || outputNames.has(root)) continue;
      const bytes = shapeSize(t.shape) * DTYPE_BYTES[t.dtype];
      const life = lifetimes.get(root);
      if (life === undefined) lifetimes.set(root, { first: i, last: i, bytes });
      else {
        life.last = i;
        life.bytes = Math.max(life.bytes, bytes);
      }
    }
    for (const name of call.outputs) written.add(rootOf.get(name) ?? name);
  });
  for (const o of g.outputs) {
    if (!written.has(o) && shapeSize(g.values.get(o)!.shape) > 0) {
      throw new OnnxCompileError({}, `graph output "${o}" is not written by any kernel call`);
    }
  }
  const plan = planMemory([...lifetimes].map(([name, l]): PlanValue => ({ name, ...l })));

  // Keyed by value name, so without a prototype (a value may be called "__proto__").
  const values: Record<string, ValuePlacement> = Object.create(null);
  for (const call of lowered.calls) {
    for (const name of [...call.inputs, ...call.outputs]) {
      if (Object.hasOwn(values, name)) continue;
      const t = typeOf(name), root = rootOf.get(name) ?? name;
      const common = {
        offset: 0,
        dtype: t.dtype,
        shape: [...t.shape],
        byteLength: shapeSize(t.shape) * DTYPE_BYTES[t.dtype],
        ...(root === name ? {} : { aliasOf: root }),
      };
      if (t.constant !== undefined) values[name] = { storage: "weight", tensor: name, ...common };
      else if (inputNames.has(root)) values[name] = { storage: "input", tensor: root, ...common };
      else if (outputNames.has(root)) values[name] = { storage: "output", tensor: root, ...common };
      else {
        const at = plan.assignment.get(root)!;
        values[name] = { storage: "buffer", buffer: at.buffer, ...common, offset: at.offset };
      }
    }
  }
  const minWork = options.spmdMinWork ?? DEFAULT_SPMD_MIN_WORK;
  const elementsOf = (name: string) => shapeSize(typeOf(name).shape);
  const fanOut = (c: LoweredCall): 1 | 8 =>
    c.totalCpus === 8 && lowering.callWork !== undefined && lowering.callWork(c, elementsOf) < minWork
      ? 1
      : c.totalCpus;
  const calls: CompiledCall[] = lowered.calls.map((c) => ({
    node: c.node,
    opType: c.opType,
    library: c.library,
    fn: c.fn,
    totalCpus: fanOut(c),
    inputs: c.inputs,
    outputs: c.outputs,
    ints: c.ints,
  }));
  const weightList = [...weights.values()];
  const stats: CompileStats = {
    nodes: model.graph.nodes.length,
    folded: g.stats.folded,
    inlinedIfs: g.stats.inlinedIfs,
    dead: g.stats.dead,
    ...fusion,
    aliased,
    lowered: g.nodes.length,
    singleCore: calls.filter((c) => c.totalCpus === 1).length,
  };
  return {
    name: model.name,
    target: options.target ?? "cayman",
    opset: model.opset,
    inputs: g.inputs.map((v) => ({ name: v.name, dtype: v.dtype, shape: [...v.shape] })),
    outputs: g.outputs.map((o) => ({ name: o, dtype: g.values.get(o)!.dtype, shape: [...g.values.get(o)!.shape] })),
    weights: weightList,
    buffers: plan.buffers,
    values,
    libraries: [...new Set(calls.map((c) => c.library))].sort(),
    calls,
    memory: {
      naiveBytes: plan.naiveBytes,
      plannedBytes: plan.plannedBytes,
      weightBytes: weightList.reduce((a, w) => a + w.bytes.byteLength, 0),
    },
    stats,
  };
}
