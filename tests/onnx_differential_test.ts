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
 *
 * A second sample covers data that is not float: int32 and int64 Add/Sub/Mul/Div/Mod (both fmod)/Max/Min and the
 * comparisons, with the types' extremes and values past 2^53; Cast among float32, int32, int64, uint8 and bool;
 * Where over float32, int32, int64 and uint8 (onnxruntime has no Where for bool); and 3-D convolution and pooling, which docs/onnx.md does not claim (Conv and the
 * windowed pools are 1-D and 2-D, ConvTranspose is not supported) and which must be refused with the typed error,
 * while GlobalAveragePool and GlobalMaxPool over 5-D must match. Integers and bools are compared exactly. Integer
 * Neg and Abs are float32-only in the table: over a graph input they must be refused, over constants they fold and
 * must match. Where onnxruntime departs from the spec (an int64 fmod, which it computes through float64) the
 * sample avoids the values and a fixed test checks the spec's answer.
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
/** The dtypes of non-float data the sample feeds and compares. */
type DataDtype = "float32" | "int32" | "int64" | "uint8" | "bool";
interface Feed {
  readonly shape: number[];
  readonly data: Float32Array | BigInt64Array | Int32Array | Uint8Array;
  /** Given for a Uint8Array (uint8 or bool); the other arrays name their dtype. */
  readonly dtype?: DataDtype;
}
interface Case {
  readonly desc: string;
  readonly bytes: Uint8Array;
  readonly feeds: Record<string, Feed>;
}
/**
 * How values are drawn. Floats: "any" (-2..2), "pos", "special" (zeros, -0, halves), "ties", "int", "nan" (special
 * plus NaN and ±Infinity). Integers: "small" (-6..6), "wide" (the type's extremes, 2^53 ± small, 2^60 + 2^36 + 1
 * which float64 rounds before float32 does, random bits), "divisor" and "wideDivisor" the same without 0 or -1
 * (an integer division by zero is undefined, and MIN / -1 overflows).
 */
type Kind = "any" | "pos" | "special" | "ties" | "int" | "nan" | "small" | "wide" | "divisor" | "wideDivisor";
interface Spec {
  readonly name: string;
  readonly shape: number[];
  readonly kind?: Kind;
  /** An initializer rather than a graph input. */
  readonly init?: boolean;
  /** An int64 initializer with these values. */
  readonly i64?: number[];
  /** float32 unless given. */
  readonly dtype?: DataDtype;
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
    if (kind === "nan" && r() < 0.15) return pick(r, [NaN, Infinity, -Infinity]);
    if (kind === "special" || kind === "nan") {
      const u = r();
      return u < 0.1 ? 0 : u < 0.15 ? -0 : u < 0.25 ? int(r, -3, 3) + 0.5 : (r() * 2 - 1) * 3;
    }
    return (r() * 2 - 1) * 2;
  });
}

const I64_WIDE = [
  -(2n ** 63n),
  2n ** 63n - 1n,
  -(2n ** 63n) + 1n,
  2n ** 53n + 1n,
  -(2n ** 53n) - 3n,
  2n ** 60n + 2n ** 36n + 1n,
  2n ** 31n,
  -(2n ** 31n) - 1n,
  4294967301n,
];
const I32_WIDE = [-(2 ** 31), 2 ** 31 - 1, -(2 ** 31) + 1, 46341, -65536, 2 ** 30 + 7, 300, -129, 255];

