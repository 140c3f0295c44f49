import { describe, expect, test } from "bun:test";
import { NrtError, NrtStatus, nrtStatusName } from "@nrt/core";
import { HttpError, httpStatusOf, NRT_HTTP_STATUS } from "@nrt/http-api";
import {
  GrpcCode,
  grpcCodeName,
  GrpcError,
  grpcStatusOf,
  HTTP_GRPC_STATUS,
  NRT_GRPC_STATUS,
  toGrpcError,
} from "./grpc_status.ts";

describe("NRT_GRPC_STATUS", () => {
  test("NRT_GRPC_STATUS lists exactly the statuses NRT_HTTP_STATUS lists", () => {
    expect(Object.keys(NRT_GRPC_STATUS).sort()).toEqual(Object.keys(NRT_HTTP_STATUS).sort());
  });

  test("grpcStatusOf() maps every NRT_STATUS to the gRPC code of its REST status", () => {
    const allowed: Record<number, GrpcCode[]> = {
      400: [GrpcCode.INVALID_ARGUMENT],
      503: [GrpcCode.UNAVAILABLE, GrpcCode.RESOURCE_EXHAUSTED],
      504: [GrpcCode.DEADLINE_EXCEEDED],
      500: [GrpcCode.INTERNAL],
    };
    for (const code of Object.values(NrtStatus)) {
      if (code === NrtStatus.NRT_SUCCESS) continue;
      const name = nrtStatusName(code);
      expect({ name, mirrors: allowed[httpStatusOf(code)].includes(grpcStatusOf(code)) }).toEqual({
        name,
        mirrors: true,
      });
    }
  });

  test("grpcStatusOf() answers RESOURCE_EXHAUSTED when a resource or queue ran out and UNAVAILABLE otherwise", () => {
    expect(grpcStatusOf(NrtStatus.NRT_QUEUE_FULL)).toBe(GrpcCode.RESOURCE_EXHAUSTED);
    expect(grpcStatusOf(NrtStatus.NRT_RESOURCE)).toBe(GrpcCode.RESOURCE_EXHAUSTED);
    expect(grpcStatusOf(NrtStatus.NRT_CLOSED)).toBe(GrpcCode.UNAVAILABLE);
    expect(grpcStatusOf(NrtStatus.NRT_EXEC_NC_BUSY)).toBe(GrpcCode.UNAVAILABLE);
    expect(grpcStatusOf(NrtStatus.NRT_TIMEOUT)).toBe(GrpcCode.DEADLINE_EXCEEDED);
  });

  test("grpcStatusOf() answers INTERNAL for hardware faults and unknown codes", () => {
    expect(grpcStatusOf(NrtStatus.NRT_HW_ERROR)).toBe(GrpcCode.INTERNAL);
    expect(grpcStatusOf(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE)).toBe(GrpcCode.INTERNAL);
    expect(grpcStatusOf(4242)).toBe(GrpcCode.INTERNAL);
  });

  test("grpcCodeName() names the protocol's codes", () => {
    expect(grpcCodeName(GrpcCode.DEADLINE_EXCEEDED)).toBe("DEADLINE_EXCEEDED");
    expect(grpcCodeName(99)).toBe("GRPC_STATUS(99)");
  });
});

describe("toGrpcError()", () => {
  test("toGrpcError() keeps the REST message of an NrtError and maps its status", () => {
    const e = toGrpcError(
      new NrtError(NrtStatus.NRT_QUEUE_FULL, 'Cannot queue a request for model "m": 4 requests are already waiting'),
    );
    expect([e.code, e.message, e.nrtStatus, e.httpStatus]).toEqual([
      GrpcCode.RESOURCE_EXHAUSTED,
      'Cannot queue a request for model "m": 4 requests are already waiting (NRT_QUEUE_FULL)',
      NrtStatus.NRT_QUEUE_FULL,
      503,
    ]);
  });

  test("toGrpcError() maps an HttpError by its HTTP status", () => {
    for (const [status, code] of Object.entries(HTTP_GRPC_STATUS)) {
      const e = toGrpcError(new HttpError(Number(status), "Cannot do it: because"));
      expect([e.code, e.message, e.httpStatus]).toEqual([code, "Cannot do it: because", Number(status)]);
    }
    expect(toGrpcError(new HttpError(418, "Cannot brew: teapot")).code).toBe(GrpcCode.UNKNOWN);
  });

  test("toGrpcError() answers INTERNAL for anything else and returns a GrpcError unchanged", () => {
    const e = toGrpcError(new TypeError("x is undefined"));
    expect([e.code, e.message]).toEqual([GrpcCode.INTERNAL, "Internal server error: x is undefined"]);
    const g = new GrpcError(GrpcCode.NOT_FOUND, "Cannot find it: gone");
    expect(toGrpcError(g)).toBe(g);
    expect(g.codeName).toBe("NOT_FOUND");
  });
});
