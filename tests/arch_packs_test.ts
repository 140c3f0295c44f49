/**
 * The three arch packs side by side: mirrored files and export names, manifests, the stock Pool image, the specs'
 * numbers and register layouts, and the per-arch run-stall release (seed: runtime-synthesis §1.2, §2.1, §4.5;
 * lifecycle-error-model §2.6).
 */
import { afterAll, describe, expect, test } from "bun:test";
import * as cayman from "@nrt/arch-cayman";
import * as mariana from "@nrt/arch-mariana";
import * as sunda from "@nrt/arch-sunda";
import { createKhal, type Khal, ncBlock, type SiliconSpec, TpbArchType } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { readdirSync, readFileSync } from "node:fs";
import { kernel } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const PACKS = [
  {
    name: "sunda",
    mod: sunda as Record<string, unknown>,
    spec: sunda.SUNDA_SPEC,
    khal: (): Khal => createKhal(sunda.sunda),
    arch: 2,
  },
  {
    name: "cayman",
    mod: cayman as Record<string, unknown>,
    spec: cayman.CAYMAN_SPEC,
    khal: (): Khal => createKhal(cayman.cayman),
    arch: 3,
  },
  {
    name: "mariana",
    mod: mariana as Record<string, unknown>,
    spec: mariana.MARIANA_SPEC,
    khal: (): Khal => createKhal(mariana.mariana),
    arch: 4,
  },
] as const;

const GiB = 1024 ** 3, MiB = 1024 ** 2;
const dir = (name: string) => new URL(`../packages/arch-${name}/`, import.meta.url);

describe("arch packs mirror each other", () => {
  test("the three packs hold the same file names", () => {
    const files = PACKS.map((p) => readdirSync(dir(p.name)).filter((f) => !f.endsWith("_test.ts")).sort());
    expect(files[0]).toEqual([
      "README.md",
      "deno.json",
      "error_tables.ts",
      "mod.ts",
      "pack.ts",
      "package.json",
      "spec.ts",
    ]);
    expect(files[1]).toEqual(files[0]);
    expect(files[2]).toEqual(files[0]);
  });

  test("the three packs export the same names modulo the arch prefix", () => {
    const normal = (p: (typeof PACKS)[number]) =>
      Object.keys(p.mod).map((k) => k.replace(new RegExp(p.name, "i"), "<arch>")).sort();
    const [s, c, m] = PACKS.map(normal);
    expect(s).toEqual(c);
    expect(m).toEqual(c);
    expect(s).toEqual([
      "<arch>",
      "<arch>ErrorSubtype",
      "<arch>IsaErrorText",
      "<arch>_DEFAULT_ISA_ERROR_TEXT",
      "<arch>_ERROR_SUBTYPES",
      "<arch>_ERROR_TABLES",
      "<arch>_ISA_ERRORS",
      "<arch>_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK",
      "<arch>_SPEC",
    ].sort());
  });

  test("deno.json and package.json of each pack export . and ./spec under the pack's name", () => {
    for (const p of PACKS) {
      const deno = JSON.parse(readFileSync(new URL("deno.json", dir(p.name)), "utf8"));
      const pkg = JSON.parse(readFileSync(new URL("package.json", dir(p.name)), "utf8"));
      for (const m of [deno, pkg]) {
        expect(m.name).toBe(`@nrt/arch-${p.name}`);
        expect(m.exports).toEqual({ ".": "./mod.ts", "./spec": "./spec.ts" });
      }
    }
  });

  for (const p of PACKS) {
    test(`${p.name}'s stock Pool image: IRAM equals kernels/wasm/stock_pool.wasm and DRAM word 0 is arch id ${p.arch}`, () => {
      const image = p.khal().stockPoolUcode();
      expect(Array.from(image.iram)).toEqual(Array.from(kernel("stock_pool")));
      expect(image.dram.byteLength).toBe(16);
      expect(new DataView(image.dram.buffer).getUint32(0, true)).toBe(p.arch);
      expect(p.spec.arch).toBe(p.arch);
    });
  }
});

