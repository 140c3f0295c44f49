/**
 * A seeded differential check of the ONNX compiler against onnxruntime-web: small random graphs over the supported
 * ops, with the attributes and shapes where implementations part ways (numpy broadcasting with size-1 and
 * rank-differing operands, negative axes, keepdims, noop_with_empty_axes, Gemm's transA/transB/alpha/beta and 1-D
 * or scalar C, Conv and pools with pads/strides/dilations/groups/auto_pad/ceil_mode/count_include_pad, Slice past
 * the ends with negative steps, Gather with negative indices, Softmax at opset 11 and 13, Squeeze/Unsqueeze axes
 * as attribute and input, Pad modes with negative pads, the fusable MatMul/Gemm/Conv/LayerNorm chains, and every
 * single-op case again with constant inputs, which the compiler folds with its own evaluator). Each case is
 * compiled, run on the op library's harness and compared with onnxruntime (its graph optimizations off: they are
 * not the oracle), within 1e-4 relative and 1e-5 absolute, NaN matching NaN; or it must be refused with a typed
 * compile error. A case onnxruntime itself rejects is not counted.
 */
import { describe, expect, test } from "bun:test";
import * as ort from "onnxruntime-web";
import { NrtError } from "@nrt/core";
import { compileOnnx, ConstTensor, float, OnnxBuilder, OnnxCompileError } from "@nrt/onnx";
import type { BuilderAttribute } from "../packages/onnx/onnx_builder.ts";
import { runCompiled } from "../packages/onnx/_run_compiled.ts";
import { OpHarness } from "../kernels/ops/harness.ts";
import { ReduceKind } from "../kernels/ops/_lower_reduce.ts";
import { prng } from "../packages/core/_testing.ts";

ort.env.wasm.numThreads = 1;
ort.env.logLevel = "fatal";

type Rng = () => number;
interface Feed {
  readonly shape: number[];
  readonly data: Float32Array | BigInt64Array;
}
interface Case {
  readonly desc: string;
  readonly bytes: Uint8Array;
  readonly feeds: Record<string, Feed>;
}
type Kind = "any" | "pos" | "special" | "ties" | "int";
interface Spec {
  readonly name: string;
  readonly shape: number[];
  readonly kind?: Kind;
  /** An initializer rather than a graph input. */
  readonly init?: boolean;
  /** An int64 initializer with these values. */
  readonly i64?: number[];
}
type Attrs = Record<string, BuilderAttribute>;

const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const size = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
const dims = (r: Rng, rank: number, lo = 1, hi = 4) => Array.from({ length: rank }, () => int(r, lo, hi));
const shuffled = (r: Rng, n: number) => [...Array(n).keys()].sort(() => r() - 0.5);

function values(r: Rng, shape: readonly number[], kind: Kind = "any"): Float32Array {
  return Float32Array.from({ length: size(shape) }, () => {
    if (kind === "pos") return r() * 2 + 0.05;
    if (kind === "ties") return int(r, -2, 2) * 0.5;
    if (kind === "int") return int(r, -3, 3);
    if (kind === "special") {
      const u = r();
      return u < 0.1 ? 0 : u < 0.15 ? -0 : u < 0.25 ? int(r, -3, 3) + 0.5 : (r() * 2 - 1) * 3;
    }
    return (r() * 2 - 1) * 2;
  });
}

/** A shape that broadcasts to `out`: a suffix of it with some dims 1. */
function under(r: Rng, out: readonly number[]): number[] {
  return out.slice(out.length - int(r, 0, out.length)).map((d) => (r() < 0.35 ? 1 : d));
}

/** The generator: `constants` turns every float input into an initializer, so the compiler folds the node. */
class Gen {
  readonly r: Rng;
  readonly constants: boolean;
  constructor(r: Rng, constants: boolean) {
    this.r = r;
    this.constants = constants;
  }

  single(op: string, opset: number, specs: readonly Spec[], attrs: Attrs = {}, outputs = 1): Case {
    const b = new OnnxBuilder("case", opset);
    const feeds: Record<string, Feed> = {};
    const names = specs.map((s) => {
      if (s.name === "") return "";
      if (s.i64 !== undefined) return b.ints(s.name, s.i64, s.shape);
      const data = values(this.r, s.shape, s.kind);
      if (s.init || this.constants) return b.initializer(s.name, ConstTensor.fromNumbers("float32", s.shape, data));
      feeds[s.name] = { shape: s.shape, data };
      return b.input(s.name, "float32", s.shape);
    });
    const outs = b.nodeN(op, names, attrs, { outputs: Array.from({ length: outputs }, (_, i) => `y${i}`) });
    const dtype = op.startsWith("Arg")
      ? "int64"
      : ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"].includes(op)
      ? "bool"
      : "float32";
    for (const o of outs) b.output(o, dtype);
    const inputs = specs.map((s) => `${s.name}[${s.shape}]${s.i64 ? `=[${s.i64}]` : ""}`).join(" ");
    return { desc: `${op} opset ${opset} ${JSON.stringify(attrs)} ${inputs}`, bytes: b.toBytes(), feeds };
  }
}

