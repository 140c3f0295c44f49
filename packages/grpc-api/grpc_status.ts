/**
 * The gRPC server's one error type and its one documented mapping from `NRT_STATUS` to gRPC status codes, the
 * counterpart of `@nrt/http-api`'s `NRT_HTTP_STATUS`: statuses the caller caused are `INVALID_ARGUMENT`; "not now"
 * is `UNAVAILABLE`, or `RESOURCE_EXHAUSTED` when a resource or queue ran out; a timeout is `DEADLINE_EXCEEDED`;
 * hardware faults and unknown codes are `INTERNAL`. The errors that the shared REST code throws as `HttpError`
 * (validation, unknown model, model not ready) map by their HTTP status. README.md carries the same table.
 *
 * The codes are the gRPC protocol's (grpc/grpc `doc/statuscodes.md`), so this module imports no gRPC library.
 *
 * @module
 */
import { nrtStatusName } from "@nrt/core";
import { toHttpError } from "@nrt/http-api";

/** The gRPC status codes (grpc/grpc `doc/statuscodes.md`). */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** One {@linkcode GrpcCode} value. */
export type GrpcCode = typeof GrpcCode[keyof typeof GrpcCode];

const NAME_BY_CODE: ReadonlyMap<number, string> = new Map(Object.entries(GrpcCode).map(([name, code]) => [code, name]));

/**
 * The name of a gRPC status code.
 *
 * @param code A gRPC status code.
 * @returns Its name, e.g. `"NOT_FOUND"`, or `"GRPC_STATUS(<code>)"` for a code the protocol does not define.
 *
 * @example Name a code
 * ```ts
 * import { grpcCodeName } from "@nrt/grpc-api";
 * console.log(grpcCodeName(14)); // "UNAVAILABLE"
 * ```
 */
export function grpcCodeName(code: number): string {
  return NAME_BY_CODE.get(code) ?? `GRPC_STATUS(${code})`;
}

/**
 * Ours: the documented `NRT_STATUS` → gRPC code mapping, row for row the statuses of `NRT_HTTP_STATUS`. Every status
 * not listed (hardware faults, `NRT_FAILURE`, unknown codes) is `INTERNAL`.
 */
export const NRT_GRPC_STATUS: Readonly<Record<string, GrpcCode>> = {
  NRT_INVALID: GrpcCode.INVALID_ARGUMENT,
  NRT_EXEC_BAD_INPUT: GrpcCode.INVALID_ARGUMENT,
  NRT_UNSUPPORTED_NEFF_VERSION: GrpcCode.INVALID_ARGUMENT,
  NRT_RESOURCE: GrpcCode.RESOURCE_EXHAUSTED,
  NRT_LOAD_NOT_ENOUGH_NC: GrpcCode.RESOURCE_EXHAUSTED,
  NRT_QUEUE_FULL: GrpcCode.RESOURCE_EXHAUSTED,
  NRT_FAIL_HOST_MEM_ALLOC: GrpcCode.RESOURCE_EXHAUSTED,
  NRT_EXEC_NC_BUSY: GrpcCode.UNAVAILABLE,
  NRT_INVALID_HANDLE: GrpcCode.UNAVAILABLE,
  NRT_UNINITIALIZED: GrpcCode.UNAVAILABLE,
  NRT_CLOSED: GrpcCode.UNAVAILABLE,
  NRT_TIMEOUT: GrpcCode.DEADLINE_EXCEEDED,
};

/**
 * Ours: the gRPC code of each HTTP status the shared REST code answers with (`HttpError` from validation, the
 * repository and the served model; 499 is a request dropped from a model's queue because its client left). Any
 * other status is `UNKNOWN`.
 */
