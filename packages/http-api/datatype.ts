/**
 * Tensor datatypes: the Open Inference Protocol's names (`FP32`, `INT64`, …) against the NEFF dtypes
 * (`float32`, `int64`, …), their element sizes, and the conversion of JSON `data` to and from little-endian bytes.
 *
 * Spec: inference_rest.md "Tensor Data Types" (the KServe table; `BF16` as Triton adds it) and "Tensor Data"
 * (row-major, nested or flat). FP16, BF16 and the FP8 types have no JSON number form the protocol agrees on, so
 * they travel only through the binary-tensor extension.
 *
 * @module
 */
import { HttpError } from "./http_error.ts";

/** One row of the datatype table. */
export interface DatatypeInfo {
  /** The protocol's name, e.g. `"FP32"`. */
  readonly datatype: string;
  /** The NEFF dtype, e.g. `"float32"`. */
  readonly dtype: string;
  /** Bytes per element. */
  readonly bytes: number;
  /** Whether JSON `data` may carry it (false: binary-tensor extension only). */
  readonly json: boolean;
}

const ROWS: readonly DatatypeInfo[] = [
  { datatype: "BOOL", dtype: "bool", bytes: 1, json: true },
  { datatype: "UINT8", dtype: "uint8", bytes: 1, json: true },
  { datatype: "UINT16", dtype: "uint16", bytes: 2, json: true },
  { datatype: "UINT32", dtype: "uint32", bytes: 4, json: true },
  { datatype: "UINT64", dtype: "uint64", bytes: 8, json: true },
  { datatype: "INT8", dtype: "int8", bytes: 1, json: true },
  { datatype: "INT16", dtype: "int16", bytes: 2, json: true },
  { datatype: "INT32", dtype: "int32", bytes: 4, json: true },
  { datatype: "INT64", dtype: "int64", bytes: 8, json: true },
  { datatype: "FP16", dtype: "float16", bytes: 2, json: false },
  { datatype: "BF16", dtype: "bfloat16", bytes: 2, json: false },
  { datatype: "FP32", dtype: "float32", bytes: 4, json: true },
  { datatype: "FP64", dtype: "float64", bytes: 8, json: true },
  // Not in the KServe table: named as the formats are, binary only.
  { datatype: "FP8_E4M3", dtype: "float8_e4m3", bytes: 1, json: false },
  { datatype: "FP8_E4M3FN", dtype: "float8_e4m3fn", bytes: 1, json: false },
  { datatype: "FP8_E5M2", dtype: "float8_e5m2", bytes: 1, json: false },
];

const BY_DATATYPE: ReadonlyMap<string, DatatypeInfo> = new Map(ROWS.map((r) => [r.datatype, r]));
const BY_DTYPE: ReadonlyMap<string, DatatypeInfo> = new Map(ROWS.map((r) => [r.dtype, r]));

/**
 * The datatype row of a protocol name.
 *
 * @param datatype A protocol datatype such as `"FP32"`.
 * @returns Its row, or `undefined` for a name the server does not support (including `BYTES`).
 *
 * @example Look up FP32
 * ```ts
 * import { datatypeInfo } from "@nrt/http-api";
 * console.log(datatypeInfo("FP32")?.dtype); // "float32"
 * ```
 */
export function datatypeInfo(datatype: string): DatatypeInfo | undefined {
  return BY_DATATYPE.get(datatype);
}

/**
 * The protocol datatype of a NEFF dtype.
 *
 * @param dtype A NEFF dtype such as `"bfloat16"`.
 * @returns Its row, or `undefined` when the protocol has no name for it.
 *
 * @example Name a NEFF dtype
 * ```ts
 * import { dtypeInfo } from "@nrt/http-api";
 * console.log(dtypeInfo("bfloat16")?.datatype); // "BF16"
 * ```
 */
export function dtypeInfo(dtype: string): DatatypeInfo | undefined {
  return BY_DTYPE.get(dtype);
}

