/**
 * The synchronous execute path below `nrt_execute`: exactly one doorbell, then the poll loop of
 * `exec_request_progress_one_step` — drain the notification queue, drain the pool_stdio rings, classify any error
 * records — until DONE, FATAL or the timeout.
 *
 * Seed: runtime-synthesis §3.3 ("execute is one semaphore write, not a program upload": `exec_kickoff_infer →
 * ndl_nc_semaphore_increment`), §3.5 (completion is poll-driven; the caller blocks on a completion eventfd; the soft
 * stdio channel is drained in the same step), lifecycle-error-model §1.3/§1.4 (`exec_state` INIT →
 * WAIT_BARRIER_PROXY → WAIT_CORE → DONE; `ERP_STEP`), §4.3 (`exec_request_process_errors`, the per-engine
 * instruction-pointer dump ×5), §5.3 (the completion drain), §5.4 (the `NEURON_RT_EXEC_TIMEOUT` budget; timeout →
 * `NRT_TIMEOUT` + `EXEC_FATAL_STATUS_TIMEOUT` + the FATAL-RT line), §5.5 (fail-stop: no retry, no core reset, no
 * run-stall release on the fault path), spmd-teardown §5.6 (the 8×2 stdio drain on every progress step), §5.2 (the
 * path ends with `kmetric_update_nds_error_stats(kbl_infer_errors*)` then `kmetric_update_nds_exec_stats` with the
 * final status: `kmetric.ts`).
 *
 * On a fatal verdict the host only logs and reports (seed §5.5: "The host's only mechanical reaction to a hardware
 * fault is to log and report"): the FATAL-RT lines, the per-engine instruction-pointer dump, the status. It writes
 * nothing to the device — no halt request, no stream-table write, no reset. A run the device is still stuck in (a
 * kernel in an endless loop, a stalled sequencer) is the device's own to contain: the simulated device's watchdog
 * drops it (`@nrt/device-sim`, ours), as recovery of the engine is the management core's job in the seed.
 *
 * @module
 */
import type { Clock } from "../clock.ts";
import { hostClockMs, type HostSpanListener } from "../host_span.ts";
import { NotificationKind } from "../isa.ts";
import type { HalTarget, Khal } from "../khal.ts";
import type { Logger } from "../log.ts";
import { DmaEngineState, dmaEngineStateAddr, TpbErrorMask } from "../notification/error_record.ts";
import { isErrorRecord } from "../notification/notification_consume.ts";
import { ErpStep, ExecState } from "../state.ts";
import { poolStdioBlockDrain } from "../stdio/pool_stdio.ts";
import { collectCustomOpQueues, type InstalledModel } from "../tdrv/kbl_model_add.ts";
import {
  engineName,
  execRequestInitState,
  execRequestProcessErrors,
  type ExecRequestState,
  type ProcessErrorsContext,
} from "./exec_request.ts";
import type { ArmedBudget, ExecWaits } from "./exec_waits.ts";
import { type KmetricTarget, kmetricUpdate } from "./kmetric.ts";

export { execRequestInitState, type ExecRequestState } from "./exec_request.ts";

/** The abort reason that releases an execution's completion wait and timer once it has settled. */
const EXEC_SETTLED = new Error("execution settled");

/** The TPB_ERROR subtype bit the simulator sets for an out-of-window access (alias of `TpbErrorMask.Q7_OOB`). */
export const TPB_ERROR_MASK_OOB: number = TpbErrorMask.Q7_OOB;

/** What one execution needs. */
export interface ExecServices {
  /** HAL. */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Clock (virtual in tests). */
  readonly clock: Clock;
  /** Logger: FATAL-RT lines, and the kernels' printf output drained from pool_stdio. */
  readonly log: Logger;
  /** `NEURON_RT_EXEC_TIMEOUT` in ms. */
  readonly timeoutMs: number;
  /** Hears the timed steps of the execution (`host_span.ts`); absent, nothing is timed. */
  readonly onSpan?: HostSpanListener;
  /** Where the execution's statistics go (`kmetric_update_nds_*`, seed §5.2); absent, nothing is counted. */
  readonly kmetric?: KmetricTarget;
  /**
   * The runtime's execution budgets on one timer (`exec_waits.ts`, ours): a runtime passes it for model executions
   * and collectives alike. Absent (a caller outside a runtime), the execution keeps its own timer and abort signal.
   */
  readonly waits?: ExecWaits;
}

