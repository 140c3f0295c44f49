/**
 * The host state machines and the hardware enums the runtime dispatches on, with the values read from the shipped
 * DWARF.
 *
 * Seed: lifecycle-error-model §1.1–§1.4 (the four machines), §4.4 (`exec_fatal_status`), §2.6 and §4.3
 * (`al_hal_tpb_arch_type`, `al_hal_tpb_eng_type`).
 *
 * @module
 */

/** `NRT_INIT_STATE` — global runtime state (seed: lifecycle-error-model §1.1). */
export const NrtInitState = {
  NRT_STATE_START: 0,
  NRT_STATE_INIT: 1,
  NRT_STATE_CHILD: 2,
  NRT_STATE_CLOSED: 3,
  NRT_STATE_NUM: 4,
} as const;
/** One `NRT_INIT_STATE` value. */
export type NrtInitState = typeof NrtInitState[keyof typeof NrtInitState];

/** `DLR_MODEL_STATE` — per-model state, `dlr_model.state` @+424 (seed: lifecycle-error-model §1.2). */
export const DlrModelState = {
  DMSTATE_INVALID: 0,
  DMSTATE_STARTING: 1,
  DMSTATE_RUNNING: 2,
  DMSTATE_STOPPING: 3,
  DMSTATE_STOPPED: 4,
  DMSTATE_LAST: 5,
} as const;
/** One `DLR_MODEL_STATE` value. */
export type DlrModelState = typeof DlrModelState[keyof typeof DlrModelState];

/** `exec_state` — per-inference state, `exec_request_state.state` @+0 (seed: lifecycle-error-model §1.3). */
export const ExecState = {
  EXEC_STATE_INIT: 0,
  EXEC_STATE_WAIT_BARRIER_PROXY: 1,
  EXEC_STATE_WAIT_CORE: 2,
  EXEC_STATE_DONE: 3,
} as const;
/** One `exec_state` value. */
export type ExecState = typeof ExecState[keyof typeof ExecState];

/** `ERP_STEP` — the verdict of one poll step; enumerators are un-namespaced (seed: lifecycle-error-model §1.4). */
export const ErpStep = {
  ERP_STEP_DONE: 0,
  ERP_STEP_CONTINUE: 1,
  ERP_STEP_FATAL: 2,
} as const;
/** One `ERP_STEP` value. */
export type ErpStep = typeof ErpStep[keyof typeof ErpStep];

/**
 * `exec_fatal_status` — the latched fatal causes. `exec_request_state.exec_fatal_status` @+112 is `bool[2][7]`:
 * per NeuronCore of the request, one flag per enumerator (seed: lifecycle-error-model §4.4).
 */
export const ExecFatalStatus = {
  EXEC_FATAL_STATUS_NONE: 0,
  EXEC_FATAL_STATUS_OOB: 1,
  EXEC_FATAL_STATUS_TIMEOUT: 2,
  EXEC_FATAL_STATUS_SW_NQ_OVERFLOW: 3,
  EXEC_FATAL_STATUS_NETWORK_PROXY: 4,
  EXEC_FATAL_STATUS_BARRIER: 5,
  EXEC_FATAL_STATUS_INVALID: 6,
  EXEC_FATAL_STATUS_COUNT: 7,
} as const;
/** One `exec_fatal_status` value. */
export type ExecFatalStatus = typeof ExecFatalStatus[keyof typeof ExecFatalStatus];

/** `al_hal_tpb_arch_type` — what `al_hal_tpb_get_arch_type` returns (seed: lifecycle-error-model §2.6). */
export const TpbArchType = {
  AL_HAL_TPB_ARCH_TYPE_SUNDA: 2,
  AL_HAL_TPB_ARCH_TYPE_CAYMAN: 3,
  AL_HAL_TPB_ARCH_TYPE_MARIANA: 4,
} as const;
/** One `al_hal_tpb_arch_type` value. */
export type TpbArchType = typeof TpbArchType[keyof typeof TpbArchType];

/** `al_hal_tpb_eng_type` — the five TPB engines; POOL is the GPSIMD/Q7 engine (seed: lifecycle-error-model §4.3). */
export const TpbEngType = {
  PE: 0,
  ACT: 1,
  POOL: 2,
  DVE: 3,
  SP: 4,
} as const;
/** One `al_hal_tpb_eng_type` value. */
export type TpbEngType = typeof TpbEngType[keyof typeof TpbEngType];
/** `AL_HAL_TPB_MAX_ENG`: the number of TPB engines (seed: lifecycle-error-model §4.3). */
export const AL_HAL_TPB_MAX_ENG = 5;

/** `kmgr_exec_mode_t` (seed: lifecycle-error-model §5.1). */
export const KmgrExecMode = {
  KMGR_EXEC_MODE_ASYNC: 0,
  KMGR_EXEC_MODE_EXPLICIT_ASYNC: 1,
} as const;
/** One `kmgr_exec_mode_t` value. */
export type KmgrExecMode = typeof KmgrExecMode[keyof typeof KmgrExecMode];
