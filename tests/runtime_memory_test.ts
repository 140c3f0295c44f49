/**
 * `Runtime.memory()`: the read-only view of the device memory a runtime booked — per NeuronCore the total, its HBM
 * and host-DRAM shares and the bytes per `dma_mem_usage_type` category (the categories: lifecycle-error-model §2.6,
 * `memory_usage_nc[nc][23]`; the location split is ours).
 */
import { describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { DmaMemUsageType, MemoryLogger, Runtime } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";

describe("Runtime.memory()", () => {
  test("splits each core's bookings by location and category, and follows a tensor's allocation and free", async () => {
    const sim = new DeviceSimPortal();
    await using rt = await Runtime.init({
      portal: sim,
      archPacks: [cayman],
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      logger: new MemoryLogger(),
    });
    const before = rt.memory();
    expect(before.cores.map((c) => [c.nc, c.vnc])).toEqual([[0, 0], [1, 1]]);
    for (const c of before.cores) {
      // Bring-up books the notification ring in host DRAM and the pool_stdio block in HBM.
      expect(c.byUsageHost[DmaMemUsageType.NOTIFICATIONS]).toBeGreaterThan(0);
      expect(c.byUsage[DmaMemUsageType.POOL_STDIO]).toBeGreaterThan(0);
      expect(c.byUsageHost[DmaMemUsageType.POOL_STDIO]).toBeLessThan(c.byUsage[DmaMemUsageType.POOL_STDIO]);
      expect(c.total).toBe(c.hbm + c.host);
      expect(c.byUsage.reduce((a, b) => a + b, 0)).toBe(c.total);
    }
    const t = await rt.allocateTensor({ vnc: 1, size: 4096, name: "t" });
    const during = rt.memory();
    expect(during.cores[1].byUsage[DmaMemUsageType.TENSORS] - before.cores[1].byUsage[DmaMemUsageType.TENSORS]).toBe(
      4096,
    );
    expect(during.cores[1].hbm - before.cores[1].hbm).toBe(4096);
    expect(during.hbmUsed - before.hbmUsed).toBe(4096);
    expect(during.cores[0]).toEqual(before.cores[0]);
    await t.free();
    expect(rt.memory()).toEqual(before);
  }, 30_000);
});
