/**
 * Fusion where it is free (no numerics change beyond rounding order, no extra memory but the expanded γ and β below):
 * - the decomposed GELU `0.5·x·(1 + erf(x/√2))` → one `Gelu` node;
 * - `MatMul` [+ scalar `Mul`/`Div` as alpha] [+ `Add` of an operand that broadcasts to the product] [+ activation],
 *   and `Gemm` + activation → `nrt.FusedGemm`; `Conv` + activation → `nrt.FusedConv`;
 * - a `Transpose` feeding an operand of a `MatMul` or `nrt.FusedGemm` → that operand's `permA`/`permB` (the kernel
 *   reads the transposed operand in place through strides; attention's head transposes);
 * - the decomposed LayerNorm (ReduceMean, Sub, Pow 2, ReduceMean, Add ε, Sqrt, Div, Mul γ [, Add β]) →
 *   `nrt.LayerNorm`. γ and β must be constants that broadcast to the normalized shape (numpy rules, no more axes
 *   than it has); one that is neither a single value nor one per normalized element (γ [D] over axes [-2, -1]) is
 *   materialized as a new constant of the normalized shape when that takes at most {@linkcode MAX_EXPANDED_BYTES},
 *   so the run reads it per element instead of expanding it by a copy each time; past that the pattern stays unfused.
 * A pattern fuses only when its inner values feed nothing outside it and are not graph outputs. Ours.
 *
 * @module
 */
import { attrFloat, attrInt, attrInts } from "./_attrs.ts";
import { DTYPE_BYTES } from "./dtype.ts";
import { evaluateNode } from "./evaluate.ts";
import type { FoldedGraph } from "./fold.ts";
import type { IrNode } from "./graph.ts";
import type { TypedValue } from "./infer_shapes.ts";
import { ConstTensor } from "./tensor.ts";

/**
 * Largest γ or β the LayerNorm fusion materializes at the normalized shape, in bytes: 1 MiB (262,144 float32), ours.
 * Each one is a new weight the size of one normalized row of the input; past this the pattern is left unfused.
 */
export const MAX_EXPANDED_BYTES = 1 << 20;

/** What the lowering accepts, which decides what the fuser forms. */
export interface FusionTargets {
  /** Names the fused ops take in their `activation` attribute (`"Relu"`, `"Gelu"`, `"GeluTanh"`, `"Clip"`, …). */
  readonly activations: readonly string[];
  /** Whether to form `Gelu` nodes from the decomposed pattern (the lowering supports `Gelu`). */
  readonly gelu: boolean;
  /** Whether to form `nrt.FusedGemm`. */
  readonly fusedGemm: boolean;
  /** Whether to form `nrt.LayerNorm`. */
  readonly layerNorm: boolean;
  /** Whether to form `nrt.FusedConv` (Conv + activation). */
  readonly fusedConv: boolean;
  /** Whether `nrt.FusedGemm` takes `permA`/`permB`, so Transposes of its operands fuse into it. */
  readonly gemmTranspose?: boolean;
}

/** How many patterns of each kind were fused. */
export interface FusionStats {
  /** `Gelu` nodes formed from decomposed GELUs. */
  gelu: number;
  /** `nrt.FusedGemm` nodes formed. */
  fusedGemm: number;
  /** `nrt.LayerNorm` nodes formed. */
  layerNorm: number;
  /** `nrt.FusedConv` nodes formed. */
  fusedConv: number;
  /** Transposes read in place by a gemm (`permA`/`permB`). */
  transposedOperands: number;
}

class Matcher {
  readonly g: FoldedGraph;
  readonly producer = new Map<string, IrNode>();
  readonly uses = new Map<string, number>();
  readonly removed = new Set<IrNode>();
  readonly #expanded = new Map<string, string>();

  constructor(g: FoldedGraph) {
    this.g = g;
    for (const n of g.nodes) for (const o of n.outputs) this.producer.set(o, n);
    for (const n of g.nodes) {
      for (const i of n.inputs) if (i !== undefined) this.uses.set(i, (this.uses.get(i) ?? 0) + 1);
    }
    for (const o of g.outputs) this.uses.set(o, (this.uses.get(o) ?? 0) + 1);
  }

  value(name: string | undefined): TypedValue | undefined {
    return name === undefined ? undefined : this.g.values.get(name);
  }

  /** The scalar a constant input holds (any single-element constant), or `undefined`. */
  scalar(name: string | undefined): number | undefined {
    const c = this.value(name)?.constant;
    return c !== undefined && c.size === 1 ? c.numbers()[0] : undefined;
  }

