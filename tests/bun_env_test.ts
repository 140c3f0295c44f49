/**
 * The environment the `nrt` command starts Bun with (packages/cli/bin/bun_env.mjs, ours): the npm bin shim
 * (`npx nrt`, `npm start`) and the container's `nrt` script both give Bun `MIMALLOC_PURGE_DELAY=-1` unless the user
 * set a value, which is kept. A stand-in Bun (`NRT_BUN`) prints what it was given.
 */
import { describe, expect, test } from "bun:test";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bunEnv } from "../packages/cli/bin/bun_env.mjs";
import { runProgram } from "./_run.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const SHIM = join(ROOT, "packages/cli/bin/nrt.mjs");
const CONTAINER = join(ROOT, "deploy/container/nrt");

/** A stand-in for Bun that prints the variable and its arguments, and exits 7. */
async function fakeBun(dir: string): Promise<string> {
  const file = join(dir, "bun");
  await writeFile(file, '#!/bin/sh\necho "purge=[${MIMALLOC_PURGE_DELAY-unset}] args=$*"\nexit 7\n');
  await chmod(file, 0o755);
  return file;
}

describe("bunEnv", () => {
  test("adds MIMALLOC_PURGE_DELAY=-1 where the environment has none, and keeps a value the user set", () => {
    const env = { PATH: "/bin", MIMALLOC_PURGE_DELAY: undefined };
    expect(bunEnv(env)).toEqual({ PATH: "/bin", MIMALLOC_PURGE_DELAY: "-1" });
    expect(env.MIMALLOC_PURGE_DELAY).toBeUndefined(); // a new object: the argument is left as it was
    expect(bunEnv({ MIMALLOC_PURGE_DELAY: "" }).MIMALLOC_PURGE_DELAY).toBe("-1");
    expect(bunEnv({ MIMALLOC_PURGE_DELAY: "250" }).MIMALLOC_PURGE_DELAY).toBe("250");
  });
});

describe("the commands that start Bun", () => {
  for (
    const [name, file, args] of [
      ["the npm bin shim (npx nrt)", "node", [SHIM]],
      ["the container's nrt script", "sh", [CONTAINER]],
    ] as const
  ) {
    test(`${name} gives Bun the variable, keeps the user's, and passes the arguments and the exit code`, async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-bun-env-"));
      try {
        const bun = await fakeBun(dir);
        const env = { NRT_BUN: bun, NRT_HOME: ROOT.replace(/\/$/, "") };
        const plain = await runProgram(file, [...args, "serve", "--demo"], { ...env, MIMALLOC_PURGE_DELAY: undefined });
        expect(plain.code).toBe(7);
        expect(plain.out).toBe(`purge=[-1] args=${join(ROOT, "packages/cli/main.ts")} serve --demo\n`);
        const own = await runProgram(file, [...args, "device-sim"], { ...env, MIMALLOC_PURGE_DELAY: "250" });
        expect(own.out).toMatch(/^purge=\[250\] args=\S+ device-sim\n$/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }

  test("npm start goes through the shim", async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { scripts: { start: string } };
    expect(pkg.scripts.start).toBe("node packages/cli/bin/nrt.mjs serve --demo");
  });
});
