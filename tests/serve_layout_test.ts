/**
 * `nrt serve --models DIR` layouts (packages/cli/repository_layout.ts): flat files, Triton-style version folders,
 * one model at the top of the folder with `--model-name`, as KServe's storage initializer writes each; the version
 * served; uploads written in the model's layout, atomically, never outside the folder; a read-only folder, whose
 * refusals (EACCES, EPERM, EROFS) the test gives `write` through `writeFs`, since chmod stops no root user.
 */
import { describe, expect, test } from "bun:test";
import { HttpError, type ModelUpload } from "@nrt/http-api";
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { layoutFiles, type LayoutWriteFs } from "../packages/cli/repository_layout.ts";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (
  b: Uint8Array | undefined,
): string | undefined => (b === undefined ? undefined : new TextDecoder().decode(b));

/** Runs `f` in a fresh folder holding `files` (paths relative to it), then removes it. */
async function withRepo(files: Record<string, string>, f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "nrt-layout-"));
  try {
    for (const [path, content] of Object.entries(files)) {
      await mkdir(join(dir, path, ".."), { recursive: true });
      await writeFile(join(dir, path), content);
    }
    await f(dir);
  } finally {
    await chmod(dir, 0o755).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every entry under `dir` (relative path → file content, or "<dir>" for a folder), to compare before and after. */
async function snapshot(dir: string, under = ""): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(join(dir, under), { withFileTypes: true })) {
    const path = under === "" ? e.name : join(under, e.name);
    if (e.isDirectory()) Object.assign(out, { [path]: "<dir>" }, await snapshot(dir, path));
    else out[path] = await readFile(join(dir, path), "utf8");
  }
  return out;
}

/** An error as `node:fs/promises` rejects with. */
const fsError = (code: string, syscall: string, path: string): Error =>
  Object.assign(new Error(`${code}: ${syscall} '${path}'`), { code, syscall, path });

/**
 * The calls `write` changes a folder with, refusing as a read-only folder does (with `code`): creating, renaming or
 * removing anything is refused, while making a folder that exists is EEXIST, as Linux answers before it checks the
 * permission. `refused` records each refusal.
 */
function readOnlyFs(code: string, refused: string[]): LayoutWriteFs {
  const refuse = (syscall: string, path: string): Promise<never> => {
    refused.push(`${syscall} ${path}`);
    return Promise.reject(fsError(code, syscall, path));
  };
  return {
    mkdir: async (path) => {
      if (await lstat(path).then(() => true, () => false)) throw fsError("EEXIST", "mkdir", path);
      return await refuse("mkdir", path);
    },
    open: (path) => refuse("open", path),
    rename: (from) => refuse("rename", from),
    unlink: (path) => refuse("unlink", path),
  };
}

const upload = (version: string, body: string, extra: Partial<ModelUpload> = {}): ModelUpload => ({
  version,
  file: "model.neff",
  bytes: enc(body),
  ...extra,
});

