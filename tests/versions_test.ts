import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";

// One version for the whole workspace: the root package.json. Every package's deno.json (JSR) and package.json
// (npm/Bun) must carry it, and every dependency on a sibling package must name it.
const root = new URL("../", import.meta.url);
const read = (p: string) => JSON.parse(readFileSync(new URL(p, root), "utf8"));
const version: string = read("package.json").version;
/** Every workspace package's folder: packages/<name>, and the op library in kernels/ops. */
const dirs: ReadonlyArray<readonly [string, string]> = [
  ...readdirSync(new URL("packages/", root)).map((p) => [`packages/${p}`, p] as const),
  ["kernels/ops", "ops"],
];

describe("workspace versions", () => {
  test("every package's deno.json and package.json carry the root version and the same name", () => {
    for (const [dir, p] of dirs) {
      const deno = read(`${dir}/deno.json`), npm = read(`${dir}/package.json`);
      expect({ p, deno: deno.version, npm: npm.version }).toEqual({ p, deno: version, npm: version });
      expect(deno.name).toBe(`@nrt/${p}`);
      expect(npm.name).toBe(deno.name);
      expect(deno.license).toBe("Apache-2.0");
    }
  });

  test("dependencies on sibling packages name the workspace version", () => {
    for (const [dir, p] of dirs) {
      const deps: Record<string, string> = read(`${dir}/package.json`).dependencies ?? {};
      for (const [name, v] of Object.entries(deps)) {
        if (name.startsWith("@nrt/")) expect({ p, name, v }).toEqual({ p, name, v: version });
      }
    }
  });

  test("npm dependencies pinned in deno.json import maps match package.json", () => {
    for (const [dir, p] of dirs) {
      const imports: Record<string, string> = read(`${dir}/deno.json`).imports ?? {};
      const deps: Record<string, string> = read(`${dir}/package.json`).dependencies ?? {};
      for (const spec of Object.values(imports)) {
        const m = /^npm:(@?[^@]+)@([^/]+)/.exec(spec);
        if (m === null) continue;
        expect({ p, name: m[1], v: deps[m[1]] }).toEqual({ p, name: m[1], v: m[2] });
      }
    }
  });
});
