/**
 * Parsing: ONNX model bytes → the compiler's graph IR, through `onnx-proto` (protobufjs). The bytes are untrusted:
 * the file-size cap applies first, then the message is walked on the wire (`wire_scan.ts`: framing, node count,
 * subgraph nesting and decoded entries) before it is decoded; rank and tensor-size caps apply while reading, every
 * tensor's data length is checked against its dims, and every failure is an {@linkcode OnnxCompileError}. External
 * data, sparse tensors and strings are refused.
 * Ours: the seeds say nothing about ONNX; the caps' values are our choice.
 *
 * @module
 */
import onnxProto from "onnx-proto";
import type { onnx as Onnx } from "onnx-proto";
import type { OpDtype } from "@nrt/ops";
import { DTYPE_BYTES, dtypeFromOnnx, onnxDataTypeName } from "./dtype.ts";
import { OnnxCompileError, type OnnxErrorSite } from "./error.ts";
import type { DeclaredDim, DeclaredValue, IrAttribute, IrGraph, IrModel, IrNode } from "./graph.ts";
import { ConstTensor, shapeSize, typedView } from "./tensor.ts";
import { scanModel } from "./wire_scan.ts";

const { onnx: O } = onnxProto;

/** Caps on untrusted input. Ours. */
export interface OnnxLimits {
  /** Largest model file accepted, in bytes. Default 1 GiB. */
  readonly maxModelBytes: number;
  /** Most nodes, counting those inside subgraphs. Default 100 000. */
  readonly maxNodes: number;
  /** Deepest nesting of subgraphs (`If` branches inside `If` branches). Default 8. */
  readonly maxGraphDepth: number;
  /** Highest tensor rank. Default 8. */
  readonly maxRank: number;
  /** Largest single tensor (a constant or an inferred value), in bytes. Default 1 GiB. */
  readonly maxTensorBytes: number;
  /**
   * Most entries the decoded file may hold, counted on the wire before decoding (`wire_scan.ts`): 1 for each
   * message and each array its decoder makes, each string, each 64-bit integer; 5 for each `bytes` value. Default
   * 8 000 000: 80 per node at `maxNodes` (a 100 000-node graph with a `value_info` for every value holds 2.5 M), and
   * at most about 0.7 GB decoded, less than parsing a file at `maxModelBytes` costs.
   */
  readonly maxEntries: number;
  /**
   * Most values the decoded file may hold in repeated fields of 32-bit integers, floats and doubles (`int32_data`,
   * `float_data`, `double_data`, attribute `floats`), counted on the wire before decoding. Default 32 000 000: a
   * 128 MB tensor given as `float_data`, and at most about 0.55 GB decoded (one-byte `int32_data` values, 15–17
   * bytes each on Bun and Deno). Exporters write large tensors as `raw_data`, which this does not count.
   */
  readonly maxNumbers: number;
  /**
   * Most bytes constant folding may keep in all, over every folded result (a result sharing its input's storage,
   * such as a Reshape, adds none). Default 256 MiB: 4 results of the largest size folded by default (64 MiB), 12
   * times the largest NEFF `nrt serve` loads by default (20 MiB); the test models fold a few hundred bytes.
   */
  readonly maxFoldedBytes: number;
}

/** The default {@linkcode OnnxLimits}. */
export const DEFAULT_LIMITS: OnnxLimits = {
  maxModelBytes: 1 << 30,
  maxNodes: 100_000,
  maxGraphDepth: 8,
  maxRank: 8,
  maxTensorBytes: 1 << 30,
  maxEntries: 8_000_000,
  maxNumbers: 32_000_000,
  maxFoldedBytes: 256 << 20,
};

/** Lowest and highest default-domain opset the compiler knows the semantics of. Ours. */
export const OPSET_RANGE: readonly [number, number] = [11, 21];

type LongLike = number | { low: number; high: number; unsigned?: boolean; toNumber(): number };

/** A protobuf int64 (a `Long` or a number) as a number; large values lose precision, as attributes may. */
function num(v: LongLike | null | undefined): number {
  if (v === null || v === undefined) return 0;
  return typeof v === "number" ? v : v.toNumber();
}

