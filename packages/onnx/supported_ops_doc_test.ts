import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { TABLE_FILES, withCurrentTable } from "./supported_ops_doc.ts";

describe("supportedOpsTable()", () => {
  test("supportedOpsTable() README.md and docs/onnx.md list exactly the op library's SUPPORTED_OPS", async () => {
    for (const file of TABLE_FILES) {
      const text = await readFile(file, "utf8");
      const current = withCurrentTable(text) === text;
      expect({ file: file.pathname, current, fix: "bun packages/onnx/supported_ops_doc.ts" }).toEqual({
        file: file.pathname,
        current: true,
        fix: "bun packages/onnx/supported_ops_doc.ts",
      });
    }
  });
});
