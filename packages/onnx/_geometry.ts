/**
 * Private: how ONNX ops turn their attributes and constant inputs into concrete geometry (broadcast shapes,
 * reshape targets, slice ranges, pool windows, reduce axes), shared by shape inference and the folding
 * evaluator so both read an op the same way. Semantics from the ONNX operator specification. Ours.
 *
 * @module
 */
import { attrInt, attrInts, attrString, fail, normAxis } from "./_attrs.ts";
import type { IrNode } from "./graph.ts";
import type { ConstTensor } from "./tensor.ts";
import { shapeSize } from "./tensor.ts";

/** Numpy (multidirectional) broadcast of shapes, or a failure naming both. */
export function broadcastShapes(...shapes: ReadonlyArray<readonly number[]>): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    let d = 1;
    for (const s of shapes) {
      const k = s.length - rank + i;
      const v = k < 0 ? 1 : s[k];
      if (v === d || v === 1) continue;
      if (d === 1) d = v;
      else fail(`shapes ${shapes.map((x) => `[${x}]`).join(" and ")} do not broadcast`);
    }
    out.push(d);
  }
  return out;
}

/** Row-major strides of a shape (in elements). */
export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/** Reshape's target shape: `0` copies the input dim (unless `allowzero`), one `-1` is inferred. */
export function reshapeTarget(input: readonly number[], spec: readonly number[], allowZero: boolean): number[] {
  const out = spec.map((d, i) => {
    if (d === 0 && !allowZero) {
      if (i >= input.length) fail(`shape entry ${i} is 0 but the input has rank ${input.length}`);
      return input[i];
    }
    return d;
  });
  const minus = out.filter((d) => d === -1).length;
  if (minus > 1) fail(`shape [${spec}] has more than one -1`);
  if (out.some((d) => d < -1)) fail(`shape [${spec}] has a negative entry`);
  const total = shapeSize(input);
  const known = out.reduce((a, d) => (d === -1 ? a : a * d), 1);
  if (minus === 1) {
    if (known === 0 || total % known !== 0) fail(`cannot reshape [${input}] to [${spec}]`);
    out[out.indexOf(-1)] = total / known;
  } else if (known !== total) fail(`cannot reshape [${input}] (${total} elements) to [${spec}]`);
  return out;
}

/** One axis of a slice: start, step and count of elements taken. */
export interface SliceAxis {
  /** First index taken. */
  readonly start: number;
  /** Step (non-zero). */
  readonly step: number;
  /** Number of elements taken. */
  readonly count: number;
}

/** Slice's per-axis ranges (every axis of the input; untouched axes take everything), clamped as numpy does. */
export function sliceAxes(
  shape: readonly number[],
  starts: readonly number[],
  ends: readonly number[],
  axes: readonly number[] | undefined,
  steps: readonly number[] | undefined,
): SliceAxis[] {
  if (starts.length !== ends.length) fail(`starts and ends have different lengths (${starts.length}, ${ends.length})`);
  const out: SliceAxis[] = shape.map((d) => ({ start: 0, step: 1, count: d }));
  const ax = axes ?? starts.map((_, i) => i);
  const seen = new Set<number>();
  ax.forEach((a0, i) => {
    const a = normAxis(a0, shape.length);
    if (seen.has(a)) fail(`axis ${a0} is sliced twice`);
    seen.add(a);
    const dim = shape[a], step = steps?.[i] ?? 1;
    if (step === 0) fail("a slice step is 0");
    let start = starts[i], end = ends[i];
    // The spec clamps an end past the axis to dim - 1 when stepping backward (an end of INT_MAX with step -1
    // takes nothing), while onnxruntime reads an end of exactly INT32_MAX or INT64_MAX as "to the beginning".
    // Rather than pick one, we refuse it; INT_MIN slices backward to the start under both.
    if (step < 0 && (end === 2 ** 31 - 1 || end >= 2 ** 63 - 1)) {
      const max = end === 2 ** 31 - 1 ? "INT32_MAX" : "INT64_MAX";
      fail(
        `ends[${i}] = ${max} with the negative step ${step} is read as empty by the ONNX spec and as ` +
          `"to the beginning" by onnxruntime; use INT_MIN (or -dim - 1) to slice backward to the start`,
      );
    }
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
      start = Math.min(Math.max(start, 0), dim);
      end = Math.min(Math.max(end, 0), dim);
    } else {
      start = Math.min(Math.max(start, 0), dim - 1);
      end = Math.min(Math.max(end, -1), dim - 1);
    }
    out[a] = { start, step, count: Math.max(0, Math.ceil((end - start) / step)) };
  });
  return out;
}

/** Squeeze's axes (normalized, sorted); all size-1 axes when none are given. */
export function squeezeAxes(shape: readonly number[], axes: readonly number[] | undefined): number[] {
  if (axes === undefined || axes.length === 0) return shape.flatMap((d, i) => (d === 1 ? [i] : []));
  const out = [...new Set(axes.map((a) => normAxis(a, shape.length)))].sort((a, b) => a - b);
  for (const a of out) if (shape[a] !== 1) fail(`cannot squeeze axis ${a} of size ${shape[a]}`);
  return out;
}

