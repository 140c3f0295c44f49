/**
 * Element types: ONNX `TensorProto.DataType` codes mapped to the NEFF dtype names of the op contract
 * (`kernels/ops/op_node.ts`), with their byte sizes. Ours: the seeds say nothing about ONNX.
 *
 * @module
 */
import type { OpDtype } from "@nrt/ops";

/** ONNX `TensorProto.DataType` codes (onnx.proto) of the element types the compiler handles. */
export const OnnxDataType = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  BFLOAT16: 16,
} as const;

const FROM_ONNX: ReadonlyMap<number, OpDtype> = new Map<number, OpDtype>([
  [1, "float32"],
  [2, "uint8"],
  [3, "int8"],
  [4, "uint16"],
  [5, "int16"],
  [6, "int32"],
  [7, "int64"],
  [9, "bool"],
  [10, "float16"],
  [11, "float64"],
  [12, "uint32"],
  [13, "uint64"],
  [16, "bfloat16"],
]);

const TO_ONNX: ReadonlyMap<OpDtype, number> = new Map([...FROM_ONNX].map(([code, d]) => [d, code]));

const ONNX_NAMES: Readonly<Record<number, string>> = {
  0: "UNDEFINED",
  8: "STRING",
  14: "COMPLEX64",
  15: "COMPLEX128",
  17: "FLOAT8E4M3FN",
  18: "FLOAT8E4M3FNUZ",
  19: "FLOAT8E5M2",
  20: "FLOAT8E5M2FNUZ",
  21: "UINT4",
  22: "INT4",
};

/** Byte size of one element. */
export const DTYPE_BYTES: Readonly<Record<OpDtype, number>> = {
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

/** The dtype of an ONNX data type code, or `undefined` for one the compiler does not handle (strings, complex). */
export function dtypeFromOnnx(code: number): OpDtype | undefined {
  return FROM_ONNX.get(code);
}

/** The ONNX data type code of a dtype. */
export function dtypeToOnnx(dtype: OpDtype): number {
  return TO_ONNX.get(dtype)!;
}

/** A readable name for an ONNX data type code, for error messages (`"STRING"`, `"code 42"`). */
export function onnxDataTypeName(code: number): string {
  const d = FROM_ONNX.get(code);
  return d ?? ONNX_NAMES[code] ?? `code ${code}`;
}

/** Whether a dtype is a floating-point type. */
export function isFloatDtype(dtype: OpDtype): boolean {
  return dtype === "float32" || dtype === "float16" || dtype === "bfloat16" || dtype === "float64";
}

/** Whether a dtype holds 64-bit integers (kept as `bigint` when exact values matter). */
export function isInt64Dtype(dtype: OpDtype): boolean {
  return dtype === "int64" || dtype === "uint64";
}

/** The list of dtypes the compiler handles, for error messages. */
export const ALL_DTYPES: readonly OpDtype[] = [...FROM_ONNX.values()];
