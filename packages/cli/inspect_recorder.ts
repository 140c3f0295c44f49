/**
 * `nrt serve` with `NEURON_RT_INSPECT_ENABLE=1` (libnrt's switch for its inspect output; ours: what it records
 * here): every execution is traced — the runtime's host spans (`onSpan`) and the embedded simulator's device
 * timeline, switched on for every NeuronCore — and `GET /v2/neuron/trace` answers the last finished execution as a
 * Chrome Trace Event document (`neuron/chrome_trace.ts`), the same shape `nrt profile` writes.
 *
 * Bounded: the last 1024 host spans and 16384 device events are kept, read from the device's ring at the end of
 * every execution. The trace of an execution is its spans (by sequence number) and the device events that lie inside
 * its `nrt_execute` span on its NeuronCores (by their start).
 *
 * @module
 */
import type { ExecutionEvent, HostSpan } from "@nrt/core";
import type { DeviceSimPortal, NcTimelineEvent } from "@nrt/device-sim";
import { buildChromeTrace, type ChromeTrace } from "./neuron/chrome_trace.ts";

const KEEP_SPANS = 1024;
const KEEP_EVENTS = 16384;

/** Records every execution of one runtime, and builds the trace of the last one. */
export class InspectRecorder {
  readonly #spans: HostSpan[] = [];
  readonly #events: NcTimelineEvent[] = [];
  #sim: DeviceSimPortal | undefined;
  #device = 0;
  #deviceName = "";
  #last: { seq: number; ncs: readonly number[] } | undefined;
  #lost = 0;

  /** The `Runtime` option `onSpan`. */
  readonly onSpan = (span: HostSpan): void => {
    this.#spans.push(span);
    if (this.#spans.length > KEEP_SPANS) this.#spans.splice(0, this.#spans.length - KEEP_SPANS);
  };

  /** Chain into the `Runtime` option `onExecution`: at each end, the device's events are read. */
  readonly onExecution = (e: ExecutionEvent): void => {
    if (e.phase !== "end") return;
    this.#drain();
    this.#last = { seq: e.seq, ncs: e.ncs };
  };

  /**
   * Switches the device's timeline on for every NeuronCore of `device` and reads it from now on.
   *
   * @param sim The embedded simulator.
   * @param device The runtime's device.
   * @param deviceName How the trace names it, e.g. `cayman (NC-v3)`.
   */
  attach(sim: DeviceSimPortal, device: number, deviceName: string): void {
    this.#sim = sim;
    this.#device = device;
    this.#deviceName = deviceName;
    sim.setTimeline(device, true);
  }

  #drain(): void {
    if (this.#sim === undefined) return;
    const { events, lost } = this.#sim.takeTimeline(this.#device);
    this.#lost += lost;
    this.#events.push(...events);
    if (this.#events.length > KEEP_EVENTS) this.#events.splice(0, this.#events.length - KEEP_EVENTS);
  }

  /** Device events lost because the device's ring wrapped before they were read. */
  get lost(): number {
    return this.#lost;
  }

  /** The trace of the last finished execution, or `undefined` before the first. */
  lastTrace(): ChromeTrace | undefined {
    const last = this.#last;
    if (last === undefined) return undefined;
    this.#drain();
    const spans = this.#spans.filter((s) => s.seq === last.seq);
    const exec = spans.find((s) => s.name === "nrt_execute");
    if (exec === undefined) return undefined;
    // By start: the device records its run's own slice as the run ends, which may be just after the host's call returned.
    const timeline = this.#events.filter((e) =>
      last.ncs.includes(e.nc) && e.start >= exec.start && e.start <= exec.end
    );
    const model = exec.detail ?? "model";
    return buildChromeTrace({ model, device: this.#deviceName, spans, timeline });
  }
}
