/**
 * Runs the Portal conformance suite (`packages/core/portal_contract.ts`) for the embedded simulator of each
 * generation, bare and behind the tracing decorator (seed: runtime-synthesis §1.2 layer 4).
 */
import { describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { SUNDA_SPEC } from "@nrt/arch-sunda";
import type { SiliconSpec } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { portalContract, type PortalContractSubject } from "@nrt/core/testing";

function simulator(spec: SiliconSpec, traced: boolean): () => Promise<PortalContractSubject> {
  return () => {
    const sim = new DeviceSimPortal({ spec });
    return Promise.resolve({
      portal: traced ? new TracingPortal(sim) : sim,
      spec: sim.spec,
      close: () => sim.close(), // every case closes its simulator: no Q7 Worker outlives the file
      notificationWaiters: (device: number, nc: number) => sim.notificationWaiters(device, nc),
    });
  };
}

portalContract({ describe, test, expect }, "DeviceSimPortal", simulator(CAYMAN_SPEC, false));
portalContract({ describe, test, expect }, "TracingPortal(DeviceSimPortal)", simulator(CAYMAN_SPEC, true));
portalContract({ describe, test, expect }, "DeviceSimPortal sunda", simulator(SUNDA_SPEC, false));
portalContract({ describe, test, expect }, "DeviceSimPortal mariana", simulator(MARIANA_SPEC, false));