export const HTTP_GRPC_STATUS: Readonly<Record<number, GrpcCode>> = {
  400: GrpcCode.INVALID_ARGUMENT,
  403: GrpcCode.PERMISSION_DENIED,
  404: GrpcCode.NOT_FOUND,
  405: GrpcCode.UNIMPLEMENTED,
  413: GrpcCode.RESOURCE_EXHAUSTED,
  499: GrpcCode.CANCELLED,
  500: GrpcCode.INTERNAL,
  503: GrpcCode.UNAVAILABLE,
  504: GrpcCode.DEADLINE_EXCEEDED,
};

/**
 * The gRPC code of an `NRT_STATUS`.
 *
 * @param status An `NRT_STATUS` code.
 * @returns Its row of {@linkcode NRT_GRPC_STATUS}, or `INTERNAL` for a hardware fault or any other code.
 *
 * @example Map a timeout
 * ```ts
 * import { grpcStatusOf } from "@nrt/grpc-api";
 * console.log(grpcStatusOf(5)); // 4 (DEADLINE_EXCEEDED)
 * ```
 */
export function grpcStatusOf(status: number): GrpcCode {
  return NRT_GRPC_STATUS[nrtStatusName(status)] ?? GrpcCode.INTERNAL;
}

/** Options of {@linkcode GrpcError}. */
export interface GrpcErrorOptions {
  /** The `NRT_STATUS` behind the error, when the runtime reported it. */
  readonly nrtStatus?: number;
  /** The HTTP status the REST server answers the same failure with. */
  readonly httpStatus?: number;
  /** The underlying error. */
  readonly cause?: unknown;
}

/**
 * A call that ends in a gRPC status other than `OK`: the code, a sentence-case message (the status details), and
 * the runtime status if any.
 *
 * @example Reject a call
 * ```ts
 * import { GrpcCode, GrpcError } from "@nrt/grpc-api";
 * const e = new GrpcError(GrpcCode.NOT_FOUND, 'Cannot find model "resnet": it is not in the repository');
 * console.log(e.code, e.message);
 * ```
 */
export class GrpcError extends Error {
  /** The gRPC status code. */
  readonly code: GrpcCode;
  /** The runtime status, when the error came from the runtime. */
  readonly nrtStatus: number | undefined;
  /** The HTTP status of the same failure over REST (for metrics and logs), when known. */
  readonly httpStatus: number | undefined;

  /** Creates an error answered with `code`. */
  constructor(code: GrpcCode, message: string, options: GrpcErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "GrpcError";
    this.code = code;
    this.nrtStatus = options.nrtStatus;
    this.httpStatus = options.httpStatus;
  }

  /** The name of {@linkcode GrpcError.code}, e.g. `"INVALID_ARGUMENT"`. */
  get codeName(): string {
    return grpcCodeName(this.code);
  }
}

/**
 * Turns anything thrown while serving a call into a {@linkcode GrpcError}, with the REST server's message: an
 * `NrtError` by {@linkcode NRT_GRPC_STATUS} (the message names the status), an `HttpError` from the shared REST
 * code by {@linkcode HTTP_GRPC_STATUS}, anything else as `INTERNAL` saying it is a server bug.
 *
 * @param e What was thrown.
 * @returns The error to answer with.
 *
 * @example Map a runtime fault
 * ```ts
 * import { NrtError, NrtStatus } from "@nrt/core";
 * import { toGrpcError } from "@nrt/grpc-api";
 * const e = toGrpcError(new NrtError(NrtStatus.NRT_HW_ERROR, "Execution failed"));
 * console.log(e.codeName, e.message); // "INTERNAL" "Execution failed (NRT_HW_ERROR)"
 * ```
 */
export function toGrpcError(e: unknown): GrpcError {
  if (e instanceof GrpcError) return e;
  const http = toHttpError(e);
  const code = http.nrtStatus !== undefined
    ? grpcStatusOf(http.nrtStatus)
    : HTTP_GRPC_STATUS[http.status] ?? GrpcCode.UNKNOWN;
  return new GrpcError(code, http.message, { nrtStatus: http.nrtStatus, httpStatus: http.status, cause: e });
}
