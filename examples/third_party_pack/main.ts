/**
 * Runnable example: register the third-party "maverick-sim" pack beside the three shipped packs, simulate a device
 * of its generation, and run vector_add on it.
 *
 * ```sh
 * bun examples/third_party_pack/main.ts
 * deno run -A examples/third_party_pack/main.ts
 * ```
 *
 * @module
 */
import "reflect-metadata";
import { readFile } from "node:fs/promises";
import { registerCayman } from "@nrt/arch-cayman";
import { registerMariana } from "@nrt/arch-mariana";
import { registerSunda } from "@nrt/arch-sunda";
import { buildCustomOpNeff, MemoryLogger, Runtime, TensorPlacement, TensorSet } from "@nrt/core";
import { registerDeviceSim } from "@nrt/device-sim";
import { container } from "tsyringe";
import { MAVERICK_SPEC } from "./spec.ts";
import { registerMaverick } from "./register.ts";

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
  const c = container.createChildContainer();
  registerSunda(c);
  registerCayman(c);
  registerMariana(c);
  registerMaverick(c);
  const portal = registerDeviceSim(c, { spec: MAVERICK_SPEC });
  try {
    const rt = await Runtime.init({ container: c, logger: new MemoryLogger() });
    try {
      const wasm = new Uint8Array(await readFile(new URL("../../kernels/wasm/vector_add.wasm", import.meta.url)));
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [n] });
      const model = await rt.load(buildCustomOpNeff({
        name: "vector_add.neff",
        target: MAVERICK_SPEC.name,
        inputs: [f32("a"), f32("b")],
        outputs: [f32("out")],
        libraries: [{ name: "vector_add", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "vector_add" }] }],
        calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
      }));
      const ins = new TensorSet(), outs = new TensorSet();
      for (const [name, scale] of [["a", 1], ["b", 2]] as const) {
        const t = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, n * 4, name);
        await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i * scale).buffer));
        ins.add(name, t);
      }
      const out = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, n * 4, "out");
      outs.add("out", out);
      await model.execute(ins, outs);
      const result = new Float32Array((await out.read()).slice().buffer);
      await model.unload();
      return { pack: rt.khal.spec.name, arch: rt.khal.spec.arch, out: result };
    } finally {
      await rt.close();
    }
  } finally {
    await portal.close(); // stops the simulated device's Q7 Workers
  }
}

if (import.meta.main) {
  const { pack, arch, out } = await runExample();
  console.log(`pack ${pack} (arch ${arch}): out[0..4] = ${Array.from(out.subarray(0, 4)).join(", ")}, out[1023] = ${out[1023]}`);
}
