import { describe, expect, test } from "bun:test";
import {
  type ArmedFault,
  type DeviceSimPortal,
  FaultInjector,
  FIRED_FAULTS_KEPT,
  type FiredFault,
  NcFaults,
} from "@nrt/device-sim";
import { SimDeviceView } from "./sim_device_view.ts";

/**
 * The part of a `DeviceSimPortal` the view reads: one device of `ncs` NeuronCores whose fault ports this thread plays
 * (`fire` takes the faults due on a NeuronCore), with idle Q7 cores.
 */
function fakePortal(ncs: number) {
  const fired: FiredFault[] = [];
  const ports = Array.from(
    { length: ncs },
    (_, nc) => new NcFaults((f, run) => fired.push({ id: f.id, kind: f.spec.kind, device: 0, nc, run })),
  );
  const faults = new FaultInjector(1, ncs, { q7Cores: 8, dmaEngines: 16 }, {
    arm: (_device: number, nc: number, fault: ArmedFault) => ports[nc].arm(fault),
    disarm: (_device: number, id: number | undefined) => ports.forEach((p) => p.disarm(id)),
    firings: () => fired.splice(0),
  });
  const portal = {
    deviceCount: 1,
    spec: { ncPerDevice: ncs },
    faults,
    q7Activity: () => [],
    ncFault: () => undefined,
  };
  return { portal: portal as unknown as DeviceSimPortal, fire: (nc: number) => ports[nc].take("instruction").length };
}

describe("SimDeviceView", () => {
  test("lists the newest FIRED_FAULTS_KEPT firings with their specs, however many fired", () => {
    const { portal, fire } = fakePortal(2);
    const sim = new SimDeviceView();
    sim.attach(portal);
    const total = 3 * FIRED_FAULTS_KEPT;
    for (let i = 0; i < total; i++) {
      sim.faults.inject({ kind: "recoverable", nc: i % 2 });
      expect(fire(i % 2)).toBe(1);
    }
    sim.faults.inject({ kind: "hbm-ue", nc: 1, atExecution: 3 });
    const faults = sim.view(0).faults!;
    expect(faults.pending.map((f) => [f.id, f.kind, f.ncs])).toEqual([[total + 1, "hbm-ue", [1]]]);
    expect(faults.fired.length).toBe(FIRED_FAULTS_KEPT);
    expect(faults.fired[0].id).toBe(total - FIRED_FAULTS_KEPT + 1);
    expect(faults.fired.at(-1)).toEqual({
      id: total,
      kind: "recoverable",
      ncs: [1],
      spec: { kind: "recoverable", nc: 1 },
    });
    expect(faults.fired.every((f) => f.spec?.kind === "recoverable")).toBe(true);
    expect(portal.faults.firedDropped()).toBe(total - FIRED_FAULTS_KEPT);
    // What the dashboard sends in every state document and event stays the size of the newest firings.
    expect(JSON.stringify(sim.view(0)).length).toBeLessThan(64 * 1024);
  });

  test("refuses a spec with a number JSON cannot write, naming it as sent", () => {
    const { portal } = fakePortal(1);
    const sim = new SimDeviceView();
    sim.attach(portal);
    expect(() => sim.faults.inject(JSON.parse('{"kind": "hang", "atExecution": 1e999}'))).toThrow(
      '"atExecution" is Infinity, expected an integer from 1 to 2147483647',
    );
    expect(sim.view(0).faults).toEqual({ pending: [], fired: [] });
  });
});
