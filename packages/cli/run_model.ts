/**
 * `nrt run FILE.neff --input NAME=FILE.json … [--json]`: executes a NEFF on the embedded simulator and prints its
 * outputs. Inputs are JSON arrays (nested arrays are flattened row-major) of the input's dtype.
 *
 * @module
 */
import { envFromProcess, NrtError, Portal, Runtime, TensorPlacement, TensorSet } from "@nrt/core";
import { readFile } from "node:fs/promises";
import { createNrtContainer } from "./container.ts";

const DTYPE_ARRAYS: Record<string, { new (b: ArrayBuffer): ArrayLike<number> & { buffer: ArrayBufferLike } } | undefined> = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, uint32: Uint32Array, int16: Int16Array,
  uint16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
};

/** `nrt run`: exit 0, 1 on a failure, 2 on a usage error. */
export async function runModel(args: string[]): Promise<number> {
  const file = args.find((a) => !a.startsWith("--") && !a.includes("="));
  if (file === undefined) {
    console.error("nrt run: a NEFF file is required\nUsage: nrt run FILE.neff --input NAME=FILE.json ... [--json]");
    return 2;
  }
  const json = args.includes("--json");
  const inputs = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--input" && args[i + 1]?.includes("=")) {
      const [k, v] = args[++i].split("=", 2);
      inputs.set(k, v);
    }
  }
  const container = createNrtContainer({ env: envFromProcess() });
  const rt = await Runtime.init({ container, env: envFromProcess() });
  try {
    const model = await rt.load(new Uint8Array(await readFile(file)));
    const ins = new TensorSet(), outs = new TensorSet();
    for (const t of model.inputs) {
      const src = inputs.get(t.name);
      if (src === undefined) throw new NrtError(2, `Input "${t.name}" is missing: pass --input ${t.name}=FILE.json`);
      const Ctor = DTYPE_ARRAYS[t.dtype];
      if (Ctor === undefined) throw new NrtError(2, `Input "${t.name}" has dtype ${t.dtype}, which --input cannot read`);
      const values = (JSON.parse(await readFile(src, "utf8")) as unknown[]).flat(8) as number[];
      const arr = new Ctor(new ArrayBuffer(t.size)) as unknown as number[];
      values.forEach((v, k) => (arr[k] = v));
      const x = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, model.vnc, t.size, t.name);
      await x.write(new Uint8Array((arr as unknown as { buffer: ArrayBuffer }).buffer));
      ins.add(t.name, x);
    }
    for (const t of model.outputs) outs.add(t.name, await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, model.vnc, t.size, t.name));
    await model.execute(ins, outs);
    const result: Record<string, number[]> = {};
    for (const t of model.outputs) {
      const Ctor = DTYPE_ARRAYS[t.dtype] ?? Uint8Array;
      const bytes = await outs.get(t.name).read();
      result[t.name] = Array.from(new Ctor(bytes.slice().buffer as ArrayBuffer));
    }
    console.log(json ? JSON.stringify({ model: model.name, outputs: result }) : Object.entries(result).map(([k, v]) => `${k}: ${v.join(" ")}`).join("\n"));
    return 0;
  } finally {
    await rt.close();
    await container.resolve(Portal).close(); // the simulated device's Q7 Workers
  }
}

