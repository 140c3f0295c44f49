/**
 * Lowering: each node left after folding, fusion and aliasing becomes kernel calls through the op library's
 * `lowerNode` (the contract in `kernels/ops/op_node.ts`). An op outside `SUPPORTED_OPS`, or an attribute, dtype
 * or rank the rule refuses, is an {@linkcode OnnxCompileError} naming the node, the op and what is supported.
 * Ours.
 *
 * @module
 */
import { type KernelCall, type OpAttribute, type OpNode, type OpValue, UnsupportedOpError } from "@nrt/ops";
import { OnnxCompileError } from "./error.ts";
import { unsupportedOpError } from "./fold.ts";
import type { FoldedGraph } from "./fold.ts";
import { type IrAttribute, type IrNode, qualifiedOp } from "./graph.ts";
import { ConstTensor } from "./tensor.ts";

/** The op library as the compiler uses it: its lowering rule and the ops it supports. */
export interface Lowering {
  /** Turns one node into kernel calls (`kernels/ops/lowering.ts`). */
  readonly lowerNode: (node: OpNode) => KernelCall[];
  /** Qualified op types it supports (`"Conv"`, `"nrt.FusedGemm"`). */
  readonly supportedOps: readonly string[];
  /**
   * Names the fused ops (`nrt.FusedGemm`, `nrt.FusedConv`) accept in their `activation` attribute (`"Relu"`,
   * `"Gelu"`, `"GeluTanh"`, `"Clip"`, …); no activation is fused when absent.
   */
  readonly fusedActivations?: readonly string[];
  /** Whether `nrt.FusedGemm` takes `permA`/`permB` (operands transposed in place), so Transposes fuse into it. */
  readonly fusedGemmPermutes?: boolean;
  /** What each op supports (dtypes, attributes, notes), appended to the message when a node is refused. */
  readonly opDetails?: Readonly<Record<string, string>>;
  /**
   * The estimated work of a call (multiply-adds or elements touched, `kernels/ops/_work.ts`); with it the compiler
   * runs calls below `compileOnnx`'s `spmdMinWork` on one core.
   */
  readonly callWork?: (call: KernelCall, elementsOf: (name: string) => number) => number;
}

/** A kernel call with the node it came from. */
export interface LoweredCall extends KernelCall {
  /** Node name. */
  readonly node: string;
  /** Qualified op type. */
  readonly opType: string;
}

/** The lowered graph. */
export interface LoweredGraph {
  /** Calls in order. */
  readonly calls: readonly LoweredCall[];
  /** Scratch values the calls introduced, by (unique) name. */
  readonly scratch: ReadonlyMap<string, OpValue>;
}

function opAttribute(node: IrNode, name: string, a: IrAttribute): OpAttribute {
  if (a instanceof ConstTensor) return a.toOpValue(`${node.name}/${name}`);
  if (typeof a === "object" && !Array.isArray(a)) {
    throw new OnnxCompileError(
      { node: node.name, opType: qualifiedOp(node) },
      `attribute "${name}" is a subgraph, which cannot be lowered`,
    );
  }
  return a as OpAttribute;
}

/**
 * The contract's view of a node: every input and output with dtype, shape and (for constants) bytes, and the
 * model's default-domain opset (which the Softmax family's semantics depend on).
 */
export function toOpNode(g: FoldedGraph, n: IrNode, opset: number): OpNode {
  const value = (name: string): OpValue => {
    const v = g.values.get(name);
    if (v === undefined) {
      throw new OnnxCompileError({ node: n.name, opType: qualifiedOp(n) }, `value "${name}" has no type`);
    }
    return v.constant !== undefined ? v.constant.toOpValue(name) : { name, dtype: v.dtype, shape: v.shape };
  };
  if (n.domain !== "" && n.domain !== "nrt") {
    throw new OnnxCompileError({ node: n.name, opType: qualifiedOp(n) }, "unknown domain");
  }
  return {
    name: n.name,
    domain: n.domain,
    opType: n.opType,
    attributes: Object.fromEntries(Object.entries(n.attributes).map(([k, a]) => [k, opAttribute(n, k, a)])),
    inputs: n.inputs.map((i) => (i === undefined ? undefined : value(i))),
    // An omitted optional output keeps its position as a value with an empty name; trailing ones are dropped.
    outputs: n.outputs.slice(0, n.outputs.findLastIndex((o) => o !== "") + 1)
      .map((o) => (o === "" ? { name: "", dtype: "float32", shape: [] } : value(o))),
    opset,
  };
}

