/**
 * Follows docs/onnx.md's example literally in a scratch folder that depends on `@nrt/onnx` (linked from the
 * workspace, as an install would): file blocks are written, `sh` blocks run one line at a time (`npx nrt` → the
 * repository's nrt entry, `bun` → the repository's Bun), the output of the last command before the `text expect`
 * block must equal it, and the `no-run` block's server is started on that folder and sent its two `curl` requests.
 */
import { describe, expect, test } from "bun:test";
import { startServer } from "@nrt/cli";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../", import.meta.url));
const doc = readFileSync(join(repo, "docs/onnx.md"), "utf8");
const example = doc.slice(doc.indexOf("## An example"), doc.indexOf("## Supported ops"));
const blocks = [...example.matchAll(/```(\w+)([^\n]*)\n([\s\S]*?)```/g)].map((m) => ({
  lang: m[1],
  info: m[2].trim(),
  body: m[3],
}));

describe("docs/onnx.md", () => {
  test("the example compiles an ONNX model, runs the NEFF and serves the .onnx with the same outputs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-onnx-doc-"));
    mkdirSync(join(dir, "node_modules", "@nrt"), { recursive: true });
    symlinkSync(join(repo, "packages", "onnx"), join(dir, "node_modules", "@nrt", "onnx"), "dir");
    const nrt = join(repo, "packages/cli/bin/nrt.mjs"), bun = join(repo, "node_modules/.bin/bun");
    let last = "";
    let ran = 0, checked = 0;
    for (const b of blocks) {
      const file = /file=(\S+)/.exec(b.info)?.[1];
      if (file !== undefined) writeFileSync(join(dir, file), b.body);
      else if (b.lang === "sh" && !b.info.includes("no-run")) {
        for (const line of b.body.split("\n").map((l) => l.trim()).filter((l) => l !== "")) {
          const cmd = line.replace(/^npx nrt /, `node ${nrt} `).replace(/^bun /, `${bun} `);
          last = execFileSync("bash", ["-c", cmd], { cwd: dir, encoding: "utf8", timeout: 120_000 });
          ran++;
        }
      } else if (b.lang === "text" && b.info === "expect") {
        expect(last.trim()).toBe(b.body.trim());
        checked++;
      }
    }
    expect(ran).toBe(5);
    expect(checked).toBe(1);
    const printed = JSON.parse(blocks.find((b) => b.info === "expect")!.body).outputs.y;

    const serveBlock = blocks.find((b) => b.lang === "sh" && b.info.includes("no-run"))!;
    const models = /nrt serve --models (\S+)/.exec(serveBlock.body)![1];
    const [metaPath, inferPath] = [...serveBlock.body.matchAll(/localhost:\d+(\S+)/g)].map((m) => m[1]);
    const body = /-d '([^']+)'/.exec(serveBlock.body)![1];
    const xdg = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = join(dir, "cache");
    const server = await startServer({ models: join(dir, models), port: 0, log: () => {} }).finally(() => {
      if (xdg === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = xdg;
    });
    try {
      const meta = await (await fetch(`${server.url}${metaPath}`)).json();
      expect([meta.inputs, meta.outputs]).toEqual([[{ name: "x", datatype: "FP32", shape: [1, 4] }], [{
        name: "y",
        datatype: "FP32",
        shape: [1, 3],
      }]]);
      const res = await fetch(`${server.url}${inferPath}`, { method: "POST", body });
      expect(res.status).toBe(200);
      expect((await res.json()).outputs[0].data).toEqual(printed);
    } finally {
      await server.close();
    }
  }, 180_000);
});
