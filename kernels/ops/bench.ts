/**
 * The op library against onnxruntime-web (one thread), side by side in one run, per library:
 *
 *   bun kernels/ops/bench.ts            deno run -A kernels/ops/bench.ts
 *
 * For each case it reports the median of:
 * - `ort`: onnxruntime-web `session.run` of the one-node model (inputs in, output out);
 * - `ours`: the kernel time of the lowered calls in {@linkcode OpHarness}, the 8 cores run one after another on
 *   this thread, so the sum is the total work on one thread, like `ort`'s;
 * - `ours/ort`: the ratio of the two (below 1: ours is faster);
 * - `core max`: the slowest core's share (what 8 parallel cores would take, before any dispatch cost);
 * - `scalar/simd`: the same libraries built without wasm SIMD, over the SIMD build (above 1: SIMD pays).
 * Ours.
 *
 * @module
 */
import * as ort from "onnxruntime-web";
import { KERNEL_FLAGS } from "../build.mjs";
import { buildLibrary } from "./build.mjs";
import { OpHarness } from "./harness.ts";
import { lowerNode } from "./lowering.ts";
import type { KernelCall, OpNode, OpValue } from "./op_node.ts";
import {
  type Attr,
  attr,
  BY_ORT_TYPE,
  decoded,
  makeData,
  onnxModel,
  opValue,
  ortFeeds,
  type TensorSpec,
} from "./_onnx_model.ts";

interface BenchCase {
  readonly library: string;
  readonly opType: string;
  readonly what: string;
  readonly attributes?: Readonly<Record<string, Attr>>;
  readonly inputs: readonly TensorSpec[];
}

const w = (name: string, shape: number[]): TensorSpec => ({ name, shape, constant: true });

const CASES: readonly BenchCase[] = [
  {
    library: "elementwise",
    opType: "Add",
    what: "[512,2048] + [2048]",
    inputs: [{ name: "a", shape: [512, 2048] }, w("b", [2048])],
  },
  {
    library: "elementwise",
    opType: "Mul",
    what: "[512,2048] · [512,2048]",
    inputs: [{ name: "a", shape: [512, 2048] }, { name: "b", shape: [512, 2048] }],
  },
  { library: "activation", opType: "Relu", what: "[1M]", inputs: [{ name: "x", shape: [1 << 20] }] },
  { library: "activation", opType: "Gelu", what: "[128,3072]", inputs: [{ name: "x", shape: [128, 3072] }] },
  { library: "activation", opType: "Sigmoid", what: "[1M]", inputs: [{ name: "x", shape: [1 << 20] }] },
  {
    library: "linalg",
    opType: "MatMul",
    what: "[256,512]·[512,512]",
    inputs: [{ name: "a", shape: [256, 512] }, w("b", [512, 512])],
  },
  {
    library: "linalg",
    opType: "MatMul",
    what: "[12,128,64]·[12,64,128]",
    inputs: [{ name: "a", shape: [12, 128, 64] }, { name: "b", shape: [12, 64, 128] }],
  },
  {
    library: "linalg",
    opType: "Gemm",
    what: "[1,768]·[3072,768]ᵀ + bias",
    attributes: { transB: attr.i(1) },
    inputs: [{ name: "a", shape: [1, 768] }, w("b", [3072, 768]), w("c", [3072])],
  },
  {
    library: "linalg",
    opType: "Gemm",
    what: "[128,768]·[768,768] + bias",
    inputs: [{ name: "a", shape: [128, 768] }, w("b", [768, 768]), w("c", [768])],
  },
  {
    library: "conv",
    opType: "Conv",
    what: "[1,64,56,56] * [64,64,3,3] pad 1",
    attributes: { pads: attr.ints([1, 1, 1, 1]) },
    inputs: [{ name: "x", shape: [1, 64, 56, 56] }, w("w", [64, 64, 3, 3]), w("b", [64])],
  },
  {
    library: "conv",
    opType: "Conv",
    what: "[1,3,224,224] * [64,3,7,7] s2 pad 3",
    attributes: { pads: attr.ints([3, 3, 3, 3]), strides: attr.ints([2, 2]) },
    inputs: [{ name: "x", shape: [1, 3, 224, 224] }, w("w", [64, 3, 7, 7]), w("b", [64])],
  },
  {
    library: "conv",
    opType: "Conv",
    what: "[1,256,14,14] * [256,256,1,1]",
    inputs: [{ name: "x", shape: [1, 256, 14, 14] }, w("w", [256, 256, 1, 1])],
  },
  {
    library: "conv",
    opType: "Conv",
    what: "depthwise [1,96,56,56] * [96,1,3,3] pad 1",
    attributes: { pads: attr.ints([1, 1, 1, 1]), group: attr.i(96) },
    inputs: [{ name: "x", shape: [1, 96, 56, 56] }, w("w", [96, 1, 3, 3])],
  },
  {
    library: "conv",
    opType: "MaxPool",
    what: "[1,64,112,112] k3 s2 pad 1",
    attributes: { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) },
    inputs: [{ name: "x", shape: [1, 64, 112, 112] }],
  },
  { library: "reduce", opType: "Softmax", what: "[1536,128] axis -1", inputs: [{ name: "x", shape: [1536, 128] }] },
  {
    library: "reduce",
    opType: "ReduceMean",
    what: "[256,4096] axes [-1]",
    attributes: { keepdims: attr.i(1) },
    inputs: [{ name: "x", shape: [256, 4096] }, {
      name: "axes",
      dtype: "int64",
      shape: [1],
      data: [-1],
      constant: true,
    }],
  },
  {
    library: "norm",
    opType: "LayerNormalization",
    what: "[128,768]",
    inputs: [{ name: "x", shape: [128, 768] }, w("s", [768]), w("b", [768])],
  },
  {
    library: "shape",
    opType: "Transpose",
    what: "[12,128,64] perm [1,0,2]",
    attributes: { perm: attr.ints([1, 0, 2]) },
    inputs: [{ name: "x", shape: [12, 128, 64] }],
  },
  {
    library: "shape",
    opType: "Gather",
    what: "[30522,128] rows by [256] ids",
    inputs: [w("e", [30522, 128]), { name: "i", dtype: "int64", shape: [256], range: [0, 30521] }],
  },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Runs `fn` until ~400 ms or 40 runs have passed (at least 5, after 2 warm-ups); returns the samples. */
