/**
 * The compiler's graph IR: what `parse.ts` makes of an ONNX `ModelProto` and the later passes (folding, fusion,
 * aliasing, lowering) rewrite. Plain mutable data. Ours.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";
import type { ConstTensor } from "./tensor.ts";

/** One dimension as declared in the model: a size, a symbolic name (`"batch"`), or unknown (`undefined`). */
export type DeclaredDim = number | string | undefined;

/** A graph input or output as declared in the model. */
export interface DeclaredValue {
  /** Value name. */
  readonly name: string;
  /** Element type. */
  readonly dtype: OpDtype;
  /** Declared dims; `undefined` when the model gives no shape at all. */
  readonly dims: readonly DeclaredDim[] | undefined;
}

/** A decoded attribute: numbers (ints and floats alike), strings, lists of them, a tensor, or a subgraph. */
export type IrAttribute = number | string | number[] | string[] | ConstTensor | IrGraph;

/** One node. Inputs name values; `undefined` is an omitted optional input (an empty name in ONNX). */
export interface IrNode {
  /** Unique name (synthesized as `"<opType>_<index>"` when the model leaves it empty). */
  name: string;
  /** `""` for ONNX ops (`"ai.onnx"` is folded into it), `"nrt"` for fused ops. */
  domain: string;
  /** Op type. */
  opType: string;
  /** Decoded attributes. */
  attributes: Record<string, IrAttribute>;
  /** Input value names. */
  inputs: (string | undefined)[];
  /** Output value names (an omitted optional output is dropped from the end or kept as `""`). */
  outputs: string[];
}

/** A graph or subgraph (an `If` branch). */
export interface IrGraph {
  /** Graph name. */
  name: string;
  /** Nodes in the model's order. */
  nodes: IrNode[];
  /** Runtime inputs (initializers that are also listed as inputs are constants and not here). */
  inputs: DeclaredValue[];
  /** Outputs. */
  outputs: DeclaredValue[];
  /** Initializers by name. */
  initializers: Map<string, ConstTensor>;
}

/** A parsed model. */
export interface IrModel {
  /** `graph.name`, or the producer's name when the graph has none. */
  name: string;
  /** Opset version of the default ONNX domain. */
  opset: number;
  /** The top-level graph. */
  graph: IrGraph;
}

/** `domain.opType` for messages (`"Conv"`, `"nrt.FusedGemm"`). */
export function qualifiedOp(node: { readonly domain: string; readonly opType: string }): string {
  return node.domain === "" ? node.opType : `${node.domain}.${node.opType}`;
}
