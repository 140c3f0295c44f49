/**
 * The synchronous execute path below `nrt_execute`: exactly one doorbell, then the poll loop of
 * `exec_request_progress_one_step` until DONE, FATAL or the timeout.
 *
 * Seed: runtime-synthesis §3.3 ("execute is one semaphore write, not a program upload": `exec_kickoff_infer →
 * ndl_nc_semaphore_increment`), §3.5 (completion is poll-driven; the caller blocks on a completion eventfd),
 * lifecycle-error-model §1.3/§1.4 (`exec_state` INIT → WAIT_BARRIER_PROXY → WAIT_CORE → DONE; `ERP_STEP`), §5.4
 * (the `NEURON_RT_EXEC_TIMEOUT` budget; timeout → `NRT_TIMEOUT` + `EXEC_FATAL_STATUS_TIMEOUT` + the FATAL-RT line),
 * §5.5 (fail-stop: no retry, no run-stall release on the fault path).
 *
 * @module
 */
import type { Clock } from "../clock.ts";
import { NotificationKind, type NotificationRecord, TpbErrorId } from "../isa.ts";
import type { HalTarget, Khal } from "../khal.ts";
import type { Logger } from "../log.ts";
import { ErpStep, ExecFatalStatus, ExecState } from "../state.ts";
import { NrtStatus, worseStatus } from "../status.ts";
import type { InstalledModel } from "../tdrv/kbl_model_add.ts";

/** The TPB_ERROR subtype bit the simulator sets for an out-of-window access. */
export const TPB_ERROR_MASK_OOB = 0x2;

/** `exec_request_state`: the per-request state the poller advances. */
export interface ExecRequestState {
  /** `exec_state`. */
  state: ExecState;
  /** `exec_rets[2]`: one status per NeuronCore of the request. */
  readonly execRets: number[];
  /** `exec_fatal_status` `bool[2][7]`. */
  readonly execFatalStatus: boolean[][];
  /** TPB_ERROR records seen. */
  readonly errors: NotificationRecord[];
}

/** What one execution needs. */
export interface ExecServices {
  /** HAL. */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Clock (virtual in tests). */
  readonly clock: Clock;
  /** Logger. */
  readonly log: Logger;
  /** Timeout in ms. */
  readonly timeoutMs: number;
}

/** `exec_request_init_state`. */
export function execRequestInitState(): ExecRequestState {
  return {
    state: ExecState.EXEC_STATE_INIT,
    execRets: [NrtStatus.NRT_SUCCESS, NrtStatus.NRT_SUCCESS],
    execFatalStatus: [new Array(7).fill(false), new Array(7).fill(false)],
    errors: [],
  };
}

/**
 * `exec_kickoff_infer` + `exec_wait_round_robin`: rings the model's doorbell once and polls until the stream's
 * EXEC_DONE record, a fatal record or the timeout. Returns the request state; `execRets[0]` is the verdict.
 */
export async function kmgrSyncExec(s: ExecServices, m: InstalledModel, modelName: string): Promise<ExecRequestState> {
  const req = execRequestInitState();
  const tpb = m.tpb;
  const nq = tpb.nq!;
  const expected = m.runs + 1;
  // The one doorbell (seed: runtime-synthesis §3.3).
  await s.target.portal.semaphoreIncrement(s.target.device, tpb.nc, m.doorbell, 1);
  m.runs = expected;
  req.state = ExecState.EXEC_STATE_WAIT_CORE; // no collectives: WAIT_BARRIER_PROXY is passed through at once
  const deadline = s.clock.now() + s.timeoutMs;
  for (;;) {
    const step = await progressOneStep(s, req, m, expected);
    if (step === ErpStep.ERP_STEP_DONE || step === ErpStep.ERP_STEP_FATAL) break;
    const left = deadline - s.clock.now();
    if (left <= 0) {
      req.execRets[0] = worseStatus(req.execRets[0], NrtStatus.NRT_TIMEOUT);
      req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_TIMEOUT] = true;
      s.log.error(
        `(FATAL-RT-UNDEFINED-STATE) [ND ${s.target.device}][NC ${tpb.nc}] execution timeout (${s.timeoutMs} ms) on model ${modelName}, ` +
          `waiting for execution completion notification`,
      );
      await dumpEngineIps(s, tpb.nc);
      break;
    }
    const ac = new AbortController();
    try {
      await Promise.race([
        s.target.portal.notificationWait(s.target.device, tpb.nc, nq.tail, ac.signal),
        s.clock.sleep(left, ac.signal).catch(() => {}),
      ]);
    } finally {
      ac.abort();
    }
  }
  req.state = ExecState.EXEC_STATE_DONE;
  return req;
}

