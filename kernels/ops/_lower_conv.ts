/**
 * Lowering rules of Conv, the fused nrt.FusedConv, MaxPool and AveragePool onto library `conv`, and of
 * GlobalAveragePool and GlobalMaxPool onto `reduce`. 1-D and 2-D (NCW, NCHW) float32 only. Ours.
 *
 * nrt.FusedConv (domain "nrt") is Conv followed by an activation, as the compiler forms it from Conv + Relu
 * (or Clip, Sigmoid, ...): the attributes of Conv plus `activation` and `activation_params`
 * (see _lower_activation.ts); inputs X, W, B (optional); output Y.
 *
 * @module
 */
import { type KernelCall, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";
import {
  arity,
  Attributes,
  call,
  dtype,
  f64Bits,
  input,
  ints,
  type LoweringRule,
  optionalInput,
  output,
  sameDtype,
} from "./_lower_util.ts";
import { ACTIVATION_ATTRIBUTES, epilogue } from "./_lower_activation.ts";
import { reduceCalls, ReduceKind } from "./_lower_reduce.ts";

/** Spatial geometry of a window op along each spatial axis. */
interface Geometry {
  kernel: number[];
  strides: number[];
  dilations: number[];
  begin: number[];
  end: number[];
  out: number[];
}

function geometry(
  node: OpNode,
  a: Attributes,
  spatial: readonly number[],
  kernel: readonly number[],
  ceilMode: boolean,
): Geometry {
  const r = spatial.length;
  const list = (name: string, fallback: number): number[] => {
    const v = a.ints(name, new Array(r).fill(fallback));
    if (v.length !== r) throw new UnsupportedOpError(node, `${name} has ${v.length} entries, expected ${r}`);
    return v;
  };
  const strides = list("strides", 1), dilations = list("dilations", 1);
  if ([...strides, ...dilations, ...kernel].some((v) => v < 1)) {
    throw new UnsupportedOpError(node, "strides, dilations and kernel sizes must be >= 1");
  }
  const autoPad = a.string("auto_pad", "NOTSET");
  let begin: number[], end: number[];
  let out: number[];
  if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
    out = spatial.map((n, i) => Math.ceil(n / strides[i]));
    const total = spatial.map((n, i) =>
      Math.max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - n)
    );
    begin = total.map((t) => (autoPad === "SAME_UPPER" ? Math.floor(t / 2) : Math.ceil(t / 2)));
    end = total.map((t, i) => t - begin[i]);
  } else if (autoPad === "VALID" || autoPad === "NOTSET") {
    const pads = autoPad === "VALID" ? new Array(2 * r).fill(0) : a.ints("pads", new Array(2 * r).fill(0));
    if (pads.length !== 2 * r) throw new UnsupportedOpError(node, `pads has ${pads.length} entries, expected ${2 * r}`);
    if (pads.some((p) => p < 0)) throw new UnsupportedOpError(node, "negative pads are not supported");
    begin = pads.slice(0, r);
    end = pads.slice(r);
    out = spatial.map((n, i) => {
      const span = n + begin[i] + end[i] - ((kernel[i] - 1) * dilations[i] + 1);
      let o = (ceilMode ? Math.ceil(span / strides[i]) : Math.floor(span / strides[i])) + 1;
      // The last window must start inside the input or its leading padding.
      if (ceilMode && (o - 1) * strides[i] >= n + begin[i]) o--;
      return o;
    });
  } else {
    throw new UnsupportedOpError(node, `auto_pad "${autoPad}" is not supported`);
  }
  if (out.some((o) => o < 1)) throw new UnsupportedOpError(node, "the output would be empty");
  return { kernel: [...kernel], strides, dilations, begin, end, out };
}

/** The NCHW view of a 1-D or 2-D op: spatial [H, W] with H = 1 for 1-D. */
function as2d(g: Geometry): Geometry {
  if (g.kernel.length === 2) return g;
  return {
    kernel: [1, ...g.kernel],
    strides: [1, ...g.strides],
    dilations: [1, ...g.dilations],
    begin: [0, ...g.begin],
    end: [0, ...g.end],
    out: [1, ...g.out],
  };
}

