/** Test helpers: the committed reference kernels and a custom-op NEFF per kernel. */
import { readFileSync } from "node:fs";
import { buildCustomOpNeff, type CustomOpTensorSpec } from "@nrt/core";

/** The committed `.wasm` of a reference kernel. */
export function kernel(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(`../kernels/wasm/${name}.wasm`, import.meta.url)));
}

/**
 * {@linkcode oneOpNeff} under another NEFF name: different bytes, so a second load on the same logical core is a model
 * of its own instead of a reference to the interned one (`nrt_load_util` step 7).
 */
export function namedOneOpNeff(
  name: string,
  lib: string,
  fn: string,
  inputs: CustomOpTensorSpec[],
  outputs: CustomOpTensorSpec[],
): Uint8Array {
  return buildCustomOpNeff({
    name,
    target: "cayman",
    inputs,
    outputs,
    libraries: [{ name: lib, wasm: kernel(lib), totalCpus: 8, functions: [{ opcode: 1, name: fn }] }],
    calls: [{ opcode: 1, inputs: inputs.map((t) => t.name), outputs: outputs.map((t) => t.name), ints: [] }],
  });
}

/** A one-call NEFF running `fn` of library `lib` with the given I/O. */
export function oneOpNeff(
  lib: string,
  fn: string,
  inputs: CustomOpTensorSpec[],
  outputs: CustomOpTensorSpec[],
  totalCpus = 8,
  ints: number[] = [],
  target = "cayman",
): Uint8Array {
  return buildCustomOpNeff({
    name: `${fn}.neff`,
    target,
    inputs,
    outputs,
    libraries: [{ name: lib, wasm: kernel(lib), totalCpus, functions: [{ opcode: 1, name: fn }] }],
    calls: [{ opcode: 1, inputs: inputs.map((t) => t.name), outputs: outputs.map((t) => t.name), ints }],
  });
}

/**
 * A NEFF bundling `count` copies of the relu library (opcodes 1..count) on FP32[8] I/O: past the 9-library limit of
 * `ucode_stage_libs` it is refused with "Exceeded max number of GPSIMD libs" (seed: runtime-synthesis §4.4).
 */
export function reluLibrariesNeff(count: number): Uint8Array {
  const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
  return buildCustomOpNeff({
    name: `relu_x${count}`,
    target: "cayman",
    inputs: [f32("a")],
    outputs: [f32("o")],
    libraries: Array.from({ length: count }, (_, i) => ({
      name: `relu${i}`,
      wasm: kernel("relu"),
      totalCpus: 8,
      functions: [{ opcode: i + 1, name: "relu" }],
    })),
    calls: [{ opcode: 1, inputs: ["a"], outputs: ["o"] }],
  });
}
