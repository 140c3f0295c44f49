/**
 * Lowering rules of MatMul, Gemm and the fused nrt.FusedGemm onto `linalg.gemm`. Ours.
 *
 * nrt.FusedGemm (domain "nrt") is what the compiler forms from Gemm or MatMul, a bias Add and an optional
 * activation: Y = activation(alpha · op(A) · op(B) + beta · C).
 * - inputs: A, B, C (optional). A and B follow MatMul: rank >= 1, leading (batch) dimensions broadcast, a 1-D A is a
 *   row and a 1-D B a column. C broadcasts (numpy, unidirectionally) to Y.
 * - attributes: `transA`, `transB` (0 or 1: transpose the last two dimensions of A or B; not for 1-D), `alpha`,
 *   `beta` (floats, default 1), `activation` and `activation_params` (see _lower_activation.ts), `permA`, `permB`
 *   (a permutation of the stored input's axes, as Transpose's `perm`: the operand is the input transposed by it, read
 *   in place through strides; applied before `transA`/`transB`).
 * - output: Y, float32, the MatMul shape.
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
import { mergeLayout, stridesOf } from "./_lower_layout.ts";
import { ACTIVATION_ATTRIBUTES, epilogue } from "./_lower_activation.ts";

/** What a gemm call computes beyond A · B. */
export interface GemmOptions {
  /** Transpose the last two dimensions of A. */
  readonly transA: boolean;
  /** Transpose the last two dimensions of B. */
  readonly transB: boolean;
  /** Scale of A · B. */
  readonly alpha: number;
  /** Scale of C. */
  readonly beta: number;
  /** Activation code and its two parameters. */
  readonly act: readonly [number, number, number];
  /** The stored A transposed by this permutation is the operand (Transpose's `perm`). */
  readonly permA?: readonly number[];
  /** The same for B. */
  readonly permB?: readonly number[];
}

/** A matrix operand: its batch shape and strides, the two matrix dims after op(), and their strides. */
interface Operand {
  batch: number[];
  strides: number[];
  rows: number;
  cols: number;
  rowStride: number;
  colStride: number;
}

/** The operand `v` (transposed by `perm` first when given, then its last two axes swapped when `trans`). */
function operand(
  node: OpNode,
  v: OpValue,
  trans: boolean,
  vector: "row" | "column",
  perm?: readonly number[],
): Operand {
  const stored = v.shape, own = stridesOf(stored);
  if (
    perm !== undefined && (perm.length !== stored.length || [...perm].sort((x, y) => x - y).some((p, i) => p !== i))
  ) {
    throw new UnsupportedOpError(
      node,
      `perm [${perm}] is not a permutation of the ${stored.length} axes of "${v.name}"`,
    );
  }
  const s = perm === undefined ? stored : perm.map((p) => stored[p]);
  const st = perm === undefined ? own : perm.map((p) => own[p]);
  if (s.length === 0) throw new UnsupportedOpError(node, `"${v.name}" is a scalar`);
  if (s.length === 1) {
    if (trans) throw new UnsupportedOpError(node, `"${v.name}" is 1-D and cannot be transposed`);
    return vector === "row"
      ? { batch: [], strides: [], rows: 1, cols: s[0], rowStride: s[0], colStride: 1 }
      : { batch: [], strides: [], rows: s[0], cols: 1, rowStride: 1, colStride: 1 };
  }
  const r = s[s.length - 2], c = s[s.length - 1], sr = st[st.length - 2], sc = st[st.length - 1];
  return {
    batch: s.slice(0, -2),
    strides: st.slice(0, -2),
    rows: trans ? c : r,
    cols: trans ? r : c,
    rowStride: trans ? sc : sr,
    colStride: trans ? sr : sc,
  };
}

