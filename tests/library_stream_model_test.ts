/**
 * The seed's library and stream model (issue 16 item 6):
 * - every GPSIMD NEFF bundles the base ext-ISA library, so `ucode_model_has_custom_ops == (num_libs > 1)`
 *   (runtime-synthesis §3.1), and a one-library set is the shared EXT-ISA one (§4.4);
 * - `sequencer_setup_instr` assembles `[PREAMBLE][MODEL_SWITCH][MAIN][POSTAMBLE][FUNCTION*]` with the ucode-library load
 *   sequence in the Pool PREAMBLE (§2.2);
 * - `dma_is_custom_op_dma_v2` walks the queue-bundle table on both sides of the portal (§3.1).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import {
  buildCustomOpNeff,
  extIsaLibrary,
  ExtIsaOpcode,
  MemoryLogger,
  NrtError,
  readNeff,
  Runtime,
  TensorSet,
} from "@nrt/core";
import type { ArchPack } from "@nrt/core/hal";
import { decodeInstruction, decodeOpcodeTable, opcodeTableLibraries } from "@nrt/core/isa";
import { type DeviceMemory, TracingPortal } from "@nrt/core/portal";
import { defaultQ7Factory, DeviceSimPortal, type Q7ClusterFactory } from "@nrt/device-sim";
import { kelfLoad } from "../packages/core/kelf/kelf_load.ts";
import { ucodeModelHasCustomOps } from "../packages/core/tdrv/kbl_model_add.ts";
import { kernel, oneOpNeff } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const u8 = (name: string, n: number) => ({ name, dtype: "uint8", shape: [n] });

/** Keeps the bytes of every memory write. */
class WritePortal extends TracingPortal {
  readonly writes: Array<{ memory: DeviceMemory; data: Uint8Array }> = [];
  override memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    if (offset === 0) this.writes.push({ memory, data: data.slice() });
    return super.memWrite(memory, offset, data);
  }
}

async function init(pack: ArchPack = cayman) {
  const sim = new DeviceSimPortal({ spec: pack.spec });
  opened.push(sim);
  const portal = new WritePortal(sim);
  const rt = await Runtime.init({
    portal,
    archPacks: [pack],
    ownsPortal: false,
    visibleCores: [0],
    virtualCoreSize: 1,
    logger: new MemoryLogger(),
  });
  return { rt, portal };
}

/** The installed stream among the writes: the one whose slots start with the PREAMBLE's first ULIB_LOAD (opcode 0x03). */
function installedStream(p: WritePortal, from: number) {
  const w = p.writes.slice(from).find((x) => x.data.byteLength % 64 === 0 && x.data[0] === 0x03 && x.data[1] === 0x10);
  if (w === undefined) throw new Error("no stream was written");
  const slots = [];
  for (let at = 0; at < w.data.byteLength; at += 64) slots.push(decodeInstruction(w.data, at));
  return slots;
}

const VECTOR_ADD = oneOpNeff("vector_add", "vector_add", [f32("a", 64), f32("b", 64)], [f32("c", 64)]);
const COPY_ONLY = buildCustomOpNeff({
  name: "copy",
  target: "cayman",
  inputs: [u8("x", 1003)],
  outputs: [u8("y", 1003)],
  libraries: [],
  calls: [{ opcode: ExtIsaOpcode.COPY, inputs: ["x"], outputs: ["y"] }],
});

