import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { runNrt as capture } from "./_cli.ts";
import { oneOpNeff } from "./_kernels.ts";
import { checkPrintable, inputBytes, MAX_PRINTED_OUTPUT_BYTES } from "../packages/cli/run_model.ts";

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
