/**
 * `exec_request_state` and `exec_request_process_errors`: the per-inference state the poller advances, and the one
 * funnel every device fault crosses — per NeuronCore of the request, the drained error records (decoded by
 * `notification_consume_error_block`) plus the register state the host reads are classified in the seed's order into
 * a status and the latched `exec_fatal_status` flags, the NeuronCores are ranked by `nrt_get_status_priority`
 * (worst wins), and a hardware fault ends the wait with `ERP_STEP_FATAL`.
 *
 * Seed: lifecycle-error-model §1.3 (`exec_request_state`: `state` @+0, `NRT_STATUS exec_rets[2]` @+4), §1.4
 * (`ERP_STEP`), §4.2 (the priority ranking, called twice to keep a running worst across the per-NC scan), §4.3 (the
 * order: consume → HBM UE 1201/1205 → DMA abort 1203 → OOB 1006 → collectives 1200 → network proxy 1206; the
 * FATAL-RT log; `ERP_STEP_FATAL` on any hardware fault), §4.4 (`exec_fatal_status` is `bool[2][7]`, several causes
 * may be flagged on one core), §5.3 (NQ ring full ⇒ `EXEC_FATAL_STATUS_SW_NQ_OVERFLOW` ⇒ 1204), §5.4 (the timeout
 * line, `EXEC_FATAL_STATUS_TIMEOUT`, the three collectives "Suspected hang" strings), §5.5 (the HBM reboot and
 * terminate texts; 1003/1004 complete and only flag the result), §5.2 (`kbl_infer_errors`: `infer_error_flags`
 * `bool[9]`; which class each flag stands for is ours, `kmetric.ts`).
 *
 * @module
 */
import type { NotificationRecord } from "../isa.ts";
import type { Khal } from "../khal.ts";
import type { Logger } from "../log.ts";
import {
  CollectivesHang,
  decodeCollectivesProgress,
  HBM_UE_REPAIRABLE,
  HwErrorCause,
  TpbErrorMask,
} from "../notification/error_record.ts";
import { type ExecErrorEntry, notificationConsumeErrorBlock } from "../notification/notification_consume.ts";
import { ErpStep, ExecFatalStatus, ExecState } from "../state.ts";
import { NrtStatus, worseStatus } from "../status.ts";
import { InferErrorFlag, type KblInferErrors, kblInferErrorsInit } from "./kmetric.ts";

/** NeuronCores one request can span (`exec_rets[2]`: a dual-NC / LNC request). */
export const EXEC_REQUEST_MAX_NCS = 2;

/** `exec_request_state`: the per-request state the poller advances. */
export interface ExecRequestState {
  /** `exec_state`. */
  state: ExecState;
  /** `exec_rets[2]`: one status per NeuronCore of the request. */
  readonly execRets: number[];
  /** `exec_fatal_status` `bool[2][7]`: per NeuronCore, one flag per `EXEC_FATAL_STATUS_*`. */
  readonly execFatalStatus: boolean[][];
  /** The exec error ring: every decoded error record, in order. */
  readonly errors: ExecErrorEntry[];
  /**
   * `kbl_infer_errors` of the request: one byte per error class the classifier saw (`InferErrorFlag`, ours), what
   * `kmetric_update_nds_error_stats` counts (seed §5.2).
   */
  readonly inferErrors: KblInferErrors;
  /** The request's status: the worst of `execRets` by `nrt_get_status_priority` (first wins a tie). */
  status: number;
  /**
   * The wait ended with `ERP_STEP_FATAL`. Not always visible in `status`: the seed's ranking puts 1004 (soft) at
   * CRITICAL, above some fatal causes, so a caller that poisons should test this flag.
   */
  fatal: boolean;
}

/** `exec_request_init_state`. */
export function execRequestInitState(): ExecRequestState {
  // Literals of the seed's `exec_rets[2]` and `bool[2][7]` (the shapes are pinned by the tests): this runs at every
  // execute, and on Bun a literal array is about a fifth of the cost of `new Array(n).fill(v)` (ours).
  return {
    state: ExecState.EXEC_STATE_INIT,
    execRets: [NrtStatus.NRT_SUCCESS, NrtStatus.NRT_SUCCESS],
    execFatalStatus: [
      [false, false, false, false, false, false, false],
      [false, false, false, false, false, false, false],
    ],
    errors: [],
    inferErrors: kblInferErrorsInit(),
    status: NrtStatus.NRT_SUCCESS,
    fatal: false,
  };
}

/** What the host knows about one NeuronCore of the request after a progress step. */
export interface NcErrorScan {
  /** Physical NeuronCore (for the log lines). */
  readonly nc: number;
  /** The records drained this step (non-error records are ignored). */
  readonly records: readonly NotificationRecord[];
  /** The NQ ring overflowed (`exec_check_intc_sw_notif_queue_overflow`). */
  readonly nqOverflow?: boolean;
  /** DMA engines of the request whose state register reads ABORTED (3) (`check_dma_queue_on_aborted_eng`). */
  readonly abortedDmaEngines?: readonly number[];
  /** The completion notification did not arrive within the budget. */
  readonly timedOut?: boolean;
}

