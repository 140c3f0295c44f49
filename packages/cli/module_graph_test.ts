/**
 * What importing `@nrt/cli` loads: the static import graph of its entry points, read with `deno info --json` (the
 * module graph Deno and JSR see; Bun resolves the same files). gRPC (grpc-js: 15–21 MiB resident and about 65 ms to
 * import, measurement log) and the ONNX compiler are loaded only by the code that uses them, so the composition
 * root, an idle device and the commands other than `serve` and `compile` do not pay for them. Ours.
 */
import { describe, expect, test } from "bun:test";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { DEFAULT_GRPC_PORT } from "@nrt/grpc-api";
import { SERVE_GRPC_PORT } from "./serve.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DENO = join(ROOT, "node_modules/.bin/deno");

interface Graph {
  readonly roots: readonly string[];
  readonly modules: ReadonlyArray<{
    readonly specifier: string;
    readonly dependencies?: ReadonlyArray<
      { readonly isDynamic?: boolean; readonly code?: { readonly specifier: string } }
    >;
  }>;
}

function moduleGraph(entry: string): Promise<Graph> {
  return new Promise((resolve, reject) => {
    execFile(DENO, ["info", "--json", join(ROOT, entry)], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`deno info ${entry}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout) as Graph);
    });
  });
}

/** The modules reached from the root, over static imports only or over dynamic ones too. */
function reached(g: Graph, dynamic: boolean): string[] {
  const bySpecifier = new Map(g.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>(g.roots);
  const todo = [...g.roots];
  while (todo.length > 0) {
    for (const d of bySpecifier.get(todo.pop()!)?.dependencies ?? []) {
      const to = d.code?.specifier;
      if (to === undefined || seen.has(to) || (d.isDynamic === true && !dynamic)) continue;
      seen.add(to);
      todo.push(to);
    }
  }
  return [...seen];
}

const GRPC_JS = "/node_modules/@grpc/grpc-js/";
const ONNX = "/packages/onnx/";

describe("the static import graph of @nrt/cli", () => {
  // Each entry and what it loads only on demand: gRPC for a server, the compiler for `nrt compile` (main.ts).
  for (
    const [entry, lazy] of [
      ["packages/cli/mod.ts", [GRPC_JS]],
      ["packages/cli/main.ts", [GRPC_JS, ONNX]],
    ] as const
  ) {
    test(`${entry} reaches ${lazy.join(" and ")} only through a dynamic import`, async () => {
      const g = await moduleGraph(entry);
      const all = reached(g, true), statically = reached(g, false);
      // In the graph (the code that needs them loads them), so the static walk could have found them.
      for (const l of lazy) expect(all.some((s) => s.includes(l))).toBe(true);
      expect(statically.filter((s) => s.includes(GRPC_JS) || s.includes(ONNX))).toEqual([]);
      // The REST server's modules stay static: `nrt serve` always starts it.
      expect(statically.some((s) => s.includes("/packages/http-api/"))).toBe(true);
    }, 30_000);
  }

  test("nrt serve's default gRPC port is the gRPC package's, 8001", () => {
    expect(SERVE_GRPC_PORT).toBe(8001);
    expect(DEFAULT_GRPC_PORT).toBe(8001);
  });
});
