/**
 * `buildOnnxNeff`: the compiler's back end, {@linkcode CompiledOnnxModel} → one multi-op custom-op NEFF that
 * `Runtime.load` installs and `Model.execute` runs on the 8 Q7 cores of a NeuronCore. It extends the custom-op NEFF
 * of `@nrt/core` (`buildCustomOpNeff`, docs/neff.md; the multi-op members in docs/onnx.md) rather than defining a format of its own:
 *
 * - the op libraries used become `ucode_libs` (a library some call runs on 1 core is carried a second time with
 *   `total_cpus` 1, since the fan-out is a property of the library), each used function gets an opcode;
 * - the weights become inputs the NEFF binds itself as `INPUT_WEIGHT` (its own metaneff and checkpoint members),
 *   so they reach the device once, at load;
 * - the planned intermediate buffers become `virtual` vars the model allocates at load;
 * - every value a call names that is not an input, output or weight as it stands (a value in a buffer, a view such
 *   as a Reshape, a tensor of rank above 4) becomes a view (Pool.json `tensors`) at its placement, described with
 *   at most 4 dims (the leading ones folded into the first: the kernels read shapes from their scalars).
 *
 * Ours: the seeds say nothing about ONNX.
 *
 * @module
 */
import {
  buildCustomOpNeff,
  type CustomOpBufferSpec,
  type CustomOpCallSpec,
  type CustomOpLibrarySpec,
  type CustomOpTensorSpec,
  type CustomOpViewSpec,
  type CustomOpWeightSpec,
} from "@nrt/core";
import type { CompiledOnnxModel, ValuePlacement } from "./compiled_model.ts";
import { OnnxCompileError } from "./error.ts";

/** Options of {@linkcode buildOnnxNeff}. */
export interface OnnxNeffOptions {
  /** The op library binaries by library name (`kernels/ops/wasm/<name>.wasm`); every library a call uses. */
  readonly libraries: ReadonlyMap<string, Uint8Array>;
  /** The NEFF header name (default: the model's name with `.neff`). */
  readonly name?: string;
}

/** The kernel ABI's descriptor rank. */
const MAX_DESCRIPTOR_RANK = 4;

/** A shape as a descriptor holds it: as is up to rank 4, else rank 4 with the leading dims folded into the first. */
export function descriptorShape(shape: readonly number[]): number[] {
  if (shape.length <= MAX_DESCRIPTOR_RANK) return [...shape];
  const lead = shape.slice(0, shape.length - MAX_DESCRIPTOR_RANK + 1).reduce((a, b) => a * b, 1);
  return [lead, ...shape.slice(shape.length - MAX_DESCRIPTOR_RANK + 1)];
}

const sameShape = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * Builds the NEFF of a compiled ONNX model.
 *
 * @example Compile a model built in code to NEFF bytes
 * ```ts
 * import { buildOnnxNeff, compileOnnx, OnnxBuilder } from "@nrt/onnx";
 * import { readFileSync } from "node:fs";
 * const b = new OnnxBuilder("relu");
 * b.output(b.node("Relu", [b.input("x", "float32", [2, 4])], {}, { outputs: ["y"] }), "float32", [2, 4]);
 * const compiled = compileOnnx(b.toBytes());
 * const wasm = readFileSync(new URL("../../kernels/ops/wasm/activation.wasm", import.meta.url));
 * const neff = buildOnnxNeff(compiled, { libraries: new Map([["activation", new Uint8Array(wasm)]]) });
 * console.log(neff.byteLength % 10240); // 1024: the header, then the payload padded to 10,240-byte records
 * ```
 *
 * @param model The compiled model.
 * @param options The library binaries and the header name.
 * @returns The NEFF bytes.
 * @throws {OnnxCompileError} When the model has an input, output or weight with no elements (the runtime has no
 * empty tensors), a call names a library that `options.libraries` lacks, or the NEFF builder refuses the model
 * (a name used twice).
 */