/** Batch strides (elements) of an operand broadcast to `batch`. */
function batchStrides(node: OpNode, x: Operand, batch: readonly number[]): number[] {
  const lead = batch.length - x.batch.length;
  return batch.map((n, d) => {
    if (d < lead) return 0;
    const m = x.batch[d - lead];
    if (m === n && m !== 1) return x.strides[d - lead];
    if (m === 1) return 0;
    throw new UnsupportedOpError(node, `batch shape [${x.batch}] does not broadcast to [${batch}]`);
  });
}

/** The gemm call for Y = act(alpha · op(A) · op(B) + beta · C), after checking Y's shape. */
export function gemmCall(
  node: OpNode,
  a: OpValue,
  b: OpValue,
  c: OpValue | undefined,
  y: OpValue,
  o: GemmOptions,
): KernelCall {
  const A = operand(node, a, o.transA, "row", o.permA), B = operand(node, b, o.transB, "column", o.permB);
  if (A.cols !== B.rows) throw new UnsupportedOpError(node, `inner dimensions ${A.cols} and ${B.rows} differ`);
  const m = A.rows, n = B.cols, k = A.cols;
  const rank = Math.max(A.batch.length, B.batch.length);
  const batch = Array.from({ length: rank }, (_, i) => {
    const x = A.batch[A.batch.length - rank + i] ?? 1, z = B.batch[B.batch.length - rank + i] ?? 1;
    if (x !== z && x !== 1 && z !== 1) {
      throw new UnsupportedOpError(node, `batch shapes [${A.batch}] and [${B.batch}] do not broadcast`);
    }
    return x === 1 ? z : x;
  });
  const want = [...batch, ...(a.shape.length === 1 ? [] : [m]), ...(b.shape.length === 1 ? [] : [n])];
  if (want.length !== y.shape.length || want.some((d, i) => d !== y.shape[i])) {
    throw new UnsupportedOpError(node, `output shape [${y.shape}] is not the product's shape [${want}]`);
  }
  const hasC = c !== undefined && o.beta !== 0;
  // C broadcasts to [...batch, m, n]; its own shape is matched from the right.
  let cBatch: number[] = batch.map(() => 0), sCi = 0, sCj = 0;
  if (hasC) {
    // C broadcasts to Y (numpy, matched from the right), whose shape lacks the m axis when A is 1-D and the n
    // axis when B is 1-D; those axes are then size 1 and C does not move along them.
    const cs = c.shape;
    if (cs.length > want.length) throw new UnsupportedOpError(node, `C shape [${cs}] does not broadcast to [${want}]`);
    const own = stridesOf(cs), lead = want.length - cs.length;
    const st = want.map((len, d) => {
      if (d < lead) return 0;
      const dim = cs[d - lead];
      if (dim === len && dim !== 1) return own[d - lead];
      if (dim === 1) return 0;
      throw new UnsupportedOpError(node, `C shape [${cs}] does not broadcast to [${want}]`);
    });
    cBatch = st.slice(0, rank);
    let at = rank;
    sCi = a.shape.length === 1 ? 0 : st[at++];
    sCj = b.shape.length === 1 ? 0 : st[at];
  }
  const layout = mergeLayout({
    dims: batch,
    strides: [batchStrides(node, A, batch), batchStrides(node, B, batch), cBatch],
  });
  if (layout.dims.length > 2) {
    throw new UnsupportedOpError(
      node,
      `the batch dimensions [${batch}] need ${layout.dims.length} levels, more than 2`,
    );
  }
  const two = <T>(xs: T[], one: T): T[] => (xs.length === 2 ? xs : [one, xs[0]]);
  const [b1, b2] = two(layout.dims, 1);
  const [sA1, sA2] = two(layout.strides[0], 0);
  const [sB1, sB2] = two(layout.strides[1], 0);
  const [sC1, sC2] = two(layout.strides[2], 0);
  const [act, p0, p1] = o.act;
  return call(
    "linalg",
    "gemm",
    hasC ? [a.name, b.name, c.name] : [a.name, b.name],
    [y.name],
    ints(
      b1,
      b2,
      m,
      n,
      k,
      sA1,
      sA2,
      A.rowStride,
      A.colStride,
      sB1,
      sB2,
      B.rowStride,
      B.colStride,
      hasC ? 1 : 0,
      sC1,
      sC2,
      sCi,
      sCj,
      f64Bits(o.alpha),
      f64Bits(o.beta),
      act,
      f64Bits(p0),
      f64Bits(p1),
    ),
  );
}

