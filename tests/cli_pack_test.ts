import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
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

  test("a manifest whose NEFF could never load is refused, naming the field and quoting the value", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-pack-"));
    const relu = join(process.cwd(), "kernels/wasm/relu.wasm");
    const base = () => ({
      name: "relu.neff",
      target: "cayman",
      inputs: [{ name: "x", dtype: "float32", shape: [4] }] as unknown[],
      outputs: [{ name: "y", dtype: "float32", shape: [4] }] as unknown[],
      libraries: [{ name: "relu", wasm: relu, total_cpus: 8, functions: [{ opcode: 7, name: "relu" }] }] as Array<
        Record<string, unknown>
      >,
      calls: [{ opcode: 7, inputs: ["x"], outputs: ["y"], ints: [] }] as Array<Record<string, unknown>>,
    });
    // The base manifest packs, and the NEFF runs; a 64-bit scalar may be written as a decimal string, as the loader
    // reads it.
    const good = join(dir, "good.json");
    writeFileSync(
      good,
      JSON.stringify({ ...base(), calls: [{ ...base().calls[0], ints: [-1, "9223372036854775807"] }] }),
    );
    expect(await runPack([good, "-o", join(dir, "good.neff")], () => {}, () => {})).toBe(0);
    writeFileSync(join(dir, "x.json"), "[1, -2, 3, -4]");
    const ran = await capture(["run", join(dir, "good.neff"), "--input", `x=${join(dir, "x.json")}`]);
    expect([ran.code, ran.out]).toEqual([0, "y: 1 0 3 0"]);
    writeFileSync(join(dir, "junk.wasm"), "not webassembly");
    const cases: Array<[(m: ReturnType<typeof base>) => void, string]> = [
      [
        (m) => (m.calls[0].inputs = ["zz"]),
        'calls[0].inputs[0] is "zz", which names no input or output of the manifest',
      ],
      [
        (m) => (m.calls[0].outputs = ["x"]),
        'calls[0].outputs[0] is "x", an input (inputs[0]); a call writes outputs only',
      ],
      [(m) => (m.calls[0].opcode = 99), "calls[0].opcode is 99, which no library's functions bind"],
      [(m) => (m.calls[0].ints = [1e300]), "calls[0].ints is [1e+300]; expected a list of integers within ±(2^53−1)"],
      [(m) => (m.calls[0].ints = ["9223372036854775808"]), 'calls[0].ints is ["9223372036854775808"]; expected'],
      [
        (m) => (m.target = "bogus"),
        '"target" is "bogus"; expected one of sunda, trn1, inf2, cayman, trn2, mariana',
      ],
      [(m) => (m.libraries[0].total_cpus = "8"), 'libraries[0].total_cpus is "8"; expected the number 1 or 8'],
      [(m) => (m.libraries[0].total_cpus = 4), "libraries[0].total_cpus is 4; expected the number 1 or 8"],
      [(m) => m.libraries.push({ ...m.libraries[0] }), 'libraries[1].name "relu" names a library twice'],
      [
        (m) => m.libraries.push({ ...m.libraries[0], name: "ext_isa" }),
        'libraries[1].name "ext_isa" is the base library\'s, which every NEFF carries',
      ],
      [
        (m) => m.libraries.push({ ...m.libraries[0], name: "relu2" }),
        'libraries[1].functions[0].opcode 7 is already bound by library "relu"',
      ],
      [
        (m) => (m.libraries[0].functions = [{ opcode: 0xff00, name: "relu" }]),
        "libraries[0].functions[0].opcode is 65280; expected an integer from 0 to 65279 (0xff00 up is reserved)",
      ],
      [(m) => (m.libraries[0].wasm = 7), "libraries[0].wasm is 7; expected a path"],
      [
        (m) => m.inputs.push({ name: "y", dtype: "float32", shape: [4] }),
        'outputs[0].name "y" is already the name of inputs[1]',
      ],
      [
        (m) => (m.inputs[0] = { name: "x", dtype: "complex128", shape: [4] }),
        'inputs[0].dtype is "complex128"; expected one of bool, int8, uint8,',
      ],
      [
        (m) => (m.outputs[0] = { name: "y", dtype: "float32", shape: [4, 0] }),
        "outputs[0] shape is [4,0] (a tensor needs a name, a dtype and a shape of positive integers)",
      ],
      [
        (m) => (m.libraries[0].wasm = join(dir, "junk.wasm")),
        `libraries[0] ("relu"): ${join(dir, "junk.wasm")} is not a valid WebAssembly module`,
      ],
      [
        (m) => (m.libraries[0].functions = [{ opcode: 7, name: "sigmoid" }]),
        `libraries[0] ("relu").functions[0].name "sigmoid" is not a function ${relu} exports`,
      ],
    ];
    for (const [i, [edit, why]] of cases.entries()) {
      const m = base();
      edit(m);
      const file = join(dir, `bad${i}.json`);
      writeFileSync(file, JSON.stringify(m));
      const r = await capture(["pack", file, "-o", join(dir, `bad${i}.neff`)]);
      expect([r.code, r.err.slice(0, `nrt pack: Cannot pack manifest: ${why}`.length)]).toEqual([
        1,
        `nrt pack: Cannot pack manifest: ${why}`,
      ]);
    }
  }, 60_000);

  test("-o naming the manifest or a library file is refused with exit 2, before anything is written", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-pack-"));
    const relu = join(dir, "relu.wasm");
    writeFileSync(relu, readFileSync("kernels/wasm/relu.wasm"));
    const manifest = join(dir, "m.json");
    const text = JSON.stringify({
      name: "relu.neff",
      inputs: [{ name: "x", dtype: "float32", shape: [4] }],
      outputs: [{ name: "y", dtype: "float32", shape: [4] }],
      libraries: [{ name: "relu", wasm: "relu.wasm", functions: [{ opcode: 7, name: "relu" }] }],
      calls: [{ opcode: 7, inputs: ["x"], outputs: ["y"] }],
    });
    writeFileSync(manifest, text);
    symlinkSync(manifest, join(dir, "link.json"));
    const cases: Array<[string, string]> = [
      [manifest, `nrt pack: -o ${manifest} is the manifest: refusing to overwrite an input`],
      [join(dir, "link.json"), `nrt pack: -o ${join(dir, "link.json")} is the manifest (${manifest}): refusing`],
      [relu, `nrt pack: -o ${relu} is the wasm of library "relu": refusing to overwrite an input`],
    ];
    for (const [out, why] of cases) {
      const r = await capture(["pack", manifest, "-o", out]);
      expect([r.code, r.err.split("\n").length, r.err.slice(0, why.length)]).toEqual([2, 1, why]);
    }
    expect(readFileSync(manifest, "utf8")).toBe(text);
    expect(readFileSync(relu)).toEqual(readFileSync("kernels/wasm/relu.wasm"));
    // Another existing file is replaced, as compilers replace their output.
    writeFileSync(join(dir, "old.neff"), "old");
    expect((await capture(["pack", manifest, "-o", join(dir, "old.neff")])).code).toBe(0);
    expect(readNeff(new Uint8Array(readFileSync(join(dir, "old.neff")))).header.name).toBe("relu.neff");
  }, 60_000);
});
