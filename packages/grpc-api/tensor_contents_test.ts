import { describe, expect, test } from "bun:test";
import { datatypeInfo } from "@nrt/http-api";
import { GrpcCode, GrpcError } from "./grpc_status.ts";
import type { InferTensorContents } from "./messages.ts";
import { contentsField, decodeContents, encodeContents } from "./tensor_contents.ts";

const EMPTY: InferTensorContents = {
  bool_contents: [],
  int_contents: [],
  int64_contents: [],
  uint_contents: [],
  uint64_contents: [],
  fp32_contents: [],
  fp64_contents: [],
  bytes_contents: [],
};

/** Every typed datatype with extreme values and their little-endian bytes. */
const CASES: ReadonlyArray<{ datatype: string; values: unknown[]; bytes: ArrayBufferView }> = [
  { datatype: "BOOL", values: [true, false, true], bytes: new Uint8Array([1, 0, 1]) },
  { datatype: "INT8", values: [-128, 0, 127], bytes: new Int8Array([-128, 0, 127]) },
  { datatype: "INT16", values: [-32768, 1, 32767], bytes: new Int16Array([-32768, 1, 32767]) },
  { datatype: "INT32", values: [-2147483648, -1, 2147483647], bytes: new Int32Array([-2147483648, -1, 2147483647]) },
  {
    datatype: "INT64",
    values: ["-9223372036854775808", "9007199254740993", "9223372036854775807"],
    bytes: new BigInt64Array([-(2n ** 63n), 2n ** 53n + 1n, 2n ** 63n - 1n]),
  },
  { datatype: "UINT8", values: [0, 1, 255], bytes: new Uint8Array([0, 1, 255]) },
  { datatype: "UINT16", values: [0, 1, 65535], bytes: new Uint16Array([0, 1, 65535]) },
  { datatype: "UINT32", values: [0, 1, 4294967295], bytes: new Uint32Array([0, 1, 4294967295]) },
  {
    datatype: "UINT64",
    values: ["0", "9007199254740993", "18446744073709551615"],
    bytes: new BigUint64Array([0n, 2n ** 53n + 1n, 2n ** 64n - 1n]),
  },
  { datatype: "FP32", values: [-1.5, 0, 3.25], bytes: new Float32Array([-1.5, 0, 3.25]) },
  {
    datatype: "FP64",
    values: [-1e300, 0.1, Number.MAX_VALUE],
    bytes: new Float64Array([-1e300, 0.1, Number.MAX_VALUE]),
  },
];

const bytesOf = (a: ArrayBufferView): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function refusal(fn: () => unknown): GrpcError {
  try {
    fn();
  } catch (e) {
    if (e instanceof GrpcError) return e;
    throw e;
  }
  throw new Error("Expected a GrpcError");
}

describe("decodeContents() and encodeContents()", () => {
  for (const c of CASES) {
    test(`round-trip ${c.datatype} at its extremes through contents.${contentsField(c.datatype)}`, () => {
      const info = datatypeInfo(c.datatype)!;
      const field = contentsField(c.datatype)!;
      const bytes = decodeContents('input "x"', info, { ...EMPTY, [field]: c.values }, c.values.length);
      expect(bytes).toEqual(bytesOf(c.bytes));
      expect(encodeContents(info, bytes)).toEqual({ [field]: c.values });
    });
  }

  test("encodeContents() reads bytes at an unaligned offset", () => {
    const buf = new Uint8Array(9);
    buf.set(bytesOf(new Float64Array([2.5])), 1);
    expect(encodeContents(datatypeInfo("FP64")!, buf.subarray(1))).toEqual({ fp64_contents: [2.5] });
  });

  test("decodeContents() refuses FP16, BF16 and FP8, which have no typed field", () => {
    for (const dt of ["FP16", "BF16", "FP8_E4M3"]) {
      const e = refusal(() => decodeContents('input "h"', datatypeInfo(dt)!, EMPTY, 0));
      expect(e.code).toBe(GrpcCode.INVALID_ARGUMENT);
      expect(e.message).toBe(`Cannot read input "h": ${dt} has no typed contents field; send it in raw_input_contents`);
    }
    expect(() => encodeContents(datatypeInfo("FP16")!, new Uint8Array(2))).toThrow(RangeError);
  });

  test("decodeContents() refuses data in another datatype's field", () => {
    const e = refusal(() => decodeContents('input "x"', datatypeInfo("FP32")!, { ...EMPTY, int_contents: [1] }, 1));
    expect(e.message).toBe(
      'Cannot read input "x": FP32 data goes in contents.fp32_contents, not contents.int_contents',
    );
  });

  test("decodeContents() refuses a count that differs from the shape's", () => {
    const e = refusal(() =>
      decodeContents('input "x"', datatypeInfo("INT32")!, { ...EMPTY, int_contents: [1, 2, 3] }, 4)
    );
    expect(e.message).toBe('Cannot read input "x": contents.int_contents holds 3 elements, its shape has 4');
    const none = refusal(() => decodeContents('input "x"', datatypeInfo("FP32")!, null, 2));
    expect(none.message).toBe('Cannot read input "x": contents.fp32_contents holds 0 elements, its shape has 2');
  });

  test("decodeContents() refuses values outside an 8- or 16-bit range", () => {
    for (
      const [dt, v] of [["INT8", 128], ["INT8", -129], ["INT16", 32768], ["UINT8", 256], ["UINT16", 65536]] as const
    ) {
      const field = contentsField(dt)!;
      const e = refusal(() => decodeContents('input "x"', datatypeInfo(dt)!, { ...EMPTY, [field]: [0, v] }, 2));
      expect(e.message).toBe(`Cannot read input "x": element 1 is ${v}, expected an integer in the ${dt} range`);
    }
  });

  test("decodeContents() refuses a 64-bit value out of range or not an integer", () => {
    const e = refusal(() =>
      decodeContents('input "x"', datatypeInfo("UINT64")!, { ...EMPTY, uint64_contents: ["-1"] }, 1)
    );
    expect(e.message).toBe('Cannot read input "x": element 0 is -1, expected an integer in the UINT64 range');
    const f = refusal(() =>
      decodeContents('input "x"', datatypeInfo("INT64")!, { ...EMPTY, int64_contents: [1.5] }, 1)
    );
    expect(f.message).toBe('Cannot read input "x": element 0 is 1.5, expected an integer in the INT64 range');
  });
});