/** Integer or bool data of `dtype` drawn as `kind` says. */
function intValues(
  r: Rng,
  dtype: DataDtype,
  shape: readonly number[],
  kind: Kind,
): Int32Array | BigInt64Array | Uint8Array {
  const n = size(shape),
    wide = kind === "wide" || kind === "wideDivisor",
    nonzero = kind !== "small" && kind !== "wide";
  const draw = (): bigint => {
    if (dtype === "bool") return BigInt(int(r, 0, 1));
    for (;;) {
      let v: bigint;
      if (dtype === "uint8") v = BigInt(wide ? int(r, 0, 255) : int(r, 0, 6));
      else if (!wide || r() < 0.4) v = BigInt(int(r, -6, 6));
      else if (dtype === "int32") v = BigInt(r() < 0.7 ? pick(r, I32_WIDE) : Math.floor(r() * 2 ** 32) - 2 ** 31);
      else {
        v = r() < 0.7
          ? pick(r, I64_WIDE)
          : BigInt.asIntN(64, (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32)));
      }
      if (!nonzero || (v !== 0n && v !== -1n)) return v;
    }
  };
  if (dtype === "int64") return BigInt64Array.from({ length: n }, draw);
  if (dtype === "int32") return Int32Array.from({ length: n }, () => Number(draw()));
  return Uint8Array.from({ length: n }, () => Number(draw()));
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

  /** One node over `specs`; its outputs are `outDtype`, else what the op gives for float32 inputs. */
  single(
    op: string,
    opset: number,
    specs: readonly Spec[],
    attrs: Attrs = {},
    outputs = 1,
    outDtype?: DataDtype,
  ): Case {
    const b = new OnnxBuilder("case", opset);
    const feeds: Record<string, Feed> = {};
    const names = specs.map((s) => {
      if (s.name === "") return "";
      if (s.i64 !== undefined) return b.ints(s.name, s.i64, s.shape);
      const dtype = s.dtype ?? "float32";
      const data = dtype === "float32"
        ? values(this.r, s.shape, s.kind)
        : intValues(this.r, dtype, s.shape, s.kind ?? "small");
      if (s.init || this.constants) {
        return b.initializer(s.name, new ConstTensor(dtype, s.shape, new Uint8Array(data.buffer.slice(0))));
      }
      feeds[s.name] = { shape: s.shape, data, dtype };
      return b.input(s.name, dtype, s.shape);
    });
    const outs = b.nodeN(op, names, attrs, { outputs: Array.from({ length: outputs }, (_, i) => `y${i}`) });
    const dtype = outDtype ??
      (op.startsWith("Arg")
        ? "int64"
        : ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"].includes(op)
        ? "bool"
        : "float32");
    for (const o of outs) b.output(o, dtype);
    const inputs = specs.map((s) =>
      `${s.name}${s.dtype && s.dtype !== "float32" ? `:${s.dtype}` : ""}[${s.shape}]${s.i64 ? `=[${s.i64}]` : ""}`
    ).join(" ");
    const how = this.constants ? " (constant inputs)" : "";
    return { desc: `${op} opset ${opset} ${JSON.stringify(attrs)} ${inputs}${how}`, bytes: b.toBytes(), feeds };
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
      // Scale and B: the normalized shape, or any shape that broadcasts to it unidirectionally (the spec's Mul and
      // Add), a scalar included.
      const affine = () => (r() < 0.3 ? normalized : under(r, normalized));
      const specs: Spec[] = [{ name: "x", shape }, { name: "s", shape: affine(), init: r() < 0.6 }];
      if (r() < 0.6) specs.push({ name: "bb", shape: affine(), init: r() < 0.6 });
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
    const dim = shape[(axis + rank) % rank];
    if (r() < 0.5) {
      // Sizes between sorted cut points: zero-size parts (the spec allows them) come up often.
      const n = int(r, 1, 4),
        cuts = [0, ...Array.from({ length: n - 1 }, () => int(r, 0, dim)).sort((a, b) => a - b), dim];
      const sizes = cuts.slice(1).map((c, i) => c - cuts[i]);
      return g.single("Split", 13, [{ name: "x", shape }, { name: "split", shape: [n], i64: sizes }], { axis }, n);
    }
    const n = int(r, 1, Math.min(3, dim));
    return g.single("Split", 18, [{ name: "x", shape }], { axis, num_outputs: n }, n);
  },
};

