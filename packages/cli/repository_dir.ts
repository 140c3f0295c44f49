/**
 * The model repository on disk (`nrt serve --models DIR`) and the private folder of the demo models. Ours
 * (docs/security.md): the seeds describe no repository.
 *
 * - Only regular files are read, each opened without blocking and checked with `fstat` on the open handle, so a
 *   FIFO, a device or a socket named `x.neff` is skipped instead of hanging the server, and a file cannot be
 *   swapped between the check and the read.
 * - A symbolic link is followed only when it resolves inside the repository folder (a repository may link one file
 *   to another); a link out of it (`link.neff → /etc/passwd`) is refused.
 * - Every file is read up to a size cap.
 * - `--demo` writes into a folder of the user's own (`$XDG_CACHE_HOME/nrt` or `~/.cache/nrt`), created with mode
 *   0700 and checked to be owned by the user and writable by nobody else, never into a shared temporary folder
 *   where another local user could plant a model.
 * - `--demo --models DIR` never overwrites a model of the user's: a demo model whose name DIR already uses (any of
 *   its files, or its folder) is not written at all ({@linkcode writeModels}).
 *
 * @module
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, readdir, realpath, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join, sep } from "node:path";
import process from "node:process";
import type { RepositoryFiles } from "@nrt/http-api";

/** Options of {@linkcode directoryFiles}. */
export interface DirectoryFilesOptions {
  /** Largest file read, in bytes (default 64 MiB). */
  readonly maxFileBytes?: number;
  /** Where refusals are reported (a skipped FIFO, a link out of the folder). */
  readonly warn?: (message: string) => void;
}

/**
 * Bytes a NEFF file may hold beyond `NRT_NEFF_MAX_BYTES` (the cap on its decompressed payload): its header and gzip's
 * overhead on a payload that does not compress (ours). `nrt serve` reads a repository's files, and `nrt run`,
 * `nrt inspect` and `nrt profile` a NEFF, up to `maxNeffBytes` plus this.
 */
export const NEFF_FILE_SLACK_BYTES = 1 << 20;

/** A plain file name: no separator, not `.` or `..`. */
const PLAIN_NAME = /^(?!\.\.?$)[^/\\\0]{1,255}$/;

/**
 * A repository over a directory, through `node:fs` (which Bun and Deno both provide).
 *
 * @param dir The repository folder.
 * @param options The size cap and the warning sink.
 * @returns The repository's files.
 */
export function directoryFiles(dir: string, options: DirectoryFilesOptions = {}): RepositoryFiles {
  const cap = options.maxFileBytes ?? 64 * 1024 * 1024;
  const warn = options.warn ?? ((m: string) => console.warn(m));
  let root: Promise<string> | undefined;
  const rootReal = (): Promise<string> => (root ??= realpath(dir));
  return {
    list: async () =>
      (await readdir(dir, { withFileTypes: true })).filter((e) => e.isFile() || e.isSymbolicLink()).map((e) => e.name),
    read: async (name) => {
      if (!PLAIN_NAME.test(name)) {
        throw new Error(`Cannot read repository file ${JSON.stringify(name)}: not a plain file name`);
      }
      let path = join(dir, name);
      try {
        if ((await lstat(path)).isSymbolicLink()) {
          const target = await realpath(path);
          const base = await rootReal();
          if (!target.startsWith(base + sep)) {
            warn(`Skipping ${path}: it links outside the model repository (to ${target})`);
            return undefined;
          }
          path = target;
        }
        // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: no link is followed from here on.
        const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
        try {
          const st = await fh.stat();
          if (!st.isFile()) {
            warn(`Skipping ${path}: it is not a regular file`);
            return undefined;
          }
          if (st.size > cap) throw new Error(`Cannot read ${path}: it is ${st.size} bytes, over the ${cap}-byte cap`);
          const out = new Uint8Array(st.size);
          let at = 0;
          while (at < out.length) {
            const { bytesRead } = await fh.read(out, at, out.length - at, at);
            if (bytesRead === 0) break;
            at += bytesRead;
          }
          return at === out.length ? out : out.subarray(0, at);
        } finally {
          await fh.close();
        }
      } catch (e) {
        if ((e as { code?: string }).code === "ENOENT") return undefined;
        throw e;
      }
    },
  };
}

