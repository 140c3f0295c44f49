/**
 * Lowering rules of the unary float32 ops onto library `activation` (`unary_f32`), and the activations the fused
 * ops (nrt.FusedGemm, nrt.FusedConv) apply in their epilogue: attribute `activation` names one,
 * `activation_params` carries its parameters. Ours.
 *
 * @module
 */
import { type KernelCall, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  call,
  constantNumbers,
  dtype,
  f64Bits,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  output,
  sameDtype,
  sameShape,
} from "./_lower_util.ts";
import { sizeOf } from "./_lower_layout.ts";

/** Unary op codes of `activation.unary_f32` (ints[0]). */
export const UnaryOp = {
  Relu: 0,
  LeakyRelu: 1,
  Sigmoid: 2,
  Tanh: 3,
  Exp: 4,
  Log: 5,
  Sqrt: 6,
  Clip: 7,
  Erf: 8,
  Gelu: 9,
  GeluTanh: 10,
  Neg: 11,
  Abs: 12,
  Reciprocal: 13,
  Floor: 14,
  Ceil: 15,
  Round: 16,
  Softplus: 17,
  HardSigmoid: 18,
  HardSwish: 19,
  Elu: 20,
  Selu: 21,
  Celu: 22,
  Softsign: 23,
  ThresholdedRelu: 24,
  Sign: 25,
  Mish: 26,
  DivBy: 27,
  Silu: 28,
} as const;

/** The unary_f32 call y = op(x) with parameters p0, p1. */
export function unaryCall(op: number, x: OpValue, y: OpValue, p0: number, p1: number): KernelCall {
  return call("activation", "unary_f32", [x.name], [y.name], ints(op, sizeOf(y.shape), f64Bits(p0), f64Bits(p1)));
}

/** A float32 unary op whose parameters come from attributes (`params` reads them). */
function unaryRule(
  opType: string,
  attributes: Readonly<Record<string, string>>,
  code: (a: Attributes, node: OpNode) => [number, number, number],
): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ["float32"],
    attributes,
    lower(node) {
      const a = new Attributes(node, Object.keys(attributes));
      arity(node, [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      dtype(node, x, ["float32"]);
      sameDtype(node, [x, y]);
      sameShape(node, x, y);
      const [op, p0, p1] = code(a, node);
      return [unaryCall(op, x, y, p0, p1)];
    },
  };
}

const plain = (op: number) => (): [number, number, number] => [op, 0, 0];

const clipRule: LoweringRule = {
  domain: "",
  opType: "Clip",
  dtypes: ["float32"],
  attributes: { min: "any (opset < 11)", max: "any (opset < 11)" },
  notes: "min and max inputs (opset >= 11) must be constants",
  lower(node) {
    const a = new Attributes(node, ["min", "max"]);
    arity(node, [1, 3]);
    const x = input(node, 0), y = output(node, 0);
    dtype(node, x, ["float32"]);
    sameDtype(node, [x, y]);
    sameShape(node, x, y);
    const bound = (i: number, name: string, fallback: number): number => {
      const v = optionalInput(node, i);
      if (!v) return a.float(name, fallback);
      const values = constantNumbers(node, v, `Clip ${name}`);
      if (values.length !== 1) throw new UnsupportedOpError(node, `Clip ${name} must be a scalar`);
      return values[0];
    };
    return [unaryCall(UnaryOp.Clip, x, y, bound(1, "min", -Infinity), bound(2, "max", Infinity))];
  },
};

const geluRule = unaryRule("Gelu", { approximate: '"none" or "tanh"' }, (a, node) => {
  const mode = a.string("approximate", "none");
  if (mode !== "none" && mode !== "tanh") throw new UnsupportedOpError(node, `approximate "${mode}" is not supported`);
  return [mode === "none" ? UnaryOp.Gelu : UnaryOp.GeluTanh, 0, 0];
});