const UNARY: ReadonlyArray<[string, Attrs, Kind]> = [
  ["Relu", {}, "special"],
  ["LeakyRelu", { alpha: 0.37 }, "special"],
  ["Sigmoid", {}, "any"],
  ["Tanh", {}, "any"],
  ["Exp", {}, "any"],
  ["Log", {}, "special"],
  ["Sqrt", {}, "special"],
  ["Erf", {}, "any"],
  ["Gelu", {}, "any"],
  ["Gelu", { approximate: "tanh" }, "any"],
  ["Neg", {}, "special"],
  ["Abs", {}, "special"],
  ["Reciprocal", {}, "special"],
  ["Floor", {}, "special"],
  ["Ceil", {}, "special"],
  ["Round", {}, "special"],
  ["Softplus", {}, "any"],
  ["HardSigmoid", { alpha: 0.3, beta: 0.4 }, "any"],
  ["HardSwish", {}, "special"],
  ["Elu", { alpha: 0.7 }, "any"],
  ["Selu", {}, "any"],
  ["Celu", { alpha: 0.6 }, "any"],
  ["Softsign", {}, "any"],
  ["ThresholdedRelu", { alpha: 0.5 }, "special"],
  ["Sign", {}, "special"],
  ["Mish", {}, "any"],
];
const BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu", "Equal", "Less", "Greater", "LessOrEqual"];
const VARIADIC = ["Max", "Min", "Sum", "Mean"];
/** Every reduction the op library lowers. */
const REDUCES = Object.keys(ReduceKind);

