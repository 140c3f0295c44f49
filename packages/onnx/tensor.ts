/**
 * `ConstTensor`: a constant value known at compile time (an initializer, a `Constant`, a folded result), kept as
 * little-endian bytes with numeric views for the folding evaluator. Ours.
 *
 * The host is little-endian (every platform Deno and Bun run on), so typed-array views over the bytes are the
 * little-endian layout ONNX `raw_data` and the NEFF both use.
 *
 * @module
 */
import type { OpDtype, OpValue } from "@nrt/ops";
import { DTYPE_BYTES } from "./dtype.ts";

/** Number of elements of a shape (1 for a scalar). */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** A typed-array view of `bytes` for `dtype` (float16/bfloat16 as raw `Uint16Array` bits). */
export function typedView(
  dtype: OpDtype,
  bytes: Uint8Array,
):
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array {
  const size = DTYPE_BYTES[dtype];
  const b = bytes.byteOffset % size === 0 ? bytes : bytes.slice();
  const n = b.byteLength / size;
  switch (dtype) {
    case "float32":
      return new Float32Array(b.buffer, b.byteOffset, n);
    case "float64":
      return new Float64Array(b.buffer, b.byteOffset, n);
    case "float16":
    case "bfloat16":
    case "uint16":
      return new Uint16Array(b.buffer, b.byteOffset, n);
    case "int8":
      return new Int8Array(b.buffer, b.byteOffset, n);
    case "uint8":
    case "bool":
      return new Uint8Array(b.buffer, b.byteOffset, n);
    case "int16":
      return new Int16Array(b.buffer, b.byteOffset, n);
    case "int32":
      return new Int32Array(b.buffer, b.byteOffset, n);
    case "uint32":
      return new Uint32Array(b.buffer, b.byteOffset, n);
    case "int64":
      return new BigInt64Array(b.buffer, b.byteOffset, n);
    case "uint64":
      return new BigUint64Array(b.buffer, b.byteOffset, n);
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half bits → number. */
export function halfToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m === 0 ? s * Infinity : NaN;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** number → IEEE half bits, rounding to nearest even. */
export function numberToHalf(v: number): number {
  if (Number.isNaN(v)) return 0x7e00;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a >= 65520) return sign | 0x7c00; // rounds past the largest half (65504)
  if (a < 2 ** -14) {
    // subnormal: units of 2^-24, round half to even
    const q = a / 2 ** -24, f = Math.floor(q), r = q - f;
    const m = r > 0.5 || (r === 0.5 && (f & 1) === 1) ? f + 1 : f;
    return sign | m; // m may reach 0x400, which is the smallest normal: still the right bits
  }
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const q = (a / 2 ** e - 1) * 1024, f = Math.floor(q), r = q - f;
  let m = r > 0.5 || (r === 0.5 && (f & 1) === 1) ? f + 1 : f;
  if (m === 1024) {
    m = 0;
    e++;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | m;
}

/** bfloat16 bits → number. */
export function bfloat16ToNumber(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

/** number → bfloat16 bits, rounding the float32 value to nearest even. */
export function numberToBfloat16(v: number): number {
  f32[0] = v;
  const bits = u32[0];
  if (Number.isNaN(v)) return 0x7fc0;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * A constant tensor. `bytes` is owned by the tensor and never mutated; `numbers()` and `bigints()` are cached
 * decoded views for the folding evaluator.
 */
export class ConstTensor {
  /** Element type. */
  readonly dtype: OpDtype;
  /** Static shape. */
  readonly shape: readonly number[];
  /** Little-endian element bytes, `size × DTYPE_BYTES[dtype]` long. */
  readonly bytes: Uint8Array;
  #numbers?: Float64Array;

  /**
   * Wraps bytes (not copied).
   *
   * @throws {RangeError} when the byte length does not match the shape.
   */
  constructor(dtype: OpDtype, shape: readonly number[], bytes: Uint8Array) {
    const want = shapeSize(shape) * DTYPE_BYTES[dtype];
    if (bytes.byteLength !== want) {
      throw new RangeError(`Cannot make a ${dtype}[${shape}] constant: ${bytes.byteLength} bytes, expected ${want}`);
    }
    this.dtype = dtype;
    this.shape = [...shape];
    this.bytes = bytes;
  }

  /** Number of elements. */
  get size(): number {
    return shapeSize(this.shape);
  }

  /** The elements as float64 (int64 through `Number`, exact below 2^53; bool as 0/1). */
  numbers(): Float64Array {
    if (this.#numbers !== undefined) return this.#numbers;
    const v = typedView(this.dtype, this.bytes);
    const out = new Float64Array(v.length);
    if (this.dtype === "float16") { for (let i = 0; i < v.length; i++) out[i] = halfToNumber(v[i] as number); }
    else if (this.dtype === "bfloat16") {
      for (let i = 0; i < v.length; i++) {
        out[i] = bfloat16ToNumber(v[i] as number);
      }
    } else if (v instanceof BigInt64Array || v instanceof BigUint64Array) {
      for (let i = 0; i < v.length; i++) out[i] = Number(v[i]);
    } else out.set(v as ArrayLike<number>);
    this.#numbers = out;
    return out;
  }

  /** The elements as `bigint`s (exact for int64/uint64; floats truncated toward zero). */
  bigints(): bigint[] {
    const v = typedView(this.dtype, this.bytes);
    if (v instanceof BigInt64Array || v instanceof BigUint64Array) return [...v];
    return [...this.numbers()].map((x) => BigInt(Number.isFinite(x) ? Math.trunc(x) : 0));
  }

  /**
   * The elements as integers (for shapes, axes, indices, slice bounds). Values past 2^53 (Slice's `INT64_MAX`
   * "to the end") come back rounded, which every such use clamps anyway.
   *
   * @throws {RangeError} when an element is not an integer.
   */
  ints(): number[] {
    return [...this.numbers()].map((x) => {
      if (!Number.isInteger(x)) throw new RangeError(`Cannot read ${x} as an integer`);
      return x;
    });
  }

  /** The contract's view of this constant under `name`. */
  toOpValue(name: string): OpValue {
    return { name, dtype: this.dtype, shape: this.shape, constant: this.bytes };
  }

  /**
   * Builds a constant from numbers, converting each as an ONNX `Cast` would: floats rounded to the target
   * precision, integers truncated toward zero and wrapped to the type's width, bool as `v != 0`.
   */
  static fromNumbers(dtype: OpDtype, shape: readonly number[], values: ArrayLike<number>): ConstTensor {
    const n = shapeSize(shape);
    if (values.length !== n) {
      throw new RangeError(`Cannot make a ${dtype}[${shape}] constant from ${values.length} values`);
    }
    const bytes = new Uint8Array(n * DTYPE_BYTES[dtype]);
    const view = typedView(dtype, bytes);
    const int = (x: number): number => (Number.isFinite(x) ? Math.trunc(x) : 0);
    if (dtype === "float16") { for (let i = 0; i < n; i++) view[i] = numberToHalf(values[i]); }
    else if (dtype === "bfloat16") { for (let i = 0; i < n; i++) view[i] = numberToBfloat16(values[i]); }
    else if (dtype === "bool") { for (let i = 0; i < n; i++) view[i] = values[i] !== 0 ? 1 : 0; }
    else if (dtype === "int64") { for (let i = 0; i < n; i++) view[i] = BigInt.asIntN(64, BigInt(int(values[i]))); }
    else if (dtype === "uint64") { for (let i = 0; i < n; i++) view[i] = BigInt.asUintN(64, BigInt(int(values[i]))); }
    else if (dtype === "float32" || dtype === "float64") (view as Float32Array).set(values);
    else for (let i = 0; i < n; i++) view[i] = int(values[i]);
    return new ConstTensor(dtype, shape, bytes);
  }

  /** Builds an int64 constant from `bigint`s (exact). */
  static fromBigints(dtype: "int64" | "uint64", shape: readonly number[], values: readonly bigint[]): ConstTensor {
    const bytes = new Uint8Array(values.length * 8);
    const view = typedView(dtype, bytes) as BigInt64Array | BigUint64Array;
    values.forEach((v, i) => (view[i] = dtype === "int64" ? BigInt.asIntN(64, v) : BigInt.asUintN(64, v)));
    return new ConstTensor(dtype, shape, bytes);
  }
}
