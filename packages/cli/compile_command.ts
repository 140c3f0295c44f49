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
import { type CompileTarget, parseCompileArgs } from "./compile_args.ts";
import { overwritesInput } from "./inspect.ts";

export {
  COMPILE_COMMAND,
  COMPILE_TARGETS,
  COMPILE_USAGE,
  type CompileArgs,
  type CompileTarget,
  parseCompileArgs,
} from "./compile_args.ts";

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
 * `nrt compile`: exit 0 written; an `OnnxCompileError` or a file error is thrown for `nrt` to report (exit 1), a
 * {@linkcode UsageError} for a usage mistake (exit 2). An existing `-o` file is replaced, except the model itself:
 * `-o` naming the model (by any path or link) is refused with exit 2 before anything is compiled.
 *
 * @param args The arguments after `compile`.
 * @param log Where the summary line goes.
 * @param err Where the refusal of an `-o` that names the model goes.
 * @returns 0, or 2 when `-o` names the model.
 */
export async function runCompile(
  args: readonly string[],
  log: (s: string) => void = console.log,
  err: (s: string) => void = console.error,
): Promise<number> {
  const a = parseCompileArgs(args);
  const clash = await overwritesInput(a.out, [[a.model, "the model being compiled"]]);
  if (clash !== undefined) {
    err(`nrt compile: ${clash}`);
    return 2;
  }
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
