/**
 * Shape inference: for each op, the dtype and static shape of every output from its inputs' dtypes, shapes and
 * (for parameter inputs such as Reshape's shape) constant values. Semantics from the ONNX operator specification;
 * the table is ours.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";
import { attrInt, attrInts, attrTensor, fail, normAxis } from "./_attrs.ts";
import {
  broadcastShapes,
  reduceAxes,
  reducedShape,
  reshapeTarget,
  sliceAxes,
  splitSizes,
  squeezeAxes,
  unsqueezeShape,
  windowOf,
} from "./_geometry.ts";
import { dtypeFromOnnx } from "./dtype.ts";
import type { IrNode } from "./graph.ts";
import type { ConstTensor } from "./tensor.ts";

/** A value as the passes see it: dtype, static shape and, for a constant, its data. */
export interface TypedValue {
  /** Element type. */
  readonly dtype: OpDtype;
  /** Static shape. */
  readonly shape: readonly number[];
  /** The data, when known at compile time. */
  readonly constant?: ConstTensor;
}

/** What a rule may read besides the node: the model's default-domain opset. */
export interface RuleContext {
  /** Default-domain opset version. */
  readonly opset: number;
}

/** One output's dtype and shape. */
export interface OutputType {
  /** Element type. */
  readonly dtype: OpDtype;
  /** Static shape. */
  readonly shape: readonly number[];
}

type Inputs = ReadonlyArray<TypedValue | undefined>;
type Rule = (node: IrNode, ins: Inputs, ctx: RuleContext) => OutputType[];

/** Input `i`, which must be present. */
export function need(ins: Inputs, i: number, what = `input ${i}`): TypedValue {
  const v = ins[i];
  if (v === undefined) fail(`${what} is missing`);
  return v;
}

/** Input `i`'s data, which must be known at compile time (`undefined` when the optional input is absent). */
export function constInput(ins: Inputs, i: number, what: string): ConstTensor | undefined {
  const v = ins[i];
  if (v === undefined) return undefined;
  if (v.constant === undefined) {
    fail(`input ${i} (${what}) must be known at compile time: a constant or computed from shapes and constants`);
  }
  return v.constant;
}

const same: Rule = (_n, ins) => [{ dtype: need(ins, 0).dtype, shape: need(ins, 0).shape }];
const bool = (shape: readonly number[]): OutputType => ({ dtype: "bool", shape });
const broadcast: Rule = (n, ins) => {
  const vs = ins.map((_, i) => need(ins, i, `input ${i}`));
  const mixed = n.opType !== "Pow" && n.opType !== "BitShift" && vs.some((v) => v.dtype !== vs[0].dtype);
  if (mixed) fail(`inputs have different dtypes (${vs.map((v) => v.dtype).join(", ")})`);
  return [{ dtype: vs[0].dtype, shape: broadcastShapes(...vs.map((v) => v.shape)) }];
};
const compare: Rule = (n, ins) => [bool(broadcast(n, ins, { opset: 0 })[0].shape)];
const where: Rule = (_n, ins) => {
  const [c, a, b] = [0, 1, 2].map((i) => need(ins, i));
  if (a.dtype !== b.dtype) fail(`X and Y have different dtypes (${a.dtype}, ${b.dtype})`);
  return [{ dtype: a.dtype, shape: broadcastShapes(c.shape, a.shape, b.shape) }];
};

function matmulShape(a: readonly number[], b: readonly number[]): number[] {
  if (a.length === 0 || b.length === 0) fail("MatMul inputs must have rank at least 1");
  const a2 = a.length === 1 ? [1, a[0]] : a, b2 = b.length === 1 ? [b[0], 1] : b;
  const k1 = a2[a2.length - 1], k2 = b2[b2.length - 2];
  if (k1 !== k2) fail(`inner dimensions differ: [${a}] × [${b}]`);
  const batch = broadcastShapes(a2.slice(0, -2), b2.slice(0, -2));
  const out = [...batch];
  if (a.length !== 1) out.push(a2[a2.length - 2]);
  if (b.length !== 1) out.push(b2[b2.length - 1]);
  return out;
}

