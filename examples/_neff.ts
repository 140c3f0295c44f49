/** Shared by the examples: a one-call custom-op NEFF over float32 vectors from a reference kernel. */
import { buildCustomOpNeff } from "@nrt/core";
import { readFile } from "node:fs/promises";

/** Builds `lib`'s function `fn` as a model with input `x` and output `y` of `n` float32 elements. */
export async function oneOpNeffBytes(lib: string, fn: string, n: number, target = "cayman"): Promise<Uint8Array> {
  const wasm = new Uint8Array(await readFile(new URL(`../kernels/wasm/${lib}.wasm`, import.meta.url)));
  return buildCustomOpNeff({
    name: fn,
    target,
    inputs: [{ name: "x", dtype: "float32", shape: [n] }],
    outputs: [{ name: "y", dtype: "float32", shape: [n] }],
    libraries: [{ name: lib, wasm, totalCpus: 8, functions: [{ opcode: 1, name: fn }] }],
    calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
  });
}
