/**
 * Lowering rules of the normalizations onto library `norm`: LayerNormalization, the fused nrt.LayerNorm,
 * BatchNormalization (inference) and InstanceNormalization. Ours.
 *
 * nrt.LayerNorm (domain "nrt") is what the compiler forms from the decomposed pattern
 * `mean = ReduceMean(X); D = X - mean; var = ReduceMean(Pow(D, 2)); Y = D / Sqrt(var + epsilon) * Scale + B`
 * (the Mul and the Add optional), reducing over the trailing axes from `axis` on:
 * - inputs: X, Scale (optional), B (optional), as LayerNormalization's.

 * - attributes: `axis` (default -1: the last axis only), `epsilon` (default 1e-5; the constant of the Add).
 * - output: Y, the shape of X. The variance is the population variance (divided by the count), as ReduceMean.
 *
 * LayerNormalization's Scale and B are, per the ONNX spec (the function's `Mul(Normalized, Scale)` and
 * `Add(NormalizedScaled, B)`), unidirectionally broadcastable to the normalized shape: one that is neither a scalar
 * nor the whole normalized shape (Scale [1, 4] or [4] over normalized axes [3, 4]) is first expanded into a scratch
 * value of the normalized shape by a strided copy, and the kernel reads that one value per element.
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
import { broadcastLayout, sizeOf } from "./_lower_layout.ts";
import { stridedCall } from "./_lower_shape.ts";

const PER_ELEMENT = 1, SCALAR = 2;

/** How the kernel reads Scale or B: its mode (0 absent), the value it reads, and the calls that make that value. */
interface Affine {
  readonly mode: number;
  readonly value?: OpValue;
  readonly calls: KernelCall[];
}

/**
 * Scale or B: absent, one scalar, one value per normalized element, or a shape that broadcasts unidirectionally to
 * the normalized shape, expanded into the scratch value `<node>#<role>`.
 */
function affine(node: OpNode, v: OpValue | undefined, normalized: readonly number[], role: string): Affine {
  if (!v) return { mode: 0, calls: [] };
  dtype(node, v, ["float32"]);
  if (sizeOf(v.shape) === 1) return { mode: SCALAR, value: v, calls: [] };
  const own = [...v.shape];
  while (own.length > normalized.length && own[0] === 1) own.shift();
  const lead = normalized.length - own.length;
  if (lead < 0 || own.some((d, i) => d !== normalized[lead + i] && d !== 1)) {
    throw new UnsupportedOpError(
      node,
      `"${v.name}" [${v.shape}] does not broadcast to the normalized shape [${normalized}]`,
    );
  }
  if (sizeOf(v.shape) === sizeOf(normalized)) return { mode: PER_ELEMENT, value: v, calls: [] };
  const expanded: OpValue = { name: `${node.name}#${role}`, dtype: "float32", shape: [...normalized] };
  const copy = stridedCall(node, v, expanded, 0, broadcastLayout(node, normalized, [own]));
  return { mode: PER_ELEMENT, value: expanded, calls: [{ ...copy, scratch: [expanded] }] };
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
  const s = affine(node, scale, normalized, "scale"), b = affine(node, bias, normalized, "bias");
  const inputs = [x, s.value, b.value].filter((v): v is OpValue => v !== undefined).map((v) => v.name);
  const outputs = [y, mean, inv].filter((v): v is OpValue => v !== undefined).map((v) => v.name);
  return [
    ...s.calls,
    ...b.calls,
    call(
      "norm",
      "layer_norm_f32",
      inputs,
      outputs,
      ints(rows, n, f64Bits(a.float("epsilon", 1e-5)), s.mode, b.mode, mean ? 1 : 0, inv ? 1 : 0),
    ),
  ];
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
    notes: "Scale and B broadcast unidirectionally to the normalized shape; Mean and InvStdDev outputs optional",
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
