import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { descriptorDims, OpHarness } from "./harness.ts";
import type { KernelCall, OpValue } from "./op_node.ts";

/** The reference kernels of kernels/wasm (cpu_map, faults), plus a module whose one function returns at once. */
async function readLibrary(name: string): Promise<Uint8Array> {
  if (name === "no_cleanup") {
    // (module (type (func)) (func (type 0)) (export "f" (func 0)))
    return new Uint8Array([
      0x00,
      0x61,
      0x73,
      0x6d,
      0x01,
      0x00,
      0x00,
      0x00,
      0x01,
      0x04,
      0x01,
      0x60,
      0x00,
      0x00,
      0x03,
      0x02,
      0x01,
      0x00,
      0x07,
      0x05,
      0x01,
      0x01,
      0x66,
      0x00,
      0x00,
      0x0a,
      0x04,
      0x01,
      0x02,
      0x00,
      0x0b,
    ]);
  }
  if (name === "cpu_map" || name === "faults") {
    return new Uint8Array(await readFile(new URL(`../wasm/${name}.wasm`, import.meta.url)));
  }
  return new Uint8Array(await readFile(new URL(`./wasm/${name}.wasm`, import.meta.url)));
}

const harness = await OpHarness.create({ readLibrary });

const call = (
  library: string,
  fn: string,
  inputs: string[],
  outputs: string[],
  ints: bigint[] = [],
  totalCpus: 1 | 8 = 8,
): KernelCall => ({ library, fn, totalCpus, inputs, outputs, ints });

describe("OpHarness", () => {
  test("descriptorDims() folds the leading dimensions of a rank > 4 shape", () => {
    expect(descriptorDims([])).toEqual([]);
    expect(descriptorDims([2, 3, 4, 5])).toEqual([2, 3, 4, 5]);
    expect(descriptorDims([2, 3, 4, 5, 6, 7])).toEqual([24, 5, 6, 7]);
  });

  test("run() gives each of the 8 cores its rank and the descriptors of the call", async () => {
    const x: OpValue = { name: "x", dtype: "float32", shape: [2, 5, 8] };
    const id: OpValue = { name: "id", dtype: "int32", shape: [80] };
    const out = await harness.run([call("cpu_map", "cpu_map", ["x"], ["id"])], [x, id], { x: new Float32Array(80) });
    const ids = new Int32Array(out.get("id")!.buffer);
    expect([...ids]).toEqual(Array.from({ length: 80 }, (_, i) => Math.floor(i / 10)));
    expect(harness.timings[0].coreMs).toHaveLength(8);
    const one = await harness.run([call("cpu_map", "cpu_map", ["x"], ["id"], [], 1)], [x, id], {
      x: new Float32Array(80),
    });
    expect(new Int32Array(one.get("id")!.buffer).every((v) => v === 0)).toBe(true);
  });

  test("run() reports a trap, an import fault and a missing customop_cleanup with the core", async () => {
    await expect(harness.run([call("faults", "trap", [], [])], [])).rejects.toThrow("Cannot run faults.trap on core 0");
    await expect(harness.run([call("faults", "bad_dram", [], [])], [])).rejects.toThrow("outside the DRAM window");
    await expect(harness.run([call("no_cleanup", "f", [], [])], [])).rejects.toThrow(
      "returned without customop_cleanup",
    );
    await expect(harness.run([call("faults", "nope", [], [])], [])).rejects.toThrow("exports no such function");
  });

  test("run() catches a kernel writing past its output, and a call too big for the SBUF", async () => {
    const x: OpValue = { name: "x", dtype: "uint8", shape: [256] };
    const y: OpValue = { name: "y", dtype: "uint8", shape: [100] };
    await expect(harness.run([call("shape", "copy", ["x"], ["y"], [104n])], [x, y], { x: new Uint8Array(256) }))
      .rejects.toThrow('wrote past the end of "y"');
    const small = await OpHarness.create({ sbufBytes: 65536, readLibrary });
    const big: OpValue = { name: "big", dtype: "float32", shape: [20000] };
    await expect(small.run([call("shape", "copy", ["big"], ["y"], [0n])], [big, y])).rejects.toThrow(
      "more than the 65536-byte SBUF",
    );
  });

  test("run() fills outputs with 0xFF before a call, so an element a kernel skips shows", async () => {
    const x: OpValue = { name: "x", dtype: "uint8", shape: [100] };
    const y: OpValue = { name: "y", dtype: "uint8", shape: [100] };
    const out = await harness.run([call("shape", "copy", ["x"], ["y"], [64n])], [x, y], { x: new Uint8Array(100) });
    expect([...out.get("y")!.subarray(60, 70)]).toEqual([0, 0, 0, 0, 255, 255, 255, 255, 255, 255]);
  });

  test("run() threads scratch values between calls and rejects undeclared values", async () => {
    const x: OpValue = { name: "x", dtype: "uint8", shape: [10] };
    const t: OpValue = { name: "t", dtype: "uint8", shape: [10] };
    const y: OpValue = { name: "y", dtype: "uint8", shape: [10] };
    const calls = [
      { ...call("shape", "copy", ["x"], ["t"], [10n]), scratch: [t] },
      call("shape", "copy", ["t"], ["y"], [10n]),
    ];
    const out = await harness.run(calls, [x, y], { x: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) });
    expect([...out.get("y")!]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    await expect(harness.run([call("shape", "copy", ["x"], ["z"], [10n])], [x])).rejects.toThrow(
      'value "z" is not declared',
    );
  });
});
