/**
 * Helpers of the lowering rules: the rule type, attribute readers that reject what they do not know, input and
 * dtype checks, constant readers, the integer encoding of kernel arguments and the SBUF check. Ours.
 *
 * @module
 */
import { KernelDtype } from "@nrt/core/isa";
import {
  type KernelCall,
  type OpAttribute,
  type OpDtype,
  type OpNode,
  type OpValue,
  UnsupportedOpError,
} from "./op_node.ts";
import { sizeOf } from "./_lower_layout.ts";

/** The SBUF of the smallest NeuronCore generation: a call's inputs and outputs must fit in it. */
export const SBUF_BYTES: number = 24 << 20;

/** Bytes per element of each dtype. */
export const ELEMENT_BYTES: Readonly<Record<OpDtype, number>> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float64: 8,
  int8: 1,
  uint8: 1,
  int16: 2,
  uint16: 2,
  int32: 4,
  uint32: 4,
  int64: 8,
  uint64: 8,
  bool: 1,
};

/** Descriptor dtype codes (docs/kernel-abi.md), used by the cast kernel: the one table of `@nrt/core/isa`. */
export const DTYPE_CODE: Readonly<Record<OpDtype, number>> = KernelDtype;

/** The IEEE-754 float64 bit pattern of `x` as a signed 64-bit integer: how floats travel in `ints`. */
export function f64Bits(x: number): bigint {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x, true);
  return view.getBigInt64(0, true);
}

/** Kernel `ints` from numbers and bigints. */
export function ints(...xs: ReadonlyArray<number | bigint>): bigint[] {
  return xs.map((x) => (typeof x === "bigint" ? x : BigInt(x)));
}

/** Reads a node's attributes, rejecting unknown names and wrongly typed values. */
export class Attributes {
  readonly #node: OpNode;

  /** Checks that every attribute of `node` is one of `known`. */
  constructor(node: OpNode, known: readonly string[]) {
    this.#node = node;
    for (const name of Object.keys(node.attributes)) {
      if (!known.includes(name)) throw new UnsupportedOpError(node, `attribute "${name}" is not supported`);
    }
  }

  #get(name: string): OpAttribute | undefined {
    return this.#node.attributes[name];
  }

  /** True when the attribute is present. */
  has(name: string): boolean {
    return this.#get(name) !== undefined;
  }

  /** An integer attribute. */
  int(name: string, fallback: number): number {
    const v = this.#get(name);
    if (v === undefined) return fallback;
    if (typeof v !== "number" || !Number.isInteger(v)) throw this.#bad(name, "an integer");
    return v;
  }

  /** A float attribute. */
  float(name: string, fallback: number): number {
    const v = this.#get(name);
    if (v === undefined) return fallback;
    if (typeof v !== "number") throw this.#bad(name, "a number");
    return v;
  }

  /** A string attribute. */
  string(name: string, fallback: string): string {
    const v = this.#get(name);
    if (v === undefined) return fallback;
    if (typeof v !== "string") throw this.#bad(name, "a string");
    return v;
  }

  /** An integer list attribute (undefined when absent and no fallback is given). */
  ints(name: string): number[] | undefined;
  ints(name: string, fallback: readonly number[]): number[];
  ints(name: string, fallback?: readonly number[]): number[] | undefined {
    const v = this.#get(name);
    if (v === undefined) return fallback && [...fallback];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number" && Number.isInteger(x))) {
      throw this.#bad(name, "a list of integers");
    }
    return [...v] as number[];
  }

  /** A float list attribute (undefined when absent). */
  floats(name: string): number[] | undefined {
    const v = this.#get(name);
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number")) throw this.#bad(name, "a list of numbers");
    return [...v] as number[];
  }

  #bad(name: string, what: string): UnsupportedOpError {
    return new UnsupportedOpError(this.#node, `attribute "${name}" must be ${what}`);
  }
}

/** Input `i`, which must be present. */
export function input(node: OpNode, i: number): OpValue {
  const v = node.inputs[i];
  if (!v) throw new UnsupportedOpError(node, `input ${i} is required`);
  return v;
}

