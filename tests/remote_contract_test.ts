/**
 * The Portal conformance suite (`packages/core/portal_contract.ts`) for the remote backend: a `RemotePortal`
 * talking to an in-process `DeviceDaemon` over an in-memory link (every generation), and to a real daemon process
 * over a Unix socket and over loopback TCP — the same cases the embedded simulator passes
 * (tests/portal_contract_test.ts), no skips.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { SUNDA_SPEC } from "@nrt/arch-sunda";
import type { SiliconSpec } from "@nrt/core/hal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { portalContract, type PortalContractSubject } from "@nrt/core/testing";
import { DeviceDaemon, linkPair, RemotePortal } from "../packages/device-sim/remote/mod.ts";
import { connectDeviceDaemon, parseAddress } from "../packages/cli/transports.ts";
import { type DaemonProc, startDaemon, tempDir } from "./_remote.ts";

function inMemory(spec: SiliconSpec): () => Promise<PortalContractSubject> {
  return async () => {
    const sim = new DeviceSimPortal({ spec });
    const daemon = new DeviceDaemon({ portal: sim, spec, resetCore: (d, nc) => sim.resetQ7(d, nc) });
    const portal = await RemotePortal.connect(linkPair((l) => daemon.accept(l)), { pid: 1, name: "contract" });
    return {
      portal,
      spec,
      notificationWaiters: (d, nc) => portal.pendingWaits(d, nc),
      close: async () => {
        await portal.close();
        await daemon.close();
        await sim.close(); // no Q7 Worker outlives the file
      },
    };
  };
}

portalContract({ describe, test, expect }, "RemotePortal over memory", inMemory(CAYMAN_SPEC));
portalContract({ describe, test, expect }, "RemotePortal over memory sunda", inMemory(SUNDA_SPEC));
portalContract({ describe, test, expect }, "RemotePortal over memory mariana", inMemory(MARIANA_SPEC));

// One daemon process per transport, shared by the cases; each case is a fresh connection (a fresh session whose
// leftovers the daemon reclaims when it closes).
const dir = tempDir();
const daemons = new Map<string, Promise<DaemonProc>>();
afterAll(() => {
  for (const d of daemons.values()) void d.then((p) => p.kill(), () => {});
  dir.remove();
});

function overProcess(where: "unix" | "tcp"): () => Promise<PortalContractSubject> {
  return async () => {
    if (!daemons.has(where)) {
      daemons.set(where, startDaemon(where === "unix" ? { socket: `${dir.path}/contract.sock` } : { port: 0 }));
    }
    const d = await daemons.get(where)!;
    const portal = await connectDeviceDaemon(parseAddress(d.address), {
      name: `contract-${where}`,
      requestTimeoutMs: 20_000,
    });
    return {
      portal,
      spec: CAYMAN_SPEC,
      notificationWaiters: (dev, nc) => portal.pendingWaits(dev, nc),
      close: () => portal.close(),
    };
  };
}

portalContract({ describe, test, expect }, "RemotePortal over a Unix socket to nrt device-sim", overProcess("unix"));
portalContract({ describe, test, expect }, "RemotePortal over loopback TCP to nrt device-sim", overProcess("tcp"));
