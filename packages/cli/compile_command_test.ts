import { describe, expect, test } from "bun:test";
import { readNeff } from "@nrt/core";
import { linkSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "./main.ts";
import { COMPILE_USAGE, parseCompileArgs } from "./compile_command.ts";
import { mlpModel, randomInput, unsupportedOpModel } from "../onnx/_test_models.ts";
import { maxRelError, runOrt } from "../../tests/onnx_testing.ts";

/** Exit code, stdout and stderr of `nrt ...args`, run in-process. */
async function nrt(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [], err: string[] = [];
  const log = console.log, error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(" "));
  console.error = (...a: unknown[]) => void err.push(a.join(" "));
  try {
    return { code: await main(args), out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

describe("nrt compile", () => {
  test("parseCompileArgs() reads the model, -o, --target and repeated --input-shape", () => {
    expect(parseCompileArgs(["m.onnx", "-o", "m.neff"])).toEqual({
      model: "m.onnx",
      out: "m.neff",
      target: "cayman",
      inputShapes: {},
    });
    expect(
      parseCompileArgs([
        "--target",
        "sunda",
        "m.onnx",
        "--out",
        "o.neff",
        "--input-shape",
        "x=8,3,32,32",
        "--input-shape",
        "ids=8,128",
      ]),
    )
      .toEqual({ model: "m.onnx", out: "o.neff", target: "sunda", inputShapes: { x: [8, 3, 32, 32], ids: [8, 128] } });
    expect(parseCompileArgs(["m.onnx", "-o", "m.neff", "--input-shape", "scalar="]).inputShapes).toEqual({
      scalar: [],
    });
    const proto = parseCompileArgs([
      "m.onnx",
      "-o",
      "m.neff",
      "--input-shape",
      "__proto__=2",
      "--input-shape",
      "constructor=3",
    ]);
    expect(Object.entries(proto.inputShapes)).toEqual([["__proto__", [2]], ["constructor", [3]]]);
  });

  test("parseCompileArgs() refuses what it cannot read, as a usage error", () => {
    expect(() => parseCompileArgs(["m.onnx"])).toThrow("-o MODEL.neff is required");
    expect(() => parseCompileArgs(["a.onnx", "b.onnx", "-o", "m.neff"])).toThrow("give exactly one MODEL.onnx");
    expect(() => parseCompileArgs(["m.onnx", "-o", "m.neff", "--target", "trn9"])).toThrow(
      "--target trn9 is not one of sunda, cayman, mariana",
    );
    expect(() => parseCompileArgs(["m.onnx", "-o", "m.neff", "--input-shape", "x=8,a"])).toThrow(
      "--input-shape x=8,a is not NAME=DIMS",
    );
    expect(() => parseCompileArgs(["m.onnx", "-o", "m.neff", "--input-shape", "x=0,4"])).toThrow(
      "--input-shape x=0,4 is not NAME=DIMS",
    );
    expect(() => parseCompileArgs(["m.onnx", "-o", "m.neff", "--input-shape", "x=1", "--input-shape", "x=2"])).toThrow(
      'names "x" twice',
    );
    expect(() => parseCompileArgs(["m.onnx", "-o", "m.neff", "--verbose"])).toThrow("Unknown option '--verbose'");
  });

  test("a usage mistake prints its message and one usage line, and exits 2", async () => {
    for (const [args, why] of [[[], "give exactly one MODEL.onnx"], [["m.onnx"], "-o MODEL.neff is required"]]) {
      const r = await nrt(["compile", ...args]);
      expect(r.code).toBe(2);
      expect(r.err).toBe(`Cannot parse nrt compile arguments: ${why}\nUsage: ${COMPILE_USAGE}`);
    }
  });

  test(
    "nrt compile writes a NEFF that nrt run executes on the simulated device, matching onnxruntime-web",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-compile-"));
      const onnx = mlpModel();
      writeFileSync(join(dir, "mlp.onnx"), onnx);
      const r = await nrt([
        "compile",
        join(dir, "mlp.onnx"),
        "-o",
        join(dir, "mlp.neff"),
        "--input-shape",
        "x=3,16",
        "--target",
        "cayman",
      ]);
      expect(r.code).toBe(0);
      expect(r.out).toMatch(
        /mlp\.neff: \d+ bytes \(\d+ ms\): 4 kernel calls \(4 on 1 core\), 6 weights .*target cayman$/,
      );
      const file = readNeff(new Uint8Array(readFileSync(join(dir, "mlp.neff"))));
      expect([file.header.name, file.target]).toEqual(["mlp.neff", "cayman"]);
      const x = randomInput(5, [3, 16]);
      writeFileSync(join(dir, "x.json"), JSON.stringify(Array.from(x)));
      const run = await nrt(["run", join(dir, "mlp.neff"), "--input", `x=${join(dir, "x.json")}`, "--json"]);
      expect(run.code).toBe(0);
      const probs = Float32Array.from(JSON.parse(run.out).outputs.probs as number[]);
      expect(maxRelError(probs, (await runOrt(onnx, { x: { shape: [3, 16], data: x } })).probs)).toBeLessThan(1e-4);
    },
    60_000,
  );

  test(
    "nrt compile exits 1 naming the node, the op and what is supported; 1 for an unresolved dim; 2 for usage",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-compile-"));
      writeFileSync(join(dir, "bad.onnx"), unsupportedOpModel());
      const bad = await nrt(["compile", join(dir, "bad.onnx"), "-o", join(dir, "bad.neff")]);
      expect(bad.code).toBe(1);
      expect(bad.err).toMatch(
        /^nrt compile: Cannot compile node "transpose_by_einsum" \(Einsum\): .*supported.*\bMatMul\b/,
      );
      writeFileSync(join(dir, "mlp.onnx"), mlpModel());
      const dynamic = await nrt(["compile", join(dir, "mlp.onnx"), "-o", join(dir, "mlp.neff")]);
      expect(dynamic.code).toBe(1);
      expect(dynamic.err).toContain("--input-shape");
      expect((await nrt(["compile", join(dir, "mlp.onnx")])).code).toBe(2);
      expect((await nrt(["compile", "--help"])).out).toContain("Usage: nrt compile MODEL.onnx -o MODEL.neff");
    },
    60_000,
  );

  test("-o naming the model (by its path, a link or a hard link) is refused with exit 2, the model kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-compile-"));
    const model = join(dir, "mlp.onnx");
    const onnx = mlpModel(8);
    writeFileSync(model, onnx);
    symlinkSync(model, join(dir, "link.onnx"));
    linkSync(model, join(dir, "hard.onnx"));
    for (const out of [model, join(dir, "link.onnx"), join(dir, "hard.onnx"), `${dir}/./mlp.onnx`]) {
      const r = await nrt(["compile", model, "-o", out]);
      const named = out === model ? "" : ` (${model})`;
      expect([r.code, r.err]).toEqual([
        2,
        `nrt compile: -o ${out} is the model being compiled${named}: refusing to overwrite an input`,
      ]);
    }
    expect(new Uint8Array(readFileSync(model))).toEqual(onnx);
    // Another existing file is replaced without asking, as compilers do.
    writeFileSync(join(dir, "mlp.neff"), "old");
    expect((await nrt(["compile", model, "-o", join(dir, "mlp.neff")])).code).toBe(0);
    expect(readNeff(new Uint8Array(readFileSync(join(dir, "mlp.neff")))).header.name).toBe("mlp.neff");
  }, 60_000);
});
