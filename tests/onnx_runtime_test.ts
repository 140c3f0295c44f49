/**
 * Whole ONNX models through the real runtime and the simulated device (compile → NEFF → `Runtime.load` →
 * `Model.execute` on the 8 Q7 cores), checked against onnxruntime-web within 1e-4; the weights travel in the NEFF,
 * the intermediate buffers are device memory of the model, booked in the ledger and released at unload.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, readNeff, Runtime } from "@nrt/core";
import { DmaMemUsageType } from "../packages/core/dmem/dmem.ts";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import {
  buildOnnxNeff,
  type CompiledOnnxModel,
  compileOnnx,
  type CompileOptions,
  OnnxBuilder,
  OnnxCompileError,
} from "@nrt/onnx";
import { prng } from "../packages/core/_testing.ts";
import {
  cnnModel,
  denseMlpModel,
  miscOpsModel,
  mlpModel,
  randomInput,
  randomTensor,
  transformerModel,
  unsupportedOpModel,
  vggModel,
} from "../packages/onnx/_test_models.ts";
import { execute, f32, type Feed, maxRelError, OP_LIBRARIES, runOrt } from "./onnx_testing.ts";

let c: NrtContainer;
let rt: Runtime;
beforeAll(async () => {
  c = createNrtContainer();
  rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
});
afterAll(async () => {
  await rt.close();
  await c.resolve(PortalToken).close();
});

/** Compiles `onnx` for the feeds' shapes and builds its NEFF. */
function build(
  onnx: Uint8Array,
  feeds: Readonly<Record<string, Feed>>,
  options: Options = {},
): { compiled: CompiledOnnxModel; neff: Uint8Array } {
  const inputShapes = Object.fromEntries(Object.entries(feeds).map(([k, f]) => [k, [...f.shape]]));
  const compiled = compileOnnx(onnx, { inputShapes, ...options });
  return { compiled, neff: buildOnnxNeff(compiled, { libraries: OP_LIBRARIES }) };
}

type Options = Pick<CompileOptions, "fuse" | "spmdMinWork">;

/**
 * Worst relative error of the runtime's outputs against onnxruntime-web's, over every output, for the default
 * fan-out and for every call on 8 cores (`spmdMinWork: 0`) and on 1 core (`Infinity`): both kernel paths.
 */
async function compare(
  onnx: Uint8Array,
  feeds: Readonly<Record<string, Feed>>,
  options: Options = {},
): Promise<number> {
  let worst = 0;
  for (const spmdMinWork of [undefined, 0, Infinity]) {
    worst = Math.max(worst, await compareOnce(onnx, feeds, { spmdMinWork, ...options }));
  }
  return worst;
}

async function compareOnce(onnx: Uint8Array, feeds: Readonly<Record<string, Feed>>, options: Options): Promise<number> {
  const { neff } = build(onnx, feeds, options);
  const model = await rt.load(neff);
  try {
    const ours = await execute(rt, model, feeds);
    const ref = await runOrt(onnx, feeds);
    let worst = 0;
    for (const t of model.outputs) worst = Math.max(worst, maxRelError(f32(ours[t.name]), ref[t.name]));
    return worst;
  } finally {
    await model.unload();
  }
}

const x = (shape: number[], seed = 17): Record<string, Feed> => ({ x: { shape, data: randomInput(seed, shape) } });

