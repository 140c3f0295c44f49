/**
 * Runs the arch-pack conformance suite (`packages/core/khal_contract.ts`) for Sunda, Cayman and Mariana, each on
 * the simulator built from its own spec (ARCHITECTURE §3: "one conformance suite runs against every driver").
 */
import { CaymanKhal } from "@nrt/arch-cayman";
import { MarianaKhal } from "@nrt/arch-mariana";
import { SundaKhal } from "@nrt/arch-sunda";
import type { SiliconSpec } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { khalContract, type KhalContractSubject } from "../packages/core/khal_contract.ts";
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

khalContract("sunda", () => new SundaKhal(), simulator, [], options);
khalContract("cayman", () => new CaymanKhal(), simulator, [], options);
khalContract("mariana", () => new MarianaKhal(), simulator, [], options);
