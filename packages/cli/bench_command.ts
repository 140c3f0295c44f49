/**
 * `nrt bench [NAME…] [--deno]`: runs the benchmarks under `bench/` (exec, pipeline, portal, http, guard), one process each,
 * with a progress line per benchmark, and passes their ratio tables through. Every benchmark measures its two sides
 * in the same run, so the ratios are comparable on a noisy machine; absolute times are not.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The benchmarks, in the order they run. */
export const BENCHMARKS: readonly string[] = ["exec", "pipeline", "portal", "http", "guard", "onnx"];

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

function runtimeBin(deno: boolean): string {
  const bin = join(root, "node_modules", ".bin", deno ? "deno" : "bun");
  return existsSync(bin) ? bin : deno ? "deno" : "bun";
}

/** Runs the named benchmarks (all by default); exit 0 when every one succeeded, 1 otherwise, 2 on a usage error. */
export async function runBench(args: string[], err: (s: string) => void = console.error): Promise<number> {
  const deno = args.includes("--deno");
  const names = args.filter((a) => !a.startsWith("--"));
  const unknown = names.filter((n) => !BENCHMARKS.includes(n));
  if (unknown.length > 0) {
    err(`nrt bench: unknown benchmark ${unknown.join(", ")}; choose from ${BENCHMARKS.join(", ")}`);
    return 2;
  }
  const todo = names.length > 0 ? names : [...BENCHMARKS];
  let failed = 0;
  for (const [i, name] of todo.entries()) {
    err(`nrt bench: running ${name} (${i + 1}/${todo.length}) on ${deno ? "Deno" : "Bun"}…`);
    const script = join(root, "bench", `${name}.ts`);
    const argv = deno ? ["run", "-A", script] : [script];
    const started = performance.now();
    const code = await new Promise<number>((resolve) => {
      const child = spawn(runtimeBin(deno), argv, { stdio: "inherit", cwd: root });
      child.on("exit", (c) => resolve(c ?? 1));
      child.on("error", () => resolve(1));
    });
    err(`nrt bench: ${name} ${code === 0 ? "done" : `failed (exit ${code})`} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    if (code !== 0) failed++;
  }
  return failed === 0 ? 0 : 1;
}
