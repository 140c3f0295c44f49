/**
 * The status matrix: bad requests of every kind get the documented HTTP status (docs/rest-api.md) and a
 * `{"error": "..."}` body that conforms to the OpenAPI document, and the server stays live afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { control, type HttpFixture, httpFixture, injectOnModel, post } from "./_http.ts";
import { OipValidator } from "./_oip.ts";

const LIMIT = 64 * 1024;
const oip = new OipValidator();
let fx: HttpFixture;

const x8 = (data: unknown = [1, -1, 2, -2, 3, -3, 4, -4], extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: "x", shape: [8], datatype: "FP32", data, ...extra }],
});
const relu = (shape: unknown) => ({ inputs: [{ name: "x", shape, datatype: "FP32", data: [1, 2, 3, 4, 5, 6, 7, 8] }] });

/** A relu request padded with spaces to exactly `n` bytes. */
function paddedTo(n: number): string {
  const s = JSON.stringify(x8());
  return s + " ".repeat(n - s.length);
}

/** A body stream in 4 KiB chunks with no Content-Length: what a chunked upload looks like to the app. */
function chunked(total: number): RequestInit {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= total) return c.close();
      const n = Math.min(4096, total - sent);
      sent += n;
      c.enqueue(new Uint8Array(n).fill(0x20));
    },
  });
  return { method: "POST", body, duplex: "half" } as RequestInit;
}

interface Row {
  readonly what: string;
  readonly method: string;
  readonly path: string;
  readonly init?: () => RequestInit;
  readonly status: number;
  readonly error: RegExp;
}

const INFER = "/v2/models/relu/infer";

