import { describe, expect, test } from "bun:test";
import { fakeLowering } from "./_fake_lowering.ts";
import { cnnModel, layerNormModel, layerNormOver, mlpModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import { OP_LIBRARY } from "./op_library.ts";
import { type FoldedGraph, foldGraph } from "./fold.ts";
import { fuseGraph, type FusionStats, type FusionTargets, MAX_EXPANDED_BYTES } from "./fuse.ts";
import type { IrNode } from "./graph.ts";
import { OnnxBuilder } from "./onnx_builder.ts";
import { DEFAULT_LIMITS, parseModel } from "./parse.ts";

const ALL: FusionTargets = {
  activations: ["Relu", "Gelu", "GeluTanh", "Clip", "LeakyRelu"],
  gelu: true,
  fusedGemm: true,
  layerNorm: true,
  fusedConv: true,
};

function foldAndFuse(
  bytes: Uint8Array,
  inputShapes: Record<string, number[]> = {},
  targets = ALL,
): { g: FoldedGraph; stats: FusionStats } {
  const g = foldGraph(parseModel(bytes), {
    inputShapes,
    limits: DEFAULT_LIMITS,
    supportedOps: [],
    maxFoldBytes: 1 << 26,
  });
  return { g, stats: fuseGraph(g, targets) };
}

function fused(bytes: Uint8Array, inputShapes: Record<string, number[]> = {}, targets = ALL): IrNode[] {
  return foldAndFuse(bytes, inputShapes, targets).g.nodes;
}

const kinds = (nodes: IrNode[]) => nodes.map((n) => (n.domain === "" ? n.opType : `${n.domain}.${n.opType}`));

/** x → `body` → y over [2, 8], with x also feeding the body. */
function model(body: (b: OnnxBuilder, x: string) => string, extraOutput?: (b: OnnxBuilder) => void): Uint8Array {
  const b = new OnnxBuilder("fuse");
  const x = b.input("x", "float32", [2, 8]);
  b.output(b.node("Identity", [body(b, x)], {}, { outputs: ["y"] }), "float32", undefined);
  extraOutput?.(b);
  return b.toBytes();
}

describe("fuseGraph()", () => {
  test("fuseGraph() fuses MatMul + bias Add + Relu into nrt.FusedGemm", () => {
    const nodes = fused(mlpModel(), { x: [3, 16] });
    expect(kinds(nodes)).toEqual(["nrt.FusedGemm", "nrt.FusedGemm", "Gemm", "Softmax"]);
    expect(nodes[0].attributes).toEqual({ activation: "Relu" });
    expect(nodes[0].inputs).toEqual(["x", "w1", "b1"]);
    expect(nodes[1].inputs).toEqual([nodes[0].outputs[0], "w2", "b2"]); // bias first in the Add: still C
  });

  test("fuseGraph() fuses Gemm + activation keeping Gemm's attributes, and Conv + Relu into nrt.FusedConv", () => {
    const gemm = fused(
      model((b, x) =>
        b.node("LeakyRelu", [b.node("Gemm", [x, b.weight("w", [4, 8], new Array(32).fill(0.1))], { transB: 1 })], {
          alpha: 0.2,
        })
      ),
    );
    expect(gemm[0].attributes).toEqual({
      transB: 1,
      activation: "LeakyRelu",
      activation_params: [0.20000000298023224],
    });
    const cnn = fused(cnnModel(), { x: [1, 3, 16, 16] });
    expect(kinds(cnn)).toEqual(["nrt.FusedConv", "MaxPool", "nrt.FusedConv", "GlobalAveragePool", "Flatten", "Gemm"]);
    expect(cnn[2].attributes).toEqual({
      kernel_shape: [3, 3],
      strides: [1, 1],
      auto_pad: "SAME_UPPER",
      activation: "Relu",
    });
  });

  test("fuseGraph() takes a scalar scale after MatMul as alpha (attention scores)", () => {
    const tf = fused(transformerModel(), { x: [1, 8, 32] });
    const scores = tf.filter((n) => n.opType === "FusedGemm" && n.inputs.length === 2);
    expect(scores.map((n) => n.attributes)).toEqual([{ alpha: 1 / Math.fround(Math.sqrt(8)) }]); // the float32 constant
    expect(tf.some((n) => n.opType === "Div")).toBe(false);
  });

  test("fuseGraph() maps Clip with constant bounds onto the Clip activation", () => {
    const nodes = fused(model((b, x) => {
      const mm = b.node("Add", [
        b.node("MatMul", [x, b.weight("w", [8, 8], new Array(64).fill(0.1))]),
        b.weight("c", [8], new Array(8).fill(1)),
      ]);
      return b.node("Clip", [mm, b.weight("lo", [], [0]), b.weight("hi", [], [6])]);
    }));
    expect(nodes[0].attributes).toEqual({ activation: "Clip", activation_params: [0, 6] });
  });

  test("fuseGraph() fuses the decomposed LayerNorm (Pow and Mul forms) into nrt.LayerNorm", () => {
    const tf = fused(transformerModel(), { x: [1, 8, 32] });
    const ln = tf.find((n) => n.opType === "LayerNorm")!;
    expect(ln.inputs).toEqual(["x", "ln1_gamma", "ln1_beta"]);
    expect(ln.attributes.axis).toBe(2);
    expect(ln.attributes.epsilon).toBeCloseTo(1e-5, 10);
    const mulForm = fused(model((b, x) => {
      const diff = b.node("Sub", [x, b.node("ReduceMean", [x], { axes: [1] })]);
      const v = b.node("ReduceMean", [b.node("Mul", [diff, diff])], { axes: [-1] });
      const n = b.node("Div", [diff, b.node("Sqrt", [b.node("Add", [v, b.weight("eps", [1], [1e-6])])])]);
      return b.node("Mul", [n, b.weight("g", [8], new Array(8).fill(2))]);
    }));
    expect(kinds(mulForm)).toEqual(["nrt.LayerNorm", "Identity"]);
    expect(mulForm[0].inputs).toEqual(["x", "g"]);
  });

  test("fuseGraph() expands a γ and β that broadcast over part of the normalized axes to that shape", () => {
    const values = (g: FoldedGraph, name: string) => [...g.values.get(name)!.constant!.numbers()];
    const tiled = (v: number[], times: number) => Array.from({ length: times }, () => v).flat();
    // γ [4] and β [3, 1] over axes [-2, -1] of [2, 3, 4]: one value per element of [3, 4].
    const both = foldAndFuse(layerNormModel([2, 3, 4], [-2, -1], [4], [3, 1]));
    expect(both.stats.layerNorm).toBe(1);
    expect(kinds(both.g.nodes)).toEqual(["nrt.LayerNorm", "Identity"]);
    expect(both.g.nodes[0].inputs).toEqual(["x", "g/expanded", "b/expanded"]);
    expect(both.g.nodes[0].attributes.axis).toBe(1);
    expect(both.g.values.get("g/expanded")!.shape).toEqual([3, 4]);
    expect(values(both.g, "g/expanded")).toEqual(tiled(values(both.g, "g"), 3));
    expect(values(both.g, "b/expanded")).toEqual(values(both.g, "b").flatMap((v) => [v, v, v, v]));
    // Without β, and γ [1, 4].
    const gammaOnly = foldAndFuse(layerNormModel([2, 3, 4], [1, 2], [1, 4]));
    expect(gammaOnly.stats.layerNorm).toBe(1);
    expect(gammaOnly.g.nodes[0].inputs).toEqual(["x", "g/expanded"]);
    expect(values(gammaOnly.g, "g/expanded")).toEqual(tiled(values(gammaOnly.g, "g"), 3));
    // A single value of any shape that broadcasts is taken as it is.
    expect(foldAndFuse(layerNormModel([2, 3, 4], [-2, -1], [1, 1])).g.nodes[0].inputs).toEqual(["x", "g"]);
    // One γ shared by two LayerNorms is expanded once; a value already called "g/expanded" is not reused.
    const b = new OnnxBuilder("shared");
    const x = b.input("x", "float32", [2, 3, 4]);
    const g = b.weight("g", [4], [1, 2, 3, 4]);
    const taken = b.node("Relu", [x], {}, { outputs: ["g/expanded"] });
    const two = b.node("Add", [layerNormOver(b, x, [-2, -1], g), layerNormOver(b, taken, [-2, -1], g)]);
    b.output(b.node("Identity", [two], {}, { outputs: ["y"] }), "float32");
    const shared = foldAndFuse(b.toBytes());
    expect(shared.stats.layerNorm).toBe(2);
    expect(shared.g.nodes.filter((n) => n.opType === "LayerNorm").map((n) => n.inputs)).toEqual([
      ["x", "g/expanded#1"],
      ["g/expanded", "g/expanded#1"],
    ]);
    expect(values(shared.g, "g/expanded#1")).toEqual(tiled([1, 2, 3, 4], 3));
  });

  test("fuseGraph() leaves a LayerNorm whose γ is not constant, spans other axes, or expands too big", () => {
    const layerNorms = (bytes: Uint8Array) => foldAndFuse(bytes).stats.layerNorm;
    expect(layerNorms(layerNormModel([2, 3, 4], [-2, -1], [4], undefined, { gamma: true }))).toBe(0);
    // γ [2, 1, 4] over axis -1 of [2, 3, 4] scales each row of axis 0 apart.
    expect(layerNorms(layerNormModel([2, 3, 4], [-1], [2, 1, 4]))).toBe(0);
    // The bound: [512, 512] float32 is exactly MAX_EXPANDED_BYTES, one more row is past it.
    expect(512 * 512 * 4).toBe(MAX_EXPANDED_BYTES);
    expect(layerNorms(layerNormModel([1, 512, 512], [-2, -1], [512]))).toBe(1);
    expect(layerNorms(layerNormModel([1, 513, 512], [-2, -1], [512]))).toBe(0);
    // A β that is not taken stays an Add after the fused node.
    const betaInput = foldAndFuse(layerNormModel([2, 3, 4], [-2, -1], [4], [4], { beta: true }));
    expect(kinds(betaInput.g.nodes)).toEqual(["nrt.LayerNorm", "Add", "Identity"]);
  });

  test("fuseGraph() recognises the three GELU spellings, alone or as a FusedGemm activation", () => {
    const spellings: ((b: OnnxBuilder, x: string, s: string) => string)[] = [
      (b, x, s) => b.node("Mul", [b.node("Mul", [x, s]), b.weight("h", [], [0.5])]),
      (b, x, s) => b.node("Mul", [b.node("Mul", [x, b.weight("h", [], [0.5])]), s]),
      (b, x, s) => b.node("Mul", [x, b.node("Mul", [s, b.weight("h", [], [0.5])])]),
    ];
    for (const spell of spellings) {
      const nodes = fused(model((b, x) => {
        const e = b.node("Erf", [b.node("Mul", [x, b.weight("r2", [], [Math.SQRT1_2])])]);
        return spell(b, x, b.node("Add", [b.weight("one", [], [1]), e]));
      }));
      expect(kinds(nodes)).toEqual(["Gelu", "Identity"]);
    }
    const tf = fused(transformerModel(), { x: [1, 8, 32] });
    expect(tf.filter((n) => n.attributes.activation === "Gelu").length).toBe(1);
    expect(tf.some((n) => n.opType === "Erf")).toBe(false);
  });

  test("fuseGraph() leaves a pattern whose inner value is used elsewhere or is a graph output", () => {
    const used = fused(model(
      (b, x) =>
        b.node("Relu", [
          b.node("Add", [
            b.node("MatMul", [x, b.weight("w", [8, 8], new Array(64).fill(0.1))], {}, { outputs: ["mm"] }),
            b.weight("c", [8], new Array(8).fill(1)),
          ]),
        ]),
      (b) => b.output("mm", "float32", [2, 8]),
    ));
    expect(kinds(used)).toEqual(["MatMul", "Add", "Relu", "Identity"]);
    const noTargets = fused(mlpModel(), { x: [3, 16] }, {
      activations: [],
      gelu: false,
      fusedGemm: false,
      layerNorm: false,
      fusedConv: false,
    });
    expect(kinds(noTargets)).toEqual(["MatMul", "Add", "Relu", "MatMul", "Add", "Relu", "Gemm", "Softmax"]);
  });

  test("fuseGraph() turns attention's head Transposes into gemm operands read in place", () => {
    const c = compileOnnx(transformerModel(), { inputShapes: { x: [2, 8, 32] } });
    // q, kᵀ and v feed the two attention products; the output's Transpose feeds a Reshape and stays a copy.
    expect(c.stats.transposedOperands).toBe(3);
    const products = c.calls.filter((k) => k.fn === "gemm" && k.ints[0] * k.ints[1] === 2n * 4n);
    expect(products).toHaveLength(2);
    expect(c.calls.filter((k) => k.fn === "strided_copy")).toHaveLength(1);
    const without = compileOnnx(transformerModel(), {
      inputShapes: { x: [2, 8, 32] },
      lowering: { ...OP_LIBRARY, fusedGemmPermutes: false },
    });
    expect(without.stats.transposedOperands).toBe(0);
    expect(without.calls.filter((k) => k.fn === "strided_copy")).toHaveLength(4);
    expect(without.calls.length - c.calls.length).toBe(3);
  });

  test("compileOnnx() fuses only what the lowering supports", () => {
    const c = compileOnnx(transformerModel(), { lowering: fakeLowering(), inputShapes: { x: [1, 8, 32] } });
    expect(c.stats).toMatchObject({ gelu: 1, fusedGemm: 7, layerNorm: 1, fusedConv: 0 });
    const off = compileOnnx(transformerModel(), {
      lowering: fakeLowering(),
      inputShapes: { x: [1, 8, 32] },
      fuse: false,
    });
    expect(off.stats).toMatchObject({ gelu: 0, fusedGemm: 0, layerNorm: 0 });
    expect(off.calls.length).toBeGreaterThan(c.calls.length);
  });
});
