/**
 * The folding evaluator: computes a node whose inputs are all constants, in TypeScript, so the compiled model
 * carries the result as a constant instead of a kernel call. Float arithmetic runs in float64 and is rounded to the
 * output dtype once. Integer arithmetic (elementwise, reductions, MatMul, Clip) is exact and wraps to the output's
 * width as the kernels' two's-complement arithmetic does: 64-bit integers on `bigint`s, narrower ones on numbers with
 * `Math.imul` for products (float64 is not exact past 2^53: an int64 sum, an int32 product or an int64 → int32 cast
 * came out wrong). Data movement (Transpose, Slice, Gather, ConstantOfShape, …) copies element bytes, so int64 stays
 * exact. Semantics from the ONNX operator specification; the code is ours.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";
import { attrFloat, attrInt, attrInts, attrString, attrTensor, fail, normAxis } from "./_attrs.ts";
import { broadcastShapes, reduceAxes, sliceAxes, stridesOf } from "./_geometry.ts";
import { DTYPE_BYTES, isFloatDtype, isInt64Dtype } from "./dtype.ts";
import type { IrNode } from "./graph.ts";
import type { OutputType } from "./infer_shapes.ts";
import { ConstTensor, shapeSize } from "./tensor.ts";

/** Most multiply-adds a folded MatMul may take. Ours. */
export const MAX_FOLD_MACS = 1 << 26;

/** The error function, to about 1e-15 (series below 3, continued fraction above). */
export function erf(x: number): number {
  const a = Math.abs(x);
  if (a < 3) {
    let term = a, sum = a;
    for (let n = 1; n < 80; n++) {
      term *= (-a * a) / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  let t = a;
  for (let k = 60; k >= 1; k--) t = a + (k / 2) / t;
  return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / t);
}

function roundHalfEven(v: number): number {
  const f = Math.floor(v), r = v - f;
  return r > 0.5 || (r === 0.5 && f % 2 !== 0) ? f + 1 : f;
}

type Unary = (x: number, node: IrNode) => number;
const UNARY: Readonly<Record<string, Unary>> = {
  Relu: (x) => Math.max(x, 0),
  Neg: (x) => -x,
  Abs: Math.abs,
  Sqrt: Math.sqrt,
  Exp: Math.exp,
  Log: Math.log,
  Reciprocal: (x) => 1 / x,
  Floor: Math.floor,
  Ceil: Math.ceil,
  Round: roundHalfEven,
  Sign: Math.sign,
  Sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  Tanh: Math.tanh,
  Erf: erf,
  Sin: Math.sin,
  Cos: Math.cos,
  Softplus: (x) => Math.log1p(Math.exp(x)),
  Not: (x) => (x === 0 ? 1 : 0),
  LeakyRelu: (x, n) => (x < 0 ? x * attrFloat(n, "alpha", 0.01) : x),
  // approximate = "tanh": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (ONNX Gelu-20).
  Gelu: (x, n) => {
    const approximate = attrString(n, "approximate", "none");
    if (approximate === "none") return 0.5 * x * (1 + erf(x / Math.SQRT2));
    if (approximate !== "tanh") fail(`approximate "${approximate}" is not "none" or "tanh"`);
    return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
  },
  IsNaN: (x) => (Number.isNaN(x) ? 1 : 0),
};

/** Float binary ops (integers go through `INT_BINARY`). */
type Binary = (a: number, b: number) => number;
const BINARY: Readonly<Record<string, Binary>> = {
  Add: (a, b) => a + b,
  Sub: (a, b) => a - b,
  Mul: (a, b) => a * b,
  Div: (a, b) => a / b,
  Pow: (a, b) => Math.pow(a, b),
  Max: (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b)),
  Min: (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b)),
  // fmod = 1, the dividend's sign: fmod = 0 is not defined for floats.
  Mod: (a, b) => a % b,
  Equal: (a, b) => (a === b ? 1 : 0),
  Less: (a, b) => (a < b ? 1 : 0),
  LessOrEqual: (a, b) => (a <= b ? 1 : 0),
  Greater: (a, b) => (a > b ? 1 : 0),
  GreaterOrEqual: (a, b) => (a >= b ? 1 : 0),
  And: (a, b) => (a !== 0 && b !== 0 ? 1 : 0),
  Or: (a, b) => (a !== 0 || b !== 0 ? 1 : 0),
  Xor: (a, b) => ((a !== 0) !== (b !== 0) ? 1 : 0),
};