/** The user's private cache folder for nrt: `$XDG_CACHE_HOME/nrt`, else `~/.cache/nrt`. */
export function privateCacheDir(env: Record<string, string | undefined> = process.env): string {
  const base = env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== ""
    ? env.XDG_CACHE_HOME
    : join(homedir(), ".cache");
  return join(base, "nrt");
}

/**
 * Creates (mode 0700) or checks a folder only this user can write: it must be a real folder, not a link, owned by
 * this user, without group or other write permission — and so must every folder from the cache folder down.
 *
 * @param path The folder.
 * @param from The first folder of the chain to check (the cache folder); folders above it are the user's home.
 * @throws {Error} Naming the folder and what is wrong with it.
 */
export async function ensurePrivateDir(path: string, from: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o700 });
  const me = typeof process.getuid === "function" ? process.getuid() : undefined;
  for (let p = path;; p = p.slice(0, p.lastIndexOf(sep))) {
    const st = await lstat(p);
    if (!st.isDirectory()) {
      throw new Error(`Cannot use ${p} for the demo models: it is not a folder (a link or a file is there)`);
    }
    if (me !== undefined && st.uid !== me) {
      throw new Error(`Cannot use ${p} for the demo models: it belongs to uid ${st.uid}, not to this user (${me})`);
    }
    if ((st.mode & 0o022) !== 0) {
      throw new Error(
        `Cannot use ${p} for the demo models: others may write to it (mode ${(st.mode & 0o777).toString(8)})`,
      );
    }
    if (p === from || !p.startsWith(from + sep)) break;
  }
}

/** Options of {@linkcode writeModels}. */
export interface WriteModelsOptions {
  /**
   * Replace the models already in the folder (the private demo folder, rewritten at every start). Default `false`:
   * a model the folder already has is kept.
   */
  readonly replace?: boolean;
}

/** The files a model of the repository may have in the flat layout, and its folder in Triton's. */
const MODEL_FILE = /^(.+)\.(?:neff|onnx|json)$/;

/**
 * Writes the models of `files` (`<name>.neff`, `<name>.json`, …) into `dir`, each file through a temporary file and
 * a rename, so a reader never sees half a model.
 *
 * Unless `replace` is set, a model `dir` already has is kept, whole: a model is there when any of `<name>.neff`,
 * `<name>.onnx`, `<name>.json` or an entry `<name>` (Triton's folder) exists, and then none of its files in `files`
 * is written — not even a config beside the user's own model — and a missing `dir` is created. Ours: `nrt serve
 * --demo --models DIR` adds the demo models to the user's folder and never overwrites a model of the user's (running
 * it again writes nothing new).
 *
 * @param dir The folder.
 * @param files File bytes by file name.
 * @param options Whether to replace existing models.
 * @returns The models written and the models kept (not written because `dir` has one of that name), sorted.
 */
export async function writeModels(
  dir: string,
  files: Record<string, Uint8Array>,
  options: WriteModelsOptions = {},
): Promise<{ written: string[]; kept: string[] }> {
  const modelOf = (file: string): string => MODEL_FILE.exec(file)?.[1] ?? file;
  const models = [...new Set(Object.keys(files).map(modelOf))].sort();
  const kept: string[] = [];
  if (options.replace !== true) {
    await mkdir(dir, { recursive: true });
    const present = new Set(await readdir(dir));
    for (const m of models) {
      if ([m, `${m}.neff`, `${m}.onnx`, `${m}.json`].some((f) => present.has(f))) kept.push(m);
    }
  }
  for (const [name, bytes] of Object.entries(files)) {
    if (kept.includes(modelOf(name))) continue;
    const tmp = join(dir, `.${name}.${process.pid}.tmp`);
    await writeFile(tmp, bytes, { mode: 0o600 });
    await rename(tmp, join(dir, name));
  }
  return { written: models.filter((m) => !kept.includes(m)), kept };
}
