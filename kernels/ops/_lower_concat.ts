/**
 * Lowering rules of Concat, Split, Gather and Pad onto library `shape`, for any dtype. Ours.
 *
 * @module
 */
import { type KernelCall, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  axisOf,
  call,
  constantBits,
  constantInts,
  dtype,
  ELEMENT_BYTES,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  output,
  sameDtype,
} from "./_lower_util.ts";
import { sizeOf } from "./_lower_layout.ts";
import { ANY, checkShape } from "./_lower_shape.ts";

const concatRule: LoweringRule = {
  domain: "",
  opType: "Concat",
  dtypes: ANY,
  attributes: { axis: "any" },
  notes: "up to 32 inputs; empty inputs are skipped",
  lower(node) {
    const a = new Attributes(node, ["axis"]);
    arity(node, [1, 32]);
    const xs = node.inputs.map((_, i) => input(node, i));
    const y = output(node, 0);
    sameDtype(node, [...xs, y]);
    const rank = y.shape.length;
    const axis = axisOf(node, a.int("axis", 0), rank);
    for (const x of xs) {
      if (x.shape.length !== rank || x.shape.some((n, d) => d !== axis && n !== y.shape[d])) {
        throw new UnsupportedOpError(node, `"${x.name}" [${x.shape}] does not concatenate into [${y.shape}]`);
      }
    }
    if (xs.reduce((t, x) => t + x.shape[axis], 0) !== y.shape[axis]) {
      throw new UnsupportedOpError(node, `the inputs do not add up to [${y.shape}] along axis ${axis}`);
    }
    const parts = xs.filter((x) => sizeOf(x.shape) > 0);
    const inner = sizeOf(y.shape.slice(axis + 1));
    return [call(
      "shape",
      "concat",
      parts.map((x) => x.name),
      [y.name],
      ints(
        ELEMENT_BYTES[y.dtype],
        sizeOf(y.shape.slice(0, axis)),
        parts.length,
        ...parts.map((x) => x.shape[axis] * inner),
      ),
    )];
  },
};

const splitRule: LoweringRule = {
  domain: "",
  opType: "Split",
  dtypes: ANY,
  attributes: { axis: "any", split: "opset < 13", num_outputs: "any" },
  notes:
    "the outputs' shapes give the sizes; a zero-size part is an empty constant the compiler leaves out; up to 32 outputs",
  lower(node) {
    const a = new Attributes(node, ["axis", "split", "num_outputs"]);
    arity(node, [1, 2], [1, 32]);
    const x = input(node, 0);
    const ys = node.outputs;
    sameDtype(node, [x, ...ys]);
    const rank = x.shape.length;
    const axis = axisOf(node, a.int("axis", 0), rank);
    for (const y of ys) {
      if (y.shape.length !== rank || y.shape.some((n, d) => d !== axis && n !== x.shape[d])) {
        throw new UnsupportedOpError(node, `"${y.name}" [${y.shape}] is not a part of [${x.shape}]`);
      }
    }
    if (ys.reduce((t, y) => t + y.shape[axis], 0) !== x.shape[axis]) {
      throw new UnsupportedOpError(node, `the outputs do not add up to [${x.shape}] along axis ${axis}`);
    }
    const inner = sizeOf(x.shape.slice(axis + 1));
    if (ys.some((y) => sizeOf(y.shape) === 0)) throw new UnsupportedOpError(node, "an output is empty");
    return [call(
      "shape",
      "split",
      [x.name],
      ys.map((y) => y.name),
      ints(
        ELEMENT_BYTES[x.dtype],
        sizeOf(x.shape.slice(0, axis)),
        ys.length,
        ...ys.map((y) => y.shape[axis] * inner),
      ),
    )];
  },
};

const gatherRule: LoweringRule = {
  domain: "",
  opType: "Gather",
  dtypes: ANY,
  attributes: { axis: "any" },
  notes: "int32 or int64 indices; negative indices count from the end; an index out of range faults the call",
  lower(node) {
    const a = new Attributes(node, ["axis"]);
    arity(node, [2, 2]);
    const x = input(node, 0), idx = input(node, 1), y = output(node, 0);
    sameDtype(node, [x, y]);
    dtype(node, idx, ["int32", "int64"]);
    const rank = x.shape.length;
    const axis = axisOf(node, a.int("axis", 0), rank);
    checkShape(node, y, [...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)]);
    return [call(
      "shape",
      "gather",
      [x.name, idx.name],
      [y.name],
      ints(
        ELEMENT_BYTES[x.dtype],
        sizeOf(x.shape.slice(0, axis)),
        x.shape[axis],
        sizeOf(x.shape.slice(axis + 1)),
        sizeOf(idx.shape),
        ELEMENT_BYTES[idx.dtype],
      ),
    )];
  },
};

