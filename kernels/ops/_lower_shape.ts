/**
 * Lowering rules of the data-movement ops that are copies, onto library `shape`, for any dtype: the plain copies
 * behind Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout (when the compiler cannot alias them), and the
 * strided copies behind Transpose, Slice, Expand, Tile, DepthToSpace and SpaceToDepth. Concat, Split, Gather and
 * Pad are in _lower_concat.ts. Ours.
 *
 * @module
 */
import { type KernelCall, type OpDtype, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  axisOf,
  call,
  constantInts,
  constantNumbers,
  copyCall,
  ELEMENT_BYTES,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  output,
  sameDtype,
} from "./_lower_util.ts";
import {
  broadcastLayout,
  broadcastShapes,
  checkRank,
  type Layout,
  mergeLayout,
  sizeOf,
  stridesOf,
} from "./_lower_layout.ts";

/** Every dtype the data-movement kernels take (they move bytes). */
export const ANY: readonly OpDtype[] = [
  "float32",
  "float16",
  "bfloat16",
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

/** A strided copy of `x` into `y` (element strides of `layout`, from element `offset`), any dtype. */
export function stridedCall(node: OpNode, x: OpValue, y: OpValue, offset: number, layout: Layout): KernelCall {
  const merged = mergeLayout(layout);
  checkRank(node, merged);
  return call(
    "shape",
    "strided_copy",
    [x.name],
    [y.name],
    ints(
      ELEMENT_BYTES[y.dtype],
      merged.dims.length,
      offset,
      ...merged.dims,
      ...merged.strides[0],
    ),
  );
}

/** Throws unless `y` has the shape `want`. */
export function checkShape(node: OpNode, y: OpValue, want: readonly number[]): void {
  if (want.length !== y.shape.length || want.some((d, i) => d !== y.shape[i])) {
    throw new UnsupportedOpError(node, `output shape [${y.shape}] is not [${want}]`);
  }
}

/** Reshape-like ops: the output is the input's bytes under another shape. */
function copyRule(opType: string, attributes: Readonly<Record<string, string>>, maxInputs: number): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ANY,
    attributes,
    notes: opType === "Dropout"
      ? "inference: the mask output and training_mode = true are not supported"
      : "a byte copy; the compiler should alias it when it can",
    lower(node) {
      new Attributes(node, Object.keys(attributes));
      arity(node, [1, maxInputs], [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      sameDtype(node, [x, y]);
      if (sizeOf(x.shape) !== sizeOf(y.shape)) {
        throw new UnsupportedOpError(node, `[${x.shape}] and [${y.shape}] hold different numbers of elements`);
      }
      if (opType === "Dropout") {
        const training = optionalInput(node, 2);
        if (training && constantNumbers(node, training, "training_mode").some((v) => v !== 0)) {
          throw new UnsupportedOpError(node, "training_mode = true is not supported");
        }
      }
      return [copyCall(x, y)];
    },
  };
}

const transposeRule: LoweringRule = {
  domain: "",
  opType: "Transpose",
  dtypes: ANY,
  attributes: { perm: "any permutation" },
  lower(node) {
    const a = new Attributes(node, ["perm"]);
    arity(node, [1, 1]);
    const x = input(node, 0), y = output(node, 0);
    sameDtype(node, [x, y]);
    const rank = x.shape.length;
    const perm = a.ints("perm", x.shape.map((_, i) => rank - 1 - i));
    if (perm.length !== rank || [...perm].sort((p, q) => p - q).some((p, i) => p !== i)) {
      throw new UnsupportedOpError(node, `perm [${perm}] is not a permutation of ${rank} axes`);
    }
    checkShape(node, y, perm.map((p) => x.shape[p]));
    const s = stridesOf(x.shape);
    return [stridedCall(node, x, y, 0, { dims: [...y.shape], strides: [perm.map((p) => s[p])] })];
  },
};

const sliceRule: LoweringRule = {
  domain: "",
  opType: "Slice",
  dtypes: ANY,
  attributes: { starts: "opset < 10", ends: "opset < 10", axes: "opset < 10" },
  notes:
    "starts, ends, axes and steps inputs must be constants; negative steps supported, but not with an end of INT_MAX",
  lower(node) {
    const a = new Attributes(node, ["starts", "ends", "axes"]);
    arity(node, [1, 5]);
    const x = input(node, 0), y = output(node, 0);
    sameDtype(node, [x, y]);
    const rank = x.shape.length;
    const fromInput = node.inputs.length > 1;
    const read = (i: number, name: string): number[] | undefined => {
      if (!fromInput) return a.ints(name);
      const v = optionalInput(node, i);
      return v ? constantInts(node, v, name) : undefined;
    };
    const starts = read(1, "starts"), ends = read(2, "ends");
    if (!starts || !ends || starts.length !== ends.length) {
      throw new UnsupportedOpError(node, "starts and ends must match");
    }
    const axes = (read(3, "axes") ?? starts.map((_, i) => i)).map((d) => axisOf(node, d, rank, "axes entry"));
    const steps = read(4, "steps") ?? starts.map(() => 1);
    if (axes.length !== starts.length || steps.length !== starts.length) {
      throw new UnsupportedOpError(node, "starts, ends, axes and steps must have the same length");
    }
    const begin = x.shape.map(() => 0), step = x.shape.map(() => 1), count = [...x.shape];
    axes.forEach((d, i) => {
      const n = x.shape[d], s = steps[i];
      if (s === 0) throw new UnsupportedOpError(node, "a step of 0 is not allowed");
      // The spec clamps this end to n - 1 (nothing taken); onnxruntime takes the axis back to its start. Ours: refused.
      if (s < 0 && (ends[i] === 2 ** 31 - 1 || ends[i] >= 2 ** 63 - 1)) {
        throw new UnsupportedOpError(node, `ends[${i}] = INT_MAX with a negative step is ambiguous; use INT_MIN`);
      }
      const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(v, lo), hi);
      let st = starts[i] < 0 ? starts[i] + n : starts[i];
      let en = ends[i] < 0 ? ends[i] + n : ends[i];
      if (s > 0) {
        st = clamp(st, 0, n);
        en = clamp(en, 0, n);
      } else {
        st = clamp(st, 0, n - 1);
        en = clamp(en, -1, n - 1);
      }
      begin[d] = st;
      step[d] = s;
      count[d] = Math.max(0, Math.ceil((en - st) / s));
    });
    checkShape(node, y, count);
    const s = stridesOf(x.shape);
    const offset = begin.reduce((acc, b, d) => acc + b * s[d], 0);
    return [stridedCall(node, x, y, offset, { dims: count, strides: [s.map((v, d) => v * step[d])] })];
  },
};

