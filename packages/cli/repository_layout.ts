/**
 * The layouts of `nrt serve --models DIR`, read and written: the model repository's `RepositoryFiles` over a folder
 * that holds, side by side,
 *
 * - flat models: `<name>.neff` (or `<name>.onnx`) with an optional `<name>.json` — version 1;
 * - Triton-style models: `<name>/<version>/model.neff` (or `model.onnx`) with an optional `<name>/config.json` — the
 *   highest numeric version folder that holds a model file is served;
 * - with `modelName` (`--model-name NAME`), one model at the top of the folder, as KServe's storage initializer
 *   writes a single model's folder: `<version>/model.neff` or `model.neff` (version 1), and `config.json`.
 *
 * The repository sees every model as `<name>.neff` / `<name>.onnx` / `<name>.json`, asks `version` which version
 * that is and `pathOf` where a file is (its messages name `relu/config.json`, not `relu.json`). An upload is written in the model's layout (a flat model stays flat and has version 1 only;
 * anything else goes to `<name>/<version>/`), each file through a new temporary file and a rename, so a reader sees
 * the old file or the new one. Nothing is written outside the folder: names and versions are checked
 * (`isValidModelName`, `isValidModelVersion`), the file names are fixed, a folder that is a link must resolve inside
 * the repository, and temporary files are created exclusively without following links. Files are read through
 * {@linkcode directoryFiles} (regular files only, a size cap, links only inside their folder). Ours (docs/rest-api.md,
 * "Model repository"): the seeds describe no repository.
 *
 * @module
 */
import {
  HttpError,
  isValidModelName,
  isValidModelVersion,
  type ModelUpload,
  type RepositoryFiles,
} from "@nrt/http-api";
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readdir, realpath, rename, stat, unlink } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import process from "node:process";
import { directoryFiles, type DirectoryFilesOptions } from "./repository_dir.ts";

/** Options of {@linkcode layoutFiles}. */
export interface LayoutFilesOptions extends DirectoryFilesOptions {
  /** The model whose files are at the top of the folder (`--model-name`), as a single model's folder holds them. */
  readonly modelName?: string;
  /**
   * The calls through which `write` changes the folder; `node:fs/promises`'s by default. A test passes calls that
   * refuse, as a read-only folder does even for root (EROFS, or EPERM of an immutable folder).
   */
  readonly writeFs?: LayoutWriteFs;
}

/** The calls of `node:fs/promises` that `write` changes the folder with (everything else only reads it). */
export interface LayoutWriteFs {
  readonly mkdir: (path: string, options: { mode: number }) => Promise<unknown>;
  readonly open: (path: string, flags: number, mode: number) => Promise<FileHandle>;
  readonly rename: (from: string, to: string) => Promise<void>;
  readonly unlink: (path: string) => Promise<void>;
}

const NODE_WRITE_FS: LayoutWriteFs = { mkdir, open, rename, unlink };

/** The model files of a version folder, in order of preference. */
const MODEL_FILES = ["model.neff", "model.onnx"] as const;
const EXTENSIONS = [".neff", ".onnx"] as const;

/** Where one Triton-style model lives. */
interface TreeModel {
  /** Its folder (the repository itself for `modelName`). */
  readonly base: string;
  /** Version → the model file found in its folder. */
  readonly versions: Map<string, (typeof MODEL_FILES)[number]>;
}

interface Layout {
  /** Files at the top that are flat models' (or anything else the repository ignores). */
  readonly flat: string[];
  /** Triton-style models by name. */
  readonly trees: Map<string, TreeModel>;
}

const isMissing = (e: unknown): boolean => (e as { code?: string }).code === "ENOENT";

/** The highest version of a tree model, by number. */
function highest(t: TreeModel): string | undefined {
  let best: string | undefined;
  for (const v of t.versions.keys()) if (best === undefined || Number(v) > Number(best)) best = v;
  return best;
}

/**
 * A repository's files over `dir`, in any of the layouts above.
 *
 * @param dir The repository folder.
 * @param options The single model's name, the file cap and the warning sink.
 * @returns The files, with `version` and `write`.
 * @throws {TypeError} For a `modelName` that is not a valid model name.
 */