/** Unsqueeze's output shape. */
export function unsqueezeShape(shape: readonly number[], axes: readonly number[]): number[] {
  const rank = shape.length + axes.length;
  const norm = axes.map((a) => normAxis(a, rank));
  if (new Set(norm).size !== norm.length) fail(`axes [${axes}] repeat an axis`);
  const out: number[] = [];
  let k = 0;
  for (let i = 0; i < rank; i++) out.push(norm.includes(i) ? 1 : shape[k++]);
  return out;
}

/** Reduce ops' axes (normalized, sorted), or `undefined` for "no-op" (`noop_with_empty_axes` with none given). */
export function reduceAxes(node: IrNode, rank: number, axesInput: ConstTensor | undefined): number[] | undefined {
  const given = axesInput?.ints() ?? attrInts(node, "axes");
  if (given === undefined || given.length === 0) {
    if (attrInt(node, "noop_with_empty_axes", 0) === 1) return undefined;
    return [...Array(rank).keys()];
  }
  return [...new Set(given.map((a) => normAxis(a, rank)))].sort((a, b) => a - b);
}

/** A reduction's output shape. */
export function reducedShape(shape: readonly number[], axes: readonly number[], keepDims: boolean): number[] {
  return keepDims ? shape.map((d, i) => (axes.includes(i) ? 1 : d)) : shape.filter((_, i) => !axes.includes(i));
}

/** The window of a Conv or a pool over its spatial dims, with `auto_pad` resolved into explicit pads. */
export interface Window {
  /** Kernel size per spatial dim. */
  readonly kernel: number[];
  /** Strides. */
  readonly strides: number[];
  /** Dilations. */
  readonly dilations: number[];
  /** Pads as ONNX lays them out: all begins, then all ends. */
  readonly pads: number[];
  /** Output size per spatial dim. */
  readonly out: number[];
}

/** Resolves a Conv/pool window over `spatial` input dims (ceil_mode for pools). */
export function windowOf(node: IrNode, spatial: readonly number[], kernel: readonly number[]): Window {
  const n = spatial.length;
  if (kernel.length !== n) fail(`kernel_shape has ${kernel.length} dims for ${n} spatial dims`);
  const strides = attrInts(node, "strides", Array(n).fill(1));
  const dilations = attrInts(node, "dilations", Array(n).fill(1));
  if (strides.length !== n || dilations.length !== n) fail(`strides and dilations must have ${n} entries`);
  if ([...strides, ...dilations, ...kernel].some((v) => !Number.isInteger(v) || v < 1)) {
    fail("kernel_shape, strides and dilations must be positive");
  }
  const autoPad = attrString(node, "auto_pad", "NOTSET");
  const ceil = attrInt(node, "ceil_mode", 0) === 1;
  const pads = attrInts(node, "pads", Array(2 * n).fill(0)).slice();
  if (pads.length !== 2 * n || pads.some((p) => p < 0)) fail(`pads must be ${2 * n} non-negative entries`);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const eff = (kernel[i] - 1) * dilations[i] + 1;
    if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
      const o = Math.ceil(spatial[i] / strides[i]);
      const total = Math.max(0, (o - 1) * strides[i] + eff - spatial[i]);
      const small = Math.floor(total / 2);
      pads[i] = autoPad === "SAME_UPPER" ? small : total - small;
      pads[i + n] = total - pads[i];
      out.push(o);
      continue;
    }
    if (autoPad === "VALID") pads[i] = pads[i + n] = 0;
    else if (autoPad !== "NOTSET") fail(`auto_pad "${autoPad}" is not an ONNX value`);
    const span = spatial[i] + pads[i] + pads[i + n] - eff;
    if (span < 0) fail(`the window (${eff}) is larger than the padded input (${spatial[i] + pads[i] + pads[i + n]})`);
    let o = (ceil ? Math.ceil(span / strides[i]) : Math.floor(span / strides[i])) + 1;
    if (ceil && (o - 1) * strides[i] >= spatial[i] + pads[i]) o--; // the last window must start inside the input
    out.push(o);
  }
  return { kernel: [...kernel], strides, dilations, pads, out };
}

/** Split's output sizes along `axis`. */
export function splitSizes(node: IrNode, dim: number, outputs: number, splitInput: ConstTensor | undefined): number[] {
  const given = splitInput?.ints() ?? attrInts(node, "split");
  if (given !== undefined && given.length > 0) {
    if (given.length !== outputs) fail(`split has ${given.length} entries for ${outputs} outputs`);
    if (given.reduce((a, b) => a + b, 0) !== dim) fail(`split [${given}] does not add up to ${dim}`);
    return given;
  }
  const n = attrInt(node, "num_outputs", outputs);
  if (n !== outputs) fail(`num_outputs is ${n} but the node has ${outputs} outputs`);
  const chunk = Math.ceil(dim / n);
  const sizes = Array.from({ length: n }, (_, i) => Math.max(0, Math.min(chunk, dim - i * chunk)));
  if (!node.attributes.num_outputs && dim % n !== 0) fail(`dimension ${dim} does not split evenly into ${n}`);
  return sizes;
}
