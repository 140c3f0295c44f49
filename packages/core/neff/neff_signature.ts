/**
 * The input/output signature of a NEFF, read from `neff.json` (a TVM-style graph: `nodes`, `arg_nodes`, `heads`,
 * `node_row_ptr`, and `attrs.shape` / `attrs.dltype` indexed by entry id) and cross-checked against each
 * subgraph's `def.json` var table and `tensor_map.json` (ARCHITECTURE §5).
 *
 * @module
 */
import { asArray, asCount, asObject, asString, invalid, isObject, type JsonObject, parseJsonMember } from "./_json.ts";
import { memberDir, type SubgraphDef } from "./subgraph_def.ts";

/** One input or output tensor. */
export interface NeffTensor {
  /** The tensor name. */
  name: string;
  /** The element type as `neff.json` spells it, e.g. `float16`. */
  dtype: string;
  /** The shape. */
  shape: number[];
  /** Size in bytes: product of the shape times the element size. */
  size: number;
}

/** The inputs and outputs of a NEFF. */
export interface NeffSignature {
  /** Inputs in `arg_nodes` order. */
  inputs: NeffTensor[];
  /** Outputs in `heads` order, each name once. */
  outputs: NeffTensor[];
}

/** Element sizes in bytes of the dtypes a NEFF signature may name. */
export const DTYPE_BYTES: Readonly<Record<string, number>> = {
  bool: 1,
  int8: 1,
  uint8: 1,
  float8_e4m3: 1,
  float8_e4m3fn: 1,
  float8_e5m2: 1,
  int16: 2,
  uint16: 2,
  float16: 2,
  bfloat16: 2,
  int32: 4,
  uint32: 4,
  float32: 4,
  int64: 8,
  uint64: 8,
  float64: 8,
};

function tensorSize(name: string, dtype: string, shape: number[]): number {
  const elem = DTYPE_BYTES[dtype];
  if (elem === undefined) throw invalid(`tensor "${name}" has unsupported dtype "${dtype}"`);
  let n = elem;
  for (const d of shape) n *= d;
  if (!Number.isSafeInteger(n)) throw invalid(`tensor "${name}" is too large`);
  return n;
}

