// Builds every op library in kernels/ops/src (files not starting with "_") into kernels/ops/wasm/<name>.wasm with
// the AssemblyScript compiler API from node_modules, using the reference kernels' flags (kernels/build.mjs) plus
// wasm SIMD. Runs under Node, Bun and Deno, and all three give the same bytes:
//
//   node kernels/ops/build.mjs              rebuild the committed binaries
//   node kernels/ops/build.mjs --out DIR    write them to DIR instead
//
// Other modules (kernels/ops/build_test.ts) import buildLibraries() to rebuild in memory.
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { main as asc } from "assemblyscript/asc";
import { KERNEL_FLAGS } from "../build.mjs";

/** kernels/ops/ — this file's folder. */
export const OPS_DIR = dirname(fileURLToPath(import.meta.url));

/** kernels/ops/src — the AssemblyScript sources. */
export const SOURCE_DIR = join(OPS_DIR, "src");

/** kernels/ops/wasm — the committed binaries. */
export const WASM_DIR = join(OPS_DIR, "wasm");

/**
 * The flags of every op library: the reference kernels' flags, plus 128-bit SIMD for the inner loops (Ours).
 * @type {readonly string[]}
 */
export const OPS_FLAGS = Object.freeze([...KERNEL_FLAGS, "--enable", "simd"]);

/**
 * Names of the op libraries (source files in kernels/ops/src not starting with "_"), sorted.
 * @returns {Promise<string[]>}
 */
export async function libraryNames() {
  const files = await readdir(SOURCE_DIR);
  return files.filter((f) => f.endsWith(".ts") && !f.startsWith("_")).map((f) => f.slice(0, -3)).sort();
}

/**
 * Compiles one op library in memory.
 * @param {string} name the library's file name without ".ts"
 * @param {readonly string[]} [flags] compiler flags; OPS_FLAGS by default (bench.ts passes KERNEL_FLAGS alone to
 *   measure the libraries without SIMD)
 * @returns {Promise<Uint8Array>} the wasm binary
 */
export async function buildLibrary(name, flags = OPS_FLAGS) {
  /** @type {Uint8Array | undefined} */
  let binary;
  let diagnostics = "";
  const { error } = await asc([`${name}.ts`, "--baseDir", SOURCE_DIR, "--outFile", `${name}.wasm`, ...flags], {
    writeFile(filename, contents) {
      if (filename.endsWith(".wasm") && typeof contents !== "string") binary = new Uint8Array(contents);
    },
    stdout: { write() {} },
    stderr: {
      write(text) {
        diagnostics += typeof text === "string" ? text : new TextDecoder().decode(text);
      },
    },
  });
  if (error || !binary) {
    throw new Error(`Cannot build op library "${name}": ${error ? error.message : "no binary"}\n${diagnostics}`, {
      cause: error ?? undefined,
    });
  }
  return binary;
}

/**
 * Compiles every op library in memory.
 * @returns {Promise<Map<string, Uint8Array>>} library name → wasm binary
 */
export async function buildLibraries() {
  const out = new Map();
  for (const name of await libraryNames()) out.set(name, await buildLibrary(name));
  return out;
}

/**
 * Builds every op library into `outDir` as <name>.wasm.
 * @param {string} outDir the output folder (created if missing)
 * @returns {Promise<Map<string, Uint8Array>>} library name → wasm binary
 */
export async function writeLibraries(outDir) {
  await mkdir(outDir, { recursive: true });
  const built = await buildLibraries();
  for (const [name, wasm] of built) await writeFile(join(outDir, `${name}.wasm`), wasm);
  return built;
}

async function cli() {
  const i = process.argv.indexOf("--out");
  const outDir = i >= 0 ? resolve(process.argv[i + 1]) : WASM_DIR;
  for (const [name, wasm] of await writeLibraries(outDir)) console.log(`${name}.wasm  ${wasm.length} bytes`);
}

const isMain = import.meta.main ??
  (process.argv[1] !== undefined && pathToFileURL(resolve(process.argv[1])).href === import.meta.url);
if (isMain) await cli();