/** A protobuf int64 as an exact `bigint`. */
function big(v: LongLike, unsigned: boolean): bigint {
  if (typeof v === "number") return BigInt(v);
  const b = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return unsigned ? b : BigInt.asIntN(64, b);
}

const UTF8 = new TextDecoder("utf-8", { fatal: false });

class Parser {
  readonly limits: OnnxLimits;
  nodes = 0;
  constructor(limits: OnnxLimits) {
    this.limits = limits;
  }

  fail(site: OnnxErrorSite, why: string): never {
    throw new OnnxCompileError(site, why);
  }

  /** Validates dims (safe non-negative integers, rank and byte caps). */
  dims(raw: readonly LongLike[], dtype: OpDtype, what: string, site: OnnxErrorSite): number[] {
    if (raw.length > this.limits.maxRank) {
      this.fail(site, `${what} has rank ${raw.length}, more than the limit of ${this.limits.maxRank}`);
    }
    const dims = raw.map((d) => num(d));
    for (const d of dims) {
      if (!Number.isSafeInteger(d) || d < 0) this.fail(site, `${what} has an invalid dimension ${d}`);
    }
    const bytes = shapeSize(dims) * DTYPE_BYTES[dtype];
    if (bytes > this.limits.maxTensorBytes) {
      this.fail(site, `${what} is ${bytes} bytes, more than the limit of ${this.limits.maxTensorBytes}`);
    }
    return dims;
  }

  tensor(t: Onnx.ITensorProto, site: OnnxErrorSite): ConstTensor {
    const name = t.name ? `tensor "${t.name}"` : "a tensor attribute";
    if (t.dataLocation === O.TensorProto.DataLocation.EXTERNAL || (t.externalData?.length ?? 0) > 0) {
      const loc = t.externalData?.find((e) => e.key === "location")?.value;
      this.fail(
        site,
        `${name} keeps its data in an external file${loc ? ` ("${loc}")` : ""}; external data is not supported: ` +
          `save the model with its weights inside the .onnx file`,
      );
    }
    if (t.segment) this.fail(site, `${name} is segmented; segmented tensors are not supported`);
    const code = t.dataType ?? 0;
    const dtype = dtypeFromOnnx(code);
    if (dtype === undefined) {
      this.fail(site, `${name} has element type ${onnxDataTypeName(code)}, which is not supported`);
    }
    const shape = this.dims((t.dims ?? []) as LongLike[], dtype, name, site);
    const n = shapeSize(shape);
    const want = n * DTYPE_BYTES[dtype];
    const raw = t.rawData;
    if (raw && raw.byteLength > 0) {
      if (raw.byteLength !== want) {
        this.fail(site, `${name} has ${raw.byteLength} bytes of raw_data, expected ${want} for ${dtype}[${shape}]`);
      }
      return new ConstTensor(dtype, shape, new Uint8Array(raw)); // a copy: the input buffer is the caller's
    }
    const field = typedField(dtype);
    const values = (t[field] ?? []) as ArrayLike<LongLike>;
    if (values.length !== n) {
      this.fail(site, `${name} has ${values.length} values in ${field}, expected ${n} for ${dtype}[${shape}]`);
    }
    if (dtype === "int64" || dtype === "uint64") {
      return ConstTensor.fromBigints(dtype, shape, Array.from(values, (v) => big(v, dtype === "uint64")));
    }
    if (dtype === "float16" || dtype === "bfloat16") {
      // int32_data holds the raw 16-bit patterns (onnx.proto)
      const bytes = new Uint8Array(want);
      const view = typedView(dtype, bytes) as Uint16Array;
      for (let i = 0; i < n; i++) view[i] = num(values[i]) & 0xffff;
      return new ConstTensor(dtype, shape, bytes);
    }
    return ConstTensor.fromNumbers(dtype, shape, Array.from(values, (v) => num(v)));
  }

