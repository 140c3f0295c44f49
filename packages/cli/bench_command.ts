/**
 * `nrt bench [NAME…] [--deno] [--json]` (ours): runs the benchmarks under `bench/`, one process each,
 * with a progress line per benchmark, and passes their ratio tables through. Every benchmark measures its two sides
 * in the same run, so the ratios are comparable on a noisy machine; absolute times are not.
 *
 * SIGINT or SIGTERM stops it: the signal is passed to the benchmark running, `nrt bench` waits for that process to
 * end, runs no further benchmark and exits 130 (SIGINT) or 143 (SIGTERM); a second signal kills the benchmark
 * (SIGKILL).
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { signalExitCode } from "./platform.ts";

/** The benchmarks, in the order they run. */
export const BENCHMARKS: readonly string[] = [
  "exec",
  "pipeline",
  "portal",
  "http",
  "serve",
  "grpc",
  "guard",
  "neff",
  "idle",
  "onnx",
  "collectives",
  "alloc",
];

/** How `nrt bench` is called. */
export const BENCH_COMMAND = {
  name: "bench",
  usage: `nrt bench [${BENCHMARKS.join("|")} ...] [--deno] [--json]`,
  summary: "Run the benchmarks under bench/ (all, or the ones named), one process each, and print their ratio tables.",
  options: {
    deno: { type: "boolean", description: "run them on Deno (default: Bun)" },
    json: { type: "boolean", description: 'print one JSON document, {"runtime", "benchmarks": [...]}' },
  },
  positionals: { min: 0, max: Infinity, name: "benchmarks" },
} as const satisfies CommandSpec;

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The signals that stop `nrt bench`. */
type StopSignal = "SIGINT" | "SIGTERM";
const STOP_SIGNALS: readonly StopSignal[] = ["SIGINT", "SIGTERM"];

function runtimeBin(deno: boolean): string {
  const bin = join(root, "node_modules", ".bin", deno ? "deno" : "bun");
  return existsSync(bin) ? bin : deno ? "deno" : "bun";
}

/**
 * Runs the named benchmarks (all by default). With
 * `--json` each benchmark runs with `--json` and prints one JSON line per table; this prints one JSON document on
 * stdout, `{"runtime", "benchmarks": [{"bench", "ok", "tables": [{"title", "rows"}], "text"?}]}`, where `text` holds
 * the output of a benchmark that printed no table as JSON.
 *
 * @param args The arguments after `bench`.
 * @param err Where the progress lines go.
 * @param out Where `--help` and the `--json` document go.
 * @returns 0 when every benchmark succeeded, else 1; 130 or 143 when SIGINT or SIGTERM stopped it.
 * @throws {UsageError} For an unknown benchmark or option.
 */
export async function runBench(
  args: readonly string[],
  err: (s: string) => void = console.error,
  out: (s: string) => void = console.log,
): Promise<number> {
  const { help, values, positionals: names } = parseCommandArgs(BENCH_COMMAND, args);
  if (help) {
    out(formatHelp(BENCH_COMMAND));
    return 0;
  }
  const deno = values.deno === true;
  const json = values.json === true;
  const unknown = names.filter((n) => !BENCHMARKS.includes(n));
  if (unknown.length > 0) {
    throw usageError(BENCH_COMMAND, `unknown benchmark ${unknown.join(", ")}; choose from ${BENCHMARKS.join(", ")}`);
  }
  const todo = names.length > 0 ? names : [...BENCHMARKS];
  const report: Array<
    { bench: string; ok: boolean; tables: Array<{ title: string; rows: unknown[] }>; text?: string }
  > = [];
  let failed = 0;
  // SIGINT/SIGTERM: passed to the benchmark running, which is waited for; a second signal kills it.
  let stoppedBy: StopSignal | undefined;
  let running: ChildProcess | undefined;
  const onSignal = (signal: StopSignal) => {
    if (stoppedBy === undefined) {
      stoppedBy = signal;
      running?.kill(signal);
    } else {
      running?.kill("SIGKILL");
    }
  };
  const handlers = STOP_SIGNALS.map((signal) => [signal, () => onSignal(signal)] as const);
  for (const [signal, handler] of handlers) process.on(signal, handler);
  try {
    for (const [i, name] of todo.entries()) {
      if (stoppedBy !== undefined) break;
      err(`nrt bench: running ${name} (${i + 1}/${todo.length}) on ${deno ? "Deno" : "Bun"}…`);
      const script = join(root, "bench", `${name}.ts`);
      const argv = [...(deno ? ["run", "-A", script] : [script]), ...(json ? ["--json"] : [])];
      const started = performance.now();
      let captured = "";
      const { code, signal } = await new Promise<{ code: number; signal?: string }>((resolve) => {
        const child = spawn(runtimeBin(deno), argv, {
          stdio: ["ignore", json ? "pipe" : "inherit", "inherit"],
          cwd: root,
        });
        running = child;
        child.stdout?.on("data", (d: Uint8Array) => (captured += String(d)));
        child.on("exit", (c, sig) => resolve(c === null ? { code: 1, signal: sig ?? undefined } : { code: c }));
        child.on("error", () => resolve({ code: 1 }));
      }).finally(() => (running = undefined));
      const outcome = code === 0 ? "done" : signal !== undefined ? `ended by ${signal}` : `failed (exit ${code})`;
      err(`nrt bench: ${name} ${outcome} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      if (code !== 0) failed++;
      if (json) {
        const tables: Array<{ title: string; rows: unknown[] }> = [];
        const text: string[] = [];
        for (const line of captured.split("\n")) {
          if (line.trim() === "") continue;
          try {
            const t = JSON.parse(line) as { title?: unknown; rows?: unknown };
            if (typeof t.title === "string" && Array.isArray(t.rows)) {
              tables.push({ title: t.title, rows: t.rows });
              continue;
            }
          } catch {
            // not a table line
          }
          text.push(line);
        }
        report.push({ bench: name, ok: code === 0, tables, ...(text.length > 0 ? { text: text.join("\n") } : {}) });
      }
    }
  } finally {
    for (const [signal, handler] of handlers) process.off(signal, handler);
  }
  if (stoppedBy !== undefined) {
    err(`nrt bench: stopped by ${stoppedBy}`);
    return signalExitCode(stoppedBy);
  }
  if (json) out(JSON.stringify({ runtime: deno ? "deno" : "bun", benchmarks: report }, null, 2));
  return failed === 0 ? 0 : 1;
}
