/**
 * What the dashboard can learn only from the device itself — the Q7 cores of each NeuronCore and the fault API — as
 * plain data behind functions the composition root passes in. `@nrt/http-api` imports `@nrt/core` only; the
 * composition root (`nrt serve`), which knows the simulator, implements these over `DeviceSimPortal`.
 *
 * @module
 */

/** What one Q7 (GPSIMD pool) core of a NeuronCore is doing. */
export interface Q7CoreView {
  /** Core index 0..7 (the PRID). */
  readonly core: number;
  /**
   * `off`: no Worker runs yet (the NeuronCore never executed a kernel, or its cores were stopped); `running`: a
   * function is executing; `idle`: the last function finished; `faulted`: the last function trapped, went out of
   * bounds or aborted, or the device reported an error record for the core.
   */
  readonly state: "off" | "idle" | "running" | "faulted";
  /** The last function dispatched to the core, if any. */
  readonly fn?: string;
  /** Dispatches the core took part in. */
  readonly runs: number;
  /** Why the core is `faulted` (or what stopped it). */
  readonly detail?: string;
}

/** The device-side view of one NeuronCore. */
export interface NeuronCoreView {
  /** Physical NeuronCore index. */
  readonly nc: number;
  /** Its Q7 cores, index = core. */
  readonly q7: readonly Q7CoreView[];
  /** The last fatal error the device reported on the NeuronCore (text), if any since its last clean run. */
  readonly fault?: string;
}

/** An armed or fired fault, as the dashboard lists it. */
export interface FaultView {
  /** Fault id (from the fault API). */
  readonly id: number;
  /** Kind, e.g. `hbm-ue`. */
  readonly kind: string;
  /** NeuronCores it is armed on (pending) or fired on (one entry per firing). */
  readonly ncs: readonly number[];
  /** The request as injected (plain JSON). */
  readonly spec?: Readonly<Record<string, unknown>>;
}

/** Everything the device reports for the dashboard. */
export interface DeviceView {
  /** One entry per NeuronCore of the device. */
  readonly ncs: readonly NeuronCoreView[];
  /** Armed and fired faults, when the device has a fault API. */
  readonly faults?: { readonly pending: readonly FaultView[]; readonly fired: readonly FaultView[] };
}

/**
 * Reads the device-side view of one device (the composition root's function; it must not throw for a device it
 * knows, and returns quickly: the dashboard calls it on every refresh).
 */
export type DeviceViewProvider = (device: number) => DeviceView;

/** The operator's fault API (a simulator has one; real hardware does not). */
export interface FaultControl {
  /**
   * Arms a fault. `spec` is plain JSON (`{"kind": "hbm-ue", "nc": 0, "atExecution": 1}`, see docs/faults.md).
   *
   * @returns The fault's id and the NeuronCores it is armed on.
   * @throws {RangeError} For an invalid spec (the server answers 400).
   */
  inject(spec: Readonly<Record<string, unknown>>): { readonly id: number; readonly ncs: readonly number[] };
  /**
   * Disarms every fault not yet fired.
   *
   * @returns How many armed (per-NeuronCore) faults were removed.
   */
  clear(): number;
}
