/**
 * The host's only return channel: the flat `NRT_STATUS` enum (28 values in three numeric bands), its text, and the
 * multi-NeuronCore priority ranking.
 *
 * Seed: lifecycle-error-model §4.1 (the 28 enumerators, read from DWARF; gaps at 8 and 12 are reserved) and §4.2
 * (`nrt_get_status_priority` @0xb9790, reconstructed byte for byte). Names and values also match the public
 * `nrt_status.h`.
 *
 * @module
 */

/** `NRT_STATUS` (seed: lifecycle-error-model §4.1). Band A 0..15, band B 101 and 1002..1100, band C 1200..1206. */
export const NrtStatus = {
  // Band A: generic runtime status.
  NRT_SUCCESS: 0,
  NRT_FAILURE: 1,
  NRT_INVALID: 2,
  NRT_INVALID_HANDLE: 3,
  NRT_RESOURCE: 4,
  NRT_TIMEOUT: 5,
  NRT_HW_ERROR: 6,
  NRT_QUEUE_FULL: 7,
  NRT_LOAD_NOT_ENOUGH_NC: 9,
  NRT_UNSUPPORTED_NEFF_VERSION: 10,
  NRT_FAIL_HOST_MEM_ALLOC: 11,
  NRT_UNINITIALIZED: 13,
  NRT_CLOSED: 14,
  NRT_QUEUE_EMPTY: 15,
  // Band B: execution result.
  NRT_EXEC_UNIT_UNRECOVERABLE: 101,
  NRT_EXEC_BAD_INPUT: 1002,
  NRT_EXEC_COMPLETED_WITH_NUM_ERR: 1003,
  NRT_EXEC_COMPLETED_WITH_ERR: 1004,
  NRT_EXEC_NC_BUSY: 1005,
  NRT_EXEC_OOB: 1006,
  NRT_COLL_PENDING: 1100,
  // Band C: hardware fault during execution (the fail-stop band).
  NRT_EXEC_HW_ERR_COLLECTIVES: 1200,
  NRT_EXEC_HW_ERR_HBM_UE: 1201,
  NRT_EXEC_HW_ERR_NC_UE: 1202,
  NRT_EXEC_HW_ERR_DMA_ABORT: 1203,
  NRT_EXEC_SW_NQ_OVERFLOW: 1204,
  NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE: 1205,
  NRT_NETWORK_PROXY_FAILURE: 1206,
} as const;

/** One `NRT_STATUS` value. */
export type NrtStatus = typeof NrtStatus[keyof typeof NrtStatus];

/**
 * Whether an execution status carries the fail-stop posture: Band C, 1200..1206 (seed: lifecycle-error-model §4.1,
 * "Only Band-C codes carry the fail-stop posture"). Such a model stays RUNNING but poisoned until `nrt_unload`
 * (§5.5, §6); every other verdict — Band A (a timeout, a generic hardware error) and Band B (OOB, the soft 1003/1004)
 * — leaves the model re-runnable ("it may be re-run or explicitly unloaded", runtime-synthesis §5.6).
 */
export function isFailStop(status: number): boolean {
  return status >= NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES && status <= NrtStatus.NRT_NETWORK_PROXY_FAILURE;
}

const NAME_BY_CODE: ReadonlyMap<number, string> = new Map(
  Object.entries(NrtStatus).map(([name, code]) => [code, name]),
);

const TEXT_BY_CODE: Readonly<Record<NrtStatus, string>> = {
  0: "Success",
  1: "Non specific failure",
  2: "Invalid NEFF, instruction, DMA descriptor or input tensor",
  3: "Invalid handle",
  4: "Failed to allocate a resource for the requested operation",
  5: "Operation timed out",
  6: "Hardware failure",
  7: "Not enough space in the execution input queue",
  9: "Failed to allocate enough NeuronCores for loading a NEFF",
  10: "Unsupported version of NEFF",
  11: "Failed to allocate host memory",
  13: "Runtime is not initialized",
  14: "Runtime is closed",
  15: "Execution queue is empty",
  101: "Execution unit is unrecoverable",
  1002: "Invalid input has been submitted to execute",
  1003: "Execution completed with numerical errors (NaN)",
  1004: "Execution completed with other errors",
  1005: "NeuronCore is busy with another model or process",
  1006: "Out-of-bounds indirect memory copy or embedding update",
  1100: "Collective operation is still pending",
  1200: "Stuck in a collectives operation (missing notification); possible hardware error on another worker",
  1201: "HBM encountered an unrepairable uncorrectable error and produced incorrect results",
  1202: "NeuronCore on-chip memory encountered an uncorrectable error and produced incorrect results",
  1203: "A DMA engine encountered an unrecoverable error",
  1204: "Software notification queue overflow",
  1205: "HBM encountered a repairable uncorrectable error and produced incorrect results",
  1206: "Network proxy failure",
};