const ROWS: Row[] = [
  {
    what: "an unknown model",
    method: "POST",
    path: "/v2/models/resnet/infer",
    init: () => post(x8()),
    status: 404,
    error: /Cannot find model "resnet"/,
  },
  {
    what: "an unknown version",
    method: "POST",
    path: "/v2/models/relu/versions/7/infer",
    init: () => post(x8()),
    status: 404,
    error: /version "7"/,
  },
  {
    what: "an unknown input",
    method: "POST",
    path: INFER,
    init: () => post({ inputs: [{ name: "z", shape: [8], datatype: "FP32", data: [1, 2, 3, 4, 5, 6, 7, 8] }] }),
    status: 400,
    error: /no such input/,
  },
  {
    what: "a missing input",
    method: "POST",
    path: "/v2/models/add/infer",
    init: () => post({ inputs: [{ name: "a", shape: [16], datatype: "FP32", data: new Array(16).fill(1) }] }),
    status: 400,
    error: /input "b" is missing/,
  },
  {
    what: "a duplicate input",
    method: "POST",
    path: INFER,
    init: () => post({ inputs: [x8().inputs[0], x8().inputs[0]] }),
    status: 400,
    error: /given twice/,
  },
  {
    what: "a wrong datatype",
    method: "POST",
    path: INFER,
    init: () => post({ inputs: [{ name: "x", shape: [8], datatype: "INT32", data: [1, 2, 3, 4, 5, 6, 7, 8] }] }),
    status: 400,
    error: /datatype is INT32, the model expects FP32/,
  },
  {
    what: "an unsupported datatype",
    method: "POST",
    path: INFER,
    init: () => post({ inputs: [{ name: "x", shape: [8], datatype: "BYTES", data: ["a"] }] }),
    status: 400,
    error: /"BYTES" is not supported/,
  },
  {
    what: "FP16 data in JSON",
    method: "POST",
    path: "/v2/models/mixed/infer",
    init: () => post({ inputs: [{ name: "h", shape: [4], datatype: "FP16", data: [1, 2, 3, 4] }] }),
    status: 400,
    error: /FP16 has no JSON form/,
  },
  {
    what: "data shorter than the shape",
    method: "POST",
    path: INFER,
    init: () => post(x8([1, 2, 3, 4, 5, 6, 7])),
    status: 400,
    error: /holds 7 elements, its shape has 8/,
  },
  {
    what: "data longer than the shape",
    method: "POST",
    path: INFER,
    init: () => post(x8(new Array(9).fill(0))),
    status: 400,
    error: /more than the 8 elements/,
  },
  {
    what: "a string element in FP32 data",
    method: "POST",
    path: INFER,
    init: () => post(x8([1, 2, 3, "4", 5, 6, 7, 8])),
    status: 400,
    error: /element 3 is "4", expected a finite number/,
  },
  {
    what: "a negative dimension",
    method: "POST",
    path: INFER,
    init: () => post(relu([-8])),
    status: 400,
    error: /dimension 0 is -8/,
  },
  {
    what: "a fractional dimension",
    method: "POST",
    path: INFER,
    init: () => post(relu([7.5])),
    status: 400,
    error: /dimension 0 is 7.5/,
  },
  {
    what: "huge dimensions",
    method: "POST",
    path: INFER,
    init: () => post(relu([4294967296, 4294967296, 4294967296])),
    status: 400,
    error: /too many elements/,
  },
  {
    what: "a dimension past 2^53",
    method: "POST",
    path: INFER,
    init: () => post(relu([1e300])),
    status: 400,
    error: /dimension 0 is 1e\+300/,
  },
  {
    what: "a dimension of 1e999 (JSON.parse: Infinity), shown as Infinity, not null",
    method: "POST",
    path: INFER,
    init: () => post('{"inputs":[{"name":"x","shape":[1e999],"datatype":"FP32","data":[1,2,3,4,5,6,7,8]}]}'),
    status: 400,
    error: /^Cannot read input "x": dimension 0 is Infinity, expected an integer from 0 to 2\^53-1$/,
  },
  {
    what: "a shape other than the model's",
    method: "POST",
    path: INFER,
    init: () => post(relu([2, 4])),
    status: 400,
    error: /shape is \[2, 4\], the model expects \[8\]/,
  },
  {
    what: "malformed JSON",
    method: "POST",
    path: INFER,
    init: () => post('{"inputs": [{"name": "x",'),
    status: 400,
    error: /Cannot parse the JSON body/,
  },
  {
    what: "a body that is not an object",
    method: "POST",
    path: INFER,
    init: () => post("[1, 2]"),
    status: 400,
    error: /must be a JSON object/,
  },
  {
    what: "JSON nested 10,000 deep",
    method: "POST",
    path: INFER,
    init: () => post(`{"inputs":${"[".repeat(10_000)}${"]".repeat(10_000)}}`),
    status: 400,
    error: /nests deeper than 64 levels/,
  },
  {
    what: "1,001 requested outputs",
    method: "POST",
    path: INFER,
    init: () => post({ ...x8(), outputs: Array.from({ length: 1001 }, () => ({ name: "y" })) }),
    status: 400,
    error: /1001 requested outputs is over the limit of 256/,
  },
  {
    what: "an unknown requested output",
    method: "POST",
    path: INFER,
    init: () => post({ ...x8(), outputs: [{ name: "logits" }] }),
    status: 400,
    error: /no such output/,
  },
  {
    what: "a non-string id",
    method: "POST",
    path: INFER,
    init: () => post({ ...x8(), id: 42 }),
    status: 400,
    error: /"id" must be a string/,
  },
  {
    what: "the model name ../etc",
    method: "POST",
    path: "/v2/models/..%2Fetc/infer",
    init: () => post(x8()),
    status: 400,
    error: /Invalid model name "..\/etc"/,
  },
  {
    what: "the model name ../etc to load",
    method: "POST",
    path: "/v2/repository/models/..%2Fetc/load",
    init: () => ({ method: "POST" }),
    status: 400,
    error: /Invalid model name/,
  },
  {
    what: "a body at limit - 1 bytes",
    method: "POST",
    path: INFER,
    init: () => post(paddedTo(LIMIT - 1)),
    status: 200,
    error: /^$/,
  },
  {
    what: "a body at the limit",
    method: "POST",
    path: INFER,
    init: () => post(paddedTo(LIMIT)),
    status: 200,
    error: /^$/,
  },
  {
    what: "a body at limit + 1 bytes",
    method: "POST",
    path: INFER,
    init: () => post(paddedTo(LIMIT + 1)),
    status: 413,
    error: /over the 65536-byte limit/,
  },
  {
    what: "a chunked body over the limit",
    method: "POST",
    path: INFER,
    init: () => chunked(LIMIT + 4096),
    status: 413,
    error: /over the 65536-byte limit/,
  },
  {
    what: "conflicting Content-Length and Transfer-Encoding",
    method: "POST",
    path: INFER,
    init: () => post(JSON.stringify(x8()), { "content-length": "5", "transfer-encoding": "chunked" }),
    status: 400,
    error: /both Content-Length and Transfer-Encoding/,
  },
  {
    what: "a Content-Length that disagrees with the body",
    method: "POST",
    path: INFER,
    init: () => post(JSON.stringify(x8()), { "content-length": "20" }),
    status: 400,
    error: /Content-Length is 20/,
  },
  {
    what: "binary_data_size that disagrees with the shape",
    method: "POST",
    path: INFER,
    init: () => {
      const head = '{"inputs":[{"name":"x","shape":[8],"datatype":"FP32","parameters":{"binary_data_size":16}}]}';
      return post(head + "0".repeat(16), { "inference-header-content-length": String(head.length) });
    },
    status: 400,
    error: /"binary_data_size" is 16, its shape and datatype make 32 bytes/,
  },
  {
    what: "Inference-Header-Content-Length past the body",
    method: "POST",
    path: INFER,
    init: () => post(x8(), { "inference-header-content-length": "100000" }),
    status: 400,
    error: /not a byte count within/,
  },
  { what: "a GET on infer", method: "GET", path: INFER, status: 405, error: /allowed methods are POST/ },
  {
    what: "a DELETE on model metadata",
    method: "DELETE",
    path: "/v2/models/relu",
    status: 405,
    error: /allowed methods are GET, HEAD/,
  },
  { what: "an unknown endpoint", method: "GET", path: "/v3/models", status: 404, error: /no such endpoint/ },
];

