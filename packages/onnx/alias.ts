/**
 * Aliasing: `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Identity` and inference-mode `Dropout` change only
 * how a row-major buffer is described, so their output shares their input's storage and no kernel runs. Values
 * joined this way form a storage group; a group may hold at most one fixed storage (a graph input or a graph
 * output, which the caller owns), so a view between two fixed storages stays a node and is lowered as a copy.
 * Ours.
 *
 * @module
 */
import type { FoldedGraph } from "./fold.ts";
import type { IrNode } from "./graph.ts";

/** The ops that only re-describe a buffer. */
export const ALIAS_OPS: ReadonlySet<string> = new Set([
  "Reshape",
  "Flatten",
  "Squeeze",
  "Unsqueeze",
  "Identity",
  "Dropout",
]);

/** The result: each aliased value's storage root, and how many nodes became aliases. */
export interface AliasResult {
  /** Value → the value whose storage it shares (the group's root). Values not in the map are their own root. */
  readonly rootOf: ReadonlyMap<string, string>;
  /** Nodes turned into aliases (removed from the graph). */
  readonly aliased: number;
}

/**
 * Turns view ops into aliases, in place (`g.nodes` loses them).
 *
 * @param g The folded (and fused) graph.
 * @returns The storage root of every aliased value.
 */
export function aliasViews(g: FoldedGraph): AliasResult {
  const parent = new Map<string, string>();
  const find = (v: string): string => {
    let r = v;
    while (parent.has(r)) r = parent.get(r)!;
    return r;
  };
  const inputs = new Set(g.inputs.map((v) => v.name)), outputs = new Set(g.outputs);
  const fixed = new Map<string, string>(); // group root → its fixed member
  for (const v of [...inputs, ...outputs]) fixed.set(v, v);
  const consumed = new Set(g.nodes.flatMap((n) => n.inputs.filter((i): i is string => i !== undefined)));
  const keep: IrNode[] = [];
  let aliased = 0;
  for (const n of g.nodes) {
    const src = n.inputs[0], dst = n.outputs[0];
    const usedOutputs = n.outputs.filter((o, i) => o !== "" && (i === 0 || consumed.has(o) || outputs.has(o)));
    const view = n.domain === "" && ALIAS_OPS.has(n.opType) && src !== undefined && usedOutputs.length === 1 &&
      g.values.get(src)?.constant === undefined;
    if (!view) {
      keep.push(n);
      continue;
    }
    const a = find(src), b = find(dst);
    const fa = fixed.get(a), fb = fixed.get(b);
    if (fa !== undefined && fb !== undefined) {
      keep.push(n); // input → output, or output → output: the caller's two tensors need a real copy
      continue;
    }
    // The root is the fixed member if any, else the source's root (produced first).
    const [root, other] = fb !== undefined ? [b, a] : [a, b];
    parent.set(other, root);
    if (fa !== undefined || fb !== undefined) fixed.set(root, (fa ?? fb)!);
    aliased++;
  }
  g.nodes = keep;
  const rootOf = new Map<string, string>();
  for (const v of parent.keys()) rootOf.set(v, find(v));
  return { rootOf, aliased };
}
