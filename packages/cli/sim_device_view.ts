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
  /**
   * The specs of the faults injected through this view, by id, kept while the fault is armed or among the firings the
   * simulator keeps (`FIRED_FAULTS_KEPT`, ours): the others are dropped at the next injection, so the map is bounded as
   * the firings are.
   */
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

  /**
   * The {@linkcode DeviceViewProvider}: Q7 cores, faults per NeuronCore, armed faults and the newest fired ones (the
   * simulator keeps the newest `FIRED_FAULTS_KEPT` firings of all its devices and counts the others).
   */
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
      this.#forgetGone(portal);
      this.#injected.set(f.id, f.spec);
      return { id: f.id, ncs: f.ncs };
    },
    clear: () => this.#portal?.faults.clear() ?? 0,
  };

  /** Drops the specs of the faults neither armed nor among the firings the simulator still keeps. */
  #forgetGone(portal: DeviceSimPortal): void {
    const kept = new Set<number>();
    for (const f of portal.faults.pending()) kept.add(f.id);
    for (const f of portal.faults.fired()) kept.add(f.id);
    for (const id of [...this.#injected.keys()]) if (!kept.has(id)) this.#injected.delete(id);
  }
}