/** `exec_request_progress_one_step`: drains the NQ once and classifies what it finds. */
async function progressOneStep(s: ExecServices, req: ExecRequestState, m: InstalledModel, expected: number): Promise<ErpStep> {
  const { records, overflow } = await s.khal.nqRead(s.target, m.tpb.nc, m.tpb.nq!);
  let done = false;
  for (const r of records) {
    if (r.kind === NotificationKind.EXEC_DONE && r.model === (m.deviceModel & 0xffff) && r.value === expected) done = true;
    else if (r.kind === NotificationKind.TPB_ERROR) req.errors.push(r);
  }
  if (overflow) {
    req.execRets[0] = worseStatus(req.execRets[0], NrtStatus.NRT_EXEC_SW_NQ_OVERFLOW);
    req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_SW_NQ_OVERFLOW] = true;
  }
  if (req.errors.length > 0) return await processErrors(s, req, m);
  if (overflow) return ErpStep.ERP_STEP_FATAL;
  return done ? ErpStep.ERP_STEP_DONE : ErpStep.ERP_STEP_CONTINUE;
}

/** `exec_request_process_errors` (the kernel-fault subset): decode, classify, log, dump IPs, ERP_STEP_FATAL. */
async function processErrors(s: ExecServices, req: ExecRequestState, m: InstalledModel): Promise<ErpStep> {
  let fatal = false;
  for (const r of req.errors) {
    const word = BigInt(r.code) | (BigInt(r.mask) << 8n);
    const subtype = s.khal.errorSubtype(word);
    const text = s.khal.isaErrorText(r.code);
    let status: number;
    if (r.code === TpbErrorId.FATAL && (r.mask & TPB_ERROR_MASK_OOB) !== 0) {
      status = NrtStatus.NRT_EXEC_OOB;
      req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_OOB] = true;
      fatal = true;
    } else if (r.code === TpbErrorId.FATAL) {
      status = NrtStatus.NRT_HW_ERROR;
      req.execFatalStatus[0][ExecFatalStatus.EXEC_FATAL_STATUS_INVALID] = true;
      fatal = true;
    } else {
      status = NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR;
    }
    req.execRets[0] = worseStatus(req.execRets[0], status);
    s.log.error(
      `(FATAL-RT-UNDEFINED-STATE) [ND ${s.target.device}][NC ${m.tpb.nc}] TPB_ERROR error_id 0x${r.code.toString(16)} subtype ${subtype} ` +
        `(${text}) on engine ${r.engine}${r.q7 !== 0xff ? ` Q7 core ${r.q7}` : ""}`,
    );
  }
  await dumpEngineIps(s, m.tpb.nc);
  return fatal ? ErpStep.ERP_STEP_FATAL : ErpStep.ERP_STEP_CONTINUE;
}

/** `exec_print_engine_instruction_pointer` ×5 (PE, ACT, POOL, DVE, SP). */
async function dumpEngineIps(s: ExecServices, nc: number): Promise<void> {
  const ips = await s.khal.readEngineIps(s.target, nc).catch(() => [] as number[]);
  const names = ["PE", "ACT", "POOL", "DVE", "SP"];
  s.log.error(`[ND ${s.target.device}][NC ${nc}] engine instruction pointers: ` + ips.map((ip, i) => `${names[i]}=0x${ip.toString(16)}`).join(" "));
}
