/**
 * Lowering rules of the elementwise ops onto library `elementwise`: binary arithmetic with numpy broadcasting (and
 * the variadic Max, Min, Sum, Mean), comparisons and logic, Where and Cast. Ours.
 *
 * @module
 */
import { type KernelCall, type OpDtype, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  call,
  copyCall,
  dtype,
  DTYPE_CODE,
  ELEMENT_BYTES,
  input,
  ints,
  type LoweringRule,
  output,
  sameDtype,
  sameShape,
} from "./_lower_util.ts";
import { broadcastLayout, broadcastShapes, checkRank, sizeOf } from "./_lower_layout.ts";
import { unaryCall, UnaryOp } from "./_lower_activation.ts";

/** Binary op codes of `elementwise.binary_*` (ints[0]). */
export const BinaryOp = { Add: 0, Sub: 1, Mul: 2, Div: 3, Max: 4, Min: 5, Pow: 6, PRelu: 7, Mod: 8, Fmod: 9 } as const;

/** Comparison and logic op codes of `elementwise.compare_*` and `elementwise.logic` (ints[0]). */
export const CompareOp = {
  Equal: 0,
  Less: 1,
  LessOrEqual: 2,
  Greater: 3,
  GreaterOrEqual: 4,
  And: 5,
  Or: 6,
  Xor: 7,
  Not: 8,
} as const;

const INT_TYPES: readonly OpDtype[] = ["int32", "int64"];
const ARITH_TYPES: readonly OpDtype[] = ["float32", "int32", "int64"];
const CAST_TYPES: readonly OpDtype[] = [
  "float32",
  "float64",
  "int8",
  "uint8",
  "int16",
  "uint16",
  "int32",
  "uint32",
  "int64",
  "uint64",
  "bool",
];

function binaryFn(t: OpDtype): string {
  return t === "float32" ? "binary_f32" : t === "int32" ? "binary_i32" : "binary_i64";
}

/** One broadcast binary call a ∘ b → y. */
export function binaryCall(node: OpNode, op: number, a: OpValue, b: OpValue, y: OpValue): KernelCall {
  const layout = broadcastLayout(node, y.shape, [a.shape, b.shape]);
  checkRank(node, layout);
  const [sa, sb] = layout.strides;
  return call(
    "elementwise",
    binaryFn(y.dtype),
    [a.name, b.name],
    [y.name],
    ints(op, layout.dims.length, ...layout.dims, ...sa, ...sb),
  );
}

function checkBroadcastOutput(node: OpNode, shapes: ReadonlyArray<readonly number[]>, y: OpValue): void {
  const want = shapes.reduce((s, t) => broadcastShapes(node, s, t));
  if (want.length !== y.shape.length || want.some((d, i) => d !== y.shape[i])) {
    throw new UnsupportedOpError(node, `output shape [${y.shape}] is not the broadcast shape [${want}]`);
  }
}

function binaryRule(opType: string, op: number, dtypes: readonly OpDtype[]): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes,
    attributes: {},
    notes: "numpy broadcasting",
    lower(node) {
      new Attributes(node, []);
      arity(node, [2, 2]);
      const a = input(node, 0), b = input(node, 1), y = output(node, 0);
      dtype(node, y, dtypes);
      sameDtype(node, [a, b, y]);
      checkBroadcastOutput(node, [a.shape, b.shape], y);
      return [binaryCall(node, op, a, b, y)];
    },
  };
}

