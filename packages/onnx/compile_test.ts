import { describe, expect, test } from "bun:test";
import { SUPPORTED_OPS } from "../../kernels/ops/lowering.ts";
import { mlpModel, shapeChainModel, unsupportedOpModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import { OnnxCompileError } from "./error.ts";
import { OnnxBuilder } from "./onnx_builder.ts";
import { readNeff } from "../core/neff/neff_file.ts";
import { buildOnnxNeff } from "./onnx_neff.ts";

const SUPPORTED = SUPPORTED_OPS.map((op) => (op.domain === "" ? op.opType : `${op.domain}.${op.opType}`)).join(", ");

function refusal(bytes: Uint8Array, inputShapes: Record<string, number[]> = {}): OnnxCompileError {
  try {
    compileOnnx(bytes, { inputShapes });
  } catch (e) {
    expect(e).toBeInstanceOf(OnnxCompileError);
    return e as OnnxCompileError;
  }
  throw new Error("expected an OnnxCompileError, but nothing was thrown");
}

describe("compileOnnx()", () => {
  test("compileOnnx() refuses an unsupported op, naming the node, the op and the supported ops", () => {
    const e = refusal(unsupportedOpModel());
    expect(e.message).toBe(
      `Cannot compile node "transpose_by_einsum" (Einsum): op Einsum is not supported; supported ops: ${SUPPORTED}`,
    );
    expect([e.node, e.opType]).toEqual(["transpose_by_einsum", "Einsum"]);
  });

  test("compileOnnx() refuses an unsupported dtype or attribute with what the op supports", () => {
    const b = new OnnxBuilder("f64");
    b.output(b.node("Relu", [b.input("x", "float64", [4])], {}, { outputs: ["y"], name: "relu64" }), "float64", [4]);
    const e = refusal(b.toBytes());
    expect(e.message).toMatch(
      new RegExp(
        String.raw`^Cannot compile node "relu64" \(Relu\): dtype float64 of "x" is not supported ` +
          String.raw`\(supported: [^)]*float32[^)]*\); Relu supports dtypes `,
      ),
    );
    const c = new OnnxBuilder("conv3d");
    const x = c.input("x", "float32", [1, 1, 4, 4, 4]);
    c.output(
      c.node("Conv", [x, c.weight("w", [1, 1, 2, 2, 2], new Array(8).fill(1))], {}, { outputs: ["y"], name: "c3" }),
      "float32",
      undefined,
    );
    expect(refusal(c.toBytes()).message).toMatch(
      new RegExp(
        String.raw`^Cannot compile node "c3" \(Conv\): "x" has rank 5; only 1-D and 2-D \(rank 3, 4\) are supported; ` +
          String.raw`Conv supports dtypes float32; attributes auto_pad`,
      ),
    );
  });

  test("compileOnnx() describes the model: interface, weights, buffers, placements, libraries and calls", () => {
    const m = compileOnnx(mlpModel(), { inputShapes: { x: [5, 16] }, target: "sunda" });
    expect(m.name).toBe("mlp");
    expect(m.target).toBe("sunda");
    expect(m.inputs).toEqual([{ name: "x", dtype: "float32", shape: [5, 16] }]);
    expect(m.outputs).toEqual([{ name: "probs", dtype: "float32", shape: [5, 10] }]);
    expect(m.weights.map((w) => [w.name, w.shape, w.bytes.byteLength])).toEqual([
      ["w1", [16, 32], 2048],
      ["b1", [32], 128],
      ["w2", [32, 32], 4096],
      ["b2", [32], 128],
      ["w3", [10, 32], 1280],
      ["b3", [10], 40],
    ]);
    expect(m.libraries).toEqual([...new Set(m.calls.map((c) => c.library))].sort());
    expect(m.calls.map((c) => c.opType)).toEqual(["nrt.FusedGemm", "nrt.FusedGemm", "Gemm", "Softmax"]);
    for (const c of m.calls) {
      for (const name of [...c.inputs, ...c.outputs]) expect(m.values[name]).toBeDefined();
      expect(c.ints.every((i) => typeof i === "bigint")).toBe(true);
    }
    expect(m.values.x).toMatchObject({ storage: "input", tensor: "x", offset: 0, byteLength: 320 });
    expect(m.values.probs).toMatchObject({ storage: "output", tensor: "probs" });
    expect(m.values.w1).toMatchObject({ storage: "weight", tensor: "w1" });
    const hidden = m.calls[0].outputs[0];
    expect(m.values[hidden]).toMatchObject({ storage: "buffer", offset: 0, shape: [5, 32], byteLength: 640 });
  });

  test("compileOnnx() makes views aliases: no kernel, same storage", () => {
    const m = compileOnnx(shapeChainModel(), { inputShapes: { x: [2, 3, 4] } });
    expect(m.calls.map((c) => c.opType)).toEqual(["Relu", "Sigmoid"]);
    expect(m.stats.aliased).toBe(1);
    const relu = m.values[m.calls[0].outputs[0]], view = m.values[m.calls[1].inputs[0]];
    expect(view).toMatchObject({
      storage: "buffer",
      buffer: relu.buffer,
      offset: 0,
      shape: [2, 12],
      aliasOf: m.calls[0].outputs[0],
    });
    expect(relu.shape).toEqual([2, 3, 4]);
  });

  test("compileOnnx() lets a kernel write a graph output through a view", () => {
    const b = new OnnxBuilder("view_out");
    const r = b.node("Relu", [b.input("x", "float32", [2, 3])]);
    b.output(b.node("Reshape", [r, b.ints("s", [6])], {}, { outputs: ["y"] }), "float32", [6]);
    const m = compileOnnx(b.toBytes());
    expect(m.calls.map((c) => c.outputs)).toEqual([[r]]);
    expect(m.values[r]).toMatchObject({ storage: "output", tensor: "y", aliasOf: "y" });
    expect(m.buffers).toEqual([]);
  });

  test("compileOnnx() copies between two caller tensors a view joins, and refuses a pass-through output", () => {
    const b = new OnnxBuilder("in_to_out");
    b.output(
      b.node("Reshape", [b.input("x", "float32", [2, 3]), b.ints("s", [6])], {}, { outputs: ["y"] }),
      "float32",
      [6],
    );
    const m = compileOnnx(b.toBytes());
    expect(m.calls.map((c) => [c.opType, c.inputs, c.outputs])).toEqual([["Reshape", ["x"], ["y"]]]);
    const p = new OnnxBuilder("pass");
    const x = p.input("x", "float32", [2]);
    p.output(x, "float32", [2]);
    expect(refusal(p.toBytes()).why).toBe(
      'graph output "x" is also a graph input; pass-through outputs are not supported',
    );
  });

  test("compileOnnx() keeps an omitted optional output in its place for the lowering", () => {
    const b = new OnnxBuilder("ln_outputs");
    const x = b.input("x", "float32", [2, 4]);
    const [y, , inv] = b.nodeN("LayerNormalization", [x, b.weight("g", [4], [1, 1, 1, 1])], {}, {
      outputs: ["y", "", "inv"],
    });
    b.output(y, "float32", [2, 4]);
    b.output(inv, "float32", [2, 1]);
    const m = compileOnnx(b.toBytes());
    expect(m.calls.map((c) => c.outputs)).toEqual([["y", "inv"]]);
    expect(m.calls[0].ints.slice(-2)).toEqual([0n, 1n]); // no Mean, an InvStdDev
  });

  test("compileOnnx() and buildOnnxNeff() refuse or avoid a name used twice, never leaving it to the NEFF builder", () => {
    const twice = new OnnxBuilder("input_twice");
    const x = twice.input("x", "float32", [2]);
    twice.input("x", "float32", [2]);
    twice.output(twice.node("Relu", [x], {}, { outputs: ["y"] }), "float32", [2]);
    expect(refusal(twice.toBytes()).why).toBe('graph input "x" is declared twice');

    // The weight a constant output "y" is copied from is named apart from an input called "y/value".
    const b = new OnnxBuilder("collide_value");
    b.output(b.node("Relu", [b.input("y/value", "float32", [2])], {}, { outputs: ["z"] }), "float32", [2]);
    b.output(b.node("Shape", ["y/value"], {}, { outputs: ["y"] }), "int64", [1]);
    const m = compileOnnx(b.toBytes());
    expect(m.weights.map((w) => w.name)).toEqual(["y/value#1"]);
    const libraries = new Map(m.libraries.map((l) => [l, new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])]));
    expect(buildOnnxNeff(m, { libraries }).byteLength).toBeGreaterThan(0);

    // Whatever else the builder refuses is still the model's fault: an OnnxCompileError naming the name.
    const clash = { ...m, weights: m.weights.map((w) => ({ ...w, name: "z" })) };
    let e: unknown;
    try {
      buildOnnxNeff(clash, { libraries });
    } catch (err) {
      e = err;
    }
    expect(e).toBeInstanceOf(OnnxCompileError);
    expect((e as OnnxCompileError).why).toBe('Cannot build NEFF "collide_value.neff": the name "z" is used twice');
  });

  test("compileOnnx() keys values and attributes by own name: __proto__ and constructor are plain names", () => {
    const model = (attributes: Record<string, number | number[]>) => {
      const b = new OnnxBuilder("proto_names");
      const x = b.input("constructor", "float32", [2]);
      const p = b.node("LeakyRelu", [x], attributes, { outputs: ["__proto__"], name: "leaky" });
      b.output(p, "float32", [2]);
      b.output(b.node("Neg", [p], {}, { outputs: ["toString"] }), "float32", [2]);
      return b.toBytes();
    };
    // An attribute "__proto__" is an attribute like any other (it used to become the table's prototype, unseen).
    expect(refusal(model({ ["__proto__"]: [1, 2], alpha: 0.25 })).why).toMatch(
      /^attribute "__proto__" is not supported/,
    );
    const m = compileOnnx(model({ alpha: 0.25 }));
    expect(Object.keys(m.values).sort()).toEqual(["__proto__", "constructor", "toString"]);
    expect(Object.hasOwn(m.values, "__proto__") && m.values.__proto__.storage).toBe("output");
    const libraries = new Map(m.libraries.map((l) => [l, new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])]));
    const file = readNeff(buildOnnxNeff(m, { libraries }));
    expect(file.outputs.map((t) => t.name)).toEqual(["__proto__", "toString"]);
  });

  test("compileOnnx() quotes at most a few values of a long attribute, and bounds every message", () => {
    const b = new OnnxBuilder("long_perm");
    const x = b.input("x", "float32", [2, 3]);
    b.output(
      b.node("Transpose", [x], { perm: new Array(100_000).fill(0) }, { outputs: ["y"], name: "t" }),
      "float32",
      [3, 2],
    );
    expect(refusal(b.toBytes()).why).toBe("perm [0,0,0,0,0,0,0,0,… (100000 values)] is not a permutation of rank 2");
    expect(new OnnxCompileError({}, "x".repeat(100_000)).why).toBe(`${"x".repeat(4096)}… (100000 characters)`);
  });

  test("compileOnnx() never throws anything but OnnxCompileError for a model, and a TypeError for non-bytes", () => {
    expect(() => compileOnnx("model.onnx" as unknown as Uint8Array)).toThrow(TypeError);
    expect(refusal(new Uint8Array([8, 1, 18, 0])).why).toBe("the model has no graph");
  });
});
