import { describe, expect, test } from "bun:test";
import onnxProto from "onnx-proto";
import type { onnx as Onnx } from "onnx-proto";
import { prng } from "../core/_testing.ts";
import { cnnModel, mlpModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import { OnnxCompileError } from "./error.ts";
import { encodeModel, OnnxBuilder } from "./onnx_builder.ts";
import { DEFAULT_LIMITS, parseModel } from "./parse.ts";
import { ConstTensor } from "./tensor.ts";

const { onnx: O } = onnxProto;

/** Runs `fn`, which must throw an OnnxCompileError, and returns it. */
function refused(fn: () => unknown): OnnxCompileError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(OnnxCompileError);
    return e as OnnxCompileError;
  }
  throw new Error("expected an OnnxCompileError, but nothing was thrown");
}

/** A one-Relu model whose message `edit` may change before encoding. */
function model(edit: (m: Onnx.IModelProto) => void = () => {}): Uint8Array {
  const b = new OnnxBuilder("relu");
  b.output(b.node("Relu", [b.input("x", "float32", [2, 3])], {}, { outputs: ["y"] }), "float32", [2, 3]);
  const m = b.modelProto();
  edit(m);
  return encodeModel(m);
}

function withInitializer(t: Onnx.ITensorProto): Uint8Array {
  return model((m) => {
    m.graph!.initializer = [t];
    m.graph!.node!.push({ name: "use", opType: "Add", input: ["y", t.name!], output: ["z"] });
  });
}