function poolRule(global: boolean): Rule {
  return (node, ins) => {
    const x = need(ins, 0);
    if (x.shape.length < 3) fail(`the input must be [N, C, spatial...], got [${x.shape}]`);
    const spatial = x.shape.slice(2);
    if (global) return [{ dtype: x.dtype, shape: [x.shape[0], x.shape[1], ...spatial.map(() => 1)] }];
    const kernel = attrInts(node, "kernel_shape");
    if (kernel === undefined) fail("attribute kernel_shape is required");
    const w = windowOf(node, spatial, kernel);
    const outs: OutputType[] = [{ dtype: x.dtype, shape: [x.shape[0], x.shape[1], ...w.out] }];
    if (node.outputs.length > 1) outs.push({ dtype: "int64", shape: outs[0].shape });
    return outs;
  };
}

const conv: Rule = (node, ins) => {
  const x = need(ins, 0), w = need(ins, 1, "input 1 (W)");
  if (x.shape.length < 3) fail(`the input must be [N, C, spatial...], got [${x.shape}]`);
  if (w.shape.length !== x.shape.length) fail(`W [${w.shape}] and X [${x.shape}] differ in rank`);
  const group = attrInt(node, "group", 1);
  if (group < 1 || x.shape[1] !== w.shape[1] * group || w.shape[0] % group !== 0) {
    fail(`X has ${x.shape[1]} channels but W is [${w.shape}] with group ${group}`);
  }
  const b = ins[2];
  if (b !== undefined && (b.shape.length !== 1 || b.shape[0] !== w.shape[0])) {
    fail(`B [${b.shape}] must be [${w.shape[0]}]`);
  }
  const kernel = attrInts(node, "kernel_shape", w.shape.slice(2));
  const win = windowOf(node, x.shape.slice(2), kernel);
  return [{ dtype: x.dtype, shape: [x.shape[0], w.shape[0], ...win.out] }];
};

const gemm: Rule = (node, ins) => {
  const a = need(ins, 0), b = need(ins, 1);
  if (a.shape.length !== 2 || b.shape.length !== 2) fail(`A [${a.shape}] and B [${b.shape}] must be 2-D`);
  const [m, k1] = attrInt(node, "transA", 0) ? [a.shape[1], a.shape[0]] : a.shape;
  const [k2, n] = attrInt(node, "transB", 0) ? [b.shape[1], b.shape[0]] : b.shape;
  if (k1 !== k2) fail(`inner dimensions differ: A [${a.shape}], B [${b.shape}]`);
  const c = ins[2];
  if (c !== undefined) {
    const bc = broadcastShapes(c.shape, [m, n]);
    if (c.shape.length > 2 || bc[0] !== m || bc[1] !== n) fail(`C [${c.shape}] does not broadcast to [${m}, ${n}]`);
  }
  return [{ dtype: a.dtype, shape: [m, n] }];
};

/** Reads an input that older opsets give as an attribute (`axes` of Squeeze, Unsqueeze, Reduce*). */
function axesOf(node: IrNode, ins: Inputs, i: number, attr: string): number[] | undefined {
  return constInput(ins, i, attr)?.ints() ?? attrInts(node, attr);
}