type Writer = (view: DataView, offset: number, value: unknown) => boolean;

const int = (lo: number, hi: number, put: (v: DataView, o: number, x: number) => void): Writer => (view, o, x) => {
  if (typeof x !== "number" || !Number.isInteger(x) || x < lo || x > hi) return false;
  put(view, o, x);
  return true;
};

const WRITERS: Readonly<Record<string, Writer>> = {
  BOOL: (v, o, x) => {
    if (typeof x !== "boolean") return false;
    v.setUint8(o, x ? 1 : 0);
    return true;
  },
  UINT8: int(0, 0xff, (v, o, x) => v.setUint8(o, x)),
  UINT16: int(0, 0xffff, (v, o, x) => v.setUint16(o, x, true)),
  UINT32: int(0, 0xffffffff, (v, o, x) => v.setUint32(o, x, true)),
  UINT64: int(0, Number.MAX_SAFE_INTEGER, (v, o, x) => v.setBigUint64(o, BigInt(x), true)),
  INT8: int(-0x80, 0x7f, (v, o, x) => v.setInt8(o, x)),
  INT16: int(-0x8000, 0x7fff, (v, o, x) => v.setInt16(o, x, true)),
  INT32: int(-0x80000000, 0x7fffffff, (v, o, x) => v.setInt32(o, x, true)),
  INT64: int(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, (v, o, x) => v.setBigInt64(o, BigInt(x), true)),
  // A JSON number that is not finite (1e999) or past FP32's range would arrive as ±Infinity: refused (ours;
  // docs/rest-api.md). NaN cannot be written in standard JSON at all.
  FP32: (v, o, x) => {
    if (typeof x !== "number" || !Number.isFinite(Math.fround(x))) return false;
    v.setFloat32(o, x, true);
    return true;
  },
  FP64: (v, o, x) => {
    if (typeof x !== "number" || !Number.isFinite(x)) return false;
    v.setFloat64(o, x, true);
    return true;
  },
};

const EXPECTED: Readonly<Record<string, string>> = {
  BOOL: "a boolean",
  UINT64: "an integer from 0 to 2^53-1",
  INT64: "an integer from -(2^53-1) to 2^53-1",
  FP32: "a finite number within the FP32 range (±3.4028235e38)",
  FP64: "a finite number",
};

/**
 * A JSON value as the client wrote it, for messages (`Infinity` where JSON.stringify would say null): data elements,
 * and a shape's dimensions (`infer_request.ts`).
 */
export function shown(x: unknown): string {
  if (typeof x === "number" && !Number.isFinite(x)) return String(x);
  return JSON.stringify(x) ?? String(x);
}

/**
 * Converts the JSON `data` of a tensor to its little-endian bytes. Nested arrays are read in row-major order, so a
 * nested and a flat array of the same elements give the same bytes (spec: inference_rest.md "Tensor Data").
 *
 * @param name The tensor name, for messages.
 * @param info The tensor's datatype row (one with `json: true`).
 * @param data The `data` member.
 * @param count The element count the shape asks for.
 * @param shape The shape (default `[count]`): a nested `data` must follow it level by level.
 * @returns `count × info.bytes` bytes.
 * @throws {HttpError} 400 when `data` is not an array, holds a value of the wrong type or range, or does not hold
 *   exactly `count` elements.
 *
 * @example Encode a nested FP32 tensor
 * ```ts
 * import { datatypeInfo, decodeJsonData } from "@nrt/http-api";
 * const bytes = decodeJsonData("x", datatypeInfo("FP32")!, [[1, 2], [3, 4]], 4, [2, 2]);
 * console.log(new Float32Array(bytes.buffer)); // Float32Array [1, 2, 3, 4]
 * ```
 */
