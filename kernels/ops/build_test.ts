import { describe, expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { libraryNames, WASM_DIR, writeLibraries } from "./build.mjs";

/** The kernel ABI: every import a kernel may have, all from module "env" (docs/kernel-abi.md). */
const ABI_IMPORTS: Record<string, "function" | "memory"> = {
  memory: "memory",
  get_cpu_id: "function",
  get_cpu_count: "function",
  customop_total_cpus: "function",
  customop_next_tensor: "function",
  customop_return_tensor: "function",
  customop_next_int: "function",
  customop_cleanup: "function",
  dram_addr_to_soc_addr: "function",
  q7_write: "function",
};

/** The documented kernel functions of each library (README.md). */
const DOCUMENTED_EXPORTS: Record<string, string[]> = {
  activation: ["unary_f32"],
  conv: ["conv2d", "pool2d"],
  elementwise: [
    "binary_f32",
    "binary_i32",
    "binary_i64",
    "cast",
    "compare_f32",
    "compare_i32",
    "compare_i64",
    "logic",
    "where",
  ],
  linalg: ["gemm"],
  norm: ["layer_norm_f32", "batch_norm_f32", "instance_norm_f32"],
  reduce: ["reduce_f32", "reduce_finish_f32", "softmax_f32", "arg_f32"],
  shape: ["copy", "strided_copy", "concat", "split", "gather", "pad"],
};

function leb(bytes: Uint8Array, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[pos++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) return [value, pos];
  }
}

/** Section ids in order, and the env.memory import's limits as [flags, min, max]. */
function inspect(wasm: Uint8Array): { sections: number[]; memoryLimits?: number[] } {
  const sections: number[] = [];
  let memoryLimits: number[] | undefined;
  let pos = 8;
  while (pos < wasm.length) {
    const id = wasm[pos];
    const [size, start] = leb(wasm, pos + 1);
    sections.push(id);
    if (id === 2) {
      let p = start;
      let count: number;
      [count, p] = leb(wasm, p);
      for (let i = 0; i < count; i++) {
        let len: number;
        [len, p] = leb(wasm, p);
        const module = new TextDecoder().decode(wasm.subarray(p, p + len));
        p += len;
        [len, p] = leb(wasm, p);
        const name = new TextDecoder().decode(wasm.subarray(p, p + len));
        p += len;
        const kind = wasm[p++];
        if (kind === 0) [, p] = leb(wasm, p);
        else if (kind === 2) {
          const flags = wasm[p++];
          let min: number, max = -1;
          [min, p] = leb(wasm, p);
          if (flags & 1) [max, p] = leb(wasm, p);
          if (module === "env" && name === "memory") memoryLimits = [flags, min, max];
        } else throw new Error(`unexpected import kind ${kind}`);
      }
    }
    pos = start + size;
  }
  return { sections, memoryLimits };
}

describe("kernels/ops/build.mjs", () => {
  test("writeLibraries() rebuilds every committed op library byte for byte", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-ops-"));
    try {
      const built = await writeLibraries(dir);
      expect([...built.keys()].sort()).toEqual(Object.keys(DOCUMENTED_EXPORTS).sort());
      for (const name of await libraryNames()) {
        const rebuilt = new Uint8Array(await readFile(join(dir, `${name}.wasm`)));
        const committed = new Uint8Array(await readFile(join(WASM_DIR, `${name}.wasm`)));
        expect({ name, equal: Buffer.compare(rebuilt, committed) === 0 }).toEqual({ name, equal: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  test("every op library imports only the kernel ABI and exports its documented functions", async () => {
    for (const name of await libraryNames()) {
      const module = new WebAssembly.Module(await readFile(join(WASM_DIR, `${name}.wasm`)));
      for (const imp of WebAssembly.Module.imports(module)) {
        expect(`${name}: ${imp.module}.${imp.name} ${imp.kind}`).toBe(
          `${name}: env.${imp.name} ${ABI_IMPORTS[imp.name] ?? "(not in the ABI)"}`,
        );
      }
      const exported = WebAssembly.Module.exports(module).filter((e) => e.kind === "function").map((e) => e.name);
      expect({ name, exported: exported.sort() }).toEqual({ name, exported: [...DOCUMENTED_EXPORTS[name]].sort() });
    }
  });

  test("every op library imports a shared 0..65536-page env.memory and has no data or state", async () => {
    for (const name of await libraryNames()) {
      const { sections, memoryLimits } = inspect(new Uint8Array(await readFile(join(WASM_DIR, `${name}.wasm`))));
      // flags 0x03 = has maximum + shared
      expect({ name, memoryLimits }).toEqual({ name, memoryLimits: [0x03, 0, 65536] });
      // 0 custom (names), 5 memory, 6 global, 8 start, 11 data, 12 data count: a kernel owns no state.
      expect({ name, forbidden: sections.filter((id) => [0, 5, 6, 8, 11, 12].includes(id)) }).toEqual({
        name,
        forbidden: [],
      });
    }
  });
});
