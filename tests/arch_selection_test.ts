/**
 * Choosing the generation: the runtime resolves the pack from the arch the portal reports and names the arch and
 * the registered packs when none matches; `createNrtContainer` chooses what the simulator simulates from `spec`,
 * `arch` or `NRT_ARCH`; a third-party pack registers from outside the repository (seed: runtime-synthesis §1.2,
 * lifecycle-error-model §2.6; ARCHITECTURE §3).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { cayman } from "@nrt/arch-cayman";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { sunda, SUNDA_SPEC } from "@nrt/arch-sunda";
import { ArchPackToken, createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { MemoryLogger, NrtError, NrtStatus, type Portal, Runtime } from "@nrt/core";
import { createKhal } from "@nrt/core/hal";
import { khalContract } from "@nrt/core/testing";
import { DeviceSimPortal } from "@nrt/device-sim";
import { maverick, MAVERICK_SPEC } from "../examples/third_party_pack/mod.ts";
import { runExample } from "../examples/third_party_pack/main.ts";
import { kernel } from "./_kernels.ts";

const opened: Portal[] = [];
// Close every simulated device so no Q7 Worker outlives the file.
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

describe("pack selection", () => {
  test("Runtime.init() refuses a device whose arch has no registered pack, naming the arch and the registered packs", async () => {
    const sim = new DeviceSimPortal({ spec: MARIANA_SPEC });
    opened.push(sim);
    const e = await Runtime.init({ portal: sim, archPacks: [sunda, cayman], logger: new MemoryLogger() }).catch((
      x: unknown,
    ) => x);
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(NrtStatus.NRT_HW_ERROR);
    expect((e as NrtError).message).toContain("al_hal_tpb_arch_type 4");
    expect((e as NrtError).message).toContain("registered: sunda (2), cayman (3)");
    expect((await sim.memUsage(0)).allocations).toBe(0);
  });

  test("Runtime.init() says none are registered when it is given no pack, and closes the portal it owns", async () => {
    const sim = new DeviceSimPortal();
    opened.push(sim);
    const e = await Runtime.init({ portal: sim, archPacks: [], logger: new MemoryLogger() }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).message).toMatch(/al_hal_tpb_arch_type 3; registered: none$/);
    expect((await sim.devices().catch((x: unknown) => x)) instanceof NrtError).toBe(true); // closed by the failed init
  });

  test(
    "createNrtContainer() simulates cayman by default, else the arch option, else NRT_ARCH, and the runtime picks the matching pack",
    async () => {
      const cases: Array<[Parameters<typeof createNrtContainer>[0], string]> = [
        [{}, "cayman"],
        [{ arch: "sunda" }, "sunda"],
        [{ arch: "mariana" }, "mariana"],
        [{ arch: "trn1" }, "sunda"],
        [{ arch: "inf2" }, "sunda"],
        [{ arch: "trn2" }, "cayman"],
        [{ env: { NRT_ARCH: "mariana" } }, "mariana"],
        [{ env: { NRT_ARCH: "TRN1" } }, "sunda"],
        [{ env: { NRT_ARCH: "" } }, "cayman"],
        [{ arch: "cayman", env: { NRT_ARCH: "sunda" } }, "cayman"],
        [{ spec: SUNDA_SPEC, arch: "mariana" }, "sunda"],
      ];
      const chosen: string[] = [];
      for (const [options] of cases) {
        const c = createNrtContainer(options);
        const portal = c.resolve(PortalToken);
        opened.push(portal);
        const rt = await Runtime.init({
          ...nrtPlugins(c),
          visibleCores: [0],
          virtualCoreSize: 1,
          logger: new MemoryLogger(),
        });
        expect(rt.spec.arch).toBe((await portal.devices())[0].arch);
        chosen.push(rt.spec.name);
        await rt.close();
      }
      expect(chosen).toEqual(cases.map(([, name]) => name));
    },
    30_000,
  );

  test("createNrtContainer() registers all three packs side by side", () => {
    const c = createNrtContainer();
    opened.push(c.resolve(PortalToken));
    expect(c.resolveAll(ArchPackToken).map((p) => p.spec.name)).toEqual(["sunda", "cayman", "mariana"]);
  });

  test("createNrtContainer() rejects an unknown NRT_ARCH, naming the generations it knows", () => {
    let e: unknown;
    try {
      createNrtContainer({ env: { NRT_ARCH: "trn9" } });
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).message).toBe(
      'Unknown architecture "trn9": expected one of sunda, trn1, inf2, cayman, trn2, mariana',
    );
  });
});

describe("a third-party pack (examples/third_party_pack)", () => {
  test("the example registers maverick-sim (arch 5) beside the three packs and runs vector_add", async () => {
    const { pack, arch, out } = await runExample(1024);
    expect([pack, arch]).toEqual(["maverick-sim", 5]);
    expect(out.length).toBe(1024);
    for (const i of [0, 1, 511, 1023]) expect(out[i]).toBe(3 * i);
  }, 30_000);

  test("the fourth generation needs no edit to core: no file of packages/core names it, and its HAL is built from its data", () => {
    const files = readdirSync(new URL("../packages/core/", import.meta.url), { recursive: true }).map(String).filter((
      f,
    ) => f.endsWith(".ts") && !f.endsWith("_test.ts"));
    expect(files.length).toBeGreaterThan(20);
    for (const f of files) {
      expect([f, /maverick/i.test(readFileSync(new URL(`../packages/core/${f}`, import.meta.url), "utf8"))]).toEqual([
        f,
        false,
      ]);
    }
    const khal = createKhal(maverick);
    expect(khal.semIncAddr(0, 1)).toBe(MAVERICK_SPEC.csr.ncBlockBase + MAVERICK_SPEC.csr.semaphoreIncrement + 4);
    expect(khal.isaErrorText(3)).toBe("maverick-sim ISA error 3");
  });

  test("createNrtContainer() takes a fourth pack beside the shipped ones and simulates it by name", async () => {
    const c = createNrtContainer({ archPacks: [maverick], arch: "maverick-sim" });
    expect(c.resolveAll(ArchPackToken).map((p) => p.spec.name)).toEqual(["sunda", "cayman", "mariana", "maverick-sim"]);
    await using rt = await Runtime.init({ ...nrtPlugins(c), logger: new MemoryLogger() });
    expect(rt.spec.name).toBe("maverick-sim");
  }, 30_000);

  test("the example's stock image is kernels/wasm/stock_pool.wasm with arch id 5", () => {
    const image = createKhal(maverick).stockPoolUcode();
    expect(Array.from(image.iram)).toEqual(Array.from(kernel("stock_pool")));
    expect(new DataView(image.dram.buffer).getUint32(0, true)).toBe(5);
  });
});

// The third-party pack runs the same conformance suite as the shipped ones.
khalContract(
  { describe, test, expect },
  "maverick-sim",
  () => maverick,
  (spec) => {
    const sim = new DeviceSimPortal({ spec });
    return Promise.resolve({ portal: sim, spec, close: () => sim.close(), q7Events: () => sim.q7Events() });
  },
  [],
  { kernel: (name) => Promise.resolve(kernel(name)) },
);