/**
 * `exec_kickoff_infer` + `exec_wait_round_robin`: rings the model's doorbell once and polls until the stream's
 * EXEC_DONE record, a fatal verdict or the timeout. Returns the request state; `status` (equal to `execRets[0]` for a
 * one-NeuronCore request) is the verdict.
 *
 * @param s Services; `s.clock` bounds the wait at `s.timeoutMs`.
 * @param m The installed model.
 * @param modelName The model's name, for the log lines.
 * @param seq The runtime's execution number, for the timed steps.
 * @returns The final request state.
 */
export async function kmgrSyncExec(
  s: ExecServices,
  m: InstalledModel,
  modelName: string,
  seq?: number,
): Promise<ExecRequestState> {
  const req = execRequestInitState();
  const tpb = m.tpb;
  const nq = tpb.nq!;
  const expected = m.runs + 1;
  // The host blocks on its completion eventfd (seed: runtime-synthesis §3.5). The wait is armed BEFORE the doorbell:
  // its condition (the NQ head moving past the host's tail) cannot be missed, and the host has nothing left to do
  // while the device runs — a simulated device shares the machine's cores with the host.
  const deadline = s.clock.now() + s.timeoutMs;
  const budget: Budget = s.waits !== undefined
    ? new SharedBudget(s, s.waits, tpb.nc, deadline)
    : ownBudget(s, tpb.nc, deadline);
  const onSpan = s.onSpan;
  let step: ErpStep = ErpStep.ERP_STEP_CONTINUE;
  try {
    let woken = budget.wait(nq.tail);
    // The one doorbell (seed: runtime-synthesis §3.3).
    const rung = onSpan === undefined ? 0 : hostClockMs();
    await s.target.portal.semaphoreIncrement(s.target.device, tpb.nc, m.doorbell, 1);
    onSpan?.({ name: "doorbell", start: rung, end: hostClockMs(), nc: tpb.nc, seq });
    m.runs = expected;
    req.state = ExecState.EXEC_STATE_WAIT_BARRIER_PROXY;
    req.state = ExecState.EXEC_STATE_WAIT_CORE; // no collectives proxy: the barrier state is passed through at once
    for (;;) {
      const waited = onSpan === undefined ? 0 : hostClockMs();
      const timedOut = await woken;
      onSpan?.({ name: "completion_wait", start: waited, end: hostClockMs(), nc: tpb.nc, seq });
      step = await progressOneStep(s, req, m, expected, modelName, seq);
      if (step !== ErpStep.ERP_STEP_CONTINUE) break;
      if (timedOut || deadline - s.clock.now() <= 0) {
        step = execRequestProcessErrors(errorsContext(s, modelName), req, [{
          nc: tpb.nc,
          records: [],
          timedOut: true,
        }]);
        break;
      }
      woken = budget.wait(nq.tail);
    }
  } finally {
    budget.settle();
  }
  if (step === ErpStep.ERP_STEP_FATAL) await dumpEngineIps(s, tpb.nc);
  req.state = ExecState.EXEC_STATE_DONE;
  // Final status + telemetry (seed §5.2): the error flags first, then the execution by its final status.
  if (s.kmetric !== undefined) kmetricUpdate(s.kmetric, tpb.nc, req.inferErrors, req.status);
  return req;
}

/** What `exec_request_process_errors` needs for its log lines (made only when there is an error to report). */
function errorsContext(s: ExecServices, modelName: string): ProcessErrorsContext {
  return { khal: s.khal, device: s.target.device, modelName, timeoutMs: s.timeoutMs, log: s.log };
}

/** One execution's `NEURON_RT_EXEC_TIMEOUT` budget and its completion waits. */
interface Budget {
  /** Waits for the NQ head to leave `tail` or the budget to pass; resolves `true` when the budget passed. */
  wait(tail: number): Promise<boolean>;
  /** The execution is over: its budget and any wait still pending end. */
  settle(): void;
}

/** A budget on the runtime's timer (`exec_waits.ts`): this object and one armed entry per execution. */
class SharedBudget implements Budget {
  readonly #s: ExecServices;
  readonly #waits: ExecWaits;
  readonly #nc: number;
  readonly #armed: ArmedBudget;
  #pending = false;

  constructor(s: ExecServices, waits: ExecWaits, nc: number, deadline: number) {
    this.#s = s;
    this.#waits = waits;
    this.#nc = nc;
    this.#armed = waits.arm(nc, deadline);
  }

