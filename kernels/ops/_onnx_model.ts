/**
 * ONNX models for the op library's tests and benchmark (private): typed attributes, seeded or random input
 * values, single- and multi-node models as onnx-proto bytes, onnxruntime-web (one thread) feeds and runs, and the
 * OpValues and decoded attributes of the same inputs for {@linkcode OpNode}s. Ours.
 *
 * @module
 */
import * as ort from "onnxruntime-web";
import onnx from "onnx-proto";
import type { OpAttribute, OpDtype, OpValue } from "./op_node.ts";

const { onnx: O } = onnx;
ort.env.wasm.numThreads = 1;
ort.env.logLevel = "error";

/**
 * The Web `Worker` the device simulator starts its agents with. onnxruntime-web's Emscripten module, on the Node
 * path Bun and Deno take, assigns `node:worker_threads`' `Worker` to `globalThis.Worker` when its first session
 * loads; a runtime initialised after that in the same process (a test file that runs later) would hang.
 */
const WEB_WORKER = globalThis.Worker;

/** An onnxruntime-web session (1 thread, wasm) that leaves `globalThis.Worker` as it found it. */
export async function ortSession(model: Uint8Array): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(model);
  } finally {
    globalThis.Worker = WEB_WORKER;
  }
}

/** A typed attribute, as ONNX stores it. */
export type Attr = { f: number } | { i: number } | { s: string } | { ints: number[] } | { floats: number[] };

/** One input tensor of a case. */
export interface TensorSpec {
  /** Name. */
  readonly name: string;
  /** Element type; float32 by default. */
  readonly dtype?: OpDtype;
  /** Shape. */
  readonly shape: readonly number[];
  /** Values; random from the case's seed when absent. */
  readonly data?: ArrayLike<number | bigint>;
  /** An initializer in the ONNX model and an `OpValue.constant` in the node. */
  readonly constant?: boolean;
  /** Range of random float values (default [-1, 1)) or integers (default [-5, 5]). */
  readonly range?: readonly [number, number];
}

/** One node of a reference ONNX graph. */
export interface OnnxNode {
  readonly opType: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes?: Readonly<Record<string, Attr>>;
}

const ONNX_TYPES: Readonly<Record<string, number>> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
};

/** The typed array of each dtype. */
export const TYPED: Readonly<Record<string, { new (n: number): ArrayBufferView & ArrayLike<number | bigint> }>> = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

/** Our dtype of each onnxruntime tensor type. */
export const BY_ORT_TYPE: Readonly<Record<string, OpDtype>> = {
  float32: "float32",
  float64: "float64",
  int8: "int8",
  uint8: "uint8",
  int16: "int16",
  uint16: "uint16",
  int32: "int32",
  uint32: "uint32",
  int64: "int64",
  uint64: "uint64",
  bool: "bool",
};

/** The values of one input, as a typed array. */
export function makeData(spec: TensorSpec, random: () => number): ArrayBufferView & ArrayLike<number | bigint> {
  const t = spec.dtype ?? "float32";
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const out = new TYPED[t](n) as unknown as { [i: number]: number | bigint; length: number };
  const big = t === "int64" || t === "uint64";
  for (let i = 0; i < n; i++) {
    let v: number;
    if (spec.data) v = Number(spec.data[i]);
    else if (t === "float32" || t === "float64") {
      const [lo, hi] = spec.range ?? [-1, 1];
      v = lo + (hi - lo) * random();
    } else if (t === "bool") v = random() < 0.5 ? 1 : 0;
    else {
      const [lo, hi] = spec.range ?? [-5, 5];
      v = lo + Math.floor((hi - lo + 1) * random());
    }
    out[i] = big ? BigInt(v) : v;
  }
  return out as unknown as ArrayBufferView & ArrayLike<number | bigint>;
}

function bytesOf(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength).slice();
}

