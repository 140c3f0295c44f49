/**
 * Private, for tests: executes a {@linkcode CompiledOnnxModel} as the runtime would, over its planned storage. It
 * allocates the caller's inputs and outputs, the weights and every intermediate buffer as byte arrays, and for
 * each call reads the call's values from their placements, runs the call on the op library's in-process harness
 * (`kernels/ops/harness.ts`) and writes its outputs back at their placements. A plan that let two live values
 * share bytes would corrupt a result here. Ours.
 *
 * @module
 */
import type { OpHarness } from "../../kernels/ops/harness.ts";
import type { OpValue } from "@nrt/ops";
import type { CompiledOnnxModel, ValuePlacement } from "./compiled_model.ts";
import { DTYPE_BYTES } from "./dtype.ts";

/** Runs the compiled model; `inputs` by input name, returns output bytes by output name. */
export async function runCompiled(
  harness: OpHarness,
  model: CompiledOnnxModel,
  inputs: Readonly<Record<string, ArrayBufferView>>,
): Promise<Record<string, Uint8Array>> {
  const storage = new Map<string, Uint8Array>();
  for (const t of model.inputs) {
    const given = inputs[t.name];
    if (given === undefined) throw new RangeError(`Cannot run: input "${t.name}" is missing`);
    storage.set(`input:${t.name}`, new Uint8Array(given.buffer, given.byteOffset, given.byteLength).slice());
  }
  for (const t of model.outputs) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    storage.set(`output:${t.name}`, new Uint8Array(bytes).fill(0xff));
  }
  for (const w of model.weights) storage.set(`weight:${w.name}`, w.bytes);
  // Buffers start as NaN patterns: a kernel that reads what nobody wrote yields NaN, which the comparison catches.
  for (const b of model.buffers) storage.set(`buffer:${b.id}`, new Uint8Array(b.bytes).fill(0xff));
  const where = (p: ValuePlacement) =>
    storage.get(p.storage === "buffer" ? `buffer:${p.buffer}` : `${p.storage}:${p.tensor}`)!;
  for (const call of model.calls) {
    const values: OpValue[] = [];
    const given: Record<string, Uint8Array> = {};
    for (const name of new Set([...call.inputs, ...call.outputs])) {
      const p = model.values[name];
      values.push({ name, dtype: p.dtype, shape: p.shape });
      if (call.inputs.includes(name)) given[name] = where(p).slice(p.offset, p.offset + p.byteLength);
    }
    const result = await harness.run([call], values, given);
    for (const name of call.outputs) {
      const p = model.values[name];
      where(p).set(result.get(name)!, p.offset);
    }
  }
  return Object.fromEntries(model.outputs.map((t) => [t.name, storage.get(`output:${t.name}`)!]));
}
