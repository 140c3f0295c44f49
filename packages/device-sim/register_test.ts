import "reflect-metadata";
import { describe, expect, test } from "bun:test";
import { container } from "tsyringe";
import { Portal } from "@nrt/core";
import { DeviceSimPortal } from "./device_sim_portal.ts";
import { registerDeviceSim } from "./register.ts";

describe("registerDeviceSim", () => {
  test("registerDeviceSim() puts a DeviceSimPortal under the Portal token of a child container", async () => {
    const child = container.createChildContainer();
    const registered = registerDeviceSim(child, { devices: 2, hbmBytes: 1 << 20 });
    const portal = child.resolve<Portal>(Portal);
    expect(portal).toBe(registered);
    expect(portal).toBeInstanceOf(DeviceSimPortal);
    expect(await portal.devices()).toEqual([
      { index: 0, arch: 3, ncCount: 8, hbmBytes: 1 << 20 },
      { index: 1, arch: 3, ncCount: 8, hbmBytes: 1 << 20 },
    ]);
    expect(container.isRegistered(Portal)).toBe(false);
    await portal.close();
  });
});
