/**
 * `OnnxBuilder`: writes ONNX models in code (through `onnx-proto`), for tests and examples. Values are referred to
 * by name; node outputs get fresh names unless given. Ours.
 *
 * @module
 */
import onnxProto from "onnx-proto";
import type { onnx as Onnx } from "onnx-proto";
import type { OpDtype } from "@nrt/ops";
import { dtypeToOnnx } from "./dtype.ts";
import { ConstTensor } from "./tensor.ts";

const { onnx: O } = onnxProto;

/** Marks a number or list as a FLOAT(S) attribute even when its values are integers. */
export class FloatAttr {
  /** The value. */
  readonly value: number | readonly number[];
  /** Wraps the value. */
  constructor(value: number | readonly number[]) {
    this.value = value;
  }
}

/** Forces a FLOAT(S) attribute: `{ alpha: float(1) }`. */
export function float(value: number | readonly number[]): FloatAttr {
  return new FloatAttr(value);
}

/**
 * An attribute value: integers are INT(S), other numbers FLOAT(S) (or use {@linkcode float}), strings STRING(S),
 * a tensor TENSOR, a subgraph GRAPH.
 */
export type BuilderAttribute =
  | number
  | readonly number[]
  | string
  | readonly string[]
  | FloatAttr
  | ConstTensor
  | SubGraph;

/** A finished subgraph (an `If` branch), from {@linkcode OnnxBuilder.subgraph}. */
export class SubGraph {
  /**
   * The graph message (an `onnx-proto` type: not part of this package's documented surface).
   *
   * @ignore
   */
  readonly proto: Onnx.IGraphProto;
  /**
   * Wraps a graph message.
   *
   * @ignore
   */
  constructor(proto: Onnx.IGraphProto) {
    this.proto = proto;
  }
}

/** Options of {@linkcode OnnxBuilder.node}. */
export interface NodeOptions {
  /** Node name; default `"<op>_<n>"`. */
  readonly name?: string;
  /** Domain; default the ONNX domain. */
  readonly domain?: string;
  /** Output names, or how many fresh ones to make (default 1). */
  readonly outputs?: readonly string[] | number;
}

/** A dim of a declared input or output: a size, a symbolic name, or `null` for unknown. */
export type BuilderDim = number | string | null;

function tensorProto(name: string, t: ConstTensor): Onnx.ITensorProto {
  return { name, dataType: dtypeToOnnx(t.dtype), dims: [...t.shape], rawData: t.bytes };
}

function valueInfo(name: string, dtype: OpDtype, dims: readonly BuilderDim[] | undefined): Onnx.IValueInfoProto {
  const shape = dims === undefined ? undefined : {
    dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : typeof d === "string" ? { dimParam: d } : {})),
  };
  return { name, type: { tensorType: { elemType: dtypeToOnnx(dtype), shape } } };
}

function attributeProto(name: string, v: BuilderAttribute): Onnx.IAttributeProto {
  const T = O.AttributeProto.AttributeType;
  if (v instanceof FloatAttr) {
    return Array.isArray(v.value)
      ? { name, type: T.FLOATS, floats: [...(v.value as number[])] }
      : { name, type: T.FLOAT, f: v.value as number };
  }
  if (v instanceof ConstTensor) return { name, type: T.TENSOR, t: tensorProto("", v) };
  if (v instanceof SubGraph) return { name, type: T.GRAPH, g: v.proto };
  if (typeof v === "number") return Number.isInteger(v) ? { name, type: T.INT, i: v } : { name, type: T.FLOAT, f: v };
  if (typeof v === "string") return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  const list = v as readonly (number | string)[];
  if (list.every((x) => typeof x === "string")) {
    return { name, type: T.STRINGS, strings: list.map((s) => new TextEncoder().encode(s as string)) };
  }
  const nums = list as readonly number[];
  return nums.every(Number.isInteger)
    ? { name, type: T.INTS, ints: [...nums] }
    : { name, type: T.FLOATS, floats: [...nums] };
}

/** Encodes a model message (for tests that need a model the builder would not write). */
export function encodeModel(model: Onnx.IModelProto): Uint8Array {
  // protobufjs may hand back a Node Buffer (whose slice() is a view): return a plain Uint8Array.
  return new Uint8Array(O.ModelProto.encode(O.ModelProto.create(model)).finish());
}

/**
 * Builds one graph; {@linkcode OnnxBuilder.toBytes} wraps it into a model.
 *
 * @example A one-node model
 * ```ts
 * import { OnnxBuilder } from "@nrt/onnx";
 * const b = new OnnxBuilder("relu");
 * const x = b.input("x", "float32", [2, 3]);
 * b.output(b.node("Relu", [x]), "float32", [2, 3]);
 * const bytes = b.toBytes();
 * ```
 */
