/**
 * The test framework the conformance suites declare their cases with, injected by the caller — `bun:test`, or Deno's
 * `@std/testing/bdd` with `@std/expect`, or another with the same shape — so `@nrt/core/testing` depends on no test
 * runner. Ours.
 *
 * @module
 */

/** An `expect` with the matchers the suites use (Jest's, as `bun:test` and `@std/expect` provide them). */
// deno-lint-ignore no-explicit-any
export type Expect = (actual: unknown) => any;

/** `describe`, `test` (with `test.skip`) and `expect`. */
export interface TestApi {
  /** Groups the tests that `body` declares. */
  readonly describe: (name: string, body: () => void) => void;
  /** Declares one test (an optional timeout in ms); `skip` declares one that does not run. */
  readonly test: ((name: string, body: () => Promise<void> | void, timeoutMs?: number) => void) & {
    readonly skip: (name: string, body: () => Promise<void> | void) => void;
  };
  /** The assertion entry point, Jest-style. */
  readonly expect: Expect;
}

let current: TestApi | undefined;

/** Makes `api` the one the suite bodies use, and returns it. */
export function useTestApi(api: TestApi): TestApi {
  current = api;
  return api;
}

/** `expect` of the test API in use (the suites' bodies call it). */
export const expect: Expect = (actual) => {
  if (current === undefined) throw new Error("No test API: call the suite with { describe, test, expect }");
  return current.expect(actual);
};
