import { describe, expect, test } from "bun:test";
import { mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { buildCustomOpNeff } from "@nrt/core";
import { DTYPE_BYTES } from "@nrt/core/neff";
import { datatypeInfo, jsonDataText } from "@nrt/http-api";
import { runNrt as capture } from "./_cli.ts";
import { kernel, oneOpNeff } from "./_kernels.ts";
import { neffFileCap } from "../packages/cli/inspect.ts";
import {
  checkPrintable,
  formatOutputs,
  inputBytes,
  MAX_PRINTED_OUTPUT_BYTES,
  outputValues,
} from "../packages/cli/run_model.ts";

/** A file of `size` bytes that holds none (sparse): a reader that reads it all pays for every byte. */
function sparseFile(path: string, size: number): string {
  writeFileSync(path, new Uint8Array(0));
  truncateSync(path, size);
  return path;
}

/** Float32 values whose bytes are `words` (each a positive, finite float32, so relu passes it unchanged). */
const wordsAsFloat32 = (words: number[]) => Array.from(new Float32Array(new Uint32Array(words).buffer));

describe("nrt run", () => {
  test("nrt run FILE --input NAME=FILE.json --json executes a custom-op NEFF and prints its outputs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "add.neff");
    writeFileSync(
      neff,
      oneOpNeff("vector_add", "vector_add", [{ name: "a", dtype: "float32", shape: [2, 2] }, {
        name: "b",
        dtype: "float32",
        shape: [4],
      }], [{ name: "sum", dtype: "float32", shape: [4] }]),
    );
    writeFileSync(join(dir, "a.json"), JSON.stringify([[1, 2], [3, 4]]));
    writeFileSync(join(dir, "b.json"), JSON.stringify([10, 20, 30, 40.5]));
    const r = await capture([
      "run",
      neff,
      "--input",
      `a=${join(dir, "a.json")}`,
      "--input",
      `b=${join(dir, "b.json")}`,
      "--json",
    ]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ model: "vector_add.neff", outputs: { sum: [11, 22, 33, 44.5] } });
  }, 60_000);

  test("nrt run reports a missing input on stderr with exit code 1, and no file with exit code 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    writeFileSync(
      neff,
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [4] }], [{
        name: "y",
        dtype: "float32",
        shape: [4],
      }]),
    );
    const r = await capture(["run", neff]);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`nrt run: Cannot run ${neff}: input "x" is missing; pass --input x=FILE.json`);
    expect((await capture(["run"])).code).toBe(2);
  }, 60_000);

  test(
    "nrt run refuses an input of the wrong size, a value that is not a number, an unknown input and bad JSON",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
      const neff = join(dir, "relu.neff");
      writeFileSync(
        neff,
        oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [2, 2] }], [{
          name: "y",
          dtype: "float32",
          shape: [4],
        }]),
      );
      const file = (name: string, text: string) => {
        writeFileSync(join(dir, name), text);
        return join(dir, name);
      };
      const cases: Array<[string[], string]> = [
        [
          ["--input", `x=${file("short.json", "[[1, 2], [3]]")}`],
          `input "x" needs 4 numbers; ${join(dir, "short.json")} holds 3`,
        ],
        [
          ["--input", `x=${file("text.json", '[1, 2, "3", 4]')}`],
          `input "x" needs numbers; ${join(dir, "text.json")} holds "3" at index 2`,
        ],
        [
          ["--input", `x=${file("ok.json", "[1, 2, 3, 4]")}`, "--input", `z=${join(dir, "ok.json")}`],
          'the model has no input "z"; its inputs are x',
        ],
      ];
      for (const [args, why] of cases) {
        const r = await capture(["run", neff, ...args]);
        expect(r.code).toBe(1);
        expect(r.err).toBe(`nrt run: Cannot run ${neff}: ${why}`);
      }
      const bad = await capture(["run", neff, "--input", `x=${file("bad.json", "[1, 2,")}`]);
      expect(bad.code).toBe(1);
      expect(
        bad.err.startsWith(`nrt run: Cannot run ${neff}: input "x" cannot be read from ${join(dir, "bad.json")}: `),
      ).toBe(true);
    },
    60_000,
  );

  test("nrt run refuses an integer input value its dtype cannot hold", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    writeFileSync(
      neff,
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "int8", shape: [2] }], [{ name: "y", dtype: "int8", shape: [2] }]),
    );
    writeFileSync(join(dir, "x.json"), "[1, 300]");
    const r = await capture(["run", neff, "--input", `x=${join(dir, "x.json")}`]);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`nrt run: Cannot run ${neff}: input "x" is int8; ${join(dir, "x.json")} holds 300 at index 1`);
  }, 60_000);

  test("nrt run refuses a float input value its dtype turns into Infinity, naming the element", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    writeFileSync(
      neff,
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [3] }], [{
        name: "y",
        dtype: "float32",
        shape: [3],
      }]),
    );
    for (
      const [text, shown] of [["[1, 1e39, 2]", "1e+39"], ["[1, -1e39, 2]", "-1e+39"], ["[1, 1e999, 2]", "Infinity"]]
    ) {
      writeFileSync(join(dir, "x.json"), text);
      const r = await capture(["run", neff, "--input", `x=${join(dir, "x.json")}`]);
      expect(r.code).toBe(1);
      expect(r.err).toBe(
        `nrt run: Cannot run ${neff}: input "x" is float32; ${join(dir, "x.json")} holds ${shown} at index 1`,
      );
    }
    // The largest float32 and a value that rounds to it are accepted, as is one that rounds down to 0.
    writeFileSync(join(dir, "x.json"), "[3.4028234663852886e38, 3.4028235e38, 1e-50]");
    const ok = await capture(["run", neff, "--input", `x=${join(dir, "x.json")}`, "--json"]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out).outputs.y).toEqual([3.4028234663852886e38, 3.4028234663852886e38, 0]);
  }, 60_000);

  test(
    "nrt run and nrt devices refuse a bad NRT_SIM_Q7_WORKERS or NRT_SIM_LOCAL_OP_BYTES with exit code 1",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
      const neff = join(dir, "relu.neff");
      writeFileSync(
        neff,
        oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [2] }], [{
          name: "y",
          dtype: "float32",
          shape: [2],
        }]),
      );
      writeFileSync(join(dir, "x.json"), "[1, -2]");
      const cases: Array<[string, string, string]> = [
        ["NRT_SIM_Q7_WORKERS", "9", 'NRT_SIM_Q7_WORKERS is "9", expected an integer from 1 to 8'],
        ["NRT_SIM_Q7_WORKERS", "0", 'NRT_SIM_Q7_WORKERS is "0", expected an integer from 1 to 8'],
        ["NRT_SIM_LOCAL_OP_BYTES", "x", 'NRT_SIM_LOCAL_OP_BYTES is "x", expected an integer ≥ 0'],
      ];
      for (const [name, value, why] of cases) {
        for (const args of [["run", neff, "--input", `x=${join(dir, "x.json")}`], ["devices"]]) {
          const before = process.env[name];
          process.env[name] = value;
          let r;
          try {
            r = await capture(args);
          } finally {
            if (before === undefined) delete process.env[name];
            else process.env[name] = before;
          }
          expect(r.code).toBe(1);
          expect(r.err).toBe(`nrt ${args[0]}: Cannot start the simulated device: ${why}`);
        }
      }
    },
    60_000,
  );
  test("nrt run refuses an output too large to print, and counts a huge input's numbers before allocating it", async () => {
    // A custom-op NEFF this large does not fit SBUF; a NEFF whose call reads a view of its output does, so the
    // bound is checked on the model's outputs as loaded.
    expect(MAX_PRINTED_OUTPUT_BYTES).toBe(64 * 1024 * 1024);
    expect(() => checkPrintable("m.neff", [{ name: "y", size: 64 * 1024 * 1024 }])).not.toThrow();
    expect(() => checkPrintable("m.neff", [{ name: "a", size: 4 }, { name: "y", size: 2 ** 31 }])).toThrow(
      'Cannot run m.neff: output "y" is 2147483648 bytes; nrt run prints outputs of at most 67108864 bytes',
    );
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    writeFileSync(join(dir, "x.json"), JSON.stringify([1, 2, 3, 4]));
    // 4 TiB of float32: compared with the file's 4 numbers first, so no 4 TiB array is asked for.
    await expect(inputBytes("m.neff", { name: "x", dtype: "float32", size: 2 ** 42 }, join(dir, "x.json"))).rejects
      .toThrow(`Cannot run m.neff: input "x" needs 1099511627776 numbers; ${join(dir, "x.json")} holds 4`);
  });
});

