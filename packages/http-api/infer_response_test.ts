import { describe, expect, test } from "bun:test";
import { datatypeInfo } from "./datatype.ts";
import type { InferPlan } from "./infer_request.ts";
import { INFERENCE_HEADER_CONTENT_LENGTH, inferResponse } from "./infer_response.ts";

/** A plan returning `outputs` (name, datatype, shape, binary), with the request id `id`. */
function plan(
  outputs: Array<{ name: string; datatype: string; shape: number[]; binary?: boolean }>,
  id?: string,
): InferPlan {
  return {
    id,
    inputs: new Map(),
    outputs: outputs.map((o) => {
      const info = datatypeInfo(o.datatype)!;
      const size = o.shape.reduce((a, b) => a * b, 1) * info.bytes;
      return { tensor: { name: o.name, dtype: info.dtype, shape: o.shape, size }, info, binary: o.binary ?? false };
    }),
  };
}

const bytesOf = (a: ArrayBufferView): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

describe("inferResponse", () => {
  test("finite JSON outputs: the members in the protocol's order, numbers as JSON writes them", async () => {
    const res = inferResponse(
      "relu",
      "1",
      plan([{ name: "y", datatype: "FP32", shape: [2, 2] }, { name: "k", datatype: "INT32", shape: [2] }], "42"),
      new Map([
        ["y", bytesOf(new Float32Array([0, -0, 1.5, 3]))],
        ["k", bytesOf(new Int32Array([-1, 7]))],
      ]),
    );
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(
      '{"model_name":"relu","model_version":"1","id":"42","outputs":[' +
        '{"name":"y","datatype":"FP32","shape":[2,2],"data":[0,0,1.5,3]},' +
        '{"name":"k","datatype":"INT32","shape":[2],"data":[-1,7]}]}',
    );
  });

  test("without an id there is no id member; BOOL data are booleans", async () => {
    const res = inferResponse(
      "m",
      "2",
      plan([{ name: "f", datatype: "BOOL", shape: [3] }]),
      new Map([["f", new Uint8Array([1, 0, 2])]]),
    );
    expect(await res.text()).toBe(
      '{"model_name":"m","model_version":"2","outputs":[' +
        '{"name":"f","datatype":"BOOL","shape":[3],"data":[true,false,true]}]}',
    );
  });

  test("NaN and ±Infinity are written as tokens, never null (FP32 and FP64)", async () => {
    const res = inferResponse(
      "m",
      "1",
      plan([{ name: "a", datatype: "FP32", shape: [3] }, { name: "b", datatype: "FP64", shape: [2] }], "n"),
      new Map([
        ["a", bytesOf(new Float32Array([NaN, 2, -Infinity]))],
        ["b", bytesOf(new Float64Array([0.1, Infinity]))],
      ]),
    );
    expect(await res.text()).toBe(
      '{"model_name":"m","model_version":"1","id":"n","outputs":[' +
        '{"name":"a","datatype":"FP32","shape":[3],"data":[NaN,2,-Infinity]},' +
        '{"name":"b","datatype":"FP64","shape":[2],"data":[0.1,Infinity]}]}',
    );
  });

  test("a binary output: the JSON first, its length in the header, then the bytes", async () => {
    const y = bytesOf(new Float32Array([1, 2]));
    const res = inferResponse(
      "m",
      "1",
      plan([{ name: "y", datatype: "FP32", shape: [2], binary: true }, { name: "k", datatype: "INT32", shape: [1] }]),
      new Map([["y", y], ["k", bytesOf(new Int32Array([5]))]]),
    );
    const json =
      '{"model_name":"m","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":' +
      '{"binary_data_size":8}},{"name":"k","datatype":"INT32","shape":[1],"data":[5]}]}';
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get(INFERENCE_HEADER_CONTENT_LENGTH)).toBe(String(json.length));
    const body = new Uint8Array(await res.arrayBuffer());
    expect(new TextDecoder().decode(body.subarray(0, json.length))).toBe(json);
    expect([...body.subarray(json.length)]).toEqual([...y]);
  });
});
