import { describe, expect, test } from "bun:test";
import { datatypeInfo, decodeJsonData, dtypeInfo, encodeJsonData, jsonDataText } from "./datatype.ts";

describe("datatype", () => {
  test("datatypeInfo() and dtypeInfo() map the KServe names to the NEFF dtypes both ways", () => {
    const pairs = [
      ["BOOL", "bool"],
      ["UINT8", "uint8"],
      ["UINT16", "uint16"],
      ["UINT32", "uint32"],
      ["UINT64", "uint64"],
      ["INT8", "int8"],
      ["INT16", "int16"],
      ["INT32", "int32"],
      ["INT64", "int64"],
      ["FP16", "float16"],
      ["BF16", "bfloat16"],
      ["FP32", "float32"],
      ["FP64", "float64"],
    ];
    for (const [k, n] of pairs) {
      expect(datatypeInfo(k)?.dtype).toBe(n);
      expect(dtypeInfo(n)?.datatype).toBe(k);
    }
    expect(datatypeInfo("BYTES")).toBeUndefined();
    expect(datatypeInfo("FP16")?.json).toBe(false);
    expect(datatypeInfo("BF16")?.json).toBe(false);
  });

  test("decodeJsonData() reads nested and flat data to the same little-endian bytes", () => {
    const info = datatypeInfo("INT16")!;
    const flat = decodeJsonData("x", info, [1, -2, 3, -4], 4, [2, 2]);
    expect(decodeJsonData("x", info, [[1, -2], [3, -4]], 4, [2, 2])).toEqual(flat);
    expect(Array.from(flat)).toEqual([1, 0, 0xfe, 0xff, 3, 0, 0xfc, 0xff]);
  });

  test("decodeJsonData() refuses non-finite and out-of-range floats (1e999 parses to Infinity)", () => {
    const fp32 = datatypeInfo("FP32")!, fp64 = datatypeInfo("FP64")!;
    expect(() => decodeJsonData("x", fp32, JSON.parse("[1e999]"), 1)).toThrow(
      'Cannot read input "x": element 0 is Infinity, expected a finite number within the FP32 range (±3.4028235e38)',
    );
    expect(() => decodeJsonData("x", fp32, [1e39], 1)).toThrow(
      "element 0 is 1e+39, expected a finite number within the FP32 range",
    );
    expect(() => decodeJsonData("x", fp64, JSON.parse("[-1e999]"), 1)).toThrow(
      "element 0 is -Infinity, expected a finite number",
    );
    expect(new Float64Array(decodeJsonData("x", fp64, [1e39], 1).buffer)[0]).toBe(1e39);
    expect(new Float32Array(decodeJsonData("x", fp32, [3.4028234663852886e38], 1).buffer)[0]).toBe(
      3.4028234663852886e38,
    );
  });

  test("decodeJsonData() takes flat data or data nested exactly as the shape, never a ragged nesting", () => {
    const info = datatypeInfo("FP32")!;
    expect(() => decodeJsonData("x", info, [[1, 2, 3], [4, 5, 6, 7, 8]], 8, [8])).toThrow(
      'Cannot read input "x": "data"[0] is an array inside a flat list; send a flat array or one nested as the shape [8]',
    );
    expect(() => decodeJsonData("x", info, [[1, 2, 3], [4, 5, 6, 7, 8]], 8, [2, 4])).toThrow(
      '"data"[0] has 3 entries, dimension 1 is 4',
    );
    expect(() => decodeJsonData("x", info, [[1, 2, 3, 4]], 8, [2, 4])).toThrow(
      "has 1 entries, the shape's first dimension is 2",
    );
    expect(() => decodeJsonData("x", info, [[1, 2, 3, 4], 5], 8, [2, 4])).toThrow(
      '"data"[1] is a number where the shape has another dimension',
    );
    expect(() => decodeJsonData("x", info, [[[1, 2], [3, 4], [5, 6], [7, 8]], [9, 10, 11, 12]], 8, [2, 4])).toThrow(
      '"data"[0][0] nests deeper than the shape\'s 2 dimensions',
    );
    expect(decodeJsonData("x", info, [[1, 2, 3, 4], [5, 6, 7, 8]], 8, [2, 4])).toEqual(
      decodeJsonData("x", info, [1, 2, 3, 4, 5, 6, 7, 8], 8, [2, 4]),
    );
  });

  test("jsonDataText() writes NaN and ±Infinity as tokens, never null", () => {
    const fp32 = datatypeInfo("FP32")!;
    const bytes = new Uint8Array(new Float32Array([1.5, NaN, Infinity, -Infinity, -0]).buffer);
    expect(jsonDataText(fp32, bytes)).toBe("[1.5,NaN,Infinity,-Infinity,0]");
    expect(jsonDataText(datatypeInfo("INT32")!, new Uint8Array(new Int32Array([1, -2]).buffer))).toBe("[1,-2]");
    expect(jsonDataText(datatypeInfo("BOOL")!, new Uint8Array([1, 0]))).toBe("[true,false]");
  });

  test("jsonDataText() reads small and large tensors at any byte offset the same way", () => {
    // Up to 4 KiB the bytes are read through the module's scratch buffer; above, a view is read in place. A short
    // tensor after a longer one reads only its own values.
    for (const n of [3, 1024, 1500, 500, 2]) {
      for (const [datatype, Kind] of [["FP32", Float32Array], ["FP64", Float64Array]] as const) {
        const values = Array.from({ length: n }, (_, i) => (i % 7 === 3 ? -0 : (i - n / 2) / 8));
        const own = new Uint8Array(new Kind(values).buffer);
        const shifted = new Uint8Array(own.byteLength + 3).subarray(3);
        shifted.set(own);
        const want = JSON.stringify(values);
        expect(jsonDataText(datatypeInfo(datatype)!, own)).toBe(want);
        expect(jsonDataText(datatypeInfo(datatype)!, shifted)).toBe(want);
      }
    }
  });

  test("decodeJsonData() rejects out-of-range integers, wrong types and wrong counts", () => {
    expect(() => decodeJsonData("x", datatypeInfo("UINT8")!, [256], 1)).toThrow(
      "element 0 is 256, expected an integer in the UINT8 range",
    );
    expect(() => decodeJsonData("x", datatypeInfo("INT32")!, [1.5], 1)).toThrow("element 0 is 1.5");
    expect(() => decodeJsonData("x", datatypeInfo("INT64")!, [2 ** 53], 1)).toThrow(
      "expected an integer from -(2^53-1) to 2^53-1",
    );
    expect(() => decodeJsonData("x", datatypeInfo("BOOL")!, [1], 1)).toThrow("expected a boolean");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [null], 1)).toThrow(
      "element 0 is null, expected a finite number within the FP32 range",
    );
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [1, 2], 1)).toThrow("more than the 1 elements");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [], 1)).toThrow("holds 0 elements, its shape has 1");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [[]], 1)).toThrow(
      '"data"[0] is an array inside a flat list',
    );
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, "1", 1)).toThrow('"data" must be an array');
    expect(() => decodeJsonData("x", datatypeInfo("BF16")!, [1], 1)).toThrow("BF16 has no JSON form");
  });

  test("encodeJsonData() writes every JSON datatype back as it was read", () => {
    const cases: Array<[string, Array<number | boolean>]> = [
      ["BOOL", [true, false]],
      ["UINT8", [0, 255]],
      ["INT8", [-128, 127]],
      ["UINT16", [65535, 1]],
      ["INT16", [-32768, 5]],
      ["UINT32", [4294967295, 0]],
      ["INT32", [-2147483648, 7]],
      ["UINT64", [2 ** 53 - 1, 0]],
      ["INT64", [-(2 ** 53 - 1), 3]],
      ["FP32", [1.5, -0.25]],
      ["FP64", [Math.PI, -1e300]],
    ];
    for (const [dt, values] of cases) {
      const info = datatypeInfo(dt)!;
      expect(encodeJsonData(info, decodeJsonData("x", info, values, values.length))).toEqual(values);
    }
    expect(() => encodeJsonData(datatypeInfo("FP16")!, new Uint8Array(2))).toThrow(RangeError);
    // Small tensors share one scratch buffer: one read after a longer one holds only its own values.
    const int32 = datatypeInfo("INT32")!;
    const long = Array.from({ length: 1000 }, (_, i) => i - 500);
    expect(encodeJsonData(int32, new Uint8Array(new Int32Array(long).buffer))).toEqual(long);
    expect(encodeJsonData(int32, new Uint8Array(new Int32Array([9, -9]).buffer))).toEqual([9, -9]);
  });
});