describe("nrt run: outputs of every dtype", () => {
  test("a float16 output prints its values (NaN and Infinity included), not its 2 bytes per element", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    // relu copies positive float32 words unchanged: their bytes are read back as float16 pairs, low half first.
    writeFileSync(
      neff,
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [2] }], [{
        name: "y",
        dtype: "float16",
        shape: [4],
      }]),
    );
    writeFileSync(join(dir, "x.json"), JSON.stringify(wordsAsFloat32([0x7c00_7e00, 0x3c00_c000])));
    const args = ["run", neff, "--input", `x=${join(dir, "x.json")}`];
    const text = await capture(args);
    expect([text.code, text.out]).toEqual([0, "y: NaN Infinity -2 1"]);
    const json = await capture([...args, "--json"]);
    expect([json.code, json.out]).toEqual([0, '{"model":"relu.neff","outputs":{"y":[NaN,Infinity,-2,1]}}']);
  }, 60_000);

  test("an int64 output prints its values exactly, past 2^53", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "relu.neff");
    writeFileSync(
      neff,
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [4] }], [{
        name: "y",
        dtype: "int64",
        shape: [2],
      }]),
    );
    // 2^53 + 1 = 0x0020_0000_0000_0001 and 1234567890123456789 = 0x1122_10f4_7de9_8115, low word first.
    writeFileSync(join(dir, "x.json"), JSON.stringify(wordsAsFloat32([1, 0x0020_0000, 0x7de9_8115, 0x1122_10f4])));
    const args = ["run", neff, "--input", `x=${join(dir, "x.json")}`];
    const text = await capture(args);
    expect([text.code, text.out]).toEqual([0, "y: 9007199254740993 1234567890123456789"]);
    const json = await capture([...args, "--json"]);
    expect(json.out).toBe('{"model":"relu.neff","outputs":{"y":[9007199254740993,1234567890123456789]}}');
  }, 60_000);

  test("outputValues() decodes every dtype a NEFF signature may name", () => {
    const u8 = (...b: number[]) => new Uint8Array(b);
    const cases: Record<string, [Uint8Array, unknown[]]> = {
      bool: [u8(0, 1, 2), [false, true, true]],
      int8: [u8(0xff, 0x7f), [-1, 127]],
      uint8: [u8(0xff, 0x7f), [255, 127]],
      int16: [u8(0xfe, 0xff), [-2]],
      uint16: [u8(0xfe, 0xff), [65534]],
      int32: [u8(0xff, 0xff, 0xff, 0xff), [-1]],
      uint32: [u8(0xff, 0xff, 0xff, 0xff), [4294967295]],
      int64: [u8(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), [-1n]],
      uint64: [u8(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), [18446744073709551615n]],
      float16: [u8(0x00, 0x3c, 0x00, 0xfc, 0x01, 0x00, 0xff, 0x7b), [1, -Infinity, 2 ** -24, 65504]],
      bfloat16: [u8(0x80, 0x3f, 0x80, 0x7f, 0xc0, 0x7f), [1, Infinity, NaN]],
      float32: [new Uint8Array(new Float32Array([1.5, -Infinity]).buffer), [1.5, -Infinity]],
      float64: [new Uint8Array(new Float64Array([0.1, NaN]).buffer), [0.1, NaN]],
      // IEEE-style: the top exponent is ±Infinity and NaN; 0x77 is the largest finite (240), 0x01 the least (2^-9).
      float8_e4m3: [u8(0x38, 0x77, 0x78, 0xf8, 0x79, 0x01), [1, 240, Infinity, -Infinity, NaN, 2 ** -9]],
      // No infinity: 0x7e is 448, only S.1111.111 is NaN.
      float8_e4m3fn: [u8(0x38, 0x7e, 0x78, 0x7f, 0xff), [1, 448, 256, NaN, NaN]],
      float8_e5m2: [u8(0x3c, 0x7b, 0x7c, 0xfc, 0x7d, 0x01), [1, 57344, Infinity, -Infinity, NaN, 2 ** -16]],
    };
    // Every dtype of the signature reader's table has a case: a new one cannot fall back to printing bytes.
    expect(Object.keys(cases).sort()).toEqual(Object.keys(DTYPE_BYTES).sort());
    for (const [dtype, [bytes, want]] of Object.entries(cases)) {
      expect([dtype, Array.from(outputValues(dtype, bytes))]).toEqual([dtype, want]);
    }
    // Bytes at an odd offset of a larger buffer, as a tensor read may hand them over.
    const inner = new Uint8Array([9, 0x00, 0x3c, 0x00, 0x40]).subarray(1);
    expect(Array.from(outputValues("float16", inner))).toEqual([1, 2]);
  });

  test("--json writes a non-finite float as REST does (NaN, Infinity, -Infinity tokens), never null", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "add.neff");
    const f32 = (name: string) => ({ name, dtype: "float32", shape: [3] });
    writeFileSync(neff, oneOpNeff("vector_add", "vector_add", [f32("a"), f32("b")], [f32("sum")]));
    writeFileSync(join(dir, "a.json"), "[3e38, -3e38, 1]");
    writeFileSync(join(dir, "b.json"), "[3e38, -3e38, 2]");
    const args = ["run", neff, "--input", `a=${join(dir, "a.json")}`, "--input", `b=${join(dir, "b.json")}`];
    const json = await capture([...args, "--json"]);
    expect(json.code).toBe(0);
    const rest = jsonDataText(datatypeInfo("FP32")!, new Uint8Array(new Float32Array([Infinity, -Infinity, 3]).buffer));
    expect(rest).toBe("[Infinity,-Infinity,3]");
    expect(json.out).toBe(`{"model":"vector_add.neff","outputs":{"sum":${rest}}}`);
    expect((await capture(args)).out).toBe("sum: Infinity -Infinity 3");
    // NaN too, and a finite value as JSON.stringify writes it.
    expect(formatOutputs("m", [{ name: "y", values: [NaN, -0, 1e21, 5e-324] }], true)).toBe(
      '{"model":"m","outputs":{"y":[NaN,0,1e+21,5e-324]}}',
    );
  }, 60_000);
});

