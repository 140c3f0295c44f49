/**
 * Runs the Portal conformance suite (`packages/core/portal_contract.ts`) for the embedded simulator of each
 * generation, bare and behind the tracing decorator (seed: runtime-synthesis §1.2 layer 4).
 */
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { SUNDA_SPEC } from "@nrt/arch-sunda";
import { type SiliconSpec, TracingPortal } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { portalContract, type PortalContractSubject } from "../packages/core/portal_contract.ts";

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

portalContract("DeviceSimPortal", simulator(CAYMAN_SPEC, false));
portalContract("TracingPortal(DeviceSimPortal)", simulator(CAYMAN_SPEC, true));
portalContract("DeviceSimPortal sunda", simulator(SUNDA_SPEC, false));
portalContract("DeviceSimPortal mariana", simulator(MARIANA_SPEC, false));
