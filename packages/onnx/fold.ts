/**
 * Resolution, shape inference and constant folding in one pass over the graph in topological order:
 * - graph inputs get static shapes (declared dims, or the user's `inputShapes` for dynamic ones);
 * - `Constant` nodes, `If` with a constant condition (the taken branch is inlined), `Shape`/`Size` of any value
 *   (shapes are static) and every node whose inputs are all constants are evaluated in TypeScript;
 * - every other node gets its outputs' dtypes and shapes from its shape rule; a zero-size part of a Split (the ONNX
 *   spec allows `split` [0, 3, 1]) becomes an empty constant and leaves the node, which keeps the other parts
 *   (kernels refuse empty tensors);
 * - nodes nothing needs are dropped.
 * Folding is bounded twice: a result larger than `maxFoldBytes` stays a runtime op, and the results kept in all may
 * not pass `limits.maxFoldedBytes` (checked from the inferred shapes before a node is evaluated: 16 `ConstantOfShape`
 * nodes of 64 MiB each, an 877-byte file, made 4 GB before there was a total).
 * Ours.
 *
 * @module
 */
import { RuleError } from "./_attrs.ts";
import { DTYPE_BYTES } from "./dtype.ts";
import { OnnxCompileError } from "./error.ts";
import { constantValue, evaluateNode, evaluateShape } from "./evaluate.ts";
import { type DeclaredValue, type IrGraph, type IrModel, type IrNode, qualifiedOp } from "./graph.ts";
import { hasShapeRule, inferNode, type TypedValue } from "./infer_shapes.ts";
import type { OnnxLimits } from "./parse.ts";
import { ConstTensor, shapeSize } from "./tensor.ts";

/** A runtime input with its resolved shape. */
export interface ResolvedInput {
  /** Name. */
  readonly name: string;
  /** Element type. */
  readonly dtype: TypedValue["dtype"];
  /** Static shape. */
  readonly shape: readonly number[];
}

/** The graph after folding: only runtime nodes remain, and every value has a static type. */
export interface FoldedGraph {
  /** Model name. */
  readonly name: string;
  /** Default-domain opset. */
  readonly opset: number;
  /** Runtime inputs. */
  readonly inputs: readonly ResolvedInput[];
  /** Output value names, in the model's order. */
  readonly outputs: readonly string[];
  /** Nodes left to lower, in topological order. */
  nodes: IrNode[];
  /** Every value's dtype, shape and (for constants) data. */
  readonly values: Map<string, TypedValue>;
  /** Counts for reports and tests. */
  readonly stats: { folded: number; inlinedIfs: number; dead: number };
}

/** What the pass needs besides the model. */
export interface FoldOptions {
  /** Sizes for graph inputs' dynamic dims (the `--input-shape NAME=DIMS` flag), by input name. */
  readonly inputShapes: Readonly<Record<string, readonly number[]>>;
  /** Caps. */
  readonly limits: OnnxLimits;
  /** The lowering's supported ops, for the message when an op is unknown. */
  readonly supportedOps: readonly string[];
  /** Largest constant that folding may create, in bytes. */
  readonly maxFoldBytes: number;
}

/** The message for an op the compiler cannot handle. */
export function unsupportedOpError(node: IrNode, supportedOps: readonly string[], why?: string): OnnxCompileError {
  const op = qualifiedOp(node);
  return new OnnxCompileError(
    { node: node.name, opType: op },
    `${why ?? `op ${op} is not supported`}; supported ops: ${supportedOps.join(", ")}`,
  );
}

function resolveInput(v: DeclaredValue, given: readonly number[] | undefined): ResolvedInput {
  const site = {};
  const flag = (dims: readonly (string | number)[]) => `--input-shape ${v.name}=${dims.join(",")}`;
  if (given !== undefined) {
    if (!Array.isArray(given) || given.some((d) => !Number.isSafeInteger(d) || d < 1)) {
      throw new OnnxCompileError(
        site,
        `the shape given for input "${v.name}" must be positive integers, got [${given}]`,
      );
    }
    if (v.dims !== undefined) {
      if (v.dims.length !== given.length) {
        throw new OnnxCompileError(
          site,
          `input "${v.name}" has rank ${v.dims.length}, but the given shape [${given}] has rank ${given.length}`,
        );
      }
      v.dims.forEach((d, i) => {
        if (typeof d === "number" && d !== given[i]) {
          throw new OnnxCompileError(
            site,
            `input "${v.name}" has dim ${i} fixed at ${d}, but the given shape says ${given[i]}`,
          );
        }
      });
    }
    return { name: v.name, dtype: v.dtype, shape: [...given] };
  }
  if (v.dims === undefined) {
    throw new OnnxCompileError(site, `input "${v.name}" declares no shape: give it with ${flag(["DIMS"])}`);
  }
  const dyn = v.dims.findIndex((d) => typeof d !== "number");
  if (dyn >= 0) {
    const d = v.dims[dyn];
    const what = typeof d === "string" ? `dim ${dyn} ("${d}")` : `dim ${dyn}`;
    throw new OnnxCompileError(
      site,
      `input "${v.name}" has a dynamic ${what}: give its size with ${
        flag(v.dims.map((x) => (typeof x === "number" ? x : "N")))
      }`,
    );
  }
  return { name: v.name, dtype: v.dtype, shape: v.dims as number[] };
}