describe("nrt run: what the files hold", () => {
  test("control characters of the NEFF's names are escaped in text and in --json", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const neff = join(dir, "evil.neff");
    const y = "y\u001b[31m\u0007\u009b\u007f";
    writeFileSync(
      neff,
      buildCustomOpNeff({
        name: "evil\u001b[2J.neff",
        target: "cayman",
        inputs: [{ name: "x", dtype: "float32", shape: [2] }],
        outputs: [{ name: y, dtype: "float32", shape: [2] }],
        libraries: [{ name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
        calls: [{ opcode: 1, inputs: ["x"], outputs: [y] }],
      }),
    );
    writeFileSync(join(dir, "x.json"), "[1, -2]");
    const args = ["run", neff, "--input", `x=${join(dir, "x.json")}`];
    const text = await capture(args);
    expect([text.code, text.out]).toEqual([0, "y\\x1b[31m\\x07\\x9b\\x7f: 1 0"]);
    const json = await capture([...args, "--json"]);
    expect(json.code).toBe(0);
    expect([...json.out].filter((c) => c < " " || (c >= "\u007f" && c <= "\u009f"))).toEqual([]);
    expect(JSON.parse(json.out)).toEqual({ model: "evil\u001b[2J.neff", outputs: { [y]: [1, 0] } });
    // A missing input is named escaped on stderr too.
    const missing = await capture(["run", neff]);
    expect(missing.err).toBe(`nrt run: Cannot run ${neff}: input "x" is missing; pass --input x=FILE.json`);
    const unknown = await capture([...args, "--input", `z\u001b=${join(dir, "x.json")}`]);
    expect(unknown.err).toBe(`nrt run: Cannot run ${neff}: the model has no input "z\\x1b"; its inputs are x`);
  }, 60_000);

  test(
    "an input nested 100 000 arrays deep is read (row-major), and a short one is refused naming the file",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
      const neff = join(dir, "relu.neff");
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [4096] });
      writeFileSync(neff, oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
      const deep = join(dir, "deep.json");
      writeFileSync(deep, "[".repeat(100_000) + "1" + "]".repeat(100_000));
      const r = await capture(["run", neff, "--input", `x=${deep}`]);
      expect([r.code, r.err]).toEqual([
        1,
        `nrt run: Cannot run ${neff}: input "x" needs 4096 numbers; ${deep} holds 1`,
      ]);
      // A deep object where a number belongs is named without being walked.
      const obj = join(dir, "obj.json");
      writeFileSync(obj, `[${'{"a":'.repeat(10_000)}1${"}".repeat(10_000)}]`);
      const o = await capture(["run", neff, "--input", `x=${obj}`]);
      expect(o.err).toBe(`nrt run: Cannot run ${neff}: input "x" needs 4096 numbers; ${obj} holds 1`);
      const small = join(dir, "small.neff");
      writeFileSync(small, oneOpNeff("relu", "relu", [{ ...f32("x"), shape: [1] }], [{ ...f32("y"), shape: [1] }]));
      const s = await capture(["run", small, "--input", `x=${obj}`]);
      expect(s.err).toBe(`nrt run: Cannot run ${small}: input "x" needs numbers; ${obj} holds an object at index 0`);
    },
    60_000,
  );

  test("a NEFF over the cap is refused by its size, unread; a device or a folder by its kind", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
    const cap = neffFileCap();
    expect(cap).toBe(21 * 1024 * 1024); // NRT_NEFF_MAX_BYTES's default 20 MiB + 1 MiB, as nrt serve reads a NEFF
    const big = sparseFile(join(dir, "big.neff"), cap + 1);
    const r = await capture(["run", big]);
    expect([r.code, r.err]).toEqual([
      1,
      `nrt run: Cannot run ${big}: it is ${cap + 1} bytes, over the ${cap}-byte cap for a NEFF file ` +
      "(NRT_NEFF_MAX_BYTES raises it)",
    ]);
    const zero = await capture(["run", "/dev/zero"]);
    expect([zero.code, zero.err]).toEqual([1, "nrt run: Cannot run /dev/zero: it is a character device, not a file"]);
    expect((await capture(["run", dir])).err).toBe(`nrt run: Cannot run ${dir}: it is a directory, not a file`);
  });

  test(
    "an input file is read up to REST's bound for its element count: /dev/zero and an oversized file are refused",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-run-"));
      const neff = join(dir, "relu.neff");
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [4] });
      writeFileSync(neff, oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
      const zero = await capture(["run", neff, "--input", "x=/dev/zero"]);
      expect(zero.err).toBe(
        `nrt run: Cannot run ${neff}: input "x" cannot be read from /dev/zero: it is a character device, not a file`,
      );
      const cap = 4 * 48 + 64 * 1024; // JSON_BYTES_PER_ELEMENT per element + JSON_OVERHEAD_BYTES (@nrt/http-api)
      const big = sparseFile(join(dir, "big.json"), cap + 1);
      const r = await capture(["run", neff, "--input", `x=${big}`]);
      expect(r.err).toBe(
        `nrt run: Cannot run ${neff}: input "x" cannot be read from ${big}: it is ${
          cap + 1
        } bytes, over the ${cap}-byte cap for the JSON of 4 elements`,
      );
    },
    60_000,
  );
});