describe("parseModel()", () => {
  test("parseModel() reads name, opset, inputs, outputs, nodes and initializers", () => {
    const m = parseModel(mlpModel());
    expect(m.name).toBe("mlp");
    expect(m.opset).toBe(17);
    expect(m.graph.inputs).toEqual([{ name: "x", dtype: "float32", dims: ["N", 16] }]);
    expect(m.graph.outputs.map((o) => o.name)).toEqual(["probs"]);
    expect(m.graph.nodes.map((n) => n.opType)).toEqual([
      "MatMul",
      "Add",
      "Relu",
      "MatMul",
      "Add",
      "Relu",
      "Gemm",
      "Softmax",
    ]);
    expect(m.graph.initializers.get("w1")!.shape).toEqual([16, 32]);
    expect(m.graph.nodes[6].attributes).toEqual({ transB: 1 });
  });

  test("parseModel() decodes raw_data little-endian and every typed data field", () => {
    const raw = new Uint8Array([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]); // 1.0, -2.0
    const cases: [Onnx.ITensorProto, string, number[]][] = [
      [{ name: "r", dataType: 1, dims: [2], rawData: raw }, "float32", [1, -2]],
      [{ name: "f", dataType: 1, dims: [2], floatData: [0.5, -3] }, "float32", [0.5, -3]],
      [{ name: "d", dataType: 11, dims: [1], doubleData: [1e-300] }, "float64", [1e-300]],
      [{ name: "i", dataType: 6, dims: [2], int32Data: [-7, 9] }, "int32", [-7, 9]],
      [{ name: "b", dataType: 9, dims: [2], int32Data: [1, 0] }, "bool", [1, 0]],
      [{ name: "h", dataType: 10, dims: [2], int32Data: [0x3c00, 0xc000] }, "float16", [1, -2]],
      [{ name: "u", dataType: 12, dims: [1], uint64Data: [4000000000] }, "uint32", [4000000000]],
    ];
    for (const [t, dtype, values] of cases) {
      const c = parseModel(withInitializer(t)).graph.initializers.get(t.name!)!;
      expect(c.dtype).toBe(dtype);
      expect([...c.numbers()]).toEqual(values);
    }
    const big = parseModel(
      withInitializer({ name: "l", dataType: 7, dims: [1], int64Data: ["-9007199254740993"] as never }),
    );
    expect(big.graph.initializers.get("l")!.bigints()).toEqual([-9007199254740993n]);
  });

  test("parseModel() refuses bytes that are not an ONNX protobuf", () => {
    expect(refused(() => parseModel(new Uint8Array([0xff, 0xff, 0xff, 0xff]))).message).toMatch(
      /^Cannot compile ONNX model: the bytes are not an ONNX protobuf/,
    );
    expect(refused(() => parseModel(new Uint8Array(0))).why).toBe("the file is empty");
    const good = mlpModel();
    expect(refused(() => parseModel(good.subarray(0, good.length - 100))).why).toMatch(/not an ONNX protobuf/);
  });

  test("parseModel() refuses a model over the size cap, without a graph or opset, or with an unknown opset", () => {
    expect(refused(() => parseModel(mlpModel(), { ...DEFAULT_LIMITS, maxModelBytes: 100 })).why).toMatch(
      /more than the limit of 100/,
    );
    expect(refused(() => parseModel(model((m) => (m.graph = null)))).why).toBe("the model has no graph");
    expect(refused(() => parseModel(model((m) => (m.opsetImport = [{ domain: "ai.onnx.ml", version: 3 }])))).why)
      .toBe("the model imports no opset of the default ONNX domain");
    expect(refused(() => parseModel(model((m) => (m.opsetImport = [{ domain: "", version: 7 }])))).why)
      .toBe("opset 7 is not supported (supported: 11 to 21)");
  });

  test("parseModel() refuses external data with a clear message", () => {
    const e = refused(() =>
      parseModel(withInitializer({
        name: "w",
        dataType: 1,
        dims: [2, 3],
        dataLocation: O.TensorProto.DataLocation.EXTERNAL,
        externalData: [{ key: "location", value: "weights.bin" }],
      }))
    );
    expect(e.why).toBe(
      'tensor "w" keeps its data in an external file ("weights.bin"); external data is not supported: ' +
        "save the model with its weights inside the .onnx file",
    );
  });

  test("parseModel() refuses tensors whose data does not match their dims, strings and bad dims", () => {
    expect(
      refused(() => parseModel(withInitializer({ name: "w", dataType: 1, dims: [2, 3], rawData: new Uint8Array(20) })))
        .why,
    )
      .toBe('tensor "w" has 20 bytes of raw_data, expected 24 for float32[2,3]');
    expect(refused(() => parseModel(withInitializer({ name: "w", dataType: 1, dims: [3], floatData: [1, 2] }))).why)
      .toBe('tensor "w" has 2 values in floatData, expected 3 for float32[3]');
    expect(
      refused(() =>
        parseModel(withInitializer({ name: "s", dataType: 8, dims: [1], stringData: [new Uint8Array([65])] }))
      ).why,
    )
      .toBe('tensor "s" has element type STRING, which is not supported');
    expect(refused(() => parseModel(withInitializer({ name: "n", dataType: 1, dims: [-1] }))).why).toBe(
      'tensor "n" has an invalid dimension -1',
    );
    expect(refused(() => parseModel(withInitializer({ name: "h", dataType: 1, dims: [1 << 20, 1 << 20] }))).why)
      .toMatch(/^tensor "h" is 4398046511104 bytes, more than the limit/);
    expect(
      refused(() => parseModel(withInitializer({ name: "r", dataType: 1, dims: [1, 1, 1, 1, 1, 1, 1, 1, 1] }))).why,
    )
      .toBe('tensor "r" has rank 9, more than the limit of 8');
  });

  test("parseModel() refuses non-tensor graph inputs and unsupported input types, naming the input", () => {
    expect(refused(() => parseModel(model((m) => (m.graph!.input = [{ name: "x", type: { sequenceType: {} } }])))).why)
      .toBe('graph input "x" is not a tensor (sequences, maps and optionals are not supported)');
    expect(refused(() => parseModel(model((m) => (m.graph!.input![0].type!.tensorType!.elemType = 8)))).why)
      .toBe('graph input "x" has element type STRING, which is not supported');
  });

  test("parseModel() caps node count and subgraph nesting", () => {
    expect(refused(() => parseModel(transformerModel(), { ...DEFAULT_LIMITS, maxNodes: 10 })).why).toBe(
      "the model has more than 10 nodes",
    );
    const nested = (depth: number): Uint8Array => {
      const b = new OnnxBuilder("nest");
      const x = b.input("x", "float32", [1]);
      const c = b.constant(ConstTensor.fromNumbers("bool", [], [1]));
      const branch = (d: number): ReturnType<OnnxBuilder["subgraph"]> =>
        b.subgraph(`g${d}`, (s) => {
          if (d === 0) s.output(s.node("Relu", [x], {}, { outputs: [`o${d}`] }), "float32", [1]);
          else {s.output(
              s.node("If", [c], { then_branch: branch(d - 1), else_branch: branch(d - 1) }, { outputs: [`o${d}`] }),
              "float32",
              [1],
            );}
        });
      b.output(
        b.node("If", [c], { then_branch: branch(depth), else_branch: branch(depth) }, { outputs: ["y"] }),
        "float32",
        [1],
      );
      return b.toBytes();
    };
    expect(parseModel(nested(6)).graph.nodes.length).toBe(2);
    expect(refused(() => parseModel(nested(9))).why).toBe("subgraphs nest deeper than the limit of 8");
  });

  test("parseModel() turns a protobuf nesting bomb into an OnnxCompileError", () => {
    // graph (field 7) → node (1) → attribute (5) → g (6) → node … 60 000 length-delimited levels.
    const fields = [7, ...Array.from({ length: 60000 }, (_, i) => [1, 5, 6][i % 3])];
    const varint = (n: number) => {
      const out: number[] = [];
      do {
        out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
        n >>>= 7;
      } while (n > 0);
      return out;
    };
    const lengths = new Array<number>(fields.length + 1).fill(0); // lengths[i]: bytes of levels i.. (inside out)
    for (let i = fields.length - 1; i >= 0; i--) lengths[i] = 1 + varint(lengths[i + 1]).length + lengths[i + 1];
    const bomb = new Uint8Array(lengths[0]);
    let at = 0;
    fields.forEach((f, i) => {
      bomb[at++] = (f << 3) | 2;
      for (const b of varint(lengths[i + 1])) bomb[at++] = b;
    });
    // The wire scan stops at the nesting cap; past a cap this high, the stack runs out first.
    expect(refused(() => parseModel(bomb)).why).toBe("subgraphs nest deeper than the limit of 8");
    const e = refused(() => parseModel(bomb, { ...DEFAULT_LIMITS, maxGraphDepth: 1e9 }));
    expect(e.why).toBe("the bytes are not an ONNX protobuf (messages nest too deeply)");
  });

  test("compileOnnx() reports every corrupted model as an OnnxCompileError (seeded byte flips)", () => {
    const bases: [Uint8Array, Record<string, number[]>][] = [
      [mlpModel(4), { x: [2, 16] }],
      [transformerModel(), { x: [2, 8, 32] }],
      [cnnModel(), { x: [1, 3, 16, 16] }],
    ];
    const rng = prng(7);
    let refusedCount = 0, compiled = 0;
    for (let i = 0; i < 600; i++) {
      const [base, inputShapes] = bases[i % bases.length];
      const bytes = new Uint8Array(base);
      const flips = 1 + Math.floor(rng() * 4);
      for (let k = 0; k < flips; k++) bytes[Math.floor(rng() * bytes.length)] = Math.floor(rng() * 256);
      try {
        compileOnnx(bytes, { inputShapes });
        compiled++;
      } catch (e) {
        if (!(e instanceof OnnxCompileError)) throw new Error(`flip round ${i} threw ${e}`, { cause: e });
        expect(e.why).not.toMatch(/internal error|the lowering failed/);
        refusedCount++;
      }
    }
    expect(refusedCount + compiled).toBe(600);
    expect(refusedCount).toBeGreaterThan(100);
    expect(compiled).toBeGreaterThan(100);
  });
});
