import { describe, expect, test } from "bun:test";
import { NrtError, NrtStatus } from "@nrt/core";
import { HttpError, httpStatusOf, toHttpError } from "./http_error.ts";

describe("http_error", () => {
  test("httpStatusOf() maps every NRT_STATUS by the documented table", () => {
    const want: Record<number, number> = {
      1: 500,
      2: 400,
      3: 503,
      4: 503,
      5: 504,
      6: 500,
      7: 503,
      9: 503,
      10: 400,
      11: 503,
      13: 503,
      14: 503,
      15: 500,
      101: 500,
      1002: 400,
      1003: 500,
      1004: 500,
      1005: 503,
      1006: 500,
      1100: 500,
    };
    for (const code of [1200, 1201, 1202, 1203, 1204, 1205, 1206, 424242]) want[code] = 500;
    for (const [code, http] of Object.entries(want)) {
      expect({ code, http: httpStatusOf(Number(code)) }).toEqual({ code, http });
    }
  });

  test("toHttpError() names the NRT status of a fault and keeps the cause", () => {
    const cause = new NrtError(NrtStatus.NRT_EXEC_HW_ERR_HBM_UE, 'Execution of model "m" failed');
    const e = toHttpError(cause);
    expect([e.status, e.message, e.nrtStatus, e.cause]).toEqual([
      500,
      'Execution of model "m" failed (NRT_EXEC_HW_ERR_HBM_UE)',
      1201,
      cause,
    ]);
    expect(toHttpError(new TypeError("boom")).message).toBe("Internal server error: boom");
  });
  test("a message cut inside a surrogate pair leaves as well-formed text (U+FFFD for the lone half)", () => {
    const name = "x".repeat(127) + "\u{1F600}"; // the emoji's pair straddles the 128th UTF-16 unit
    const e = new HttpError(400, `Cannot read input "${name.slice(0, 128)}": the model has no such input`);
    expect(e.message).toBe(`Cannot read input "${"x".repeat(127)}\uFFFD": the model has no such input`);
    expect(JSON.stringify({ error: e.message })).not.toContain("\\ud83d");
    expect(new HttpError(400, "a \u{1F600} whole").message).toBe("a \u{1F600} whole");
  });
});