describe("arch pack specs", () => {
  test("SUNDA_SPEC: NC-v2, 2 NeuronCores, 32 GiB HBM, 24 MiB SBUF, 256 semaphores, EVT_SEM run-stall, no hw decode, LNC forced to 1", () => {
    const s = sunda.SUNDA_SPEC;
    expect([s.arch, s.name, s.generation, s.ncPerDevice, s.hbmBytes, s.sbufBytesPerCore, s.semaphoresPerCore])
      .toEqual([TpbArchType.AL_HAL_TPB_ARCH_TYPE_SUNDA, "sunda", "NC-v2", 2, 32 * GiB, 24 * MiB, 256]);
    expect([s.csr.runStall, s.runStallRelease, s.hwDecode, s.forcedVirtualCoreSize]).toEqual([
      null,
      "evt-sem",
      false,
      1,
    ]);
    expect(s.instances).toEqual(["trn1", "inf2"]);
  });

  test("CAYMAN_SPEC: NC-v3, 8 NeuronCores, host CSR 0x3000 run-stall, LNC 2 by default", () => {
    const s = cayman.CAYMAN_SPEC;
    expect([
      s.arch,
      s.name,
      s.generation,
      s.ncPerDevice,
      s.csr.runStall,
      s.runStallRelease,
      s.defaultVirtualCoreSize,
      s.forcedVirtualCoreSize,
    ])
      .toEqual([3, "cayman", "NC-v3", 8, 0x3000, "host-csr", 2, null]);
  });

  test("MARIANA_SPEC: NC-v4, 8 NeuronCores, 144 GiB HBM, 32 MiB SBUF, host CSR 0x3000 run-stall", () => {
    const s = mariana.MARIANA_SPEC;
    expect([
      s.arch,
      s.name,
      s.generation,
      s.ncPerDevice,
      s.hbmBytes,
      s.sbufBytesPerCore,
      s.csr.runStall,
      s.runStallRelease,
    ])
      .toEqual([4, "mariana", "NC-v4", 8, 144 * GiB, 32 * MiB, 0x3000, "host-csr"]);
  });

  test("Mariana's and Sunda's register layouts differ from Cayman's at every register but the run-stall CSR", () => {
    const c = cayman.CAYMAN_SPEC.csr;
    const registers = [
      "ncBlockStride",
      "semaphoreRead",
      "semaphoreSet",
      "semaphoreIncrement",
      "semaphoreDecrement",
      "event",
      "swapTable",
      "swapFileIoTable",
      "ucodeCore",
      "streamTable",
      "notificationQueue",
      "engineIp",
      "dma",
      "q7Iram",
      "q7Dram",
    ] as const;
    for (const other of [mariana.MARIANA_SPEC.csr, sunda.SUNDA_SPEC.csr]) {
      expect(registers.filter((k) => other[k] === c[k])).toEqual([]);
    }
    expect(mariana.MARIANA_SPEC.csr.runStall).toBe(c.runStall);
  });

  for (const p of PACKS) {
    test(`${p.name}'s BAR0 registers fit their NeuronCore block without overlapping, below 4 GiB`, () => {
      const s: SiliconSpec = p.spec;
      const c = s.csr;
      const ranges: Array<[string, number, number]> = [
        ["semaphoreRead", c.semaphoreRead, 4 * s.semaphoresPerCore],
        ["semaphoreSet", c.semaphoreSet, 4 * s.semaphoresPerCore],
        ["semaphoreIncrement", c.semaphoreIncrement, 4 * s.semaphoresPerCore],
        ["semaphoreDecrement", c.semaphoreDecrement, 4 * s.semaphoresPerCore],
        ["event", c.event, 4 * s.eventsPerCore],
        ["swapTable", c.swapTable, 8],
        ["swapFileIoTable", c.swapFileIoTable, 8],
        ["ucodeCore", c.ucodeCore, 4 * (s.nxCoresPerNc + s.q7CoresPerNc)],
        ["streamTable", c.streamTable, 16 * c.streamSlots],
        ["notificationQueue", c.notificationQueue, 24],
        ["engineIp", c.engineIp, 20],
        ["dma", c.dma, s.dmaEngines * c.dmaEngineStride],
        ["q7Iram", c.q7Iram, (s.q7CoresPerNc - 1) * c.q7IramStride + s.q7IramBytes],
        ["q7Dram", c.q7Dram, (s.q7CoresPerNc - 1) * c.q7DramStride + s.q7DramBytes],
        ...(c.runStall === null ? [] : [["runStall", c.runStall, 4] as [string, number, number]]),
      ];
      const sorted = [...ranges].sort((a, b) => a[1] - b[1]);
      for (let i = 1; i < sorted.length; i++) {
        expect([sorted[i][0], sorted[i][1] >= sorted[i - 1][1] + sorted[i - 1][2]]).toEqual([sorted[i][0], true]);
      }
      const last = sorted[sorted.length - 1];
      expect(last[1] + last[2]).toBeLessThanOrEqual(c.ncBlockStride);
      expect(c.q7IramStride).toBeGreaterThanOrEqual(s.q7IramBytes);
      expect(c.q7DramStride).toBeGreaterThanOrEqual(s.q7DramBytes);
      expect(ncBlock(s, s.ncPerDevice)).toBeLessThanOrEqual(2 ** 32); // evt-accel addresses fit LOAD_POOL_ARGUMENT's u32
      expect(s.addressMap.sbufStride).toBeGreaterThanOrEqual(s.sbufBytesPerCore);
    });
  }
});

describe("per-arch run-stall release (seed runtime-synthesis §2.1)", () => {
  for (const p of PACKS) {
    const host = p.spec.runStallRelease === "host-csr";
    test(`${p.name}: q7HoldRunStall() and q7ReleaseRunStall() ${host ? "write 0xFF then 0x00 to CSR 0x3000" : "write nothing"}`, async () => {
      const sim = new DeviceSimPortal({ spec: p.spec });
      opened.push(sim);
      const trace = new TracingPortal(sim);
      const khal = p.khal();
      for (const nc of [0, 1]) {
        await khal.q7HoldRunStall({ portal: trace, device: 0 }, nc);
        await khal.q7ReleaseRunStall({ portal: trace, device: 0 }, nc);
      }
      const expected = host
        ? [0, 1].flatMap((
          nc,
        ) => [{ op: "barWrite32", device: 0, target: ncBlock(p.spec, nc) + 0x3000, value: 0xff }, {
          op: "barWrite32",
          device: 0,
          target: ncBlock(p.spec, nc) + 0x3000,
          value: 0,
        }])
        : [];
      expect(trace.entries).toEqual(expected);
    });
  }
});