/** Single-op families (also run with constant inputs). */
const SINGLE: Record<string, (g: Gen) => Case> = {
  binary(g) {
    const r = g.r, op = pick(r, BINARY), out = dims(r, int(r, 0, 4));
    const a = op === "PRelu" || r() < 0.5 ? out : under(r, out);
    const bKind: Kind = op === "Div" || op === "Mod" ? "special" : op === "Pow" ? "int" : "any";
    return g.single(op, pick(r, [13, 14, 17]), [
      { name: "a", shape: a, kind: op === "Pow" ? "special" : "any" },
      { name: "b", shape: under(r, out), kind: bKind, init: r() < 0.3 },
    ], op === "Mod" ? { fmod: 1 } : {});
  },
  variadic(g) {
    const r = g.r, op = pick(r, VARIADIC), out = dims(r, int(r, 0, 3));
    const n = int(r, 1, 3);
    return g.single(op, 13, Array.from({ length: n }, (_, i) => ({ name: `i${i}`, shape: i ? under(r, out) : out })));
  },
  unary(g) {
    const [op, attrs, kind] = pick(g.r, UNARY);
    return g.single(op, op === "Gelu" ? 20 : 13, [{ name: "x", shape: dims(g.r, int(g.r, 0, 4)), kind }], attrs);
  },
  clip(g) {
    const r = g.r, lo = r() < 0.7 ? -0.5 : undefined, hi = r() < 0.7 ? pick(r, [0.7, -1]) : undefined;
    const specs: Spec[] = [{ name: "x", shape: dims(r, int(r, 0, 3)), kind: "special" }];
    if (lo !== undefined || hi !== undefined) {
      specs.push(lo === undefined ? { name: "", shape: [] } : { name: "lo", shape: [], init: true });
    }
    if (hi !== undefined) specs.push({ name: "hi", shape: [], init: true });
    return g.single("Clip", 13, specs);
  },
  reduce(g) {
    const r = g.r, op = pick(r, REDUCES), rank = int(r, 1, 4), opset = pick(r, [13, 18]);
    const axes = [...Array(rank).keys()].filter(() => r() < 0.4).map((a) => (r() < 0.5 ? a - rank : a));
    const attrs: Attrs = r() < 0.5 ? { keepdims: int(r, 0, 1) } : {};
    const asInput = opset >= 18 || op === "ReduceSum";
    if (asInput && r() < 0.4) attrs.noop_with_empty_axes = int(r, 0, 1);
    const kind: Kind = op === "ReduceLogSum" || op === "ReduceProd" ? "pos" : "any";
    const specs: Spec[] = [{ name: "x", shape: dims(r, rank), kind }];
    if (asInput && axes.length > 0) specs.push({ name: "axes", shape: [axes.length], i64: axes });
    else if (axes.length > 0) attrs.axes = axes;
    return g.single(op, opset, specs, attrs);
  },
  softmax(g) {
    const r = g.r, op = pick(r, ["Softmax", "LogSoftmax", "Hardmax"]), rank = int(r, 1, 4);
    const attrs: Attrs = r() < 0.7 ? { axis: int(r, -rank, rank - 1) } : {};
    const kind: Kind = op === "Hardmax" ? "ties" : "any";
    return g.single(op, pick(r, [11, 13]), [{ name: "x", shape: dims(r, rank), kind }], attrs);
  },
  argmax(g) {
    const r = g.r, rank = int(r, 1, 4);
    const attrs: Attrs = { axis: int(r, -rank, rank - 1), keepdims: int(r, 0, 1), select_last_index: int(r, 0, 1) };
    return g.single(pick(r, ["ArgMax", "ArgMin"]), 13, [{ name: "x", shape: dims(r, rank), kind: "ties" }], attrs);
  },
  gemm(g) {
    const r = g.r, M = int(r, 1, 5), K = int(r, 1, 6), N = int(r, 1, 5), tA = int(r, 0, 1), tB = int(r, 0, 1);
    const attrs: Attrs = { transA: tA, transB: tB };
    if (r() < 0.4) attrs.alpha = float(pick(r, [0.5, -1.25, 2]));
    if (r() < 0.4) attrs.beta = float(pick(r, [0, 0.5, -2]));
    const specs: Spec[] = [{ name: "a", shape: tA ? [K, M] : [M, K] }, {
      name: "b",
      shape: tB ? [N, K] : [K, N],
      init: r() < 0.5,
    }];
    const c = pick(r, [null, [], [1], [N], [1, N], [M, 1], [M, N]]);
    if (c !== null) specs.push({ name: "c", shape: c, init: r() < 0.5 });
    return g.single("Gemm", 13, specs, attrs);
  },
  matmul(g) {
    const r = g.r, K = int(r, 1, 5), aRank = int(r, 1, 4), bRank = int(r, 1, 4);
    const batch = dims(r, Math.max(0, Math.max(aRank, bRank) - 2), 1, 3);
    const lead = (rank: number) => batch.slice(batch.length - (rank - 2)).map((d) => (r() < 0.3 ? 1 : d));
    const a = aRank === 1 ? [K] : [...lead(aRank), int(r, 1, 4), K];
    const b = bRank === 1 ? [K] : [...lead(bRank), K, int(r, 1, 4)];
    return g.single("MatMul", 13, [{ name: "a", shape: a }, { name: "b", shape: b, init: r() < 0.4 }]);
  },
  conv(g) {
    const r = g.r, d = int(r, 1, 2), group = pick(r, [1, 1, 2, 3]);
    const C = group * int(r, 1, 2), M = group * int(r, 1, 3), k = dims(r, d, 1, 3);
    const attrs: Attrs = {};
    if (r() < 0.5) attrs.strides = dims(r, d, 1, 3);
    if (r() < 0.4) attrs.dilations = dims(r, d, 1, 2);
    if (group > 1) attrs.group = group;
    const pad = r();
    if (pad < 0.25) attrs.auto_pad = pick(r, ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"]);
    else if (pad < 0.7) attrs.pads = dims(r, 2 * d, 0, 2);
    if (r() < 0.5) attrs.kernel_shape = k;
    const specs: Spec[] = [
      { name: "x", shape: [int(r, 1, 2), C, ...dims(r, d, 3, 7)] },
      { name: "w", shape: [M, C / group, ...k], init: r() < 0.7 },
    ];
    if (r() < 0.5) specs.push({ name: "bias", shape: [M], init: true });
    return g.single("Conv", 11, specs, attrs);
  },
  pool(g) {
    const r = g.r, op = pick(r, ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]);
    const global = op.startsWith("Global"), d = int(r, 1, 2);
    const attrs: Attrs = {};
    if (!global) {
      const k = dims(r, d, 1, 3);
      attrs.kernel_shape = k;
      if (r() < 0.6) attrs.strides = dims(r, d, 1, 3);
      if (r() < 0.5) attrs.ceil_mode = int(r, 0, 1);
      if (op === "AveragePool" && r() < 0.6) attrs.count_include_pad = int(r, 0, 1);
      if (r() < 0.3) attrs.dilations = dims(r, d, 1, 2);
      const pad = r();
      if (pad < 0.25) attrs.auto_pad = pick(r, ["SAME_UPPER", "SAME_LOWER", "VALID"]);
      else if (pad < 0.7) attrs.pads = Array.from({ length: 2 * d }, (_, i) => int(r, 0, k[i % d] - 1));
    }
    const x = [int(r, 1, 2), int(r, 1, 3), ...dims(r, global ? int(r, 1, 3) : d, 3, 8)];
    return g.single(op, pick(r, [11, 19]), [{ name: "x", shape: x }], attrs);
  },
  slice(g) {
    const r = g.r, rank = int(r, 1, 4), shape = dims(r, rank, 1, 6), n = int(r, 1, rank);
    const axes = shuffled(r, rank).slice(0, n).map((a) => (r() < 0.5 ? a - rank : a));
    const steps = axes.map(() => pick(r, [1, 1, 2, -1, -2, 3]));
    const point = (dim: number) => pick(r, [int(r, -dim - 2, dim + 2), 0, -1, 2 ** 31 - 1, -(2 ** 31), dim]);
    const starts = axes.map((a) => point(shape[(a + rank) % rank]));
    const ends = axes.map((a) => point(shape[(a + rank) % rank]));
    return g.single("Slice", 13, [
      { name: "x", shape },
      { name: "starts", shape: [n], i64: starts },
      { name: "ends", shape: [n], i64: ends },
      { name: "axes", shape: [n], i64: axes },
      { name: "steps", shape: [n], i64: steps },
    ]);
  },
  gather(g) {
    const r = g.r, rank = int(r, 1, 3), shape = dims(r, rank, 1, 5), axis = int(r, -rank, rank - 1);
    const dim = shape[(axis + rank) % rank], ishape = dims(r, int(r, 0, 2), 1, 3);
    const idx = Array.from({ length: size(ishape) }, () => int(r, -dim, dim - 1));
    return g.single("Gather", 13, [{ name: "x", shape }, { name: "i", shape: ishape, i64: idx }], { axis });
  },
  transpose(g) {
    const r = g.r, rank = int(r, 1, 6);
    return g.single("Transpose", 13, [{ name: "x", shape: dims(r, rank) }], { perm: shuffled(r, rank) });
  },
  concat(g) {
    const r = g.r, rank = int(r, 1, 4), shape = dims(r, rank), axis = int(r, -rank, rank - 1);
    const specs = Array.from({ length: int(r, 1, 4) }, (_, i) => ({
      name: `i${i}`,
      shape: shape.map((d, j) => (j === (axis + rank) % rank ? int(r, 1, 3) : d)),
      init: r() < 0.3,
    }));
    return g.single("Concat", 13, specs, { axis });
  },
  flatten(g) {
    const r = g.r, rank = int(r, 0, 4);
    return g.single("Flatten", 13, [{ name: "x", shape: dims(r, rank) }], { axis: int(r, -rank, rank) });
  },
  squeeze(g) {
    const r = g.r, rank = int(r, 1, 4), shape = dims(r, rank, 1, 3).map((d) => (r() < 0.4 ? 1 : d));
    const axes = shape.flatMap((d, i) => (d === 1 && r() < 0.6 ? [r() < 0.5 ? i - rank : i] : []));
    if (r() < 0.5) return g.single("Squeeze", 11, [{ name: "x", shape }], axes.length ? { axes } : {});
    const specs: Spec[] = [{ name: "x", shape }];
    if (axes.length) specs.push({ name: "axes", shape: [axes.length], i64: axes });
    return g.single("Squeeze", 13, specs);
  },
  unsqueeze(g) {
    const r = g.r, rank = int(r, 0, 3), n = int(r, 1, 2), outRank = rank + n;
    const axes = shuffled(r, outRank).slice(0, n).map((a) => (r() < 0.5 ? a - outRank : a));
    const shape = dims(r, rank);
    if (r() < 0.5) return g.single("Unsqueeze", 11, [{ name: "x", shape }], { axes });
    return g.single("Unsqueeze", 13, [{ name: "x", shape }, { name: "axes", shape: [n], i64: axes }]);
  },
  norm(g) {
    const r = g.r, which = int(r, 0, 2);
    if (which === 0) {
      const rank = int(r, 1, 4), shape = dims(r, rank, 1, 5), axis = int(r, -rank, rank - 1);
      const normalized = shape.slice((axis + rank) % rank);
      const specs: Spec[] = [{ name: "x", shape }, { name: "s", shape: r() < 0.2 ? [] : normalized, init: r() < 0.6 }];
      if (r() < 0.6) specs.push({ name: "bb", shape: normalized, init: r() < 0.6 });
      return g.single("LayerNormalization", 17, specs, { axis, epsilon: float(pick(r, [1e-3, 0.1, 1e-5])) });
    }
    const C = int(r, 1, 4), x = [int(r, 1, 2), C, ...dims(r, int(r, which === 1 ? 0 : 1, 2))];
    const per = (name: string, kind: Kind = "any"): Spec => ({ name, shape: [C], init: true, kind });
    if (which === 1) {
      const specs = [{ name: "x", shape: x }, per("s"), per("bb"), per("mean"), per("var", "pos")];
      return g.single("BatchNormalization", pick(r, [11, 15]), specs, { epsilon: float(pick(r, [1e-3, 0.1])) });
    }
    return g.single("InstanceNormalization", 11, [{ name: "x", shape: x }, per("s"), per("bb")], {
      epsilon: float(0.01),
    });
  },
  expandTile(g) {
    const r = g.r, rank = int(r, 1, 3), shape = dims(r, rank, 1, 3).map((d) => (r() < 0.4 ? 1 : d));
    if (r() < 0.5) {
      return g.single("Tile", 13, [{ name: "x", shape }, { name: "rep", shape: [rank], i64: dims(r, rank, 1, 3) }]);
    }
    const target = [...dims(r, int(r, 0, 2), 1, 3), ...shape.map((d) => (d === 1 ? pick(r, [1, 2, 3]) : d))];
    return g.single("Expand", 13, [{ name: "x", shape }, { name: "shape", shape: [target.length], i64: target }]);
  },
  pad(g) {
    const r = g.r, rank = int(r, 1, 4), shape = dims(r, rank, 2, 4);
    const mode = pick(r, ["constant", "reflect", "edge", "wrap"]);
    const pads = Array.from({ length: 2 * rank }, () => int(r, -1, 3));
    if (mode === "wrap") {
      // Past the (cropped) axis onnxruntime writes zeros where np.pad, the spec's reference, wraps again.
      for (let d = 0; d < rank; d++) {
        const kept = shape[d] + Math.min(pads[d], 0) + Math.min(pads[rank + d], 0);
        pads[d] = Math.min(pads[d], kept);
        pads[rank + d] = Math.min(pads[rank + d], kept);
      }
    }
    const specs: Spec[] = [{ name: "x", shape }, { name: "pads", shape: [2 * rank], i64: pads }];
    if (mode === "constant" && r() < 0.5) specs.push({ name: "v", shape: [], init: true });
    return g.single("Pad", pick(r, [13, 19]), specs, { mode });
  },
  depthSpace(g) {
    const r = g.r, bs = int(r, 1, 3);
    if (r() < 0.5) {
      const x = [int(r, 1, 2), bs * bs * int(r, 1, 2), int(r, 1, 3), int(r, 1, 3)];
      return g.single("DepthToSpace", 13, [{ name: "x", shape: x }], { blocksize: bs, mode: pick(r, ["DCR", "CRD"]) });
    }
    const x = [int(r, 1, 2), int(r, 1, 3), bs * int(r, 1, 3), bs * int(r, 1, 3)];
    return g.single("SpaceToDepth", 13, [{ name: "x", shape: x }], { blocksize: bs });
  },
  split(g) {
    const r = g.r, rank = int(r, 1, 3), shape = dims(r, rank, 2, 6), axis = int(r, -rank, rank - 1);
    const dim = shape[(axis + rank) % rank], n = int(r, 1, Math.min(3, dim));
    if (r() < 0.5) {
      const sizes = Array.from({ length: n }, (_, i) => (i < n - 1 ? 1 : dim - (n - 1)));
      return g.single("Split", 13, [{ name: "x", shape }, { name: "split", shape: [n], i64: sizes }], { axis }, n);
    }
    return g.single("Split", 18, [{ name: "x", shape }], { axis, num_outputs: n }, n);
  },
};