/** Whether a dtype is an integer type (bool is not). */
const isIntDtype = (d: OpDtype) => !isFloatDtype(d) && d !== "bool";

/**
 * Whether integer arithmetic on `d` needs `bigint`s: 64-bit integers. Integers of 32 bits or less compute on numbers,
 * exactly: a sum, a difference or a quotient of two of them is exact in float64, a product is taken with `Math.imul`
 * (its low 32 bits, all the output keeps), and the store into the output's typed array wraps to its width. On
 * `bigint`s a 4M-element int32 fold took 1.7 s and 1 GB against 0.26 s and 135 MB.
 */
const needsBigint = (d: OpDtype) => isInt64Dtype(d);

/** Integer binary ops of 32 bits or less on numbers, exact as {@linkcode needsBigint} says; wrapped when stored. */
const INT32_BINARY: Readonly<Record<string, (a: number, b: number, node: IrNode) => number>> = {
  Add: (a, b) => a + b,
  Sub: (a, b) => a - b,
  Mul: (a, b) => Math.imul(a, b),
  Div: (a, b) => {
    if (b === 0) fail("integer division by zero in a constant");
    return Math.trunc(a / b);
  },
  Max: (a, b) => (a > b ? a : b),
  Min: (a, b) => (a < b ? a : b),
  Mod: (a, b, n) => {
    if (b === 0) fail("integer modulo by zero in a constant");
    const r = a % b; // the dividend's sign (fmod = 1)
    if (attrInt(n, "fmod", 0) === 1) return r;
    return r !== 0 && (r < 0) !== (b < 0) ? r + b : r; // the divisor's sign (fmod = 0)
  },
  Equal: (a, b) => (a === b ? 1 : 0),
  Less: (a, b) => (a < b ? 1 : 0),
  LessOrEqual: (a, b) => (a <= b ? 1 : 0),
  Greater: (a, b) => (a > b ? 1 : 0),
  GreaterOrEqual: (a, b) => (a >= b ? 1 : 0),
};

/** Integer unary ops of 32 bits or less on numbers (exact; wrapped when stored). */
const INT32_UNARY: Readonly<Record<string, (x: number) => number>> = {
  Neg: (x) => -x,
  Abs: (x) => Math.abs(x),
  Relu: (x) => (x < 0 ? 0 : x),
  Sign: (x) => Math.sign(x),
};

type IntBinary = (a: bigint, b: bigint, node: IrNode) => bigint;
/** Integer binary ops on exact values; the result wraps to the output dtype afterwards. */
const INT_BINARY: Readonly<Record<string, IntBinary>> = {
  Add: (a, b) => a + b,
  Sub: (a, b) => a - b,
  Mul: (a, b) => a * b,
  // bigint division truncates toward zero, as ONNX integer Div does.
  Div: (a, b) => {
    if (b === 0n) fail("integer division by zero in a constant");
    return a / b;
  },
  Max: (a, b) => (a > b ? a : b),
  Min: (a, b) => (a < b ? a : b),
  Mod: (a, b, n) => {
    if (b === 0n) fail("integer modulo by zero in a constant");
    const r = a % b; // the dividend's sign (fmod = 1)
    if (attrInt(n, "fmod", 0) === 1) return r;
    return r !== 0n && (r < 0n) !== (b < 0n) ? r + b : r; // the divisor's sign (fmod = 0)
  },
  Equal: (a, b) => (a === b ? 1n : 0n),
  Less: (a, b) => (a < b ? 1n : 0n),
  LessOrEqual: (a, b) => (a <= b ? 1n : 0n),
  Greater: (a, b) => (a > b ? 1n : 0n),
  GreaterOrEqual: (a, b) => (a >= b ? 1n : 0n),
};