  /** The producer of `name` if it is `op`, still present, and `name` has exactly `uses` uses. */
  from(name: string | undefined, op: string, uses = 1): IrNode | undefined {
    if (name === undefined) return undefined;
    const n = this.producer.get(name);
    if (n === undefined || n.opType !== op || n.domain !== "" || this.removed.has(n)) return undefined;
    return this.uses.get(name) === uses ? n : undefined;
  }

  /** The single consumer of `name` if it is `op` (and `name` is not a graph output). */
  to(name: string, op: string): IrNode | undefined {
    if (this.uses.get(name) !== 1) return undefined;
    const n = this.g.nodes.find((m) => !this.removed.has(m) && m.inputs.includes(name));
    return n !== undefined && n.opType === op && n.domain === "" ? n : undefined;
  }

  /** The other input of a binary node. */
  other(n: IrNode, name: string): string | undefined {
    return n.inputs[0] === name ? n.inputs[1] : n.inputs[0];
  }

  /** Adds the constant `t` as a new value named `base`, or `base#k` when that is taken, and returns its name. */
  addConstant(base: string, t: ConstTensor): string {
    let name = base;
    for (let k = 1; this.g.values.has(name); k++) name = `${base}#${k}`;
    this.g.values.set(name, { dtype: t.dtype, shape: t.shape, constant: t });
    return name;
  }

  /**
   * The constant `name` broadcast to `shape` (numpy rules, which the caller has checked) as a new constant
   * `<name>/expanded`, computed by the folding evaluator's `Expand`; made once per constant and shape.
   */
  expanded(name: string, shape: readonly number[]): string {
    const key = `${shape.join()}:${name}`;
    const made = this.#expanded.get(key);
    if (made !== undefined) return made;
    const c = this.value(name)!.constant!;
    const dims = ConstTensor.fromBigints("int64", [shape.length], shape.map(BigInt));
    const node: IrNode = {
      name: `${name}/expand`,
      domain: "",
      opType: "Expand",
      attributes: {},
      inputs: [name, `${name}/expand/shape`],
      outputs: [`${name}/expanded`],
    };
    const [t] = evaluateNode(node, [c, dims], [{ dtype: c.dtype, shape }])!;
    const out = this.addConstant(`${name}/expanded`, t);
    this.#expanded.set(key, out);
    return out;
  }

  /** Replaces `last` by `fused` in place and drops `rest`. */
  replace(last: IrNode, rest: readonly IrNode[], fused: IrNode): void {
    const i = this.g.nodes.indexOf(last);
    this.g.nodes[i] = fused;
    for (const n of rest) this.removed.add(n);
    for (const o of fused.outputs) this.producer.set(o, fused);
  }

  finish(): void {
    this.g.nodes = this.g.nodes.filter((n) => !this.removed.has(n));
  }
}

const near = (v: number | undefined, want: number, tol = 1e-4) =>
  v !== undefined && Math.abs(v - want) <= tol * Math.abs(want);

/** Matches the GELU ending at the Mul `last`: returns x and the pattern's nodes. */
function matchGelu(m: Matcher, last: IrNode): { x: string; nodes: IrNode[] } | undefined {
  // 1 + erf(x/√2): Add(Erf(Div(x, √2) | Mul(x, 1/√2)), 1)
  const erfSum = (name: string | undefined, x?: string) => {
    const add = m.from(name, "Add");
    if (add === undefined) return undefined;
    const e = [0, 1].map((i) => m.from(add.inputs[i], "Erf")).find((n) => n !== undefined);
    if (e === undefined || !near(m.scalar(m.other(add, e.outputs[0])), 1)) return undefined;
    const div = m.from(e.inputs[0], "Div"), mul = m.from(e.inputs[0], "Mul");
    const scaled = div !== undefined && near(m.scalar(div.inputs[1]), Math.SQRT2)
      ? { x: div.inputs[0], n: div }
      : mul !== undefined
      ? [0, 1].map((i) => ({ x: mul.inputs[i], k: m.scalar(mul.inputs[1 - i]), n: mul })).find((c) =>
        near(c.k, Math.SQRT1_2)
      )
      : undefined;
    if (scaled?.x === undefined || (x !== undefined && scaled.x !== x)) return undefined;
    return { x: scaled.x, nodes: [scaled.n, e, add] };
  };
  for (const [a, b] of [[0, 1], [1, 0]]) {
    const half = m.scalar(last.inputs[b]);
    const inner = m.from(last.inputs[a], "Mul");
    // Mul(Mul(x, S), 0.5)
    if (near(half, 0.5) && inner !== undefined) {
      for (const k of [0, 1]) {
        const s = erfSum(inner.inputs[1 - k], inner.inputs[k]);
        if (s !== undefined) return { x: s.x, nodes: [...s.nodes, inner] };
      }
    }
    // Mul(Mul(x, 0.5), S) and Mul(x, Mul(S, 0.5))
    if (inner !== undefined) {
      for (const k of [0, 1]) {
        if (!near(m.scalar(inner.inputs[1 - k]), 0.5)) continue;
        const sOuter = erfSum(last.inputs[b], inner.inputs[k]);
        if (sOuter !== undefined) return { x: sOuter.x, nodes: [...sOuter.nodes, inner] };
        const sInner = erfSum(inner.inputs[k], last.inputs[b]);
        if (sInner !== undefined) return { x: sInner.x, nodes: [...sInner.nodes, inner] };
      }
    }
  }
  return undefined;
}