const ACTIVATIONS: ReadonlyArray<[string, Attrs, number[] | null]> = [
  ["Relu", {}, null],
  ["Sigmoid", {}, null],
  ["Tanh", {}, null],
  ["HardSwish", {}, null],
  ["LeakyRelu", { alpha: 0.2 }, null],
  ["Gelu", {}, null],
  ["Gelu", { approximate: "tanh" }, null],
  ["Clip", {}, [-0.5, 0.6]],
  ["Clip", {}, [0.5, -0.5]],
  ["Clip", {}, [-0.3]],
];

function activation(r: Rng, b: OnnxBuilder, x: string): [string, string] {
  const [op, attrs, bounds] = pick(r, ACTIVATIONS);
  const ins = [
    x,
    ...(bounds ?? []).map((v) => b.initializer(b.fresh("bound"), ConstTensor.fromNumbers("float32", [], [v]))),
  ];
  return [b.node(op, ins, attrs), `${op}${JSON.stringify(attrs)}${bounds ? `[${bounds}]` : ""}`];
}

function weight(r: Rng, b: OnnxBuilder, shape: number[]): string {
  return b.initializer(b.fresh("w"), ConstTensor.fromNumbers("float32", shape, values(r, shape)));
}

/** Chains the fuser rewrites. */
const CHAINS: Record<string, (r: Rng) => Case> = {
  matmulChain(r) {
    const b = new OnnxBuilder("case", pick(r, [13, 17, 18]));
    const K = int(r, 1, 5), M = int(r, 1, 4), N = int(r, 1, 5);
    const aRank = pick(r, [1, 2, 2, 3, 4]), bRank = pick(r, [1, 2, 2, 3]);
    const batch = dims(r, Math.max(0, Math.max(aRank, bRank) - 2), 1, 3);
    const aShape = aRank === 1 ? [K] : [...batch.slice(batch.length - (aRank - 2)), M, K];
    const bShape = bRank === 1 ? [K] : [...batch.slice(batch.length - (bRank - 2)), K, N];
    const feeds: Record<string, Feed> = {}, desc: string[] = [];
    const operand = (name: string, shape: number[]) => {
      if (shape.length > 1 && r() < 0.4) {
        // A Transpose producing `shape`: stored[p[j]] = shape[j].
        const p = shuffled(r, shape.length), stored = new Array<number>(shape.length);
        p.forEach((pj, j) => (stored[pj] = shape[j]));
        feeds[name] = { shape: stored, data: values(r, stored) };
        desc.push(`${name}=Transpose([${stored}], perm [${p}])`);
        return b.node("Transpose", [b.input(name, "float32", stored)], { perm: p });
      }
      feeds[name] = { shape, data: values(r, shape) };
      desc.push(`${name}[${shape}]`);
      return b.input(name, "float32", shape);
    };
    let t = b.node("MatMul", [operand("a", aShape), operand("b", bShape)]);
    const yRank = Math.max(aRank, bRank) - 2 + (aRank > 1 ? 1 : 0) + (bRank > 1 ? 1 : 0);
    if (r() < 0.5) {
      const kShape = pick(r, [[], [1], [1, 1], [1, 1, 1, 1, 1]]), k = pick(r, [0.125, -2, 3]);
      const kn = b.initializer(b.fresh("k"), ConstTensor.fromNumbers("float32", kShape, [k]));
      const op = r() < 0.4 ? "Div" : "Mul";
      t = b.node(op, op === "Div" || r() < 0.5 ? [t, kn] : [kn, t]);
      desc.push(`${op} ${k}[${kShape}]`);
    }
    if (r() < 0.6) {
      const yShape = [...batch, ...(aRank > 1 ? [M] : []), ...(bRank > 1 ? [N] : [])].slice(-Math.max(yRank, 0));
      const cShape = under(r, yShape);
      t = b.node("Add", r() < 0.5 ? [t, weight(r, b, cShape)] : [weight(r, b, cShape), t]);
      desc.push(`Add [${cShape}]`);
    }
    if (r() < 0.6) {
      const [out, what] = activation(r, b, t);
      t = out;
      desc.push(what);
    }
    b.output(t, "float32");
    return { desc: `MatMul chain ${desc.join(" ")}`, bytes: b.toBytes(), feeds };
  },
  gemmActivation(r) {
    const b = new OnnxBuilder("case", 13);
    const M = int(r, 1, 4), K = int(r, 1, 5), N = int(r, 1, 4), tA = int(r, 0, 1), tB = int(r, 0, 1);
    const aShape = tA ? [K, M] : [M, K], cShape = pick(r, [[], [N], [M, 1], [M, N], [1, N]]);
    const attrs: Attrs = {
      transA: tA,
      transB: tB,
      alpha: float(pick(r, [1, 0.5, -1.5])),
      beta: float(pick(r, [1, 0, 2])),
    };
    const gemm = b.node("Gemm", [
      b.input("a", "float32", aShape),
      weight(r, b, tB ? [N, K] : [K, N]),
      weight(r, b, cShape),
    ], attrs);
    const [out, what] = activation(r, b, gemm);
    b.output(out, "float32");
    return {
      desc: `Gemm ${JSON.stringify(attrs)} a[${aShape}] c[${cShape}] ${what}`,
      bytes: b.toBytes(),
      feeds: { a: { shape: aShape, data: values(r, aShape) } },
    };
  },
  convActivation(r) {
    const b = new OnnxBuilder("case", 13);
    const d = int(r, 1, 2), group = pick(r, [1, 2]), C = group * int(r, 1, 2), M = group * int(r, 1, 2);
    const x = [1, C, ...dims(r, d, 3, 6)], w = [M, C / group, ...dims(r, d, 1, 3)];
    const attrs: Attrs = { group, pads: dims(r, 2 * d, 0, 1), strides: dims(r, d, 1, 2) };
    const ins = [b.input("x", "float32", x), weight(r, b, w)];
    if (r() < 0.5) ins.push(weight(r, b, [M]));
    const [out, what] = activation(r, b, b.node("Conv", ins, attrs));
    b.output(out, "float32");
    return {
      desc: `Conv ${JSON.stringify(attrs)} x[${x}] w[${w}] ${what}`,
      bytes: b.toBytes(),
      feeds: { x: { shape: x, data: values(r, x) } },
    };
  },
  layerNormChain(r) {
    const opset = pick(r, [13, 17, 18]), b = new OnnxBuilder("case", opset);
    const rank = int(r, 2, 4), x = dims(r, rank, 2, 5), n = int(r, 1, 2);
    const axes = Array.from({ length: n }, (_, i) => rank - n + i).map((a) => (r() < 0.5 ? a - rank : a));
    const input = b.input("x", "float32", x);
    const mean = (v: string) =>
      opset >= 18 ? b.node("ReduceMean", [v, b.ints(b.fresh("axes"), axes)]) : b.node("ReduceMean", [v], { axes });
    const d = b.node("Sub", [input, mean(input)]);
    const sq = r() < 0.3
      ? b.node("Mul", [d, d])
      : b.node("Pow", [d, b.initializer(b.fresh("two"), ConstTensor.fromNumbers("float32", [], [2]))]);
    const eps = b.initializer(b.fresh("eps"), ConstTensor.fromNumbers("float32", [], [pick(r, [1e-5, 0.1])]));
    const normalized = b.node("Div", [d, b.node("Sqrt", [b.node("Add", [mean(sq), eps])])]);
    const shape = x.slice(rank - n), gamma = r() < 0.3 ? shape.slice(1) : shape;
    let out = b.node("Mul", [normalized, weight(r, b, gamma)]);
    if (r() < 0.6) out = b.node("Add", [out, weight(r, b, shape)]);
    b.output(out, "float32");
    return {
      desc: `LayerNorm chain opset ${opset} x[${x}] axes [${axes}] gamma [${gamma}]`,
      bytes: b.toBytes(),
      feeds: { x: { shape: x, data: values(r, x) } },
    };
  },
};

