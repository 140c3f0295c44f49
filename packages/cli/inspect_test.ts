import { describe, expect, test } from "bun:test";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildCustomOpNeff, buildNeff, readNeff } from "@nrt/core";
import {
  formatInspect,
  type InspectIo,
  inspectNeff,
  neffFileCap,
  printable,
  readFileCapped,
  runInspect,
  terminalJson,
} from "./inspect.ts";

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

/** The C0, DEL and C1 control characters of `s`. */
const controls = (s: string) => [...s].filter((c) => c < " " || (c >= "\u007f" && c <= "\u009f"));

/** A file of `size` bytes that holds none (sparse): a reader that reads it all pays for every byte. */
function sparseFile(path: string, size: number): string {
  writeFileSync(path, new Uint8Array(0));
  truncateSync(path, size);
  return path;
}

describe("reading a file named on the command line", () => {
  test("runInspect() asks for the file with the cap nrt serve reads a NEFF with", async () => {
    const asked: number[] = [];
    const sink = io();
    sink.readFile = (p, maxBytes) => {
      asked.push(maxBytes);
      return readFile(p).then((b) => new Uint8Array(b));
    };
    expect(await runInspect([SMALL], sink)).toBe(0);
    expect(asked).toEqual([neffFileCap()]);
    expect(neffFileCap({})).toBe(21 * 1024 * 1024); // NRT_NEFF_MAX_BYTES's default 20 MiB + 1 MiB
    expect(neffFileCap({ NRT_NEFF_MAX_BYTES: String(64 * 1024 * 1024) })).toBe(65 * 1024 * 1024);
  });

  test("readFileCapped() refuses a regular file over the cap by its size, and reads one at the cap", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-inspect-"));
    const big = sparseFile(join(dir, "big.neff"), 2 ** 33); // 8 GiB, sparse: read whole, it would fill memory
    await expect(readFileCapped(big, 1000)).rejects.toThrow(
      "it is 8589934592 bytes, over the 1000-byte cap for a NEFF file (NRT_NEFF_MAX_BYTES raises it)",
    );
    const exact = sparseFile(join(dir, "exact.neff"), 1000);
    expect((await readFileCapped(exact, 1000)).byteLength).toBe(1000);
    await expect(readFileCapped(exact, 999, "the test")).rejects.toThrow(
      "it is 1000 bytes, over the 999-byte cap for the test",
    );
  });

  test("readFileCapped() refuses a device or a folder without reading it", async () => {
    await expect(readFileCapped("/dev/zero", 1000)).rejects.toThrow("it is a character device, not a file");
    await expect(readFileCapped(tmpdir(), 1000)).rejects.toThrow("it is a directory, not a file");
    await expect(readFileCapped("/nonexistent/x.neff", 1000)).rejects.toThrow("ENOENT");
  });

  test("readFileCapped() reads a pipe to its end, and stops one that runs past the cap at cap + 1 bytes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-inspect-"));
    const fifo = join(dir, "fifo");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const children: ChildProcess[] = [];
    const writer = (script: string) => {
      const child = spawn("sh", ["-c", script], { stdio: "ignore" });
      children.push(child);
      return new Promise<void>((resolve) => child.on("exit", () => resolve()));
    };
    try {
      writeFileSync(join(dir, "small"), "hello");
      let done = writer(`cat '${join(dir, "small")}' > '${fifo}'`);
      expect(new TextDecoder().decode(await readFileCapped(fifo, 1000))).toBe("hello");
      await done;
      // An endless writer: the read stops past the cap and closes the pipe, which ends the writer (SIGPIPE).
      done = writer(`cat /dev/zero > '${fifo}'`);
      await expect(readFileCapped(fifo, 3 << 20)).rejects.toThrow(`it is more than ${3 << 20} bytes, over the`);
      await done;
    } finally {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
    }
  });
});

describe("names from the file are escaped", () => {
  const evil = () =>
    buildCustomOpNeff({
      name: "evil\u001b[2J\u001b[31mRED\u0007.neff",
      target: "cayman\u009b",
      inputs: [{ name: "x\r", dtype: "float32", shape: [4] }],
      outputs: [{ name: "y\u001b[31m\u007f", dtype: "float32", shape: [4] }],
      libraries: [{
        name: "relu",
        wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]),
        totalCpus: 8,
        functions: [{ opcode: 1, name: "relu" }],
      }],
      calls: [{ opcode: 1, inputs: ["x\r"], outputs: ["y\u001b[31m\u007f"] }],
    });

  test("printable() writes C0, DEL and C1 control characters as \\xHH and leaves the rest", () => {
    expect(printable("a\u0000\u001b[2J\u0007\t\n\u007f\u0080\u009b\u00a0é€")).toBe(
      "a\\x00\\x1b[2J\\x07\\x09\\x0a\\x7f\\x80\\x9b\u00a0é€",
    );
  });

  test("formatInspect() prints no control character of the file, and --json none a terminal acts on", async () => {
    const text = formatInspect(inspectNeff(evil()));
    expect(controls(text.replaceAll("\n", ""))).toEqual([]); // only the table's own newlines
    expect(text).toMatch(/^name\s+evil\\x1b\[2J\\x1b\[31mRED\\x07\.neff$/m);
    expect(text).toMatch(/^target\s+cayman\\x9b$/m);
    expect(text).toMatch(/^input\s+x\\x0d\s+float32/m);
    expect(text).toMatch(/^output\s+y\\x1b\[31m\\x7f\s+float32/m);
    const sink = io({ "evil.neff": evil() });
    expect(await runInspect(["evil.neff", "--json"], sink)).toBe(0);
    expect(controls(sink.out[0].trimEnd())).toEqual([]);
    expect(JSON.parse(sink.out[0]).outputs[0].name).toBe("y\u001b[31m\u007f");
    expect(terminalJson({ a: "\u009b\u007f" })).toBe('{"a":"\\u009b\\u007f"}');
  });
});