/** Integer unary ops on exact values. */
const INT_UNARY: Readonly<Record<string, (x: bigint) => bigint>> = {
  Neg: (x) => -x,
  Abs: (x) => (x < 0n ? -x : x),
  Relu: (x) => (x < 0n ? 0n : x),
  Sign: (x) => (x < 0n ? -1n : x > 0n ? 1n : 0n),
};

/** An integer rounded once to the nearest float32 (ties to even), as a C++ cast does; `Number()` would round twice. */
function bigintToFloat32(v: bigint): number {
  const a = v < 0n ? -v : v;
  const bits = a.toString(2).length;
  if (bits <= 24) return Number(v);
  const shift = BigInt(bits - 24), q = a >> shift, rest = a - (q << shift), half = 1n << (shift - 1n);
  const m = rest > half || (rest === half && (q & 1n) === 1n) ? q + 1n : q;
  const f = Number(m) * 2 ** Number(shift);
  return Math.fround(v < 0n ? -f : f);
}

/**
 * A constant of `dtype` from exact integers, converted as ONNX Cast converts them: wrapped to an integer type's width,
 * `v != 0` for bool, rounded once to a float type.
 */
function fromExact(dtype: OpDtype, shape: readonly number[], values: readonly bigint[]): ConstTensor {
  if (isInt64Dtype(dtype)) return ConstTensor.fromBigints(dtype as "int64" | "uint64", shape, values);
  if (dtype === "bool") return ConstTensor.fromNumbers(dtype, shape, values.map((v) => (v !== 0n ? 1 : 0)));
  if (dtype === "float32") return ConstTensor.fromNumbers(dtype, shape, values.map(bigintToFloat32));
  if (isFloatDtype(dtype)) return ConstTensor.fromNumbers(dtype, shape, values.map(Number));
  const bits = DTYPE_BYTES[dtype] * 8, signed = dtype.startsWith("int");
  return ConstTensor.fromNumbers(
    dtype,
    shape,
    values.map((v) => Number(signed ? BigInt.asIntN(bits, v) : BigInt.asUintN(bits, v))),
  );
}

/** For each output element (row-major over `out`), the flat index into an input of `shape` broadcast to it. */
function broadcastIndex(shape: readonly number[], out: readonly number[]): Int32Array {
  const n = shapeSize(out), idx = new Int32Array(n);
  const pad = out.length - shape.length;
  const inStrides = stridesOf(shape);
  const st = out.map((_, i) => (i < pad || shape[i - pad] === 1 ? 0 : inStrides[i - pad]));
  const coord = new Array<number>(out.length).fill(0);
  let src = 0;
  for (let k = 0; k < n; k++) {
    idx[k] = src;
    for (let d = out.length - 1; d >= 0; d--) {
      coord[d]++;
      src += st[d];
      if (coord[d] < out[d]) break;
      src -= st[d] * coord[d];
      coord[d] = 0;
    }
  }
  return idx;
}

/** Gathers elements (by byte copy) of `src` at flat indices into a new tensor. */
function take(src: ConstTensor, shape: readonly number[], index: ArrayLike<number>): ConstTensor {
  const es = DTYPE_BYTES[src.dtype], out = new Uint8Array(index.length * es);
  for (let k = 0; k < index.length; k++) out.set(src.bytes.subarray(index[k] * es, index[k] * es + es), k * es);
  return new ConstTensor(src.dtype, shape, out);
}

/** Flat source indices of a strided view: `offset + Σ coord[d]·strides[d]` over `shape`. */
function stridedIndex(shape: readonly number[], strides: readonly number[], offset: number): Int32Array {
  const n = shapeSize(shape), idx = new Int32Array(n), coord = new Array<number>(shape.length).fill(0);
  let src = offset;
  for (let k = 0; k < n; k++) {
    idx[k] = src;
    for (let d = shape.length - 1; d >= 0; d--) {
      coord[d]++;
      src += strides[d];
      if (coord[d] < shape[d]) break;
      src -= strides[d] * coord[d];
      coord[d] = 0;
    }
  }
  return idx;
}