/** The i-th case of the sample: single ops, the same with constant inputs, and fusable chains. */
function caseOf(i: number): Case {
  const r = prng(0x5eed + i), singles = Object.keys(SINGLE), chains = Object.keys(CHAINS);
  const pickFamily = i % 4;
  if (pickFamily === 3) return CHAINS[chains[(i >> 2) % chains.length]](r);
  return SINGLE[singles[(i >> 2) % singles.length]](new Gen(r, pickFamily === 2));
}

const harness = await OpHarness.create();
const WEB_WORKER = globalThis.Worker;

/** onnxruntime's outputs, or undefined when it rejects the model or its inputs. */
async function reference(c: Case): Promise<Record<string, ort.Tensor> | undefined> {
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(c.bytes, { graphOptimizationLevel: "disabled", logSeverityLevel: 4 });
  } catch {
    return undefined;
  } finally {
    globalThis.Worker = WEB_WORKER; // onnxruntime-web replaces it; the simulator needs it
  }
  try {
    return await session.run(Object.fromEntries(
      Object.entries(c.feeds).map((
        [k, f],
      ) => [k, new ort.Tensor(f.data instanceof BigInt64Array ? "int64" : "float32", f.data, f.shape)]),
    ));
  } catch {
    return undefined;
  } finally {
    await session.release();
  }
}

