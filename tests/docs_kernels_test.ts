import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "@nrt/cli";

// Follows docs/kernels.md literally in a scratch folder: file blocks are written, `sh` blocks run (one command
// per line, `npx nrt` → the repository's nrt entry), and the output of the last command before a `text expect`
// block must equal that block.
const repo = fileURLToPath(new URL("../", import.meta.url));
const doc = readFileSync(join(repo, "docs/kernels.md"), "utf8");
const blocks = [...doc.matchAll(/```(\w+)([^\n]*)\n([\s\S]*?)```/g)].map((m) => ({
  lang: m[1],
  info: m[2].trim(),
  body: m[3],
}));

describe("docs/kernels.md", () => {
  test("a new user following docs/kernels.md literally gets a working custom op, served over REST", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-doc-"));
    const nrt = join(repo, "packages/cli/bin/nrt.mjs");
    let last = "";
    let ran = 0, checked = 0;
    for (const b of blocks) {
      const file = /file=(\S+)/.exec(b.info)?.[1];
      if (file !== undefined) writeFileSync(join(dir, file), b.body);
      else if (b.lang === "sh" && !b.info.includes("no-run")) {
        for (const line of b.body.split("\n").map((l) => l.trim()).filter((l) => l !== "")) {
          const cmd = line.replace(/^npx nrt /, `node ${nrt} `);
          last = execFileSync("bash", ["-c", cmd], { cwd: dir, encoding: "utf8", timeout: 120_000 });
          ran++;
        }
      } else if (b.lang === "text" && b.info === "expect") {
        expect(last.trim()).toBe(b.body.trim());
        checked++;
      }
    }
    expect(ran).toBeGreaterThanOrEqual(4);
    expect(checked).toBe(1);

    // Section 6: serve the folder and send the page's curl request (its URL path and -d body) to the server.
    const serveBlock = blocks.find((b) => b.lang === "sh" && b.info.includes("no-run"))!;
    const models = /nrt serve --models (\S+)/.exec(serveBlock.body)![1];
    const path = /localhost:\d+(\S+)/.exec(serveBlock.body)![1];
    const body = /-d '([^']+)'/.exec(serveBlock.body)![1];
    const server = await startServer({ models: join(dir, models), port: 0, log: () => {} });
    try {
      const res = await fetch(`${server.url}${path}`, { method: "POST", body });
      expect(res.status).toBe(200);
      const json = await res.json();
      expect(json.outputs[0].data).toEqual(Array.from({ length: 16 }, (_, i) => 2 * i + 1));
    } finally {
      await server.close();
    }
  }, 180_000);
});