function reshaped(x: ConstTensor, shape: readonly number[]): ConstTensor {
  return new ConstTensor(x.dtype, shape, x.bytes);
}

function concat(node: IrNode, xs: ConstTensor[], out: OutputType): ConstTensor {
  const axis = normAxis(attrInt(node, "axis", 0), out.shape.length);
  const outer = shapeSize(out.shape.slice(0, axis)), es = DTYPE_BYTES[out.dtype];
  const bytes = new Uint8Array(shapeSize(out.shape) * es);
  let pos = 0;
  for (let o = 0; o < outer; o++) {
    for (const x of xs) {
      const chunk = shapeSize(x.shape.slice(axis)) * es;
      bytes.set(x.bytes.subarray(o * chunk, (o + 1) * chunk), pos);
      pos += chunk;
    }
  }
  return new ConstTensor(out.dtype, out.shape, bytes);
}

/** log(e^a + e^b) without overflow (a sum starts at -Infinity). */
function logAddExp(a: number, b: number): number {
  const hi = Math.max(a, b);
  return hi === -Infinity ? -Infinity : hi + Math.log(Math.exp(a - hi) + Math.exp(b - hi));
}

/** The extremes of an integer dtype. */
function intRange(d: OpDtype): [bigint, bigint] {
  const bits = BigInt(DTYPE_BYTES[d] * 8);
  return d.startsWith("u") ? [0n, (1n << bits) - 1n] : [-(1n << (bits - 1n)), (1n << (bits - 1n)) - 1n];
}

/** Integer reductions on exact values: the first element's term, the step, and the value of an empty reduction. */
const INT_REDUCE: Readonly<
  Record<string, { first(v: bigint): bigint; step(a: bigint, v: bigint): bigint; empty(d: OpDtype): bigint }>
> = {
  ReduceSum: { first: (v) => v, step: (a, v) => a + v, empty: () => 0n },
  ReduceProd: { first: (v) => v, step: (a, v) => a * v, empty: () => 1n },
  ReduceMax: { first: (v) => v, step: (a, v) => (v > a ? v : a), empty: (d) => intRange(d)[0] },
  ReduceMin: { first: (v) => v, step: (a, v) => (v < a ? v : a), empty: (d) => intRange(d)[1] },
  ReduceL1: { first: (v) => (v < 0n ? -v : v), step: (a, v) => a + (v < 0n ? -v : v), empty: () => 0n },
  ReduceSumSquare: { first: (v) => v * v, step: (a, v) => a + v * v, empty: () => 0n },
};

/** {@linkcode INT_REDUCE} for integers of 32 bits or less, on numbers wrapped to 32 bits at each step. */
const INT32_REDUCE: Readonly<Record<string, { first(v: number): number; step(a: number, v: number): number }>> = {
  ReduceSum: { first: (v) => v, step: (a, v) => (a + v) | 0 },
  ReduceProd: { first: (v) => v, step: (a, v) => Math.imul(a, v) },
  ReduceMax: { first: (v) => v, step: (a, v) => (v > a ? v : a) },
  ReduceMin: { first: (v) => v, step: (a, v) => (v < a ? v : a) },
  ReduceL1: { first: (v) => Math.abs(v), step: (a, v) => (a + Math.abs(v)) | 0 },
  ReduceSumSquare: { first: (v) => Math.imul(v, v), step: (a, v) => (a + Math.imul(v, v)) | 0 },
};

