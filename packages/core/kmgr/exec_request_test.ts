import { describe, expect, test } from "bun:test";
import { execRequestInitState } from "./exec_request.ts";

describe("execRequestInitState", () => {
  // Seed lifecycle-error-model §1.3 and its census: state EXEC_STATE_INIT = 0 at +0, exec_rets[2], exec_fatal_status
  // bool[2][7], kbl_infer_errors bool[9].
  test("a request starts in EXEC_STATE_INIT with exec_rets[2], exec_fatal_status bool[2][7] and 9 error flags, all clear", () => {
    const r = execRequestInitState();
    expect(r.state).toBe(0);
    expect(r.execRets).toEqual([0, 0]);
    expect(r.execFatalStatus).toEqual([
      [false, false, false, false, false, false, false],
      [false, false, false, false, false, false, false],
    ]);
    expect(r.inferErrors.inferErrorFlags).toEqual(new Uint8Array(9));
    expect(r.errors).toEqual([]);
    expect(r.status).toBe(0);
    expect(r.fatal).toBe(false);
  });

  test("each request gets arrays of its own", () => {
    const a = execRequestInitState(), b = execRequestInitState();
    a.execRets[1] = 1004;
    a.execFatalStatus[0][3] = true;
    a.errors.push({} as never);
    expect(b.execRets).toEqual([0, 0]);
    expect(b.execFatalStatus[0][3]).toBe(false);
    expect(b.errors).toEqual([]);
    expect(a.execFatalStatus[1]).not.toBe(a.execFatalStatus[0]);
  });
});