/** Orders nodes so every input is defined before use (stable: the model's order where it already is). */
function topoSort(nodes: readonly IrNode[], defined: ReadonlySet<string>, deps: (n: IrNode) => string[]): IrNode[] {
  const producer = new Map<string, IrNode>();
  for (const n of nodes) {
    for (const o of n.outputs) {
      if (o === "") continue;
      if (producer.has(o) || defined.has(o)) {
        throw new OnnxCompileError({ node: n.name, opType: qualifiedOp(n) }, `value "${o}" is defined more than once`);
      }
      producer.set(o, n);
    }
  }
  const order: IrNode[] = [], state = new Map<IrNode, 1 | 2>();
  for (const root of nodes) {
    if (state.has(root)) continue;
    const stack: [IrNode, number][] = [[root, 0]];
    state.set(root, 1);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const [n, i] = top;
      const ins = deps(n);
      if (i < ins.length) {
        top[1]++;
        const p = producer.get(ins[i]);
        if (p === undefined) continue;
        const s = state.get(p);
        if (s === 1) throw new OnnxCompileError({ node: p.name, opType: qualifiedOp(p) }, "the graph has a cycle");
        if (s === undefined) {
          state.set(p, 1);
          stack.push([p, 0]);
        }
        continue;
      }
      state.set(n, 2);
      order.push(n);
      stack.pop();
    }
  }
  return order;
}

/** Names every value a subgraph's nodes use from the enclosing scope (for ordering the `If` node after them). */
function outerUses(g: IrGraph): string[] {
  const local = new Set<string>([...g.initializers.keys(), ...g.inputs.map((v) => v.name)]);
  const uses: string[] = [];
  for (const n of g.nodes) {
    for (const i of n.inputs) if (i !== undefined && !local.has(i)) uses.push(i);
    for (const a of Object.values(n.attributes)) if (isGraph(a)) uses.push(...outerUses(a));
    n.outputs.forEach((o) => local.add(o));
  }
  for (const o of g.outputs) if (!local.has(o.name)) uses.push(o.name);
  return uses;
}

function isGraph(a: unknown): a is IrGraph {
  return typeof a === "object" && a !== null && "nodes" in a && "initializers" in a;
}

class Folder {
  readonly values = new Map<string, TypedValue>();
  readonly runtime: IrNode[] = [];
  readonly stats = { folded: 0, inlinedIfs: 0, dead: 0 };
  /** Every name the top-level graph defines: inlined branch values must not take one. */
  readonly reserved = new Set<string>();
  readonly opset: number;
  readonly options: FoldOptions;
  /** Bytes of new storage the folded results kept so far hold (a result sharing an input's bytes adds none). */
  keptBytes = 0;
  #fresh = 0;

  constructor(opset: number, options: FoldOptions) {
    this.opset = opset;
    this.options = options;
  }

  /** Processes a graph's nodes (the top level or an inlined branch). */
  run(nodes: readonly IrNode[]): void {
    const deps = (n: IrNode) => [...n.inputs.filter((i): i is string => i !== undefined), ...ifOuterInputs(n)];
    for (const n of topoSort(nodes, new Set(this.values.keys()), deps)) this.node(n);
  }