function checkOutput(node: OpNode, y: OpValue, want: readonly number[]): void {
  if (want.length !== y.shape.length || want.some((d, i) => d !== y.shape[i])) {
    throw new UnsupportedOpError(node, `output shape [${y.shape}] is not [${want}]`);
  }
}

function spatialOf(node: OpNode, x: OpValue): number[] {
  if (x.shape.length !== 3 && x.shape.length !== 4) {
    throw new UnsupportedOpError(
      node,
      `"${x.name}" has rank ${x.shape.length}; only 1-D and 2-D (rank 3, 4) are supported`,
    );
  }
  return x.shape.slice(2);
}

const CONV_ATTRIBUTES = ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"];

function lowerConv(node: OpNode, fused: boolean): KernelCall[] {
  const a = new Attributes(node, fused ? [...CONV_ATTRIBUTES, "activation", "activation_params"] : CONV_ATTRIBUTES);
  arity(node, [2, 3]);
  const x = input(node, 0), w = input(node, 1), b = optionalInput(node, 2), y = output(node, 0);
  dtype(node, x, ["float32"]);
  sameDtype(node, b ? [x, w, b, y] : [x, w, y]);
  const spatial = spatialOf(node, x);
  const [n, c] = x.shape;
  const group = a.int("group", 1);
  if (w.shape.length !== x.shape.length) throw new UnsupportedOpError(node, `W has rank ${w.shape.length}`);
  const m = w.shape[0];
  if (group < 1 || c % group !== 0 || m % group !== 0 || w.shape[1] !== c / group) {
    throw new UnsupportedOpError(
      node,
      `group ${group} does not fit ${c} input and ${m} output channels with W [${w.shape}]`,
    );
  }
  const kernel = w.shape.slice(2);
  const ks = a.ints("kernel_shape");
  if (ks && (ks.length !== kernel.length || ks.some((k, i) => k !== kernel[i]))) {
    throw new UnsupportedOpError(node, `kernel_shape [${ks}] differs from W's [${kernel}]`);
  }
  if (b && (b.shape.length !== 1 || b.shape[0] !== m)) throw new UnsupportedOpError(node, `B must be [${m}]`);
  const g0 = geometry(node, a, spatial, kernel, false);
  checkOutput(node, y, [n, m, ...g0.out]);
  const g = as2d(g0);
  const [h, wd] = spatial.length === 2 ? spatial : [1, spatial[0]];
  const [act, p0, p1] = fused ? epilogue(node, a) : [0, 0, 0];
  return [call(
    "conv",
    "conv2d",
    b ? [x.name, w.name, b.name] : [x.name, w.name],
    [y.name],
    ints(
      n,
      c,
      h,
      wd,
      m,
      g.kernel[0],
      g.kernel[1],
      g.out[0],
      g.out[1],
      g.strides[0],
      g.strides[1],
      g.dilations[0],
      g.dilations[1],
      g.begin[0],
      g.begin[1],
      group,
      b ? 1 : 0,
      act,
      f64Bits(p0),
      f64Bits(p1),
    ),
  )];
}

const POOL_MAX = 0, POOL_AVG_INCLUDE_PAD = 1, POOL_AVG_EXCLUDE_PAD = 2;

