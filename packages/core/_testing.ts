/**
 * Private test helpers shared by the suites of this workspace (the leading `_` keeps the module out of the public
 * API): a seeded PRNG so a failing fuzz or campaign replays exactly, and the `NRT_INVALID` assertion.
 *
 * @module
 */
import { expect } from "bun:test";
import { NrtError } from "./error.ts";
import { NrtStatus } from "./status.ts";

export { prng } from "./exports/testing.ts";

/** Runs `fn`, which must throw an `NrtError` with `NRT_INVALID`, and returns its message. */
export function invalidMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    return (e as NrtError).message;
  }
  throw new Error("expected an NrtError, but nothing was thrown");
}