const INT_BINARY = ["Add", "Sub", "Mul", "Div", "Mod", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"];
/** Sum is left out: the spec's Sum takes floats only, and onnxruntime rejects an integer Sum as an invalid model. */
const INT_VARIADIC = ["Max", "Min"];
/** Not in docs/onnx.md for integers: a graph input must be refused, a constant folds and must still match. */
const INT_UNARY = ["Neg", "Abs"];
const CASTABLE: readonly DataDtype[] = ["float32", "int32", "int64", "uint8", "bool"];
const ONNX_TYPE: Readonly<Record<DataDtype, number>> = { float32: 1, uint8: 2, int32: 6, int64: 7, bool: 9 };

/** Integer arithmetic, Cast and Where over non-float data, and 3-D convolution (also run with constant inputs). */
const DATA: Record<string, (g: Gen) => Case> = {
  intArith(g) {
    const r = g.r, dtype = pick(r, ["int32", "int64"] as const), out = dims(r, int(r, 0, 3));
    const wide = r() < 0.5, kind: Kind = wide ? "wide" : "small";
    const u = r();
    if (u < 0.6) {
      const op = pick(r, INT_BINARY), divides = op === "Div" || op === "Mod";
      const a = r() < 0.5 ? out : under(r, out);
      const bKind: Kind = divides ? (wide ? "wideDivisor" : "divisor") : kind;
      const compare = !["Add", "Sub", "Mul", "Div", "Mod"].includes(op), fmod = op === "Mod" && r() < 0.5;
      // onnxruntime computes an integer fmod through float64 (std::fmod), so an int64 dividend past 2^53 comes out
      // wrong (-6638934287094571441 fmod -2 gives 0, the spec's np.fmod -1); we follow the spec, and the test
      // "int64 Mod with fmod = 1" below checks it. Here such dividends stay small.
      const aKind: Kind = fmod && dtype === "int64" ? "small" : kind;
      return g.single(
        op,
        pick(r, [13, 14]),
        [
          { name: "a", shape: a, kind: aKind, dtype },
          { name: "b", shape: under(r, out), kind: bKind, dtype, init: r() < 0.3 },
        ],
        fmod ? { fmod: 1 } : {},
        1,
        compare ? "bool" : dtype,
      );
    }
    if (u < 0.85) {
      const op = pick(r, INT_VARIADIC), n = int(r, 1, 3);
      const specs = Array.from(
        { length: n },
        (_, i): Spec => ({ name: `i${i}`, shape: i ? under(r, out) : out, kind, dtype }),
      );
      return g.single(op, 13, specs, {}, 1, dtype);
    }
    return g.single(pick(r, INT_UNARY), 13, [{ name: "x", shape: out, kind, dtype }], {}, 1, dtype);
  },
  cast(g) {
    const r = g.r, from = pick(r, CASTABLE), to = pick(r, CASTABLE), shape = dims(r, int(r, 0, 3));
    // A float outside the target's range (NaN included) is undefined behaviour in C++ and in ONNX's Cast: only
    // casts to float32 and bool see them.
    const kind: Kind = from !== "float32"
      ? pick(r, ["small", "wide"])
      : to === "float32" || to === "bool"
      ? "nan"
      : to === "uint8"
      ? "pos"
      : "special";
    return g.single("Cast", pick(r, [13, 19]), [{ name: "x", shape, kind, dtype: from }], { to: ONNX_TYPE[to] }, 1, to);
  },
  where(g) {
    // bool X and Y are left out: onnxruntime has no Where kernel for them.
    const r = g.r, dtype = pick(r, CASTABLE.filter((d) => d !== "bool")), out = dims(r, int(r, 0, 3));
    const kind: Kind = dtype === "float32" ? "special" : "wide";
    return g.single(
      "Where",
      16,
      [
        { name: "c", shape: under(r, out), dtype: "bool", init: r() < 0.3 },
        { name: "x", shape: r() < 0.5 ? out : under(r, out), kind, dtype },
        { name: "y", shape: under(r, out), kind, dtype, init: r() < 0.3 },
      ],
      {},
      1,
      dtype,
    );
  },
  conv3d(g) {
    const r = g.r,
      op = pick(r, ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]);
    const d = op === "ConvTranspose" ? int(r, 1, 3) : 3, k = dims(r, d, 1, 2), C = int(r, 1, 2), M = int(r, 1, 2);
    const x = [int(r, 1, 2), C, ...dims(r, d, 2, 4)];
    const attrs: Attrs = op.startsWith("Global") ? {} : { kernel_shape: k };
    if (!op.startsWith("Global") && r() < 0.5) attrs.strides = dims(r, d, 1, 2);
    if (!op.startsWith("Global") && r() < 0.5) {
      attrs.pads = dims(r, 2 * d, 0, 1).map((p, i) => Math.min(p, k[i % d] - 1));
    }
    const specs: Spec[] = [{ name: "x", shape: x }];
    if (op === "Conv") specs.push({ name: "w", shape: [M, C, ...k], init: true });
    if (op === "ConvTranspose") specs.push({ name: "w", shape: [C, M, ...k], init: true });
    return g.single(op, 13, specs, attrs);
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

/** The i-th case of the non-float sample: each family with graph inputs, then with constant inputs. */
function dataCaseOf(i: number): Case {
  const families = Object.keys(DATA);
  return DATA[families[(i >> 1) % families.length]](new Gen(prng(0xda7a + i), i % 2 === 1));
}

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
      ) => [k, new ort.Tensor(f.dtype ?? (f.data instanceof BigInt64Array ? "int64" : "float32"), f.data, f.shape)]),
    ));
  } catch {
    return undefined;
  } finally {
    await session.release();
  }
}

