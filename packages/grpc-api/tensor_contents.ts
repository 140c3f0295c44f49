/**
 * Typed tensor contents: `InferTensorContents`' repeated fields against the little-endian tensor bytes the runtime
 * reads and writes. Each datatype has one field (spec: grpc_predict_v2.proto, `InferTensorContents`): BOOL in
 * `bool_contents`; INT8, INT16, INT32 in `int_contents`; INT64 in `int64_contents`; UINT8, UINT16, UINT32 in
 * `uint_contents`; UINT64 in `uint64_contents`; FP32 in `fp32_contents`; FP64 in `fp64_contents`. FP16, BF16 and the
 * FP8 types have no field and travel only as raw contents ("the FP16 data type must be represented as raw
 * content"). 64-bit integers keep all their bits (decimal strings), unlike JSON numbers.
 *
 * @module
 */
import type { DatatypeInfo } from "@nrt/http-api";
import { GrpcCode, GrpcError } from "./grpc_status.ts";
import type { InferTensorContents, Int64 } from "./messages.ts";

/** The name of a typed field of `InferTensorContents` (`bytes_contents` is not one: BYTES is not supported). */
export type ContentsField = Exclude<keyof InferTensorContents, "bytes_contents">;

const FIELDS: readonly ContentsField[] = [
  "bool_contents",
  "int_contents",
  "int64_contents",
  "uint_contents",
  "uint64_contents",
  "fp32_contents",
  "fp64_contents",
];

const FIELD_BY_DATATYPE: Readonly<Record<string, ContentsField>> = {
  BOOL: "bool_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  FP32: "fp32_contents",
  FP64: "fp64_contents",
};

/** The ranges the proto's 32-bit fields are narrowed to. */
const RANGE: Readonly<Record<string, readonly [number, number]>> = {
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
};

/**
 * The `InferTensorContents` field of a datatype.
 *
 * @param datatype A protocol datatype such as `"INT16"`.
 * @returns Its field, or `undefined` for a datatype without one (FP16, BF16, FP8, BYTES, unknown names).
 *
 * @example Where INT16 goes
 * ```ts
 * import { contentsField } from "@nrt/grpc-api";
 * console.log(contentsField("INT16"), contentsField("FP16")); // "int_contents" undefined
 * ```
 */
export function contentsField(datatype: string): ContentsField | undefined {
  return FIELD_BY_DATATYPE[datatype];
}

function invalid(where: string, why: string): GrpcError {
  return new GrpcError(GrpcCode.INVALID_ARGUMENT, `Cannot read ${where}: ${why}`, { httpStatus: 400 });
}

function int64Of(where: string, k: number, v: Int64, unsigned: boolean): bigint {
  try {
    const x = BigInt(v);
    if (unsigned ? x >= 0n && x < 1n << 64n : x >= -(1n << 63n) && x < 1n << 63n) return x;
  } catch {
    // A non-integer number given directly (decoded messages always hold integer strings): refused below.
  }
  throw invalid(
    where,
    `element ${k} is ${String(v)}, expected an integer in the ${unsigned ? "UINT64" : "INT64"} range`,
  );
}

/**
 * Converts the typed contents of an input to its little-endian bytes.
 *
 * @param where The tensor, for messages (`input "x"`).
 * @param info The datatype row the input declares.
 * @param contents The input's `contents` (`null` reads as empty).
 * @param count The element count its shape gives.
 * @returns `count × info.bytes` bytes.
 * @throws {GrpcError} `INVALID_ARGUMENT` when the datatype has no typed field, the data is in another datatype's
 *   field, the field does not hold exactly `count` elements, or an element is out of the datatype's range.
 *
 * @example Encode an INT16 tensor
 * ```ts
 * import { datatypeInfo } from "@nrt/http-api";
 * import { decodeContents } from "@nrt/grpc-api";
 * const empty = { bool_contents: [], int_contents: [], int64_contents: [], uint_contents: [], uint64_contents: [],
 *   fp32_contents: [], fp64_contents: [], bytes_contents: [] };
 * const bytes = decodeContents('input "x"', datatypeInfo("INT16")!, { ...empty, int_contents: [1, -1] }, 2);
 * console.log(bytes); // Uint8Array [1, 0, 255, 255]
 * ```
 */