  attribute(a: Onnx.IAttributeProto, depth: number, site: OnnxErrorSite): IrAttribute {
    const T = O.AttributeProto.AttributeType;
    const what = `attribute "${a.name}"`;
    if (a.refAttrName) {
      this.fail(site, `${what} refers to a function attribute; model-local functions are not supported`);
    }
    let type = a.type ?? T.UNDEFINED;
    if (type === T.UNDEFINED) type = inferAttributeType(a);
    switch (type) {
      case T.FLOAT:
        return a.f ?? 0;
      case T.INT:
        return num(a.i as LongLike);
      case T.STRING:
        return UTF8.decode(a.s ?? new Uint8Array());
      case T.TENSOR:
        if (!a.t) this.fail(site, `${what} is a tensor attribute without a tensor`);
        return this.tensor(a.t, site);
      case T.GRAPH:
        if (!a.g) this.fail(site, `${what} is a graph attribute without a graph`);
        return this.graph(a.g, depth + 1);
      case T.FLOATS:
        return [...(a.floats ?? [])];
      case T.INTS:
        return (a.ints ?? []).map((v) => num(v as LongLike));
      case T.STRINGS:
        return (a.strings ?? []).map((s) => UTF8.decode(s));
      default:
        return this.fail(site, `${what} has type ${T[type] ?? type}, which is not supported`);
    }
  }

  declared(v: Onnx.IValueInfoProto, kind: string): DeclaredValue {
    const site = {};
    const name = v.name ?? "";
    if (name === "") this.fail(site, `a graph ${kind} has no name`);
    const tt = v.type?.tensorType;
    if (!tt) {
      this.fail(site, `graph ${kind} "${name}" is not a tensor (sequences, maps and optionals are not supported)`);
    }
    const dtype = dtypeFromOnnx(tt.elemType ?? 0);
    if (dtype === undefined) {
      this.fail(
        site,
        `graph ${kind} "${name}" has element type ${onnxDataTypeName(tt.elemType ?? 0)}, which is not supported`,
      );
    }
    if (!tt.shape) return { name, dtype, dims: undefined };
    const dimsRaw = tt.shape.dim ?? [];
    if (dimsRaw.length > this.limits.maxRank) {
      this.fail(
        site,
        `graph ${kind} "${name}" has rank ${dimsRaw.length}, more than the limit of ${this.limits.maxRank}`,
      );
    }
    const dims: DeclaredDim[] = dimsRaw.map((d) => {
      if (d.dimParam) return d.dimParam;
      if ((d as { value?: string }).value === "dimValue") { // the decoded oneof says which field is set
        const n = num(d.dimValue as LongLike);
        if (!Number.isSafeInteger(n) || n < 0) this.fail(site, `graph ${kind} "${name}" has an invalid dimension ${n}`);
        return n;
      }
      return undefined;
    });
    return { name, dtype, dims };
  }

  graph(g: Onnx.IGraphProto, depth: number): IrGraph {
    if (depth > this.limits.maxGraphDepth) {
      this.fail({}, `subgraphs nest deeper than the limit of ${this.limits.maxGraphDepth}`);
    }
    if ((g.sparseInitializer?.length ?? 0) > 0) this.fail({}, "sparse initializers are not supported");
    const initializers = new Map<string, ConstTensor>();
    for (const t of g.initializer ?? []) {
      if (!t.name) this.fail({}, "an initializer has no name");
      if (initializers.has(t.name)) this.fail({}, `initializer "${t.name}" is defined twice`);
      initializers.set(t.name, this.tensor(t, {}));
    }
    // An input that is also an initializer is a default value (IR < 4 style): we compile it as a constant.
    const inputs = (g.input ?? []).filter((v) => !initializers.has(v.name ?? "")).map((v) => this.declared(v, "input"));
    const inputNames = new Set<string>();
    for (const v of inputs) {
      if (inputNames.has(v.name)) this.fail({}, `graph input "${v.name}" is declared twice`);
      inputNames.add(v.name);
    }
    const outputs = (g.output ?? []).map((v) => this.declared(v, "output"));
    const nodes: IrNode[] = [];
    const names = new Set<string>();
    for (const [i, n] of (g.node ?? []).entries()) {
      if (++this.nodes > this.limits.maxNodes) this.fail({}, `the model has more than ${this.limits.maxNodes} nodes`);
      const opType = n.opType ?? "";
      let domain = n.domain ?? "";
      if (domain === "ai.onnx") domain = "";
      let name = n.name || `${opType || "node"}_${i}`;
      while (names.has(name)) name = `${name}_${i}`;
      names.add(name);
      const site = { node: name, opType: domain === "" ? opType : `${domain}.${opType}` };
      if (opType === "") this.fail(site, "the node has no op type");
      // Keyed by attribute name, so without a prototype (an attribute may be called "__proto__").
      const attributes: Record<string, IrAttribute> = Object.create(null);
      for (const a of n.attribute ?? []) {
        if (!a.name) this.fail(site, "an attribute has no name");
        attributes[a.name] = this.attribute(a, depth, site);
      }
      nodes.push({
        name,
        domain,
        opType,
        attributes,
        inputs: (n.input ?? []).map((x) => (x === "" ? undefined : x)),
        outputs: [...(n.output ?? [])],
      });
    }
    return { name: g.name ?? "", nodes, inputs, outputs, initializers };
  }
}

