/**
 * `nrt pack MANIFEST -o OUT.neff` (ours): builds a custom-op NEFF from a small JSON or YAML manifest — model name, target
 * arch, inputs/outputs, libraries (a `.wasm`, or AssemblyScript `source` compiled here with the kernel ABI flags),
 * function tables and calls. The NEFF layout and the custom-op extension are described in `docs/neff.md`.
 *
 * @module
 */
import { buildCustomOpNeff, type CustomOpLibrarySpec, NrtError, NrtStatus } from "@nrt/core";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { compileKernel } from "./kernel_compiler.ts";

/** How `nrt pack` is called. */
export const PACK_COMMAND = {
  name: "pack",
  usage: "nrt pack MANIFEST(.json|.yaml) -o OUT.neff",
  summary: "Build a custom-op NEFF from a manifest, compiling its AssemblyScript kernel sources (docs/kernels.md).",
  options: {
    out: { type: "string", short: "o", value: "OUT.neff", description: "where the NEFF is written (required)" },
  },
  positionals: { min: 1, max: 1, name: "MANIFEST" },
} as const satisfies CommandSpec;

/** The manifest, as written by the user. */
export interface PackManifest {
  /** Model name (NEFF header name). */
  name: string;
  /** `sunda`, `cayman` or `mariana` (default `cayman`). */
  target?: string;
  /** Inputs `{name, dtype, shape}`. */
  inputs: Array<{ name: string; dtype: string; shape: number[] }>;
  /** Outputs. */
  outputs: Array<{ name: string; dtype: string; shape: number[] }>;
  /** Libraries: `wasm` (a path) or `source` (an AssemblyScript file), `total_cpus`, `functions`. */
  libraries: Array<
    {
      name: string;
      wasm?: string;
      source?: string;
      total_cpus?: number;
      functions: Array<{ opcode: number; name: string }>;
    }
  >;
  /** Calls in order. */
  calls: Array<{ opcode: number; inputs: string[]; outputs: string[]; ints?: number[] }>;
}

function bad(why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot pack manifest: ${why}`);
}

/** Parses and checks a manifest's text (JSON or YAML). */
export function parseManifest(text: string, path: string): PackManifest {
  let raw: unknown;
  try {
    raw = path.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot pack manifest: ${path} is not valid ${path.endsWith(".json") ? "JSON" : "YAML"}`,
      { cause: e },
    );
  }
  const m = raw as PackManifest;
  if (typeof m !== "object" || m === null) throw bad(`${path} is not an object`);
  if (typeof m.name !== "string" || m.name === "") throw bad('"name" must be a non-empty string');
  for (const key of ["inputs", "outputs", "libraries", "calls"] as const) {
    if (!Array.isArray(m[key])) throw bad(`"${key}" must be a list`);
  }
  for (const t of [...m.inputs, ...m.outputs]) {
    if (
      typeof t?.name !== "string" || typeof t.dtype !== "string" || !Array.isArray(t.shape) ||
      !t.shape.every((d) => Number.isInteger(d) && d > 0)
    ) {
      throw bad(`tensor ${JSON.stringify(t)} needs a name, a dtype and a shape of positive integers`);
    }
  }
  for (const l of m.libraries) {
    if (typeof l?.name !== "string" || !/^[A-Za-z0-9_.-]+$/.test(l.name)) {
      throw bad(`library ${JSON.stringify(l?.name)} needs a name of letters, digits, "_", "-" or "."`);
    }
    if ((l.wasm === undefined) === (l.source === undefined)) {
      throw bad(`library "${l.name}" needs exactly one of "wasm" and "source"`);
    }
    if (!Array.isArray(l.functions) || l.functions.length === 0) throw bad(`library "${l.name}" lists no functions`);
  }
  return m;
}

/** Turns a manifest into NEFF bytes; `progress` receives a line for work that takes a while (compiling). */
export async function packManifest(path: string, progress: (line: string) => void = () => {}): Promise<Uint8Array> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot pack manifest: ${path} cannot be read: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
  const m = parseManifest(text, path);
  const base = dirname(resolve(path));
  const at = (p: string) => (isAbsolute(p) ? p : join(base, p));
  const libraries: CustomOpLibrarySpec[] = [];
  for (const l of m.libraries) {
    let wasm: Uint8Array;
    if (l.source !== undefined) {
      progress(`nrt pack: compiling ${l.source} with AssemblyScript…`);
      wasm = await compileKernel(at(l.source));
    } else {
      wasm = new Uint8Array(await readFile(at(l.wasm!)));
    }
    libraries.push({ name: l.name, wasm, totalCpus: l.total_cpus ?? 8, functions: l.functions });
  }
  return buildCustomOpNeff({
    name: m.name,
    target: m.target ?? "cayman",
    inputs: m.inputs,
    outputs: m.outputs,
    libraries,
    calls: m.calls.map((c) => ({ opcode: c.opcode, inputs: c.inputs, outputs: c.outputs, ints: c.ints ?? [] })),
  });
}

/**
 * `nrt pack MANIFEST -o OUT.neff`: packs the manifest and writes the NEFF.
 *
 * @param args The arguments after `pack`.
 * @param log Where the summary line goes.
 * @param err Where progress lines go (compiling).
 * @returns 0.
 * @throws {UsageError} For a missing MANIFEST or `-o`, an extra argument or an unknown option.
 * @throws {NrtError} `NRT_INVALID` for a manifest that cannot be packed.
 */
export async function runPack(
  args: readonly string[],
  log: (s: string) => void = console.log,
  err: (s: string) => void = console.error,
): Promise<number> {
  const { help, values, positionals } = parseCommandArgs(PACK_COMMAND, args);
  if (help) {
    log(formatHelp(PACK_COMMAND));
    return 0;
  }
  if (values.out === undefined) throw usageError(PACK_COMMAND, "-o OUT.neff is required");
  const started = performance.now();
  const bytes = await packManifest(positionals[0], err);
  await writeFile(values.out, bytes);
  log(`${values.out}: ${bytes.byteLength} bytes (${Math.round(performance.now() - started)} ms)`);
  return 0;
}
