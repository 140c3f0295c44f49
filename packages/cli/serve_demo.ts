/**
 * The demo models of `nrt serve --demo` (what `npm start` serves), built from the reference kernels, and the one
 * request the server prints as a `curl` line. Ours.
 *
 * @module
 */
import { buildCustomOpNeff, type CustomOpTensorSpec, type NeffTensor } from "@nrt/core";
import { dtypeInfo } from "@nrt/http-api";
import { readFile } from "node:fs/promises";

const KERNELS = new URL("../../kernels/wasm/", import.meta.url);

const f32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "float32", shape });

/** The demo models: each one reference kernel, its library, its function and its tensors. */
const DEMO_MODELS: ReadonlyArray<
  { name: string; lib: string; fn: string; inputs: CustomOpTensorSpec[]; outputs: CustomOpTensorSpec[] }
> = [
  {
    name: "vector_add",
    lib: "vector_add",
    fn: "vector_add",
    inputs: [f32("a", [1024]), f32("b", [1024])],
    outputs: [f32("out", [1024])],
  },
  { name: "relu", lib: "relu", fn: "relu", inputs: [f32("x", [8])], outputs: [f32("y", [8])] },
  { name: "softmax", lib: "softmax", fn: "softmax_rows", inputs: [f32("x", [2, 4])], outputs: [f32("y", [2, 4])] },
  {
    name: "matmul",
    lib: "matmul",
    fn: "matmul",
    inputs: [f32("a", [4, 4]), f32("b", [4, 4])],
    outputs: [f32("c", [4, 4])],
  },
];

/**
 * The demo models, built from the reference kernels: `vector_add` (a, b FP32 [1024]), `relu` (x FP32 [8]),
 * `softmax` (x FP32 [2, 4], by rows) and `matmul` (a [4, 4] · b [4, 4]).
 *
 * @param target The NEFF target (`cayman`).
 * @returns NEFF bytes by file name.
 */
export async function buildDemoModels(target: string): Promise<Record<string, Uint8Array>> {
  const out: Record<string, Uint8Array> = {};
  for (const m of DEMO_MODELS) {
    const wasm = new Uint8Array(await readFile(new URL(`${m.lib}.wasm`, KERNELS)));
    out[`${m.name}.neff`] = buildCustomOpNeff({
      name: `${m.name}.neff`,
      target,
      inputs: m.inputs,
      outputs: m.outputs,
      libraries: [{ name: m.lib, wasm, totalCpus: 8, functions: [{ opcode: 1, name: m.fn }] }],
      calls: [{ opcode: 1, inputs: m.inputs.map((t) => t.name), outputs: m.outputs.map((t) => t.name) }],
    });
  }
  return out;
}

/**
 * The demo models' configs: every demo model on every logical core (`{"instances": "per-core"}`), as Triton gives a
 * model with no instance group one instance per GPU. With the repository's default of one instance, a model's
 * requests take turns on one logical core: `nrt serve --demo` answered 6.8–7.4k relu requests a second at 32
 * connections (`wrk`, this 2-CPU machine), and 15.7–17.7k with one instance per core. Ours.
 *
 * @returns `<name>.json` bytes by file name, one per model of {@linkcode buildDemoModels}.
 */
export function demoModelConfigs(): Record<string, Uint8Array> {
  const config = new TextEncoder().encode(`${JSON.stringify({ instances: "per-core" })}\n`);
  const out: Record<string, Uint8Array> = {};
  for (const m of DEMO_MODELS) out[`${m.name}.json`] = config;
  return out;
}

/** A small JSON example input for a tensor, or `undefined` when it has no JSON form. */
function exampleData(t: NeffTensor): Array<number | boolean> | undefined {
  const info = dtypeInfo(t.dtype);
  if (info === undefined || !info.json) return undefined;
  const n = t.shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, (_, i) => {
    if (info.datatype === "BOOL") return i % 2 === 0;
    if (info.datatype.startsWith("UINT")) return i % 7;
    return (i % 7) - 3;
  });
}

/**
 * The request `curl` shows: an inference of the smallest JSON-capable model, else server metadata.
 *
 * @param models The models that are ready, with their inputs.
 * @returns The path and the JSON body (`undefined` for a GET).
 */
export function exampleRequest(
  models: ReadonlyArray<{ name: string; inputs: readonly NeffTensor[] }>,
): { path: string; body: string | undefined } {
  const size = (m: { inputs: readonly NeffTensor[] }): number =>
    m.inputs.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
  const usable = models.filter((m) => size(m) <= 64 && m.inputs.every((t) => exampleData(t) !== undefined)).sort((
    a,
    b,
  ) => size(a) - size(b));
  const m = usable[0];
  if (m === undefined) return { path: models.length > 0 ? `/v2/models/${models[0].name}` : "/v2", body: undefined };
  const inputs = m.inputs.map((t) => ({
    name: t.name,
    shape: t.shape,
    datatype: dtypeInfo(t.dtype)!.datatype,
    data: exampleData(t),
  }));
  return { path: `/v2/models/${m.name}/infer`, body: JSON.stringify({ inputs }) };
}