function numbers(dtype: string, bytes: Uint8Array): number[] {
  const buffer = bytes.slice().buffer;
  if (dtype === "float32") return [...new Float32Array(buffer)];
  if (dtype === "int64") return [...new BigInt64Array(buffer)].map(Number);
  if (dtype === "bool") return [...new Uint8Array(buffer)];
  throw new Error(`unexpected output dtype ${dtype}`);
}

/** "ok", "refused", or what differs. */
async function verdict(c: Case, ref: Record<string, ort.Tensor>, spmdMinWork: number | undefined): Promise<string> {
  let compiled;
  try {
    const inputShapes = Object.fromEntries(Object.entries(c.feeds).map(([k, f]) => [k, f.shape]));
    compiled = compileOnnx(c.bytes, { inputShapes, spmdMinWork });
  } catch (e) {
    if (e instanceof OnnxCompileError || e instanceof NrtError) return "refused";
    return `compile threw an untyped ${(e as Error).name}: ${(e as Error).message}`;
  }
  const ours = await runCompiled(
    harness,
    compiled,
    Object.fromEntries(Object.entries(c.feeds).map(([k, f]) => [k, f.data])),
  );
  for (const o of compiled.outputs) {
    const want = ref[o.name];
    if (want.dims.join() !== o.shape.join()) return `${o.name} has shape [${o.shape}], onnxruntime [${want.dims}]`;
    const got = numbers(o.dtype, ours[o.name]);
    const expected = Array.from(want.data as ArrayLike<number | bigint | boolean>, Number);
    for (let i = 0; i < expected.length; i++) {
      const a = got[i], b = expected[i];
      if (a === b || (Number.isNaN(a) && Number.isNaN(b)) || Math.abs(a - b) <= 1e-5 + 1e-4 * Math.abs(b)) continue;
      return `${o.name}[${i}] is ${a}, onnxruntime ${b}`;
    }
  }
  return "ok";
}

