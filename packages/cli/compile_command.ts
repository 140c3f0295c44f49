/**
 * `nrt compile MODEL.onnx -o MODEL.neff [--target sunda|cayman|mariana] [--input-shape NAME=DIMS ...]`: compiles an
 * ONNX model with `@nrt/onnx` (parse, fold, infer shapes, fuse, lower to the op library of `kernels/ops/`, plan
 * memory) and writes one custom-op NEFF that `nrt run`, `nrt serve` and `Runtime.load` take like any other. The
 * op library binaries are read here, from `kernels/ops/wasm/`. Ours: the seeds say nothing about ONNX.
 *
 * @module
 */
import { buildOnnxNeff, type CompiledOnnxModel, compileOnnx, type CompileOptions } from "@nrt/onnx";
import { OP_LIBRARY_WASM_DIR } from "@nrt/ops";
import { readFile, writeFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { UsageError } from "./serve.ts";

/** The usage line of `nrt compile`. */
export const COMPILE_USAGE =
  "nrt compile MODEL.onnx -o MODEL.neff [--target sunda|cayman|mariana] [--input-shape NAME=DIMS ...]";

/** The generations a NEFF may target. */
export const COMPILE_TARGETS: readonly ["sunda", "cayman", "mariana"] = ["sunda", "cayman", "mariana"];

/** One NeuronCore generation `nrt compile` targets. */
export type CompileTarget = typeof COMPILE_TARGETS[number];

/** The parsed command line. */
export interface CompileArgs {
  /** The `.onnx` file. */
  readonly model: string;
  /** Where the NEFF goes. */
  readonly out: string;
  /** The target generation (default `cayman`). */
  readonly target: CompileTarget;
  /** The whole shape of each input with dynamic dims, by input name. */
  readonly inputShapes: Readonly<Record<string, readonly number[]>>;
}

/** What {@linkcode compileOnnxToNeff} takes. */
export interface OnnxToNeffOptions {
  /** The target generation (default `cayman`). */
  readonly target?: CompileTarget;
  /** Shapes of inputs with dynamic dims. */
  readonly inputShapes?: CompileOptions["inputShapes"];
  /** NEFF header name (default: the ONNX graph's name with `.neff`). */
  readonly name?: string;
  /** The op library binaries (default: {@linkcode readOpLibraries}). */
  readonly libraries?: ReadonlyMap<string, Uint8Array>;
}

const OP_LIBRARY_DIR = OP_LIBRARY_WASM_DIR;

/**
 * Reads the op library binaries (`kernels/ops/wasm/<name>.wasm`).
 *
 * @param names The libraries to read.
 * @returns The binaries by library name.
 */
export async function readOpLibraries(names: readonly string[]): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for (const n of names) {
    if (!/^[a-z0-9_]+$/.test(n)) throw new RangeError(`Cannot read op library "${n}": not a library name`);
    out.set(n, new Uint8Array(await readFile(new URL(`${n}.wasm`, OP_LIBRARY_DIR))));
  }
  return out;
}

/**
 * Compiles ONNX bytes into NEFF bytes.
 *
 * @param bytes The `.onnx` file.
 * @param options Target, input shapes, header name.
 * @returns The NEFF and the compiled model it was built from (inputs, outputs, calls, memory figures).
 * @throws {OnnxCompileError} For a model the compiler refuses (the message names the node, the op and what is
 * supported).
 */
export async function compileOnnxToNeff(
  bytes: Uint8Array,
  options: OnnxToNeffOptions = {},
): Promise<{ neff: Uint8Array; compiled: CompiledOnnxModel }> {
  const compiled = compileOnnx(bytes, { target: options.target ?? "cayman", inputShapes: options.inputShapes });
  const libraries = options.libraries ?? await readOpLibraries(compiled.libraries);
  return { neff: buildOnnxNeff(compiled, { libraries, name: options.name }), compiled };
}

/**
 * Parses `nrt compile` arguments (`node:util` `parseArgs`).
 *
 * @throws {UsageError} For a missing model or `-o`, an unknown flag or target, or a malformed `--input-shape`.
 */
export function parseCompileArgs(args: readonly string[]): CompileArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: true,
      options: {
        out: { type: "string", short: "o" },
        target: { type: "string" },
        "input-shape": { type: "string", multiple: true },
      },
    });
  } catch (e) {
    throw new UsageError(`Cannot parse nrt compile arguments: ${e instanceof Error ? e.message : String(e)}`);
  }
  const { values: v, positionals } = parsed;
  if (positionals.length !== 1) {
    throw new UsageError(`Cannot parse nrt compile arguments: give exactly one MODEL.onnx\nUsage: ${COMPILE_USAGE}`);
  }
  if (v.out === undefined) {
    throw new UsageError(`Cannot parse nrt compile arguments: -o MODEL.neff is required\nUsage: ${COMPILE_USAGE}`);
  }
  const target = v.target ?? "cayman";
  if (!(COMPILE_TARGETS as readonly string[]).includes(target)) {
    throw new UsageError(
      `Cannot parse nrt compile arguments: --target ${target} is not one of ${COMPILE_TARGETS.join(", ")}`,
    );
  }
  const inputShapes: Record<string, number[]> = {};
  for (const spec of v["input-shape"] ?? []) {
    const m = /^([^=]+)=([0-9]+(?:,[0-9]+)*)?$/.exec(spec);
    const dims = m?.[2] === undefined ? [] : m[2].split(",").map(Number);
    if (m === null || dims.some((d) => !Number.isSafeInteger(d) || d < 1)) {
      throw new UsageError(
        `Cannot parse nrt compile arguments: --input-shape ${spec} is not NAME=DIMS (positive integers separated by commas, e.g. x=8,3,224,224)`,
      );
    }
    if (Object.hasOwn(inputShapes, m[1])) {
      throw new UsageError(`Cannot parse nrt compile arguments: --input-shape names "${m[1]}" twice`);
    }
    inputShapes[m[1]] = dims;
  }
  return { model: positionals[0], out: v.out, target: target as CompileTarget, inputShapes };
}

/**
 * `nrt compile`: exit 0 written; an `OnnxCompileError` or a file error is thrown for `nrt` to report (exit 1), a
 * {@linkcode UsageError} for a usage mistake (exit 2).
 *
 * @param args The arguments after `compile`.
 * @param log Where the summary line goes.
 * @returns 0.
 */
export async function runCompile(args: readonly string[], log: (s: string) => void = console.log): Promise<number> {
  const a = parseCompileArgs(args);
  const started = performance.now();
  const bytes = new Uint8Array(await readFile(a.model));
  const { neff, compiled } = await compileOnnxToNeff(bytes, {
    target: a.target,
    inputShapes: a.inputShapes,
    name: basename(a.out),
  });
  await writeFile(a.out, neff);
  const mib = (n: number) => (n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
  log(
    `${a.out}: ${neff.byteLength} bytes (${Math.round(performance.now() - started)} ms): ${
      count(compiled.calls.length, "kernel call")
    } ` +
      `(${compiled.stats.singleCore} on 1 core), ${count(compiled.weights.length, "weight")} (${
        mib(compiled.memory.weightBytes)
      }), ` +
      `${count(compiled.buffers.length, "buffer")} (${mib(compiled.memory.plannedBytes)} planned, ${
        mib(compiled.memory.naiveBytes)
      } unplanned), ` +
      `target ${compiled.target}`,
  );
  return 0;
}
