/**
 * The custom Pool image overrides each half on its own (seed: runtime-synthesis §2.1, `tpb_eng_init_hals_v2`:
 * `if (pool_eng_iram_bin) cfg.iram = …; if (pool_eng_dram_bin) cfg.dram = …`): a missing half keeps the stock
 * half, on all three generations, through `Runtime.init({ poolUcode })` and through `nrt_set_pool_eng_ucode`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";
import { sunda } from "@nrt/arch-sunda";
import { MemoryLogger, NrtApi, NrtError, NrtStatus, Runtime } from "@nrt/core";
import { type ArchPack, ncBlock, stockPoolImage } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { kernel } from "./_kernels.ts";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

/** A tracing portal that also keeps the bytes of every bulk BAR write. */
class ImagePortal extends TracingPortal {
  readonly writes: Array<{ offset: number; data: Uint8Array }> = [];
  override barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    this.writes.push({ offset, data: data.slice() });
    return super.barWrite(device, bar, offset, data);
  }
}

/** What NeuronCore 0's 8 Q7 cores were given, per half, in write order. */
function installed(pack: ArchPack, p: ImagePortal): { iram: Uint8Array[]; dram: Uint8Array[] } {
  const { csr } = pack.spec;
  const base = ncBlock(pack.spec, 0);
  const inRange = (at: number, start: number, stride: number) => at >= base + start && at < base + start + 8 * stride;
  return {
    iram: p.writes.filter((w) => inRange(w.offset, csr.q7Iram, csr.q7IramStride)).map((w) => w.data),
    dram: p.writes.filter((w) => inRange(w.offset, csr.q7Dram, csr.q7DramStride)).map((w) => w.data),
  };
}

async function initWith(pack: ArchPack, poolUcode: { iram?: Uint8Array; dram?: Uint8Array } | undefined) {
  const sim = new DeviceSimPortal({ spec: pack.spec });
  opened.push(sim);
  const portal = new ImagePortal(sim);
  const rt = await Runtime.init({
    portal,
    archPacks: [pack],
    ownsPortal: false,
    visibleCores: [0],
    virtualCoreSize: 1,
    poolUcode,
    logger: new MemoryLogger(),
  });
  await rt.close();
  return installed(pack, portal);
}

// The stock data image's first u32 is the generation's al_hal_tpb_arch_type (seed: lifecycle-error-model §2.6:
// SUNDA = 2, CAYMAN = 3, MARIANA = 4).
const PACKS: ReadonlyArray<[string, ArchPack, number]> = [["sunda", sunda, 2], ["cayman", cayman, 3], [
  "mariana",
  mariana,
  4,
]];

describe("custom Pool image: each half overrides on its own (seed runtime-synthesis §2.1)", () => {
  for (const [name, pack, archId] of PACKS) {
    const stock = stockPoolImage(pack.spec.arch);
    const customIram = kernel("noop");
    const customDram = new Uint8Array(32).fill(7);
    const stockDramArch = (d: Uint8Array) => new DataView(d.buffer, d.byteOffset, d.byteLength).getUint32(0, true);

    test(`${name}: IRAM only → custom IRAM, stock DRAM on all 8 cores`, async () => {
      const got = await initWith(pack, { iram: customIram });
      expect(got.iram.length).toBe(8);
      expect(got.dram.length).toBe(8);
      for (const i of got.iram) expect(i).toEqual(customIram);
      for (const d of got.dram) {
        expect(d).toEqual(stock.dram);
        expect(stockDramArch(d)).toBe(archId);
      }
    }, 30_000);

    test(`${name}: DRAM only → stock IRAM, custom DRAM on all 8 cores`, async () => {
      const got = await initWith(pack, { dram: customDram });
      expect(got.iram.length).toBe(8);
      expect(got.dram.length).toBe(8);
      for (const i of got.iram) expect(i).toEqual(stock.iram);
      for (const d of got.dram) expect(d).toEqual(customDram);
    }, 30_000);

    test(`${name}: both halves → both custom; none → both stock`, async () => {
      const both = await initWith(pack, { iram: customIram, dram: customDram });
      for (const i of both.iram) expect(i).toEqual(customIram);
      for (const d of both.dram) expect(d).toEqual(customDram);
      const none = await initWith(pack, undefined);
      for (const i of none.iram) expect(i).toEqual(stock.iram);
      for (const d of none.dram) expect(stockDramArch(d)).toBe(archId);
    }, 30_000);
  }

  test("nrt_set_pool_eng_ucode takes either half; nothing or a non-byte half is NRT_INVALID (2)", async () => {
    const api = new NrtApi();
    expect(api.nrt_set_pool_eng_ucode({} as never)).toBe(2);
    expect(api.nrt_set_pool_eng_ucode(null as never)).toBe(2);
    expect(api.nrt_set_pool_eng_ucode({ iram: 5 } as never)).toBe(2);
    expect(api.nrt_set_pool_eng_ucode({ iram: kernel("noop"), dram: "x" } as never)).toBe(2);
    expect(api.nrt_set_pool_eng_ucode({ dram: new Uint8Array(16).fill(9) })).toBe(0);
    const sim = new DeviceSimPortal();
    opened.push(sim);
    const portal = new ImagePortal(sim);
    expect(
      await api.nrt_init({
        portal,
        archPacks: [cayman],
        ownsPortal: false,
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: new MemoryLogger(),
      }),
    ).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    const got = installed(cayman, portal);
    expect(got.iram.length).toBe(8);
    for (const i of got.iram) expect(i).toEqual(stockPoolImage(cayman.spec.arch).iram);
    for (const d of got.dram) expect(d).toEqual(new Uint8Array(16).fill(9));
  }, 30_000);

  test("Runtime.init refuses an image with neither half with NRT_INVALID and leaves nothing allocated", async () => {
    const sim = new DeviceSimPortal();
    opened.push(sim);
    const err = await Runtime.init({
      portal: sim,
      archPacks: [cayman],
      ownsPortal: false,
      visibleCores: [0],
      poolUcode: {},
      logger: new MemoryLogger(),
    }).catch((e) => e);
    expect(err).toBeInstanceOf(NrtError);
    expect(err.status).toBe(NrtStatus.NRT_INVALID);
    expect((await sim.memUsage(0)).allocations).toBe(0);
  }, 30_000);
});
