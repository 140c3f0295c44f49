/**
 * `onnxFiles`: a model repository file source (`RepositoryFiles` of `@nrt/http-api`) that serves `x.onnx` as the
 * NEFF `x.neff` it compiles to, so `nrt serve --models DIR` takes ONNX models beside NEFFs without the repository
 * knowing about ONNX. Ours (docs/onnx.md): the seeds describe no repository.
 *
 * - `list()` adds `x.neff` for every `x.onnx`; a real `x.neff` beside it wins and the ONNX file is not compiled.
 * - `read("x.neff")` compiles `x.onnx` (`nrt compile` for the served generation) when no real `x.neff` exists, off
 *   the server's thread: in a Worker, one model at a time, within a time limit (`OnnxCompiler`, onnx_compiler.ts).
 *   Compiled NEFFs are cached by content hash in a private folder (`<cache>/onnx/<sha256>.neff`, see
 *   `privateCacheDir`): the key covers the ONNX bytes, the target, the input shapes, the op library binaries and
 *   the NEFF layout version, so a changed model or kernel never reuses a stale NEFF. Concurrent reads of one model
 *   share one compile.
 * - The model's config `x.json` may hold `"onnx": {"inputShapes": {"x": [8, 3, 224, 224]}}` for inputs with dynamic
 *   dims (the `--input-shape` of `nrt compile`); that key is taken out before the repository reads the config.
 *
 * A model the compiler refuses fails its load with `NrtError(NRT_INVALID)` carrying the `OnnxCompileError` message
 * (the repository index shows it as the model's reason; an explicit load answers 400, as for an invalid NEFF); a
 * malformed `onnx` key in the config is an `HttpError` 400, as the repository's own config errors are. A compile
 * past the time limit fails with `NRT_TIMEOUT`, one stopped by the source's `signal` with `NRT_CLOSED`.
 *
 * @module
 */
import { HttpError, type RepositoryFiles } from "@nrt/http-api";
import { createHash } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import type { CompileTarget } from "./compile_args.ts";
import { OnnxCompiler } from "./onnx_compiler.ts";
import { ensurePrivateDir } from "./repository_dir.ts";

/** Options of {@linkcode onnxFiles}. */
export interface OnnxFilesOptions {
  /** The generation the NEFFs target (the simulated device's). */
  readonly target: CompileTarget;
  /** The private cache folder (`privateCacheDir()`); compiled NEFFs go to its `onnx/` folder. Absent: no disk cache. */
  readonly cache?: string;
  /** Where progress and refusals are reported. */
  readonly log?: (message: string) => void;
  /**
   * What compiles: its Workers, its queue, its time limit (default: one compiler shared by every source made
   * without one, with the default time limit). Sources that share one compile one model at a time between them.
   */
  readonly compiler?: OnnxCompiler;
  /** Stops this source's compiles, the running one and the waiting ones (the server shuts down). */
  readonly signal?: AbortSignal;
}

/** The compiler of the sources made without one. */
let sharedCompiler: OnnxCompiler | undefined;

/** Bumped whenever the NEFF the compiler writes changes for the same inputs; part of the cache key. */
export const ONNX_NEFF_LAYOUT = "nrt-onnx-neff/1";

/** Every op library binary: the cache key depends on the kernels a NEFF carries. */
const OP_LIBRARIES = ["activation", "conv", "elementwise", "linalg", "norm", "reduce", "shape"];

const enc = new TextEncoder();

/**
 * Every op library binary (`kernels/ops/wasm/<name>.wasm`), read here rather than by `readOpLibraries` of
 * compile_command.ts: that module loads the compiler, which stays in the compile Workers, off the server's thread.
 */
async function readOpLibraries(): Promise<Map<string, Uint8Array>> {
  const { OP_LIBRARY_WASM_DIR } = await import("@nrt/ops");
  const out = new Map<string, Uint8Array>();
  for (const n of OP_LIBRARIES) out.set(n, new Uint8Array(await readFile(new URL(`${n}.wasm`, OP_LIBRARY_WASM_DIR))));
  return out;
}

