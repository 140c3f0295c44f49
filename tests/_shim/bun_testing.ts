/**
 * A small shim that lets the suite written against `bun:test` run under `deno test`: the root deno.json maps the
 * specifier `"bun:test"` here. `describe`/`test` map onto `node:test`; `expect` is the npm `expect` package.
 *
 * @module
 */
import { after, afterEach, before, beforeEach, describe as nodeDescribe, test as nodeTest } from "node:test";
import { expect } from "expect";

type Fn = () => void | Promise<void>;

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

export const beforeAll: (fn: Fn) => void = (fn) => before(fn);
export const afterAll: (fn: Fn) => void = (fn) => after(fn);
export { afterEach, beforeEach, expect };