describe("base ext-ISA library + custom libraries (runtime-synthesis §3.1, §4.4)", () => {
  test("a custom-op NEFF bundles the base library first: num_libs 2, has_custom_ops; a base-only NEFF: 1, none", () => {
    const custom = kelfLoad(readNeff(VECTOR_ADD));
    expect(custom.libraries.map((l) => l.name)).toEqual(["ext_isa", "vector_add"]);
    expect(ucodeModelHasCustomOps(custom)).toBe(true);
    const base = kelfLoad(readNeff(COPY_ONLY));
    expect(base.libraries.map((l) => l.name)).toEqual(["ext_isa"]);
    expect(ucodeModelHasCustomOps(base)).toBe(false);
  });

  test("the embedded base library is kernels/wasm/ext_isa.wasm byte for byte", async () => {
    const built = new Uint8Array(await readFile(new URL("../kernels/wasm/ext_isa.wasm", import.meta.url)));
    expect(extIsaLibrary().wasm).toEqual(built);
    expect(extIsaLibrary().functions).toEqual([{ opcode: 0xff00, name: "ext_copy" }, {
      opcode: 0xff01,
      name: "ext_fill",
    }]);
  });

  test("the builder keeps 0xff00..0xffff and the name ext_isa for the base library", () => {
    const spec = (name: string, opcode: number) => ({
      name: "m",
      target: "cayman",
      inputs: [f32("a", 4)],
      outputs: [f32("b", 4)],
      libraries: [{ name, wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode, name: "relu" }] }],
      calls: [{ opcode, inputs: ["a"], outputs: ["b"] }],
    });
    expect(() => buildCustomOpNeff(spec("relu", 0xff00))).toThrow(/binds opcode 0xff00; 0xff00..0xffff belong/);
    expect(() => buildCustomOpNeff(spec("ext_isa", 1))).toThrow(/is the base ext-ISA library's/);
    expect(() => buildCustomOpNeff(spec("relu", 0xfeff))).not.toThrow();
  });

  test("ext_copy and ext_fill run SPMD on 8 cores over an odd byte count", async () => {
    const { rt } = await init();
    try {
      const fill = buildCustomOpNeff({
        name: "fill",
        target: "cayman",
        inputs: [],
        outputs: [u8("y", 1003)],
        libraries: [],
        calls: [{ opcode: ExtIsaOpcode.FILL, inputs: [], outputs: ["y"], ints: [0x1a5] }],
      });
      const x = Uint8Array.from({ length: 1003 }, (_, i) => (i * 7 + 3) & 0xff);
      const copy = await rt.load(COPY_ONLY);
      const ins = new TensorSet(), outs = new TensorSet();
      const tx = await rt.allocateTensor({ size: 1003, name: "x" });
      await tx.write(x);
      ins.add("x", tx);
      const ty = await rt.allocateTensor({ size: 1003, name: "y" });
      outs.add("y", ty);
      await copy.execute(ins, outs);
      expect(await ty.read()).toEqual(x);
      const filler = await rt.load(fill);
      await filler.execute(new TensorSet(), outs);
      expect(await ty.read()).toEqual(new Uint8Array(1003).fill(0xa5));
      await copy.unload();
      await filler.unload();
      for (const t of [tx, ty]) await t.free();
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("[PREAMBLE][MODEL_SWITCH][MAIN][POSTAMBLE][FUNCTION*] (runtime-synthesis §2.2)", () => {
  test(
    "the PREAMBLE loads every library of the model's opcode table, one ULIB_LOAD each, before MODEL_SWITCH",
    async () => {
      const { rt, portal } = await init();
      try {
        const from = portal.writes.length;
        const model = await rt.load(VECTOR_ADD);
        const slots = installedStream(portal, from);
        expect(slots.map((s) => s?.op)).toEqual([
          0x03, // ULIB_LOAD (ours): library 0, the base
          0x03, // ULIB_LOAD: library 1, vector_add
          0x02, // MODEL_SWITCH
          0x79, // MAIN: dma_config ×2, dma_config_size, LOAD_POOL_ARGUMENT, EXTENDED_INST, 0x10A1, DRAIN, EVENT_SEMAPHORE
          0x79,
          0x49,
          0x7a,
          0xf0,
          0xa1,
          0xa2,
          0x7c,
          0x01, // POSTAMBLE: NOTIFY(EXEC_DONE); FUNCTION* is empty, so the stream ends here
        ]);
        const ms = slots[2] as { opcodeTable: number };
        expect(slots.slice(0, 2)).toEqual([
          { op: 0x03, lib: 0, libs: 2, opcodeTable: ms.opcodeTable },
          { op: 0x03, lib: 1, libs: 2, opcodeTable: ms.opcodeTable },
        ]);
        // The table the PREAMBLE names holds the two staged images, in that order: the base library, then vector_add.
        const table = portal.writes.filter((w) => w.memory.pa === ms.opcodeTable).at(-1)!;
        const libs = opcodeTableLibraries(decodeOpcodeTable(table.data));
        expect(libs.map((l) => l.bytes)).toEqual([extIsaLibrary().wasm.byteLength, kernel("vector_add").byteLength]);
        await model.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("a base-only model's PREAMBLE is one ULIB_LOAD of the shared set; nine libraries give nine", async () => {
    const { rt, portal } = await init();
    try {
      let from = portal.writes.length;
      const copy = await rt.load(COPY_ONLY);
      expect(installedStream(portal, from).filter((s) => s?.op === 0x03)).toHaveLength(1);
      expect(rt.events.list()).toContain("ucode_stage_libs nc=0 shared ext_isa");
      from = portal.writes.length;
      const nine = await rt.load(buildCustomOpNeff({
        name: "nine",
        target: "cayman",
        inputs: [f32("a", 8)],
        outputs: [f32("o", 8)],
        libraries: Array.from({ length: 8 }, (_, i) => ({
          name: `relu${i}`,
          wasm: kernel("relu"),
          totalCpus: 8,
          functions: [{ opcode: i + 1, name: "relu" }],
        })),
        calls: [{ opcode: 8, inputs: ["a"], outputs: ["o"] }],
      }));
      const pre = installedStream(portal, from).filter((s) => s?.op === 0x03) as Array<{ lib: number; libs: number }>;
      expect(pre.map((s) => [s.lib, s.libs])).toEqual(Array.from({ length: 9 }, (_, i) => [i, 9]));
      await copy.unload();
      await nine.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("the queue-bundle table on both sides (runtime-synthesis §3.1)", () => {
  const withBundles = (bundles: CAYMAN_SPEC_TYPE["dmaQueueBundles"]): ArchPack => ({
    ...cayman,
    spec: { ...CAYMAN_SPEC, dmaQueueBundles: bundles },
  });
  type CAYMAN_SPEC_TYPE = typeof CAYMAN_SPEC;

  test("custom-op queues split over two marker-16 tuples, behind a decoy tuple, still carry a vector_add", async () => {
    const pack = withBundles([
      { marker: 3, relQueueIdx: 15, engLo: 0, engHi: 15 },
      { marker: 16, relQueueIdx: 12, engLo: 2, engHi: 4 },
      { marker: 16, relQueueIdx: 7, engLo: 9, engHi: 13 },
    ]);
    const { rt } = await init(pack);
    try {
      const model = await rt.load(VECTOR_ADD);
      const ins = new TensorSet(), outs = new TensorSet();
      for (const [name, v] of [["a", 1], ["b", 2]] as const) {
        const t = await rt.allocateTensor({ size: 256, name });
        await t.write(new Uint8Array(Float32Array.from({ length: 64 }, (_, i) => i * v).buffer));
        ins.add(name, t);
      }
      const c = await rt.allocateTensor({ size: 256, name: "c" });
      outs.add("c", c);
      await model.execute(ins, outs);
      expect(Array.from(new Float32Array((await c.read()).slice().buffer))).toEqual(
        Array.from({ length: 64 }, (_, i) => 3 * i),
      );
      await model.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("a table whose only queue-15 tuple has marker 15 has no custom-op queue: the load is NRT_RESOURCE", async () => {
    const { rt } = await init(withBundles([{ marker: 15, relQueueIdx: 15, engLo: 0, engHi: 7 }]));
    try {
      const e = await rt.load(VECTOR_ADD).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(NrtError);
      expect((e as NrtError).status).toBe(4);
      expect((e as Error).message).toContain("only 0 custom-op DMA queues, 8 needed");
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("libraries are prepared by content, not by address (ours: the opcode table's library tag)", () => {
  test(
    "a NEFF loaded again finds its libraries prepared; a different image staged where an old one was runs its own code",
    async () => {
      const prepared: string[] = [];
      // The real Q7 cluster, counting the libraries the device compiles into it.
      const q7Factory: Q7ClusterFactory = async (o) => {
        const c = await defaultQ7Factory(o);
        const prepare = c.prepare.bind(c);
        return Object.assign(c, {
          prepare: (key: string, wasm: Uint8Array) => (prepared.push(key), prepare(key, wasm)),
        });
      };
      const sim = new DeviceSimPortal({ spec: CAYMAN_SPEC, q7Factory });
      opened.push(sim);
      const rt = await Runtime.init({
        portal: sim,
        archPacks: [cayman],
        ownsPortal: false,
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: new MemoryLogger(),
      });
      try {
        const run = async (neff: Uint8Array, x: number[]): Promise<number[]> => {
          const m = await rt.load(neff);
          const ins = new TensorSet(), outs = new TensorSet();
          const tx = await rt.allocateTensor({ size: 32, name: "x" });
          await tx.write(new Uint8Array(Float32Array.from(x).buffer));
          ins.add("x", tx);
          const ty = await rt.allocateTensor({ size: 32, name: "y" });
          outs.add("y", ty);
          await m.execute(ins, outs);
          const y = Array.from(new Float32Array((await ty.read()).slice().buffer));
          await m.unload();
          await tx.free();
          await ty.free();
          return y;
        };
        // Two kernels padded to one size with an empty-named custom section, so the second can be staged exactly where
        // the first one's freed copy was.
        const pad = (wasm: Uint8Array, size: number): Uint8Array => {
          const content = size - wasm.byteLength - 3; // id byte, a two-byte LEB size, then the content
          const out = new Uint8Array(size);
          out.set(wasm);
          out.set([0x00, (content & 0x7f) | 0x80, content >> 7, 0x00], wasm.byteLength);
          return out;
        };
        const one = (name: string, fn: string, wasm: Uint8Array, y: string) =>
          buildCustomOpNeff({
            name,
            target: "cayman",
            inputs: [f32("x", 8)],
            outputs: [{ name: "y", dtype: y, shape: [8] }],
            libraries: [{ name, wasm: pad(wasm, 1024), totalCpus: 8, functions: [{ opcode: 1, name: fn }] }],
            calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
          });
        const relu = one("relu", "relu", kernel("relu"), "float32");
        const x = [-3, -2, -1, 0, 1, 2, 3, 4];
        expect(await run(relu, x)).toEqual([0, 0, 0, 0, 1, 2, 3, 4]);
        const first = prepared.length;
        expect(first).toBe(2); // the base library and relu
        for (let k = 0; k < 5; k++) expect(await run(relu, x)).toEqual([0, 0, 0, 0, 1, 2, 3, 4]);
        expect(prepared.length).toBe(first); // staged again five times, compiled once
        const cpuMap = one("relu", "cpu_map", kernel("cpu_map"), "int32");
        const ids = new Int32Array(new Float32Array(await run(cpuMap, x)).buffer);
        expect(Array.from(ids)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        expect(prepared.length).toBe(first + 1);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
});
