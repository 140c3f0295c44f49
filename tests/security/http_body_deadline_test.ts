/**
 * A body that stops arriving is answered 408 with `Connection: close` once the body deadline passes (docs/security.md),
 * over a real socket: a declared length (read whole by the runtime, `body.ts`) and a chunked body (read chunk by
 * chunk) alike. A body that arrives in full within the deadline is answered as usual. Bun then closes the connection;
 * Deno.serve keeps it open until the client closes it (a handler cannot close it there; docs/security.md). `nrt serve`'s
 * listener timeout (Bun's per-request timeout) outlasts the deadline, so Bun never drops the connection before the 408.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolveRuntimeConfig } from "@nrt/core";
import { DEFAULT_LIMITS } from "@nrt/http-api";
import { serveHttp } from "../../packages/cli/platform.ts";
import { httpLoadRequestTimeout, httpRequestTimeoutSeconds } from "../../packages/cli/serve.ts";
import { type HttpFixture, httpFixture } from "../_http.ts";
import { parseResponses, rawExchange } from "./_raw_http.ts";

let fx: HttpFixture;
let listener: Awaited<ReturnType<typeof serveHttp>>;
const DEADLINE_MS = 300;
const isBun = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined";

beforeAll(async () => {
  fx = await httpFixture({ limits: { bodyDeadlineMs: DEADLINE_MS } });
  listener = await serveHttp(fx.app.fetch, { host: "127.0.0.1", port: 0, requestTimeoutSeconds: 30 });
});
afterAll(async () => {
  await listener.stop();
  await fx.close();
});

const body = JSON.stringify({
  inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-1, 2, -3, 4, -5, 6, -7, 8] }],
});
const head = "POST /v2/models/relu/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";

describe("the body deadline", () => {
  test("a declared length that stops short is answered 408 and the connection closed", async () => {
    const t0 = performance.now();
    const { text, closed } = await rawExchange(
      listener.port,
      `${head}Content-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
      isBun ? 5000 : 1500,
    );
    const ms = performance.now() - t0;
    const [res] = parseResponses(text);
    expect(res?.status).toBe(408);
    expect(JSON.parse(res!.body).error).toMatch(/did not arrive in time/);
    expect(res!.headers.connection).toBe("close");
    if (isBun) expect(closed).toBe(true);
    expect(ms).toBeGreaterThanOrEqual(DEADLINE_MS - 20);
  });

  test("a chunked body that stops is answered 408 and the connection closed", async () => {
    const { text, closed } = await rawExchange(
      listener.port,
      `${head}Transfer-Encoding: chunked\r\n\r\n${(10).toString(16)}\r\n${body.slice(0, 10)}\r\n`,
      isBun ? 5000 : 1500,
    );
    const [res] = parseResponses(text);
    expect(res?.status).toBe(408);
    expect(res!.headers.connection).toBe("close");
    if (isBun) expect(closed).toBe(true);
  });

  test("a declared length that arrives in full within the deadline is answered", async () => {
    const ok = parseResponses(
      (await rawExchange(listener.port, `${head}Connection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`))
        .text,
    )[0];
    expect(ok?.status).toBe(200);
    expect(JSON.parse(ok!.body).outputs[0].data).toEqual([0, 2, 0, 4, 0, 6, 0, 8]);
  });
});

describe("nrt serve's listener timeout", () => {
  // The 408 comes up to a twentieth of the deadline, at most 1 s, after it (body.ts): the transport's timeout, in
  // whole seconds, must pass that, or Bun drops a stalled body's connection with no answer. Computed, not waited for
  // (the default deadline is 60 s).
  const latest408Ms = (deadlineMs: number) => deadlineMs + Math.min(1000, Math.max(1, Math.floor(deadlineMs / 20)));

  test("with the defaults, it fires after the body deadline's 408 (Bun would otherwise drop the connection)", () => {
    const config = resolveRuntimeConfig({}, {});
    const seconds = httpRequestTimeoutSeconds(config.execTimeoutSeconds, DEFAULT_LIMITS.bodyDeadlineMs);
    expect(seconds * 1000).toBeGreaterThan(latest408Ms(DEFAULT_LIMITS.bodyDeadlineMs));
    expect(seconds).toBeGreaterThan(config.execTimeoutSeconds);
    expect(seconds).toBeLessThanOrEqual(255); // Bun's largest; platform.ts turns a longer one off
  });

  test("it outlasts both the execution timeout and the body deadline, whichever is longer", () => {
    for (const exec of [1, 30, 59, 60, 61, 200]) {
      for (const deadlineMs of [300, 1_000, 30_000, 60_000, 61_500, 120_000]) {
        const seconds = httpRequestTimeoutSeconds(exec, deadlineMs);
        expect(Number.isInteger(seconds)).toBe(true);
        expect(seconds * 1000).toBeGreaterThan(latest408Ms(deadlineMs));
        expect(seconds).toBeGreaterThan(exec);
      }
    }
  });
});

describe("nrt serve's listener timeout with model control", () => {
  const config = resolveRuntimeConfig({}, {});
  const timeout = httpLoadRequestTimeout(config.execTimeoutSeconds, DEFAULT_LIMITS.bodyDeadlineMs);
  const base = httpRequestTimeoutSeconds(config.execTimeoutSeconds, DEFAULT_LIMITS.bodyDeadlineMs);
  const post = (url: string) => new Request(url, { method: "POST" });

  test("a repository load (it may compile an upload for minutes) has no transport timeout", () => {
    for (
      const url of [
        "http://127.0.0.1:8000/v2/repository/models/m/load",
        "http://[::1]:8000/v2/repository/models/resnet-50.v2/load?x=1",
      ]
    ) expect(timeout(post(url))).toBe(0);
    // Bun gives a bare path without a usable Host header.
    expect(timeout({ method: "POST", url: "/v2/repository/models/m/load" } as Request)).toBe(0);
  });

  test("every other request keeps the listener's timeout", () => {
    for (
      const url of [
        "http://h/v2/repository/models/m/unload",
        "http://h/v2/repository/models//load",
        "http://h/v2/repository/models/a/b/load",
        "http://h/x/v2/repository/models/m/load",
        "http://h/v2/models/m/infer",
        "http://h/v2/repository/models/m/loader",
      ]
    ) expect(timeout(post(url))).toBe(base);
    expect(timeout(new Request("http://h/v2/repository/models/m/load"))).toBe(base); // GET
    expect(base).toBeGreaterThan(0);
  });
});