const PAD_MODES: Readonly<Record<string, number>> = { constant: 0, edge: 1, reflect: 2, wrap: 3 };

const padRule: LoweringRule = {
  domain: "",
  opType: "Pad",
  dtypes: ANY,
  attributes: { mode: "constant, edge, reflect, wrap", pads: "opset < 11", value: "opset < 11" },
  notes: "pads, constant_value and axes inputs must be constants; rank <= 8",
  lower(node) {
    const a = new Attributes(node, ["mode", "pads", "value"]);
    arity(node, [1, 4]);
    const x = input(node, 0), y = output(node, 0);
    sameDtype(node, [x, y]);
    const rank = x.shape.length;
    if (rank === 0 || rank > 8) throw new UnsupportedOpError(node, `rank ${rank} is not supported`);
    const mode = a.string("mode", "constant");
    if (!(mode in PAD_MODES)) throw new UnsupportedOpError(node, `mode "${mode}" is not supported`);
    const padsIn = optionalInput(node, 1);
    let pads = padsIn ? constantInts(node, padsIn, "pads") : a.ints("pads");
    if (!pads) throw new UnsupportedOpError(node, "pads are required");
    const axesIn = optionalInput(node, 3);
    const axes = axesIn
      ? constantInts(node, axesIn, "axes").map((d) => axisOf(node, d, rank, "axes entry"))
      : undefined;
    if (axes) {
      const full = new Array(2 * rank).fill(0);
      axes.forEach((d, i) => {
        full[d] = pads![i];
        full[rank + d] = pads![axes.length + i];
      });
      pads = full;
    }
    if (pads.length !== 2 * rank) {
      throw new UnsupportedOpError(node, `pads has ${pads.length} entries, expected ${2 * rank}`);
    }
    checkShape(node, y, x.shape.map((n, d) => n + pads![d] + pads![rank + d]));
    // Negative pads remove elements (ONNX spec). Whether edge, reflect and wrap padding read the input before or
    // after that removal the spec leaves open; onnxruntime and PyTorch remove first (wrap's [a, b, c] with pads
    // [1, -1] is [b, a, b]), and so do we: a constant-mode call crops into scratch, and the padding reads the crop.
    const calls: KernelCall[] = [];
    let src = x;
    if (mode !== "constant" && pads.some((p) => p < 0) && pads.some((p) => p > 0)) {
      const crop = pads.map((p) => Math.min(p, 0));
      const cropped: OpValue = {
        name: `${node.name}#cropped`,
        dtype: x.dtype,
        shape: x.shape.map((n, d) => n + crop[d] + crop[rank + d]),
      };
      if (cropped.shape.some((n) => n <= 0)) throw new UnsupportedOpError(node, "X is empty after the negative pads");
      calls.push(call(
        "shape",
        "pad",
        [x.name],
        [cropped.name],
        ints(ELEMENT_BYTES[x.dtype], PAD_MODES.constant, rank, ...cropped.shape, ...x.shape, ...crop.slice(0, rank), 0),
        { scratch: [cropped] },
      ));
      src = cropped;
      pads = pads.map((p) => Math.max(p, 0));
    }
    if (mode !== "constant" && src.shape.some((n) => n === 0)) throw new UnsupportedOpError(node, "X is empty");
    if (mode === "reflect" && src.shape.some((n, d) => pads![d] >= n || pads![rank + d] >= n)) {
      throw new UnsupportedOpError(node, "reflect pads must be smaller than the padded axis (after negative pads)");
    }
    let bits = 0n;
    const valueIn = optionalInput(node, 2);
    if (valueIn) {
      if (valueIn.dtype !== x.dtype) throw new UnsupportedOpError(node, "constant_value must have X's dtype");
      bits = constantBits(node, valueIn, "constant_value");
    } else if (a.has("value")) {
      if (x.dtype !== "float32") throw new UnsupportedOpError(node, "the value attribute needs float32 X");
      const view = new DataView(new ArrayBuffer(4));
      view.setFloat32(0, a.float("value", 0), true);
      bits = BigInt(view.getUint32(0, true));
    }
    calls.push(call(
      "shape",
      "pad",
      [src.name],
      [y.name],
      ints(
        ELEMENT_BYTES[x.dtype],
        PAD_MODES[mode],
        rank,
        ...y.shape,
        ...src.shape,
        ...pads.slice(0, rank),
        bits,
      ),
    ));
    return calls;
  },
};

/** The rules of Concat, Split, Gather and Pad. */
export const CONCAT_RULES: readonly LoweringRule[] = [concatRule, splitRule, gatherRule, padRule];