const RULES: Readonly<Record<string, Rule>> = {
  Identity: same,
  Dropout: (n, ins) => {
    const x = need(ins, 0);
    return n.outputs.length > 1
      ? [{ dtype: x.dtype, shape: x.shape }, bool(x.shape)]
      : [{ dtype: x.dtype, shape: x.shape }];
  },
  Cast: (n, ins) => {
    const to = dtypeFromOnnx(attrInt(n, "to", 0));
    if (to === undefined) fail(`Cast to ONNX type ${attrInt(n, "to", 0)} is not supported`);
    return [{ dtype: to, shape: need(ins, 0).shape }];
  },
  CastLike: (_n, ins) => [{ dtype: need(ins, 1).dtype, shape: need(ins, 0).shape }],
  Not: same,
  IsNaN: (_n, ins) => [bool(need(ins, 0).shape)],
  IsInf: (_n, ins) => [bool(need(ins, 0).shape)],
  Equal: compare,
  Less: compare,
  LessOrEqual: compare,
  Greater: compare,
  GreaterOrEqual: compare,
  Where: where,
  MatMul: (_n, ins) => [{ dtype: need(ins, 0).dtype, shape: matmulShape(need(ins, 0).shape, need(ins, 1).shape) }],
  Gemm: gemm,
  Conv: conv,
  MaxPool: poolRule(false),
  AveragePool: poolRule(false),
  LpPool: poolRule(false),
  GlobalAveragePool: poolRule(true),
  GlobalMaxPool: poolRule(true),
  BatchNormalization: (n, ins) => {
    if (attrInt(n, "training_mode", 0) === 1 || n.outputs.filter((o) => o !== "").length > 1) {
      fail("training mode (running mean/var outputs) is not supported");
    }
    return same(n, ins, { opset: 0 });
  },
  InstanceNormalization: same,
  LayerNormalization: (n, ins) => {
    const x = need(ins, 0);
    const axis = normAxis(attrInt(n, "axis", -1), x.shape.length);
    const stat = { dtype: "float32" as OpDtype, shape: x.shape.map((d, i) => (i < axis ? d : 1)) };
    return [{ dtype: x.dtype, shape: x.shape }, stat, stat].slice(0, Math.max(1, n.outputs.length));
  },
  Softmax: same,
  LogSoftmax: same,
  Hardmax: same,
  Transpose: (n, ins) => {
    const x = need(ins, 0);
    const perm = attrInts(n, "perm", [...x.shape.keys()].reverse());
    if (perm.length !== x.shape.length || [...perm].sort((a, b) => a - b).some((p, i) => p !== i)) {
      fail(`perm [${perm}] is not a permutation of rank ${x.shape.length}`);
    }
    return [{ dtype: x.dtype, shape: perm.map((p) => x.shape[p]) }];
  },
  Reshape: (n, ins) => {
    const x = need(ins, 0), spec = constInput(ins, 1, "shape");
    if (spec === undefined) fail("input 1 (shape) is missing");
    return [{ dtype: x.dtype, shape: reshapeTarget(x.shape, spec.ints(), attrInt(n, "allowzero", 0) === 1) }];
  },
  Flatten: (n, ins) => {
    // axis is in [-r, r]; a negative one counts from the back, so -1 is r - 1 (ONNX spec), not r.
    const x = need(ins, 0), rank = x.shape.length, given = attrInt(n, "axis", 1);
    if (!Number.isInteger(given) || given < -rank || given > rank) {
      fail(`axis ${given} is out of range [${-rank}, ${rank}]`);
    }
    const axis = given < 0 ? given + rank : given;
    const head = x.shape.slice(0, axis).reduce((a, b) => a * b, 1);
    return [{ dtype: x.dtype, shape: [head, x.shape.slice(axis).reduce((a, b) => a * b, 1)] }];
  },
  Squeeze: (n, ins) => {
    const x = need(ins, 0), axes = squeezeAxes(x.shape, axesOf(n, ins, 1, "axes"));
    return [{ dtype: x.dtype, shape: x.shape.filter((_, i) => !axes.includes(i)) }];
  },
  Unsqueeze: (n, ins) => {
    const x = need(ins, 0), axes = axesOf(n, ins, 1, "axes");
    if (axes === undefined) fail("axes are required");
    return [{ dtype: x.dtype, shape: unsqueezeShape(x.shape, axes) }];
  },
  Concat: (n, ins) => {
    const vs = ins.filter((v): v is TypedValue => v !== undefined);
    if (vs.length === 0) fail("Concat needs at least one input");
    const rank = vs[0].shape.length, axis = normAxis(attrInt(n, "axis", 0), rank);
    let total = 0;
    for (const v of vs) {
      if (v.shape.length !== rank || v.shape.some((d, i) => i !== axis && d !== vs[0].shape[i])) {
        fail(`input shapes ${vs.map((x) => `[${x.shape}]`).join(", ")} differ outside axis ${axis}`);
      }
      total += v.shape[axis];
    }
    return [{ dtype: vs[0].dtype, shape: vs[0].shape.map((d, i) => (i === axis ? total : d)) }];
  },
  Split: (n, ins) => {
    const x = need(ins, 0), axis = normAxis(attrInt(n, "axis", 0), x.shape.length);
    const sizes = splitSizes(n, x.shape[axis], n.outputs.length, constInput(ins, 1, "split"));
    return sizes.map((s) => ({ dtype: x.dtype, shape: x.shape.map((d, i) => (i === axis ? s : d)) }));
  },
  Slice: (_n, ins) => {
    const x = need(ins, 0);
    const get = (i: number, what: string) => constInput(ins, i, what)?.ints();
    const starts = get(1, "starts"), ends = get(2, "ends");
    if (starts === undefined || ends === undefined) fail("starts and ends are required");
    const axes = sliceAxes(x.shape, starts, ends, get(3, "axes"), get(4, "steps"));
    return [{ dtype: x.dtype, shape: axes.map((a) => a.count) }];
  },
  Gather: (n, ins) => {
    const x = need(ins, 0), idx = need(ins, 1, "input 1 (indices)");
    const axis = normAxis(attrInt(n, "axis", 0), x.shape.length);
    return [{ dtype: x.dtype, shape: [...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)] }];
  },
  GatherElements: (_n, ins) => [{ dtype: need(ins, 0).dtype, shape: need(ins, 1).shape }],
  Expand: (_n, ins) => {
    const x = need(ins, 0), shape = constInput(ins, 1, "shape");
    if (shape === undefined) fail("input 1 (shape) is missing");
    return [{ dtype: x.dtype, shape: broadcastShapes(x.shape, shape.ints()) }];
  },
  Tile: (_n, ins) => {
    const x = need(ins, 0), reps = constInput(ins, 1, "repeats")?.ints();
    if (reps === undefined || reps.length !== x.shape.length) fail(`repeats must have ${x.shape.length} entries`);
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => d * reps[i]) }];
  },
  Pad: (n, ins) => {
    const x = need(ins, 0), r = x.shape.length;
    const pads = constInput(ins, 1, "pads")?.ints() ?? attrInts(n, "pads");
    const axes = (constInput(ins, 3, "axes")?.ints() ?? [...Array(r).keys()]).map((a) => normAxis(a, r));
    if (pads === undefined || pads.length !== 2 * axes.length) fail(`pads must have ${2 * axes.length} entries`);
    const shape = [...x.shape];
    axes.forEach((a, i) => (shape[a] += pads[i] + pads[i + axes.length]));
    if (shape.some((d) => d < 0)) fail(`pads [${pads}] remove more than [${x.shape}] holds`);
    return [{ dtype: x.dtype, shape }];
  },
  Shape: (n, ins) => {
    const r = need(ins, 0).shape.length;
    const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + r : v, 0), r);
    const start = clamp(attrInt(n, "start", 0)), end = clamp(attrInt(n, "end", r));
    return [{ dtype: "int64", shape: [Math.max(0, end - start)] }];
  },
  Size: () => [{ dtype: "int64", shape: [] }],
  ConstantOfShape: (n, ins) => {
    const shape = constInput(ins, 0, "shape")?.ints() ?? fail("input 0 (shape) is missing");
    return [{ dtype: attrTensor(n, "value")?.dtype ?? "float32", shape }];
  },
  Range: (_n, ins) => {
    const [s, l, d] = [0, 1, 2].map((i) => constInput(ins, i, ["start", "limit", "delta"][i])?.numbers()[0] ?? NaN);
    if (!Number.isFinite(s + l + d) || d === 0) fail("start, limit and delta must be finite scalars, delta non-zero");
    return [{ dtype: need(ins, 0).dtype, shape: [Math.max(0, Math.ceil((l - s) / d))] }];
  },
  ArgMax: (n, ins) => {
    const x = need(ins, 0), axis = normAxis(attrInt(n, "axis", 0), x.shape.length);
    return [{ dtype: "int64", shape: reducedShape(x.shape, [axis], attrInt(n, "keepdims", 1) === 1) }];
  },
  DepthToSpace: (n, ins) => {
    const x = need(ins, 0), b = attrInt(n, "blocksize", 0);
    if (x.shape.length !== 4 || b < 1 || x.shape[1] % (b * b) !== 0) fail(`[${x.shape}] does not fit blocksize ${b}`);
    const [nn, c, h, w] = x.shape;
    return [{ dtype: x.dtype, shape: [nn, c / (b * b), h * b, w * b] }];
  },
  SpaceToDepth: (n, ins) => {
    const x = need(ins, 0), b = attrInt(n, "blocksize", 0);
    if (x.shape.length !== 4 || b < 1 || x.shape[2] % b !== 0 || x.shape[3] % b !== 0) {
      fail(`[${x.shape}] does not fit blocksize ${b}`);
    }
    const [nn, c, h, w] = x.shape;
    return [{ dtype: x.dtype, shape: [nn, c * b * b, h / b, w / b] }];
  },
  TopK: (n, ins) => {
    const x = need(ins, 0), axis = normAxis(attrInt(n, "axis", -1), x.shape.length);
    const k = constInput(ins, 1, "K")?.ints()[0] ?? fail("input 1 (K) is missing");
    if (k < 0 || k > x.shape[axis]) fail(`K ${k} is out of range for axis size ${x.shape[axis]}`);
    const shape = x.shape.map((d, i) => (i === axis ? k : d));
    return [{ dtype: x.dtype, shape }, { dtype: "int64", shape }];
  },
};
(RULES as Record<string, Rule>).ArgMin = RULES.ArgMax;

