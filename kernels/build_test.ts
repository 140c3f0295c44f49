import { describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kernelNames, WASM_DIR, writeKernels } from "./build.mjs";

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

/** The documented kernel functions of each library. */
const DOCUMENTED_EXPORTS: Record<string, string[]> = {
  cpu_map: ["cpu_map"],
  ext_isa: ["ext_copy", "ext_fill"],
  faults: ["trap", "oob", "spin", "bad_dram", "printf"],
  matmul: ["matmul"],
  noop: ["noop"],
  reduce_sum: ["sum_all"],
  relu: ["relu"],
  softmax: ["softmax_rows"],
  stock_pool: ["ucode_api_level", "ucode_arch", "noop"],
  vector_add: ["vector_add"],
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

describe("kernels/build.mjs", () => {
  test("writeKernels() rebuilds every committed kernel byte for byte", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-kernels-"));
    try {
      const built = await writeKernels(dir);
      expect([...built.keys()].sort()).toEqual(Object.keys(DOCUMENTED_EXPORTS).sort());
      for (const name of await kernelNames()) {
        const rebuilt = new Uint8Array(await readFile(join(dir, `${name}.wasm`)));
        const committed = new Uint8Array(await readFile(join(WASM_DIR, `${name}.wasm`)));
        expect({ name, equal: Buffer.compare(rebuilt, committed) === 0 }).toEqual({ name, equal: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("every kernel imports only the kernel ABI and exports its documented functions", async () => {
    for (const name of await kernelNames()) {
      const module = new WebAssembly.Module(await readFile(join(WASM_DIR, `${name}.wasm`)));
      for (const imp of WebAssembly.Module.imports(module)) {
        expect(`${name}: ${imp.module}.${imp.name} ${imp.kind}`).toBe(
          `${name}: env.${imp.name} ${ABI_IMPORTS[imp.name] ?? "(not in the ABI)"}`,
        );
      }
      const exported = WebAssembly.Module.exports(module).filter((e) => e.kind === "function").map((e) => e.name);
      for (const fn of DOCUMENTED_EXPORTS[name]) expect(exported).toContain(fn);
    }
  });

  test("every kernel imports a shared env.memory of 0 to 65536 pages and carries no data, start or custom section", async () => {
    for (const name of await kernelNames()) {
      const { sections, memoryLimits } = inspect(new Uint8Array(await readFile(join(WASM_DIR, `${name}.wasm`))));
      // flags 0x03 = has maximum + shared
      expect({ name, memoryLimits }).toEqual({ name, memoryLimits: [0x03, 0, 65536] });
      // 0 custom (names), 8 start, 11 data, 12 data count
      expect({ name, forbidden: sections.filter((id) => [0, 8, 11, 12].includes(id)) }).toEqual({
        name,
        forbidden: [],
      });
      // No memory or global definitions either: a kernel owns no state.
      expect({ name, owned: sections.filter((id) => id === 5 || id === 6) }).toEqual({ name, owned: [] });
    }
  });
});