export function decodeContents(
  where: string,
  info: DatatypeInfo,
  contents: InferTensorContents | null,
  count: number,
): Uint8Array {
  const field = FIELD_BY_DATATYPE[info.datatype];
  if (field === undefined) {
    throw invalid(where, `${info.datatype} has no typed contents field; send it in raw_input_contents`);
  }
  for (const other of [...FIELDS, "bytes_contents"] as const) {
    if (other !== field && (contents?.[other]?.length ?? 0) > 0) {
      throw invalid(where, `${info.datatype} data goes in contents.${field}, not contents.${other}`);
    }
  }
  const values: readonly unknown[] = contents?.[field] ?? [];
  if (values.length !== count) {
    throw invalid(where, `contents.${field} holds ${values.length} elements, its shape has ${count}`);
  }
  const range = RANGE[info.datatype];
  if (range !== undefined) {
    const [lo, hi] = range;
    for (let k = 0; k < count; k++) {
      const v = values[k] as number;
      if (v < lo || v > hi) {
        throw invalid(where, `element ${k} is ${v}, expected an integer in the ${info.datatype} range`);
      }
    }
  }
  switch (info.datatype) {
    case "BOOL":
      return Uint8Array.from(values as boolean[], (b) => (b ? 1 : 0));
    case "INT8":
      return new Uint8Array(Int8Array.from(values as number[]).buffer);
    case "INT16":
      return new Uint8Array(Int16Array.from(values as number[]).buffer);
    case "INT32":
      return new Uint8Array(Int32Array.from(values as number[]).buffer);
    case "UINT8":
      return Uint8Array.from(values as number[]);
    case "UINT16":
      return new Uint8Array(Uint16Array.from(values as number[]).buffer);
    case "UINT32":
      return new Uint8Array(Uint32Array.from(values as number[]).buffer);
    case "INT64":
      return new Uint8Array(BigInt64Array.from(values as Int64[], (v, k) => int64Of(where, k, v, false)).buffer);
    case "UINT64":
      return new Uint8Array(BigUint64Array.from(values as Int64[], (v, k) => int64Of(where, k, v, true)).buffer);
    case "FP32":
      return new Uint8Array(Float32Array.from(values as number[]).buffer);
    default: // FP64
      return new Uint8Array(Float64Array.from(values as number[]).buffer);
  }
}

/**
 * Converts little-endian tensor bytes to typed contents.
 *
 * @param info The datatype row (one with a typed field).
 * @param bytes The tensor bytes (a multiple of `info.bytes`).
 * @returns Contents with the datatype's one field set; 64-bit integers as decimal strings.
 * @throws {RangeError} For a datatype without a typed field.
 *
 * @example Decode two INT64 elements
 * ```ts
 * import { datatypeInfo } from "@nrt/http-api";
 * import { encodeContents } from "@nrt/grpc-api";
 * const bytes = new Uint8Array(new BigInt64Array([-1n, 2n ** 62n]).buffer);
 * console.log(encodeContents(datatypeInfo("INT64")!, bytes)); // { int64_contents: ["-1", "4611686018427387904"] }
 * ```
 */
export function encodeContents(info: DatatypeInfo, bytes: Uint8Array): Partial<InferTensorContents> {
  const b = bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
  const n = b.byteLength / info.bytes;
  switch (info.datatype) {
    case "BOOL":
      return { bool_contents: Array.from(b, (x) => x !== 0) };
    case "INT8":
      return { int_contents: Array.from(new Int8Array(b.buffer, b.byteOffset, n)) };
    case "INT16":
      return { int_contents: Array.from(new Int16Array(b.buffer, b.byteOffset, n)) };
    case "INT32":
      return { int_contents: Array.from(new Int32Array(b.buffer, b.byteOffset, n)) };
    case "UINT8":
      return { uint_contents: Array.from(b) };
    case "UINT16":
      return { uint_contents: Array.from(new Uint16Array(b.buffer, b.byteOffset, n)) };
    case "UINT32":
      return { uint_contents: Array.from(new Uint32Array(b.buffer, b.byteOffset, n)) };
    case "INT64":
      return { int64_contents: Array.from(new BigInt64Array(b.buffer, b.byteOffset, n), String) };
    case "UINT64":
      return { uint64_contents: Array.from(new BigUint64Array(b.buffer, b.byteOffset, n), String) };
    case "FP32":
      return { fp32_contents: Array.from(new Float32Array(b.buffer, b.byteOffset, n)) };
    case "FP64":
      return { fp64_contents: Array.from(new Float64Array(b.buffer, b.byteOffset, n)) };
    default:
      throw new RangeError(`Cannot write ${info.datatype} as typed contents: it has no InferTensorContents field`);
  }
}