for (
  const op of [
    "Relu",
    "LeakyRelu",
    "Elu",
    "Selu",
    "Celu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Exp",
    "Log",
    "Sqrt",
    "Abs",
    "Neg",
    "Erf",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Softplus",
    "Softsign",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Gelu",
    "Mish",
    "ThresholdedRelu",
    "Clip",
    "CumSum",
    "Trilu",
    "Shrink",
    "LRN",
  ]
) (RULES as Record<string, Rule>)[op] = same;
for (const op of ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "PRelu", "BitShift"]) {
  (RULES as Record<string, Rule>)[op] = broadcast;
}
for (const op of ["And", "Or", "Xor"]) (RULES as Record<string, Rule>)[op] = compare;
for (
  const op of [
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
  ]
) {
  (RULES as Record<string, Rule>)[op] = (n, ins) => {
    const x = need(ins, 0), axes = reduceAxes(n, x.shape.length, constInput(ins, 1, "axes"));
    if (axes === undefined) return [{ dtype: x.dtype, shape: x.shape }];
    return [{ dtype: x.dtype, shape: reducedShape(x.shape, axes, attrInt(n, "keepdims", 1) === 1) }];
  };
}

/** Whether the compiler knows how to infer an op's output shapes (default domain). */
export function hasShapeRule(opType: string): boolean {
  return Object.hasOwn(RULES, opType);
}

/** The ops with a shape rule, sorted. */
export function shapeRuleOps(): string[] {
  return Object.keys(RULES).sort();
}

/**
 * Infers a node's output dtypes and shapes.
 *
 * @param node A default-domain node.
 * @param inputs Its inputs (`undefined` for an omitted optional input).
 * @param ctx The model's opset.
 * @returns One entry per output.
 * @throws {RuleError} when the inputs do not fit the op, or a parameter input is not a compile-time constant.
 */
export function inferNode(node: IrNode, inputs: Inputs, ctx: RuleContext): OutputType[] {
  const rule = RULES[node.opType];
  if (rule === undefined) fail(`no shape rule for ${node.opType}`);
  return rule(node, inputs, ctx);
}