const CASES = 2400;

describe("the ONNX compiler against onnxruntime-web on seeded random graphs", () => {
  test(`${CASES} cases match onnxruntime or are refused with a typed compile error`, async () => {
    const wrong: string[] = [], tally = { ok: 0, refused: 0, skipped: 0 };
    for (let i = 0; i < CASES; i++) {
      const c = caseOf(i), ref = await reference(c);
      if (ref === undefined) {
        tally.skipped++;
        continue;
      }
      const v = await verdict(c, ref, [undefined, 0, Infinity][i % 3]);
      if (v === "ok" || v === "refused") tally[v]++;
      else wrong.push(`case ${i}: ${c.desc}: ${v}`);
    }
    expect(wrong).toEqual([]);
    // The sample must mostly compare numbers, not refusals or models onnxruntime rejects.
    expect(tally.ok).toBeGreaterThan(CASES * 0.75);
  }, 120_000);
});

describe("an empty axes tensor is a parameter, not an empty value", () => {
  test("Squeeze (opset 13) and ReduceSum (opset 18) with an empty axes initializer match onnxruntime", async () => {
    const x = [1, 4, 1, 3], data = Float32Array.from({ length: 12 }, (_, i) => i - 5.5);
    const cases: Case[] = [];
    {
      const b = new OnnxBuilder("squeeze_empty_axes", 13);
      const axes = b.initializer("axes", ConstTensor.fromNumbers("int64", [0], []));
      b.output(b.node("Squeeze", [b.input("x", "float32", x), axes]), "float32");
      cases.push({ desc: "Squeeze with axes []", bytes: b.toBytes(), feeds: { x: { shape: x, data } } });
    }
    for (const noop of [0, 1]) {
      const b = new OnnxBuilder(`reduce_empty_axes_${noop}`, 18);
      const axes = b.initializer("axes", ConstTensor.fromNumbers("int64", [0], []));
      b.output(
        b.node("ReduceSum", [b.input("x", "float32", x), axes], { keepdims: 1, noop_with_empty_axes: noop }),
        "float32",
      );
      cases.push({ desc: `ReduceSum noop ${noop} axes []`, bytes: b.toBytes(), feeds: { x: { shape: x, data } } });
    }
    for (const c of cases) {
      const ref = await reference(c);
      expect({ c: c.desc, reference: ref !== undefined }).toEqual({ c: c.desc, reference: true });
      expect({ c: c.desc, verdict: await verdict(c, ref!, undefined) }).toEqual({ c: c.desc, verdict: "ok" });
    }
  });
});