  node(n: IrNode): void {
    const site = { node: n.name, opType: qualifiedOp(n) };
    try {
      if (n.domain !== "") throw unsupportedOpError(n, this.options.supportedOps);
      if (n.opType === "Constant") return this.define(n, [constantValue(n)]);
      if (n.opType === "If") return this.inlineIf(n);
      const ins = n.inputs.map((name, i) => {
        if (name === undefined) return undefined;
        const v = this.values.get(name);
        if (v === undefined) {
          throw new OnnxCompileError(site, `input ${i} "${name}" is not produced by any node, initializer or input`);
        }
        return v;
      });
      if (!hasShapeRule(n.opType)) throw unsupportedOpError(n, this.options.supportedOps);
      if (n.opType === "Concat" && ins.some((v) => v !== undefined && shapeSize(v.shape) > 0)) {
        // Empty pieces add nothing, and kernels refuse empty tensors.
        const keep = ins.map((v) => v === undefined || shapeSize(v.shape) > 0);
        n.inputs = n.inputs.filter((_, i) => keep[i]);
        ins.splice(0, ins.length, ...ins.filter((_, i) => keep[i]));
      }
      let outs = inferNode(n, ins, { opset: this.opset });
      const empty = (o: TypedValue) => shapeSize(o.shape) === 0;
      if (outs.length > 0 && outs.every(empty)) {
        // An empty result is known without running anything: a constant with no data.
        return this.define(n, outs.map((o) => new ConstTensor(o.dtype, o.shape, new Uint8Array(0))));
      }
      if (n.opType === "Split" && outs.some(empty)) {
        // Zero-size parts are empty constants; the others still partition the axis in order.
        n.outputs.forEach((name, i) => {
          const o = outs[i];
          if (name !== "" && empty(o)) {
            this.values.set(name, { ...o, constant: new ConstTensor(o.dtype, o.shape, new Uint8Array(0)) });
          }
        });
        n.outputs = n.outputs.filter((_, i) => !empty(outs[i]));
        outs = outs.filter((o) => !empty(o));
      }
      for (const [i, o] of outs.entries()) {
        const bytes = shapeSize(o.shape) * DTYPE_BYTES[o.dtype];
        if (bytes > this.options.limits.maxTensorBytes) {
          throw new OnnxCompileError(
            site,
            `output ${i} [${o.shape}] is ${bytes} bytes, more than the limit of ${this.options.limits.maxTensorBytes}`,
          );
        }
      }
      const shapeOnly = n.opType === "Shape" || n.opType === "Size";
      const allConst = ins.every((v) => v === undefined || v.constant !== undefined);
      const small = outs.every((o) => shapeSize(o.shape) * DTYPE_BYTES[o.dtype] <= this.options.maxFoldBytes);
      if ((shapeOnly || allConst) && small) {
        const bytes = outs.reduce((a, o) => a + shapeSize(o.shape) * DTYPE_BYTES[o.dtype], 0);
        const most = this.options.limits.maxFoldedBytes;
        if (this.keptBytes + bytes > most) {
          throw new OnnxCompileError(
            site,
            `folding it would keep ${this.keptBytes + bytes} bytes of folded constants in all, more than the limit ` +
              `of ${most} (maxFoldedBytes)`,
          );
        }
        const folded = shapeOnly
          ? [evaluateShape(n, ins[0]!.shape, outs[0])]
          : evaluateNode(n, ins.map((v) => v?.constant), outs);
        if (folded !== undefined) {
          const inputStorage = new Set(ins.map((v) => v?.constant?.bytes.buffer));
          for (const t of folded) if (!inputStorage.has(t.bytes.buffer)) this.keptBytes += t.bytes.byteLength;
          return this.define(n, folded);
        }
      }
      n.outputs.forEach((name, i) => {
        if (name !== "" && outs[i] !== undefined) this.values.set(name, { dtype: outs[i].dtype, shape: outs[i].shape });
      });
      this.runtime.push(n);
    } catch (e) {
      if (e instanceof OnnxCompileError) throw e;
      if (e instanceof RuleError || e instanceof RangeError) throw new OnnxCompileError(site, e.message, e);
      throw new OnnxCompileError(site, `internal error: ${(e as Error)?.message ?? e}`, e);
    }
  }

  define(n: IrNode, outs: readonly ConstTensor[]): void {
    this.stats.folded++;
    n.outputs.forEach((name, i) => {
      if (name !== "" && outs[i] !== undefined) {
        this.values.set(name, { dtype: outs[i].dtype, shape: outs[i].shape, constant: outs[i] });
      }
    });
  }

