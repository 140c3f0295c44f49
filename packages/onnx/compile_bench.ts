/**
 * Compile time of the test models, side by side with onnxruntime-web creating a session from the same bytes (it
 * also parses, resolves and optimizes the graph; nothing of ours runs in it), and the planned intermediate memory
 * against one buffer per value. Run: `bun packages/onnx/compile_bench.ts` or
 * `deno run -A packages/onnx/compile_bench.ts`. Ours.
 *
 * @module
 */
import * as ort from "onnxruntime-web";
import { cnnModel, ifModel, mlpModel, shapeChainModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";

ort.env.wasm.numThreads = 1;

const RUNS = 20;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function timeIt(fn: () => unknown): Promise<number> {
  await fn(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

const models: [string, Uint8Array, Record<string, number[]>][] = [
  ["mlp (x=[8,16])", mlpModel(), { x: [8, 16] }],
  ["cnn (x=[8,3,16,16])", cnnModel(), { x: [8, 3, 16, 16] }],
  ["transformer (x=[4,8,32])", transformerModel(), { x: [4, 8, 32] }],
  ["if_const (x=[2,4])", ifModel(), {}],
  ["shape_chain (x=[8,3,4])", shapeChainModel(), { x: [8, 3, 4] }],
];

const runtime = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ? "bun" : "deno";
console.log(`runtime ${runtime}; median of ${RUNS} runs after one warm-up`);
console.log("model                      | compileOnnx ms | ort session ms | ratio | calls | planned B | naive B");
for (const [name, bytes, inputShapes] of models) {
  const ours = await timeIt(() => compileOnnx(bytes, { inputShapes }));
  const ref = await timeIt(async () => await (await ort.InferenceSession.create(bytes)).release());
  const m = compileOnnx(bytes, { inputShapes });
  console.log(
    `${name.padEnd(26)} | ${ours.toFixed(2).padStart(14)} | ${ref.toFixed(2).padStart(14)} | ` +
      `${(ours / ref).toFixed(2).padStart(5)} | ${String(m.calls.length).padStart(5)} | ` +
      `${String(m.memory.plannedBytes).padStart(9)} | ${String(m.memory.naiveBytes).padStart(7)}`,
  );
}
