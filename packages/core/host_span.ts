/**
 * The runtime's opt-in span hook: a profiler (`nrt profile`, `nrt serve` with `NEURON_RT_INSPECT_ENABLE`) passes
 * `onSpan` to `Runtime.init` and hears, as they end, the host's steps of a load (NEFF parse, KELF, `kbl_model_add`
 * per NeuronCore, checkpoint writes) and of an execution (`kmgr_exec_pre`, `kbl_compute_setup`, the doorbell, the
 * completion wait, each NQ read and pool_stdio drain, the copy-out). Without a listener no clock is read. Times are
 * milliseconds of the clock the host and the device's Workers share, `performance.timeOrigin + performance.now()`,
 * so host spans and the device's timeline line up. Ours: the seeds describe no profiler hook.
 *
 * @module
 */

/** One finished host step. */
export interface HostSpan {
  /** The step, named after the libnrt function it models where there is one (`kbl_model_add`, `doorbell`, …). */
  readonly name: string;
  /** Start, ms of the shared clock. */
  readonly start: number;
  /** End, ms of the shared clock. */
  readonly end: number;
  /** The physical NeuronCore the step acts on, when it acts on one. */
  readonly nc?: number;
  /** Runtime-wide execution sequence number (`ExecutionEvent.seq`) of an execution's steps. */
  readonly seq?: number;
  /** A short detail: the model name of a load, the bytes of a copy. */
  readonly detail?: string;
}

/** Hears every host span as it ends (must not throw, and must return quickly: it runs on the execute path). */
export type HostSpanListener = (span: HostSpan) => void;

/** The shared clock in milliseconds: `performance.timeOrigin + performance.now()`, the same in every Worker. */
export function hostClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * `listener`, made safe to call on the execute path (ours): a throw is logged once, as a warning, and otherwise
 * ignored. A span is heard in the middle of the device protocol (after the doorbell, between progress steps), where
 * an exception would leave the host's count of the model's runs behind the device's.
 *
 * @param listener The listener given to the runtime.
 * @param log Where the first throw is reported.
 * @returns A listener that never throws.
 */
export function safeSpanListener(
  listener: HostSpanListener,
  log: { warn(message: string): void },
): HostSpanListener {
  let reported = false;
  return (span) => {
    try {
      listener(span);
    } catch (e) {
      if (reported) return;
      reported = true;
      log.warn(
        `The onSpan listener threw at span "${span.name}" (${e instanceof Error ? e.message : String(e)}); ` +
          "the runtime goes on, and later throws of it are not logged",
      );
    }
  };
}
