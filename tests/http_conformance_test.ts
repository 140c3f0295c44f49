/**
 * Conformance of the REST server to the Open Inference Protocol: every response below, JSON and binary, validates
 * against the OpenAPI document (tests/_oip.ts), and carries the right values.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { binaryBody, type HttpFixture, httpFixture, post, readBinaryResponse } from "./_http.ts";
import { OipValidator } from "./_oip.ts";

const oip = new OipValidator();
let fx: HttpFixture;

/** Sends a request through `app.request` and fails on any response that does not conform. */
async function call(path: string, init?: RequestInit): Promise<Response> {
  const res = await fx.app.request(path, init);
  expect({ path, problems: await oip.check(init?.method ?? "GET", path, res) }).toEqual({ path, problems: [] });
  return res;
}

const f32 = (xs: number[]): Uint8Array => new Uint8Array(Float32Array.from(xs).buffer);

describe("REST conformance (Open Inference Protocol v2)", () => {
  beforeAll(async () => {
    fx = await httpFixture();
  });
  afterAll(async () => {
    await fx.close();
  });

  test("every operation of the OpenAPI document answers 200 with its schema", async () => {
    const doc = parse(
      readFileSync(new URL("../../shared/fixtures/oip/open_inference_rest.yaml", import.meta.url), "utf8"),
    ) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const infer = { inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] };
    let operations = 0;
    for (const [tpl, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops).filter((k) => k === "get" || k === "post")) {
        for (
          const path of new Set([
            tpl.replace("${MODEL_NAME}", "relu").replace("${MODEL_VERSION}", "1"),
            tpl.replace("${MODEL_NAME}", "relu").replace("/versions/${MODEL_VERSION}", ""),
          ])
        ) {
          const res = await call(path, method === "post" ? post(infer) : undefined);
          expect({ method, path, status: res.status }).toEqual({ method, path, status: 200 });
          operations++;
        }
      }
    }
    expect(operations).toBeGreaterThanOrEqual(9);
  });

  test("GET /v2 names the server and its extensions", async () => {
    for (const path of ["/v2", "/v2/"]) {
      const body = await (await call(path)).json();
      expect(body).toEqual({
        name: "nrt",
        version: "0.1.0",
        extensions: ["binary_tensor_data", "model_repository", "statistics"],
      });
    }
  });

  test("GET /v2/health/live and /v2/health/ready return 200", async () => {
    expect(await (await call("/v2/health/live")).json()).toEqual({ live: true });
    expect(await (await call("/v2/health/ready")).json()).toEqual({ ready: true });
  });

  test("GET /v2/models/{m} returns KServe datatypes, shapes and platform neuron", async () => {
    expect(await (await call("/v2/models/relu")).json()).toEqual({
      name: "relu",
      versions: ["1"],
      platform: "neuron",
      inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
      outputs: [{ name: "y", datatype: "FP32", shape: [8] }],
      instances: [{ name: "relu_0", vnc: 3, ready: true }],
    });
    const mixed = await (await call("/v2/models/mixed/versions/1")).json();
    expect(mixed.inputs.map((t: { datatype: string }) => t.datatype)).toEqual([
      "FP16",
      "BF16",
      "INT32",
      "BOOL",
      "UINT8",
      "INT64",
    ]);
    expect(mixed.outputs).toEqual([
      { name: "oh", datatype: "FP16", shape: [4] },
      { name: "oi", datatype: "INT64", shape: [3] },
      { name: "od", datatype: "FP64", shape: [2] },
    ]);
  });

  test("GET /v2/models/{m}/ready returns the model name and ready", async () => {
    expect(await (await call("/v2/models/relu/ready")).json()).toEqual({ name: "relu", ready: true });
    expect((await call("/v2/models/relu/versions/1/ready")).status).toBe(200);
  });

  test("POST /v2/models/{m}/infer runs relu on JSON data and echoes the id", async () => {
    const res = await call(
      "/v2/models/relu/infer",
      post({
        id: "42",
        inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2.5, -0, 0, 0.5, 1, 1e6, -1e6] }],
      }),
    );
    expect(await res.json()).toEqual({
      model_name: "relu",
      model_version: "1",
      id: "42",
      outputs: [{ name: "y", datatype: "FP32", shape: [8], data: [0, 0, 0, 0, 0.5, 1, 1e6, 0] }],
    });
  });

  test("POST /v2/models/{m}/infer refuses data nested other than as its shape (nested-as-shape: datatype_test.ts)", async () => {
    const a = Array.from({ length: 16 }, (_, i) => i), b = Array.from({ length: 16 }, (_, i) => 100 * i);
    const ragged = await call(
      "/v2/models/add/versions/1/infer",
      post({
        inputs: [
          { name: "a", shape: [16], datatype: "FP32", data: [a.slice(0, 8), a.slice(8)] },
          { name: "b", shape: [16], datatype: "FP32", data: b },
        ],
      }),
    );
    expect(ragged.status).toBe(400);
    expect((await ragged.json()).error).toBe(
      'Cannot read input "a": "data"[0] is an array inside a flat list; send a flat array or one nested as the shape [16]',
    );
    const res = await call(
      "/v2/models/add/versions/1/infer",
      post({
        inputs: [{ name: "a", shape: [16], datatype: "FP32", data: a }, {
          name: "b",
          shape: [16],
          datatype: "FP32",
          data: b,
        }],
        outputs: [{ name: "out" }],
      }),
    );
    const body = await res.json();
    expect(body.outputs[0].data).toEqual(a.map((x, i) => x + b[i]));
    expect(body.id).toBeUndefined();
  });

  test("POST /v2/models/{m}/infer returns INT32 outputs as JSON integers", async () => {
    const res = await call(
      "/v2/models/cpu_map/infer",
      post({ inputs: [{ name: "x", shape: [16], datatype: "FP32", data: new Array(16).fill(0) }] }),
    );
    const body = await res.json();
    expect(body.outputs[0]).toMatchObject({ name: "y", datatype: "INT32", shape: [16] });
    // Eight cores, 16 elements: core k writes elements 2k and 2k+1.
    expect(body.outputs[0].data).toEqual(Array.from({ length: 16 }, (_, i) => i >> 1));
  });

  test("POST /v2/models/{m}/infer reads binary inputs and returns binary outputs", async () => {
    const a = Array.from({ length: 16 }, (_, i) => i / 4), b = Array.from({ length: 16 }, (_, i) => -i);
    const { body, headers } = binaryBody(
      {
        id: "bin",
        inputs: [
          { name: "a", shape: [16], datatype: "FP32", parameters: { binary_data_size: 64 } },
          { name: "b", shape: [16], datatype: "FP32", parameters: { binary_data_size: 64 } },
        ],
        parameters: { binary_data_output: true },
      },
      f32(a),
      f32(b),
    );
    const res = await call("/v2/models/add/infer", { method: "POST", body, headers });
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    const { json, binary } = await readBinaryResponse(res);
    expect(json).toEqual({
      model_name: "add",
      model_version: "1",
      id: "bin",
      outputs: [{ name: "out", datatype: "FP32", shape: [16], parameters: { binary_data_size: 64 } }],
    });
    expect(Array.from(new Float32Array(binary.buffer))).toEqual(a.map((x, i) => x + b[i]));
  });

  test("POST /v2/models/{m}/infer mixes binary and JSON tensors of every datatype family", async () => {
    const h = new Uint8Array(8).fill(0x3c), bf = new Uint8Array(8).fill(0x3f);
    const { body, headers } = binaryBody(
      {
        inputs: [
          { name: "h", shape: [4], datatype: "FP16", parameters: { binary_data_size: 8 } },
          { name: "i", shape: [2, 3], datatype: "INT32", data: [[1, -2, 3], [4, 5, -6]] },
          { name: "bf", shape: [2, 2], datatype: "BF16", parameters: { binary_data_size: 8 } },
          { name: "flag", shape: [3], datatype: "BOOL", data: [true, false, true] },
          { name: "u8", shape: [5], datatype: "UINT8", data: [0, 1, 2, 254, 255] },
          { name: "l", shape: [2], datatype: "INT64", data: [-9007199254740991, 9007199254740991] },
        ],
        outputs: [{ name: "oh", parameters: { binary_data: true } }, { name: "oi" }, { name: "od" }],
      },
      h,
      bf,
    );
    const res = await call("/v2/models/mixed/infer", { method: "POST", body, headers });
    const { json, binary } = await readBinaryResponse(res);
    const outputs = json.outputs as Array<Record<string, unknown>>;
    expect(outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([["oh", "FP16", [4]], ["oi", "INT64", [3]], [
      "od",
      "FP64",
      [2],
    ]]);
    expect(outputs[0].parameters).toEqual({ binary_data_size: 8 });
    expect(binary.length).toBe(8);
    expect((outputs[1].data as number[]).length).toBe(3);
    expect((outputs[2].data as number[]).length).toBe(2);
  });

  test("POST /v2/models/{m}/infer with binary inputs and no binary output returns JSON", async () => {
    const { body, headers } = binaryBody({
      inputs: [{ name: "x", shape: [8], datatype: "FP32", parameters: { binary_data_size: 32 } }],
    }, f32([-1, 1, -2, 2, -3, 3, -4, 4]));
    const res = await call("/v2/models/relu/infer", { method: "POST", body, headers });
    expect(res.headers.get("inference-header-content-length")).toBeNull();
    expect((await res.json()).outputs[0].data).toEqual([0, 1, 0, 2, 0, 3, 0, 4]);
  });

  test("POST /v2/repository/index lists every model with its state", async () => {
    const index = await (await call("/v2/repository/index", { method: "POST" })).json();
    expect(index).toEqual(
      ["add", "cpu_map", "mixed", "relu", "trap"].map((name) => ({ name, version: "1", state: "READY", reason: "" })),
    );
    const ready = await (await call("/v2/repository/index", post({ ready: true }))).json();
    expect(ready.length).toBe(5);
  });

  test("GET /v2/models/{m}/stats counts the inferences in the statistics extension shape", async () => {
    const body = await (await call("/v2/models/relu/stats")).json();
    const s = body.model_stats[0];
    expect(s.name).toBe("relu");
    expect(s.inference_count).toBeGreaterThanOrEqual(2);
    expect(s.execution_count).toBe(s.inference_count);
    expect(s.inference_stats.success.count).toBe(s.inference_count);
    expect(s.inference_stats.compute_infer.ns).toBeGreaterThan(0);
    const all = await (await call("/v2/models/stats")).json();
    expect(all.model_stats.map((m: { name: string }) => m.name)).toEqual(["add", "cpu_map", "mixed", "relu", "trap"]);
  });

  test("GET /metrics exposes request counters, execution outcomes and device memory", async () => {
    const text = await (await call("/metrics")).text();
    const value = (re: RegExp): number => Number(text.match(re)?.[1] ?? NaN);
    expect(value(/^nrt_inference_request_success\{model="relu",version="1"\} (\d+)$/m)).toBeGreaterThanOrEqual(2);
    expect(value(/^nrt_inference_compute_infer_duration_us\{model="relu",version="1"\} (\d+)$/m)).toBeGreaterThan(0);
    expect(value(/^nrt_execution_status_total\{status="completed"\} (\d+)$/m)).toBeGreaterThanOrEqual(6);
    expect(value(/^nrt_device_memory_used_bytes\{device="0",core="0"\} (\d+)$/m)).toBeGreaterThan(0);
    expect(text).toContain("# TYPE nrt_inference_request_failure counter");
  });
});