describe("REST status matrix", () => {
  beforeAll(async () => {
    fx = await httpFixture({ limits: { maxBodyBytes: LIMIT } });
  });
  afterAll(async () => {
    await fx.close();
  });

  for (const row of ROWS) {
    const route = row.path.replace(/^\/v2\/models\/(relu|resnet|add|mixed|\.\.%2Fetc)\//, "/v2/models/{m}/").replace(
      "/repository/models/..%2Fetc/",
      "/repository/models/{m}/",
    );
    test(`${row.method} ${route} returns ${row.status} for ${row.what}`, async () => {
      const init = { method: row.method, ...row.init?.() };
      const res = await fx.app.request(row.path, init);
      expect(await oip.check(row.method, row.path, res)).toEqual([]);
      if (row.status === 200) {
        expect(res.status).toBe(200);
        expect((await res.json()).outputs[0].data).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
        return;
      }
      const body = await res.json();
      expect({ status: res.status, keys: Object.keys(body) }).toEqual({ status: row.status, keys: ["error"] });
      expect(body.error).toMatch(row.error);
      if (row.status === 405) expect(res.headers.get("allow")).toContain(row.method === "GET" ? "POST" : "GET");
    });
  }

  test("POST /v2/models/{m}/infer returns 500 naming the fault when the model traps, and 500 again: a trap (6) does not poison", async () => {
    const req = () => post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] });
    const first = await fx.app.request("/v2/models/trap/infer", req());
    expect(first.status).toBe(500);
    expect(await oip.check("POST", "/v2/models/trap/infer", first)).toEqual([]);
    expect((await first.json()).error).toMatch(/NRT_HW_ERROR/);
    // Band A: the model stays ready and the next request really runs (and traps again).
    expect((await fx.app.request("/v2/models/trap/ready")).status).toBe(200);
    const again = await fx.app.request("/v2/models/trap/infer", req());
    expect(again.status).toBe(500);
    expect((await again.json()).error).toMatch(/NRT_HW_ERROR/);
    const metrics = await (await fx.app.request("/metrics")).text();
    expect(metrics).toMatch(/^nrt_execution_status_total\{status="hardware_error"\} 2$/m);
    expect(metrics).toMatch(/^nrt_inference_request_failure\{model="trap",version="1",reason="BACKEND"\} 2$/m);
    expect(metrics).toMatch(/^nrt_model_ready\{model="trap",version="1"\} 1$/m);
  });

  test("POST /v2/models/{m}/infer returns 500 for a Band-C fault (1202), then 503 while the model is poisoned", async () => {
    const req = () => post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] });
    injectOnModel(fx, "trap", { kind: "nc-ue" });
    const first = await fx.app.request("/v2/models/trap/infer", req());
    expect(first.status).toBe(500);
    expect((await first.json()).error).toMatch(/NRT_EXEC_HW_ERR_NC_UE/);
    const again = await fx.app.request("/v2/models/trap/infer", req());
    expect(again.status).toBe(503);
    expect((await again.json()).error).toMatch(/Model "trap" is not ready: it is poisoned by NRT_EXEC_HW_ERR_NC_UE/);
    const ready = await fx.app.request("/v2/models/trap/ready");
    expect(ready.status).toBe(503);
    expect(await oip.check("GET", "/v2/models/trap/ready", ready)).toEqual([]);
    expect((await fx.app.request("/v2/health/ready")).status).toBe(503);
    const index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.find((e: { name: string }) => e.name === "trap").reason).toMatch(/poisoned by NRT_EXEC_HW_ERR_NC_UE/);
    // Other models are unaffected.
    expect((await fx.app.request(INFER, post(x8()))).status).toBe(200);
    const metrics = await (await fx.app.request("/metrics")).text();
    expect(metrics).toMatch(/^nrt_inference_request_failure\{model="trap",version="1",reason="BACKEND"\} 3$/m);
    expect(metrics).toMatch(/^nrt_inference_request_failure\{model="trap",version="1",reason="REJECTED"\} 1$/m);
    expect(metrics).toMatch(/^nrt_model_ready\{model="trap",version="1"\} 0$/m);
  });

  test("POST /v2/repository/models/{m}/load reloads a poisoned model", async () => {
    const res = await fx.app.request("/v2/repository/models/trap/load", control());
    expect(await res.json()).toEqual({ name: "trap", state: "READY" });
    expect((await fx.app.request("/v2/models/trap/ready")).status).toBe(200);
    expect((await fx.app.request("/v2/health/ready")).status).toBe(200);
  });

  test("GET /v2/health/live returns 200 after every bad request", async () => {
    const res = await fx.app.request("/v2/health/live");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ live: true });
  });
});