function attributeProto(name: string, a: Attr): onnx.onnx.IAttributeProto {
  const T = O.AttributeProto.AttributeType;
  if ("f" in a) return { name, type: T.FLOAT, f: a.f };
  if ("i" in a) return { name, type: T.INT, i: a.i };
  if ("s" in a) return { name, type: T.STRING, s: new TextEncoder().encode(a.s) };
  if ("ints" in a) return { name, type: T.INTS, ints: a.ints };
  return { name, type: T.FLOATS, floats: a.floats };
}

/** The decoded attribute of an OpNode (float attributes are float32 values, as ONNX stores them). */
export function decoded(a: Attr): OpAttribute {
  if ("f" in a) return Math.fround(a.f);
  if ("i" in a) return a.i;
  if ("s" in a) return a.s;
  if ("ints" in a) return a.ints;
  return a.floats.map(Math.fround);
}

/** The bytes of an ONNX model of `nodes`; `inputs` become graph inputs or, when constant, initializers. */
export function onnxModel(
  nodes: readonly OnnxNode[],
  inputs: ReadonlyArray<{ spec: TensorSpec; data: ArrayBufferView }>,
  outputs: readonly string[],
  opset = 21,
): Uint8Array {
  const valueInfo = (name: string, dtype: OpDtype, shape: readonly number[]) => ({
    name,
    type: { tensorType: { elemType: ONNX_TYPES[dtype], shape: { dim: shape.map((d) => ({ dimValue: d })) } } },
  });
  const graph = {
    name: "case",
    node: nodes.map((n) => ({
      opType: n.opType,
      input: [...n.inputs],
      output: [...n.outputs],
      attribute: Object.entries(n.attributes ?? {}).map(([k, v]) => attributeProto(k, v)),
    })),
    initializer: inputs.filter((i) => i.spec.constant).map((i) => ({
      name: i.spec.name,
      dims: [...i.spec.shape],
      dataType: ONNX_TYPES[i.spec.dtype ?? "float32"],
      rawData: bytesOf(i.data),
    })),
    input: inputs.filter((i) => !i.spec.constant).map((i) =>
      valueInfo(i.spec.name, i.spec.dtype ?? "float32", i.spec.shape)
    ),
    output: outputs.map((name) => ({ name })),
  };
  const irVersion = opset >= 21 ? 10 : opset >= 19 ? 9 : 8;
  return O.ModelProto.encode({ irVersion, opsetImport: [{ domain: "", version: opset }], graph }).finish();
}

/** onnxruntime feeds for the non-constant inputs. */
export function ortFeeds(
  inputs: ReadonlyArray<{ spec: TensorSpec; data: ArrayBufferView }>,
): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const i of inputs) {
    if (i.spec.constant) continue;
    const t = (i.spec.dtype ?? "float32") as ort.Tensor.Type;
    feeds[i.spec.name] = new ort.Tensor(t, i.data as never, [...i.spec.shape]);
  }
  return feeds;
}

/** Runs a graph of `nodes` in onnxruntime-web; `inputs` become graph inputs or initializers. */
export async function runOrt(
  nodes: readonly OnnxNode[],
  inputs: ReadonlyArray<{ spec: TensorSpec; data: ArrayBufferView }>,
  outputs: readonly string[],
  opset = 21,
): Promise<Record<string, ort.Tensor>> {
  const session = await ortSession(onnxModel(nodes, inputs, outputs, opset));
  try {
    return await session.run(ortFeeds(inputs));
  } finally {
    await session.release();
  }
}

/** The OpValue of an input spec (with its bytes when constant). */
export function opValue(spec: TensorSpec, data: ArrayBufferView): OpValue {
  return {
    name: spec.name,
    dtype: spec.dtype ?? "float32",
    shape: [...spec.shape],
    ...(spec.constant ? { constant: bytesOf(data) } : {}),
  };
}

/** Shorthands for typed attributes. */
export const attr = {
  f: (f: number): Attr => ({ f }),
  i: (i: number): Attr => ({ i }),
  s: (s: string): Attr => ({ s }),
  ints: (ints: number[]): Attr => ({ ints }),
  floats: (floats: number[]): Attr => ({ floats }),
};