function lowerPool(node: OpNode, max: boolean): KernelCall[] {
  const known = max
    ? ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"]
    : ["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"];
  const a = new Attributes(node, known);
  arity(node, [1, 1], [1, 1]);
  const x = input(node, 0), y = output(node, 0);
  dtype(node, x, ["float32"]);
  sameDtype(node, [x, y]);
  const spatial = spatialOf(node, x);
  const kernel = a.ints("kernel_shape");
  if (!kernel || kernel.length !== spatial.length) {
    throw new UnsupportedOpError(node, "kernel_shape must give every spatial axis");
  }
  const ceil = a.int("ceil_mode", 0);
  if (ceil !== 0 && ceil !== 1) throw new UnsupportedOpError(node, `ceil_mode = ${ceil} is not supported`);
  const g0 = geometry(node, a, spatial, kernel, ceil === 1);
  if (!max && g0.dilations.some((d) => d !== 1)) throw new UnsupportedOpError(node, "AveragePool dilations must be 1");
  const [n, c] = x.shape;
  checkOutput(node, y, [n, c, ...g0.out]);
  const g = as2d(g0);
  const [h, wd] = spatial.length === 2 ? spatial : [1, spatial[0]];
  const kind = max ? POOL_MAX : a.int("count_include_pad", 0) ? POOL_AVG_INCLUDE_PAD : POOL_AVG_EXCLUDE_PAD;
  return [call(
    "conv",
    "pool2d",
    [x.name],
    [y.name],
    ints(
      kind,
      n * c,
      h,
      wd,
      g.out[0],
      g.out[1],
      g.kernel[0],
      g.kernel[1],
      g.strides[0],
      g.strides[1],
      g.dilations[0],
      g.dilations[1],
      g.begin[0],
      g.begin[1],
      g.end[0],
      g.end[1],
    ),
  )];
}

function globalPoolRule(opType: "GlobalAveragePool" | "GlobalMaxPool"): LoweringRule {
  return {
    domain: "",
    opType,
    dtypes: ["float32"],
    attributes: {},
    notes: "any rank >= 3, over every axis after the channel",
    lower(node) {
      new Attributes(node, []);
      arity(node, [1, 1]);
      const x = input(node, 0), y = output(node, 0);
      dtype(node, x, ["float32"]);
      sameDtype(node, [x, y]);
      if (x.shape.length < 3) throw new UnsupportedOpError(node, `"${x.name}" must have rank >= 3`);
      checkOutput(node, y, [x.shape[0], x.shape[1], ...x.shape.slice(2).map(() => 1)]);
      const axes = x.shape.slice(2).map((_, i) => i + 2);
      return reduceCalls(node, opType === "GlobalMaxPool" ? ReduceKind.ReduceMax : ReduceKind.ReduceMean, x, y, axes);
    },
  };
}

const CONV_DOC = {
  auto_pad: "NOTSET, SAME_UPPER, SAME_LOWER, VALID",
  dilations: "any >= 1",
  group: "any dividing the channels (depthwise included)",
  kernel_shape: "W's",
  pads: "any >= 0",
  strides: "any >= 1",
};

/** The conv and pooling rules. */
export const CONV_RULES: readonly LoweringRule[] = [
  {
    domain: "",
    opType: "Conv",
    dtypes: ["float32"],
    attributes: CONV_DOC,
    notes: "1-D and 2-D",
    lower: (node) => lowerConv(node, false),
  },
  {
    domain: "nrt",
    opType: "FusedConv",
    dtypes: ["float32"],
    attributes: { ...CONV_DOC, ...ACTIVATION_ATTRIBUTES },
    notes: "Conv + activation; 1-D and 2-D",
    lower: (node) => lowerConv(node, true),
  },
  {
    domain: "",
    opType: "MaxPool",
    dtypes: ["float32"],
    attributes: {
      auto_pad: "NOTSET, SAME_UPPER, SAME_LOWER, VALID",
      ceil_mode: "0, 1",
      dilations: "any >= 1",
      kernel_shape: "any",
      pads: "any >= 0",
      storage_order: "any (no Indices output)",
      strides: "any >= 1",
    },
    notes: "1-D and 2-D; the Indices output is not supported",
    lower: (node) => lowerPool(node, true),
  },
  {
    domain: "",
    opType: "AveragePool",
    dtypes: ["float32"],
    attributes: {
      auto_pad: "NOTSET, SAME_UPPER, SAME_LOWER, VALID",
      ceil_mode: "0, 1",
      count_include_pad: "0, 1",
      dilations: "1",
      kernel_shape: "any",
      pads: "any >= 0",
      strides: "any >= 1",
    },
    notes: "1-D and 2-D",
    lower: (node) => lowerPool(node, false),
  },
  globalPoolRule("GlobalAveragePool"),
  globalPoolRule("GlobalMaxPool"),
];