describe("compiled ONNX models on the simulated device against onnxruntime-web", () => {
  test("an MLP classifier (FusedGemm, Softmax) matches within 1e-4", async () => {
    expect(await compare(mlpModel(), x([4, 16]))).toBeLessThan(1e-4);
  }, 60_000);

  test("a small CNN (Conv, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm) matches within 1e-4", async () => {
    expect(await compare(cnnModel(), x([2, 3, 16, 16]))).toBeLessThan(1e-4);
  }, 60_000);

  test(
    "a transformer block (attention with Softmax, LayerNorm, GELU as ops) matches within 1e-4, fused and unfused",
    async () => {
      expect(await compare(transformerModel(), x([2, 8, 32]))).toBeLessThan(1e-4);
      expect(await compare(transformerModel(), x([2, 8, 32]), { fuse: false })).toBeLessThan(1e-4);
    },
    60_000,
  );

  test("the benchmark's dense MLP and VGG-style CNN match within 1e-4", async () => {
    expect(await compare(denseMlpModel([784, 256, 128, 10]), x([2, 784]))).toBeLessThan(1e-4);
    expect(await compare(vggModel([16, 16, 32, 32], 16), x([1, 3, 16, 16]))).toBeLessThan(1e-4);
  }, 60_000);

  test("the compiler runs calls with little work on 1 core and the rest on 8", () => {
    const small = compileOnnx(mlpModel(), { inputShapes: { x: [1, 16] } });
    expect(small.calls.map((c) => c.totalCpus)).toEqual([1, 1, 1, 1]);
    expect(small.stats.singleCore).toBe(4);
    const big = compileOnnx(vggModel([32, 32], 32), { inputShapes: { x: [1, 3, 32, 32] } });
    expect(big.calls.filter((c) => c.fn === "conv2d").map((c) => c.totalCpus)).toEqual([8, 8]);
    expect(
      compileOnnx(mlpModel(), { inputShapes: { x: [1, 16] }, spmdMinWork: 0 }).calls.every((c) => c.totalCpus === 8),
    ).toBe(true);
  });

  test("a dynamic-batch model compiled for batch 1 and batch 8 matches at each", async () => {
    for (const batch of [1, 8]) expect(await compare(mlpModel(), x([batch, 16], batch))).toBeLessThan(1e-4);
  }, 60_000);

  test("tensors of rank 5 and 6 (described to the kernels with their leading dims folded) match", async () => {
    const b = new OnnxBuilder("rank6");
    const rng = prng(9);
    const t = b.node("Transpose", [b.input("x", "float32", [2, 3, 2, 4, 5])], { perm: [0, 2, 1, 4, 3] });
    const r = b.node("Relu", [b.node("Mul", [t, b.initializer("scale", randomTensor(rng, [5, 4]))])]);
    const u = b.node("Unsqueeze", [r, b.ints("axes", [0])]);
    b.output(b.node("ReduceSum", [u, b.ints("sum_axes", [3])], { keepdims: 1 }, { outputs: ["y"] }), "float32", [
      1,
      2,
      2,
      1,
      5,
      4,
    ]);
    expect(await compare(b.toBytes(), x([2, 3, 2, 4, 5]))).toBeLessThan(1e-4);
  }, 60_000);

  test(
    "an int64 embedding with data movement ops (Gather, Split, Transpose, Slice, Where, Pad, Expand, Concat) matches",
    async () => {
      const ids = BigInt64Array.from({ length: 18 }, (_, i) => BigInt((i * 7) % 20));
      expect(
        await compare(miscOpsModel(), {
          ids: { shape: [3, 6], data: ids },
          x: { shape: [3, 6, 8], data: randomInput(3, [3, 6, 8]) },
        }),
      )
        .toBeLessThan(1e-4);
    },
    60_000,
  );
});

describe("a compiled ONNX model as a NEFF", () => {
  test(
    "the weights are INPUT_WEIGHT inputs the NEFF binds itself: the model's inputs are the ONNX inputs only",
    async () => {
      const { compiled, neff } = build(mlpModel(), x([2, 16]));
      const file = readNeff(neff);
      // The NEFF signature lists the weights as inputs; the loaded model asks the caller for the ONNX input only.
      expect(file.inputs.map((t) => t.name)).toEqual(["x", ...compiled.weights.map((w) => w.name)]);
      const model = await rt.load(neff);
      try {
        expect(model.inputs.map((t) => [t.name, t.dtype, t.shape])).toEqual([["x", "float32", [2, 16]]]);
        expect(model.outputs.map((t) => [t.name, t.dtype, t.shape])).toEqual([["probs", "float32", [2, 10]]]);
      } finally {
        await model.unload();
      }
    },
    60_000,
  );

  test(
    "intermediate buffers and weights are device memory booked in the ledger at load and released at unload",
    async () => {
      const { compiled, neff } = build(transformerModel(), x([2, 8, 32]));
      expect(compiled.buffers.length).toBeGreaterThan(0);
      expect(compiled.memory.plannedBytes).toBeLessThan(compiled.memory.naiveBytes); // lifetimes that do not overlap share
      const nc = rt.cores()[0].ncs[0];
      const scratch = () => rt.memory().cores.find((c) => c.nc === nc)!.byUsage[DmaMemUsageType.SCRATCHPAD];
      const tensors = () => rt.memory().cores.find((c) => c.nc === nc)!.byUsage[DmaMemUsageType.TENSORS];
      const before = rt.memoryStats(0).bytesUsed, scratch0 = scratch(), tensors0 = tensors();
      const model = await rt.load(neff);
      try {
        expect(scratch() - scratch0).toBe(compiled.memory.plannedBytes);
        expect(tensors() - tensors0).toBe(compiled.memory.weightBytes);
        // Two executions with different inputs reuse the same buffers and each matches onnxruntime.
        for (const seed of [1, 2]) {
          const feeds = x([2, 8, 32], seed);
          const ours = f32((await execute(rt, model, feeds)).y);
          expect(maxRelError(ours, (await runOrt(transformerModel(), feeds)).y)).toBeLessThan(1e-4);
        }
      } finally {
        await model.unload();
      }
      expect(scratch()).toBe(scratch0);
      expect(rt.memoryStats(0).bytesUsed).toBe(before);
    },
    60_000,
  );

  test("an unsupported op is refused at compile time naming the node, the op and what is supported", () => {
    let err: unknown;
    try {
      compileOnnx(unsupportedOpModel());
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OnnxCompileError);
    const e = err as OnnxCompileError;
    expect([e.node, e.opType]).toEqual(["transpose_by_einsum", "Einsum"]);
    expect(e.message).toMatch(/^Cannot compile node "transpose_by_einsum" \(Einsum\): .*Einsum.*supported.*\bConv\b/);
  });
});
