/**
 * Runnable example: give the runtime the third-party "maverick-sim" pack beside the three shipped packs, simulate a
 * device of its generation, and run vector_add on it (`await using` closes the model and the runtime).
 *
 * ```sh
 * bun examples/third_party_pack/main.ts
 * deno run -A examples/third_party_pack/main.ts
 * ```
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";
import { sunda } from "@nrt/arch-sunda";
import { buildCustomOpNeff, MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { maverick } from "./pack.ts";
import { MAVERICK_SPEC } from "./spec.ts";

/** What one run of the example produced. */
export interface ExampleResult {
  /** The pack the runtime chose. */
  readonly pack: string;
  /** Its `al_hal_tpb_arch_type`. */
  readonly arch: number;
  /** `out = a + b` for `a[i] = i`, `b[i] = 2i`. */
  readonly out: Float32Array;
}

/** Runs vector_add of `n` elements on a simulated "maverick-sim" device. */
export async function runExample(n = 1024): Promise<ExampleResult> {
  // The fourth generation goes beside the three shipped packs; the runtime picks it from the arch the device reports.
  await using rt = await Runtime.init({
    portal: new DeviceSimPortal({ spec: MAVERICK_SPEC }),
    archPacks: [sunda, cayman, mariana, maverick],
    logger: new MemoryLogger(),
  });
  const wasm = new Uint8Array(await readFile(new URL("../../kernels/wasm/vector_add.wasm", import.meta.url)));
  const f32 = (name: string) => ({ name, dtype: "float32", shape: [n] });
  await using model = await rt.load(buildCustomOpNeff({
    name: "vector_add.neff",
    target: MAVERICK_SPEC.name,
    inputs: [f32("a"), f32("b")],
    outputs: [f32("out")],
    libraries: [{ name: "vector_add", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "vector_add" }] }],
    calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
  }));
  const ins = new TensorSet(), outs = new TensorSet();
  for (const [name, scale] of [["a", 1], ["b", 2]] as const) {
    const t = await rt.allocateTensor({ size: n * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i * scale).buffer));
    ins.add(name, t);
  }
  const out = await rt.allocateTensor({ size: n * 4, name: "out" });
  outs.add("out", out);
  await model.execute(ins, outs);
  return { pack: rt.spec.name, arch: rt.spec.arch, out: new Float32Array((await out.read()).slice().buffer) };
}

if (import.meta.main) {
  const { pack, arch, out } = await runExample();
  console.log(
    `pack ${pack} (arch ${arch}): out[0..4] = ${Array.from(out.subarray(0, 4)).join(", ")}, out[1023] = ${out[1023]}`,
  );
}