function checkCall(site: { node: string; opType: string }, call: KernelCall, known: ReadonlySet<string>): void {
  const bad = (why: string) => new OnnxCompileError(site, `the lowering returned an invalid call: ${why}`);
  if (typeof call.library !== "string" || call.library === "" || typeof call.fn !== "string" || call.fn === "") {
    throw bad("library and fn must be non-empty strings");
  }
  if (call.totalCpus !== 1 && call.totalCpus !== 8) throw bad(`totalCpus is ${call.totalCpus}, expected 1 or 8`);
  for (const name of [...call.inputs, ...call.outputs]) {
    if (!known.has(name)) {
      throw bad(
        `${call.library}.${call.fn} names "${name}", which is not an input, output or scratch value of the node`,
      );
    }
  }
  if (call.ints.some((i) => typeof i !== "bigint")) {
    throw bad(`${call.library}.${call.fn} has an int that is not a bigint`);
  }
}

/**
 * Lowers every node of the graph.
 *
 * @param g The graph after folding, fusion and aliasing.
 * @param lowering The op library.
 * @param opset The model's default-domain opset.
 * @returns The calls in order and the scratch values they use.
 * @throws {OnnxCompileError} for an unsupported op (with the supported list), a node the rule refuses, or a rule
 * that returns a malformed call.
 */
export function lowerGraph(g: FoldedGraph, lowering: Lowering, opset: number): LoweredGraph {
  const supported = new Set(lowering.supportedOps);
  const calls: LoweredCall[] = [];
  const scratch = new Map<string, OpValue>();
  for (const n of g.nodes) {
    const opType = qualifiedOp(n);
    const site = { node: n.name, opType };
    if (!supported.has(opType)) throw unsupportedOpError(n, lowering.supportedOps);
    const node = toOpNode(g, n, opset);
    let lowered: KernelCall[];
    try {
      lowered = lowering.lowerNode(node);
    } catch (e) {
      if (e instanceof UnsupportedOpError) {
        const why = e.message.replace(/^Cannot lower node "[^"]*" \([^)]*\): /, "");
        const details = lowering.opDetails?.[opType];
        throw new OnnxCompileError(site, details === undefined ? why : `${why}; ${opType} supports ${details}`, e);
      }
      throw new OnnxCompileError(site, `the lowering failed: ${(e as Error)?.message ?? e}`, e);
    }
    // Scratch names are the rule's; make them unique across the graph.
    const rename = new Map<string, string>();
    for (const call of lowered) {
      for (const s of call.scratch ?? []) {
        if (rename.has(s.name)) continue;
        let name = s.name;
        for (let k = 0; g.values.has(name) || scratch.has(name); k++) {
          name = `${n.name}/${s.name}${k === 0 ? "" : `_${k}`}`;
        }
        rename.set(s.name, name);
        scratch.set(name, { ...s, name });
      }
    }
    const known = new Set([
      ...node.inputs.flatMap((v) => (v === undefined ? [] : [v.name])),
      ...node.outputs.map((v) => v.name),
      ...rename.keys(),
    ]);
    for (const call of lowered) {
      checkCall(site, call, known);
      const r = (x: string) => rename.get(x) ?? x;
      calls.push({
        node: n.name,
        opType,
        library: call.library,
        fn: call.fn,
        totalCpus: call.totalCpus,
        inputs: call.inputs.map(r),
        outputs: call.outputs.map(r),
        ints: [...call.ints],
        scratch: call.scratch?.map((s) => scratch.get(rename.get(s.name)!)!),
      });
    }
  }
  return { calls, scratch };
}