const matMulRule: LoweringRule = {
  domain: "",
  opType: "MatMul",
  dtypes: ["float32"],
  attributes: {},
  notes: "batch dimensions broadcast; they must merge into at most 2 levels",
  lower(node) {
    new Attributes(node, []);
    arity(node, [2, 2]);
    const a = input(node, 0), b = input(node, 1), y = output(node, 0);
    dtype(node, a, ["float32"]);
    sameDtype(node, [a, b, y]);
    return [gemmCall(node, a, b, undefined, y, { transA: false, transB: false, alpha: 1, beta: 0, act: [0, 0, 0] })];
  },
};

function flag(node: OpNode, a: Attributes, name: string): boolean {
  const v = a.int(name, 0);
  if (v !== 0 && v !== 1) throw new UnsupportedOpError(node, `${name} = ${v} is not supported`);
  return v === 1;
}

const gemmRule: LoweringRule = {
  domain: "",
  opType: "Gemm",
  dtypes: ["float32"],
  attributes: { transA: "0, 1", transB: "0, 1", alpha: "any", beta: "any" },
  notes: "A and B 2-D; C optional, broadcast to [M, N]",
  lower(node) {
    const at = new Attributes(node, ["transA", "transB", "alpha", "beta"]);
    arity(node, [2, 3]);
    const a = input(node, 0), b = input(node, 1), c = optionalInput(node, 2), y = output(node, 0);
    dtype(node, a, ["float32"]);
    sameDtype(node, c ? [a, b, c, y] : [a, b, y]);
    if (a.shape.length !== 2 || b.shape.length !== 2) throw new UnsupportedOpError(node, "A and B must be 2-D");
    return [gemmCall(node, a, b, c, y, {
      transA: flag(node, at, "transA"),
      transB: flag(node, at, "transB"),
      alpha: at.float("alpha", 1),
      beta: at.float("beta", 1),
      act: [0, 0, 0],
    })];
  },
};

const fusedGemmRule: LoweringRule = {
  domain: "nrt",
  opType: "FusedGemm",
  dtypes: ["float32"],
  attributes: {
    transA: "0, 1",
    transB: "0, 1",
    alpha: "any",
    beta: "any",
    ...ACTIVATION_ATTRIBUTES,
    permA: "a permutation of A's axes",
    permB: "a permutation of B's axes",
  },
  notes:
    "Gemm or MatMul + bias Add + activation, Transposes of A and B read in place; batched like MatMul, C broadcast to Y",
  lower(node) {
    const at = new Attributes(node, [
      "transA",
      "transB",
      "alpha",
      "beta",
      "activation",
      "activation_params",
      "permA",
      "permB",
    ]);
    arity(node, [2, 3]);
    const a = input(node, 0), b = input(node, 1), c = optionalInput(node, 2), y = output(node, 0);
    dtype(node, a, ["float32"]);
    sameDtype(node, c ? [a, b, c, y] : [a, b, y]);
    return [gemmCall(node, a, b, c, y, {
      transA: flag(node, at, "transA"),
      transB: flag(node, at, "transB"),
      alpha: at.float("alpha", 1),
      beta: at.float("beta", 1),
      act: epilogue(node, at),
      permA: at.ints("permA"),
      permB: at.ints("permB"),
    })];
  },
};

/** The linalg rules. */
export const LINALG_RULES: readonly LoweringRule[] = [matMulRule, gemmRule, fusedGemmRule];