  inlineIf(n: IrNode): void {
    const cond = n.inputs[0] === undefined ? undefined : this.values.get(n.inputs[0]);
    if (cond?.constant === undefined) {
      throw unsupportedOpError(
        n,
        this.options.supportedOps,
        "If is supported only when its condition is known at compile time",
      );
    }
    const taken = cond.constant.numbers()[0] !== 0 ? "then_branch" : "else_branch";
    const branch = n.attributes[taken];
    if (!isGraph(branch)) throw new OnnxCompileError({ node: n.name, opType: "If" }, `attribute ${taken} is missing`);
    if (branch.outputs.length !== n.outputs.length) {
      throw new OnnxCompileError(
        { node: n.name, opType: "If" },
        `${taken} has ${branch.outputs.length} outputs, the node ${n.outputs.length}`,
      );
    }
    this.stats.inlinedIfs++;
    // Branch-local names may repeat names of the enclosing graph or of the other branch: rename them.
    const rename = new Map<string, string>();
    // The names `rename` maps to, as a set: searching its values for every name made inlining quadratic.
    const renamedTo = new Set<string>();
    const local = (name: string) => {
      let fresh = name;
      while (this.values.has(fresh) || this.reserved.has(fresh) || renamedTo.has(fresh)) {
        fresh = `${n.name}/${name}_${this.#fresh++}`;
      }
      rename.set(name, fresh);
      renamedTo.add(fresh);
      return fresh;
    };
    for (const [name, t] of branch.initializers) {
      this.values.set(local(name), { dtype: t.dtype, shape: t.shape, constant: t });
    }
    const nodes = branch.nodes.map((b) => ({
      ...b,
      name: `${n.name}/${b.name}`,
      outputs: b.outputs.map((o) => (o === "" ? o : local(o))),
    }));
    // Names are unique across scopes (ONNX forbids shadowing), so the renaming applies to nested branches too.
    this.run(nodes.map((b) => renamed(b, rename)));
    branch.outputs.forEach((o, i) => {
      const v = this.values.get(rename.get(o.name) ?? o.name);
      if (v === undefined) {
        throw new OnnxCompileError({ node: n.name, opType: "If" }, `branch output "${o.name}" is never produced`);
      }
      const inner = rename.get(o.name) ?? o.name;
      if (v.constant !== undefined) this.values.set(n.outputs[i], v);
      else {this.node({
          name: `${n.name}/output_${i}`,
          domain: "",
          opType: "Identity",
          attributes: {},
          inputs: [inner],
          outputs: [n.outputs[i]],
        });}
    });
  }
}

/** A node with its inputs (and those of nodes in its subgraphs) renamed. */
function renamed(n: IrNode, rename: ReadonlyMap<string, string>): IrNode {
  const attributes = Object.fromEntries(
    Object.entries(n.attributes).map(([k, a]) => {
      if (!isGraph(a)) return [k, a];
      return [k, {
        ...a,
        nodes: a.nodes.map((m) => renamed(m, rename)),
        outputs: a.outputs.map((o) => ({ ...o, name: rename.get(o.name) ?? o.name })),
      }];
    }),
  );
  return { ...n, attributes, inputs: n.inputs.map((i) => (i === undefined ? i : rename.get(i) ?? i)) };
}

/** Outer-scope values an `If` node's branches read: extra dependencies for ordering. */
function ifOuterInputs(n: IrNode): string[] {
  if (n.opType !== "If" || n.domain !== "") return [];
  return Object.values(n.attributes).filter(isGraph).flatMap(outerUses);
}

/**
 * Resolves input shapes, inlines constant `If`s, folds constants and infers every remaining value's type.
 *
 * @param model The parsed model.
 * @param options Input shapes, caps, the supported-op list for messages.
 * @returns The runtime nodes and the typed value table.
 * @throws {OnnxCompileError} for an unresolved dynamic dim, an op without a shape rule, a shape that does not fit
 * its op, a parameter input that is not a compile-time constant, or an `If` on a runtime condition.
 */
export function foldGraph(model: IrModel, options: FoldOptions): FoldedGraph {
  const g = model.graph;
  const known = new Set(g.inputs.map((v) => v.name));
  for (const name of Object.keys(options.inputShapes)) {
    if (!known.has(name)) {
      throw new OnnxCompileError(
        {},
        `--input-shape names "${name}", which is not an input (inputs: ${[...known].join(", ") || "none"})`,
      );
    }
  }
  const folder = new Folder(model.opset, options);
  for (const [name, t] of g.initializers) folder.values.set(name, { dtype: t.dtype, shape: t.shape, constant: t });
  // Own properties only: an input called "constructor" must not find Object.prototype's.
  const inputs = g.inputs.map((v) =>
    resolveInput(v, Object.hasOwn(options.inputShapes, v.name) ? options.inputShapes[v.name] : undefined)
  );
  for (const v of inputs) folder.values.set(v.name, { dtype: v.dtype, shape: v.shape });
  for (const n of g.nodes) for (const o of n.outputs) folder.reserved.add(o);
  folder.run(g.nodes);
  const outputs = g.outputs.map((o) => o.name);
  for (const o of g.outputs) {
    const v = folder.values.get(o.name);
    if (v === undefined) throw new OnnxCompileError({}, `graph output "${o.name}" is never produced`);
    if (v.dtype !== o.dtype) {
      throw new OnnxCompileError({}, `graph output "${o.name}" is declared ${o.dtype} but computes as ${v.dtype}`);
    }
  }
  // Dead-node elimination, backwards from the outputs.
  const needed = new Set(outputs);
  const live: IrNode[] = [];
  for (const n of [...folder.runtime].reverse()) {
    if (!n.outputs.some((o) => needed.has(o))) {
      folder.stats.dead++;
      continue;
    }
    live.push(n);
    for (const i of n.inputs) if (i !== undefined) needed.add(i);
  }
  return {
    name: model.name,
    opset: model.opset,
    inputs,
    outputs,
    nodes: live.reverse(),
    values: folder.values,
    stats: folder.stats,
  };
}
