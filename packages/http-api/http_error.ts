/**
 * The server's one error type and its one documented mapping from `NRT_STATUS` to HTTP status. Every failure
 * leaves the server as `{"error": "<message>"}` (spec: inference_rest.md "Inference Response JSON Error Object",
 * "Model Metadata Response JSON Error Object"); docs/rest-api.md carries the same table.
 *
 * @module
 */
import { NrtError, NrtStatus, nrtStatusName } from "@nrt/core";

/** Options of {@linkcode HttpError}. */
export interface HttpErrorOptions {
  /** The `NRT_STATUS` behind the error, when the runtime reported it. */
  readonly nrtStatus?: number;
  /** The underlying error. */
  readonly cause?: unknown;
  /** Extra response headers (`Allow` on a 405). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * A request that ends in an HTTP error: the status, a sentence-case message, and the runtime status if any.
 *
 * @example Reject a request
 * ```ts
 * import { HttpError } from "@nrt/http-api";
 * const e = new HttpError(404, 'Cannot find model "resnet": it is not in the repository');
 * console.log(e.status, e.message);
 * ```
 */
export class HttpError extends Error {
  /** HTTP status code. */
  readonly status: number;
  /** The runtime status, when the error came from the runtime. */
  readonly nrtStatus: number | undefined;
  /** Extra response headers. */
  readonly headers: Readonly<Record<string, string>>;

  /**
   * Creates an error answered with `status`. A lone surrogate in `message` becomes U+FFFD (ours): messages quote a
   * client's names cut to their first 128 UTF-16 units, and a cut inside a surrogate pair would otherwise leave the
   * server as a `\ud83d` escape no client can decode to text.
   */
  constructor(status: number, message: string, options: HttpErrorOptions = {}) {
    super(message.toWellFormed(), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "HttpError";
    this.status = status;
    this.nrtStatus = options.nrtStatus;
    this.headers = options.headers ?? {};
  }
}

/**
 * The documented `NRT_STATUS` → HTTP status mapping. Statuses the caller caused are 400; statuses that say "not
 * now" (resources, queue, busy core, closed runtime) are 503; a timeout is 504; everything else — hardware faults
 * and unknown codes — is 500.
 */
export const NRT_HTTP_STATUS: Readonly<Record<string, number>> = {
  NRT_INVALID: 400,
  NRT_EXEC_BAD_INPUT: 400,
  NRT_UNSUPPORTED_NEFF_VERSION: 400,
  NRT_RESOURCE: 503,
  NRT_LOAD_NOT_ENOUGH_NC: 503,
  NRT_QUEUE_FULL: 503,
  NRT_EXEC_NC_BUSY: 503,
  NRT_FAIL_HOST_MEM_ALLOC: 503,
  NRT_INVALID_HANDLE: 503,
  NRT_UNINITIALIZED: 503,
  NRT_CLOSED: 503,
  NRT_TIMEOUT: 504,
};

/**
 * The HTTP status of an `NRT_STATUS`.
 *
 * @param status An `NRT_STATUS` code.
 * @returns 400, 503, 504, or 500 for a hardware fault or any other code.
 *
 * @example Map a timeout
 * ```ts
 * import { httpStatusOf } from "@nrt/http-api";
 * console.log(httpStatusOf(5)); // 504
 * ```
 */
export function httpStatusOf(status: number): number {
  return NRT_HTTP_STATUS[nrtStatusName(status)] ?? 500;
}

/**
 * Turns anything thrown while serving a request into an {@linkcode HttpError}: an `NrtError` by the mapping (the
 * message names the status, so a 500 says which fault it was), a `SyntaxError` from a body as 400, anything else
 * as a 500 that says it is a server bug.
 *
 * @param e What was thrown.
 * @returns The error to answer with.
 *
 * @example Map a runtime fault
 * ```ts
 * import { NrtError, NrtStatus } from "@nrt/core";
 * import { toHttpError } from "@nrt/http-api";
 * const e = toHttpError(new NrtError(NrtStatus.NRT_HW_ERROR, "Execution failed"));
 * console.log(e.status, e.message); // 500 "Execution failed (NRT_HW_ERROR)"
 * ```
 */
export function toHttpError(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  if (e instanceof NrtError) {
    return new HttpError(httpStatusOf(e.status), `${e.message} (${e.statusName})`, { nrtStatus: e.status, cause: e });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new HttpError(500, `Internal server error: ${message}`, { nrtStatus: NrtStatus.NRT_FAILURE, cause: e });
}
