/**
 * The dashboard's device-side view of the embedded simulator, built in the composition root (the one place that
 * knows the portal is a `DeviceSimPortal`): what each NeuronCore's 8 Q7 cores execute, the fatal errors the device
 * reported, and the fault API. `@nrt/http-api` sees only the plain {@linkcode DeviceView} and
 * {@linkcode FaultControl} this produces.
 *
 * The device reports all of it itself, as hardware would: the simulator's agents write every Q7 dispatch and join,
 * and every notification record, to their trace buffers, and the portal's `q7Activity` / `ncFault` read them (a
 * TPB_ERROR with error_id 0x0a naming a Q7 core marks that core faulted, seed: lifecycle-error-model §4.5; a later
 * completion clears the NeuronCore's fault). This view only shapes them for the dashboard. Ours.
 *
 * @module
 */

import type { DeviceSimPortal, FaultSpec } from "@nrt/device-sim";
import type { DeviceView, FaultControl, FaultView, Q7CoreView } from "@nrt/http-api";

/**
 * The simulator's Q7 cores, fatal records and faults, shaped for the dashboard.
 *
 * @example Wire it into `nrt serve`'s composition root
 * ```ts ignore
 * const sim = new SimDeviceView();
 * sim.attach(container.resolve(PortalToken) as DeviceSimPortal);
 * createInferenceApp({ runtime, repository, dashboard: { deviceView: sim.view, faults: sim.faults } });
 * ```
 */
export class SimDeviceView {
  readonly #injected = new Map<number, FaultSpec>();
  #portal: DeviceSimPortal | undefined;

  /**
   * Points the view at the simulator.
   *
   * @param portal The simulator.
   */
  attach(portal: DeviceSimPortal): void {
    this.#portal = portal;
  }

  /** The {@linkcode DeviceViewProvider}: Q7 cores, faults per NeuronCore, armed and fired faults. */
  readonly view = (device: number): DeviceView => {
    const portal = this.#portal;
    if (portal === undefined || device < 0 || device >= portal.deviceCount) return { ncs: [] };
    const ncs = Array.from({ length: portal.spec.ncPerDevice }, (_, nc) => {
      const q7: Q7CoreView[] = portal.q7Activity(device, nc).map((c) => ({
        core: c.core,
        state: c.state,
        runs: c.runs,
        ...(c.fn === undefined ? {} : { fn: c.fn }),
        ...(c.detail === undefined ? {} : { detail: c.detail }),
      }));
      const fault = portal.ncFault(device, nc);
      return { nc, q7, ...(fault === undefined ? {} : { fault }) };
    });
    const pending: FaultView[] = portal.faults.pending(device).map((f) => ({
      id: f.id,
      kind: f.spec.kind,
      ncs: f.ncs,
      spec: { ...f.spec },
    }));
    const fired: FaultView[] = portal.faults.fired().filter((f) => f.device === device).map((f) => {
      const spec = this.#injected.get(f.id);
      return { id: f.id, kind: f.kind, ncs: [f.nc], ...(spec === undefined ? {} : { spec: { ...spec } }) };
    });
    return { ncs, faults: { pending, fired } };
  };

  /** The {@linkcode FaultControl}: the simulator's `faults.inject` and `faults.clear`. */
  readonly faults: FaultControl = {
    inject: (spec) => {
      const portal = this.#portal;
      if (portal === undefined) throw new RangeError("Cannot inject a fault: no simulated device is attached");
      const f = portal.faults.inject(spec as unknown as FaultSpec);
      this.#injected.set(f.id, f.spec);
      return { id: f.id, ncs: f.ncs };
    },
    clear: () => this.#portal?.faults.clear() ?? 0,
  };
}
