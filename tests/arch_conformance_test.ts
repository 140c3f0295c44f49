/**
 * Runs the arch-pack conformance suite (`@nrt/core/testing`'s `khalContract`) for Sunda, Cayman and Mariana, each on
 * the simulator built from its own spec (ARCHITECTURE §3: "one conformance suite runs against every driver").
 */
import { describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";
import { sunda } from "@nrt/arch-sunda";
import type { SiliconSpec } from "@nrt/core/hal";
import { khalContract, type KhalContractSubject } from "@nrt/core/testing";
import { DeviceSimPortal } from "@nrt/device-sim";
import { kernel } from "./_kernels.ts";

function simulator(spec: SiliconSpec): Promise<KhalContractSubject> {
  const sim = new DeviceSimPortal({ spec });
  return Promise.resolve({
    portal: sim,
    spec,
    close: () => sim.close(), // each case closes its simulator, so no Q7 Worker outlives the file
    q7Events: () => sim.q7Events(),
    notificationWaiters: (device: number, nc: number) => sim.notificationWaiters(device, nc),
  });
}

const options = { kernel: (name: string) => Promise.resolve(kernel(name)) };

khalContract({ describe, test, expect }, "sunda", () => sunda, simulator, [], options);
khalContract({ describe, test, expect }, "cayman", () => cayman, simulator, [], options);
khalContract({ describe, test, expect }, "mariana", () => mariana, simulator, [], options);
