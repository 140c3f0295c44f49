import { describe, expect, test } from "bun:test";
import * as ort from "onnxruntime-web";
import { ortSession } from "../../kernels/ops/_onnx_model.ts";
import { OpHarness } from "../../kernels/ops/harness.ts";
import { runCompiled } from "./_run_compiled.ts";
import {
  cnnModel,
  ifModel,
  layerNormModel,
  miscOpsModel,
  mlpModel,
  randomInput,
  shapeChainModel,
  transformerModel,
} from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import { OnnxBuilder } from "./onnx_builder.ts";

ort.env.wasm.numThreads = 1;

const harness = await OpHarness.create();

/** Largest |ours − ref| / max(|ref|, floor): relative error, with a floor so values near zero compare absolutely. */
function maxRelError(ours: Float32Array, ref: Float32Array, floor = 1e-3): number {
  expect(ours.length).toBe(ref.length);
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    expect(Number.isFinite(ours[i])).toBe(true);
    worst = Math.max(worst, Math.abs(ours[i] - ref[i]) / Math.max(Math.abs(ref[i]), floor));
  }
  return worst;
}

/**
 * Compiles `bytes` for the given inputs, runs it on the harness and on onnxruntime-web, and returns the worst
 * error over the outputs. `x` alone may be given as a shape (random data).
 */
async function compare(
  bytes: Uint8Array,
  given: number[] | Record<string, { shape: number[]; data: Float32Array | BigInt64Array }>,
  options: { fuse?: boolean } = {},
): Promise<number> {
  const feeds = Array.isArray(given)
    ? { x: { shape: given, data: randomInput(given.reduce((a, b) => a + b, 11), given) } }
    : given;
  const inputShapes = Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, v.shape]));
  const m = compileOnnx(bytes, { inputShapes, ...options });
  const ours = await runCompiled(harness, m, Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, v.data])));
  const session = await ortSession(bytes);
  const ref = await session.run(Object.fromEntries(
    Object.entries(feeds).map(([k, v]) => [
      k,
      v.data instanceof BigInt64Array
        ? new ort.Tensor("int64", v.data, v.shape)
        : new ort.Tensor("float32", v.data, v.shape),
    ]),
  ));
  let worst = 0;
  for (const o of m.outputs) {
    expect([...ref[o.name].dims]).toEqual([...o.shape]);
    const got = new Float32Array(ours[o.name].buffer, ours[o.name].byteOffset, ours[o.name].byteLength / 4);
    worst = Math.max(worst, maxRelError(got, ref[o.name].data as Float32Array));
  }
  return worst;
}

describe("compiled models on the op harness against onnxruntime-web", () => {
  test("compileOnnx() MLP classifier matches onnxruntime-web within 1e-4", async () => {
    expect(await compare(mlpModel(), [4, 16])).toBeLessThan(1e-4);
  });

  test("compileOnnx() small CNN matches onnxruntime-web within 1e-4", async () => {
    expect(await compare(cnnModel(), [2, 3, 16, 16])).toBeLessThan(1e-4);
  });

  test("compileOnnx() transformer block matches onnxruntime-web within 1e-4, fused and unfused", async () => {
    expect(await compare(transformerModel(), [2, 8, 32])).toBeLessThan(1e-4);
    expect(await compare(transformerModel(), [2, 8, 32], { fuse: false })).toBeLessThan(1e-4);
  });

  test("compileOnnx() compiles a dynamic-batch model for several batch sizes, each matching onnxruntime", async () => {
    for (const batch of [1, 3, 8]) {
      expect(await compare(mlpModel(), [batch, 16])).toBeLessThan(1e-4);
      expect(await compare(transformerModel(), [batch, 8, 32])).toBeLessThan(1e-4);
    }
    expect(await compare(cnnModel(), [5, 3, 16, 16])).toBeLessThan(1e-4);
  });

  test("compileOnnx() If on a constant and a Shape-chain reshape match onnxruntime-web", async () => {
    expect(await compare(ifModel(4), [2, 4])).toBeLessThan(1e-4);
    expect(await compare(ifModel(5), [2, 5])).toBeLessThan(1e-4);
    expect(await compare(shapeChainModel(), [6, 3, 4])).toBeLessThan(1e-4);
  });

  test("compileOnnx() leaves unfused what nrt.FusedGemm and nrt.LayerNorm cannot take, and matches onnxruntime", async () => {
    // A single-element scale of higher rank grows the product ([2,4] · [1,1,1] is [1,2,4]): not an alpha. It was
    // fused as one, and the fused node, of the product's shape, was refused.
    const mm = new OnnxBuilder("scaled");
    const scaled = mm.node("Mul", [
      mm.node("MatMul", [mm.input("x", "float32", [2, 3]), mm.weight("w", [3, 4], randomInput(5, [3, 4]))]),
      mm.weight("k", [1, 1, 1], [0.125]),
    ]);
    mm.output(
      mm.node("Relu", [mm.node("Add", [scaled, mm.weight("c", [4], randomInput(6, [4]))])], {}, {
        outputs: ["y"],
      }),
      "float32",
    );
    expect(await compare(mm.toBytes(), [2, 3])).toBeLessThan(1e-4);
    // The decomposed LayerNorm over the last axis with γ [2, 1, 4], which scales each row of axis 0 apart:
    // nrt.LayerNorm has one γ for every row, so this stays a chain of ops.
    const ln = layerNormModel([2, 3, 4], [-1], [2, 1, 4], [4]);
    expect(compileOnnx(ln, { inputShapes: { x: [2, 3, 4] } }).stats.layerNorm).toBe(0);
    expect(await compare(ln, [2, 3, 4])).toBeLessThan(1e-4);
  });

  test("compileOnnx() fuses a LayerNorm with γ, β over part of its axes, matching onnxruntime", async () => {
    const cases: [number[], number[] | undefined][] = [[[4], undefined], [[4], [3, 1]], [[1, 4], [4]], [[3, 1], [1]]];
    for (const [gamma, beta] of cases) {
      const ln = layerNormModel([2, 3, 4], [-2, -1], gamma, beta);
      const c = compileOnnx(ln, { inputShapes: { x: [2, 3, 4] } });
      expect(c.stats.layerNorm).toBe(1);
      // γ and β were expanded at compile time: no copy expands them on each run.
      expect(c.calls.map((k) => k.fn)).toEqual(["layer_norm_f32"]);
      expect(await compare(ln, [2, 3, 4])).toBeLessThan(1e-4);
      expect(await compare(ln, [2, 3, 4], { fuse: false })).toBeLessThan(1e-4);
    }
  });

  test("compileOnnx() data movement and elementwise ops around an int64 embedding match onnxruntime", async () => {
    const ids = BigInt64Array.from({ length: 18 }, (_, i) => BigInt((i * 7) % 20));
    const x = randomInput(3, [3, 6, 8]);
    expect(await compare(miscOpsModel(), { ids: { shape: [3, 6], data: ids }, x: { shape: [3, 6, 8], data: x } }))
      .toBeLessThan(1e-4);
  });
});
