import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readNeff } from "@nrt/core";
import { KERNEL_FLAGS } from "../packages/cli/kernel_compiler.ts";
import { UsageError } from "../packages/cli/command_args.ts";
import { packManifest, parseManifest, runPack } from "../packages/cli/pack.ts";
import { runNrt as capture } from "./_cli.ts";
// @ts-ignore: a plain JS build script without types
import { KERNEL_FLAGS as BUILD_FLAGS } from "../kernels/build.mjs";

describe("nrt pack", () => {
  test("the packer compiles kernels with exactly the flags of kernels/build.mjs", () => {
    expect([...KERNEL_FLAGS]).toEqual([...BUILD_FLAGS]);
  });

  test("nrt pack compiles the template's AssemblyScript, and nrt run executes the NEFF on 8 cores", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-pack-"));
    const out = join(dir, "scale.neff");
    expect(await runPack(["examples/kernel-template/manifest.json", "-o", out], () => {}, () => {})).toBe(0);
    const neff = readNeff(new Uint8Array(readFileSync(out)));
    expect(neff.target).toBe("cayman");
    expect(neff.inputs.map((t) => t.name)).toEqual(["x"]);
    const r = await capture(["run", out, "--input", "x=examples/kernel-template/x.json", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).outputs.y).toEqual([3, 6, 9, 12, 15, 18, 21, 24]);
    const inspect = await capture(["inspect", out, "--json"]);
    // The base ext-ISA library is library 0, the packed kernel library 1 (runtime-synthesis §3.1: num_libs > 1).
    const libs = JSON.parse(inspect.out).ucode_libs;
    expect(libs.map((l: { name: string }) => l.name)).toEqual(["ext_isa", "scale"]);
    expect(libs[1]).toMatchObject({ name: "scale", total_cpus: 8 });
  }, 60_000);

  test("a manifest with YAML, a prebuilt wasm and an unknown field shape is read or refused clearly", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-pack-"));
    const yaml = join(dir, "m.yaml");
    writeFileSync(
      yaml,
      [
        "name: relu.neff",
        "inputs: [{ name: x, dtype: float32, shape: [4] }]",
        "outputs: [{ name: y, dtype: float32, shape: [4] }]",
        `libraries: [{ name: relu, wasm: ${
          join(process.cwd(), "kernels/wasm/relu.wasm")
        }, functions: [{ opcode: 7, name: relu }] }]`,
        "calls: [{ opcode: 7, inputs: [x], outputs: [y] }]",
      ].join("\n"),
    );
    expect(readNeff(await packManifest(yaml)).outputs[0].name).toBe("y");
    expect(() =>
      parseManifest(
        '{"name": "x", "inputs": [], "outputs": [], "libraries": [{"name": "a", "functions": [{"opcode": 1, "name": "f"}]}], "calls": []}',
        "m.json",
      )
    )
      .toThrow('library "a" needs exactly one of "wasm" and "source"');
    expect(() => parseManifest("{", "m.json")).toThrow("is not valid JSON");
    await expect(runPack([], () => {}, () => {})).rejects.toThrow(
      new UsageError("Cannot parse nrt pack arguments: MANIFEST is missing"),
    );
  }, 60_000);

  test("a kernel that does not compile is refused with the compiler's diagnostics", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-pack-"));
    writeFileSync(join(dir, "bad.ts"), 'export function f(): void { let x: i32 = "no"; }\n');
    writeFileSync(
      join(dir, "m.json"),
      JSON.stringify({
        name: "bad",
        inputs: [],
        outputs: [],
        calls: [],
        libraries: [{ name: "bad", source: "bad.ts", functions: [{ opcode: 1, name: "f" }] }],
      }),
    );
    await expect(packManifest(join(dir, "m.json"))).rejects.toThrow(/Cannot compile kernel .*bad\.ts/);
  }, 60_000);
});
