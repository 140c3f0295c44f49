/**
 * A request body the runtime cannot finish reading — the client closed or half-closed its connection mid-body, aborted
 * a chunked body or broke its framing; Bun reports "The connection was closed.", Deno "Cannot read request body as
 * underlying resource unavailable" — is the client's failure, not the server's: 499 (as a client that left while its
 * request was queued), counted as a failure of reason `OTHER`, and nothing logged as an error
 * (docs/rest-api.md, "Errors"). Every route that reads a body is checked: inference (with and without
 * `Content-Length`), the repository's index, load and unload, and the dashboard's actions. The body is a stream that
 * errors after its first bytes, as the runtime's does when the connection goes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LogLevel } from "@nrt/core";
import { CLIENT_CLOSED_REQUEST, createInferenceApp, type InferenceApp, readBody } from "@nrt/http-api";
import { ADMIN_TOKEN, type HttpFixture, httpFixture } from "../_http.ts";

let fx: HttpFixture;
let withDashboard: InferenceApp;

beforeAll(async () => {
  fx = await httpFixture();
  withDashboard = createInferenceApp({
    runtime: fx.runtime,
    repository: fx.repository,
    metrics: fx.metrics,
    dashboard: true,
    adminToken: ADMIN_TOKEN,
  });
});
afterAll(async () => {
  await fx.close();
});

/** A body whose first bytes arrive, then whose stream fails as the runtime's does when the connection ends. */
function lostBody(first = '{"inputs":[{"na'): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(first));
    },
    pull(c) {
      c.error(new TypeError("The connection was closed."));
    },
  });
}

/** A POST to `path` whose body is lost mid-way; `declared` sends a `Content-Length` (the runtime reads it whole). */
function lostRequest(path: string, declared: boolean, headers: Record<string, string> = {}): Request {
  return new Request(`http://localhost${path}`, {
    method: "POST",
    body: lostBody(),
    headers: {
      "content-type": "application/json",
      ...(declared ? { "content-length": "4096" } : {}),
      ...headers,
    },
    duplex: "half",
  } as RequestInit);
}

/** `nrt_inference_request_failure` of relu for `reason`. */
async function failures(reason: string): Promise<number> {
  const text = await fx.metrics.render(fx.runtime, fx.repository);
  const line = text.split("\n").find((l) =>
    l.startsWith("nrt_inference_request_failure{") && l.includes('model="relu"') && l.includes(`reason="${reason}"`)
  );
  return Number(line?.split(" ").at(-1));
}

const errors = (): string[] => fx.logger.messages(LogLevel.ERROR);

describe("a request body lost mid-way", () => {
  for (const declared of [true, false]) {
    test(`an inference (${declared ? "Content-Length" : "chunked"}) is 499, counted OTHER, not logged`, async () => {
      const before = { backend: await failures("BACKEND"), other: await failures("OTHER"), errors: errors().length };
      const res = await fx.app.fetch(lostRequest("/v2/models/relu/infer", declared));
      expect(res.status).toBe(CLIENT_CLOSED_REQUEST);
      expect((await res.json()).error).toBe(
        "Cannot read the request body: the client's connection ended before all of it arrived",
      );
      expect(await failures("BACKEND")).toBe(before.backend);
      expect(await failures("OTHER")).toBe(before.other + 1);
      expect(errors().slice(before.errors)).toEqual([]);
    });
  }

  test("the repository's index, load and unload, and the dashboard's actions are 499, not logged", async () => {
    const before = errors().length;
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    for (const declared of [true, false]) {
      for (
        const [app, path] of [
          [fx.app, "/v2/repository/index"],
          [fx.app, "/v2/repository/models/relu/load"],
          [fx.app, "/v2/repository/models/relu/unload"],
          [withDashboard, "/v2/dashboard/models/relu/unload"],
        ] as const
      ) {
        const res = await app.fetch(lostRequest(path, declared, auth));
        expect({ path, declared, status: res.status }).toEqual({ path, declared, status: CLIENT_CLOSED_REQUEST });
        expect((await res.json()).error).toMatch(/connection ended before all of it arrived/);
      }
    }
    expect(errors().slice(before)).toEqual([]);
    expect(fx.repository.get("relu")?.state).toBe("READY"); // no unload ran on a lost body
  });

  test("readBody() without a deadline maps the runtime's failure too; ours (413) stays as it is", async () => {
    for (const declared of [true, false]) {
      const e = await readBody(lostRequest("/", declared), 1 << 20).catch((e) => e);
      expect(e.status).toBe(CLIENT_CLOSED_REQUEST);
      expect(e.cause).toBeInstanceOf(TypeError);
    }
    const big = await readBody(lostRequest("/", false), 4).catch((e) => e);
    expect(big.status).toBe(413);
  });
});
