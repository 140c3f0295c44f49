/**
 * The dashboard's device-side view of the embedded simulator, built in the composition root (the one place that
 * knows the portal is a `DeviceSimPortal`): what each NeuronCore's 8 Q7 cores execute, the fatal errors the device
 * reported, and the fault API. `@nrt/http-api` sees only the plain {@linkcode DeviceView} and
 * {@linkcode FaultControl} this produces.
 *
 * The Q7 cores are observed by wrapping the simulator's Q7 cluster factory: every dispatch (`fn`, fan-out 1 or 8) and
 * its join (each core's `ok` / `trap` / `oob` / `abort`) passes through the wrapper. Fatal records come from the
 * NeuronCore's notification log (a TPB_ERROR with error_id 0x0a naming a Q7 core marks that core faulted; seed:
 * lifecycle-error-model §4.5), and the completion record of a later run clears the NeuronCore's fault.
 *
 * @module
 */
import { HwErrorCause, NotificationKind, TpbErrorId, TpbErrorMask } from "@nrt/core";
import { defaultQ7Factory, type DeviceSimPortal, type FaultSpec, type Q7ClusterFactory, type Q7ClusterPort } from "@nrt/device-sim";
import type { DeviceView, FaultControl, FaultView, Q7CoreView } from "@nrt/http-api";

/** A record's q7 byte when the record is not about a Q7 core. */
const NO_Q7 = 0xff;

interface CoreTrack {
  state: Q7CoreView["state"];
  fn?: string;
  runs: number;
  detail?: string;
}

interface NcTrack {
  readonly cores: CoreTrack[];
  /** Notification records already read. */
  records: number;
  fault?: string;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

function maskText(mask: number): string {
  const names = Object.entries(TpbErrorMask).filter(([, bit]) => (mask & bit) !== 0).map(([name]) => name);
  return names.length > 0 ? names.join("|") : hex(mask);
}

function hwText(cause: number): string {
  return Object.entries(HwErrorCause).find(([, v]) => v === cause)?.[0] ?? `cause ${cause}`;
}

/**
 * Watches the simulator's Q7 cores and notification records of device 0 for the dashboard.
 *
 * @example Wire it into `nrt serve`'s container
 * ```ts ignore
 * const sim = new SimDeviceView();
 * const container = createNrtContainer({ q7Factory: sim.q7Factory() });
 * sim.attach(container.resolve(Portal) as DeviceSimPortal);
 * createInferenceApp({ runtime, repository, dashboard: { deviceView: sim.view, faults: sim.faults } });
 * ```
 */
export class SimDeviceView {
  readonly #ncs = new Map<number, NcTrack>();
  readonly #injected = new Map<number, FaultSpec>();
  #portal: DeviceSimPortal | undefined;

  /**
   * A Q7 cluster factory that reports every dispatch of `inner`'s clusters to this view.
   *
   * @param inner The factory to wrap (default: the simulator's Worker-based one).
   * @returns The wrapping factory; pass it to `createNrtContainer({ q7Factory })`.
   */
  q7Factory(inner: Q7ClusterFactory = defaultQ7Factory): Q7ClusterFactory {
    return async (options) => {
      const port = await inner(options);
      const track = this.#track(options.nc);
      const each = (cores: number[], f: (c: CoreTrack) => void): void => cores.forEach((c) => track.cores[c] !== undefined && f(track.cores[c]));
      const wrapped: Q7ClusterPort = {
        get memory() {
          return port.memory;
        },
        boot: (fw) => port.boot(fw),
        prepare: (key, wasm) => port.prepare(key, wasm),
        dispatch: (op, signal) => {
          const cores = op.totalCpus === 8 ? [0, 1, 2, 3, 4, 5, 6, 7] : [0];
          each(cores, (c) => {
            c.state = "running";
            c.fn = op.fn;
            c.runs++;
            c.detail = undefined;
          });
          const done = port.dispatch(op, signal);
          done.then(
            (r) => {
              for (const res of r.cores) {
                if (!res.ran) continue;
                each([res.cpu], (c) => {
                  c.state = res.status === "ok" ? "idle" : "faulted";
                  c.detail = res.status === "ok" ? undefined : `${res.status}${res.message === undefined ? "" : `: ${res.message}`}`;
                });
              }
            },
            (e: unknown) => each(cores, (c) => {
              c.state = "faulted";
              c.detail = `aborted: ${e instanceof Error ? e.message : String(e)}`;
            }),
          );
          return done;
        },
        drainStdio: () => port.drainStdio(),
        terminate: () => {
          // A Q7 reset or the fail-stop of a run stuck in a kernel: the Workers are gone.
          for (const c of track.cores) {
            if (c.state === "running") {
              c.state = "faulted";
              c.detail = "stopped while running (the host halted the run)";
            } else if (c.state === "idle") c.state = "off";
          }
          port.terminate();
        },
      };
      return wrapped;
    };
  }

  /**
   * Points the view at the portal built with {@linkcode SimDeviceView.q7Factory}.
   *
   * @param portal The simulator.
   */
  attach(portal: DeviceSimPortal): void {
    this.#portal = portal;
  }

  #track(nc: number): NcTrack {
    let t = this.#ncs.get(nc);
    if (t === undefined) {
      const q7 = this.#portal?.spec.q7CoresPerNc ?? 8;
      t = { cores: Array.from({ length: q7 }, () => ({ state: "off" as const, runs: 0 })), records: 0 };
      this.#ncs.set(nc, t);
    }
    return t;
  }

  /** Reads the NeuronCore's new notification records: fatal ones set its fault (and a named Q7 core's), completions clear it. */
  #readRecords(device: number, nc: number, t: NcTrack): void {
    const log = this.#portal!.records(device, nc);
    for (; t.records < log.length; t.records++) {
      const r = log[t.records];
      if (r.kind === NotificationKind.EXEC_DONE) {
        t.fault = undefined;
      } else if (r.kind === NotificationKind.HW_ERROR) {
        t.fault = `HW_ERROR ${hwText(r.value)}`;
      } else if (r.kind === NotificationKind.TPB_ERROR && r.code === TpbErrorId.FATAL) {
        const what = `TPB_ERROR ${hex(r.code)} ${maskText(r.mask)}`;
        t.fault = r.q7 === NO_Q7 ? what : `${what} on Q7 core ${r.q7}`;
        const core = t.cores[r.q7];
        if (core !== undefined) {
          core.state = "faulted";
          core.detail ??= maskText(r.mask);
        }
      }
    }
  }

  /** The {@linkcode DeviceViewProvider}: Q7 cores, faults per NeuronCore, armed and fired faults. */
  readonly view = (device: number): DeviceView => {
    const portal = this.#portal;
    if (portal === undefined) return { ncs: [] };
    const ncs = Array.from({ length: portal.spec.ncPerDevice }, (_, nc) => {
      const t = this.#track(nc);
      // The factory sees no device index; `nrt serve` drives device 0 only.
      if (device === 0) this.#readRecords(device, nc, t);
      const started = portal.q7Started(device, nc);
      const q7: Q7CoreView[] = t.cores.map((c, core) => ({
        core,
        state: !started && c.state === "idle" ? "off" : c.state,
        runs: c.runs,
        ...(c.fn === undefined ? {} : { fn: c.fn }),
        ...(c.detail === undefined ? {} : { detail: c.detail }),
      }));
      return { nc, q7, ...(t.fault === undefined ? {} : { fault: t.fault }) };
    });
    const pending: FaultView[] = portal.faults.pending(device).map((f) => ({ id: f.id, kind: f.spec.kind, ncs: f.ncs, spec: { ...f.spec } }));
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