function typedField(dtype: OpDtype): "floatData" | "int32Data" | "int64Data" | "uint64Data" | "doubleData" {
  switch (dtype) {
    case "float32":
      return "floatData";
    case "float64":
      return "doubleData";
    case "int64":
      return "int64Data";
    case "uint32":
    case "uint64":
      return "uint64Data";
    default:
      return "int32Data";
  }
}

/** IR < 3 models may leave `type` unset; pick it from the field that holds data. */
function inferAttributeType(a: Onnx.IAttributeProto): number {
  const T = O.AttributeProto.AttributeType;
  if (a.g) return T.GRAPH;
  if (a.t) return T.TENSOR;
  if ((a.floats?.length ?? 0) > 0) return T.FLOATS;
  if ((a.ints?.length ?? 0) > 0) return T.INTS;
  if ((a.strings?.length ?? 0) > 0) return T.STRINGS;
  if ((a.s?.length ?? 0) > 0) return T.STRING;
  if (a.f) return T.FLOAT;
  return T.INT;
}

/**
 * Decodes ONNX model bytes into the graph IR.
 *
 * @param bytes The `.onnx` file.
 * @param limits Caps on untrusted input.
 * @returns The model: name, default-domain opset, top-level graph.
 * @throws {OnnxCompileError} for bytes that are not a protobuf `ModelProto`, a missing graph or opset, an opset
 * outside {@linkcode OPSET_RANGE}, a cap exceeded, a tensor whose data does not match its dims, external data.
 */
export function parseModel(bytes: Uint8Array, limits: OnnxLimits = DEFAULT_LIMITS): IrModel {
  if (!(bytes instanceof Uint8Array)) throw new TypeError("Cannot parse ONNX model: bytes must be a Uint8Array");
  if (bytes.byteLength > limits.maxModelBytes) {
    throw new OnnxCompileError(
      {},
      `the file is ${bytes.byteLength} bytes, more than the limit of ${limits.maxModelBytes}`,
    );
  }
  if (bytes.byteLength === 0) throw new OnnxCompileError({}, "the file is empty");
  // The counts first: a decoded message costs up to 300 times its bytes.
  scanModel(bytes, limits);
  let model: Onnx.ModelProto;
  try {
    model = O.ModelProto.decode(bytes);
  } catch (e) {
    const why = e instanceof RangeError && /call stack/i.test(e.message)
      ? "messages nest too deeply"
      : (e as Error)?.message ?? String(e);
    throw new OnnxCompileError({}, `the bytes are not an ONNX protobuf (${why})`, e);
  }
  if (!model.graph) throw new OnnxCompileError({}, "the model has no graph");
  const opsets = model.opsetImport ?? [];
  const def = opsets.find((o) => (o.domain ?? "") === "" || o.domain === "ai.onnx");
  if (def === undefined) throw new OnnxCompileError({}, "the model imports no opset of the default ONNX domain");
  const opset = num(def.version as LongLike);
  if (opset < OPSET_RANGE[0] || opset > OPSET_RANGE[1]) {
    throw new OnnxCompileError(
      {},
      `opset ${opset} is not supported (supported: ${OPSET_RANGE[0]} to ${OPSET_RANGE[1]})`,
    );
  }
  const parser = new Parser(limits);
  let graph: IrGraph;
  try {
    graph = parser.graph(model.graph, 0);
  } catch (e) {
    if (e instanceof OnnxCompileError) throw e;
    throw new OnnxCompileError({}, `the model is malformed (${(e as Error)?.message ?? String(e)})`, e);
  }
  return { name: graph.name || model.producerName || "model", opset, graph };
}
