// Builds every kernel in kernels/src (files not starting with "_") into kernels/wasm/<name>.wasm with the
// AssemblyScript compiler API from node_modules. Runs under Node, Bun and Deno:
//
//   node kernels/build.mjs              rebuild the committed binaries
//   node kernels/build.mjs --out DIR    write them to DIR instead
//
// Other modules (kernels/build_test.ts) import buildKernels() to rebuild in memory.
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { main as asc } from "assemblyscript/asc";

/** kernels/ — this file's folder. */
export const KERNELS_DIR = dirname(fileURLToPath(import.meta.url));

/** kernels/src — the AssemblyScript sources. */
export const SOURCE_DIR = join(KERNELS_DIR, "src");

/** kernels/wasm — the committed binaries. */
export const WASM_DIR = join(KERNELS_DIR, "wasm");

/**
 * The compiler flags every kernel is built with (see kernels/README.md for why each is there).
 * @type {readonly string[]}
 */
export const KERNEL_FLAGS = Object.freeze([
  "--importMemory", // the NeuronCore's memory is the import env.memory ...
  "--sharedMemory", // ... shared by the 8 cores ...
  "--initialMemory",
  "0", // ... asking for no minimum size (the kernel holds no data) ...
  "--maximumMemory",
  "65536", // ... and declaring the full 4 GiB maximum a shared memory must name.
  "--enable",
  "threads",
  "--runtime",
  "stub", // no GC; nothing allocates anyway.
  "-O3",
  "--noAssert",
  "--use",
  "abort=", // no env.abort import and no message strings in a data segment.
]);

/**
 * Names of the kernels (source files in kernels/src not starting with "_"), sorted.
 * @returns {Promise<string[]>}
 */
export async function kernelNames() {
  const files = await readdir(SOURCE_DIR);
  return files.filter((f) => f.endsWith(".ts") && !f.startsWith("_")).map((f) => f.slice(0, -3)).sort();
}

/**
 * Compiles one kernel in memory.
 * @param {string} name the kernel's file name without ".ts"
 * @returns {Promise<Uint8Array>} the wasm binary
 */
export async function buildKernel(name) {
  /** @type {Uint8Array | undefined} */
  let binary;
  let diagnostics = "";
  const { error } = await asc([`${name}.ts`, "--baseDir", SOURCE_DIR, "--outFile", `${name}.wasm`, ...KERNEL_FLAGS], {
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
    throw new Error(`Cannot build kernel "${name}": ${error ? error.message : "no binary"}\n${diagnostics}`, {
      cause: error ?? undefined,
    });
  }
  return binary;
}

/**
 * Compiles every kernel in memory.
 * @returns {Promise<Map<string, Uint8Array>>} kernel name → wasm binary
 */
export async function buildKernels() {
  const out = new Map();
  for (const name of await kernelNames()) out.set(name, await buildKernel(name));
  return out;
}

/**
 * Builds every kernel into `outDir` as <name>.wasm.
 * @param {string} outDir the output folder (created if missing)
 * @returns {Promise<Map<string, Uint8Array>>} kernel name → wasm binary
 */
export async function writeKernels(outDir) {
  await mkdir(outDir, { recursive: true });
  const built = await buildKernels();
  for (const [name, wasm] of built) await writeFile(join(outDir, `${name}.wasm`), wasm);
  return built;
}

async function cli() {
  const i = process.argv.indexOf("--out");
  const outDir = i >= 0 ? resolve(process.argv[i + 1]) : WASM_DIR;
  for (const [name, wasm] of await writeKernels(outDir)) console.log(`${name}.wasm  ${wasm.length} bytes`);
}

const isMain = import.meta.main ??
  (process.argv[1] !== undefined && pathToFileURL(resolve(process.argv[1])).href === import.meta.url);
if (isMain) await cli();