function reduce(node: IrNode, x: ConstTensor, axesIn: ConstTensor | undefined, out: OutputType): ConstTensor {
  // With noop_with_empty_axes and no axes nothing is reduced, but each element still goes through the reduction's
  // own function, as the spec's reference implementation computes it: ReduceL1 gives |x|, ReduceSumSquare x², ….
  const axes = reduceAxes(node, x.shape.length, axesIn) ?? [];
  const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const index = broadcastIndex(kept, x.shape);
  const n = shapeSize(kept), count = x.size / Math.max(n, 1);
  const op = node.opType;
  const intOp = INT_REDUCE[op], int32Op = INT32_REDUCE[op];
  if (isIntDtype(x.dtype) && !needsBigint(x.dtype) && int32Op !== undefined) {
    // 32 bits or less: on numbers, wrapped to 32 bits at each step (exact modulo 2^32, which the store narrows).
    const vals = x.numbers(), acc = new Float64Array(n), seen = new Uint8Array(n);
    for (let k = 0; k < vals.length; k++) {
      const j = index[k];
      acc[j] = seen[j] === 0 ? int32Op.first(vals[k]) : int32Op.step(acc[j], vals[k]);
      seen[j] = 1;
    }
    for (let j = 0; j < n; j++) if (seen[j] === 0) acc[j] = Number(intOp!.empty(x.dtype));
    return ConstTensor.fromNumbers(out.dtype, out.shape, acc);
  }
  if (isIntDtype(x.dtype) && intOp !== undefined) {
    // Integers reduce exactly and wrap to the output's width, as the elementwise ops do (float64 is not exact past
    // 2^53). An empty reduction gives the identity: 0, 1, or the dtype's extreme for Max/Min as the spec's numpy does.
    const vals = x.bigints(), acc: Array<bigint | undefined> = new Array(n).fill(undefined);
    for (let k = 0; k < vals.length; k++) {
      const j = index[k];
      acc[j] = acc[j] === undefined ? intOp.first(vals[k]) : intOp.step(acc[j]!, vals[k]);
    }
    return fromExact(out.dtype, out.shape, acc.map((a) => a ?? intOp.empty(x.dtype)));
  }
  const v = x.numbers();
  const init = op === "ReduceMax" || op === "ReduceLogSumExp"
    ? -Infinity
    : op === "ReduceMin"
    ? Infinity
    : op === "ReduceProd"
    ? 1
    : 0;
  const acc = new Float64Array(n).fill(init);
  for (let k = 0; k < v.length; k++) {
    const j = index[k], e = v[k];
    if (op === "ReduceMax") acc[j] = Math.max(acc[j], e);
    else if (op === "ReduceMin") acc[j] = Math.min(acc[j], e);
    else if (op === "ReduceProd") acc[j] *= e;
    else if (op === "ReduceSumSquare" || op === "ReduceL2") acc[j] += e * e;
    else if (op === "ReduceL1") acc[j] += Math.abs(e);
    else if (op === "ReduceLogSumExp") acc[j] = logAddExp(acc[j], e);
    else acc[j] += e;
  }
  if (op === "ReduceMean") { for (let j = 0; j < n; j++) acc[j] /= count; }
  if (op === "ReduceL2") { for (let j = 0; j < n; j++) acc[j] = Math.sqrt(acc[j]); }
  if (op === "ReduceLogSum") { for (let j = 0; j < n; j++) acc[j] = Math.log(acc[j]); }
  return ConstTensor.fromNumbers(out.dtype, out.shape, acc);
}

function matmul(a: ConstTensor, b: ConstTensor, out: OutputType): ConstTensor {
  const as = a.shape.length === 1 ? [1, a.shape[0]] : a.shape, bs = b.shape.length === 1 ? [b.shape[0], 1] : b.shape;
  const m = as[as.length - 2], k = as[as.length - 1], n = bs[bs.length - 1];
  const batch = broadcastShapes(as.slice(0, -2), bs.slice(0, -2));
  const ai = broadcastIndex(as.slice(0, -2), batch), bi = broadcastIndex(bs.slice(0, -2), batch);
  const cells = shapeSize(batch) * m * n;
  /** Calls `cell` for every output element with the offsets of its row of A and its column of B. */
  const each = (cell: (r: number, row: number, col: number) => void): void => {
    for (let t = 0; t < ai.length; t++) {
      const ao = ai[t] * m * k, bo = bi[t] * k * n, ro = t * m * n;
      for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) cell(ro + i * n + j, ao + i * k, bo + j);
    }
  };
  if (isIntDtype(a.dtype) && needsBigint(a.dtype)) {
    // 64-bit integers multiply and add exactly, wrapped to the output's width once (a 63-bit product was not).
    const av = a.bigints(), bv = b.bigints(), exact = new Array<bigint>(cells);
    each((r, row, col) => {
      let s = 0n;
      for (let p = 0; p < k; p++) s += av[row + p] * bv[col + p * n];
      exact[r] = s;
    });
    return fromExact(out.dtype, out.shape, exact);
  }
  // Integers of 32 bits or less: Math.imul and a sum wrapped to 32 bits at each step, exact modulo 2^32.
  const int = isIntDtype(a.dtype), av = a.numbers(), bv = b.numbers(), res = new Float64Array(cells);
  each((r, row, col) => {
    let s = 0;
    if (int) { for (let p = 0; p < k; p++) s = (s + Math.imul(av[row + p], bv[col + p * n])) | 0; }
    else for (let p = 0; p < k; p++) s += av[row + p] * bv[col + p * n];
    res[r] = s;
  });
  return ConstTensor.fromNumbers(out.dtype, out.shape, res);
}