export function decodeJsonData(
  name: string,
  info: DatatypeInfo,
  data: unknown,
  count: number,
  shape: readonly number[] = [count],
): Uint8Array {
  const write = WRITERS[info.datatype];
  if (write === undefined || !info.json) {
    throw new HttpError(
      400,
      `Cannot read input "${name}": ${info.datatype} has no JSON form; send it with the binary tensor extension`,
    );
  }
  if (!Array.isArray(data)) throw new HttpError(400, `Cannot read input "${name}": "data" must be an array`);
  // Both views over one ArrayBuffer made first: asking a fresh `Uint8Array` for its `.buffer` makes JavaScriptCore
  // build one after the fact (ours: that getter was 2–3.5% of the REST server's main-thread samples on Bun).
  const buffer = new ArrayBuffer(count * info.bytes);
  const out = new Uint8Array(buffer);
  const view = new DataView(buffer);
  // Flat (every element a scalar) or nested exactly as the shape (every level as long as its dimension): a ragged
  // nesting that happens to hold the right number of elements is refused (ours, docs/rest-api.md).
  const nested = shape.length > 1 && Array.isArray(data[0]);
  const ragged = (path: string, why: string): never => {
    throw new HttpError(
      400,
      `Cannot read input "${name}": "data"${path} ${why}; send a flat array or one nested as the shape [${
        shape.join(", ")
      }]`,
    );
  };
  let k = 0;
  // An explicit stack instead of recursion: the depth is bounded by the JSON nesting limit, but the width is not.
  const stack: Array<{ a: unknown[]; i: number; depth: number; path: string }> = [{
    a: data,
    i: 0,
    depth: 0,
    path: "",
  }];
  if (nested && data.length !== shape[0]) {
    ragged("", `has ${data.length} entries, the shape's first dimension is ${shape[0]}`);
  }
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    if (top.i === top.a.length) {
      stack.pop();
      continue;
    }
    const at = top.i++;
    const x = top.a[at];
    if (Array.isArray(x)) {
      const depth = top.depth + 1;
      const path = `${top.path}[${at}]`;
      if (!nested) ragged(path, "is an array inside a flat list");
      if (depth >= shape.length) ragged(path, `nests deeper than the shape's ${shape.length} dimensions`);
      if (x.length !== shape[depth]) ragged(path, `has ${x.length} entries, dimension ${depth} is ${shape[depth]}`);
      stack.push({ a: x, i: 0, depth, path });
      continue;
    }
    if (nested && top.depth !== shape.length - 1) {
      ragged(`${top.path}[${at}]`, "is a number where the shape has another dimension");
    }
    if (k === count) {
      throw new HttpError(
        400,
        `Cannot read input "${name}": "data" holds more than the ${count} elements its shape has`,
      );
    }
    if (!write(view, k * info.bytes, x)) {
      const want = EXPECTED[info.datatype] ?? `an integer in the ${info.datatype} range`;
      throw new HttpError(400, `Cannot read input "${name}": element ${k} is ${shown(x)}, expected ${want}`);
    }
    k++;
  }
  if (k !== count) {
    throw new HttpError(400, `Cannot read input "${name}": "data" holds ${k} elements, its shape has ${count}`);
  }
  return out;
}

/**
 * Converts little-endian tensor bytes to a flat JSON array (row-major).
 *
 * @param info The datatype row (one with `json: true`).
 * @param bytes The tensor bytes (a multiple of `info.bytes`).
 * @returns Numbers, or booleans for `BOOL`. 64-bit integers beyond 2^53 lose precision, as JSON numbers do.
 * @throws {RangeError} For a datatype without a JSON form.
 *
 * @example Decode two INT32 elements
 * ```ts
 * import { datatypeInfo, encodeJsonData } from "@nrt/http-api";
 * console.log(encodeJsonData(datatypeInfo("INT32")!, new Uint8Array([1, 0, 0, 0, 255, 255, 255, 255]))); // [1, -1]
 * ```
 */
