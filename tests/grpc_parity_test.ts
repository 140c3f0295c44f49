/**
 * The gRPC server answers as the REST app does for the same inputs: the same outputs, metadata and readiness, and
 * for every refusal the same message with the gRPC code of the REST status (README.md's table). REST is called
 * through `app.request`, gRPC through the independent client; both share one repository and one set of metrics.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createGrpcInferenceServer, type GrpcInferenceServer } from "../packages/grpc-api/mod.ts";
import { bytesOf, Code, failure, type OipClient, oipClient } from "./_grpc_client.ts";
import { binaryBody, type HttpFixture, httpFixture, injectOnModel, post, readBinaryResponse } from "./_http.ts";

/** The gRPC code README.md gives each REST status. */
const CODE_OF_HTTP: Record<number, number> = {
  400: Code.INVALID_ARGUMENT,
  404: Code.NOT_FOUND,
  413: Code.RESOURCE_EXHAUSTED,
  500: Code.INTERNAL,
  503: Code.UNAVAILABLE,
  504: Code.DEADLINE_EXCEEDED,
};

let fx: HttpFixture;
let server: GrpcInferenceServer;
let client: OipClient;

// deno-lint-ignore no-explicit-any
type Json = Record<string, any>;

/** A REST JSON input and the same input as a typed gRPC one. */
interface Tensor {
  name: string;
  datatype: string;
  shape: number[];
  data: unknown[];
  field: string;
}
const tensor = (name: string, datatype: string, shape: number[], data: unknown[], field = "fp32_contents"): Tensor => ({
  name,
  datatype,
  shape,
  data,
  field,
});
const asRest = (model: string, inputs: Tensor[], extra: Json = {}) => ({
  path: `/v2/models/${model}/infer`,
  body: { inputs: inputs.map(({ name, datatype, shape, data }) => ({ name, datatype, shape, data })), ...extra },
});
const asGrpc = (model: string, inputs: Tensor[], extra: Json = {}) => ({
  model_name: model,
  inputs: inputs.map(({ name, datatype, shape, data, field }) => ({
    name,
    datatype,
    shape,
    contents: { [field]: data },
  })),
  ...extra,
});

const RELU_X = tensor("x", "FP32", [8], [1, -1, 2, -2, 3, -3, 4, -4]);
const ADD_A = tensor("a", "FP32", [16], Array.from({ length: 16 }, (_, i) => i));
const ADD_B = tensor("b", "FP32", [16], Array.from({ length: 16 }, (_, i) => 0.5 - i));
const CPU_X = tensor("x", "FP32", [16], new Array(16).fill(1));

/** Refusals: the REST request, the gRPC request, and what both must say. */
const REFUSALS: Array<
  { what: string; model: string; inputs: Tensor[]; extra?: Json; grpcExtra?: Json; version?: string }
> = [
  { what: "a wrong shape", model: "relu", inputs: [tensor("x", "FP32", [2, 4], RELU_X.data)] },
  { what: "a wrong datatype", model: "relu", inputs: [tensor("x", "FP64", [8], RELU_X.data, "fp64_contents")] },
  { what: "an unsupported datatype", model: "relu", inputs: [tensor("x", "FP128", [8], [], "fp32_contents")] },
  { what: "an unknown input", model: "relu", inputs: [tensor("q", "FP32", [8], RELU_X.data)] },
  { what: "a missing input", model: "add", inputs: [ADD_A] },
  { what: "an input given twice", model: "add", inputs: [ADD_A, ADD_A, ADD_B] },
  { what: "an unknown output", model: "relu", inputs: [RELU_X], extra: { outputs: [{ name: "nope" }] } },
  {
    what: "an output requested twice",
    model: "relu",
    inputs: [RELU_X],
    extra: { outputs: [{ name: "y" }, { name: "y" }] },
  },
  {
    what: "too many requested outputs",
    model: "relu",
    inputs: [RELU_X],
    extra: { outputs: Array.from({ length: 257 }, () => ({ name: "y" })) },
  },
  { what: "a dimension that is not a count", model: "relu", inputs: [tensor("x", "FP32", [-8], RELU_X.data)] },
  { what: "an unknown model", model: "resnet", inputs: [RELU_X] },
  { what: "an invalid model name", model: ".hidden", inputs: [RELU_X] },
  { what: "an unknown version", model: "relu", inputs: [RELU_X], version: "2" },
];

async function restError(path: string, body: unknown): Promise<{ status: number; error: string }> {
  const res = await fx.app.request(path, post(body));
  return { status: res.status, error: (await res.json()).error };
}

