import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { withCurrentTable } from "./supported_ops_doc.ts";

describe("supportedOpsTable()", () => {
  test("supportedOpsTable() README.md lists exactly the op library's SUPPORTED_OPS", async () => {
    const readme = await readFile(new URL("./README.md", import.meta.url), "utf8");
    const current = withCurrentTable(readme) === readme;
    expect({ current, fix: "bun packages/onnx/supported_ops_doc.ts" }).toEqual({
      current: true,
      fix: "bun packages/onnx/supported_ops_doc.ts",
    });
  });
});