export class OnnxBuilder {
  /** Graph name. */
  readonly name: string;
  /** Default-domain opset the model imports. */
  readonly opset: number;
  readonly #nodes: Onnx.INodeProto[] = [];
  readonly #inputs: Onnx.IValueInfoProto[] = [];
  readonly #outputs: Onnx.IValueInfoProto[] = [];
  readonly #initializers: Onnx.ITensorProto[] = [];
  readonly #prefix: string;
  #count = 0;

  /** Starts a graph; `opset` defaults to 17. */
  constructor(name: string, opset = 17, prefix = "") {
    this.name = name;
    this.opset = opset;
    this.#prefix = prefix;
  }

  /** A fresh value name. */
  fresh(hint: string): string {
    return `${this.#prefix}${hint}_${this.#count++}`;
  }

  /** Declares a graph input and returns its name. */
  input(name: string, dtype: OpDtype, dims: readonly BuilderDim[] | undefined): string {
    this.#inputs.push(valueInfo(name, dtype, dims));
    return name;
  }

  /** Declares a graph output (an existing value). */
  output(name: string, dtype: OpDtype, dims?: readonly BuilderDim[]): string {
    this.#outputs.push(valueInfo(name, dtype, dims));
    return name;
  }

  /** Adds an initializer and returns its name. */
  initializer(name: string, t: ConstTensor): string {
    this.#initializers.push(tensorProto(name, t));
    return name;
  }

  /** Adds a float32 initializer from numbers. */
  weight(name: string, shape: readonly number[], values: ArrayLike<number>): string {
    return this.initializer(name, ConstTensor.fromNumbers("float32", shape, values));
  }

  /** Adds an int64 initializer from numbers. */
  ints(name: string, values: readonly number[], shape: readonly number[] = [values.length]): string {
    return this.initializer(name, ConstTensor.fromNumbers("int64", shape, values));
  }

  /** Adds a `Constant` node holding `t` and returns its output. */
  constant(t: ConstTensor, name?: string): string {
    return this.node("Constant", [], { value: t }, { outputs: name === undefined ? 1 : [name] });
  }

  /**
   * Adds a node and returns its single output's name (use {@linkcode OnnxBuilder.nodeN} for several).
   * Pass `""` in `inputs` for an omitted optional input.
   */
  node(
    op: string,
    inputs: readonly string[],
    attributes: Record<string, BuilderAttribute> = {},
    options: NodeOptions = {},
  ): string {
    return this.nodeN(op, inputs, attributes, options)[0];
  }

  /** Adds a node and returns all its outputs' names. */
  nodeN(
    op: string,
    inputs: readonly string[],
    attributes: Record<string, BuilderAttribute> = {},
    options: NodeOptions = {},
  ): string[] {
    const n = this.#count++;
    const outs = options.outputs ?? 1;
    const outputs = typeof outs === "number"
      ? Array.from({ length: outs }, (_, i) => `${this.#prefix}${op}_${n}_${i}`)
      : [...outs];
    this.#nodes.push({
      name: options.name ?? `${this.#prefix}${op}_${n}`,
      opType: op,
      domain: options.domain ?? "",
      input: [...inputs],
      output: outputs,
      attribute: Object.entries(attributes).map(([k, v]) => attributeProto(k, v)),
    });
    return outputs;
  }

  /** Builds a subgraph (an `If` branch) with its own nodes; `fill` declares its outputs. */
  subgraph(name: string, fill: (b: OnnxBuilder) => void): SubGraph {
    const b = new OnnxBuilder(name, this.opset, `${this.#prefix}${name}/`);
    fill(b);
    return new SubGraph(b.graphProto());
  }

  /**
   * The graph message (an `onnx-proto` type: not part of this package's documented surface).
   *
   * @ignore
   */
  graphProto(): Onnx.IGraphProto {
    return {
      name: this.name,
      node: this.#nodes,
      input: this.#inputs,
      output: this.#outputs,
      initializer: this.#initializers,
    };
  }

  /**
   * The model message, IR version 8 (an `onnx-proto` type: not part of this package's documented surface).
   *
   * @ignore
   */
  modelProto(): Onnx.IModelProto {
    return {
      irVersion: 8,
      producerName: "nrt-onnx-builder",
      opsetImport: [{ domain: "", version: this.opset }],
      graph: this.graphProto(),
    };
  }

  /** The `.onnx` file bytes. */
  toBytes(): Uint8Array {
    return encodeModel(this.modelProto());
  }
}
