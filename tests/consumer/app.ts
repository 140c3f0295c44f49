// A consumer application outside the workspace, with default compiler options (no legacy decorators, no DI
// container): it imports the nrt packages by name, the way a JSR (Deno) or npm (Bun) user does — the root export of
// @nrt/core plus one subpath, an arch pack and the simulator — and runs one inference with `await using`.
import { buildCustomOpNeff, Runtime, TensorSet } from "@nrt/core";
import { readNeffHeader } from "@nrt/core/neff";
import { cayman } from "@nrt/arch-cayman";
import { DeviceSimPortal } from "@nrt/device-sim";

const wasmPath = new URL(Deno_or_Bun_arg(), "file://");
const wasm = new Uint8Array(await (await fetch(wasmPath)).arrayBuffer());
const n = 1024;
const neff = buildCustomOpNeff({
  name: "consumer.neff",
  target: "cayman",
  inputs: [{ name: "a", dtype: "float32", shape: [n] }, { name: "b", dtype: "float32", shape: [n] }],
  outputs: [{ name: "out", dtype: "float32", shape: [n] }],
  libraries: [{ name: "vector_add", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "vector_add" }] }],
  calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
});
if (readNeffHeader(neff).name !== "consumer.neff") throw new Error("the NEFF header does not name the model");

// The runtime owns the simulator: leaving the block unloads the model, closes the runtime and stops the device.
{
  await using rt = await Runtime.init({ portal: new DeviceSimPortal(), archPacks: [cayman], visibleCores: [0, 1] });
  await using model = await rt.load(neff);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const [name, v] of [["a", 1.25], ["b", 2]] as const) {
    const t = await rt.allocateTensor({ location: "host", size: n * 4, name });
    await t.write(new Uint8Array(new Float32Array(n).fill(v).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ location: "host", size: n * 4, name: "out" }));
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  if (!out.every((x) => x === 3.25)) throw new Error(`wrong result: ${out.slice(0, 4)}`);
  console.log(`consumer: vector_add on 8 simulated Q7 cores OK (${out[0]}), ${rt.spec.name}`);
}

function Deno_or_Bun_arg(): string {
  const g = globalThis as { Deno?: { args: string[] }; process?: { argv: string[] } };
  return g.Deno ? g.Deno.args[0] : g.process!.argv[2];
}