/** The elements, int64 as exact bigints. */
function elements(dtype: string, bytes: Uint8Array): Array<number | bigint> {
  const buffer = bytes.slice().buffer;
  if (dtype === "float32") return [...new Float32Array(buffer)];
  if (dtype === "int64") return [...new BigInt64Array(buffer)];
  if (dtype === "int32") return [...new Int32Array(buffer)];
  if (dtype === "bool" || dtype === "uint8") return [...new Uint8Array(buffer)];
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
    if (want.type !== o.dtype) return `${o.name} is ${o.dtype}, onnxruntime ${want.type}`;
    const got = elements(o.dtype, ours[o.name]);
    const expected = Array.from(
      want.data as ArrayLike<number | bigint | boolean>,
      (v) => (typeof v === "boolean" ? Number(v) : v),
    );
    if (got.length !== expected.length) return `${o.name} has ${got.length} elements, onnxruntime ${expected.length}`;
    for (let i = 0; i < expected.length; i++) {
      const a = got[i], b = expected[i];
      // Integers and bools exactly; floats within the tolerance, NaN matching NaN.
      if (a === b) continue;
      if (typeof a === "number" && typeof b === "number" && o.dtype === "float32") {
        if ((Number.isNaN(a) && Number.isNaN(b)) || Math.abs(a - b) <= 1e-5 + 1e-4 * Math.abs(b)) continue;
      }
      return `${o.name}[${i}] is ${a}, onnxruntime ${b}`;
    }
  }
  return "ok";
}

/**
 * Runs cases 0 … n-1 of `caseOf` against onnxruntime: the ones that differ, how many matched, were refused or were
 * skipped (onnxruntime rejects the model), and the refusals by op (" (constant)" for the constant-input variant).
 */