describe("layoutFiles()", () => {
  test("layoutFiles() serves flat files as version 1 and Triton folders at their highest version", async () => {
    await withRepo({
      "relu.neff": "flat relu",
      "relu.json": '{"instances":2}',
      "mlp.onnx": "flat onnx",
      "add/1/model.neff": "add v1",
      "add/3/model.neff": "add v3",
      "add/2/model.neff": "add v2",
      "add/config.json": '{"vnc":1}',
      "cnn/4/model.onnx": "cnn v4",
      "empty/1/README": "no model file",
      "notes.txt": "ignored by the repository",
    }, async (dir) => {
      const files = layoutFiles(dir, { warn: () => {} });
      expect((await files.list()).sort()).toEqual([
        "add.json",
        "add.neff",
        "cnn.onnx",
        "mlp.onnx",
        "notes.txt",
        "relu.json",
        "relu.neff",
      ]);
      expect(text(await files.read("add.neff"))).toBe("add v3");
      expect(await files.version!("add")).toBe("3");
      expect(text(await files.read("add.json"))).toBe('{"vnc":1}');
      expect(text(await files.read("cnn.onnx"))).toBe("cnn v4");
      expect(await files.read("cnn.neff")).toBeUndefined(); // the ONNX source compiles it
      expect(await files.version!("cnn")).toBe("4");
      expect(text(await files.read("relu.neff"))).toBe("flat relu");
      expect(await files.version!("relu")).toBeUndefined(); // version 1
      expect(await files.read("empty.neff")).toBeUndefined();
    });
  });

  test("layoutFiles() with modelName reads the folder of one model, as the storage initializer writes it", async () => {
    // storageUri s3://bucket/repo/relu/ → /mnt/models/1/model.neff, /mnt/models/config.json
    await withRepo({ "1/model.neff": "relu v1", "7/model.neff": "relu v7", "config.json": "{}" }, async (dir) => {
      const files = layoutFiles(dir, { modelName: "relu", warn: () => {} });
      expect((await files.list()).sort()).toEqual(["relu.json", "relu.neff"]);
      expect(text(await files.read("relu.neff"))).toBe("relu v7");
      expect(await files.version!("relu")).toBe("7");
    });
    // storageUri s3://bucket/relu/model.neff → /mnt/models/model.neff
    await withRepo({ "model.neff": "relu" }, async (dir) => {
      const files = layoutFiles(dir, { modelName: "relu", warn: () => {} });
      expect(await files.list()).toEqual(["relu.neff"]);
      expect(await files.version!("relu")).toBe("1");
    });
    // Without the name, model.neff is a flat model called "model" and 1/ is a Triton model called "1".
    await withRepo({ "model.neff": "m", "1/1/model.neff": "one" }, async (dir) => {
      expect((await layoutFiles(dir).list()).sort()).toEqual(["1.neff", "model.neff"]);
    });
    expect(() => layoutFiles("/tmp", { modelName: "../etc" })).toThrow(TypeError);
  });

  test("pathOf() names the file a repository name reads, for messages (relu.json of a Triton model is relu/config.json)", async () => {
    await withRepo({
      "flat.neff": "f",
      "flat.json": "{}",
      "bad/1/model.neff": "v1",
      "bad/3/model.onnx": "v3",
      "bad/config.json": '{"vnc":9}',
    }, async (dir) => {
      const files = layoutFiles(dir, { warn: () => {} });
      expect(await files.pathOf!("bad.json")).toBe(join("bad", "config.json"));
      expect(await files.pathOf!("bad.onnx")).toBe(join("bad", "3", "model.onnx"));
      expect(await files.pathOf!("flat.json")).toBe("flat.json");
      expect(await files.pathOf!("nope.json")).toBe("nope.json");
    });
    await withRepo({ "2/model.neff": "relu v2", "config.json": "{}" }, async (dir) => {
      const files = layoutFiles(dir, { modelName: "relu", warn: () => {} });
      expect(await files.pathOf!("relu.json")).toBe("config.json");
      expect(await files.pathOf!("relu.neff")).toBe(join("2", "model.neff"));
    });
  });

  test("layoutFiles() serves a flat file over a folder of the same model, and skips folders that link outside", async () => {
    const outside = await mkdtemp(join(tmpdir(), "nrt-layout-outside-"));
    try {
      await mkdir(join(outside, "1"));
      await writeFile(join(outside, "1", "model.neff"), "outside");
      await withRepo(
        { "relu.neff": "flat", "relu/1/model.neff": "folder", "inner/1/model.neff": "inner" },
        async (dir) => {
          await symlink(outside, join(dir, "escape"));
          await symlink(join(dir, "inner"), join(dir, "alias"));
          const warnings: string[] = [];
          const files = layoutFiles(dir, { warn: (m) => warnings.push(m) });
          expect((await files.list()).sort()).toEqual(["alias.neff", "inner.neff", "relu.neff"]);
          expect(text(await files.read("relu.neff"))).toBe("flat");
          expect(text(await files.read("alias.neff"))).toBe("inner");
          expect(await files.read("escape.neff")).toBeUndefined();
          expect(warnings.join("\n")).toContain("the file relu.neff names the same model and is served");
          expect(warnings.join("\n")).toContain(
            `Skipping ${join(dir, "escape")}: it links outside the model repository`,
          );
        },
      );
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  test("write() keeps a flat model flat, version 1 only, replacing the other form of the file", async () => {
    await withRepo({ "relu.onnx": "old onnx" }, async (dir) => {
      const files = layoutFiles(dir);
      await files.write!("relu", upload("1", "new neff", { config: enc('{"instances":2}') }));
      expect((await readdir(dir)).sort()).toEqual(["relu.json", "relu.neff"]);
      expect(await readFile(join(dir, "relu.neff"), "utf8")).toBe("new neff");
      const v2 = await files.write!("relu", upload("2", "v2")).catch((e) => e);
      expect(v2).toBeInstanceOf(HttpError);
      expect([v2.status, v2.message]).toEqual([400, expect.stringContaining('Cannot store version 2 of model "relu"')]);
    });
  });

  test("write() puts a new model and a Triton model's versions in <name>/<version>/, leaving no temporary file", async () => {
    await withRepo({ "add/1/model.neff": "add v1" }, async (dir) => {
      const files = layoutFiles(dir);
      await files.write!("add", upload("2", "add v2", { config: enc("{}") }));
      await files.write!("fresh", upload("1", "fresh onnx", { file: "model.onnx" }));
      expect((await readdir(join(dir, "add"))).sort()).toEqual(["1", "2", "config.json"]);
      expect(text(await files.read("add.neff"))).toBe("add v2");
      expect(await files.version!("add")).toBe("2");
      expect(await readdir(join(dir, "fresh", "1"))).toEqual(["model.onnx"]);
      // A NEFF replaces the ONNX file of the same version.
      await files.write!("fresh", upload("1", "fresh neff"));
      expect(await readdir(join(dir, "fresh", "1"))).toEqual(["model.neff"]);
    });
    await withRepo({ "1/model.neff": "v1" }, async (dir) => {
      await layoutFiles(dir, { modelName: "relu" }).write!("relu", upload("2", "v2"));
      expect((await readdir(dir)).sort()).toEqual(["1", "2"]);
    });
  });

  test("write() never writes outside the folder: bad names and versions, and a model folder linking out", async () => {
    const outside = await mkdtemp(join(tmpdir(), "nrt-layout-outside-"));
    try {
      await withRepo({}, async (dir) => {
        await symlink(outside, join(dir, "evil"));
        const files = layoutFiles(dir, { warn: () => {} });
        for (const [model, version] of [["../escape", "1"], ["ok", "../1"], ["ok", "01"], [".hidden", "1"]]) {
          const e = await files.write!(model, upload(version, "x")).catch((err) => err);
          expect({ model, version, status: e.status }).toEqual({ model, version, status: 400 });
        }
        const linked = await files.write!("evil", upload("1", "x")).catch((err) => err);
        expect([linked.status, linked.message]).toEqual([
          400,
          expect.stringContaining("it is not a folder inside the repository"),
        ]);
        expect(await readdir(outside)).toEqual([]);
        expect(await readdir(dir)).toEqual(["evil"]);
      });
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  test("write() into a read-only folder is a 403 for EACCES, EPERM and EROFS, and leaves its files as they were", async () => {
    // The first change each write makes: a flat model's temporary file, a Triton model's in its version folder that
    // exists, a new model's folder.
    const cases: {
      files: Record<string, string>;
      model: string;
      upload: ModelUpload;
      first: (dir: string) => string;
    }[] = [
      {
        files: { "relu.neff": "flat", "relu.json": "{}" },
        model: "relu",
        upload: upload("1", "new onnx", { file: "model.onnx", config: enc('{"instances":2}') }),
        first: (dir: string) => `open ${join(dir, ".relu.onnx.")}`,
      },
      {
        files: { "add/1/model.onnx": "add v1", "add/config.json": "{}" },
        model: "add",
        upload: upload("1", "add v1 neff", { config: enc('{"vnc":1}') }),
        first: (dir: string) => `open ${join(dir, "add", "1", ".model.neff.")}`,
      },
      {
        files: { "relu.neff": "flat" },
        model: "fresh",
        upload: upload("1", "fresh"),
        first: (dir: string) => `mkdir ${join(dir, "fresh")}`,
      },
    ];
    for (const code of ["EACCES", "EPERM", "EROFS"]) {
      for (const c of cases) {
        await withRepo(c.files, async (dir) => {
          const before = await snapshot(dir);
          const refused: string[] = [];
          const files = layoutFiles(dir, { writeFs: readOnlyFs(code, refused) });
          const e = await files.write!(c.model, c.upload).then(() => undefined, (err) => err);
          const at = { code, model: c.model };
          expect({ ...at, error: e instanceof HttpError, status: e?.status, message: e?.message }).toEqual({
            ...at,
            error: true,
            status: 403,
            message: `Cannot store model "${c.model}": the repository folder ${dir} is not writable (${code})`,
          });
          expect({ ...at, cause: e.cause?.code }).toEqual({ ...at, cause: code });
          expect({ ...at, first: refused[0] }).toEqual({ ...at, first: expect.stringContaining(c.first(dir)) });
          expect({ ...at, files: await snapshot(dir) }).toEqual({ ...at, files: before });
        });
      }
    }
    // Any other failure is the file system's own error, not a 403.
    await withRepo({ "relu.neff": "flat" }, async (dir) => {
      const e = await layoutFiles(dir, { writeFs: readOnlyFs("ENOSPC", []) }).write!("relu", upload("1", "new"))
        .then(() => undefined, (err) => err);
      expect([e instanceof HttpError, e?.code]).toEqual([false, "ENOSPC"]);
      expect(await snapshot(dir)).toEqual({ "relu.neff": "flat" });
    });
  });

  // The same refusal from the runtime's own file system, where chmod makes one: not for root, whom chmod does not
  // stop (the test above gives root the refusals). Registered only where it can run, so that it is never a skip.
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    test("write() into a folder made read-only with chmod is a 403 (EACCES from the runtime)", async () => {
      await withRepo({ "relu.neff": "flat", "add/1/model.neff": "add v1" }, async (dir) => {
        const before = await snapshot(dir);
        await chmod(join(dir, "add", "1"), 0o555);
        await chmod(dir, 0o555);
        try {
          for (const model of ["relu", "add", "fresh"]) {
            const e = await layoutFiles(dir).write!(model, upload("1", "new")).then(() => undefined, (err) => err);
            expect({ model, status: e?.status, message: e?.message }).toEqual({
              model,
              status: 403,
              message: `Cannot store model "${model}": the repository folder ${dir} is not writable (EACCES)`,
            });
          }
        } finally {
          await chmod(dir, 0o755);
          await chmod(join(dir, "add", "1"), 0o755);
        }
        expect(await snapshot(dir)).toEqual(before);
      });
    });
  }
});