/** Max, Min, Sum, Mean over 1..n inputs: a chain of binary calls through scratch values. */
function variadicRule(opType: "Max" | "Min" | "Sum" | "Mean", dtypes: readonly OpDtype[]): LoweringRule {
  const op = opType === "Max" ? BinaryOp.Max : opType === "Min" ? BinaryOp.Min : BinaryOp.Add;
  return {
    domain: "",
    opType,
    dtypes,
    attributes: {},
    notes: opType === "Sum"
      ? "1 to 31 inputs, numpy broadcasting, added in input order; int32 and int64 are ours (the ONNX spec has Sum " +
        "on floats only, and onnxruntime refuses such a model)"
      : opType === "Mean"
      ? "1 to 31 inputs, numpy broadcasting, added in input order"
      : "1 to 31 inputs, numpy broadcasting",
    lower(node) {
      new Attributes(node, []);
      arity(node, [1, 31]);
      const xs = node.inputs.map((_, i) => input(node, i));
      const y = output(node, 0);
      dtype(node, y, dtypes);
      sameDtype(node, [...xs, y]);
      checkBroadcastOutput(node, xs.map((x) => x.shape), y);
      const mean = opType === "Mean" && xs.length > 1;
      if (xs.length === 1) return [copyCall(xs[0], y)];
      const calls: KernelCall[] = [];
      let acc = xs[0];
      for (let i = 1; i < xs.length; i++) {
        const last = i === xs.length - 1 && !mean;
        const shape = broadcastShapes(node, acc.shape, xs[i].shape);
        const target: OpValue = last ? y : { name: `${node.name}#acc${i}`, dtype: y.dtype, shape };
        const c = binaryCall(node, op, acc, xs[i], target);
        calls.push(last ? c : { ...c, scratch: [target] });
        acc = target;
      }
      if (mean) calls.push(unaryCall(UnaryOp.DivBy, acc, y, xs.length, 0));
      return calls;
    },
  };
}

function compareRule(opType: string, op: number, dtypes: readonly OpDtype[]): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes,
    attributes: {},
    notes: "numpy broadcasting; output bool",
    lower(node) {
      new Attributes(node, []);
      const unary = opType === "Not";
      arity(node, unary ? [1, 1] : [2, 2]);
      const a = input(node, 0), b = unary ? a : input(node, 1), y = output(node, 0);
      dtype(node, a, dtypes);
      sameDtype(node, [a, b]);
      dtype(node, y, ["bool"]);
      checkBroadcastOutput(node, [a.shape, b.shape], y);
      const layout = broadcastLayout(node, y.shape, [a.shape, b.shape]);
      checkRank(node, layout);
      const fn = a.dtype === "bool"
        ? "logic"
        : `compare_${a.dtype === "float32" ? "f32" : a.dtype === "int32" ? "i32" : "i64"}`;
      const [sa, sb] = layout.strides;
      return [
        call("elementwise", fn, [a.name, b.name], [y.name], ints(op, layout.dims.length, ...layout.dims, ...sa, ...sb)),
      ];
    },
  };
}

const whereRule: LoweringRule = {
  domain: "",
  opType: "Where",
  dtypes: CAST_TYPES,
  attributes: {},
  notes: "numpy broadcasting over condition, X and Y",
  lower(node) {
    new Attributes(node, []);
    arity(node, [3, 3]);
    const c = input(node, 0), x = input(node, 1), z = input(node, 2), y = output(node, 0);
    dtype(node, c, ["bool"]);
    dtype(node, x, CAST_TYPES);
    sameDtype(node, [x, z, y]);
    checkBroadcastOutput(node, [c.shape, x.shape, z.shape], y);
    const layout = broadcastLayout(node, y.shape, [c.shape, x.shape, z.shape]);
    checkRank(node, layout);
    const [sc, sx, sz] = layout.strides;
    return [
      call(
        "elementwise",
        "where",
        [c.name, x.name, z.name],
        [y.name],
        ints(ELEMENT_BYTES[y.dtype], layout.dims.length, ...layout.dims, ...sc, ...sx, ...sz),
      ),
    ];
  },
};

/** ONNX TensorProto.DataType codes of the dtypes Cast supports. */
const ONNX_TYPE: Readonly<Record<number, OpDtype>> = {
  1: "float32",
  2: "uint8",
  3: "int8",
  4: "uint16",
  5: "int16",
  6: "int32",
  7: "int64",
  9: "bool",
  11: "float64",
  12: "uint32",
  13: "uint64",
};

