/**
 * Compiles an AssemblyScript kernel the way the reference kernels are built (`kernels/build.mjs`; the flags are
 * kept identical by a test): shared imported memory, no runtime, no data segments, no `env.abort`. A kernel folder
 * that has no `_abi.ts` of its own gets the project's kernel ABI declarations (`kernels/src/_abi.ts`).
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { NrtError, NrtStatus } from "@nrt/core";

/** The compiler flags of every kernel (the same list as `KERNEL_FLAGS` in `kernels/build.mjs`). */
export const KERNEL_FLAGS: readonly string[] = Object.freeze([
  "--importMemory",
  "--sharedMemory",
  "--initialMemory",
  "0",
  "--maximumMemory",
  "65536",
  "--enable",
  "threads",
  "--runtime",
  "stub",
  "-O3",
  "--noAssert",
  "--use",
  "abort=",
]);

/** The project's kernel ABI declarations for AssemblyScript. */
export const KERNEL_ABI_SOURCE: URL = new URL("../../kernels/src/_abi.ts", import.meta.url);

/** Compiles `file` (AssemblyScript) to a wasm kernel; compile errors are `NrtError(NRT_INVALID)` with the diagnostics. */
export async function compileKernel(file: string): Promise<Uint8Array> {
  const { main: asc } = await import("assemblyscript/asc");
  const dir = dirname(file);
  const name = basename(file);
  let binary: Uint8Array | undefined;
  let diagnostics = "";
  const abi = await readFile(fileURLToPath(KERNEL_ABI_SOURCE), "utf8");
  const { error } = await asc([name, "--baseDir", dir, "--outFile", "out.wasm", ...KERNEL_FLAGS], {
    readFile: async (f: string, base: string) => {
      try {
        return await readFile(join(base, f), "utf8");
      } catch {
        return f === "_abi.ts" ? abi : null;
      }
    },
    writeFile: (f: string, contents: Uint8Array | string) => {
      if (f.endsWith(".wasm") && typeof contents !== "string") binary = new Uint8Array(contents);
    },
    listFiles: () => [],
    stdout: { write: () => true },
    stderr: {
      write: (
        t: string | Uint8Array,
      ) => ((diagnostics += typeof t === "string" ? t : new TextDecoder().decode(t)), true),
    },
  } as never);
  if (error || binary === undefined) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot compile kernel ${file}: ${error?.message ?? "no binary"}\n${diagnostics}`.trim(),
      { cause: error ?? undefined },
    );
  }
  return binary;
}