/** How an ONNX activation node maps onto the fused ops' `activation` / `activation_params` attributes. */
function activationOf(m: Matcher, n: IrNode): { activation: string; activation_params?: number[] } | undefined {
  switch (n.opType) {
    case "Relu":
    case "Sigmoid":
    case "Tanh":
    case "HardSwish":
      return { activation: n.opType };
    case "LeakyRelu":
      return { activation: "LeakyRelu", activation_params: [attrFloat(n, "alpha", 0.01)] };
    case "Gelu": {
      const approximate = n.attributes.approximate ?? "none";
      return approximate === "none"
        ? { activation: "Gelu" }
        : approximate === "tanh"
        ? { activation: "GeluTanh" }
        : undefined;
    }
    case "Clip": {
      const bound = (i: number, attr: string, dflt: number) => {
        if (n.inputs[i] === undefined) return attrFloat(n, attr, dflt);
        return m.scalar(n.inputs[i]);
      };
      const lo = bound(1, "min", -Infinity), hi = bound(2, "max", Infinity);
      return lo === undefined || hi === undefined ? undefined : { activation: "Clip", activation_params: [lo, hi] };
    }
  }
  return undefined;
}

/** The activation following `out` (its single consumer), if the lowering's fused ops take it. */
function activationAfter(
  m: Matcher,
  out: string,
  targets: FusionTargets,
): { node: IrNode; attrs: Record<string, string | number[]> } | undefined {
  if (m.uses.get(out) !== 1) return undefined;
  const n = m.g.nodes.find((c) => !m.removed.has(c) && c.inputs[0] === out && c.domain === "");
  if (n === undefined || n.inputs.slice(1).includes(out)) return undefined;
  const act = activationOf(m, n);
  if (act === undefined || !targets.activations.includes(act.activation)) return undefined;
  return { node: n, attrs: act };
}