/** Input `i` if present (an omitted optional input, or one with an empty name, is absent). */
export function optionalInput(node: OpNode, i: number): OpValue | undefined {
  const v = node.inputs[i];
  return v && v.name !== "" ? v : undefined;
}

/** Output `i`, which must be present. */
export function output(node: OpNode, i: number): OpValue {
  const v = node.outputs[i];
  if (!v) throw new UnsupportedOpError(node, `output ${i} is required`);
  return v;
}

/** Checks the number of inputs and outputs. */
export function arity(node: OpNode, inputs: [number, number], outputs: [number, number] = [1, 1]): void {
  const nIn = node.inputs.length, nOut = node.outputs.length;
  if (nIn < inputs[0] || nIn > inputs[1]) {
    throw new UnsupportedOpError(node, `${nIn} inputs, expected ${inputs[0]}..${inputs[1]}`);
  }
  if (nOut < outputs[0] || nOut > outputs[1]) {
    const what = outputs[1] < nOut ? `output ${outputs[1]} and later outputs are` : `${nOut} outputs are`;
    throw new UnsupportedOpError(node, `${what} not supported`);
  }
}

/** Checks a value's dtype against the supported list. */
export function dtype(node: OpNode, v: OpValue, allowed: readonly OpDtype[]): OpDtype {
  if (!allowed.includes(v.dtype)) {
    throw new UnsupportedOpError(
      node,
      `dtype ${v.dtype} of "${v.name}" is not supported (supported: ${allowed.join(", ")})`,
    );
  }
  return v.dtype;
}

/** Checks that every value has the same dtype as the first. */
export function sameDtype(node: OpNode, values: readonly OpValue[]): void {
  for (const v of values) {
    if (v.dtype !== values[0].dtype) {
      throw new UnsupportedOpError(node, `"${v.name}" is ${v.dtype} but "${values[0].name}" is ${values[0].dtype}`);
    }
  }
}

/** Checks two shapes are equal. */
export function sameShape(node: OpNode, a: OpValue, b: OpValue): void {
  if (a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) {
    throw new UnsupportedOpError(node, `"${a.name}" has shape [${a.shape}] but "${b.name}" has [${b.shape}]`);
  }
}

/** The integers of a constant int64 or int32 tensor (the compiler must have folded it). */
export function constantInts(node: OpNode, v: OpValue, what: string): number[] {
  if (!v.constant) throw new UnsupportedOpError(node, `${what} ("${v.name}") must be a constant`);
  const view = new DataView(v.constant.buffer, v.constant.byteOffset, v.constant.byteLength);
  const n = sizeOf(v.shape);
  if (v.dtype === "int64") return Array.from({ length: n }, (_, i) => Number(view.getBigInt64(8 * i, true)));
  if (v.dtype === "int32") return Array.from({ length: n }, (_, i) => view.getInt32(4 * i, true));
  throw new UnsupportedOpError(node, `${what} ("${v.name}") must be int64 or int32, not ${v.dtype}`);
}

/** The numbers of a constant float32/float64 (or integer) tensor. */
export function constantNumbers(node: OpNode, v: OpValue, what: string): number[] {
  if (!v.constant) throw new UnsupportedOpError(node, `${what} ("${v.name}") must be a constant`);
  const view = new DataView(v.constant.buffer, v.constant.byteOffset, v.constant.byteLength);
  const n = sizeOf(v.shape);
  if (v.dtype === "float32") return Array.from({ length: n }, (_, i) => view.getFloat32(4 * i, true));
  if (v.dtype === "float64") return Array.from({ length: n }, (_, i) => view.getFloat64(8 * i, true));
  if (v.dtype === "bool") return Array.from({ length: n }, (_, i) => view.getUint8(i));
  return constantInts(node, v, what);
}

/** The raw little-endian bits of element 0 of a constant, as a signed 64-bit integer (for pad values). */
export function constantBits(node: OpNode, v: OpValue, what: string): bigint {
  if (!v.constant) throw new UnsupportedOpError(node, `${what} ("${v.name}") must be a constant`);
  const bytes = new Uint8Array(8);
  bytes.set(v.constant.subarray(0, ELEMENT_BYTES[v.dtype]));
  return new DataView(bytes.buffer).getBigInt64(0, true);
}

