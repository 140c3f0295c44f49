/**
 * Lowering rules of the reductions onto library `reduce`: the Reduce* family, Softmax, LogSoftmax, Hardmax,
 * ArgMax and ArgMin. Ours.
 *
 * @module
 */
import { type KernelCall, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  axisOf,
  call,
  constantInts,
  copyCall,
  dtype,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  output,
  sameShape,
} from "./_lower_util.ts";
import { checkRank, mergeLayout, sizeOf, stridesOf } from "./_lower_layout.ts";

/** Reduction kinds of `reduce.reduce_f32` (ints[0]). */
export const ReduceKind = {
  ReduceSum: 0,
  ReduceMean: 1,
  ReduceMax: 2,
  ReduceMin: 3,
  ReduceProd: 4,
  ReduceSumSquare: 5,
  ReduceL1: 6,
  ReduceL2: 7,
  ReduceLogSum: 8,
  ReduceLogSumExp: 9,
} as const;

/** Partial states per output when a reduction runs as two calls. */
const PARTS = 8;
/** Below this many reduced elements per output, one call on few cores beats two calls. */
const SPLIT_MIN = 8192;

/**
 * The calls reducing `x` over `axes` (normalized, any order) into `y`, whose element count must be the kept
 * elements' count: one reduce_f32 call, or, when there are fewer outputs than cores and much to reduce, a
 * partial call over (output, part) pairs and a finishing call.
 */
export function reduceCalls(node: OpNode, kind: number, x: OpValue, y: OpValue, axes: readonly number[]): KernelCall[] {
  const strides = stridesOf(x.shape);
  const keep = x.shape.map((_, d) => d).filter((d) => !axes.includes(d));
  const red = [...axes].sort((p, q) => p - q);
  const kl = mergeLayout({ dims: keep.map((d) => x.shape[d]), strides: [keep.map((d) => strides[d])] });
  const rl = mergeLayout({ dims: red.map((d) => x.shape[d]), strides: [red.map((d) => strides[d])] });
  checkRank(node, kl);
  checkRank(node, rl);
  const outs = sizeOf(kl.dims), count = sizeOf(rl.dims);
  if (outs !== sizeOf(y.shape)) {
    throw new UnsupportedOpError(node, `output shape [${y.shape}] does not hold ${outs} elements`);
  }
  const space = [kl.dims.length, ...kl.dims, ...kl.strides[0], rl.dims.length, ...rl.dims, ...rl.strides[0]];
  if (outs >= PARTS || count < SPLIT_MIN) {
    return [call("reduce", "reduce_f32", [x.name], [y.name], ints(kind, 1, ...space))];
  }
  const partials: OpValue = { name: `${node.name}#partials`, dtype: "float64", shape: [outs, PARTS, 2] };
  return [
    call("reduce", "reduce_f32", [x.name], [partials.name], ints(kind, PARTS, ...space), { scratch: [partials] }),
    call("reduce", "reduce_finish_f32", [partials.name], [y.name], ints(kind, PARTS, outs, count)),
  ];
}

