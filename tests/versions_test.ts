import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";

// One version for the whole workspace: the root package.json. Every package's deno.json (JSR) and package.json
// (npm/Bun) must carry it, and every dependency on a sibling package must name it.
const root = new URL("../", import.meta.url);
const read = (p: string) => JSON.parse(readFileSync(new URL(p, root), "utf8"));
const version: string = read("package.json").version;
const packages = readdirSync(new URL("packages/", root));

describe("workspace versions", () => {
  test("every package's deno.json and package.json carry the root version and the same name", () => {
    for (const p of packages) {
      const deno = read(`packages/${p}/deno.json`), npm = read(`packages/${p}/package.json`);
      expect({ p, deno: deno.version, npm: npm.version }).toEqual({ p, deno: version, npm: version });
      expect(deno.name).toBe(`@nrt/${p}`);
      expect(npm.name).toBe(deno.name);
      expect(deno.license).toBe("Apache-2.0");
    }
  });

  test("dependencies on sibling packages name the workspace version", () => {
    for (const p of packages) {
      const deps: Record<string, string> = read(`packages/${p}/package.json`).dependencies ?? {};
      for (const [name, v] of Object.entries(deps)) if (name.startsWith("@nrt/")) expect({ p, name, v }).toEqual({ p, name, v: version });
    }
  });

  test("npm dependencies pinned in deno.json import maps match package.json", () => {
    for (const p of packages) {
      const imports: Record<string, string> = read(`packages/${p}/deno.json`).imports ?? {};
      const deps: Record<string, string> = read(`packages/${p}/package.json`).dependencies ?? {};
      for (const spec of Object.values(imports)) {
        const m = /^npm:(@?[^@]+)@([^/]+)/.exec(spec);
        if (m === null) continue;
        expect({ p, name: m[1], v: deps[m[1]] }).toEqual({ p, name: m[1], v: m[2] });
      }
    }
  });
});