/** What the classifier needs besides the scans. */
export interface ProcessErrorsContext {
  /** The arch pack's decode tables. */
  readonly khal: Pick<Khal, "errorSubtype" | "isaErrorText">;
  /** Device index (`ND`). */
  readonly device: number;
  /** Model name, for the log lines. */
  readonly modelName: string;
  /** The execution timeout in ms, for the timeout line. */
  readonly timeoutMs: number;
  /** Where the FATAL-RT lines go. */
  readonly log: Logger;
}

const ENGINE_NAMES: readonly string[] = ["PE", "ACT", "POOL", "DVE", "SP"];

function hex(x: number, width = 2): string {
  return `0x${(x >>> 0).toString(16).padStart(width, "0")}`;
}

/**
 * `exec_request_process_errors`: classifies each NeuronCore's scan (index = the request's NC slot 0 or 1) into
 * `exec_rets[i]` and `exec_fatal_status[i]`, logs the FATAL-RT lines, ranks the NeuronCores into `req.status` and
 * returns `ERP_STEP_FATAL` when any cause is fatal, else `ERP_STEP_CONTINUE` (soft errors: keep polling for the
 * completion).
 *
 * @param ctx Decode tables, names and the logger.
 * @param req The request state, updated in place.
 * @param scans At most two scans, one per NeuronCore of the request.
 * @returns `ERP_STEP_FATAL` or `ERP_STEP_CONTINUE`.
 * @throws {RangeError} If more than two scans are given.
 */
export function execRequestProcessErrors(
  ctx: ProcessErrorsContext,
  req: ExecRequestState,
  scans: readonly NcErrorScan[],
): ErpStep {
  if (scans.length > EXEC_REQUEST_MAX_NCS) {
    throw new RangeError(`A request spans at most ${EXEC_REQUEST_MAX_NCS} NeuronCores, got ${scans.length}`);
  }
  let fatal = false;
  scans.forEach((scan, i) => {
    if (classifyNc(ctx, req, i, scan)) fatal = true;
  });
  // nrt_get_status_priority: a running worst across the per-NC scan (seed §4.2: called twice per scan).
  req.status = req.execRets.reduce((a, b) => worseStatus(a, b), NrtStatus.NRT_SUCCESS as number);
  if (fatal) req.fatal = true;
  return fatal ? ErpStep.ERP_STEP_FATAL : ErpStep.ERP_STEP_CONTINUE;
}