function reduceRule(opType: keyof typeof ReduceKind): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ["float32"],
    attributes: {
      axes: "any (before the opset that made it an input)",
      keepdims: "0, 1",
      noop_with_empty_axes: "0, 1",
    },
    notes: "an axes input must be a constant; an empty output set reduces on 2 calls when it is small",
    lower(node) {
      const a = new Attributes(node, ["axes", "keepdims", "noop_with_empty_axes"]);
      arity(node, [1, 2]);
      const x = input(node, 0), y = output(node, 0);
      dtype(node, x, ["float32"]);
      dtype(node, y, ["float32"]);
      const rank = x.shape.length;
      const given = optionalInput(node, 1);
      let axes = given ? constantInts(node, given, "axes") : a.ints("axes", []);
      const keepdims = a.int("keepdims", 1), noop = a.int("noop_with_empty_axes", 0);
      if (axes.length === 0) {
        // Nothing is reduced, but each element still goes through the reduction's own function, as the spec's
        // reference implementation computes it (ReduceL1 gives |x|, ReduceSumSquare x², ReduceLogSum log x): a
        // reduction of one element each. Sum, Mean, Max, Min and Prod of one element are the element itself.
        if (noop === 1) {
          const identity = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"].includes(opType);
          if (identity) return [copyCall(x, y)];
          sameShape(node, x, y);
          return reduceCalls(node, ReduceKind[opType], x, y, []);
        }
        axes = x.shape.map((_, d) => d);
      }
      axes = [...new Set(axes.map((d) => axisOf(node, d, rank, "axes entry")))];
      const want = keepdims
        ? x.shape.map((n, d) => (axes.includes(d) ? 1 : n))
        : x.shape.filter((_, d) => !axes.includes(d));
      if (want.length !== y.shape.length || want.some((n, i) => n !== y.shape[i])) {
        throw new UnsupportedOpError(node, `output shape [${y.shape}] is not [${want}]`);
      }
      if (axes.some((d) => x.shape[d] === 0)) throw new UnsupportedOpError(node, "reducing an empty dimension");
      return reduceCalls(node, ReduceKind[opType], x, y, axes);
    },
  };
}

/** [outer, n, inner] around `axis`; before opset 13 the softmax family flattens every axis from `axis` on. */
function around(shape: readonly number[], axis: number, flatten: boolean): [number, number, number] {
  const outer = sizeOf(shape.slice(0, axis));
  if (flatten) return [outer, sizeOf(shape.slice(axis)), 1];
  return [outer, shape[axis], sizeOf(shape.slice(axis + 1))];
}

function softmaxRule(opType: "Softmax" | "LogSoftmax" | "Hardmax", kind: number): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ["float32"],
    attributes: { axis: "any" },
    notes: "opset < 13 semantics (flatten from axis) when OpNode.opset < 13",
    lower(node) {
      const a = new Attributes(node, ["axis"]);
      arity(node, [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      dtype(node, x, ["float32"]);
      dtype(node, y, ["float32"]);
      const old = node.opset !== undefined && node.opset < 13;
      const rank = Math.max(1, x.shape.length);
      const axis = axisOf(node, a.int("axis", old ? 1 : -1), rank);
      const shape = x.shape.length === 0 ? [1] : x.shape;
      const [outer, n, inner] = around(shape, axis, old);
      return [call("reduce", "softmax_f32", [x.name], [y.name], ints(kind, outer, n, inner))];
    },
  };
}

function argRule(opType: "ArgMax" | "ArgMin", kind: number): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ["float32"],
    attributes: { axis: "any", keepdims: "0, 1", select_last_index: "0, 1" },
    notes: "output int64",
    lower(node) {
      const a = new Attributes(node, ["axis", "keepdims", "select_last_index"]);
      arity(node, [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      dtype(node, x, ["float32"]);
      dtype(node, y, ["int64"]);
      const axis = axisOf(node, a.int("axis", 0), x.shape.length);
      const last = a.int("select_last_index", 0);
      if (x.shape[axis] === 0) throw new UnsupportedOpError(node, "the axis is empty");
      const [outer, n, inner] = around(x.shape, axis, false);
      if (sizeOf(y.shape) !== outer * inner) throw new UnsupportedOpError(node, `output shape [${y.shape}] is wrong`);
      return [call("reduce", "arg_f32", [x.name], [y.name], ints(kind, last ? 1 : 0, outer, n, inner))];
    },
  };
}

/** The reduction rules. */
export const REDUCE_RULES: readonly LoweringRule[] = [
  ...(Object.keys(ReduceKind) as Array<keyof typeof ReduceKind>).map(reduceRule),
  softmaxRule("Softmax", 0),
  softmaxRule("LogSoftmax", 1),
  softmaxRule("Hardmax", 2),
  argRule("ArgMax", 0),
  argRule("ArgMin", 1),
];