async function runSample(n: number, caseOf: (i: number) => Case): Promise<{
  wrong: string[];
  tally: { ok: number; refused: number; skipped: number };
  refused: Record<string, number>;
}> {
  const wrong: string[] = [], refused: Record<string, number> = {}, tally = { ok: 0, refused: 0, skipped: 0 };
  for (let i = 0; i < n; i++) {
    const c = caseOf(i), ref = await reference(c);
    if (ref === undefined) {
      tally.skipped++;
      continue;
    }
    const v = await verdict(c, ref, [undefined, 0, Infinity][i % 3]);
    if (v === "ok" || v === "refused") tally[v]++;
    else wrong.push(`case ${i}: ${c.desc}: ${v}`);
    if (v === "refused") {
      const op = c.desc.split(" ")[0] + (c.desc.endsWith("(constant inputs)") ? " (constant)" : "");
      refused[op] = (refused[op] ?? 0) + 1;
    }
  }
  return { wrong, tally, refused };
}

const CASES = 2400;

describe("the ONNX compiler against onnxruntime-web on seeded random graphs", () => {
  test(`${CASES} cases match onnxruntime or are refused with a typed compile error`, async () => {
    const { wrong, tally } = await runSample(CASES, caseOf);
    expect(wrong).toEqual([]);
    // The sample must mostly compare numbers, not refusals or models onnxruntime rejects.
    expect(tally.ok).toBeGreaterThan(CASES * 0.75);
  }, 120_000);
});

const DATA_CASES = 1200;

describe("the ONNX compiler against onnxruntime-web on integers, bools, Cast, Where and 3-D convolution", () => {
  test(`${DATA_CASES} cases match onnxruntime exactly or are refused with a typed compile error`, async () => {
    const { wrong, tally, refused } = await runSample(DATA_CASES, dataCaseOf);
    expect(wrong).toEqual([]);
    // Refused, as docs/onnx.md says: 3-D Conv and pools (1-D and 2-D only), ConvTranspose (not supported), and
    // integer Neg and Abs on graph inputs (float32 only; over constants they fold, and must match). Nothing else.
    expect(Object.keys(refused).sort()).toEqual([
      "AveragePool",
      "AveragePool (constant)",
      "Conv",
      "Conv (constant)",
      "ConvTranspose",
      "ConvTranspose (constant)",
      "MaxPool",
      "MaxPool (constant)",
      "Neg",
      "Abs",
    ].sort());
    expect(tally.skipped).toBe(0);
    expect(tally.ok).toBeGreaterThan(DATA_CASES * 0.75);
  }, 120_000);
});

/** Compiles `c`, checking it is refused with an OnnxCompileError whose message says `why`. */
function refusedWith(c: Case, why: string): void {
  const inputShapes = Object.fromEntries(Object.entries(c.feeds).map(([k, f]) => [k, f.shape]));
  let error: unknown;
  try {
    compileOnnx(c.bytes, { inputShapes });
  } catch (e) {
    error = e;
  }
  expect({ c: c.desc, typed: error instanceof OnnxCompileError }).toEqual({ c: c.desc, typed: true });
  expect((error as Error).message).toContain(why);
}

