/**
 * Private test helpers for the NEFF suites: the real fixtures and a tiny, well-formed member set.
 *
 * @module
 */
import { readFile } from "node:fs/promises";

/** The folder of the real NEFFs, `../shared/fixtures/neff/` from the repository root. */
export const FIXTURE_DIR: URL = new URL("../../../../shared/fixtures/neff/", import.meta.url);

/** Reads a real NEFF fixture. */
export async function readFixture(name: "matmul_small.neff" | "matmul_large.neff"): Promise<Uint8Array> {
  return new Uint8Array(await readFile(new URL(name, FIXTURE_DIR)));
}

const enc = new TextEncoder();

/** Encodes a value as a JSON member. */
export function json(v: unknown): Uint8Array {
  return enc.encode(JSON.stringify(v));
}

/** 64-byte instruction slots with `word_len` 0x10 and the given opcodes. */
export function slots(...opcodes: number[]): Uint8Array {
  const b = new Uint8Array(opcodes.length * 64);
  opcodes.forEach((op, i) => {
    b[i * 64] = op;
    b[i * 64 + 1] = 0x10;
  });
  return b;
}

/** A minimal one-subgraph NEFF member set: input `a` [4,8] float32, output `b` [4,8] float32. */
export function tinyMembers(): Map<string, Uint8Array> {
  return new Map([
    [
      "kelf-0.json",
      json({ graphs: [{ name: "sg00", definition: "sg00/def.json" }], version: "0.5", target: "cayman" }),
    ],
    [
      "neff.json",
      json({
        nodes: [
          { op: "null", name: "a", inputs: [], output_names: ["a"] },
          { op: "tvm_op", name: "k", inputs: [[0, 0, 0]], output_names: ["b"] },
        ],
        arg_nodes: [0],
        heads: [[1, 0, 0]],
        node_row_ptr: [0, 1, 2],
        attrs: { shape: ["list_shape", [[4, 8], [4, 8]]], dltype: ["list_str", ["float32", "float32"]] },
      }),
    ],
    [
      "sg00/def.json",
      json({
        pe: "PE.json",
        pe_instr: "PE.bin",
        sp_instr: "SP.bin",
        dma_queue: { qSP: { owner: "sp", type: "dynamic", num_queues: 2, semaphore_set: [8, 9] } },
        var: {
          SB: { type: "state-buffer", var_id: 0 },
          a: { type: "input", var_id: 1, size: 128 },
          b: { type: "output", var_id: 2, size: 128 },
        },
        version: "0.6",
      }),
    ],
    ["sg00/PE.json", json({ dma: [], instr: "PE.bin", name: "PE.json" })],
    ["sg00/PE.bin", slots(0xb1, 0xcc, 0xa0)],
    ["sg00/SP.bin", slots(0x01)],
    [
      "sg00/tensor_map.json",
      json({
        a: { dtype: "float32", kind: "input", tf_shape: [4, 8] },
        b: { dtype: "float32", kind: "output", tf_shape: [4, 8] },
      }),
    ],
  ]);
}