export function layoutFiles(dir: string, options: LayoutFilesOptions = {}): RepositoryFiles {
  const { modelName } = options;
  if (modelName !== undefined && !isValidModelName(modelName)) {
    throw new TypeError(
      `Cannot serve model name ${
        JSON.stringify(modelName.slice(0, 128))
      }: use 1 to 128 of A-Z a-z 0-9 _ . - and no leading dot`,
    );
  }
  const warn = options.warn ?? ((m: string) => console.warn(m));
  const fs = options.writeFs ?? NODE_WRITE_FS;
  const fileOptions = { maxFileBytes: options.maxFileBytes, warn };
  const top = directoryFiles(dir, fileOptions);
  let root: Promise<string> | undefined;
  const rootReal = (): Promise<string> => (root ??= realpath(dir));

  /** Whether `path` (an entry under the repository) is a folder inside it; a link to a folder must resolve inside. */
  async function isInsideFolder(path: string): Promise<boolean> {
    const st = await lstat(path);
    if (st.isDirectory()) return true;
    if (!st.isSymbolicLink()) return false;
    const target = await realpath(path).catch(() => undefined);
    if (target === undefined || !(await stat(target)).isDirectory()) return false;
    const base = await rootReal();
    if (target.startsWith(base + sep)) return true;
    warn(`Skipping ${path}: it links outside the model repository (to ${target})`);
    return false;
  }

  /** The numeric version folders of `base` that hold a model file. */
  async function versionsOf(
    base: string,
    names: readonly string[],
  ): Promise<Map<string, (typeof MODEL_FILES)[number]>> {
    const versions = new Map<string, (typeof MODEL_FILES)[number]>();
    for (const v of names) {
      if (!isValidModelVersion(v) || !(await isInsideFolder(join(base, v)))) continue;
      const inside = await readdir(join(base, v)).catch(() => [] as string[]);
      const file = MODEL_FILES.find((f) => inside.includes(f));
      if (file !== undefined) versions.set(v, file);
    }
    return versions;
  }

  async function scan(): Promise<Layout> {
    const entries = await readdir(dir, { withFileTypes: true });
    const flat: string[] = [];
    const trees = new Map<string, TreeModel>();
    const single = modelName === undefined
      ? undefined
      : { base: dir, versions: new Map<string, (typeof MODEL_FILES)[number]>() };
    const topVersions: string[] = [];
    for (const e of entries) {
      const path = join(dir, e.name);
      // A link counts as what it points to; a link to a folder outside the repository is skipped below.
      const folder = e.isDirectory() ||
        (e.isSymbolicLink() && ((await stat(path).catch(() => undefined))?.isDirectory() ?? false));
      if (!folder && (e.isFile() || e.isSymbolicLink())) {
        const ownedBySingle = single !== undefined &&
          (e.name === "config.json" || (MODEL_FILES as readonly string[]).includes(e.name));
        if (!ownedBySingle) flat.push(e.name);
      } else if (folder) {
        if (single !== undefined && isValidModelVersion(e.name)) topVersions.push(e.name);
        else if (isValidModelName(e.name) && (await isInsideFolder(path).catch(() => false))) {
          const versions = await versionsOf(path, await readdir(path).catch(() => [] as string[]));
          if (versions.size > 0) trees.set(e.name, { base: path, versions });
        }
      }
    }
    if (single !== undefined && modelName !== undefined) {
      for (const [v, f] of await versionsOf(dir, topVersions)) single.versions.set(v, f);
      const file = MODEL_FILES.find((f) => entries.some((e) => e.name === f && (e.isFile() || e.isSymbolicLink())));
      if (file !== undefined) {
        if (single.versions.has("1")) {
          warn(`Skipping ${join(dir, file)}: version folder 1 of model "${modelName}" holds its version 1`);
        } else single.versions.set("1", file);
      }
      if (single.versions.size > 0) trees.set(modelName, single);
    }
    for (const name of [...trees.keys()]) {
      const clash = EXTENSIONS.map((x) => `${name}${x}`).find((f) => flat.includes(f));
      if (clash !== undefined) {
        warn(`Skipping the folder of model "${name}" in ${dir}: the file ${clash} names the same model and is served`);
        trees.delete(name);
      }
    }
    return { flat, trees };
  }

  /** The model and the kind of file a repository name asks for (`relu.neff` → relu, model file). */
  const parse = (name: string): { model: string; kind: "model" | "onnx" | "config" } | undefined => {
    for (const [ext, kind] of [[".neff", "model"], [".onnx", "onnx"], [".json", "config"]] as const) {
      if (name.endsWith(ext)) return { model: name.slice(0, -ext.length), kind };
    }
    return undefined;
  };

  /** Writes `bytes` as `folder/name` through an exclusive temporary file and a rename. */
  async function replaceFile(folder: string, name: string, bytes: Uint8Array): Promise<void> {
    const tmp = join(folder, `.${name}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
    const fh = await fs.open(
      tmp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644,
    );
    try {
      try {
        let at = 0;
        while (at < bytes.byteLength) at += (await fh.write(bytes, at, bytes.byteLength - at)).bytesWritten;
      } finally {
        await fh.close();
      }
      await fs.rename(tmp, join(folder, name));
    } catch (e) {
      await fs.unlink(tmp).catch(() => {});
      throw e;
    }
  }

  /** Creates `path` (one level under an existing folder of the repository) or checks the folder that is there. */
  async function ensureFolder(path: string): Promise<void> {
    await fs.mkdir(path, { mode: 0o755 }).catch((e: { code?: string }) => {
      if (e.code !== "EEXIST") throw e;
    });
    if (!(await isInsideFolder(path))) {
      throw new HttpError(400, `Cannot store a model in ${path}: it is not a folder inside the repository`);
    }
  }

  return {
    list: async () => {
      const { flat, trees } = await scan();
      const names = [...flat];
      for (const [name, t] of trees) {
        names.push(`${name}${t.versions.get(highest(t)!) === "model.onnx" ? ".onnx" : ".neff"}`);
        if (await lstat(join(t.base, "config.json")).then(() => true, () => false)) names.push(`${name}.json`);
      }
      return names;
    },
    read: async (name) => {
      const p = parse(name);
      const layout = p === undefined ? undefined : await scan();
      const tree = p === undefined ? undefined : layout!.trees.get(p.model);
      if (p === undefined || tree === undefined) return await top.read(name);
      if (p.kind === "config") return await directoryFiles(tree.base, fileOptions).read("config.json");
      const v = highest(tree)!;
      const file = tree.versions.get(v)!;
      if ((p.kind === "onnx") !== (file === "model.onnx")) return undefined;
      return await directoryFiles(join(tree.base, v), fileOptions).read(file);
    },
    version: async (model) => {
      const tree = (await scan()).trees.get(model);
      return tree === undefined ? undefined : highest(tree);
    },
    pathOf: async (name) => {
      const p = parse(name);
      const tree = p === undefined ? undefined : (await scan()).trees.get(p.model);
      if (p === undefined || tree === undefined) return name;
      const base = relative(dir, tree.base); // "" for the single model of --model-name
      if (p.kind === "config") return join(base, "config.json");
      const v = highest(tree)!;
      return join(base, v, tree.versions.get(v)!);
    },
    write: async (model: string, upload: ModelUpload) => {
      if (
        !isValidModelName(model) || !isValidModelVersion(upload.version) ||
        !(MODEL_FILES as readonly string[]).includes(upload.file)
      ) {
        throw new HttpError(
          400,
          `Cannot store model ${JSON.stringify(model.slice(0, 128))}: invalid name, version or file`,
        );
      }
      const ext = upload.file === "model.onnx" ? ".onnx" : ".neff";
      const other = ext === ".onnx" ? ".neff" : ".onnx";
      try {
        const { flat, trees } = await scan();
        const tree = trees.get(model);
        if (tree === undefined && EXTENSIONS.some((x) => flat.includes(`${model}${x}`))) {
          // A flat model stays flat: one file, version 1.
          if (upload.version !== "1") {
            throw new HttpError(
              400,
              `Cannot store version ${upload.version} of model "${model}": it is the single file ${model}.neff (or .onnx) of the repository, which has version 1 only`,
            );
          }
          await replaceFile(dir, `${model}${ext}`, upload.bytes);
          await fs.unlink(join(dir, `${model}${other}`)).catch((e) => {
            if (!isMissing(e)) throw e;
          });
          if (upload.config !== undefined) await replaceFile(dir, `${model}.json`, upload.config);
          return;
        }
        const base = tree?.base ?? (model === modelName ? dir : join(dir, model));
        if (base !== dir) await ensureFolder(base);
        const folder = join(base, upload.version);
        await ensureFolder(folder);
        await replaceFile(folder, upload.file, upload.bytes);
        await fs.unlink(join(folder, other === ".onnx" ? "model.onnx" : "model.neff")).catch((e) => {
          if (!isMissing(e)) throw e;
        });
        if (upload.config !== undefined) await replaceFile(base, "config.json", upload.config);
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
          throw new HttpError(
            403,
            `Cannot store model "${model}": the repository folder ${dir} is not writable (${code})`,
            { cause: e },
          );
        }
        throw e;
      }
    },
  };
}