describe("what the sample compares is also pinned on fixed models", () => {
  const x = (shape: number[]): Feed => ({
    shape,
    data: Float32Array.from({ length: size(shape) }, (_, i) => ((i * 7) % 11) / 4 - 1),
  });

  test("int64 Mod with fmod = 1 follows the spec (np.fmod) past 2^53, on the kernels and folded", async () => {
    // onnxruntime computes it through float64 (std::fmod) and answers [0, 1]: the spec's np.fmod is exact.
    const a = [-6638934287094571441n, 7n];
    for (const constant of [false, true]) {
      const b = new OnnxBuilder("fmod", 13);
      const at = new ConstTensor("int64", [2], new Uint8Array(BigInt64Array.from(a).buffer));
      const an = constant ? b.initializer("a", at) : b.input("a", "int64", [2]);
      b.output(b.node("Mod", [an, b.ints("b", [-2, -2])], { fmod: 1 }, { outputs: ["y"] }), "int64");
      const compiled = compileOnnx(b.toBytes());
      const ours = await runCompiled(harness, compiled, constant ? {} : { a: BigInt64Array.from(a) });
      expect({ constant, y: elements("int64", ours.y) }).toEqual({ constant, y: [-1n, 1n] });
    }
  });

  test("LayerNormalization with Scale [1, 4] or [4] and B [3, 1] over axis -2 of [2, 3, 4] matches onnxruntime", async () => {
    for (const [scale, bias] of [[[1, 4], null], [[4], [3, 1]], [[3, 1], [4]]] as const) {
      for (const constant of [false, true]) {
        const b = new OnnxBuilder("ln", 17);
        const feeds: Record<string, Feed> = { x: x([2, 3, 4]) };
        const param = (name: string, shape: readonly number[]) => {
          const data = Float32Array.from({ length: size(shape) }, (_, i) => 0.5 + i * 0.25 * (i % 2 ? -1 : 1));
          if (constant) return b.initializer(name, ConstTensor.fromNumbers("float32", shape, data));
          feeds[name] = { shape: [...shape], data };
          return b.input(name, "float32", shape);
        };
        const ins = [b.input("x", "float32", [2, 3, 4]), param("s", scale), ...(bias ? [param("bb", bias)] : [])];
        b.output(b.node("LayerNormalization", ins, { axis: -2 }, { outputs: ["y"] }), "float32");
        const c = {
          desc: `LayerNormalization s[${scale}] bb[${bias}] constant ${constant}`,
          bytes: b.toBytes(),
          feeds,
        };
        const ref = await reference(c);
        expect({ c: c.desc, reference: ref !== undefined }).toEqual({ c: c.desc, reference: true });
        expect({ c: c.desc, verdict: await verdict(c, ref!, undefined) }).toEqual({ c: c.desc, verdict: "ok" });
      }
    }
  });

  test("Split [0, 3, 1] and [2, 0, 0, 2] match onnxruntime, the empty parts as outputs and as Concat pieces", async () => {
    for (const [sizes, concat] of [[[0, 3, 1], false], [[2, 0, 0, 2], false], [[0, 3, 1], true]] as const) {
      const b = new OnnxBuilder("split", 13);
      const parts = b.nodeN("Split", [b.input("x", "float32", [2, 4]), b.ints("split", [...sizes])], { axis: 1 }, {
        outputs: sizes.map((_, i) => `y${i}`),
      });
      if (concat) b.output(b.node("Concat", [...parts].reverse(), { axis: 1 }, { outputs: ["z"] }), "float32");
      else for (const p of parts) b.output(p, "float32");
      const c = { desc: `Split [${sizes}] concat ${concat}`, bytes: b.toBytes(), feeds: { x: x([2, 4]) } };
      const ref = await reference(c);
      expect({ c: c.desc, reference: ref !== undefined }).toEqual({ c: c.desc, reference: true });
      expect({ c: c.desc, verdict: await verdict(c, ref!, undefined) }).toEqual({ c: c.desc, verdict: "ok" });
    }
  });

  test("3-D Conv, MaxPool and AveragePool and every ConvTranspose are refused with a typed error naming why", () => {
    const one = (op: string, w: number[] | null, attrs: Attrs): Case => {
      const b = new OnnxBuilder("c3d", 13), shape = [1, 1, 3, 3, 3];
      const ins = [b.input("x", "float32", shape)];
      if (w) ins.push(b.initializer("w", ConstTensor.fromNumbers("float32", w, new Array(size(w)).fill(1))));
      b.output(b.node(op, ins, attrs, { outputs: ["y"] }), "float32");
      return { desc: op, bytes: b.toBytes(), feeds: { x: x(shape) } };
    };
    const only2d = '"x" has rank 5; only 1-D and 2-D (rank 3, 4) are supported';
    refusedWith(one("Conv", [1, 1, 2, 2, 2], {}), only2d);
    refusedWith(one("MaxPool", null, { kernel_shape: [2, 2, 2] }), only2d);
    refusedWith(one("AveragePool", null, { kernel_shape: [2, 2, 2] }), only2d);
    refusedWith(one("ConvTranspose", [1, 1, 2, 2, 2], {}), "op ConvTranspose is not supported");
  });
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
