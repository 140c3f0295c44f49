/**
 * `removeAdminToken`: the shutdown of `nrt serve --admin` removes the default token file it wrote, and only while
 * that file is still the one holding its token.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newAdminToken, removeAdminToken, writeAdminToken } from "./admin_token.ts";

let home: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "nrt-admin-token-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe("removeAdminToken", () => {
  test("removes the file holding the token; a file already gone is no error", async () => {
    const file = join(home, "nrt", "admin-token-1234");
    const token = newAdminToken();
    await writeAdminToken(file, token);
    expect(await removeAdminToken(file, token)).toBe(true);
    await expect(readFile(file)).rejects.toThrow();
    expect(await removeAdminToken(file, token)).toBe(false);
  });

  test("leaves a file holding another token, and a link, alone", async () => {
    const file = join(home, "other");
    await writeFile(file, "someone-else-0123456789\n", { mode: 0o600 });
    expect(await removeAdminToken(file, newAdminToken())).toBe(false);
    expect(await readFile(file, "utf8")).toBe("someone-else-0123456789\n");
    const link = join(home, "link");
    await symlink(file, link);
    expect(await removeAdminToken(link, "someone-else-0123456789")).toBe(false);
    expect(await readFile(link, "utf8")).toBe("someone-else-0123456789\n");
  });
});