const castRule: LoweringRule = {
  domain: "",
  opType: "Cast",
  dtypes: CAST_TYPES,
  attributes: { to: "float, double, (u)int8/16/32/64, bool", saturate: "any (float8 only)" },
  lower(node) {
    const a = new Attributes(node, ["to", "saturate"]);
    arity(node, [1, 1]);
    const x = input(node, 0), y = output(node, 0);
    dtype(node, x, CAST_TYPES);
    dtype(node, y, CAST_TYPES);
    sameShape(node, x, y);
    const to = a.int("to", -1);
    if (ONNX_TYPE[to] !== y.dtype) {
      throw new UnsupportedOpError(node, `to = ${to} does not match the output dtype ${y.dtype}`);
    }
    if (x.dtype === y.dtype) return [copyCall(x, y)];
    return [
      call("elementwise", "cast", [x.name], [y.name], ints(sizeOf(y.shape), DTYPE_CODE[x.dtype], DTYPE_CODE[y.dtype])),
    ];
  },
};

const modRule: LoweringRule = {
  domain: "",
  opType: "Mod",
  dtypes: ARITH_TYPES,
  attributes: { fmod: "0 (integers) or 1" },
  notes: "numpy broadcasting",
  lower(node) {
    const a = new Attributes(node, ["fmod"]);
    arity(node, [2, 2]);
    const x = input(node, 0), d = input(node, 1), y = output(node, 0);
    dtype(node, y, ARITH_TYPES);
    sameDtype(node, [x, d, y]);
    checkBroadcastOutput(node, [x.shape, d.shape], y);
    const fmod = a.int("fmod", 0);
    if (fmod !== 0 && fmod !== 1) throw new UnsupportedOpError(node, `fmod = ${fmod} is not supported`);
    if (fmod === 0 && y.dtype === "float32") throw new UnsupportedOpError(node, "fmod = 0 is not defined for float32");
    return [binaryCall(node, fmod ? BinaryOp.Fmod : BinaryOp.Mod, x, d, y)];
  },
};

const preluRule: LoweringRule = {
  domain: "",
  opType: "PRelu",
  dtypes: ["float32"],
  attributes: {},
  notes: "slope broadcasts to X",
  lower(node) {
    new Attributes(node, []);
    arity(node, [2, 2]);
    const x = input(node, 0), s = input(node, 1), y = output(node, 0);
    dtype(node, x, ["float32"]);
    sameDtype(node, [x, s, y]);
    sameShape(node, x, y);
    return [binaryCall(node, BinaryOp.PRelu, x, s, y)];
  },
};

/** The elementwise rules. */
export const ELEMENTWISE_RULES: readonly LoweringRule[] = [
  binaryRule("Add", BinaryOp.Add, ARITH_TYPES),
  binaryRule("Sub", BinaryOp.Sub, ARITH_TYPES),
  binaryRule("Mul", BinaryOp.Mul, ARITH_TYPES),
  binaryRule("Div", BinaryOp.Div, ARITH_TYPES),
  binaryRule("Pow", BinaryOp.Pow, ["float32"]),
  variadicRule("Max", ARITH_TYPES),
  variadicRule("Min", ARITH_TYPES),
  variadicRule("Sum", ARITH_TYPES),
  variadicRule("Mean", ["float32"]),
  modRule,
  preluRule,
  compareRule("Equal", CompareOp.Equal, ["float32", ...INT_TYPES, "bool"]),
  compareRule("Less", CompareOp.Less, ["float32", ...INT_TYPES]),
  compareRule("LessOrEqual", CompareOp.LessOrEqual, ["float32", ...INT_TYPES]),
  compareRule("Greater", CompareOp.Greater, ["float32", ...INT_TYPES]),
  compareRule("GreaterOrEqual", CompareOp.GreaterOrEqual, ["float32", ...INT_TYPES]),
  compareRule("And", CompareOp.And, ["bool"]),
  compareRule("Or", CompareOp.Or, ["bool"]),
  compareRule("Xor", CompareOp.Xor, ["bool"]),
  compareRule("Not", CompareOp.Not, ["bool"]),
  whereRule,
  castRule,
];
