/**
 * `nrt demo` (ours): the quick-start job. Builds custom-op NEFFs from the reference kernels, runs them on the embedded
 * simulated Cayman device (8 Q7 cores SPMD) and checks every result against a plain TypeScript reference.
 *
 * @module
 */
import { buildCustomOpNeff, Runtime, TensorSet } from "@nrt/core";
import { readFile } from "node:fs/promises";
import { type CommandSpec, formatHelp, parseCommandArgs } from "./command_args.ts";
import { createNrtContainer, nrtPlugins, PortalToken } from "./container.ts";

const KERNELS = new URL("../../kernels/wasm/", import.meta.url);

/** How `nrt demo` is called. */
export const DEMO_COMMAND = {
  name: "demo",
  usage: "nrt demo",
  summary: "Run the reference kernels (vector_add, relu) on 8 simulated Q7 cores and check every result.",
  options: {},
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

/**
 * Runs the demo.
 *
 * @param args The arguments after `demo` (only `--help`).
 * @param log Where the lines go.
 * @returns 0 when every result matches the reference, else 1.
 * @throws {UsageError} For any option but `--help`, or an argument.
 */
export async function runDemo(args: readonly string[] = [], log: (s: string) => void = console.log): Promise<number> {
  if (parseCommandArgs(DEMO_COMMAND, args).help) {
    log(formatHelp(DEMO_COMMAND));
    return 0;
  }
  const container = createNrtContainer();
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1] });
  log(
    `nrt: ${rt.spec.name} (${rt.spec.generation}) device with ${rt.device.ncCount} NeuronCores, simulated; ${rt.visibleVncCount} logical core(s) visible`,
  );
  let bad = 0;
  try {
    const n = 1 << 18;
    const cases: Array<{ lib: string; fn: string; ins: number; ref: (x: Float32Array[], i: number) => number }> = [
      { lib: "vector_add", fn: "vector_add", ins: 2, ref: (x, i) => Math.fround(x[0][i] + x[1][i]) },
      { lib: "relu", fn: "relu", ins: 1, ref: (x, i) => Math.max(0, x[0][i]) },
    ];
    for (const c of cases) {
      const wasm = new Uint8Array(await readFile(new URL(`${c.lib}.wasm`, KERNELS)));
      const names = ["a", "b"].slice(0, c.ins);
      const model = await rt.load(buildCustomOpNeff({
        name: `${c.fn}.neff`,
        target: rt.spec.name,
        inputs: names.map((name) => ({ name, dtype: "float32", shape: [n] })),
        outputs: [{ name: "out", dtype: "float32", shape: [n] }],
        libraries: [{ name: c.lib, wasm, totalCpus: 8, functions: [{ opcode: 1, name: c.fn }] }],
        calls: [{ opcode: 1, inputs: names, outputs: ["out"] }],
      }));
      const xs = names.map(() => Float32Array.from({ length: n }, () => Math.fround(Math.random() * 2 - 1)));
      const ins = new TensorSet(), outs = new TensorSet();
      for (const [k, name] of names.entries()) {
        const t = await rt.allocateTensor({ size: n * 4, name });
        await t.write(new Uint8Array(xs[k].buffer));
        ins.add(name, t);
      }
      const out = await rt.allocateTensor({ size: n * 4, name: "out" });
      outs.add("out", out);
      const t0 = performance.now();
      const runs = 20;
      for (let r = 0; r < runs; r++) await model.execute(ins, outs);
      const ms = (performance.now() - t0) / runs;
      const got = new Float32Array((await out.read()).slice().buffer);
      let wrong = 0;
      for (let i = 0; i < n; i++) if (got[i] !== c.ref(xs, i)) wrong++;
      bad += wrong;
      log(
        `${c.fn.padEnd(12)} ${n} float32 elements on 8 Q7 cores: ${ms.toFixed(3)} ms/execute, ${
          wrong === 0 ? "matches the reference" : `${wrong} mismatches`
        }`,
      );
      await model.unload();
    }
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close();
  }
  log(bad === 0 ? "nrt: all results correct" : "nrt: results differ from the reference");
  return bad === 0 ? 0 : 1;
}