  async wait(tail: number): Promise<boolean> {
    const { portal, device } = this.#s.target;
    this.#pending = true;
    try {
      await portal.notificationWait(device, this.#nc, tail, this.#waits.signal(this.#nc));
    } catch {
      // The wait ends either way; the poll that follows reads what the device did.
    }
    this.#pending = false;
    return this.#armed.expired;
  }

  settle(): void {
    this.#armed.cancel();
    if (this.#pending) this.#waits.interrupt(this.#nc); // left early (the doorbell failed): end the wait still pending
  }
}

/** A budget with a timer and an abort signal of its own (a caller outside a runtime). */
function ownBudget(s: ExecServices, nc: number, deadline: number): Budget {
  const { portal, device } = s.target;
  const ac = new AbortController();
  return {
    wait: (tail) => {
      const timer = s.clock.sleep(Math.max(0, deadline - s.clock.now()), ac.signal).then(() => true, () => false);
      return Promise.race([portal.notificationWait(device, nc, tail, ac.signal).then(() => false), timer]);
    },
    // A reason of our own: aborting without one makes a DOMException with a stack trace (~25 µs on JavaScriptCore,
    // on every execute).
    settle: () => ac.abort(EXEC_SETTLED),
  };
}

/** `exec_request_progress_one_step`: drains the NQ and the stdio rings once and classifies what the NQ held. */
async function progressOneStep(
  s: ExecServices,
  req: ExecRequestState,
  m: InstalledModel,
  expected: number,
  modelName: string,
  seq: number | undefined,
): Promise<ErpStep> {
  const tpb = m.tpb;
  // The NQ drain and the stdio drain of one step, in flight together (independent rings; a remote portal pipelines
  // their reads).
  const onSpan = s.onSpan;
  const t0 = onSpan === undefined ? 0 : hostClockMs();
  const nqRead = s.khal.nqRead(s.target, tpb.nc, tpb.nq!);
  const stdioDrain = poolStdioBlockDrain(s, tpb.stdio);
  // The closures that time them live in a function of their own: captured here, this step's locals would be allocated
  // in a scope of their own at every step, timed or not.
  if (onSpan !== undefined) timeSteps(onSpan, t0, tpb.nc, seq, nqRead, stdioDrain);
  const [{ records, overflow }] = await Promise.all([nqRead, stdioDrain]);
  let done = false, errorCount = 0;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    if (r.kind === NotificationKind.EXEC_DONE && r.model === (m.deviceModel & 0xffff) && r.value === expected) {
      done = true;
    }
    if (isErrorRecord(r)) errorCount++;
  }
  if (errorCount > 0 || overflow) {
    const errors = records.filter(isErrorRecord);
    const abortedDmaEngines = errors.length > 0 ? await abortedEngines(s, m) : [];
    const v = execRequestProcessErrors(errorsContext(s, modelName), req, [{
      nc: tpb.nc,
      records: errors,
      nqOverflow: overflow,
      abortedDmaEngines,
    }]);
    if (v === ErpStep.ERP_STEP_FATAL) return v;
  }
  return done ? ErpStep.ERP_STEP_DONE : ErpStep.ERP_STEP_CONTINUE;
}

/** A rejection handled elsewhere (the step awaits the same promise). */
const ignore = (): void => {};

/** Reports the NQ read and the stdio drain of a progress step when each settles. */
function timeSteps(
  onSpan: HostSpanListener,
  t0: number,
  nc: number,
  seq: number | undefined,
  nqRead: Promise<unknown>,
  stdioDrain: Promise<unknown>,
): void {
  nqRead.then(() => onSpan({ name: "nq_read", start: t0, end: hostClockMs(), nc, seq }), ignore);
  stdioDrain.then(() => onSpan({ name: "pool_stdio_drain", start: t0, end: hostClockMs(), nc, seq }), ignore);
}

/** `check_dma_queue_on_aborted_eng`: the request's DMA engines whose state register reads ABORTED (3). */
async function abortedEngines(s: ExecServices, m: InstalledModel): Promise<number[]> {
  const engines = [...new Set(collectCustomOpQueues(s.khal).map((q) => q.engine))];
  const out: number[] = [];
  for (const e of engines) {
    const state = await s.target.portal.barRead32(s.target.device, 0, dmaEngineStateAddr(s.khal.spec, m.tpb.nc, e));
    if (state === DmaEngineState.ABORTED) out.push(e);
  }
  return out;
}

/** `exec_print_engine_instruction_pointer` ×5 (PE, ACT, POOL, DVE, SP). */
async function dumpEngineIps(s: ExecServices, nc: number): Promise<void> {
  const ips = await s.khal.readEngineIps(s.target, nc).catch(() => [] as number[]);
  s.log.error(
    `[ND ${s.target.device}][NC ${nc}] engine instruction pointers: ` +
      ips.map((ip, i) => `${engineName(i)}=0x${ip.toString(16)}`).join(" "),
  );
}
