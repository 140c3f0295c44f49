import { describe, expect, test } from "bun:test";
import { readNeff } from "../neff/neff_file.ts";
import { buildCustomOpNeff } from "./custom_op_neff.ts";

describe("buildCustomOpNeff()", () => {
  test("buildCustomOpNeff() writes tensors named like Object.prototype keys, and readNeff() reads them back", () => {
    for (const name of ["__proto__", "constructor", "toString"]) {
      const neff = buildCustomOpNeff({
        name: "proto.neff",
        target: "cayman",
        inputs: [{ name: "x", dtype: "float32", shape: [4] }],
        outputs: [{ name, dtype: "float32", shape: [4] }],
        buffers: [{ name: "hasOwnProperty", size: 16 }],
        libraries: [{
          name: "lib",
          wasm: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]),
          totalCpus: 8,
          functions: [{ opcode: 1, name: "f" }],
        }],
        calls: [{ opcode: 1, inputs: ["x"], outputs: [name] }],
      });
      const file = readNeff(neff);
      expect(file.inputs.map((t) => t.name)).toEqual(["x"]);
      expect(file.outputs.map((t) => t.name)).toEqual([name]);
    }
  });
});
