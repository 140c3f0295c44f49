/**
 * The gRPC server of the Open Inference Protocol through an independent client built from the fixture proto
 * (tests/_grpc_client.ts): every RPC, every datatype typed and raw, requested outputs, the id, parameters, the
 * raw/typed output rule, and each kind of refusal with its gRPC code and message.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { CustomOpTensorSpec } from "@nrt/core";
import { createGrpcInferenceServer, type GrpcInferenceServer } from "../packages/grpc-api/mod.ts";
import { bytesOf, Code, failure, type OipClient, oipClient } from "./_grpc_client.ts";
import { type HttpFixture, httpFixture, injectOnModel, testModels } from "./_http.ts";
import { oneOpNeff } from "./_kernels.ts";

const t = (name: string, dtype: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype, shape });

/** Every typed datatype (BOOL to FP64) and its NEFF dtype. */
const TYPED: ReadonlyArray<[string, string]> = [
  ["BOOL", "bool"],
  ["UINT8", "uint8"],
  ["UINT16", "uint16"],
  ["UINT32", "uint32"],
  ["UINT64", "uint64"],
  ["INT8", "int8"],
  ["INT16", "int16"],
  ["INT32", "int32"],
  ["INT64", "int64"],
  ["FP32", "float32"],
  ["FP64", "float64"],
];
/** The datatypes without a typed field that the custom-op ABI can carry. */
const RAW_ONLY: ReadonlyArray<[string, string]> = [["FP16", "float16"], ["BF16", "bfloat16"]];
const BYTES: Record<string, number> = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  BF16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
};
const FIELD: Record<string, string> = {
  BOOL: "bool_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  FP32: "fp32_contents",
  FP64: "fp64_contents",
};
const lower = (dt: string): string => dt.toLowerCase();

/** Test models beyond testModels(): no-op kernels over every datatype, and one with an FP16 output for typed inputs. */
function extraModels(): Record<string, Uint8Array> {
  const typedIo = TYPED.map(([dt, dtype]) => t(lower(dt), dtype, [3]));
  const everyIo = [...TYPED, ...RAW_ONLY].map(([dt, dtype]) => t(lower(dt), dtype, [2]));
  return {
    "typed.neff": oneOpNeff("noop", "noop", typedIo, typedIo.map((x) => ({ ...x, name: `o_${x.name}` })), 1),
    "every.neff": oneOpNeff("noop", "noop", everyIo, everyIo.map((x) => ({ ...x, name: `o_${x.name}` })), 1),
    "half_out.neff": oneOpNeff("noop", "noop", [t("x", "float32", [4])], [
      t("y", "float16", [4]),
      t("z", "float32", [4]),
    ], 1),
  };
}

let fx: HttpFixture;
let server: GrpcInferenceServer;
let client: OipClient;

const reluIn = [1, -1, 2, -2, 3, -3, 4, -4];
const reluOut = [1, 0, 2, 0, 3, 0, 4, 0];
const reluTyped = (extra: Record<string, unknown> = {}) => ({
  model_name: "relu",
  inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn } }],
  ...extra,
});
const f32 = (xs: number[]): Uint8Array => bytesOf(Float32Array.from(xs));
const floats = (b: Uint8Array): number[] => Array.from(new Float32Array(new Uint8Array(b).buffer));