function fuseGemmsAndConvs(m: Matcher, targets: FusionTargets, stats: FusionStats): void {
  for (const n of [...m.g.nodes]) {
    if (m.removed.has(n) || n.domain !== "") continue;
    if (n.opType === "MatMul" && targets.fusedGemm) {
      const y = m.value(n.outputs[0]);
      if (y === undefined) continue;
      const absorbed: IrNode[] = [n];
      let tail = n.outputs[0], alpha = 1;
      // A scalar scale (attention's 1/√d) becomes alpha.
      const scale = m.to(tail, "Mul") ?? m.to(tail, "Div");
      const k = scale && m.scalar(m.other(scale, tail));
      // A single-element constant of higher rank than the product grows it (numpy broadcasting): not an alpha.
      const sameShape = scale !== undefined && m.value(scale.outputs[0])?.shape.join() === y.shape.join();
      if (
        scale !== undefined && k !== undefined && k !== 0 && sameShape &&
        (scale.opType === "Mul" || scale.inputs[0] === tail)
      ) {
        alpha = scale.opType === "Mul" ? k : 1 / k;
        absorbed.push(scale);
        tail = scale.outputs[0];
      }
      // C must broadcast to Y without growing it.
      const add = m.to(tail, "Add");
      const c = add && add.inputs[0] !== add.inputs[1] ? m.other(add, tail) : undefined;
      const cv = m.value(c), sum = add && m.value(add.outputs[0]);
      const withC = cv !== undefined && sum?.shape.join() === y.shape.join() && cv.shape.length <= y.shape.length;
      if (withC) {
        absorbed.push(add!);
        tail = add!.outputs[0];
      }
      const act = activationAfter(m, tail, targets);
      if (act !== undefined) absorbed.push(act.node);
      if (absorbed.length === 1) continue; // a plain MatMul stays a MatMul
      const last = absorbed.pop()!;
      m.replace(last, absorbed, {
        name: `${n.name}/fused`,
        domain: "nrt",
        opType: "FusedGemm",
        attributes: { ...(alpha === 1 ? {} : { alpha }), ...act?.attrs },
        inputs: withC ? [n.inputs[0], n.inputs[1], c] : [n.inputs[0], n.inputs[1]],
        outputs: [last.outputs[0]],
      });
      stats.fusedGemm++;
    } else if (n.opType === "Gemm" && targets.fusedGemm) {
      const act = activationAfter(m, n.outputs[0], targets);
      if (act === undefined) continue;
      m.replace(act.node, [n], {
        name: `${n.name}/fused`,
        domain: "nrt",
        opType: "FusedGemm",
        attributes: { ...n.attributes, ...act.attrs },
        inputs: [...n.inputs],
        outputs: [act.node.outputs[0]],
      });
      stats.fusedGemm++;
    } else if (n.opType === "Conv" && targets.fusedConv) {
      const act = activationAfter(m, n.outputs[0], targets);
      if (act === undefined) continue;
      m.replace(act.node, [n], {
        name: `${n.name}/fused`,
        domain: "nrt",
        opType: "FusedConv",
        attributes: { ...n.attributes, ...act.attrs },
        inputs: [...n.inputs],
        outputs: [act.node.outputs[0]],
      });
      stats.fusedConv++;
    }
  }
}

/** Transposes that only feed an operand of a MatMul or nrt.FusedGemm become its `permA`/`permB`. */
function fuseTransposedOperands(m: Matcher, stats: FusionStats): void {
  for (const n of [...m.g.nodes]) {
    const gemm = n.domain === "nrt" && n.opType === "FusedGemm";
    if (m.removed.has(n) || !(gemm || (n.domain === "" && n.opType === "MatMul"))) continue;
    const attributes = gemm ? { ...n.attributes } : {};
    const inputs = [...n.inputs], absorbed: IrNode[] = [];
    (["permA", "permB"] as const).forEach((key, i) => {
      const t = m.from(inputs[i], "Transpose");
      const x = t?.inputs[0], xv = m.value(x);
      if (t === undefined || x === undefined || xv === undefined || attributes[key] !== undefined) return;
      const perm = attrInts(t, "perm", xv.shape.map((_, d) => xv.shape.length - 1 - d));
      attributes[key] = perm;
      inputs[i] = x;
      absorbed.push(t);
    });
    if (absorbed.length === 0) continue;
    m.replace(n, absorbed, {
      name: gemm ? n.name : `${n.name}/fused`,
      domain: "nrt",
      opType: "FusedGemm",
      attributes,
      inputs,
      outputs: [...n.outputs],
    });
    stats.transposedOperands += absorbed.length;
    if (!gemm) stats.fusedGemm++;
  }
}

