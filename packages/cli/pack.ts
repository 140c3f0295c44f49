/**
 * `nrt pack MANIFEST -o OUT.neff` (ours): builds a custom-op NEFF from a small JSON or YAML manifest — model name, target
 * arch, inputs/outputs, libraries (a `.wasm`, or AssemblyScript `source` compiled here with the kernel ABI flags),
 * function tables and calls. The NEFF layout and the custom-op extension are described in `docs/neff.md`.
 *
 * A manifest whose NEFF could never load is refused here, naming the field ({@linkcode parseManifest}), and so is a
 * library that is not WebAssembly or does not export its functions; the NEFF built is then read back through the
 * loader's own checks of the file (`kelfLoad`). What depends on the device (its memory, its library slots) is
 * checked when the NEFF loads.
 *
 * @module
 */
import {
  buildCustomOpNeff,
  type CustomOpLibrarySpec,
  EXT_ISA_LIBRARY_NAME,
  extIsaLibrary,
  NrtError,
  NrtStatus,
} from "@nrt/core";
import { DTYPE_BYTES, kelfLoad, readNeff } from "@nrt/core/neff";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { SHIPPED_ARCH_PACKS } from "./container.ts";
import { overwritesInput, printable } from "./inspect.ts";
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
  calls: Array<{ opcode: number; inputs: string[]; outputs: string[]; ints?: Array<number | string> }>;
}