const expandRule: LoweringRule = {
  domain: "",
  opType: "Expand",
  dtypes: ANY,
  attributes: {},
  notes: "the shape input must be a constant",
  lower(node) {
    new Attributes(node, []);
    arity(node, [2, 2]);
    const x = input(node, 0), y = output(node, 0);
    sameDtype(node, [x, y]);
    const shape = constantInts(node, input(node, 1), "shape");
    checkShape(node, y, broadcastShapes(node, x.shape, shape));
    const layout = broadcastLayout(node, y.shape, [x.shape]);
    return [stridedCall(node, x, y, 0, layout)];
  },
};

const tileRule: LoweringRule = {
  domain: "",
  opType: "Tile",
  dtypes: ANY,
  attributes: {},
  notes: "the repeats input must be a constant",
  lower(node) {
    new Attributes(node, []);
    arity(node, [2, 2]);
    const x = input(node, 0), y = output(node, 0);
    sameDtype(node, [x, y]);
    const repeats = constantInts(node, input(node, 1), "repeats");
    if (repeats.length !== x.shape.length || repeats.some((r) => r < 1)) {
      throw new UnsupportedOpError(node, `repeats [${repeats}] must give one count >= 1 per axis`);
    }
    checkShape(node, y, x.shape.map((n, d) => n * repeats[d]));
    const s = stridesOf(x.shape);
    // Output axis d of size r · n is the pair (repeat, index) with strides (0, s[d]).
    const dims = x.shape.flatMap((n, d) => [repeats[d], n]);
    const strides = x.shape.flatMap((_, d) => [0, s[d]]);
    return [stridedCall(node, x, y, 0, { dims, strides: [strides] })];
  },
};

/** Space/depth rearrangements as one strided copy over the 6-D view of the data. */
function depthRule(opType: "DepthToSpace" | "SpaceToDepth"): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ANY,
    attributes: opType === "DepthToSpace" ? { blocksize: "any >= 1", mode: "DCR, CRD" } : { blocksize: "any >= 1" },
    notes: "NCHW",
    lower(node) {
      const a = new Attributes(node, opType === "DepthToSpace" ? ["blocksize", "mode"] : ["blocksize"]);
      arity(node, [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      sameDtype(node, [x, y]);
      if (x.shape.length !== 4) throw new UnsupportedOpError(node, "X must be NCHW");
      const b = a.int("blocksize", 0);
      if (b < 1) throw new UnsupportedOpError(node, "blocksize must be >= 1");
      const [n, c, h, w] = x.shape;
      if (opType === "DepthToSpace") {
        if (c % (b * b) !== 0) throw new UnsupportedOpError(node, `C = ${c} is not a multiple of ${b * b}`);
        const co = c / (b * b);
        checkShape(node, y, [n, co, h * b, w * b]);
        const mode = a.string("mode", "DCR");
        if (mode !== "DCR" && mode !== "CRD") throw new UnsupportedOpError(node, `mode "${mode}" is not supported`);
        // Y[n, c', h, i, w, j] (i, j < b) = X[n, channel(c', i, j), h, w].
        const sC = h * w, sN = c * sC;
        const ch = mode === "DCR" ? { c: sC, i: b * co * sC, j: co * sC } : { c: b * b * sC, i: b * sC, j: sC };
        return [stridedCall(node, x, y, 0, { dims: [n, co, h, b, w, b], strides: [[sN, ch.c, w, ch.i, 1, ch.j]] })];
      }
      if (h % b !== 0 || w % b !== 0) throw new UnsupportedOpError(node, `H and W must be multiples of ${b}`);
      checkShape(node, y, [n, c * b * b, h / b, w / b]);
      // Y[n, i, j, c, h', w'] = X[n, c, h' · b + i, w' · b + j].
      const sC = h * w, sN = c * sC;
      return [stridedCall(node, x, y, 0, { dims: [n, b, b, c, h / b, w / b], strides: [[sN, w, 1, sC, b * w, b]] })];
    },
  };
}

/** The data-movement rules. */
export const SHAPE_RULES: readonly LoweringRule[] = [
  copyRule("Reshape", { allowzero: "0, 1" }, 2),
  copyRule("Flatten", { axis: "any" }, 1),
  copyRule("Squeeze", { axes: "opset < 13" }, 2),
  copyRule("Unsqueeze", { axes: "opset < 13" }, 2),
  copyRule("Identity", {}, 1),
  copyRule("Dropout", { ratio: "any (opset < 12)", seed: "any" }, 3),
  transposeRule,
  sliceRule,
  expandRule,
  tileRule,
  depthRule("DepthToSpace"),
  depthRule("SpaceToDepth"),
];
