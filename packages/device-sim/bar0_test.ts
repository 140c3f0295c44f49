import { describe, expect, test } from "bun:test";
import { NrtError, NrtStatus } from "@nrt/core";
import { ncBlock, ucodeCoreAddr, UcodeCoreState } from "@nrt/core/hal";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { decodeBar0 } from "./bar0.ts";
import { DeviceSimPortal } from "./device_sim_portal.ts";
import { TestHost } from "./_testing.ts";

const S = CAYMAN_SPEC;
const csr = S.csr;

describe("Bar0", () => {
  test("Bar0 semaphore windows read, set, increment and decrement one shared value", async () => {
    const p = new DeviceSimPortal();
    const nc = 1, sem = 5;
    const at = (w: number): number => ncBlock(S, nc) + w + 4 * sem;
    await p.barWrite32(0, 0, at(csr.semaphoreSet), 10);
    await p.barWrite32(0, 0, at(csr.semaphoreIncrement), 3);
    await p.barWrite32(0, 0, at(csr.semaphoreDecrement), 4);
    expect(await p.barRead32(0, 0, at(csr.semaphoreRead))).toBe(9);
    await p.semaphoreIncrement(0, nc, sem, 2);
    expect(await p.barRead32(0, 0, at(csr.semaphoreRead))).toBe(11);
    await p.semaphoreSet(0, nc, sem, 1);
    expect(await p.semaphoreRead(0, nc, sem)).toBe(1);
    expect(await p.semaphoreRead(0, 0, sem)).toBe(0); // another NeuronCore's block
    await p.close();
  });

  test("Bar0 refuses an unknown offset with NRT_INVALID naming it in hex", async () => {
    const p = new DeviceSimPortal();
    const err = await p.barWrite32(0, 0, 0x7ff0, 1).catch((e) => e);
    expect(err).toBeInstanceOf(NrtError);
    expect((err as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    expect((err as Error).message).toContain("0x7ff0");
    expect(() => decodeBar0(S, S.ncPerDevice, ncBlock(S, S.ncPerDevice), 4)).toThrow(NrtError);
    await p.close();
  });

  test("Bar0 ucode core words (ours; spmd-teardown §6.3): Q7 core 3's DESTROY clears only its windows and state, an unknown command is refused", async () => {
    const p = new DeviceSimPortal();
    const nc = 1;
    expect(decodeBar0(S, S.ncPerDevice, ucodeCoreAddr(S, nc, "q7", 3), 4)).toEqual({
      kind: "ucode-core",
      nc,
      byte: 4 * (S.nxCoresPerNc + 3),
    });
    const image = new Uint8Array([1, 2, 3, 4]);
    for (const c of [2, 3]) await p.barWrite(0, 0, ncBlock(S, nc) + csr.q7Iram + c * csr.q7IramStride, image);
    await p.barWrite32(0, 0, ucodeCoreAddr(S, nc, "q7", 3), 2);
    const regs = p.mappedRegisters(0, nc);
    expect([regs.image("iram", 2)?.length, regs.image("iram", 3)]).toEqual([4, undefined]);
    expect(await p.barRead32(0, 0, ucodeCoreAddr(S, nc, "q7", 3))).toBe(UcodeCoreState.STOPPED);
    expect(await p.barRead32(0, 0, ucodeCoreAddr(S, nc, "q7", 2))).toBe(UcodeCoreState.LIVE);
    // A new install brings the core back.
    await p.barWrite(0, 0, ncBlock(S, nc) + csr.q7Iram + 3 * csr.q7IramStride, image);
    expect(await p.barRead32(0, 0, ucodeCoreAddr(S, nc, "q7", 3))).toBe(UcodeCoreState.LIVE);
    const refused = await p.barWrite32(0, 0, ucodeCoreAddr(S, nc, "nx", 0), 7).catch((e: unknown) => e);
    expect(String(refused)).toContain("Unknown ucode core command 7 for NX core 0");
    expect(await p.barRead32(0, 0, ucodeCoreAddr(S, nc, "nx", 0))).toBe(UcodeCoreState.LIVE);
    await p.close();
  });

  test("Bar0 run-stall CSR keeps its value and starts with all 8 Q7 cores stalled", async () => {
    const p = new DeviceSimPortal();
    const at = ncBlock(S, 0) + csr.runStall!;
    expect(await p.barRead32(0, 0, at)).toBe(0xff);
    await p.barWrite32(0, 0, at, 0x00);
    expect(await p.barRead32(0, 0, at)).toBe(0);
    await p.close();
  });

  test("Bar0 Q7 windows keep the exact bytes of an install and the stream table reads back", async () => {
    const h = new TestHost();
    const image = { iram: new Uint8Array([0, 0x61, 0x73, 0x6d, 1]), dram: new Uint8Array([7, 7, 7]) };
    await h.bootQ7(image);
    const c = 3;
    expect(await h.portal.barRead32(0, 0, csr.q7Iram + c * csr.q7IramStride)).toBe(0x6d736100);
    expect(await h.portal.barRead32(0, 0, csr.q7Iram + c * csr.q7IramStride + 4)).toBe(1);
    expect(await h.portal.barRead32(0, 0, csr.q7Dram + 7 * csr.q7DramStride)).toBe(0x070707);
    expect(h.portal.q7Events()).toEqual([{ nc: 0, kind: "released", via: "host-csr" }]);
    await h.khal.streamInstall(h.target, 0, 2, { pa: 0x100_0000_1000, slots: 3, doorbell: 9, model: 5 });
    expect(await h.portal.barRead32(0, 0, csr.streamTable + 32 + 4)).toBe(0x100);
    expect(await h.portal.barRead32(0, 0, csr.streamTable + 32 + 12)).toBe((0x8000_0000 | (5 << 16) | 9) >>> 0);
    await h.portal.close();
  });

  test("Bar0 NQ head is device-owned and the cause clears only on a write of 0", async () => {
    const h = new TestHost();
    await h.attachNq(4);
    const base = csr.notificationQueue;
    await h.portal.barWrite32(0, 0, base + 12, 77);
    expect(await h.portal.barRead32(0, 0, base + 12)).toBe(0);
    expect(await h.portal.barRead32(0, 0, base + 8)).toBe(4);
    await h.portal.barWrite32(0, 0, base + 20, 1);
    expect(await h.portal.barRead32(0, 0, base + 20)).toBe(0);
    await h.portal.close();
  });

  test("Bar0 refuses BARs other than 0", async () => {
    const p = new DeviceSimPortal();
    expect(((await p.barRead32(0, 2, 0).catch((e) => e)) as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    await p.close();
  });
});
