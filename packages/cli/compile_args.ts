/**
 * How `nrt compile` is called: its usage, option table and argument parser, apart from the compiler so that `nrt`
 * answers `nrt compile --help` (and lists the command) without loading `@nrt/onnx`; `compile_command.ts` runs it.
 * Ours.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { type CommandSpec, type OptionValues, parseArgsOptions } from "./command_args.ts";
import { UsageError } from "./serve.ts";

/** The usage line of `nrt compile`. */
export const COMPILE_USAGE =
  "nrt compile MODEL.onnx -o MODEL.neff [--target sunda|cayman|mariana] [--input-shape NAME=DIMS ...]";

/** The generations a NEFF may target. */
export const COMPILE_TARGETS: readonly ["sunda", "cayman", "mariana"] = ["sunda", "cayman", "mariana"];

/** One NeuronCore generation `nrt compile` targets. */
export type CompileTarget = typeof COMPILE_TARGETS[number];

/**
 * How `nrt compile` is called: {@linkcode parseCompileArgs} parses by this option table (with its own strict
 * messages) and `nrt compile --help` lists it.
 */
export const COMPILE_COMMAND = {
  name: "compile",
  usage: COMPILE_USAGE,
  summary: "Compile an ONNX model into a custom-op NEFF of op-library kernels (docs/onnx.md)",
  options: {
    out: { type: "string", short: "o", value: "MODEL.neff", description: "where the NEFF goes (required)" },
    target: {
      type: "string",
      value: "T",
      description: "the generation the NEFF targets: sunda, cayman (default) or mariana",
    },
    "input-shape": {
      type: "string",
      multiple: true,
      value: "NAME=DIMS",
      description:
        "the whole shape of an input with dynamic dims, positive integers separated by commas (x=8,3,224,224)",
    },
  },
  positionals: { min: 1, max: 1, name: "MODEL.onnx" },
} as const satisfies CommandSpec;

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
      options: parseArgsOptions(COMPILE_COMMAND.options),
    });
  } catch (e) {
    throw new UsageError(`Cannot parse nrt compile arguments: ${e instanceof Error ? e.message : String(e)}`);
  }
  const v = parsed.values as OptionValues<typeof COMPILE_COMMAND.options>;
  const positionals = parsed.positionals;
  if (positionals.length !== 1) {
    throw new UsageError("Cannot parse nrt compile arguments: give exactly one MODEL.onnx");
  }
  if (v.out === undefined) {
    throw new UsageError("Cannot parse nrt compile arguments: -o MODEL.neff is required");
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
    // Defined, not assigned: `inputShapes["__proto__"] = dims` would set the prototype, not name an input.
    Object.defineProperty(inputShapes, m[1], { value: dims, enumerable: true, writable: true, configurable: true });
  }
  return { model: positionals[0], out: v.out, target: target as CompileTarget, inputShapes };
}