export function encodeJsonData(info: DatatypeInfo, bytes: Uint8Array): Array<number | boolean> {
  const b = aligned(bytes);
  const n = b.byteLength / info.bytes;
  switch (info.datatype) {
    case "BOOL":
      return Array.from(b, (x) => x !== 0);
    case "UINT8":
      return Array.from(b);
    case "INT8":
      return Array.from(new Int8Array(b.buffer, b.byteOffset, n));
    case "UINT16":
      return Array.from(new Uint16Array(b.buffer, b.byteOffset, n));
    case "INT16":
      return Array.from(new Int16Array(b.buffer, b.byteOffset, n));
    case "UINT32":
      return Array.from(new Uint32Array(b.buffer, b.byteOffset, n));
    case "INT32":
      return Array.from(new Int32Array(b.buffer, b.byteOffset, n));
    case "UINT64":
      return Array.from(new BigUint64Array(b.buffer, b.byteOffset, n), Number);
    case "INT64":
      return Array.from(new BigInt64Array(b.buffer, b.byteOffset, n), Number);
    case "FP32":
      return Array.from(new Float32Array(b.buffer, b.byteOffset, n));
    case "FP64":
      return Array.from(new Float64Array(b.buffer, b.byteOffset, n));
    default:
      throw new RangeError(`Cannot write ${info.datatype} as JSON: it has no JSON form`);
  }
}

/**
 * Tensor bytes as the text of a JSON array (row-major), for a response. A non-finite FP32/FP64 value is written as
 * the bare token `NaN`, `Infinity` or `-Infinity`, as Triton writes it and its clients read it (ours;
 * docs/rest-api.md): never `null`, which would read as a missing value.
 *
 * @param info The datatype row (one with `json: true`).
 * @param bytes The tensor bytes.
 * @returns The array's JSON text.
 *
 * @example A NaN among FP32 values
 * ```ts
 * import { datatypeInfo, jsonDataText } from "@nrt/http-api";
 * console.log(jsonDataText(datatypeInfo("FP32")!, new Uint8Array(new Float32Array([1, NaN, -Infinity]).buffer))); // [1,NaN,-Infinity]
 * ```
 */
export function jsonDataText(info: DatatypeInfo, bytes: Uint8Array): string {
  if (info.datatype !== "FP32" && info.datatype !== "FP64") return JSON.stringify(encodeJsonData(info, bytes));
  // Read in place and written piece by piece: no array of boxed numbers on the way (ours; a number's text is the
  // same as JSON.stringify's, -0 included).
  const b = aligned(bytes);
  const count = b.byteLength / (info.datatype === "FP32" ? 4 : 8);
  const values = info.datatype === "FP32"
    ? new Float32Array(b.buffer, b.byteOffset, count)
    : new Float64Array(b.buffer, b.byteOffset, count);
  let text = "[";
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) text += ",";
    text += Number.isFinite(v) ? `${v}` : Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
  }
  return text + "]";
}

/** Up to this many bytes a tensor is read through the scratch buffer (see below). */
const SMALL_TENSOR_BYTES = 4096;

/** {@linkcode aligned}'s scratch buffer, made once, so its `.buffer` exists. */
const SCRATCH = new Uint8Array(new ArrayBuffer(SMALL_TENSOR_BYTES));

/**
 * `bytes`, or a copy, at an offset every element view can start at, for a reader done with it before it returns
 * (both readers here are synchronous and keep numbers, not views). A small tensor is copied into the module's scratch
 * buffer, which the next call overwrites: asking a fresh `Uint8Array` for its `.buffer` makes JavaScriptCore build
 * one after the fact (see {@linkcode decodeJsonData}), and a buffer made per call cost more than writing eight
 * numbers (ours, Bun: eight FP32 values as JSON text in 0.33 µs with a fresh buffer, 0.16 with the scratch; eight
 * INT32 values as a JSON array 0.43 and 0.24 µs). A large one keeps its own buffer, as a copy grows with it (the
 * 4 KiB bound is a round figure, not tuned).
 */
function aligned(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength <= SMALL_TENSOR_BYTES) {
    SCRATCH.set(bytes);
    return SCRATCH.subarray(0, bytes.byteLength);
  }
  return bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
}
