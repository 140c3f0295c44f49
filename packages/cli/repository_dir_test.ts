/**
 * `writeModels`: the demo models go into a folder of the user's (`nrt serve --demo --models DIR`) beside the user's
 * own and never over them — a model is the user's when any of its files or its Triton folder is there — while the
 * private demo folder (`replace`) is rewritten.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeModels } from "./repository_dir.ts";

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const DEMO = {
  "a.neff": bytes("demo a"),
  "a.json": bytes("{}"),
  "b.neff": bytes("demo b"),
  "b.json": bytes("{}"),
  "c.neff": bytes("demo c"),
  "d.neff": bytes("demo d"),
  "e.neff": bytes("demo e"),
  "e.json": bytes("{}"),
};

let home: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "nrt-write-models-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe("writeModels", () => {
  test("keeps every model the folder has, whatever file or folder makes it one, and writes the others whole", async () => {
    const dir = join(home, "user");
    await mkdir(join(dir, "b", "1"), { recursive: true });
    await writeFile(join(dir, "a.neff"), "mine a"); // flat NEFF
    await writeFile(join(dir, "b", "1", "model.neff"), "mine b"); // Triton's folder
    await writeFile(join(dir, "c.onnx"), "mine c"); // ONNX
    await writeFile(join(dir, "d.json"), "mine d"); // a config alone
    await symlink("a.neff", join(dir, "e.neff")); // a link is the user's too
    expect(await writeModels(dir, DEMO)).toEqual({ written: [], kept: ["a", "b", "c", "d", "e"] });
    expect((await readdir(dir)).sort()).toEqual(["a.neff", "b", "c.onnx", "d.json", "e.neff"]);
    expect(await readFile(join(dir, "a.neff"), "utf8")).toBe("mine a");
    expect(await readFile(join(dir, "d.json"), "utf8")).toBe("mine d");

    await rm(join(dir, "a.neff"));
    expect(await writeModels(dir, DEMO)).toEqual({ written: ["a"], kept: ["b", "c", "d", "e"] });
    expect(await readFile(join(dir, "a.neff"), "utf8")).toBe("demo a");
    expect(await readFile(join(dir, "a.json"), "utf8")).toBe("{}");
    // Once written, the demo's own files are there: a second run writes nothing.
    expect((await writeModels(dir, DEMO)).written).toEqual([]);
  });

  test("creates a missing folder and writes every model into it", async () => {
    const dir = join(home, "new", "models");
    expect(await writeModels(dir, DEMO)).toEqual({ written: ["a", "b", "c", "d", "e"], kept: [] });
    expect((await readdir(dir)).sort()).toEqual(Object.keys(DEMO).sort());
  });

  test("with replace (the private demo folder) rewrites what is there", async () => {
    const dir = join(home, "private");
    await mkdir(dir);
    await writeFile(join(dir, "a.neff"), "old a");
    expect(await writeModels(dir, { "a.neff": bytes("demo a") }, { replace: true })).toEqual({
      written: ["a"],
      kept: [],
    });
    expect(await readFile(join(dir, "a.neff"), "utf8")).toBe("demo a");
  });
});
