import { describe, expect, test } from "bun:test";
import { NrtError, NrtStatus } from "@nrt/core";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { DeviceSimPortal } from "./device_sim_portal.ts";
import { DeviceMemoryMap } from "./memory.ts";

const GiB = 1024 ** 3;

function statusOf(e: unknown): number | undefined {
  return e instanceof NrtError ? e.status : undefined;
}

/** A device's memory map with `hbm` bytes of HBM at 0x1000 and no host DRAM. */
function hbmMap(hbm: number): DeviceMemoryMap {
  let id = 0;
  return new DeviceMemoryMap({
    device: 0,
    hbm: { base: 0x1000, capacity: hbm },
    host: { base: 0, capacity: 0 },
    nextId: () => ++id,
  });
}

describe("DeviceMemoryMap", () => {
  test("DeviceMemoryMap() allocates 90 GiB in 1 GiB chunks on a 96 GiB device without backing any of it", async () => {
    const portal = new DeviceSimPortal();
    const chunks = [];
    for (let i = 0; i < 90; i++) chunks.push(await portal.memAlloc({ device: 0, nc: 0, bytes: GiB }));
    const usage = await portal.memUsage(0);
    expect(usage.hbm).toBe(90 * GiB);
    expect(usage.allocations).toBe(90);
    expect(portal.backedBytes(0)).toBe(0);
    // An untouched allocation reads zeros, still without backing.
    expect([...await portal.memRead(chunks[89], GiB - 4, 4)]).toEqual([0, 0, 0, 0]);
    expect(portal.backedBytes(0)).toBe(0);
    expect(chunks[0].pa).toBe(CAYMAN_SPEC.addressMap.hbmBase);
    await portal.close();
  });

  test("DeviceMemoryMap() refuses an allocation past capacity with NRT_RESOURCE", async () => {
    const portal = new DeviceSimPortal({ hbmBytes: 4096 });
    await portal.memAlloc({ device: 0, nc: 0, bytes: 4000 });
    const err = await portal.memAlloc({ device: 0, nc: 0, bytes: 200 }).catch((e) => e);
    expect(statusOf(err)).toBe(NrtStatus.NRT_RESOURCE);
    await portal.close();
  });

  test("DeviceMemoryMap() reuses a freed hole first-fit and coalesces neighbours", () => {
    const m = hbmMap(0x300);
    const a = m.alloc({ device: 0, nc: 0, bytes: 0x100 });
    const b = m.alloc({ device: 0, nc: 0, bytes: 0x100 });
    m.alloc({ device: 0, nc: 0, bytes: 0x100 });
    m.free(a);
    m.free(b);
    const big = m.alloc({ device: 0, nc: 0, bytes: 0x200 });
    expect(big.pa).toBe(0x1000);
    expect(m.usage()).toEqual({ hbm: 0x300, host: 0, allocations: 2 });
  });

  test("DeviceMemoryMap.resolve() maps a PA to its allocation and offset", async () => {
    const portal = new DeviceSimPortal({ hbmBytes: 1 << 20 });
    await portal.memAlloc({ device: 0, nc: 0, bytes: 100 });
    const b = await portal.memAlloc({ device: 0, nc: 0, bytes: 256, align: 256 });
    const host = await portal.memAlloc({ device: 0, nc: 0, bytes: 64, location: "host" });
    expect(b.pa % 256).toBe(0);
    expect(host.pa).toBe(CAYMAN_SPEC.addressMap.hostDramBase);
    await portal.memWrite(b, 10, new Uint8Array([9, 8, 7]));
    let id = 0;
    const map = new DeviceMemoryMap({
      device: 0,
      hbm: { base: 0, capacity: 1024 },
      host: { base: 4096, capacity: 1024 },
      nextId: () => ++id,
    });
    const x = map.alloc({ device: 0, nc: 0, bytes: 64 });
    const y = map.alloc({ device: 0, nc: 0, bytes: 64 });
    expect(map.resolve(y.pa + 5, 4)?.offset).toBe(5);
    expect(map.resolve(y.pa + 5, 4)?.allocation.id).toBe(y.id);
    expect(map.resolve(x.pa + 60, 8)).toBeUndefined(); // straddles two allocations
    expect(map.resolve(2000, 1)).toBeUndefined();
    expect(map.writePa(y.pa + 1, new Uint8Array([5]))).toBe(true);
    expect([...map.readPa(y.pa, 3)!]).toEqual([0, 5, 0]);
    expect([...await portal.memRead(b, 10, 3)]).toEqual([9, 8, 7]);
    await portal.close();
  });

  test("DeviceMemoryMap.decodePa() decodes a range once per write, and again after a write, a free and a new allocation at the same PA", () => {
    const map = hbmMap(0x1000);
    let decodes = 0;
    const sum = (bytes: Uint8Array): number => {
      decodes++;
      return bytes.reduce((a, b) => a + b, 0);
    };
    const a = map.alloc({ device: 0, nc: 0, bytes: 64 });
    map.write(a, 0, new Uint8Array([1, 2, 3]));
    expect(map.decodePa(a.pa, 4, "sum", sum)).toBe(6);
    expect(map.decodePa(a.pa, 4, "sum", sum)).toBe(6);
    expect(decodes).toBe(1);
    // Another kind or length of the same range is its own entry.
    expect(map.decodePa(a.pa, 2, "sum", sum)).toBe(3);
    expect(map.decodePa(a.pa, 4, "other", sum)).toBe(6);
    expect(decodes).toBe(3);
    // A write by either side makes every decode of the allocation stale.
    expect(map.writePa(a.pa + 3, new Uint8Array([10]))).toBe(true);
    expect(map.decodePa(a.pa, 4, "sum", sum)).toBe(16);
    expect(decodes).toBe(4);
    // Freed, then the same PA allocated again with other bytes: nothing decoded from the freed one is returned.
    map.free(a);
    expect(map.decodePa(a.pa, 4, "sum", sum)).toBeUndefined();
    const b = map.alloc({ device: 0, nc: 0, bytes: 64 });
    expect(b.pa).toBe(a.pa);
    map.write(b, 0, new Uint8Array([7]));
    expect(map.decodePa(b.pa, 4, "sum", sum)).toBe(7);
    expect(decodes).toBe(5);
  });

  test("DeviceMemoryMap.free() refuses a double free and a foreign handle with NRT_INVALID", async () => {
    const portal = new DeviceSimPortal({ hbmBytes: 1 << 20 });
    const a = await portal.memAlloc({ device: 0, nc: 0, bytes: 64 });
    await portal.memFree(a);
    expect(statusOf(await portal.memFree(a).catch((e) => e))).toBe(NrtStatus.NRT_INVALID);
    const foreign = { ...a, id: 999 };
    expect(statusOf(await portal.memFree(foreign).catch((e) => e))).toBe(NrtStatus.NRT_INVALID);
    expect((await portal.memUsage(0)).allocations).toBe(0);
    await portal.close();
  });

  test("DeviceMemoryMap.read() and write() refuse out-of-bounds ranges with NRT_INVALID", async () => {
    const portal = new DeviceSimPortal({ hbmBytes: 1 << 20 });
    const a = await portal.memAlloc({ device: 0, nc: 0, bytes: 16 });
    expect(statusOf(await portal.memWrite(a, 10, new Uint8Array(8)).catch((e) => e))).toBe(NrtStatus.NRT_INVALID);
    const err = await portal.memRead(a, -1, 2).catch((e) => e);
    expect(statusOf(err)).toBe(NrtStatus.NRT_INVALID);
    expect((err as Error).cause).toBeInstanceOf(RangeError);
    await portal.close();
  });
});