/** `Shape` or `Size` of a value: they read only its (static) shape, so any value folds. */
export function evaluateShape(node: IrNode, shape: readonly number[], out: OutputType): ConstTensor {
  if (node.opType === "Size") return ConstTensor.fromNumbers("int64", [], [shapeSize(shape)]);
  const r = shape.length, start = attrInt(node, "start", 0);
  const s = start < 0 ? Math.max(0, start + r) : Math.min(start, r);
  return ConstTensor.fromNumbers("int64", out.shape, shape.slice(s, s + out.shape[0]));
}

/** The value of a `Constant` node. */
export function constantValue(node: IrNode): ConstTensor {
  const t = attrTensor(node, "value");
  if (t !== undefined) return t;
  const a = node.attributes;
  if (typeof a.value_float === "number") return ConstTensor.fromNumbers("float32", [], [a.value_float]);
  if (typeof a.value_int === "number") return ConstTensor.fromNumbers("int64", [], [a.value_int]);
  if (Array.isArray(a.value_floats)) {
    return ConstTensor.fromNumbers("float32", [a.value_floats.length], a.value_floats as number[]);
  }
  if (Array.isArray(a.value_ints)) {
    return ConstTensor.fromNumbers("int64", [a.value_ints.length], a.value_ints as number[]);
  }
  return fail(
    `a Constant needs a numeric value (value, value_float(s) or value_int(s)); got ${
      Object.keys(a).join(", ") || "none"
    }`,
  );
}

/**
 * Evaluates a node over constant inputs.
 *
 * @param node The node (default domain).
 * @param ins Its inputs' values (`undefined` for an omitted optional input).
 * @param outs Its outputs' inferred types.
 * @returns The outputs, or `undefined` when the op has no evaluator (the node is then lowered as usual).
 * @throws {RuleError} for a constant computation ONNX leaves undefined (integer division by zero).
 */
