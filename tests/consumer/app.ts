// A consumer application outside the workspace, with default compiler options (no legacy decorators): it imports
// the nrt packages by name, the way a JSR (Deno) or npm (Bun) user does, and runs one inference.
import { buildCustomOpNeff, Portal, Runtime, TensorPlacement, TensorSet } from "@nrt/core";
import { createNrtContainer } from "@nrt/cli";

const wasmPath = new URL(Deno_or_Bun_arg(), "file://");
const wasm = new Uint8Array(await (await fetch(wasmPath)).arrayBuffer());
const n = 1024;
const container = createNrtContainer();
const rt = await Runtime.init({ container, visibleCores: [0, 1] });
try {
  const model = await rt.load(buildCustomOpNeff({
    name: "consumer.neff", target: "cayman",
    inputs: [{ name: "a", dtype: "float32", shape: [n] }, { name: "b", dtype: "float32", shape: [n] }],
    outputs: [{ name: "out", dtype: "float32", shape: [n] }],
    libraries: [{ name: "vector_add", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "vector_add" }] }],
    calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
  }));
  const ins = new TensorSet(), outs = new TensorSet();
  for (const [name, v] of [["a", 1.25], ["b", 2]] as const) {
    const t = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, n * 4, name);
    await t.write(new Uint8Array(new Float32Array(n).fill(v).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, n * 4, "out"));
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  if (!out.every((x) => x === 3.25)) throw new Error(`wrong result: ${out.slice(0, 4)}`);
  console.log(`consumer: vector_add on 8 simulated Q7 cores OK (${out[0]})`);
} finally {
  await rt.close();
  await container.resolve(Portal).close();
}

function Deno_or_Bun_arg(): string {
  const g = globalThis as { Deno?: { args: string[] }; process?: { argv: string[] } };
  return g.Deno ? g.Deno.args[0] : g.process!.argv[2];
}
