/**
 * `NrtError`: the one error type the runtime reports. It carries an {@linkcode NrtStatus} so callers can branch on
 * the same code libnrt would have returned (seed: lifecycle-error-model §4.1, "the host's only return channel").
 *
 * @module
 */
import { nrtStatusName, type NrtStatus } from "./status.ts";

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