/** Normalizes a possibly negative axis against `rank`. */
export function axisOf(node: OpNode, axis: number, rank: number, what = "axis"): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!(a >= 0 && a < rank)) throw new UnsupportedOpError(node, `${what} ${axis} is out of range for rank ${rank}`);
  return a;
}

/** Bytes a call needs in SBUF: each distinct input and output (and scratch) once, 64-byte aligned. */
export function callBytes(call: KernelCall, values: ReadonlyMap<string, OpValue>): number {
  let total = 0;
  for (const name of new Set([...call.inputs, ...call.outputs])) {
    const v = values.get(name);
    if (v) total += Math.ceil((sizeOf(v.shape) * ELEMENT_BYTES[v.dtype]) / 64) * 64;
  }
  return total;
}

/**
 * Checks every call against the SBUF budget and the ABI's limits (32 inputs, 32 outputs, 64 ints), and that no
 * value is empty; returns the calls.
 */
export function checked(node: OpNode, calls: KernelCall[], sbufBytes: number): KernelCall[] {
  const values = new Map<string, OpValue>();
  for (const v of [...node.inputs, ...node.outputs]) if (v) values.set(v.name, v);
  for (const c of calls) for (const v of c.scratch ?? []) values.set(v.name, v);
  for (const c of calls) {
    if (c.inputs.length > 32 || c.outputs.length > 32 || c.ints.length > 64) {
      throw new UnsupportedOpError(node, `${c.library}.${c.fn} would take more than 32 tensors or 64 ints`);
    }
    const bytes = callBytes(c, values);
    if (bytes > sbufBytes) {
      throw new UnsupportedOpError(
        node,
        `${c.library}.${c.fn} needs ${bytes} bytes of SBUF for its inputs and outputs, more than ${sbufBytes}`,
      );
    }
  }
  return calls;
}

/** Builds a kernel call over all 8 cores. */
export function call(
  library: string,
  fn: string,
  inputs: readonly string[],
  outputs: readonly string[],
  args: readonly bigint[],
  extra: { totalCpus?: 1 | 8; scratch?: readonly OpValue[] } = {},
): KernelCall {
  return {
    library,
    fn,
    totalCpus: extra.totalCpus ?? 8,
    inputs,
    outputs,
    ints: args,
    ...(extra.scratch ? { scratch: extra.scratch } : {}),
  };
}

/** A plain byte copy of `from` into `to` (same byte size). */
export function copyCall(from: OpValue, to: OpValue): KernelCall {
  return call("shape", "copy", [from.name], [to.name], ints(sizeOf(to.shape) * ELEMENT_BYTES[to.dtype]));
}

/**
 * Rejects empty tensors (no kernel is needed for them, and the compiler should have removed them). A constant input
 * may be empty: it is a parameter the rule reads at compile time (Squeeze's or a Reduce's `axes`, Expand's `shape`),
 * where an empty list has a meaning of its own, and a call never reads it; an empty result is still refused.
 */
export function nonEmpty(node: OpNode): void {
  for (const v of [...node.inputs.filter((v) => v?.constant === undefined), ...node.outputs]) {
    if (v && v.shape.some((d) => d === 0)) {
      throw new UnsupportedOpError(node, `"${v.name}" is empty (shape [${v.shape}])`);
    }
  }
}

/** One lowering rule: an op with what it supports, and the function that lowers it. */
export interface LoweringRule {
  /** `""` for ONNX ops, `"nrt"` for fused ops. */
  readonly domain: "" | "nrt";
  /** The op type. */
  readonly opType: string;
  /** The element types it supports (of its main data input). */
  readonly dtypes: readonly OpDtype[];
  /** Supported attributes, each with the values it supports. */
  readonly attributes: Readonly<Record<string, string>>;
  /** What else is worth knowing (inputs that must be constants, limits). */
  readonly notes?: string;
  /** Lowers a node of this op. */
  readonly lower: (node: OpNode) => KernelCall[];
}
