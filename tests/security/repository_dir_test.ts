/**
 * The model directory is read as a repository, not blindly (docs/security.md, finding 8): regular files only (a FIFO
 * named `x.neff` is skipped instead of hanging startup), links followed only inside the folder, every file under a
 * size cap; `--demo` writes into a folder private to the user, never a shared temporary one.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { directoryFiles, startServer } from "@nrt/cli";
import { ensurePrivateDir } from "../../packages/cli/repository_dir.ts";

describe("directoryFiles()", () => {
  test("directoryFiles() skips a FIFO, refuses a link out of the folder, follows one inside, and caps sizes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-repo-"));
    const outside = await mkdtemp(join(tmpdir(), "nrt-outside-"));
    try {
      execFileSync("mkfifo", [join(dir, "fifo.neff")]);
      await writeFile(join(outside, "secret.neff"), "secret");
      await symlink(join(outside, "secret.neff"), join(dir, "link.neff"));
      await writeFile(join(dir, "real.neff"), "real");
      await symlink(join(dir, "real.neff"), join(dir, "alias.neff"));
      await writeFile(join(dir, "big.neff"), new Uint8Array(2048));
      const warnings: string[] = [];
      const files = directoryFiles(dir, { maxFileBytes: 1024, warn: (m) => warnings.push(m) });
      expect((await files.list()).sort()).toEqual(["alias.neff", "big.neff", "link.neff", "real.neff"]); // the FIFO is not listed
      expect(await files.read("fifo.neff")).toBeUndefined(); // and reading it does not block
      expect(await files.read("link.neff")).toBeUndefined();
      expect(new TextDecoder().decode(await files.read("alias.neff"))).toBe("real");
      expect(new TextDecoder().decode(await files.read("real.neff"))).toBe("real");
      await expect(files.read("big.neff")).rejects.toThrow("is 2048 bytes, over the 1024-byte cap");
      await expect(files.read("../etc/passwd")).rejects.toThrow("not a plain file name");
      expect(await files.read("missing.neff")).toBeUndefined();
      expect(warnings.map((w) => w.replace(dir, "DIR").replace(outside, "OUT"))).toEqual([
        "Skipping DIR/fifo.neff: it is not a regular file",
        "Skipping DIR/link.neff: it links outside the model repository (to OUT/secret.neff)",
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(outside, { recursive: true, force: true });
    }
  });
});

describe("--demo", () => {
  test("ensurePrivateDir() creates a 0700 folder and refuses one that others may write", async () => {
    const root = await mkdtemp(join(tmpdir(), "nrt-cache-"));
    try {
      const cache = join(root, "nrt");
      const dir = join(cache, "demo-models", "cayman");
      await ensurePrivateDir(dir, cache);
      expect((await stat(dir)).mode & 0o777).toBe(0o700);
      await chmod(join(cache, "demo-models"), 0o777);
      await expect(ensurePrivateDir(dir, cache)).rejects.toThrow(
        `Cannot use ${join(cache, "demo-models")} for the demo models: others may write to it (mode 777)`,
      );
      await chmod(join(cache, "demo-models"), 0o700);
      await rm(dir, { recursive: true });
      await mkdir(join(root, "elsewhere"));
      await symlink(join(root, "elsewhere"), dir);
      await expect(ensurePrivateDir(dir, cache)).rejects.toThrow("it is not a folder (a link or a file is there)");
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  test("startServer({ demo }) serves from the user's private cache folder", async () => {
    const root = await mkdtemp(join(tmpdir(), "nrt-xdg-"));
    const saved = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = root;
    try {
      const lines: string[] = [];
      const server = await startServer({ demo: true, port: 0, log: (l) => lines.push(l) });
      await server.close();
      expect(lines[0]).toContain(`from ${join(root, "nrt", "demo-models", "cayman")} ready`);
      expect((await stat(join(root, "nrt", "demo-models", "cayman"))).mode & 0o777).toBe(0o700);
      expect(lines.join("\n")).not.toContain(tmpdir() + "/nrt-demo-models");
    } finally {
      if (saved === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = saved;
      await rm(root, { recursive: true, force: true });
    }
  });
});