describe("GRPCInferenceService over @grpc/grpc-js", () => {
  beforeAll(async () => {
    fx = await httpFixture({ files: { ...testModels(), ...extraModels() } });
    server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics });
    const { port } = await server.listen("127.0.0.1", 0);
    client = oipClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    client.close();
    await server.close();
    await fx.close();
  });

  test("ServerLive, ServerReady and ServerMetadata answer for the server", async () => {
    expect(await client.serverLive()).toEqual({ live: true });
    expect(await client.serverReady()).toEqual({ ready: true });
    expect(await client.serverMetadata()).toEqual({ name: "nrt", version: "0.1.0", extensions: [] });
  });

  test("ModelReady answers for a model and its one version; NOT_FOUND for others", async () => {
    expect(await client.modelReady("relu")).toEqual({ ready: true });
    expect(await client.modelReady("relu", "1")).toEqual({ ready: true });
    const version = await failure(client.modelReady("relu", "2"));
    expect([version.code, version.details]).toEqual([
      Code.NOT_FOUND,
      'Cannot find version "2" of model "relu": it has only version 1',
    ]);
    const model = await failure(client.modelReady("resnet"));
    expect([model.code, model.details]).toEqual([
      Code.NOT_FOUND,
      'Cannot find model "resnet": it is not in the repository',
    ]);
    const name = await failure(client.modelReady("../etc"));
    expect([name.code, name.details]).toEqual([
      Code.INVALID_ARGUMENT,
      'Invalid model name "../etc": use 1 to 128 of A-Z a-z 0-9 _ . - and no leading dot',
    ]);
  });

  test("ModelMetadata lists versions, platform and tensors with protocol datatypes", async () => {
    const tensor = (name: string, datatype: string, shape: string[]) => ({ name, datatype, shape });
    expect(await client.modelMetadata("mixed", "1")).toEqual({
      name: "mixed",
      versions: ["1"],
      platform: "neuron",
      inputs: [
        tensor("h", "FP16", ["4"]),
        tensor("bf", "BF16", ["2", "2"]),
        tensor("i", "INT32", ["2", "3"]),
        tensor("flag", "BOOL", ["3"]),
        tensor("u8", "UINT8", ["5"]),
        tensor("l", "INT64", ["2"]),
      ],
      outputs: [tensor("oh", "FP16", ["4"]), tensor("oi", "INT64", ["3"]), tensor("od", "FP64", ["2"])],
    });
    const unknown = await failure(client.modelMetadata("relu", "7"));
    expect(unknown.code).toBe(Code.NOT_FOUND);
  });

  test("ModelInfer with typed contents answers typed contents and echoes the id", async () => {
    const res = await client.modelInfer(reluTyped({ id: "req-1" }));
    expect(res.model_name).toBe("relu");
    expect(res.model_version).toBe("1");
    expect(res.id).toBe("req-1");
    expect(res.raw_output_contents).toEqual([]);
    expect(res.outputs.map((o: { name: string; datatype: string; shape: string[] }) => [o.name, o.datatype, o.shape]))
      .toEqual([["y", "FP32", ["8"]]]);
    expect(res.outputs[0].contents.fp32_contents).toEqual(reluOut);
  });

  test("ModelInfer with raw_input_contents answers raw_output_contents", async () => {
    const res = await client.modelInfer({
      model_name: "relu",
      model_version: "1",
      inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
      raw_input_contents: [f32(reluIn)],
    });
    expect(res.id).toBe("");
    expect(res.outputs[0].contents).toBeNull();
    expect(floats(res.raw_output_contents[0])).toEqual(reluOut);
  });

  test("ModelInfer takes typed contents of every typed datatype and answers each in its field", async () => {
    const values: Record<string, unknown[]> = {
      BOOL: [true, false, true],
      UINT8: [0, 7, 255],
      UINT16: [0, 7, 65535],
      UINT32: [0, 7, 4294967295],
      UINT64: ["0", "7", "18446744073709551615"],
      INT8: [-128, 7, 127],
      INT16: [-32768, 7, 32767],
      INT32: [-2147483648, 7, 2147483647],
      INT64: ["-9223372036854775808", "7", "9223372036854775807"],
      FP32: [-1.5, 0, 2.5],
      FP64: [-1e300, 0, 1e300],
    };
    const inputs = TYPED.map(([dt]) => ({
      name: lower(dt),
      datatype: dt,
      shape: [3],
      contents: { [FIELD[dt]]: values[dt] },
    }));
    const res = await client.modelInfer({ model_name: "typed", inputs });
    expect(res.raw_output_contents).toEqual([]);
    expect(res.outputs.map((o: { name: string; datatype: string }) => [o.name, o.datatype])).toEqual(
      TYPED.map(([dt]) => [`o_${lower(dt)}`, dt]),
    );
    for (const [k, [dt]] of TYPED.entries()) {
      // The no-op kernel writes nothing: each output holds 3 elements of its kind, in its datatype's field only.
      const contents = res.outputs[k].contents as Record<string, unknown[]>;
      const kind = dt === "BOOL" ? "boolean" : /INT64/.test(dt) ? "string" : "number";
      expect({ dt, kinds: contents[FIELD[dt]].map((v) => typeof v) }).toEqual({ dt, kinds: [kind, kind, kind] });
      expect(Object.entries(contents).filter(([f, v]) => f !== FIELD[dt] && v.length > 0)).toEqual([]);
    }
  });

  test("ModelInfer takes raw contents of every datatype, FP16 and BF16 included, and answers raw", async () => {
    const all = [...TYPED, ...RAW_ONLY];
    const inputs = all.map(([dt]) => ({ name: lower(dt), datatype: dt, shape: [2] }));
    const raw = all.map(([dt]) => new Uint8Array(2 * BYTES[dt]).fill(1));
    const res = await client.modelInfer({ model_name: "every", inputs, raw_input_contents: raw });
    expect(
      res.outputs.map((o: { name: string; datatype: string; contents: unknown }) => [o.name, o.datatype, o.contents]),
    ).toEqual(
      all.map(([dt]) => [`o_${lower(dt)}`, dt, null]),
    );
    expect(res.raw_output_contents.map((b: Uint8Array) => b.length)).toEqual(all.map(([dt]) => 2 * BYTES[dt]));
  });

  test("ModelInfer on the mixed model returns the requested outputs, raw, in the requested order", async () => {
    const inputs = [
      { name: "h", datatype: "FP16", shape: [4] },
      { name: "bf", datatype: "BF16", shape: [2, 2] },
      { name: "i", datatype: "INT32", shape: [2, 3] },
      { name: "flag", datatype: "BOOL", shape: [3] },
      { name: "u8", datatype: "UINT8", shape: [5] },
      { name: "l", datatype: "INT64", shape: [2] },
    ];
    const raw = [
      new Uint8Array(8),
      new Uint8Array(8),
      bytesOf(Int32Array.from([1, -2, 3, 4, 5, -6])),
      new Uint8Array([1, 0, 1]),
      new Uint8Array([0, 1, 2, 254, 255]),
      bytesOf(BigInt64Array.from([-1n, 1n])),
    ];
    const res = await client.modelInfer({
      model_name: "mixed",
      inputs,
      raw_input_contents: raw,
      outputs: [{ name: "od" }, { name: "oh" }],
    });
    expect(res.outputs.map((o: { name: string; datatype: string; shape: string[] }) => [o.name, o.datatype, o.shape]))
      .toEqual([["od", "FP64", ["2"]], ["oh", "FP16", ["4"]]]);
    expect(res.raw_output_contents.map((b: Uint8Array) => b.length)).toEqual([16, 8]);
  });

  test("ModelInfer answers raw when an output has no typed field, and refuses typed outputs then", async () => {
    const req = {
      model_name: "half_out",
      inputs: [{ name: "x", datatype: "FP32", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
    };
    const res = await client.modelInfer(req);
    expect(res.raw_output_contents.map((b: Uint8Array) => b.length)).toEqual([8, 16]);
    const typedOnly = await client.modelInfer({ ...req, outputs: [{ name: "z" }] });
    expect([typedOnly.raw_output_contents, typedOnly.outputs[0].contents.fp32_contents.length]).toEqual([[], 4]);
    const refused = await failure(
      client.modelInfer({ ...req, parameters: { binary_data_output: { bool_param: false } } }),
    );
    expect([refused.code, refused.details]).toEqual([
      Code.INVALID_ARGUMENT,
      'Cannot return output "y": FP16 has no typed contents field; leave "binary_data_output" unset or true',
    ]);
  });

  test("ModelInfer accepts request, input and output parameters; binary_data_output asks for raw outputs", async () => {
    const res = await client.modelInfer({
      ...reluTyped(),
      parameters: {
        binary_data_output: { bool_param: true },
        priority: { int64_param: 3 },
        note: { string_param: "x" },
      },
      inputs: [{
        name: "x",
        datatype: "FP32",
        shape: [8],
        contents: { fp32_contents: reluIn },
        parameters: { any: { bool_param: true } },
      }],
      outputs: [{ name: "y", parameters: { binary_data: { bool_param: false } } }],
    });
    expect(floats(res.raw_output_contents[0])).toEqual(reluOut);
    const bad = await failure(
      client.modelInfer(reluTyped({ parameters: { binary_data_output: { string_param: "yes" } } })),
    );
    expect([bad.code, bad.details]).toEqual([
      Code.INVALID_ARGUMENT,
      'Cannot read the request: parameter "binary_data_output" must be a bool_param',
    ]);
  });

  test("ModelInfer refuses a wrong shape, datatype, input, count or contents with INVALID_ARGUMENT", async () => {
    const x = (o: Record<string, unknown>) => ({
      model_name: "relu",
      inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn }, ...o }],
    });
    const cases: Array<[string, Record<string, unknown>, string]> = [
      [
        "wrong shape",
        x({ shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }),
        'Cannot read input "x": shape is [4], the model expects [8]',
      ],
      [
        "wrong datatype",
        x({ datatype: "FP64", contents: { fp64_contents: reluIn } }),
        'Cannot read input "x": datatype is FP64, the model expects FP32',
      ],
      [
        "unsupported datatype",
        x({ datatype: "BYTES", contents: null }),
        'Cannot read input "x": datatype "BYTES" is not supported',
      ],
      [
        "negative dimension",
        x({ shape: [-1] }),
        'Cannot read input "x": dimension 0 is -1, expected an integer from 0 to 2^53-1',
      ],
      [
        "a dimension past 2^53, named as sent (an int64 read as a number would round it)",
        x({ shape: ["9223372036854775807"] }),
        'Cannot read input "x": dimension 0 is "9223372036854775807", expected an integer from 0 to 2^53-1',
      ],
      ["unknown input", x({ name: "z" }), 'Cannot read input "z": the model has no such input; its inputs are x'],
      ["missing input", { model_name: "relu", inputs: [] }, 'Cannot run the request: input "x" is missing'],
      [
        "short contents",
        x({ contents: { fp32_contents: [1] } }),
        'Cannot read input "x": contents.fp32_contents holds 1 elements, its shape has 8',
      ],
      [
        "wrong field",
        x({ contents: { int_contents: [1, 2, 3, 4, 5, 6, 7, 8] } }),
        'Cannot read input "x": FP32 data goes in contents.fp32_contents, not contents.int_contents',
      ],
      ["raw short", {
        model_name: "relu",
        inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
        raw_input_contents: [new Uint8Array(31)],
      }, 'Cannot read input "x": raw_input_contents[0] holds 31 bytes, its shape and datatype make 32'],
      [
        "raw and contents",
        { ...x({}), raw_input_contents: [f32(reluIn)] },
        'Cannot read input "x": it has contents while the request uses raw_input_contents',
      ],
      [
        "raw count",
        { ...x({ contents: null }), raw_input_contents: [f32(reluIn), f32(reluIn)] },
        "Cannot read the request: raw_input_contents has 2 entries for 1 inputs",
      ],
      ["typed FP16", {
        model_name: "mixed",
        inputs: [{ name: "h", datatype: "FP16", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
      }, 'Cannot read input "h": FP16 has no typed contents field; send it in raw_input_contents'],
      [
        "unknown output",
        reluTyped({ outputs: [{ name: "q" }] }),
        'Cannot read requested output "q": the model has no such output; its outputs are y',
      ],
    ];
    for (const [what, req, details] of cases) {
      const e = await failure(client.modelInfer(req));
      expect({ what, code: e.code, details: e.details }).toEqual({ what, code: Code.INVALID_ARGUMENT, details });
    }
  });

  test("ModelInfer refuses an unknown model or version with NOT_FOUND", async () => {
    const model = await failure(client.modelInfer({ ...reluTyped(), model_name: "resnet" }));
    expect([model.code, model.details]).toEqual([
      Code.NOT_FOUND,
      'Cannot find model "resnet": it is not in the repository',
    ]);
    const version = await failure(client.modelInfer(reluTyped({ model_version: "3" })));
    expect([version.code, version.details]).toEqual([
      Code.NOT_FOUND,
      'Cannot find version "3" of model "relu": it has only version 1',
    ]);
  });

  test("ModelInfer of a faulting model answers INTERNAL, then UNAVAILABLE while poisoned; readiness too", async () => {
    const trap = {
      model_name: "trap",
      inputs: [{ name: "x", datatype: "FP32", shape: [4], contents: { fp32_contents: [1, 2, 3, 4] } }],
    };
    const fault = await failure(client.modelInfer(trap));
    expect(fault.code).toBe(Code.INTERNAL);
    expect(fault.details).toMatch(/\(NRT_[A-Z_]+\)$/);
    // A trap (6) is Band A: the model stays ready. A Band-C fault (1202) poisons it (seed lifecycle-error-model §4.1).
    expect(await client.modelReady("trap")).toEqual({ ready: true });
    injectOnModel(fx, "trap", { kind: "nc-ue" });
    const bandC = await failure(client.modelInfer(trap));
    expect(bandC.code).toBe(Code.INTERNAL);
    expect(bandC.details).toMatch(/\(NRT_EXEC_HW_ERR_NC_UE\)$/);
    const poisoned = await failure(client.modelInfer(trap));
    expect(poisoned.code).toBe(Code.UNAVAILABLE);
    expect(poisoned.details).toMatch(/^Model "trap" is not ready: it is poisoned by NRT_/);
    expect(await client.modelReady("trap")).toEqual({ ready: false });
    expect(await client.serverReady()).toEqual({ ready: false });
    await fx.repository.load("trap"); // a reload recovers a poisoned model
    expect(await client.modelReady("trap")).toEqual({ ready: true });
    expect(await client.serverReady()).toEqual({ ready: true });
  });

  test("ModelReady, ModelMetadata and ModelInfer follow an unload", async () => {
    await fx.repository.unload("add");
    expect(await client.modelReady("add")).toEqual({ ready: false });
    expect(await client.serverReady()).toEqual({ ready: true }); // unloaded models do not count
    const meta = await client.modelMetadata("add"); // the signature of the last load stays known
    expect(meta.inputs.map((i: { name: string }) => i.name)).toEqual(["a", "b"]);
    const infer = await failure(client.modelInfer({ model_name: "add", inputs: [] }));
    expect([infer.code, infer.details]).toEqual([Code.UNAVAILABLE, 'Model "add" is not ready: not loaded']);
    await fx.repository.load("add");
  });
});