export function buildOnnxNeff(model: CompiledOnnxModel, options: OnnxNeffOptions): Uint8Array {
  const io = (t: { name: string; dtype: string; shape: readonly number[] }): CustomOpTensorSpec => {
    if (t.shape.some((d) => d === 0)) {
      throw new OnnxCompileError(
        {},
        `tensor "${t.name}" has no elements (shape [${t.shape}]); the runtime has no empty tensors`,
      );
    }
    return { name: t.name, dtype: t.dtype, shape: [...t.shape] };
  };
  const inputs = model.inputs.map(io), outputs = model.outputs.map(io);
  const weights: CustomOpWeightSpec[] = model.weights.map((w) => ({ ...io(w), data: w.bytes }));
  const taken = new Set([...inputs, ...outputs, ...weights].map((t) => t.name));
  const unique = (want: string): string => {
    let n = want;
    for (let k = 1; taken.has(n); k++) n = `${want}#${k}`;
    taken.add(n);
    return n;
  };
  const buffers: CustomOpBufferSpec[] = model.buffers.map((b) => ({
    name: unique(`nrt.buffer${b.id}`),
    size: b.bytes,
  }));
  const whole = new Map([...inputs, ...outputs, ...weights].map((t) => [t.name, t]));

  // Each value a call names → the name the NEFF call uses: the tensor itself, or a view at its placement.
  const views: CustomOpViewSpec[] = [];
  const operand = new Map<string, string>();
  const baseOf = (p: ValuePlacement): string => (p.storage === "buffer" ? buffers[p.buffer!].name : p.tensor!);
  const operandOf = (value: string): string => {
    const known = operand.get(value);
    if (known !== undefined) return known;
    const p = model.values[value];
    if (p === undefined) throw new OnnxCompileError({}, `value "${value}" has no placement`);
    const base = baseOf(p), t = whole.get(base);
    const ownTensor = t !== undefined && base === value && p.offset === 0 && t.dtype === p.dtype &&
      sameShape(t.shape, p.shape);
    let name = value;
    if (!ownTensor || p.shape.length > MAX_DESCRIPTOR_RANK) {
      name = unique(value);
      views.push({ name, var: base, offset: p.offset, dtype: p.dtype, shape: descriptorShape(p.shape) });
    }
    operand.set(value, name);
    return name;
  };

  // One library spec per (library, fan-out); one opcode per (library spec, function), in first-use order.
  const libraries = new Map<
    string,
    { name: string; wasm: Uint8Array; totalCpus: 1 | 8; functions: Map<string, number> }
  >();
  let nextOpcode = 1;
  const calls: CustomOpCallSpec[] = model.calls.map((c) => {
    const key = c.totalCpus === 8 ? c.library : `${c.library}_1cpu`;
    let lib = libraries.get(key);
    if (lib === undefined) {
      const wasm = options.libraries.get(c.library);
      if (wasm === undefined) {
        throw new OnnxCompileError({ node: c.node, opType: c.opType }, `op library "${c.library}" was not provided`);
      }
      lib = { name: key, wasm, totalCpus: c.totalCpus, functions: new Map() };
      libraries.set(key, lib);
    }
    let opcode = lib.functions.get(c.fn);
    if (opcode === undefined) lib.functions.set(c.fn, opcode = nextOpcode++);
    return { opcode, inputs: c.inputs.map(operandOf), outputs: c.outputs.map(operandOf), ints: c.ints };
  });
  const libs: CustomOpLibrarySpec[] = [...libraries.values()].map((l) => ({
    name: l.name,
    wasm: l.wasm,
    totalCpus: l.totalCpus,
    functions: [...l.functions].map(([name, opcode]) => ({ opcode, name })),
  }));
  try {
    return buildCustomOpNeff({
      name: options.name ?? `${model.name || "model"}.neff`,
      target: model.target,
      inputs,
      outputs,
      weights,
      buffers,
      views,
      libraries: libs,
      calls,
    });
  } catch (e) {
    // The builder refuses a spec it cannot encode (a name used twice) with a RangeError; for a model that is the
    // model's fault, so it is reported like every other refusal.
    if (e instanceof RangeError) throw new OnnxCompileError({}, e.message, e);
    throw e;
  }
}
