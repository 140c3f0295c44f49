/**
 * Lowering rules of the normalizations onto library `norm`: LayerNormalization, the fused nrt.LayerNorm,
 * BatchNormalization (inference) and InstanceNormalization. Ours.
 *
 * nrt.LayerNorm (domain "nrt") is what the compiler forms from the decomposed pattern
 * `mean = ReduceMean(X); D = X - mean; var = ReduceMean(Pow(D, 2)); Y = D / Sqrt(var + epsilon) * Scale + B`
 * (the Mul and the Add optional), reducing over the trailing axes from `axis` on:
 * - inputs: X, Scale (optional), B (optional); Scale and B hold one value per normalized element, or one scalar.
 * - attributes: `axis` (default -1: the last axis only), `epsilon` (default 1e-5; the constant of the Add).
 * - output: Y, the shape of X. The variance is the population variance (divided by the count), as ReduceMean.
 *
 * @module
 */
import { type KernelCall, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  axisOf,
  call,
  dtype,
  f64Bits,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  sameShape,
} from "./_lower_util.ts";
import { sizeOf } from "./_lower_layout.ts";

const PER_ELEMENT = 1, SCALAR = 2;

/** Scale/bias mode: 0 absent, 1 one value per normalized element, 2 one scalar. */
function affineMode(node: OpNode, v: OpValue | undefined, normalized: readonly number[]): number {
  if (!v) return 0;
  dtype(node, v, ["float32"]);
  if (sizeOf(v.shape) === 1) return SCALAR;
  const own = [...v.shape];
  while (own.length > normalized.length && own[0] === 1) own.shift();
  const tail = normalized.slice(normalized.length - own.length);
  if (sizeOf(v.shape) !== sizeOf(normalized) || own.some((d, i) => d !== tail[i])) {
    throw new UnsupportedOpError(
      node,
      `"${v.name}" [${v.shape}] is neither a scalar nor the normalized shape [${normalized}]`,
    );
  }
  return PER_ELEMENT;
}

/** An output if present (an omitted optional output has an empty name). */
function optionalOutput(node: OpNode, i: number): OpValue | undefined {
  const v = node.outputs[i];
  return v && v.name !== "" ? v : undefined;
}

function layerNorm(node: OpNode, fused: boolean): KernelCall[] {
  const a = new Attributes(node, fused ? ["axis", "epsilon"] : ["axis", "epsilon", "stash_type"]);
  arity(node, [fused ? 1 : 2, 3], [1, fused ? 1 : 3]);
  const x = input(node, 0), y = node.outputs[0];
  dtype(node, x, ["float32"]);
  dtype(node, y, ["float32"]);
  sameShape(node, x, y);
  if (a.int("stash_type", 1) !== 1) throw new UnsupportedOpError(node, "stash_type must be 1 (float32)");
  const rank = x.shape.length;
  if (rank === 0) throw new UnsupportedOpError(node, "X is a scalar");
  const axis = axisOf(node, a.int("axis", -1), rank);
  const normalized = x.shape.slice(axis);
  const scale = optionalInput(node, 1), bias = optionalInput(node, 2);
  const mean = optionalOutput(node, 1), inv = optionalOutput(node, 2);
  const rows = sizeOf(x.shape.slice(0, axis)), n = sizeOf(normalized);
  for (const o of [mean, inv]) {
    if (o && (o.dtype !== "float32" || sizeOf(o.shape) !== rows)) {
      throw new UnsupportedOpError(node, `"${o.name}" must be float32 with ${rows} elements`);
    }
  }
  const inputs = [x, scale, bias].filter((v): v is OpValue => v !== undefined).map((v) => v.name);
  const outputs = [y, mean, inv].filter((v): v is OpValue => v !== undefined).map((v) => v.name);
  return [call(
    "norm",
    "layer_norm_f32",
    inputs,
    outputs,
    ints(
      rows,
      n,
      f64Bits(a.float("epsilon", 1e-5)),
      affineMode(node, scale, normalized),
      affineMode(node, bias, normalized),
      mean ? 1 : 0,
      inv ? 1 : 0,
    ),
  )];
}

function perChannel(node: OpNode, values: readonly OpValue[], c: number): void {
  for (const v of values) {
    dtype(node, v, ["float32"]);
    if (sizeOf(v.shape) !== c || v.shape.length !== 1) throw new UnsupportedOpError(node, `"${v.name}" must be [${c}]`);
  }
}

const batchNormRule: LoweringRule = {
  domain: "",
  opType: "BatchNormalization",
  dtypes: ["float32"],
  attributes: { epsilon: "any", momentum: "any (unused in inference)", training_mode: "0", spatial: "1" },
  notes: "inference only: one output",
  lower(node) {
    const a = new Attributes(node, ["epsilon", "momentum", "training_mode", "spatial", "is_test"]);
    arity(node, [5, 5], [1, 1]);
    if (a.int("training_mode", 0) !== 0) throw new UnsupportedOpError(node, "training_mode = 1 is not supported");
    if (a.int("spatial", 1) !== 1) throw new UnsupportedOpError(node, "spatial = 0 is not supported");
    const x = input(node, 0), y = node.outputs[0];
    dtype(node, x, ["float32"]);
    dtype(node, y, ["float32"]);
    sameShape(node, x, y);
    if (x.shape.length < 2) throw new UnsupportedOpError(node, "X must have rank >= 2");
    const c = x.shape[1];
    const params = [1, 2, 3, 4].map((i) => input(node, i));
    perChannel(node, params, c);
    return [call(
      "norm",
      "batch_norm_f32",
      [x.name, ...params.map((v) => v.name)],
      [y.name],
      ints(
        x.shape[0],
        c,
        sizeOf(x.shape.slice(2)),
        f64Bits(a.float("epsilon", 1e-5)),
      ),
    )];
  },
};

const instanceNormRule: LoweringRule = {
  domain: "",
  opType: "InstanceNormalization",
  dtypes: ["float32"],
  attributes: { epsilon: "any" },
  lower(node) {
    const a = new Attributes(node, ["epsilon"]);
    arity(node, [3, 3]);
    const x = input(node, 0), y = node.outputs[0];
    dtype(node, x, ["float32"]);
    dtype(node, y, ["float32"]);
    sameShape(node, x, y);
    if (x.shape.length < 3) throw new UnsupportedOpError(node, "X must have rank >= 3");
    const c = x.shape[1];
    const params = [1, 2].map((i) => input(node, i));
    perChannel(node, params, c);
    return [call(
      "norm",
      "instance_norm_f32",
      [x.name, ...params.map((v) => v.name)],
      [y.name],
      ints(
        x.shape[0],
        c,
        sizeOf(x.shape.slice(2)),
        f64Bits(a.float("epsilon", 1e-5)),
      ),
    )];
  },
};

/** The normalization rules. */
export const NORM_RULES: readonly LoweringRule[] = [
  {
    domain: "",
    opType: "LayerNormalization",
    dtypes: ["float32"],
    attributes: { axis: "any", epsilon: "any", stash_type: "1" },
    notes: "Scale and B: the normalized shape or a scalar; Mean and InvStdDev outputs optional",
    lower: (node) => layerNorm(node, false),
  },
  {
    domain: "nrt",
    opType: "LayerNorm",
    dtypes: ["float32"],
    attributes: { axis: "any", epsilon: "any" },
    notes: "the decomposed ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add pattern; Scale and B optional",
    lower: (node) => layerNorm(node, true),
  },
  batchNormRule,
  instanceNormRule,
];