/** A `RepositoryFiles` over `files` in which `x.onnx` reads as the compiled `x.neff`. */
export function onnxFiles(files: RepositoryFiles, options: OnnxFilesOptions): RepositoryFiles {
  const log = options.log ?? ((m: string) => console.log(m));
  const compiler = options.compiler ?? (sharedCompiler ??= new OnnxCompiler());
  let libraries: Promise<{ binaries: Map<string, Uint8Array>; digest: string }> | undefined;
  const opLibraries = () =>
    libraries ??= readOpLibraries().then((binaries) => {
      const h = createHash("sha256");
      for (const [name, bytes] of binaries) h.update(name).update(bytes);
      return { binaries, digest: h.digest("hex") };
    });
  const compiling = new Map<string, Promise<Uint8Array>>();

  /** The config with its `onnx` key taken out, and the input shapes that key gave. */
  async function config(
    model: string,
  ): Promise<{ rest: Uint8Array | undefined; inputShapes: Record<string, number[]> }> {
    const bytes = await files.read(`${model}.json`);
    if (bytes === undefined) return { rest: undefined, inputShapes: {} };
    let v: unknown;
    try {
      v = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      return { rest: bytes, inputShapes: {} }; // the repository reports the malformed config
    }
    if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.hasOwn(v, "onnx")) {
      return { rest: bytes, inputShapes: {} };
    }
    const { onnx, ...rest } = v as Record<string, unknown>;
    const bad = (why: string) => new HttpError(400, `Cannot load model "${model}": ${model}.json "onnx" ${why}`);
    if (typeof onnx !== "object" || onnx === null || Array.isArray(onnx)) throw bad("is not an object");
    for (const k of Object.keys(onnx)) if (k !== "inputShapes") throw bad(`has an unknown key "${k}"`);
    const shapes = (onnx as { inputShapes?: unknown }).inputShapes ?? {};
    if (typeof shapes !== "object" || shapes === null || Array.isArray(shapes)) {
      throw bad('"inputShapes" is not an object');
    }
    for (const [k, dims] of Object.entries(shapes)) {
      if (!Array.isArray(dims) || !dims.every((d) => Number.isSafeInteger(d) && d > 0)) {
        throw bad(`"inputShapes" of "${k}" is not a list of positive integers`);
      }
    }
    return { rest: enc.encode(JSON.stringify(rest)), inputShapes: shapes as Record<string, number[]> };
  }

  async function compiled(model: string, onnx: Uint8Array): Promise<Uint8Array> {
    const { inputShapes } = await config(model);
    const libs = await opLibraries();
    const key = createHash("sha256")
      .update(ONNX_NEFF_LAYOUT).update("\0").update(options.target).update("\0")
      .update(JSON.stringify(Object.entries(inputShapes).sort(([a], [b]) => (a < b ? -1 : 1)))).update("\0")
      .update(libs.digest).update("\0").update(onnx)
      .digest("hex");
    const pending = compiling.get(key);
    if (pending !== undefined) return await pending;
    const p = (async () => {
      const dir = options.cache === undefined ? undefined : join(options.cache, "onnx");
      const path = dir === undefined ? undefined : join(dir, `${key}.neff`);
      if (dir !== undefined && path !== undefined) {
        // Only a folder this user alone can write is trusted to hold NEFFs this server will load.
        await ensurePrivateDir(dir, options.cache!);
        const cached = await readFile(path).catch((e: { code?: string }) => {
          if (e.code === "ENOENT") return undefined;
          throw e;
        });
        if (cached !== undefined) return new Uint8Array(cached);
      }
      const started = performance.now();
      const { neff, calls } = await compiler.compile({
        file: `${model}.onnx`,
        onnx,
        target: options.target,
        inputShapes,
        name: `${model}.neff`,
        libraries: libs.binaries,
      }, options.signal);
      log(
        `Compiled ${model}.onnx for ${options.target}: ${calls} kernel calls, ${neff.byteLength} bytes (${
          Math.round(performance.now() - started)
        } ms)`,
      );
      if (path !== undefined) {
        const tmp = `${path}.${process.pid}.tmp`;
        await writeFile(tmp, neff, { mode: 0o600 });
        await rename(tmp, path);
      }
      return neff;
    })();
    compiling.set(key, p);
    try {
      return await p;
    } finally {
      compiling.delete(key);
    }
  }

  return {
    list: async () => {
      const names = await files.list();
      const present = new Set(names);
      const added = names.filter((n) => n.endsWith(".onnx")).map((n) => `${n.slice(0, -".onnx".length)}.neff`).filter((
        n,
      ) => !present.has(n));
      return [...names, ...added];
    },
    read: async (name) => {
      if (name.endsWith(".json")) {
        const model = name.slice(0, -".json".length);
        const served = await files.list();
        const fromOnnx = served.includes(`${model}.onnx`) && !served.includes(`${model}.neff`);
        return fromOnnx ? (await config(model)).rest : await files.read(name);
      }
      const real = await files.read(name);
      if (real !== undefined || !name.endsWith(".neff")) return real;
      const model = name.slice(0, -".neff".length);
      const onnx = await files.read(`${model}.onnx`);
      return onnx === undefined ? undefined : await compiled(model, onnx);
    },
  };
}