async function sample<T>(fn: () => Promise<T>, measure: (t: T, ms: number) => number): Promise<number[]> {
  for (let i = 0; i < 2; i++) await fn();
  const out: number[] = [];
  const t0 = performance.now();
  while (out.length < 5 || (out.length < 40 && performance.now() - t0 < 400)) {
    const t = performance.now();
    const r = await fn();
    out.push(measure(r, performance.now() - t));
  }
  return out;
}

async function scalarLibraries(): Promise<Map<string, Uint8Array>> {
  const libs = new Map<string, Uint8Array>();
  for (const name of new Set(CASES.map((c) => c.library))) libs.set(name, await buildLibrary(name, KERNEL_FLAGS));
  return libs;
}

async function main(): Promise<void> {
  const runtime = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ? "Bun" : "Deno";
  const simd = await OpHarness.create({ checks: false });
  const scalarBytes = await scalarLibraries();
  const scalar = await OpHarness.create({
    checks: false,
    readLibrary: (name) => Promise.resolve(scalarBytes.get(name)!),
  });
  console.log(`op library vs onnxruntime-web ${ort.env.versions.web} (1 thread) on ${runtime}; medians in ms`);
  console.log(["library", "op", "shape", "ort", "ours", "ours/ort", "core max", "scalar/simd"].join("\t"));
  const filter = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.BENCH_FILTER;
  for (const c of CASES) {
    if (filter && !`${c.library} ${c.opType} ${c.what}`.includes(filter)) continue;
    const inputs = c.inputs.map((spec) => ({ spec, data: makeData(spec, Math.random) }));
    const session = await ort.InferenceSession.create(
      onnxModel(
        [{
          opType: c.opType,
          inputs: c.inputs.map((i) => i.name),
          outputs: ["y"],
          attributes: c.attributes,
        }],
        inputs,
        ["y"],
      ),
    );
    const feeds = ortFeeds(inputs);
    const first = await session.run(feeds);
    const y: OpValue = { name: "y", dtype: BY_ORT_TYPE[first.y.type], shape: first.y.dims.map(Number) };
    const node: OpNode = {
      name: c.opType,
      domain: "",
      opType: c.opType,
      attributes: Object.fromEntries(Object.entries(c.attributes ?? {}).map(([k, v]) => [k, decoded(v)])),
      inputs: inputs.map((i) => opValue(i.spec, i.data)),
      outputs: [y],
    };
    const calls: KernelCall[] = lowerNode(node);
    const values = [...node.inputs.filter((v): v is OpValue => v !== undefined), y];
    const given = Object.fromEntries(inputs.filter((i) => !i.spec.constant).map((i) => [i.spec.name, i.data]));
    const ortMs = median(await sample(() => session.run(feeds), (_, ms) => ms));
    const kernelMs = (h: OpHarness) => h.timings.reduce((t, x) => t + x.coreMs.reduce((a, b) => a + b, 0), 0);
    const maxCoreMs = (h: OpHarness) => h.timings.reduce((t, x) => t + Math.max(...x.coreMs), 0);
    const oursSamples = await sample(() => simd.run(calls, values, given), () => kernelMs(simd));
    const coreSamples = await sample(() => simd.run(calls, values, given), () => maxCoreMs(simd));
    const scalarSamples = await sample(() => scalar.run(calls, values, given), () => kernelMs(scalar));
    await session.release();
    const ours = median(oursSamples);
    console.log([
      c.library,
      c.opType,
      c.what,
      ortMs.toFixed(3),
      ours.toFixed(3),
      (ours / ortMs).toFixed(2),
      median(coreSamples).toFixed(3),
      (median(scalarSamples) / ours).toFixed(2),
    ].join("\t"));
  }
}

await main();
