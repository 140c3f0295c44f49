/**
 * Numbers JSON cannot carry (docs/security.md, finding 7; docs/rest-api.md "Non-finite values"): an input that is not
 * finite, or past FP32's range, is refused with 400; an output NaN or ±Infinity is written as Triton writes it — the
 * bare tokens `NaN`, `Infinity`, `-Infinity` its clients read — never as `null`. Ragged nested data is refused.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { binaryBody, type HttpFixture, httpFixture, post } from "../_http.ts";

let fx: HttpFixture;
beforeAll(async () => {
  fx = await httpFixture();
});
afterAll(() => fx.close());

const errorOf = async (res: Response) => {
  expect(res.status).toBe(400);
  const body = await res.json();
  expect(Object.keys(body)).toEqual(["error"]);
  return body.error as string;
};

describe("non-finite values over REST", () => {
  test("an input of 1e999, or 1e39 for FP32, is refused with 400 naming the element", async () => {
    const text = '{"inputs":[{"name":"x","shape":[8],"datatype":"FP32","data":[0,1,2,1e999,4,5,6,7]}]}';
    expect(await errorOf(await fx.app.request("/v2/models/relu/infer", post(text)))).toBe(
      'Cannot read input "x": element 3 is Infinity, expected a finite number within the FP32 range (±3.4028235e38)',
    );
    const big = { inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1e39, 0, 0, 0, 0, 0, 0, 0] }] };
    expect(await errorOf(await fx.app.request("/v2/models/relu/infer", post(big)))).toMatch(/element 0 is 1e\+39/);
  });

  test("NaN and ±Infinity outputs are written as NaN/Infinity tokens, never null", async () => {
    // Non-finite inputs can come as binary data; relu passes NaN and +Infinity through and maps -Infinity to 0.
    const x = new Float32Array([NaN, Infinity, -Infinity, 1, -1, 2, -2, 3]);
    const { body, headers } = binaryBody({
      inputs: [{ name: "x", shape: [8], datatype: "FP32", parameters: { binary_data_size: 32 } }],
    }, new Uint8Array(x.buffer));
    const res = await fx.app.request("/v2/models/relu/infer", { method: "POST", body, headers });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("null");
    expect(text).toContain('"data":[NaN,Infinity,0,1,0,2,0,3]');
    // What a client that accepts the tokens (Python's json, Triton's rapidjson) reads back.
    const read = JSON.parse(text.replace(/\bNaN\b/g, '"NaN"').replace(/-?\bInfinity\b/g, (t) => `"${t}"`));
    expect(read.outputs[0].data.slice(0, 2)).toEqual(["NaN", "Infinity"]);
  });

  test("ragged nested data for shape [8] is refused", async () => {
    const ragged = { inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [[1, 2, 3], [4, 5, 6, 7, 8]] }] };
    expect(await errorOf(await fx.app.request("/v2/models/relu/infer", post(ragged)))).toBe(
      'Cannot read input "x": "data"[0] is an array inside a flat list; send a flat array or one nested as the shape [8]',
    );
  });
});
