/**
 * Requests a browser never sends, over a raw socket against `nrt serve` (docs/security.md, finding 4): no `Host`
 * (HTTP/1.0), an empty `Host`, a malformed `Host`, on every kind of route. The answer is always a short
 * `{"error"}` or the route's JSON — never a runtime's development error page with stack, paths and source.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type RunningServer, startServer } from "@nrt/cli";
import { parseResponses, rawExchange, rawRequest } from "./_raw_http.ts";

let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ demo: true, port: 0, log: () => {} });
});
afterAll(() => server.close());

/** No stack frames, file paths or source lines in an answer. */
function expectNoLeak(body: string): void {
  expect(body.length).toBeLessThan(1024);
  expect(body).not.toMatch(/\bat \S+ \(|\/work\/|node_modules|\.ts:\d+|process\.cwd|<html/i);
}

describe("raw requests", () => {
  const heads: Array<[string, string]> = [
    ["HTTP/1.0 without Host", ""],
    ["an empty Host", "Host: \r\n"],
    ["a malformed Host", "Host: a b\r\n"],
  ];
  for (const [what, host] of heads) {
    test(`${what} gets JSON on a route, on an unknown path, with a wrong method and on a bad body`, async () => {
      const version = host === "" ? "HTTP/1.0" : "HTTP/1.1";
      const cases: Array<[string, string, number[]]> = [
        // HTTP/1.0 without Host is routed; an empty or malformed Host is refused by the Host check (403).
        ["GET /v2/health/live", "", host === "" ? [200] : [403]],
        ["GET /no/such/endpoint", "", host === "" ? [404] : [403]],
        ["DELETE /v2/health/live", "", host === "" ? [405] : [403]],
        ["POST /v2/models/relu/infer", "{", host === "" ? [400] : [403]],
      ];
      for (const [line, body, statuses] of cases) {
        const req =
          `${line} ${version}\r\n${host}Connection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
        const res = await rawRequest(server.port, req);
        expect({ line, status: res?.status !== undefined && statuses.includes(res.status) }).toEqual({
          line,
          status: true,
        });
        expectNoLeak(res!.body);
        const json = JSON.parse(res!.body);
        if (res!.status >= 400) expect(Object.keys(json)).toEqual(["error"]);
      }
    });
  }
});

describe("chunked bodies", () => {
  test("a chunked body far over the limit gets the server's JSON 413, not an empty one", async () => {
    const big = "1,".repeat(100_000); // 200 kB of a JSON array body, in one chunk
    const head =
      "POST /v2/models/vector_add/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    const res = await rawRequest(server.port, `${head}${big.length.toString(16)}\r\n${big}\r\n`);
    expect(res?.status).toBe(413);
    expect(JSON.parse(res!.body).error).toMatch(/^Cannot read the request body: it is over the \d+-byte limit$/);
  });
});

describe("pipelining", () => {
  test("pipelined requests after a POST: what each runtime answers (documented in docs/security.md)", async () => {
    const body = '{"inputs":[{"name":"x","shape":[8],"datatype":"FP32","data":[1,-1,2,-2,3,-3,4,-4]}]}';
    const post =
      `POST /v2/models/relu/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const get = "GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n";
    const { text } = await rawExchange(
      server.port,
      post + get + get + "GET /v2 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
      3000,
    );
    const responses = parseResponses(text);
    // What follows the POST on the same connection depends on the runtime's HTTP server.
    for (const r of responses) expectNoLeak(r.body);
    const runtime = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ? "bun" : "deno";
    // Recorded behaviour (docs/security.md): Deno answers all four; Bun 1.4.5 answers none of them (the POST
    // included) within the wait. A change here means the runtime changed: update docs/security.md.
    expect({ runtime, answered: responses.length }).toEqual({ runtime, answered: runtime === "bun" ? 0 : 4 });
  });
});
