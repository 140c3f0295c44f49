/**
 * `NrtError`: the one error type the runtime reports. It carries an {@linkcode NrtStatus} so callers can branch on
 * the same code libnrt would have returned (seed: lifecycle-error-model §4.1, "the host's only return channel").
 *
 * @module
 */
import { NrtInitState } from "./state.ts";
import { NrtStatus, nrtStatusName } from "./status.ts";

/** Options for {@linkcode NrtError}. */
export interface NrtErrorOptions {
  /** The underlying error, if any. */
  cause?: unknown;
}

/**
 * A runtime failure with its `NRT_STATUS`.
 *
 * @example Catch a failure and read its status
 * ```ts
 * import { NrtError, NrtStatus } from "@nrt/core";
 * try {
 *   throw new NrtError(NrtStatus.NRT_INVALID, "Cannot load NEFF: header_size is 512, expected 1024");
 * } catch (e) {
 *   if (e instanceof NrtError) console.log(e.status, e.statusName);
 * }
 * ```
 */
export class NrtError extends Error {
  /** The status libnrt would return. */
  readonly status: NrtStatus;

  /** Creates an error with a status and a sentence-case message. */
  constructor(status: NrtStatus, message: string, options?: NrtErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "NrtError";
    this.status = status;
  }

  /** The enumerator name of {@linkcode NrtError.status}, e.g. `"NRT_INVALID"`. */
  get statusName(): string {
    return nrtStatusName(this.status);
  }
}

/** Whether `e` is an {@linkcode NrtError} with the given status. */
export function isNrtError(e: unknown, status?: NrtStatus): e is NrtError {
  return e instanceof NrtError && (status === undefined || e.status === status);
}

/**
 * The `NrtStatus` a failure maps to, the one mapping of the `nrt_*` facade: an `NrtError`'s own status; a
 * `RangeError` or `TypeError` (a bad argument the idiomatic API refused) is `NRT_INVALID`; anything else is
 * `NRT_FAILURE`.
 */
export function statusOfError(e: unknown): NrtStatus {
  if (e instanceof NrtError) return e.status;
  if (e instanceof RangeError || e instanceof TypeError) return NrtStatus.NRT_INVALID;
  return NrtStatus.NRT_FAILURE;
}

/**
 * The one state guard at the top of every runtime entry (seed: lifecycle-error-model §1.1): `NRT_CLOSED` (14) after
 * `nrt_close`, `NRT_UNINITIALIZED` (13) before `nrt_init`; nothing once initialised.
 *
 * @throws {NrtError} 14 or 13.
 */
export function guardInitState(state: number): void {
  if (state === NrtInitState.NRT_STATE_CLOSED) throw new NrtError(NrtStatus.NRT_CLOSED, "Runtime is closed");
  if (state !== NrtInitState.NRT_STATE_INIT) {
    throw new NrtError(NrtStatus.NRT_UNINITIALIZED, "Runtime is not initialized");
  }
}
