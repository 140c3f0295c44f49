/**
 * A small shim that lets the suite written against `bun:test` run under `deno test`: the root deno.json maps the
 * specifier `"bun:test"` here. `describe`/`test` map onto `node:test`; `expect` is the npm `expect` package.
 *
 * @module
 */
import { after, afterEach, before, beforeEach, describe as nodeDescribe, test as nodeTest } from "node:test";
import { expect } from "expect";

type Fn = () => void | Promise<void>;
/** A hook may return what its last call returns (`afterAll(() => server.close())`), as in `bun:test`. */
type HookFn = () => void | Promise<unknown>;

/** Groups tests, as `bun:test`'s `describe`. */
export function describe(name: string, fn: () => void): void {
  nodeDescribe(name, fn);
}

/** One test case, as `bun:test`'s `test`; the optional third argument is a timeout in ms (or an options bag). */
export function test(name: string, fn: Fn, timeout?: number | { timeout?: number }): void {
  const ms = typeof timeout === "number" ? timeout : timeout?.timeout;
  nodeTest(name, ms === undefined ? {} : { timeout: ms }, fn);
}
test.skip = (name: string, fn: Fn): void => {
  nodeTest(name, { skip: true }, fn);
};
test.if = (cond: boolean) => (cond ? test : test.skip);

/** Alias of {@linkcode test}. */
export const it = test;

/** `bun:test`'s hook timeout (ms, or an options bag) as `node:test` hook options. */
function hookOptions(timeout?: number | { timeout?: number }): { timeout?: number } {
  const ms = typeof timeout === "number" ? timeout : timeout?.timeout;
  return ms === undefined ? {} : { timeout: ms };
}

/** Runs `fn` once before the file's tests, as `bun:test`'s `beforeAll`; the optional second argument is a timeout. */
export const beforeAll: (fn: HookFn, timeout?: number | { timeout?: number }) => void = (fn, timeout) =>
  before(fn, hookOptions(timeout));
/** Runs `fn` once after the file's tests, as `bun:test`'s `afterAll`; the optional second argument is a timeout. */
export const afterAll: (fn: HookFn, timeout?: number | { timeout?: number }) => void = (fn, timeout) =>
  after(fn, hookOptions(timeout));
export { afterEach, beforeEach, expect };
