import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runNrt as capture } from "./_cli.ts";
import { oneOpNeff } from "./_kernels.ts";


describe("nrt run", () => {
  test("nrt run FILE --input NAME=FILE.json --json executes a custom-op NEFF and prints its outputs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "add.neff");
    writeFileSync(neff, oneOpNeff("vector_add", "vector_add", [{ name: "a", dtype: "float32", shape: [2, 2] }, { name: "b", dtype: "float32", shape: [4] }], [{ name: "sum", dtype: "float32", shape: [4] }]));
    writeFileSync(join(dir, "a.json"), JSON.stringify([[1, 2], [3, 4]]));
    writeFileSync(join(dir, "b.json"), JSON.stringify([10, 20, 30, 40.5]));
    const r = await capture(["run", neff, "--input", `a=${join(dir, "a.json")}`, "--input", `b=${join(dir, "b.json")}`, "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ model: "vector_add.neff", outputs: { sum: [11, 22, 33, 44.5] } });
  }, 60_000);

  test("nrt run reports a missing input on stderr with exit code 1, and no file with exit code 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    writeFileSync(neff, oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [4] }], [{ name: "y", dtype: "float32", shape: [4] }]));
    const r = await capture(["run", neff]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('Input "x" is missing');
    expect((await capture(["run"])).code).toBe(2);
  }, 60_000);
});