/** Whether `code` is one of the 28 defined `NRT_STATUS` values. */
export function isNrtStatus(code: number): code is NrtStatus {
  return NAME_BY_CODE.has(code);
}

/**
 * The enumerator name of a status (`"NRT_TIMEOUT"`), or `"NRT_STATUS(<code>)"` for an undefined code.
 *
 * @example Name a status
 * ```ts
 * import { nrtStatusName } from "@nrt/core";
 * console.log(nrtStatusName(5)); // "NRT_TIMEOUT"
 * ```
 */
export function nrtStatusName(code: number): string {
  return NAME_BY_CODE.get(code) ?? `NRT_STATUS(${code})`;
}

/**
 * `nrt_get_status_as_str`: a human-readable description of a status; undefined codes give `"Unknown status <code>"`.
 *
 * @example Describe a status
 * ```ts
 * import { nrt_get_status_as_str } from "@nrt/core";
 * console.log(nrt_get_status_as_str(1201));
 * ```
 */
export function nrt_get_status_as_str(status: number): string {
  return isNrtStatus(status) ? TEXT_BY_CODE[status] : `Unknown status ${status}`;
}

/** `nrt_status_priority_t` (seed: lifecycle-error-model §4.2). */
export const NrtStatusPriority = {
  NRT_STATUS_PRIORITY_NONE: 0,
  NRT_STATUS_PRIORITY_MEDIUM: 1,
  NRT_STATUS_PRIORITY_HIGH: 2,
  NRT_STATUS_PRIORITY_CRITICAL: 3,
} as const;

/** One `nrt_status_priority_t` value. */
export type NrtStatusPriority = typeof NrtStatusPriority[keyof typeof NrtStatusPriority];

/**
 * `nrt_get_status_priority` @0xb9790, the byte-exact reconstruction of seed lifecycle-error-model §4.2. It is defined
 * over every integer, not just the 28 enumerators: 0 NONE; 5 and 6 HIGH; every other code up to 1003 MEDIUM;
 * 1004 CRITICAL; 1200 and 1204 HIGH; every other code in (1004, 1205) CRITICAL; 1205 CRITICAL; 1206 HIGH; above
 * 1206 MEDIUM. Codes are compared unsigned, as the disassembly does (`jbe`/`ja`), so a negative input ranks as a
 * huge code (MEDIUM).
 *
 * @example Rank two statuses
 * ```ts
 * import { nrt_get_status_priority } from "@nrt/core";
 * console.log(nrt_get_status_priority(1201) > nrt_get_status_priority(1200)); // true
 * ```
 */
export function nrt_get_status_priority(status: number): NrtStatusPriority {
  const s = status >>> 0;
  if (s === 0x3ec) return NrtStatusPriority.NRT_STATUS_PRIORITY_CRITICAL; // 1004
  if (s <= 0x3ec) {
    if (s === 0) return NrtStatusPriority.NRT_STATUS_PRIORITY_NONE;
    // sub 5; setb; +1: only 5 (TIMEOUT) and 6 (HW_ERROR) are HIGH in the low band.
    return ((s - 5) >>> 0) < 2
      ? NrtStatusPriority.NRT_STATUS_PRIORITY_HIGH
      : NrtStatusPriority.NRT_STATUS_PRIORITY_MEDIUM;
  }
  if (s === 0x4b5) return NrtStatusPriority.NRT_STATUS_PRIORITY_CRITICAL; // 1205
  if (s > 0x4b5) {
    return s === 0x4b6 ? NrtStatusPriority.NRT_STATUS_PRIORITY_HIGH : NrtStatusPriority.NRT_STATUS_PRIORITY_MEDIUM;
  }
  if (s === 0x4b4) return NrtStatusPriority.NRT_STATUS_PRIORITY_HIGH; // 1204
  return s === 0x4b0 ? NrtStatusPriority.NRT_STATUS_PRIORITY_HIGH : NrtStatusPriority.NRT_STATUS_PRIORITY_CRITICAL;
}

/**
 * The worse of two statuses by {@linkcode nrt_get_status_priority}; on a tie the first (earlier) one wins, so a
 * running fold over the NeuronCores of a request keeps the first worst status (seed: lifecycle-error-model §4.3,
 * "keep a running worst status across the per-NC scan").
 */
export function worseStatus(a: number, b: number): number {
  return nrt_get_status_priority(b) > nrt_get_status_priority(a) ? b : a;
}