/** The rules of the unary ops. */
export const ACTIVATION_RULES: readonly LoweringRule[] = [
  unaryRule("Relu", {}, plain(UnaryOp.Relu)),
  unaryRule("LeakyRelu", { alpha: "any" }, (a) => [UnaryOp.LeakyRelu, a.float("alpha", 0.01), 0]),
  unaryRule("Sigmoid", {}, plain(UnaryOp.Sigmoid)),
  unaryRule("Tanh", {}, plain(UnaryOp.Tanh)),
  unaryRule("Exp", {}, plain(UnaryOp.Exp)),
  unaryRule("Log", {}, plain(UnaryOp.Log)),
  unaryRule("Sqrt", {}, plain(UnaryOp.Sqrt)),
  clipRule,
  unaryRule("Erf", {}, plain(UnaryOp.Erf)),
  geluRule,
  unaryRule("Neg", {}, plain(UnaryOp.Neg)),
  unaryRule("Abs", {}, plain(UnaryOp.Abs)),
  unaryRule("Reciprocal", {}, plain(UnaryOp.Reciprocal)),
  unaryRule("Floor", {}, plain(UnaryOp.Floor)),
  unaryRule("Ceil", {}, plain(UnaryOp.Ceil)),
  unaryRule("Round", {}, plain(UnaryOp.Round)),
  unaryRule("Softplus", {}, plain(UnaryOp.Softplus)),
  unaryRule(
    "HardSigmoid",
    { alpha: "any", beta: "any" },
    (a) => [UnaryOp.HardSigmoid, a.float("alpha", 0.2), a.float("beta", 0.5)],
  ),
  unaryRule("HardSwish", {}, plain(UnaryOp.HardSwish)),
  unaryRule("Elu", { alpha: "any" }, (a) => [UnaryOp.Elu, a.float("alpha", 1), 0]),
  unaryRule("Selu", { alpha: "any", gamma: "any" }, (a) => [
    UnaryOp.Selu,
    a.float("alpha", 1.67326319217681884765625),
    a.float("gamma", 1.05070102214813232421875),
  ]),
  unaryRule("Celu", { alpha: "any" }, (a) => [UnaryOp.Celu, a.float("alpha", 1), 0]),
  unaryRule("Softsign", {}, plain(UnaryOp.Softsign)),
  unaryRule("ThresholdedRelu", { alpha: "any" }, (a) => [UnaryOp.ThresholdedRelu, a.float("alpha", 1), 0]),
  unaryRule("Sign", {}, plain(UnaryOp.Sign)),
  unaryRule("Mish", {}, plain(UnaryOp.Mish)),
];

/** Epilogue activation codes of `linalg.gemm` and `conv.conv2d`. */
export const Activation = {
  "": 0,
  Relu: 1,
  LeakyRelu: 2,
  Sigmoid: 3,
  Tanh: 4,
  Gelu: 5,
  GeluTanh: 6,
  Clip: 7,
  Silu: 8,
  HardSwish: 9,
} as const;

/** The parameters each activation takes from `activation_params`, with defaults. */
const PARAMS: Readonly<Record<string, readonly number[]>> = {
  LeakyRelu: [0.01],
  Clip: [-Infinity, Infinity],
};

/** Documentation of the two attributes, for SUPPORTED_OPS. */
export const ACTIVATION_ATTRIBUTES: Readonly<Record<string, string>> = {
  activation: `"" (none), ${Object.keys(Activation).filter((a) => a !== "").map((a) => `"${a}"`).join(", ")}`,
  activation_params: "LeakyRelu: [alpha = 0.01]; Clip: [min, max]; others: none",
};

/** Reads `activation` and `activation_params`: [code, p0, p1]. */
export function epilogue(node: OpNode, a: Attributes): [number, number, number] {
  const name = a.string("activation", "");
  if (!(name in Activation)) throw new UnsupportedOpError(node, `activation "${name}" is not supported`);
  const defaults = PARAMS[name] ?? [];
  const given = a.floats("activation_params") ?? [];
  if (given.length > defaults.length) {
    throw new UnsupportedOpError(
      node,
      `activation "${name}" takes ${defaults.length} activation_params, not ${given.length}`,
    );
  }
  const p = defaults.map((d, i) => given[i] ?? d);
  return [Activation[name as keyof typeof Activation], p[0] ?? 0, p[1] ?? 0];
}
