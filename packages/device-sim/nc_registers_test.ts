import { describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { DEVICE_IMAGE_BUFFER_MIN_BYTES, ncRegisterLayout, NcRegisters } from "./nc_registers.ts";
import { DeviceSimPortal } from "./device_sim_portal.ts";

/** The byte lengths of the `SharedArrayBuffer`s `make` creates on this thread. */
function sharedBuffersOf(make: () => void): number[] {
  const sizes: number[] = [];
  const Real = globalThis.SharedArrayBuffer;
  globalThis.SharedArrayBuffer = new Proxy(Real, {
    construct(target, args: [number]) {
      sizes.push(args[0]);
      return Reflect.construct(target, args);
    },
  });
  try {
    make();
  } finally {
    globalThis.SharedArrayBuffer = Real;
  }
  return sizes;
}

describe("NcRegisters.forDevice", () => {
  test("a device's Q7 image windows are one buffer past glibc's dynamic mmap threshold, not one per NeuronCore", async () => {
    const imageBytes = ncRegisterLayout(CAYMAN_SPEC).imageBytes;
    let portal: DeviceSimPortal | undefined;
    const sizes = sharedBuffersOf(() => portal = new DeviceSimPortal({ agents: "inline" }));
    try {
      // Per-NeuronCore buffers of 6 MiB each sat under the threshold: freed, glibc kept them in its heap and committed
      // every page on reuse (Deno's calloc), 720 MB resident after 150 device cycles.
      expect(sizes.filter((n) => n === imageBytes)).toEqual([]);
      expect(sizes.filter((n) => n >= DEVICE_IMAGE_BUFFER_MIN_BYTES)).toEqual([CAYMAN_SPEC.ncPerDevice * imageBytes]);
    } finally {
      await portal?.close();
    }
  });

  test("a device with few NeuronCores still gets a buffer past the threshold", () => {
    const spec = { ...CAYMAN_SPEC, ncPerDevice: 2 };
    const regs = NcRegisters.forDevice(spec);
    expect(regs).toHaveLength(2);
    expect(regs[1].buffers.images).toBe(regs[0].buffers.images);
    expect(regs[0].buffers.images.byteLength).toBe(DEVICE_IMAGE_BUFFER_MIN_BYTES);
    expect(DEVICE_IMAGE_BUFFER_MIN_BYTES).toBeGreaterThan(32 * 1024 * 1024);
  });

  test("each NeuronCore's windows are its own, in the reset state, and the agent's view maps the same bytes", () => {
    const regs = NcRegisters.forDevice(CAYMAN_SPEC);
    expect(regs.map((r) => r.runStall)).toEqual(regs.map(() => 0xff));
    regs[1].writeImage("dram", 7, 0, Uint8Array.of(1, 2, 3));
    regs[2].writeImage("iram", 0, 0, Uint8Array.of(9));
    expect(regs[0].image("dram", 7)).toBeUndefined();
    expect(Array.from(regs[1].image("dram", 7)!)).toEqual([1, 2, 3]);
    expect(regs[2].image("iram", 0)![0]).toBe(9);
    const agentSide = new NcRegisters(CAYMAN_SPEC, structuredClone(regs[1].buffers));
    expect(Array.from(agentSide.image("dram", 7)!)).toEqual([1, 2, 3]);
    agentSide.clearImage(7);
    expect(regs[1].image("dram", 7)).toBeUndefined();
    expect(new Uint8Array(regs[1].buffers.images, regs[1].buffers.imageOffset, 8 * 768 * 1024).some((b) => b !== 0))
      .toBe(false);
    expect(regs[2].image("iram", 0)![0]).toBe(9);
  });
});