function bad(why: string, cause?: unknown): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot pack manifest: ${why}`, { cause });
}

/** A manifest value as written (a string quoted), short and escaped, for messages. */
function shown(v: unknown): string {
  let text: string;
  try {
    text = typeof v === "number" && !Number.isFinite(v) ? String(v) : JSON.stringify(v) ?? String(v);
  } catch {
    text = String(v); // a YAML alias cycle
  }
  return printable(text.length > 60 ? `${text.slice(0, 60)}…` : text);
}

/** The targets a NEFF may name: the shipped generations and their instance families, as the loader matches them. */
function knownTargets(): string[] {
  return SHIPPED_ARCH_PACKS.flatMap((p) => [p.spec.name, ...p.spec.instances]).map((t) => t.toLowerCase());
}

/** Opcodes the base ext-ISA library binds (calls may use them without a library of their own). */
function baseOpcodes(): Map<number, string> {
  return new Map(extIsaLibrary().functions.map((f) => [f.opcode, EXT_ISA_LIBRARY_NAME]));
}

const I64_MIN = -(2n ** 63n), I64_MAX = 2n ** 63n - 1n;

/** A call's scalar as the loader reads it: a safe integer, or a 64-bit integer written as a decimal string. */
function isScalar(x: unknown): boolean {
  if (Number.isSafeInteger(x)) return true;
  if (typeof x !== "string" || !/^-?[0-9]{1,20}$/.test(x)) return false;
  const v = BigInt(x);
  return v >= I64_MIN && v <= I64_MAX;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isName = (v: unknown): v is string => typeof v === "string" && v !== "";

/**
 * Checks every field the loader will check, so that a manifest `nrt pack` accepts loads (ours): the target is a
 * generation the runtime knows; tensors have distinct names, a NEFF dtype and a shape of positive integers; libraries
 * have distinct names, exactly one of `wasm` and `source`, `total_cpus` 1 or 8 and a function table of distinct
 * opcodes below the base library's range; each call's opcode is bound, it reads inputs or outputs and writes outputs,
 * and its `ints` are safe integers.
 *
 * @throws {NrtError} `NRT_INVALID` naming the field (`calls[0].inputs[0]`) and the value as written.
 */
function checkManifest(m: Record<string, unknown>): void {
  if (m.target !== undefined) {
    const targets = knownTargets();
    if (typeof m.target !== "string" || !targets.includes(m.target.trim().toLowerCase())) {
      throw bad(`"target" is ${shown(m.target)}; expected one of ${targets.join(", ")}`);
    }
  }
  const tensors = new Map<string, string>(); // name → where it is declared
  for (const key of ["inputs", "outputs"] as const) {
    (m[key] as unknown[]).forEach((t, i) => {
      const at = `${key}[${i}]`;
      const fail = (why: string) => {
        throw bad(`${at} ${why} (a tensor needs a name, a dtype and a shape of positive integers)`);
      };
      if (!isObject(t)) return fail(`is ${shown(t)}`);
      if (!isName(t.name)) return fail(`name is ${shown(t.name)}`);
      if (typeof t.dtype !== "string" || !Object.hasOwn(DTYPE_BYTES, t.dtype)) {
        throw bad(`${at}.dtype is ${shown(t.dtype)}; expected one of ${Object.keys(DTYPE_BYTES).join(", ")}`);
      }
      if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d > 0)) {
        return fail(`shape is ${shown(t.shape)}`);
      }
      if (!Number.isSafeInteger(t.shape.reduce((a: number, d: number) => a * d, DTYPE_BYTES[t.dtype]))) {
        throw bad(`${at}.shape ${shown(t.shape)} is too large: its byte size is past 2^53`);
      }
      const before = tensors.get(t.name);
      if (before !== undefined) throw bad(`${at}.name ${shown(t.name)} is already the name of ${before}`);
      tensors.set(t.name, at);
    });
  }
  const bound = baseOpcodes();
  const libraries = new Set<string>([EXT_ISA_LIBRARY_NAME]);
  (m.libraries as unknown[]).forEach((l, i) => {
    const at = `libraries[${i}]`;
    if (!isObject(l)) throw bad(`${at} is ${shown(l)}; a library is an object`);
    if (typeof l.name !== "string" || !/^[A-Za-z0-9_.-]+$/.test(l.name)) {
      throw bad(`library ${shown(l.name)} needs a name of letters, digits, "_", "-" or "."`);
    }
    if (libraries.has(l.name)) {
      throw bad(
        l.name === EXT_ISA_LIBRARY_NAME
          ? `${at}.name "${EXT_ISA_LIBRARY_NAME}" is the base library's, which every NEFF carries`
          : `${at}.name "${l.name}" names a library twice`,
      );
    }
    libraries.add(l.name);
    if ((l.wasm === undefined) === (l.source === undefined)) {
      throw bad(`library "${l.name}" needs exactly one of "wasm" and "source"`);
    }
    for (const file of ["wasm", "source"] as const) {
      if (l[file] !== undefined && !isName(l[file])) throw bad(`${at}.${file} is ${shown(l[file])}; expected a path`);
    }
    if (l.total_cpus !== undefined && l.total_cpus !== 1 && l.total_cpus !== 8) {
      throw bad(`${at}.total_cpus is ${shown(l.total_cpus)}; expected the number 1 or 8`);
    }
    if (!Array.isArray(l.functions) || l.functions.length === 0) throw bad(`library "${l.name}" lists no functions`);
    l.functions.forEach((f: unknown, k: number) => {
      const fat = `${at}.functions[${k}]`;
      if (!isObject(f)) throw bad(`${fat} is ${shown(f)}; a function is {opcode, name}`);
      if (!Number.isInteger(f.opcode) || (f.opcode as number) < 0 || (f.opcode as number) >= 0xff00) {
        throw bad(`${fat}.opcode is ${shown(f.opcode)}; expected an integer from 0 to 65279 (0xff00 up is reserved)`);
      }
      if (!isName(f.name)) throw bad(`${fat}.name is ${shown(f.name)}; expected the name of an exported function`);
      const other = bound.get(f.opcode as number);
      if (other !== undefined) throw bad(`${fat}.opcode ${f.opcode} is already bound by library "${other}"`);
      bound.set(f.opcode as number, l.name as string);
    });
  });
  (m.calls as unknown[]).forEach((c, i) => {
    const at = `calls[${i}]`;
    if (!isObject(c)) throw bad(`${at} is ${shown(c)}; a call is {opcode, inputs, outputs, ints}`);
    if (!Number.isInteger(c.opcode) || !bound.has(c.opcode as number)) {
      throw bad(`${at}.opcode is ${shown(c.opcode)}, which no library's functions bind`);
    }
    for (const key of ["inputs", "outputs"] as const) {
      const names = c[key];
      if (!Array.isArray(names)) throw bad(`${at}.${key} is ${shown(names)}; expected a list of tensor names`);
      names.forEach((n: unknown, k: number) => {
        const declared = typeof n === "string" ? tensors.get(n) : undefined;
        if (declared === undefined) {
          throw bad(`${at}.${key}[${k}] is ${shown(n)}, which names no input or output of the manifest`);
        }
        if (key === "outputs" && declared.startsWith("inputs[")) {
          throw bad(`${at}.outputs[${k}] is ${shown(n)}, an input (${declared}); a call writes outputs only`);
        }
      });
    }
    if (c.ints !== undefined && (!Array.isArray(c.ints) || !c.ints.every(isScalar))) {
      throw bad(
        `${at}.ints is ${shown(c.ints)}; expected a list of integers within ±(2^53−1), or of decimal strings for ` +
          "larger 64-bit values",
      );
    }
  });
}

/** Parses and checks a manifest's text (JSON or YAML); see {@linkcode checkManifest} for what is checked. */
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
  if (!isObject(raw)) throw bad(`${printable(path)} is not an object`);
  if (!isName(raw.name)) throw bad('"name" must be a non-empty string');
  for (const key of ["inputs", "outputs", "libraries", "calls"] as const) {
    if (!Array.isArray(raw[key])) throw bad(`"${key}" must be a list`);
  }
  checkManifest(raw);
  return raw as unknown as PackManifest;
}

/**
 * Reads and checks a manifest file.
 *
 * @throws {NrtError} `NRT_INVALID` when it cannot be read or is not a manifest {@linkcode parseManifest} accepts.
 */
export async function readManifest(path: string): Promise<PackManifest> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw bad(`${printable(path)} cannot be read: ${e instanceof Error ? e.message : String(e)}`, e);
  }
  return parseManifest(text, path);
}

