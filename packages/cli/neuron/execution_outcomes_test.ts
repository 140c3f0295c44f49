// Neuron Monitor User Guide, "execution_stats": error_summary {generic, numerical, transient, model, runtime,
// hardware} and execution_summary {completed, completed_with_err, completed_with_num_err, timed_out,
// incorrect_input, failed_to_queue}.
import { describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import {
  EXECUTION_ERROR_KINDS,
  EXECUTION_OUTCOMES,
  executionErrorKind,
  executionOutcome,
  summarizeExecutions,
} from "./execution_outcomes.ts";

describe("executionOutcome() / executionErrorKind()", () => {
  test("executionOutcome() gives every NRT_STATUS a documented outcome, and only success no error kind", () => {
    for (const status of Object.values(NrtStatus)) {
      expect(EXECUTION_OUTCOMES).toContain(executionOutcome(status));
      const kind = executionErrorKind(status);
      if (status === NrtStatus.NRT_SUCCESS) expect(kind).toBeNull();
      else expect(EXECUTION_ERROR_KINDS).toContain(kind);
    }
  });

  test("executionOutcome() follows the guide's definitions for the statuses that name them", () => {
    expect(executionOutcome(NrtStatus.NRT_SUCCESS)).toBe("completed");
    expect(executionOutcome(NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR)).toBe("completed_with_num_err");
    expect(executionOutcome(NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR)).toBe("completed_with_err");
    expect(executionOutcome(NrtStatus.NRT_TIMEOUT)).toBe("timed_out");
    expect(executionOutcome(NrtStatus.NRT_EXEC_BAD_INPUT)).toBe("incorrect_input");
    expect(executionOutcome(NrtStatus.NRT_QUEUE_FULL)).toBe("failed_to_queue");
    expect(executionOutcome(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE)).toBe("completed_with_err");
  });

  test("executionErrorKind() files NaN as numerical and uncorrectable memory errors as hardware", () => {
    expect(executionErrorKind(NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR)).toBe("numerical");
    expect(executionErrorKind(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE)).toBe("hardware");
    expect(executionErrorKind(NrtStatus.NRT_EXEC_HW_ERR_NC_UE)).toBe("hardware");
    expect(executionErrorKind(NrtStatus.NRT_EXEC_BAD_INPUT)).toBe("model");
    expect(executionErrorKind(NrtStatus.NRT_QUEUE_FULL)).toBe("transient");
    expect(executionErrorKind(NrtStatus.NRT_TIMEOUT)).toBe("runtime");
  });

  test("executionOutcome() counts an undefined status as completed_with_err, kind generic", () => {
    expect(executionOutcome(4242)).toBe("completed_with_err");
    expect(executionErrorKind(4242)).toBe("generic");
  });
});

describe("summarizeExecutions()", () => {
  test("summarizeExecutions() buckets counts keyed by status, every documented key present", () => {
    expect(summarizeExecutions({ 0: 10, 1003: 2, 5: 1, 1201: 1, 7: 3 })).toEqual({
      execution_summary: {
        completed: 10,
        completed_with_err: 1,
        completed_with_num_err: 2,
        timed_out: 1,
        incorrect_input: 0,
        failed_to_queue: 3,
      },
      error_summary: { generic: 0, numerical: 2, transient: 3, model: 0, runtime: 1, hardware: 1 },
    });
  });

  test("summarizeExecutions() of nothing is all zeros", () => {
    const s = summarizeExecutions({});
    expect(Object.values(s.execution_summary)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(Object.keys(s.error_summary)).toEqual(["generic", "numerical", "transient", "model", "runtime", "hardware"]);
  });

  test("summarizeExecutions() rejects a fractional count naming the status", () => {
    expect(() => summarizeExecutions({ 5: 1.5 })).toThrow("status 5 has count 1.5");
  });
});