export function evaluateNode(
  node: IrNode,
  ins: ReadonlyArray<ConstTensor | undefined>,
  outs: readonly OutputType[],
): ConstTensor[] | undefined {
  const op = node.opType, x = ins[0], out = outs[0];
  const cast = (t: ConstTensor, d: OpDtype) =>
    t.dtype === d
      ? t
      : needsBigint(t.dtype)
      ? fromExact(d, t.shape, t.bigints())
      : ConstTensor.fromNumbers(d, t.shape, t.numbers());
  switch (op) {
    case "Identity":
    case "Dropout":
    case "Reshape":
    case "Flatten":
    case "Squeeze":
    case "Unsqueeze":
      return outs.length > 1
        ? [reshaped(x!, out.shape), ConstTensor.fromNumbers("bool", out.shape, new Array(x!.size).fill(1))]
        : [reshaped(x!, out.shape)];
    case "Cast":
    case "CastLike":
      return [cast(x!, out.dtype)];
    case "Shape":
    case "Size":
      return [evaluateShape(node, x!.shape, out)];
    case "ConstantOfShape": {
      // The value's bytes repeated (its dtype is the output's): through a number, INT64_MAX, a common "to the end",
      // rounded to 2^63 and wrapped to INT64_MIN. No value: float32 zeros.
      const v = attrTensor(node, "value");
      const es = DTYPE_BYTES[out.dtype], bytes = new Uint8Array(shapeSize(out.shape) * es);
      if (v !== undefined && v.bytes.byteLength >= es) {
        const one = v.bytes.subarray(0, es);
        for (let at = 0; at < bytes.byteLength; at += es) bytes.set(one, at);
      }
      return [new ConstTensor(out.dtype, out.shape, bytes)];
    }
    case "Range": {
      const [s, , d] = ins.map((t) => t!.numbers()[0]);
      return [ConstTensor.fromNumbers(out.dtype, out.shape, Array.from({ length: out.shape[0] }, (_, i) => s + i * d))];
    }
    case "Concat":
      return [concat(node, ins.filter((t): t is ConstTensor => t !== undefined), out)];
    case "Transpose": {
      const perm = attrInts(node, "perm", [...x!.shape.keys()].reverse()), st = stridesOf(x!.shape);
      return [take(x!, out.shape, stridedIndex(out.shape, perm.map((p) => st[p]), 0))];
    }
    case "Slice": {
      const axes = sliceAxes(x!.shape, ins[1]!.ints(), ins[2]!.ints(), ins[3]?.ints(), ins[4]?.ints());
      const st = stridesOf(x!.shape);
      const offset = axes.reduce((a, s, d) => a + s.start * st[d], 0);
      return [take(x!, out.shape, stridedIndex(out.shape, axes.map((s, d) => s.step * st[d]), offset))];
    }
    case "Split": {
      const axis = normAxis(attrInt(node, "axis", 0), x!.shape.length), st = stridesOf(x!.shape);
      let start = 0;
      return outs.map((o) => {
        const t = take(x!, o.shape, stridedIndex(o.shape, st, start * st[axis]));
        start += o.shape[axis];
        return t;
      });
    }
    case "Gather": {
      const axis = normAxis(attrInt(node, "axis", 0), x!.shape.length), dim = x!.shape[axis];
      const outer = shapeSize(x!.shape.slice(0, axis)), inner = shapeSize(x!.shape.slice(axis + 1));
      const idx = ins[1]!.ints().map((i) => {
        if (i < -dim || i >= dim) fail(`index ${i} is out of range for axis size ${dim}`);
        return i < 0 ? i + dim : i;
      });
      const index: number[] = [];
      for (let o = 0; o < outer; o++) {
        for (const i of idx) for (let j = 0; j < inner; j++) index.push((o * dim + i) * inner + j);
      }
      return [take(x!, out.shape, index)];
    }
    case "Expand":
      return [take(x!, out.shape, broadcastIndex(x!.shape, out.shape))];
    case "Tile": {
      const index = new Int32Array(shapeSize(out.shape)), st = stridesOf(x!.shape);
      const coord = new Array<number>(out.shape.length).fill(0);
      for (let k = 0; k < index.length; k++) {
        index[k] = coord.reduce((a, c, d) => a + (c % x!.shape[d]) * st[d], 0);
        for (let d = coord.length - 1; d >= 0 && ++coord[d] === out.shape[d]; d--) coord[d] = 0;
      }
      return [take(x!, out.shape, index)];
    }
    case "Where": {
      const [c, a, b] = ins.map((t) => t!);
      const ci = broadcastIndex(c.shape, out.shape), ai = broadcastIndex(a.shape, out.shape);
      const bi = broadcastIndex(b.shape, out.shape), cv = c.numbers(), es = DTYPE_BYTES[out.dtype];
      const bytes = new Uint8Array(ci.length * es);
      for (let k = 0; k < ci.length; k++) {
        const [src, j] = cv[ci[k]] !== 0 ? [a, ai[k]] : [b, bi[k]];
        bytes.set(src.bytes.subarray(j * es, j * es + es), k * es);
      }
      return [new ConstTensor(out.dtype, out.shape, bytes)];
    }
    case "MatMul": {
      // A big constant product is cheaper to run on the cores than to compute here (and bounds a hostile model).
      const k = x!.shape.length === 0 ? 1 : x!.shape[x!.shape.length - 1];
      return shapeSize(out.shape) * k > MAX_FOLD_MACS ? undefined : [matmul(x!, ins[1]!, out)];
    }
    case "Clip": {
      if (needsBigint(x!.dtype)) {
        // 64-bit integers clamp exactly (opset 11+: integer Clip takes its bounds as inputs only); narrower ones are
        // exact as numbers below.
        const lo = ins[1]?.bigints()[0], hi = ins[2]?.bigints()[0];
        const clamp = (v: bigint) => (lo !== undefined && v < lo ? lo : hi !== undefined && v > hi ? hi : v);
        return [fromExact(out.dtype, out.shape, x!.bigints().map(clamp))];
      }
      const lo = ins[1]?.numbers()[0] ?? attrFloat(node, "min", -Infinity);
      const hi = ins[2]?.numbers()[0] ?? attrFloat(node, "max", Infinity);
      return [ConstTensor.fromNumbers(out.dtype, out.shape, x!.numbers().map((v) => Math.min(Math.max(v, lo), hi)))];
    }
  }
  if (op.startsWith("Reduce")) return [reduce(node, x!, ins[1], out)];
  const int = x !== undefined && needsBigint(x.dtype);
  if (x !== undefined && isIntDtype(x.dtype) && !int) {
    const u = INT32_UNARY[op];
    if (u !== undefined) return [ConstTensor.fromNumbers(out.dtype, out.shape, x.numbers().map(u))];
    if (op === "Sum" || INT32_BINARY[op] !== undefined) {
      const f = INT32_BINARY[op === "Sum" ? "Add" : op], vs = ins.map((t) => t!);
      const idx = vs.map((t) => broadcastIndex(t.shape, out.shape)), nums = vs.map((t) => t.numbers());
      const res = new Float64Array(shapeSize(out.shape));
      for (let k = 0; k < res.length; k++) {
        let acc = nums[0][idx[0][k]];
        // A Sum of many inputs is wrapped to 32 bits after each step, so it stays exact (the store narrows it);
        // Max and Min, the other variadic ones, keep their values (a uint32 past 2^31 must not turn negative).
        for (let i = 1; i < vs.length; i++) {
          acc = f(acc, nums[i][idx[i][k]], node);
          if (op === "Sum") acc |= 0;
        }
        res[k] = acc;
      }
      return [ConstTensor.fromNumbers(out.dtype, out.shape, res)];
    }
  }
  if (int && INT_UNARY[op] !== undefined) {
    return [fromExact(out.dtype, out.shape, x!.bigints().map(INT_UNARY[op]))];
  }
  if (int && (op === "Sum" || INT_BINARY[op] !== undefined)) {
    const f = INT_BINARY[op === "Sum" ? "Add" : op], vs = ins.map((t) => t!);
    const idx = vs.map((t) => broadcastIndex(t.shape, out.shape)), vals = vs.map((t) => t.bigints());
    const res = Array.from({ length: shapeSize(out.shape) }, (_, k) => {
      let acc = vals[0][idx[0][k]];
      for (let i = 1; i < vs.length; i++) acc = f(acc, vals[i][idx[i][k]], node);
      return acc;
    });
    return [fromExact(out.dtype, out.shape, res)];
  }
  const unary = UNARY[op];
  if (unary !== undefined) {
    return [ConstTensor.fromNumbers(out.dtype, out.shape, x!.numbers().map((v) => unary(v, node)))];
  }
  if (op === "Sum" || op === "Mean" || BINARY[op] !== undefined) {
    const f: Binary = op === "Sum" || op === "Mean" ? BINARY.Add : BINARY[op];
    const vs = ins.map((t) => t!);
    const idx = vs.map((t) => broadcastIndex(t.shape, out.shape)), nums = vs.map((t) => t.numbers());
    const res = new Float64Array(shapeSize(out.shape));
    for (let k = 0; k < res.length; k++) {
      let acc = nums[0][idx[0][k]];
      for (let i = 1; i < vs.length; i++) acc = f(acc, nums[i][idx[i][k]]);
      res[k] = op === "Mean" ? acc / vs.length : acc;
    }
    return [ConstTensor.fromNumbers(out.dtype, out.shape, res)];
  }
  return undefined;
}