function fuseLayerNorms(m: Matcher, stats: FusionStats): void {
  for (const mean of [...m.g.nodes]) {
    if (m.removed.has(mean) || mean.opType !== "ReduceMean" || mean.domain !== "") continue;
    const x = mean.inputs[0], xv = m.value(x);
    if (x === undefined || xv === undefined) continue;
    const rank = xv.shape.length;
    const axesOf = (r: IrNode) => {
      const given = m.value(r.inputs[1])?.constant?.ints() ?? attrInts(r, "axes") ?? [];
      return given.map((a) => (a < 0 ? a + rank : a)).sort((p, q) => p - q);
    };
    const axes = axesOf(mean);
    if (axes.length === 0 || axes.some((a, i) => a !== rank - axes.length + i) || attrInt(mean, "keepdims", 1) !== 1) {
      continue;
    }
    const sub = m.to(mean.outputs[0], "Sub");
    if (sub === undefined || sub.inputs[0] !== x || sub.inputs[1] !== mean.outputs[0]) continue;
    const d = sub.outputs[0];
    const consumers = m.g.nodes.filter((c) => !m.removed.has(c) && c.inputs.includes(d));
    const sq = consumers.find((c) =>
      (c.opType === "Pow" && c.inputs[0] === d && near(m.scalar(c.inputs[1]), 2, 0)) ||
      (c.opType === "Mul" && c.inputs[0] === d && c.inputs[1] === d)
    );
    const div = consumers.find((c) => c.opType === "Div" && c.inputs[0] === d);
    if (sq === undefined || div === undefined || m.uses.get(d) !== (sq.opType === "Mul" ? 3 : 2)) continue;
    const varMean = m.to(sq.outputs[0], "ReduceMean");
    if (varMean === undefined || attrInt(varMean, "keepdims", 1) !== 1 || axesOf(varMean).join() !== axes.join()) {
      continue;
    }
    const addEps = m.to(varMean.outputs[0], "Add");
    const eps = addEps && m.scalar(m.other(addEps, varMean.outputs[0]));
    if (addEps === undefined || eps === undefined) continue;
    const sqrt = m.to(addEps.outputs[0], "Sqrt");
    if (sqrt === undefined || div.inputs[1] !== sqrt.outputs[0] || m.uses.get(sqrt.outputs[0]) !== 1) continue;
    const mul = m.to(div.outputs[0], "Mul");
    const normShape = xv.shape.slice(rank - axes.length);
    const normSize = normShape.reduce((p, q) => p * q, 1);
    // What the fused node is given for γ or β: one value, or one per normalized element, or `undefined` when the
    // pattern keeps that Mul or Add. A constant that broadcasts over part of the normalized axes (shape [D] or [1, D]
    // for axes [-2, -1]) is materialized at the normalized shape, up to MAX_EXPANDED_BYTES (ours); one that is not
    // constant, or that has more axes than the normalized ones (it broadcasts over the others), is not taken.
    const affine = (name: string | undefined): string | undefined => {
      const v = m.value(name);
      if (name === undefined || v?.constant === undefined || v.shape.length > axes.length) return undefined;
      const lead = normShape.length - v.shape.length;
      if (v.shape.some((s, i) => s !== 1 && s !== normShape[lead + i])) return undefined;
      if (v.constant.size === 1 || v.constant.size === normSize) return name;
      return normSize * DTYPE_BYTES[v.dtype] <= MAX_EXPANDED_BYTES ? m.expanded(name, normShape) : undefined;
    };
    const gamma = mul && affine(m.other(mul, div.outputs[0]));
    if (mul === undefined || gamma === undefined) continue;
    const add = m.to(mul.outputs[0], "Add");
    const beta = add && affine(m.other(add, mul.outputs[0]));
    const withBeta = add !== undefined && beta !== undefined;
    const last = withBeta ? add : mul;
    m.replace(last, [mean, sub, sq, varMean, addEps, sqrt, div, ...(withBeta ? [mul] : [])], {
      name: `${mean.name}/layernorm`,
      domain: "nrt",
      opType: "LayerNorm",
      attributes: { axis: rank - axes.length, epsilon: eps },
      inputs: withBeta ? [x, gamma, beta] : [x, gamma],
      outputs: [last.outputs[0]],
    });
    stats.layerNorm++;
  }
}

/**
 * Fuses the patterns `targets` allows, in place.
 *
 * @param g The folded graph (its `nodes` is replaced).
 * @param targets What the lowering accepts.
 * @returns How many of each pattern were fused.
 */
export function fuseGraph(g: FoldedGraph, targets: FusionTargets): FusionStats {
  const stats: FusionStats = { gelu: 0, fusedGemm: 0, layerNorm: 0, fusedConv: 0, transposedOperands: 0 };
  if (targets.gelu) {
    const m = new Matcher(g);
    for (const n of [...g.nodes]) {
      if (m.removed.has(n) || n.opType !== "Mul" || n.domain !== "") continue;
      const hit = matchGelu(m, n);
      if (hit === undefined) continue;
      m.replace(n, hit.nodes, {
        name: `${n.name}/gelu`,
        domain: "",
        opType: "Gelu",
        attributes: {},
        inputs: [hit.x],
        outputs: [n.outputs[0]],
      });
      stats.gelu++;
    }
    m.finish();
  }
  if (targets.layerNorm) {
    const m = new Matcher(g);
    fuseLayerNorms(m, stats);
    m.finish();
  }
  if (targets.fusedGemm || targets.fusedConv) {
    const m = new Matcher(g);
    fuseGemmsAndConvs(m, targets, stats);
    m.finish();
  }
  if (targets.fusedGemm && targets.gemmTranspose) {
    const m = new Matcher(g);
    fuseTransposedOperands(m, stats);
    m.finish();
  }
  return stats;
}
