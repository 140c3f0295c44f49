/**
 * `ucode_init_module` (seed: runtime-synthesis §2.1: "assert api_level==3; liveness-probe the DEFAULT Q7 image", the
 * first step of `nrt_init`, before the per-NeuronCore loop). A generation whose DEFAULT image reports another API
 * level, answers the probe with another arch, traps, or is not an image fails `nrt_init` with NRT_FAILURE (ours: the
 * seed gives no status), before any core is acquired or written; the three shipped generations pass.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";
import { sunda } from "@nrt/arch-sunda";
import { MemoryLogger, NrtError, NrtStatus, Runtime } from "@nrt/core";
import type { ArchPack } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const enc = new TextEncoder();

/** A wasm module exporting `ucode_api_level()` and `ucode_arch()`, each returning a constant or trapping. */
function image(apiLevel: number | "trap", arch: number | "trap"): Uint8Array {
  const body = (v: number | "trap") => (v === "trap" ? [0x03, 0x00, 0x00, 0x0b] : [0x04, 0x00, 0x41, v, 0x0b]);
  const name = (s: string) => [s.length, ...enc.encode(s)];
  const section = (id: number, bytes: number[]) => [id, bytes.length, ...bytes];
  const exports = [0x02, ...name("ucode_api_level"), 0x00, 0x00, ...name("ucode_arch"), 0x00, 0x01];
  return new Uint8Array([
    ...enc.encode("\0asm"),
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(0x01, [0x01, 0x60, 0x00, 0x01, 0x7f]),
    ...section(0x03, [0x02, 0x00, 0x00]),
    ...section(0x07, exports),
    ...section(0x0a, [0x02, ...body(apiLevel), ...body(arch)]),
  ]);
}

/** `pack` with its DEFAULT image replaced. */
function withDefault(pack: ArchPack, iram: Uint8Array): ArchPack {
  return { ...pack, stockPoolUcode: { iram, dram: new Uint8Array(16) } };
}

/** A portal that records whether anything reached the device. */
class CountingPortal extends TracingPortal {
  acquired = 0;
  writes = 0;
  override barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    this.writes++;
    return super.barWrite(device, bar, offset, data);
  }
  override barWrite32(device: number, bar: number, offset: number, value: number): Promise<void> {
    this.writes++;
    return super.barWrite32(device, bar, offset, value);
  }
  override acquireCores(device: number, cores: readonly number[]): Promise<void> {
    this.acquired++;
    return super.acquireCores(device, cores);
  }
}

async function init(pack: ArchPack): Promise<{ rt?: Runtime; error?: unknown; portal: CountingPortal }> {
  const sim = new DeviceSimPortal({ spec: pack.spec });
  opened.push(sim);
  const portal = new CountingPortal(sim);
  try {
    const rt = await Runtime.init({
      portal,
      archPacks: [pack],
      ownsPortal: false,
      visibleCores: [0],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    return { rt, portal };
  } catch (error) {
    return { error, portal };
  }
}

describe("ucode_init_module", () => {
  for (const [name, pack, arch] of [["sunda", sunda, 2], ["cayman", cayman, 3], ["mariana", mariana, 4]] as const) {
    test(`${name}: the shipped DEFAULT image reports api_level 3 and answers the probe; the step runs first`, async () => {
      const { rt, error } = await init(pack);
      expect(error).toBeUndefined();
      try {
        const events = rt!.events.list();
        expect(events[0]).toBe("ucode_init_module api_level=3");
        expect(events.findIndex((e) => e.startsWith("ucode_nx_core_create"))).toBeGreaterThan(0);
      } finally {
        await rt!.close();
      }
      // A hand-built image with the same answers passes too: the check reads the image, not a constant.
      const ok = await init(withDefault(pack, image(3, arch)));
      expect(ok.error).toBeUndefined();
      await ok.rt!.close();
    });
  }

  const bad: ReadonlyArray<[string, Uint8Array, RegExp]> = [
    ["api_level 2", image(2, 3), /api_level is 2, 3 is required/],
    ["api_level 4", image(4, 3), /api_level is 4, 3 is required/],
    ["a probe answering another arch", image(3, 7), /liveness probe: ucode_arch\(\) answered 7, expected 3/],
    ["a trapping api_level", image("trap", 3), /ucode_api_level\(\) failed/],
    ["a trapping probe", image(3, "trap"), /ucode_arch\(\) failed/],
    ["bytes that are not an image", new Uint8Array([1, 2, 3, 4]), /the DEFAULT Q7 image does not start/],
  ];
  for (const [what, iram, message] of bad) {
    test(`${what}: nrt_init fails with NRT_FAILURE before any core is acquired or written`, async () => {
      const { rt, error, portal } = await init(withDefault(cayman, iram));
      expect(rt).toBeUndefined();
      expect(error).toBeInstanceOf(NrtError);
      expect((error as NrtError).status).toBe(NrtStatus.NRT_FAILURE);
      expect((error as NrtError).status).toBe(1);
      expect((error as Error).message).toMatch(message);
      expect(portal.acquired).toBe(0);
      expect(portal.writes).toBe(0);
    });
  }
});
