import { describe, expect, test } from "bun:test";
import { datatypeInfo, decodeJsonData, dtypeInfo, encodeJsonData } from "./datatype.ts";

describe("datatype", () => {
  test("datatypeInfo() and dtypeInfo() map the KServe names to the NEFF dtypes both ways", () => {
    const pairs = [["BOOL", "bool"], ["UINT8", "uint8"], ["UINT16", "uint16"], ["UINT32", "uint32"], ["UINT64", "uint64"], ["INT8", "int8"], ["INT16", "int16"], ["INT32", "int32"], ["INT64", "int64"], ["FP16", "float16"], ["BF16", "bfloat16"], ["FP32", "float32"], ["FP64", "float64"]];
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
    const flat = decodeJsonData("x", info, [1, -2, 3, -4], 4);
    expect(decodeJsonData("x", info, [[1, -2], [3, -4]], 4)).toEqual(flat);
    expect(Array.from(flat)).toEqual([1, 0, 0xfe, 0xff, 3, 0, 0xfc, 0xff]);
  });

  test("decodeJsonData() rejects out-of-range integers, wrong types and wrong counts", () => {
    expect(() => decodeJsonData("x", datatypeInfo("UINT8")!, [256], 1)).toThrow("element 0 is 256, expected an integer in the UINT8 range");
    expect(() => decodeJsonData("x", datatypeInfo("INT32")!, [1.5], 1)).toThrow("element 0 is 1.5");
    expect(() => decodeJsonData("x", datatypeInfo("INT64")!, [2 ** 53], 1)).toThrow("expected an integer from -(2^53-1) to 2^53-1");
    expect(() => decodeJsonData("x", datatypeInfo("BOOL")!, [1], 1)).toThrow("expected a boolean");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [null], 1)).toThrow("element 0 is null, expected a number");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [1, 2], 1)).toThrow("more than the 1 elements");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, [[]], 1)).toThrow("holds 0 elements, its shape has 1");
    expect(() => decodeJsonData("x", datatypeInfo("FP32")!, "1", 1)).toThrow('"data" must be an array');
    expect(() => decodeJsonData("x", datatypeInfo("BF16")!, [1], 1)).toThrow("BF16 has no JSON form");
  });

  test("encodeJsonData() writes every JSON datatype back as it was read", () => {
    const cases: Array<[string, Array<number | boolean>]> = [
      ["BOOL", [true, false]], ["UINT8", [0, 255]], ["INT8", [-128, 127]], ["UINT16", [65535, 1]], ["INT16", [-32768, 5]],
      ["UINT32", [4294967295, 0]], ["INT32", [-2147483648, 7]], ["UINT64", [2 ** 53 - 1, 0]], ["INT64", [-(2 ** 53 - 1), 3]],
      ["FP32", [1.5, -0.25]], ["FP64", [Math.PI, -1e300]],
    ];
    for (const [dt, values] of cases) {
      const info = datatypeInfo(dt)!;
      expect(encodeJsonData(info, decodeJsonData("x", info, values, values.length))).toEqual(values);
    }
    expect(() => encodeJsonData(datatypeInfo("FP16")!, new Uint8Array(2))).toThrow(RangeError);
  });
});