/** One NeuronCore of the scan; returns whether a fatal cause fired. */
function classifyNc(ctx: ProcessErrorsContext, req: ExecRequestState, i: number, scan: NcErrorScan): boolean {
  const { log, device: nd, modelName } = ctx;
  const nc = scan.nc;
  const where = `[ND ${nd}][NC ${nc}]`;
  const flags = req.execFatalStatus[i];
  const infer = req.inferErrors.inferErrorFlags;
  let fatal = false;
  const set = (status: number, flag?: ExecFatalStatus, inferFlag?: InferErrorFlag): void => {
    req.execRets[i] = worseStatus(req.execRets[i], status);
    if (flag !== undefined) flags[flag] = true;
    if (inferFlag !== undefined) infer[inferFlag] = 1;
  };

  // notification_consume_errors → consume_error_block: decode, enqueue, and the NC-UE verdict (1202).
  const consumed = notificationConsumeErrorBlock(ctx.khal, scan.records, { device: nd, nc }, log);
  req.errors.push(...consumed.entries);
  if (consumed.status !== NrtStatus.NRT_SUCCESS) {
    set(consumed.status, undefined, InferErrorFlag.NC_UE);
    fatal = true;
  }
  const hw = (cause: number) => consumed.entries.filter((e) => e.source === "hw" && e.record.value === cause);
  const tpb = consumed.entries.filter((e) => e.source === "tpb");
  for (const e of tpb) {
    const r = e.record;
    const q7 = r.q7 !== 0xff ? ` Q7 core ${r.q7}` : "";
    const seq = e.sequencerText === undefined ? "" : ` [${e.sequencerText}]`;
    const what = `TPB_ERROR error_id ${hex(r.code)} subtype ${e.subtype} (${e.text})${seq} mask ${
      hex(r.mask, 4)
    } on engine ${ENGINE_NAMES[r.engine] ?? r.engine}${q7}`;
    if (e.fatal) log.error(`(FATAL-RT-UNDEFINED-STATE) ${where} ${what}, model ${modelName}`);
    else log.warn(`${where} ${what}, model ${modelName}: the execution completes with its result flagged`);
  }

  // exec_check_hbm_uncorrectable: repairable → 1205 (reload/reboot repairs it), else 1201 (terminate).
  for (const e of hw(HwErrorCause.HBM_UE)) {
    const repairable = (e.record.mask & HBM_UE_REPAIRABLE) !== 0;
    set(
      repairable ? NrtStatus.NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE : NrtStatus.NRT_EXEC_HW_ERR_HBM_UE,
      undefined,
      InferErrorFlag.HBM_UE,
    );
    fatal = true;
    log.error(
      `(FATAL-RT-UNDEFINED-STATE) [ND ${nd}] Uncorrectable HBM memory error is detected. Execution results may be invalid. ` +
        (repairable ? "Please reload the neuron driver or reboot your EC2 instance" : "Please terminate this instance"),
      { nc, address: e.record.aux >>> 0, repairable },
    );
  }

  // check_dma_queue_on_aborted_eng: engine state == 3 ⇒ aborted.
  for (const engine of scan.abortedDmaEngines ?? []) {
    set(NrtStatus.NRT_EXEC_HW_ERR_DMA_ABORT, undefined, InferErrorFlag.DMA_ABORT);
    fatal = true;
    log.error(
      `(FATAL-RT-UNDEFINED-STATE) ${where} DMA engine ${engine} is aborted (engine state 3) on model ${modelName}`,
    );
  }

  // Out-of-bounds device access / tensor transfer → 1006.
  if (tpb.some((e) => e.fatal && (e.record.mask & TpbErrorMask.Q7_OOB) !== 0)) {
    set(NrtStatus.NRT_EXEC_OOB, ExecFatalStatus.EXEC_FATAL_STATUS_OOB, InferErrorFlag.OOB);
    fatal = true;
    log.error(`(FATAL-RT-UNDEFINED-STATE) ${where} out-of-bounds access on model ${modelName}`);
  }

  // Collectives / fabric → 1200, with the proxy's progress selecting one of the three "Suspected hang" strings.
  for (const e of hw(HwErrorCause.COLLECTIVES)) {
    set(NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES, ExecFatalStatus.EXEC_FATAL_STATUS_BARRIER, InferErrorFlag.COLLECTIVES);
    fatal = true;
    const { op, total } = decodeCollectivesProgress(e.record.aux);
    const text = e.record.mask === CollectivesHang.IN_OPERATION
      ? `Suspected hang in collectives operation ${op} out of ${total}`
      : e.record.mask === CollectivesHang.BETWEEN_OPERATIONS
      ? `Suspected hang between the end of collectives operation ${op} and the start of collectives operation ${
        op + 1
      } (out of ${total} total operations)`
      : `missing collectives status on model ${modelName}. Suspected hang in waiting for barrier`;
    log.error(`(FATAL-RT-UNDEFINED-STATE) ${where} ${text}`);
  }

  // Network proxy → 1206.
  for (const e of hw(HwErrorCause.NETWORK_PROXY)) {
    set(
      NrtStatus.NRT_NETWORK_PROXY_FAILURE,
      ExecFatalStatus.EXEC_FATAL_STATUS_NETWORK_PROXY,
      InferErrorFlag.NETWORK_PROXY,
    );
    fatal = true;
    log.error(
      `(FATAL-RT-UNDEFINED-STATE) ${where} network proxy failure (error ${hex(e.record.aux, 8)}) on model ${modelName}`,
    );
  }

  // exec_check_intc_sw_notif_queue_overflow: the NQ ring was full → 1204.
  if (scan.nqOverflow === true) {
    set(NrtStatus.NRT_EXEC_SW_NQ_OVERFLOW, ExecFatalStatus.EXEC_FATAL_STATUS_SW_NQ_OVERFLOW);
    fatal = true;
    log.error(
      `(FATAL-RT-UNDEFINED-STATE) ${where} notification queue overflow on model ${modelName}: records were lost`,
    );
  }

  // The per-NC scan of the wait: no completion within the budget → 5.
  if (scan.timedOut === true) {
    set(NrtStatus.NRT_TIMEOUT, ExecFatalStatus.EXEC_FATAL_STATUS_TIMEOUT, InferErrorFlag.TIMEOUT);
    fatal = true;
    log.error(
      `(FATAL-RT-UNDEFINED-STATE) ${where} execution timeout (${ctx.timeoutMs} ms) on model ${modelName}, ` +
        `waiting for execution completion notification`,
    );
  }

  // A fatal TPB_ERROR no check above explains (a trap, an undecodable slot, a DMA descriptor, a missing function …):
  // a generic hardware error.
  if (!fatal && tpb.some((e) => e.fatal)) {
    set(NrtStatus.NRT_HW_ERROR, ExecFatalStatus.EXEC_FATAL_STATUS_INVALID, InferErrorFlag.TPB_FATAL);
    fatal = true;
  }

  // The soft band (seed §5.5): FP numerical → 1003, anything else recoverable → 1004; the execution completes.
  for (const e of tpb) {
    if (e.fatal) continue;
    if ((e.record.mask & TpbErrorMask.Q7_UNCOMMITTED) !== 0) {
      log.warn(
        `${where} Q7 core ${e.record.q7} returned without customop_cleanup on model ${modelName}: its results are not committed`,
      );
    }
    set(
      (e.record.mask & TpbErrorMask.NUMERICAL) !== 0
        ? NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR
        : NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR,
      undefined,
      InferErrorFlag.TPB_NONFATAL,
    );
  }
  return fatal;
}

/** `al_hal_tpb_eng_type` names, for the instruction-pointer dump. */
export function engineName(engine: number): string {
  return ENGINE_NAMES[engine] ?? `ENG${engine}`;
}
