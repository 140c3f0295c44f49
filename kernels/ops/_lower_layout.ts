/**
 * Shape arithmetic of the lowering rules: sizes, row-major strides, numpy broadcasting, and the merging of
 * dimensions that every operand walks contiguously, which is how shapes reach the strided kernels. Ours.
 *
 * @module
 */
import { type OpNode, UnsupportedOpError } from "./op_node.ts";

/** The most dimensions a strided kernel takes after merging. */
export const MAX_DIMS: number = 8;

/** Number of elements of a shape (1 for a scalar). */
export function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Row-major strides (elements) of a shape. */
export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

/** A strided index space: dims and, per operand, strides in elements. */
export interface Layout {
  /** Dimensions (at least one). */
  dims: number[];
  /** Strides per operand. */
  strides: number[][];
}

/**
 * Drops dimensions of size 1 and merges neighbours that every operand walks contiguously
 * (stride[d] = stride[d + 1] · dims[d + 1]). Returns at least one dimension.
 */
export function mergeLayout(layout: Layout): Layout {
  const dims: number[] = [];
  const strides: number[][] = layout.strides.map(() => []);
  for (let d = 0; d < layout.dims.length; d++) {
    const n = layout.dims[d];
    if (n === 1) continue;
    const last = dims.length - 1;
    if (last >= 0 && layout.strides.every((s, k) => strides[k][last] === s[d] * n)) {
      dims[last] *= n;
      layout.strides.forEach((s, k) => (strides[k][last] = s[d]));
    } else {
      dims.push(n);
      layout.strides.forEach((s, k) => strides[k].push(s[d]));
    }
  }
  if (dims.length === 0) return { dims: [1], strides: strides.map(() => [0]) };
  return { dims, strides };
}

/**
 * The layout of inputs broadcast (numpy rules) to `out`: their strides are 0 along the dimensions they
 * broadcast. Throws when a shape does not broadcast to `out`.
 */
export function broadcastLayout(
  node: OpNode,
  out: readonly number[],
  shapes: ReadonlyArray<readonly number[]>,
): Layout {
  const strides = shapes.map((shape) => {
    if (shape.length > out.length) {
      throw new UnsupportedOpError(node, `shape [${shape}] does not broadcast to [${out}]`);
    }
    const own = stridesOf(shape);
    const lead = out.length - shape.length;
    return out.map((n, d) => {
      if (d < lead) return 0;
      const m = shape[d - lead];
      if (m === n) return m === 1 ? 0 : own[d - lead];
      if (m === 1) return 0;
      throw new UnsupportedOpError(node, `shape [${shape}] does not broadcast to [${out}]`);
    });
  });
  return mergeLayout({ dims: [...out], strides });
}

/** The numpy broadcast of two shapes. */
export function broadcastShapes(node: OpNode, a: readonly number[], b: readonly number[]): number[] {
  const rank = Math.max(a.length, b.length);
  return Array.from({ length: rank }, (_, i) => {
    const x = a[a.length - rank + i] ?? 1, y = b[b.length - rank + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new UnsupportedOpError(node, `shapes [${a}] and [${b}] do not broadcast`);
    return x === 1 ? y : x;
  });
}

/** Throws when a merged layout has more dimensions than the strided kernels take. */
export function checkRank(node: OpNode, layout: Layout): void {
  if (layout.dims.length > MAX_DIMS) {
    throw new UnsupportedOpError(node, `${layout.dims.length} dimensions remain after merging, more than ${MAX_DIMS}`);
  }
}