/** The files a manifest's libraries are read from (`wasm` or `source`), resolved against its folder. */
export function libraryFiles(
  m: PackManifest,
  path: string,
): Array<{ name: string; kind: "wasm" | "source"; file: string }> {
  const base = dirname(resolve(path));
  const at = (p: string) => (isAbsolute(p) ? p : join(base, p));
  return m.libraries.map((l) =>
    l.source !== undefined
      ? { name: l.name, kind: "source" as const, file: at(l.source) }
      : { name: l.name, kind: "wasm" as const, file: at(l.wasm!) }
  );
}

/**
 * Checks a library image: WebAssembly, exporting a function of each name its table lists (the simulator's Q7 cores
 * call a kernel by its export name, and a missing or non-WebAssembly one failed only at execution, as status 6).
 */
function checkLibrary(index: number, l: PackManifest["libraries"][number], wasm: Uint8Array, file: string): void {
  const at = `libraries[${index}] ("${l.name}")`;
  const image = wasm as Uint8Array<ArrayBuffer>; // read from a file or compiled here: never shared memory
  if (!WebAssembly.validate(image)) throw bad(`${at}: ${printable(file)} is not a valid WebAssembly module`);
  const exported = new Set(
    WebAssembly.Module.exports(new WebAssembly.Module(image)).filter((e) => e.kind === "function").map((e) => e.name),
  );
  l.functions.forEach((f, k) => {
    if (!exported.has(f.name)) {
      throw bad(`${at}.functions[${k}].name "${printable(f.name)}" is not a function ${printable(file)} exports`);
    }
  });
}

/** Builds the NEFF of a checked manifest; `progress` receives a line for work that takes a while (compiling). */
export async function buildManifest(
  m: PackManifest,
  path: string,
  progress: (line: string) => void = () => {},
): Promise<Uint8Array> {
  const files = libraryFiles(m, path);
  const libraries: CustomOpLibrarySpec[] = [];
  for (const [i, l] of m.libraries.entries()) {
    const { kind, file } = files[i];
    let wasm: Uint8Array;
    if (kind === "source") {
      progress(`nrt pack: compiling ${printable(l.source!)} with AssemblyScript…`);
      wasm = await compileKernel(file);
    } else {
      try {
        wasm = new Uint8Array(await readFile(file));
      } catch (e) {
        throw bad(`libraries[${i}].wasm cannot be read: ${e instanceof Error ? e.message : String(e)}`, e);
      }
    }
    checkLibrary(i, l, wasm, kind === "source" ? `the kernel compiled from ${l.source}` : file);
    libraries.push({ name: l.name, wasm, totalCpus: l.total_cpus ?? 8, functions: l.functions });
  }
  const bytes = buildCustomOpNeff({
    name: m.name,
    target: m.target ?? "cayman",
    inputs: m.inputs,
    outputs: m.outputs,
    libraries,
    calls: m.calls.map((c) => ({
      opcode: c.opcode,
      inputs: c.inputs,
      outputs: c.outputs,
      ints: (c.ints ?? []).map((x) => (typeof x === "string" ? BigInt(x) : x)),
    })),
  });
  // Read back as a load reads it (the target is checked above, against every generation, not one device's).
  try {
    kelfLoad(readNeff(bytes, { maxDecompressedBytes: 2 ** 31 - 1 })); // no env cap: the NEFF is ours, whatever its size
  } catch (e) {
    if (!(e instanceof NrtError)) throw e;
    throw bad(`the NEFF would not load: ${printable(e.message)}`, e);
  }
  return bytes;
}

/** Turns a manifest into NEFF bytes; `progress` receives a line for work that takes a while (compiling). */
export async function packManifest(path: string, progress: (line: string) => void = () => {}): Promise<Uint8Array> {
  return await buildManifest(await readManifest(path), path, progress);
}

/**
 * `nrt pack MANIFEST -o OUT.neff`: packs the manifest and writes the NEFF. An existing OUT.neff is replaced, except
 * an input: `-o` naming the manifest or a library's `wasm` or `source` (by any path or link) is refused with exit 2
 * before anything is compiled.
 *
 * @param args The arguments after `pack`.
 * @param log Where the summary line goes.
 * @param err Where progress lines (compiling) and the refusal of an `-o` naming an input go.
 * @returns 0, or 2 when `-o` names an input.
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
  const path = positionals[0];
  const manifest = await readManifest(path);
  const clash = await overwritesInput(values.out, [
    [path, "the manifest"],
    ...libraryFiles(manifest, path).map((f) => [f.file, `the ${f.kind} of library "${printable(f.name)}"`] as const),
  ]);
  if (clash !== undefined) {
    err(`nrt pack: ${clash}`);
    return 2;
  }
  const bytes = await buildManifest(manifest, path, err);
  await writeFile(values.out, bytes);
  log(`${values.out}: ${bytes.byteLength} bytes (${Math.round(performance.now() - started)} ms)`);
  return 0;
}
