/**
 * Test helpers for the ONNX suites: the op libraries, onnxruntime-web (1 thread) as the oracle, one execution of a
 * NEFF through the public runtime API, and the comparison the tolerances are stated in.
 */
import { expect } from "bun:test";
import { type Model, type Runtime, TensorSet } from "@nrt/core";
import * as ort from "onnxruntime-web";
import { readOpLibraries } from "../packages/cli/compile_command.ts";
// Sessions that put back the Web Worker onnxruntime-web replaces (the simulator needs it).
import { ortSession } from "../kernels/ops/_onnx_model.ts";

ort.env.wasm.numThreads = 1;

/** Every op library binary, read once. */
export const OP_LIBRARIES: Map<string, Uint8Array> = await readOpLibraries([
  "activation",
  "conv",
  "elementwise",
  "linalg",
  "norm",
  "reduce",
  "shape",
]);

/** An input's data and shape. */
export interface Feed {
  readonly shape: readonly number[];
  readonly data: Float32Array | BigInt64Array;
}

/** The model run by onnxruntime-web on `feeds`; float32 outputs by name. */
export async function runOrt(
  onnx: Uint8Array,
  feeds: Readonly<Record<string, Feed>>,
): Promise<Record<string, Float32Array>> {
  const session = await ortSession(onnx);
  try {
    const tensors = Object.fromEntries(
      Object.entries(feeds).map(([k, f]) => [
        k,
        f.data instanceof BigInt64Array
          ? new ort.Tensor("int64", f.data, [...f.shape])
          : new ort.Tensor("float32", f.data, [...f.shape]),
      ]),
    );
    const out = await session.run(tensors);
    return Object.fromEntries(Object.entries(out).map(([k, t]) => [k, t.data as Float32Array]));
  } finally {
    await session.release();
  }
}

/** One execution of a loaded model with host tensors; output bytes by name. The tensors are freed. */
export async function execute(
  rt: Runtime,
  model: Model,
  feeds: Readonly<Record<string, Feed>>,
): Promise<Record<string, Uint8Array>> {
  const ins = new TensorSet(), outs = new TensorSet();
  try {
    for (const t of model.inputs) {
      const f = feeds[t.name];
      if (f === undefined) throw new RangeError(`Feed "${t.name}" is missing`);
      const x = await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name });
      ins.add(t.name, x);
      await x.write(new Uint8Array(f.data.buffer, f.data.byteOffset, f.data.byteLength));
    }
    for (const t of model.outputs) {
      outs.add(t.name, await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name }));
    }
    await model.execute(ins, outs);
    const result: Record<string, Uint8Array> = {};
    for (const t of model.outputs) result[t.name] = (await outs.get(t.name).read()).slice();
    return result;
  } finally {
    for (const set of [ins, outs]) for (const n of [...set.names()]) await set.get(n).free();
  }
}

/** float32 view of output bytes. */
export function f32(bytes: Uint8Array): Float32Array {
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/**
 * Largest |ours − ref| / max(|ref|, floor) (relative, with a floor so values near zero compare absolutely, as the
 * compiler's own end-to-end suite measures); every value of ours must be finite and the lengths equal.
 */
export function maxRelError(ours: Float32Array, ref: Float32Array, floor = 1e-3): number {
  expect(ours.length).toBe(ref.length);
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    expect(Number.isFinite(ours[i])).toBe(true);
    worst = Math.max(worst, Math.abs(ours[i] - ref[i]) / Math.max(Math.abs(ref[i]), floor));
  }
  return worst;
}
