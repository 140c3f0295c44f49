/**
 * The idiomatic API: a Runtime on the embedded simulator and the Cayman pack, a custom-op model built from a
 * reference kernel, tensors, one execution, cleanup by `await using`. Run with `bun examples/idiomatic.ts` or `deno run -A examples/idiomatic.ts`.
 *
 * @module
 */
import { cayman } from "@nrt/arch-cayman";
import { buildCustomOpNeff, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { readFile } from "node:fs/promises";

/** Runs softmax over a 4 × 8 matrix on the 8 Q7 cores of NeuronCore 0 and returns the result rows. */
export async function main(log: (s: string) => void = console.log): Promise<number[][]> {
  // The runtime owns the simulated device: leaving the function unloads the model and closes both.
  await using rt = await Runtime.init({ portal: new DeviceSimPortal(), archPacks: [cayman], visibleCores: [0, 1] });
  const wasm = new Uint8Array(await readFile(new URL("../kernels/wasm/softmax.wasm", import.meta.url)));
  await using model = await rt.load(buildCustomOpNeff({
    name: "softmax",
    target: rt.spec.name,
    inputs: [{ name: "logits", dtype: "float32", shape: [4, 8] }],
    outputs: [{ name: "probs", dtype: "float32", shape: [4, 8] }],
    libraries: [{ name: "softmax", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "softmax_rows" }] }],
    calls: [{ opcode: 1, inputs: ["logits"], outputs: ["probs"] }],
  }));
  const inputs = new TensorSet(), outputs = new TensorSet();
  const logits = await rt.allocateTensor({ vnc: model.vnc, size: 4 * 8 * 4, name: "logits" });
  await logits.write(new Uint8Array(Float32Array.from({ length: 32 }, (_, i) => (i % 8) - 4).buffer));
  inputs.add("logits", logits);
  const probs = await rt.allocateTensor({ vnc: model.vnc, size: 4 * 8 * 4, name: "probs" });
  outputs.add("probs", probs);
  await model.execute(inputs, outputs); // throws NrtError with the status on failure
  const p = new Float32Array((await probs.read()).slice().buffer);
  const rows = [0, 1, 2, 3].map((r) => Array.from(p.subarray(r * 8, r * 8 + 8)));
  log(
    `row 0: ${rows[0].map((v) => v.toFixed(4)).join(" ")} (sums to ${rows[0].reduce((a, b) => a + b, 0).toFixed(4)})`,
  );
  await logits.free();
  await probs.free();
  return rows;
}

if (import.meta.main) await main();
