import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { buildNeff, readNeff } from "@nrt/core";
import { type InspectIo, inspectNeff, runInspect } from "./inspect.ts";

const FIXTURES = new URL("../../../shared/fixtures/neff/", import.meta.url);
const SMALL = new URL("matmul_small.neff", FIXTURES).pathname;

function io(files: Record<string, Uint8Array> = {}): InspectIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    readFile: async (p) => {
      if (p in files) return files[p];
      return new Uint8Array(await readFile(p));
    },
    stdout: (s) => void out.push(s),
    stderr: (s) => void err.push(s),
  };
}

describe("runInspect()", () => {
  test("runInspect() --json reports every acceptance fact of matmul_small.neff", async () => {
    const sink = io();
    expect(await runInspect([SMALL, "--json"], sink)).toBe(0);
    expect(sink.out.length).toBe(1);
    const r = JSON.parse(sink.out[0]);
    expect(r.header).toEqual({
      pkg_version: 2,
      header_size: 1024,
      data_size: 61440,
      neff_version_major: 2,
      neff_version_minor: 0,
      num_tpb: 1,
      name: "file.neff",
      uuid: "00a04c535fd94f07bffdd5eacdefc852",
      requested_tpb_count: 1,
      feature_bits: 2137088,
      lnc_size: 2,
    });
    expect(r.hash).toEqual({
      algorithm: "md5",
      stored: "efe9b3bc98163077b94c8bcdacf51f47",
      computed: "efe9b3bc98163077b94c8bcdacf51f47",
      valid: true,
    });
    expect(r.target).toBe("cayman");
    expect(r.graphs).toEqual(["sg00", "sg01"]);
    expect(r.members).toBe(72);
    expect(r.inputs).toEqual([
      { name: "x", dtype: "float16", shape: [128, 256], size: 65536 },
      { name: "y", dtype: "float16", shape: [256, 128], size: 65536 },
    ]);
    expect(r.outputs).toEqual([{ name: "output0", dtype: "float16", shape: [128, 128], size: 32768 }]);
    expect("ucode_libs" in r).toBe(false);
  });

  test("runInspect() prints a table naming the NEFF and its target", async () => {
    const sink = io();
    expect(await runInspect([SMALL], sink)).toBe(0);
    const text = sink.out.join("");
    expect(text).toMatch(/^name\s+file\.neff$/m);
    expect(text).toMatch(/^target\s+cayman$/m);
    expect(text).toMatch(/^input\s+x\s+float16\s+\[128, 256\]\s+65536$/m);
    expect(text).toContain("(valid)");
  });

  test("runInspect() exits 2 on missing or extra arguments", async () => {
    const sink = io();
    expect(await runInspect([], sink)).toBe(2);
    expect(await runInspect(["--json"], sink)).toBe(2);
    expect(await runInspect(["a.neff", "b.neff"], sink)).toBe(2);
    expect(sink.err.join("")).toContain("Usage: nrt inspect FILE [--json]");
    expect(sink.out).toEqual([]);
  });

  test("runInspect() exits 1 for a file that is not a NEFF, and for a missing file", async () => {
    const sink = io({ "notes.txt": new TextEncoder().encode("not a neff") });
    expect(await runInspect(["notes.txt"], sink)).toBe(1);
    expect(sink.err.join("")).toContain("shorter than the 1024-byte header (NRT_INVALID)");
    expect(await runInspect(["/nonexistent/x.neff"], sink)).toBe(1);
    expect(sink.out).toEqual([]);
  });
});

describe("inspectNeff()", () => {
  test("inspectNeff() reports ucode_libs from sgNN/Pool.json when present", async () => {
    const enc = new TextEncoder();
    const real = readNeff(new Uint8Array(await readFile(SMALL)));
    const members = new Map(real.members);
    const lib = {
      name: "relu",
      file: "relu.elf",
      total_cpus: 8,
      cpu_id: 0,
      functions: [{ opcode: 0xf0, name: "relu_f16" }],
    };
    members.set(
      "sg00/Pool.json",
      enc.encode(JSON.stringify({ dma: [], instr: "Pool.bin", name: "Pool.json", ucode_libs: [lib] })),
    );
    members.set("sg00/relu.elf", new Uint8Array(16));
    const r = inspectNeff(buildNeff({ name: "custom.neff", members, featureBits: 1n << 60n }));
    expect(r.ucode_libs).toEqual([{ graph: "sg00", ...lib }]);
    expect(r.header.feature_bits).toBe("1152921504606846976");
    expect(r.members).toBe(73);
  });
});