function sameShape(a: readonly unknown[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** `attrs.<key>` as `[tag, list]`, returning the list. */
function attrList(attrs: JsonObject, key: string, tag: string): unknown[] {
  const v = asArray(attrs[key], `neff.json attrs.${key}`);
  if (v.length !== 2 || v[0] !== tag) throw invalid(`neff.json attrs.${key} is not a ["${tag}", [...]] pair`);
  return asArray(v[1], `neff.json attrs.${key}[1]`);
}

type MapCache = Map<string, JsonObject | undefined>;

/** A subgraph's `tensor_map.json`, parsed once; undefined when the subgraph has none. */
function tensorMap(
  def: SubgraphDef,
  members: ReadonlyMap<string, Uint8Array>,
  cache: MapCache,
): JsonObject | undefined {
  const name = `${memberDir(def.member)}tensor_map.json`;
  if (!cache.has(name)) {
    cache.set(name, members.has(name) ? asObject(parseJsonMember(members, name, "tensor map"), name) : undefined);
  }
  return cache.get(name);
}

function crossCheck(
  t: NeffTensor,
  kind: "input" | "output",
  defs: readonly SubgraphDef[],
  members: ReadonlyMap<string, Uint8Array>,
  cache: MapCache,
): void {
  let found = false;
  for (const def of defs) {
    const v = def.vars.find((x) => x.name === t.name && x.type === kind);
    if (v !== undefined) {
      found = true;
      if (v.size !== undefined && v.size !== t.size) {
        throw invalid(`${kind} "${t.name}" is ${t.size} bytes in neff.json but ${v.size} bytes in ${def.member}`);
      }
    }
    const map = tensorMap(def, members, cache);
    if (map === undefined) continue;
    const mapName = `${memberDir(def.member)}tensor_map.json`;
    const entry = map[t.name];
    if (!isObject(entry) || entry.kind !== kind) continue;
    if (entry.dtype !== t.dtype) {
      throw invalid(`${kind} "${t.name}" is ${t.dtype} in neff.json but ${String(entry.dtype)} in ${mapName}`);
    }
    if (Array.isArray(entry.tf_shape) && !sameShape(entry.tf_shape, t.shape)) {
      throw invalid(`${kind} "${t.name}" has shape [${t.shape}] in neff.json but [${entry.tf_shape}] in ${mapName}`);
    }
  }
  if (!found && defs.length > 0) {
    throw invalid(`${kind} "${t.name}" of neff.json is not an ${kind} var of any subgraph`);
  }
}

/**
 * Reads the signature from `neff.json` and cross-checks it with the subgraph definitions.
 *
 * @param members The NEFF members.
 * @param defs The parsed subgraph definitions.
 * @returns Inputs and outputs with dtype, shape and byte size.
 * @throws {NrtError} `NRT_INVALID` for a malformed or inconsistent signature.
 *
 * @example List the inputs
 * ```ts
 * import { readNeffSignature } from "./neff_signature.ts";
 * import { readNeff } from "./neff_file.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const bytes = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * const members = readNeff(bytes).members;
 * for (const t of readNeffSignature(members, []).inputs) console.log(t.name, t.dtype, t.shape);
 * ```
 */
export function readNeffSignature(
  members: ReadonlyMap<string, Uint8Array>,
  defs: readonly SubgraphDef[],
): NeffSignature {
  const g = asObject(parseJsonMember(members, "neff.json", "graph signature"), "neff.json");
  const nodes = asArray(g.nodes, "neff.json nodes").map((n, i) => asObject(n, `neff.json nodes[${i}]`));
  const rowPtr = asArray(g.node_row_ptr, "neff.json node_row_ptr").map((v, i) =>
    asCount(v, `neff.json node_row_ptr[${i}]`)
  );
  if (rowPtr.length !== nodes.length + 1) {
    throw invalid("neff.json node_row_ptr does not have one entry per node plus one");
  }
  const attrs = asObject(g.attrs, "neff.json attrs");
  const shapes = attrList(attrs, "shape", "list_shape");
  const dtypes = attrList(attrs, "dltype", "list_str");
  const entry = (nid: number, index: number, where: string): NeffTensor => {
    if (nid >= nodes.length) throw invalid(`${where} refers to node ${nid}, but there are ${nodes.length}`);
    const node = nodes[nid];
    const eid = rowPtr[nid] + index;
    if (eid >= rowPtr[nid + 1] || eid >= shapes.length || eid >= dtypes.length) {
      throw invalid(`${where} refers to output ${index} of node ${nid}, which has no shape or dtype`);
    }
    const names = node.output_names === undefined
      ? []
      : asArray(node.output_names, `neff.json nodes[${nid}] output_names`);
    const name = asString(names[index] ?? node.name, `neff.json nodes[${nid}] name`);
    const shape = asArray(shapes[eid], `neff.json attrs.shape[${eid}]`).map((d, i) =>
      asCount(d, `neff.json attrs.shape[${eid}][${i}]`)
    );
    const dtype = asString(dtypes[eid], `neff.json attrs.dltype[${eid}]`);
    return { name, dtype, shape, size: tensorSize(name, dtype, shape) };
  };
  const inputs = asArray(g.arg_nodes, "neff.json arg_nodes").map((n, i) =>
    entry(asCount(n, `neff.json arg_nodes[${i}]`), 0, `neff.json arg_nodes[${i}]`)
  );
  const outputs: NeffTensor[] = [];
  asArray(g.heads, "neff.json heads").forEach((h, i) => {
    const w = `neff.json heads[${i}]`;
    const head = asArray(h, w);
    const t = entry(asCount(head[0], `${w}[0]`), asCount(head[1], `${w}[1]`), w);
    // An LNC-2 NEFF lists each output once per logical core under the same name; keep one, if they agree.
    const prev = outputs.find((o) => o.name === t.name);
    if (prev === undefined) outputs.push(t);
    else if (prev.dtype !== t.dtype || !sameShape(prev.shape, t.shape)) {
      throw invalid(`${w} redefines output "${t.name}" with another dtype or shape`);
    }
  });
  const seen = new Set<string>();
  for (const t of inputs) {
    if (seen.has(t.name)) throw invalid(`neff.json names input "${t.name}" twice`);
    seen.add(t.name);
  }
  const sig = isObject(g.metadata) && isObject(g.metadata.signatures) && isObject(g.metadata.signatures.default)
    ? g.metadata.signatures.default
    : undefined;
  if (sig !== undefined && isObject(sig.inputs)) {
    for (const t of inputs) {
      const s = sig.inputs[t.name];
      if (isObject(s) && (s.dtype !== t.dtype || (Array.isArray(s.shape) && !sameShape(s.shape, t.shape)))) {
        throw invalid(`input "${t.name}" disagrees with neff.json metadata.signatures`);
      }
    }
  }
  const cache: MapCache = new Map();
  for (const t of inputs) crossCheck(t, "input", defs, members, cache);
  for (const t of outputs) crossCheck(t, "output", defs, members, cache);
  for (const def of defs) {
    for (const v of def.vars) {
      const list = v.type === "input" ? inputs : v.type === "output" ? outputs : undefined;
      if (list !== undefined && !list.some((t) => t.name === v.name)) {
        throw invalid(`${v.type} var "${v.name}" of ${def.member} is not in the neff.json signature`);
      }
    }
  }
  return { inputs, outputs };
}