describe("gRPC answers as REST", () => {
  beforeAll(async () => {
    fx = await httpFixture();
    server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics });
    const { port } = await server.listen("127.0.0.1", 0);
    client = oipClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    client.close();
    await server.close();
    await fx.close();
  });

  test("typed ModelInfer returns the outputs of a JSON /infer for relu, add and cpu_map", async () => {
    for (const [model, inputs] of [["relu", [RELU_X]], ["add", [ADD_A, ADD_B]], ["cpu_map", [CPU_X]]] as const) {
      const { path, body } = asRest(model, [...inputs], { id: `id-${model}` });
      const rest = await (await fx.app.request(path, post(body))).json();
      const grpc = await client.modelInfer(asGrpc(model, [...inputs], { id: `id-${model}` }));
      expect(grpc.id).toBe(rest.id);
      expect(grpc.model_name).toBe(rest.model_name);
      expect(grpc.model_version).toBe(rest.model_version);
      const values = (o: Json) => Object.values(o.contents as Record<string, unknown[]>).find((v) => v.length > 0);
      expect(
        grpc.outputs.map((o: Json) => ({
          name: o.name,
          datatype: o.datatype,
          shape: o.shape.map(Number),
          data: values(o),
        })),
      ).toEqual(
        rest.outputs.map((o: Json) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: o.data })),
      );
    }
  });

  test("raw ModelInfer returns the bytes of a binary-tensor /infer", async () => {
    const x = bytesOf(Float32Array.from(RELU_X.data as number[]));
    const { body, headers } = binaryBody({
      inputs: [{ name: "x", shape: [8], datatype: "FP32", parameters: { binary_data_size: 32 } }],
      parameters: { binary_data_output: true },
    }, x);
    const rest = await readBinaryResponse(
      await fx.app.request("/v2/models/relu/infer", { method: "POST", body: body as Uint8Array<ArrayBuffer>, headers }),
    );
    const grpc = await client.modelInfer({
      model_name: "relu",
      inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
      raw_input_contents: [x],
    });
    expect(new Uint8Array(grpc.raw_output_contents[0])).toEqual(rest.binary);
  });

  test("ModelMetadata, ModelReady, ServerLive and ServerReady agree with their REST endpoints", async () => {
    for (const m of ["relu", "add", "cpu_map", "mixed", "trap"]) {
      // REST adds the instances, which ModelMetadataResponse has no field for.
      const { instances, ...rest } = await (await fx.app.request(`/v2/models/${m}`)).json();
      expect(instances.length).toBeGreaterThan(0);
      const grpc = await client.modelMetadata(m);
      const numeric = (ts: Json[]) => ts.map((t) => ({ ...t, shape: t.shape.map(Number) }));
      expect({ ...grpc, inputs: numeric(grpc.inputs), outputs: numeric(grpc.outputs) }).toEqual(rest);
      expect((await client.modelReady(m)).ready).toBe((await fx.app.request(`/v2/models/${m}/ready`)).status === 200);
    }
    expect(await client.serverLive()).toEqual(await (await fx.app.request("/v2/health/live")).json());
    expect(await client.serverReady()).toEqual(await (await fx.app.request("/v2/health/ready")).json());
    const meta = await (await fx.app.request("/v2")).json();
    const grpcMeta = await client.serverMetadata();
    expect([grpcMeta.name, grpcMeta.version]).toEqual([meta.name, meta.version]);
  });

  for (const r of REFUSALS) {
    test(`ModelInfer refuses ${r.what} with the REST message and the code of the REST status`, async () => {
      const path = r.version === undefined
        ? `/v2/models/${r.model}/infer`
        : `/v2/models/${r.model}/versions/${r.version}/infer`;
      const rest = await restError(path, asRest(r.model, r.inputs, r.extra).body);
      const grpc = await failure(
        client.modelInfer(asGrpc(r.model, r.inputs, { ...r.extra, model_version: r.version ?? "" })),
      );
      expect({ code: grpc.code, details: grpc.details }).toEqual({
        code: CODE_OF_HTTP[rest.status],
        details: rest.error,
      });
    });
  }

  test("a fault and the poisoning after it answer as over REST: INTERNAL for 500, UNAVAILABLE for 503", async () => {
    const trap = [tensor("x", "FP32", [4], [1, 2, 3, 4])];
    // A trap (6, Band A) then a Band-C fault (1202), which poisons the model until it is loaded again.
    const rest = [
      await restError("/v2/models/trap/infer", asRest("trap", trap).body),
      (injectOnModel(fx, "trap", { kind: "nc-ue" }),
        await restError("/v2/models/trap/infer", asRest("trap", trap).body)),
      await restError("/v2/models/trap/infer", asRest("trap", trap).body),
    ];
    await fx.repository.load("trap");
    const grpc = [
      await failure(client.modelInfer(asGrpc("trap", trap))),
      (injectOnModel(fx, "trap", { kind: "nc-ue" }), await failure(client.modelInfer(asGrpc("trap", trap)))),
      await failure(client.modelInfer(asGrpc("trap", trap))),
    ];
    expect(grpc.map((e) => ({ code: e.code, details: e.details }))).toEqual(
      rest.map((e) => ({ code: CODE_OF_HTTP[e.status], details: e.error })),
    );
    expect(rest.map((e) => e.status)).toEqual([500, 500, 503]);
    await fx.repository.load("trap");
  });

  test("an unloaded model answers UNAVAILABLE with the REST 503 message", async () => {
    await fx.repository.unload("relu");
    const rest = await restError("/v2/models/relu/infer", asRest("relu", [RELU_X]).body);
    const grpc = await failure(client.modelInfer(asGrpc("relu", [RELU_X])));
    expect({ code: grpc.code, details: grpc.details }).toEqual({
      code: CODE_OF_HTTP[rest.status],
      details: rest.error,
    });
    expect(rest.status).toBe(503);
    await fx.repository.load("relu");
  });

  test("gRPC requests count in the REST app's metrics, successes and failures with their reason", async () => {
    const before = fx.metrics.modelStatistics("relu").inference_stats;
    await client.modelInfer(asGrpc("relu", [RELU_X]));
    await failure(client.modelInfer(asGrpc("relu", [tensor("x", "FP32", [4], [1, 2, 3, 4])])));
    const after = fx.metrics.modelStatistics("relu").inference_stats;
    expect([after.success.count - before.success.count, after.fail.count - before.fail.count]).toEqual([1, 1]);
    const text = await (await fx.app.request("/metrics")).text();
    expect(text).toMatch(/nrt_inference_request_failure\{model="relu",version="1",reason="OTHER"\} [1-9]/);
  });
});
