// Neuron Monitor User Guide, "memory_used": the device breakdown per NeuronCore has constants, model_code,
// model_shared_scratchpad, runtime_memory and tensors; the host breakdown application_memory, constants, dma_buffers
// and tensors; a loaded model's device breakdown constants, model_code, runtime_memory and tensors.
import { describe, expect, test } from "bun:test";
import { createNullLogger, type Portal } from "@nrt/core";
import { DMA_MEM_USAGE_TOTAL, DmaMemUsageType, DmemLedger } from "../../core/dmem/dmem.ts";
import {
  DEVICE_CATEGORY_OF,
  DEVICE_MEMORY_CATEGORIES,
  deviceMemoryBreakdown,
  HOST_CATEGORY_OF,
  HOST_MEMORY_CATEGORIES,
  hostMemoryBreakdown,
  modelMemoryBreakdown,
} from "./memory_categories.ts";
import { usageRow } from "./_testing.ts";

describe("DEVICE_CATEGORY_OF / HOST_CATEGORY_OF", () => {
  test("DEVICE_CATEGORY_OF maps every dmem category, and only those, to a documented device category", () => {
    const slots = Object.values(DmaMemUsageType).sort((a, b) => a - b);
    expect(slots.length).toBe(DMA_MEM_USAGE_TOTAL);
    expect(Object.keys(DEVICE_CATEGORY_OF).map(Number).sort((a, b) => a - b)).toEqual(slots);
    expect(Object.keys(HOST_CATEGORY_OF).map(Number).sort((a, b) => a - b)).toEqual(slots);
    for (const s of slots) {
      expect(DEVICE_MEMORY_CATEGORIES).toContain(DEVICE_CATEGORY_OF[s]);
      expect(HOST_MEMORY_CATEGORIES).toContain(HOST_CATEGORY_OF[s]);
    }
  });

  test("DEVICE_CATEGORY_OF puts code and microcode in model_code and the shared scratchpad in its own category", () => {
    const T = DmaMemUsageType;
    expect([T.CODE, T.INSTRUCTIONS, T.UCODE_LIBS, T.UCODE_TABLE].map((s) => DEVICE_CATEGORY_OF[s])).toEqual(
      ["model_code", "model_code", "model_code", "model_code"],
    );
    expect(DEVICE_CATEGORY_OF[T.SHARED_SCRATCHPAD]).toBe("model_shared_scratchpad");
    expect(DEVICE_CATEGORY_OF[T.CONSTANTS]).toBe("constants");
    expect(DEVICE_CATEGORY_OF[T.TENSORS]).toBe("tensors");
    expect(DEVICE_CATEGORY_OF[T.DMA_RINGS]).toBe("runtime_memory");
    expect(HOST_CATEGORY_OF[T.NOTIFICATIONS]).toBe("dma_buffers");
    expect(HOST_CATEGORY_OF[T.CODE]).toBe("application_memory");
  });
});

describe("deviceMemoryBreakdown()", () => {
  test("deviceMemoryBreakdown() folds a 23-slot ledger row and ignores its total slot", () => {
    const row = usageRow({
      CODE: 1000,
      INSTRUCTIONS: 24,
      CONSTANTS: 4096,
      TENSORS: 8192,
      SHARED_SCRATCHPAD: 512,
      MISC: 8,
    });
    expect(row[DMA_MEM_USAGE_TOTAL]).toBe(13832);
    expect(deviceMemoryBreakdown(row)).toEqual({
      constants: 4096,
      model_code: 1024,
      model_shared_scratchpad: 512,
      runtime_memory: 8,
      tensors: 8192,
    });
  });

  test("deviceMemoryBreakdown() reads a short row as zeros past its end", () => {
    expect(deviceMemoryBreakdown([5, 6])).toEqual({
      constants: 0,
      model_code: 5,
      model_shared_scratchpad: 0,
      runtime_memory: 0,
      tensors: 6,
    });
  });

  test("deviceMemoryBreakdown() rejects a negative count naming the slot", () => {
    const row = usageRow({});
    row[DmaMemUsageType.TENSORS] = -1;
    expect(() => deviceMemoryBreakdown(row)).toThrow("Cannot map dmem usage: slot 1 holds -1");
  });

  test("deviceMemoryBreakdown() folds a real DmemLedger row", async () => {
    let next = 1;
    const portal = {
      memAlloc: (r: { device: number; nc: number; bytes: number; location?: "hbm" | "host" }) =>
        Promise.resolve({
          id: next++,
          device: r.device,
          nc: r.nc,
          pa: next * 4096,
          bytes: r.bytes,
          location: r.location ?? "hbm",
        }),
      memFree: () => Promise.resolve(),
    } as unknown as Portal;
    const ledger = new DmemLedger(portal, createNullLogger(), 2 ** 30);
    await ledger.alloc(0, 1, 4096, DmaMemUsageType.UCODE_LIBS);
    await ledger.alloc(0, 1, 1024, DmaMemUsageType.TENSORS);
    const freed = await ledger.alloc(0, 1, 64, DmaMemUsageType.DEBUG);
    await ledger.free(freed);
    expect(deviceMemoryBreakdown(ledger.usage(0, 1))).toEqual({
      constants: 0,
      model_code: 4096,
      model_shared_scratchpad: 0,
      runtime_memory: 0,
      tensors: 1024,
    });
  });
});

describe("hostMemoryBreakdown() / modelMemoryBreakdown()", () => {
  test("hostMemoryBreakdown() adds the process's other memory to application_memory", () => {
    expect(hostMemoryBreakdown(usageRow({ NOTIFICATIONS: 4096, POOL_STDIO: 32, TENSORS: 1024, CODE: 100 }), 5000))
      .toEqual({
        application_memory: 5100,
        constants: 0,
        dma_buffers: 4128,
        tensors: 1024,
      });
  });

  test("modelMemoryBreakdown() counts a model's shared scratchpad as runtime_memory", () => {
    expect(modelMemoryBreakdown(usageRow({ CODE: 1000, CONSTANTS: 4096, SHARED_SCRATCHPAD: 512, RUNTIME: 8 }))).toEqual(
      {
        constants: 4096,
        model_code: 1000,
        runtime_memory: 520,
        tensors: 0,
      },
    );
  });
});
