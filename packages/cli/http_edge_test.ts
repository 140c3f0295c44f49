/**
 * The HTTP listener's edge, over raw sockets against `nrt serve` (`startServer`): what a client gets for a body that
 * stops arriving, for a `Content-Length` no server could take, and for a request the runtime's own HTTP parser
 * refuses before the handler runs (docs/rest-api.md, "Errors"). Ours.
 *
 * - A 408 or 413 is the server's JSON with exactly one `Connection: close`: Deno.serve appends its own whenever it
 *   closes after the answer, and the adapter leaves it that one (platform.ts); Bun closes the connection.
 * - A `Content-Length` past 2^53 is the server's JSON 413 on both runtimes (Bun answered an empty 413 itself).
 * - Malformed request lines and headers, and heads over the runtime's limits, are answered by the runtime alone:
 *   the status below, no body, `Connection: close`, and the connection closed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { DrainGate } from "./http_listener.ts";
import { serveHttp } from "./platform.ts";
import { type RunningServer, startServer } from "./serve.ts";

const onBun = (process.versions as Record<string, string | undefined>).bun !== undefined;

/** One answer as sent: its status line, its header lines in order (duplicates kept), its body. */
interface RawAnswer {
  readonly status: number;
  readonly headers: readonly string[];
  readonly body: string;
  /** Whether the server closed the connection (waited for on Bun; Deno.serve leaves it to the client). */
  readonly closed: boolean;
}

/**
 * Writes `parts` (a number: a pause of that many ms) and reads one answer: until the server closes, or, once a whole
 * answer with its `Content-Length` has come, until `closeWaitMs` more (0: not at all).
 */
function exchange(port: number, parts: ReadonlyArray<string | number>, closeWaitMs: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    let closeTimer: ReturnType<typeof setTimeout> | undefined;
    const giveUp = setTimeout(() => finish(false), 30_000);
    const finish = (closed: boolean) => {
      clearTimeout(giveUp);
      clearTimeout(closeTimer);
      socket.destroy();
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return reject(new Error(`no answer: ${JSON.stringify(text.slice(0, 200))}`));
      const [line, ...headers] = text.slice(0, end).split("\r\n");
      resolve({ status: Number(line.split(" ")[1]), headers, body: text.slice(end + 4), closed });
    };
    socket.on("connect", async () => {
      for (const p of parts) {
        if (typeof p === "number") await new Promise((r) => setTimeout(r, p));
        else if (!socket.destroyed) socket.write(p);
      }
    });
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0 || closeTimer !== undefined) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end + 2));
      if (length !== null && text.length - end - 4 >= Number(length[1])) {
        closeTimer = setTimeout(() => finish(false), closeWaitMs);
      }
    });
    socket.on("error", () => finish(true));
    socket.on("close", () => finish(true));
  });
}

/** The header lines named `name`. */
const named = (a: RawAnswer, name: string) => a.headers.filter((h) => h.toLowerCase().startsWith(`${name}:`));

/** How long a test waits for Bun to close a connection after its answer: generous, the machine is shared. */
const CLOSE_WAIT_MS = 10_000;

let home: string;
let server: RunningServer;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "nrt-http-edge-"));
  server = await startServer({ models: home, port: 0, bodyTimeoutSeconds: 1, log: () => {} });
});
afterAll(async () => {
  await server.close();
  await rm(home, { recursive: true, force: true });
});

const INDEX = "POST /v2/repository/index HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";

describe("a body that stops arriving", () => {
  const cases: Array<[string, string]> = [
    ["a declared length", `${INDEX}Content-Length: 100\r\n\r\n{"ready":`],
    ["a declared length, the client asking to close", `${INDEX}Connection: close\r\nContent-Length: 100\r\n\r\n{"r`],
    ["a chunked body", `${INDEX}Transfer-Encoding: chunked\r\n\r\n3\r\n{"r\r\n`],
    [
      "a chunked body, the client asking to close",
      `${INDEX}Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n`,
    ],
  ];
  for (const [what, head] of cases) {
    test(`${what}: the JSON 408 with exactly one Connection: close`, async () => {
      // The body deadline is 1 s; its 408 comes at most a twentieth later (body.ts). Nothing else is sent.
      const a = await exchange(server.port, [head], onBun ? CLOSE_WAIT_MS : 0);
      expect(a.status).toBe(408);
      expect(JSON.parse(a.body)).toEqual({ error: "Cannot read the request body: it did not arrive in time" });
      expect(named(a, "connection").map((h) => h.toLowerCase())).toEqual(["connection: close"]);
      if (onBun) expect(a.closed).toBe(true);
    });
  }
});

describe("Connection: close from the handler", () => {
  test("one header, whether the body is unread, the client asks to close, or the drain refuses it", async () => {
    const answer = () =>
      new Response(JSON.stringify({ error: "refused" }), {
        status: 413,
        headers: { "content-type": "application/json", connection: "close" },
      });
    const gate = new DrainGate(answer);
    const listener = await serveHttp(gate.fetch, { host: "127.0.0.1", port: 0, requestTimeoutSeconds: 60 });
    try {
      const post = "POST / HTTP/1.1\r\nHost: h\r\n";
      const wait = onBun ? CLOSE_WAIT_MS : 0;
      // A body of which 3 of 100 bytes came, never read; then a whole one, from a client that asks to close.
      const unread = await exchange(listener.port, [`${post}Content-Length: 100\r\n\r\nabc`], wait);
      const asked = await exchange(listener.port, [`${post}Connection: close\r\nContent-Length: 2\r\n\r\n{}`], wait);
      gate.close();
      const drained = await exchange(listener.port, [`${post}Connection: close\r\nContent-Length: 2\r\n\r\n{}`], wait);
      for (const [a, status] of [[unread, 413], [asked, 413], [drained, 503]] as const) {
        expect(a.status).toBe(status);
        expect(Object.keys(JSON.parse(a.body))).toEqual(["error"]);
        expect(named(a, "connection").map((h) => h.toLowerCase())).toEqual(["connection: close"]);
        if (onBun) expect(a.closed).toBe(true);
      }
    } finally {
      await listener.stop(true);
    }
  });
});

describe("a Content-Length no server could take", () => {
  for (const length of ["9007199254740993", "99999999999999999"]) {
    test(`Content-Length ${length}: the server's JSON 413, not the runtime's empty one nor a 400`, async () => {
      const a = await exchange(server.port, [`${INDEX}Content-Length: ${length}\r\n\r\n{}`], onBun ? CLOSE_WAIT_MS : 0);
      expect(a.status).toBe(413);
      expect(JSON.parse(a.body)).toEqual({
        error: `Cannot read the request body: ${length} bytes is over the 65536-byte limit`,
      });
      expect(named(a, "connection").map((h) => h.toLowerCase())).toEqual(["connection: close"]);
      if (onBun) expect(a.closed).toBe(true);
    });
  }
});

describe("requests the runtime's HTTP parser answers itself (a documented limitation)", () => {
  const get = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const fields = (n: number) => Array.from({ length: n }, (_, i) => `X-${i}: v\r\n`).join("");
  // [what, request, Bun's status, Deno's status]
  const cases: Array<[string, string, number, number]> = [
    ["a request line that is not one", "GARBAGE\r\n\r\n", 400, 400],
    ["an unknown HTTP version", "GET /v2/health/live HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 505, 400],
    ["a space in a header name", `${get}Bad Name: x\r\n\r\n`, 400, 400],
    ["a control character in a header value", `${get}X: a\x01b\r\n\r\n`, 400, 400],
    ["an obsolete folded header", `${get}X: a\r\n b\r\n\r\n`, 400, 400],
    ["a Content-Length that is not a number", `${INDEX}Content-Length: abc\r\n\r\n`, 400, 400],
    ["two Content-Lengths that differ", `${INDEX}Content-Length: 1\r\nContent-Length: 2\r\n\r\n{}`, 400, 400],
    [
      "both Content-Length and Transfer-Encoding",
      `${INDEX}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      400,
      400,
    ],
    ["a Transfer-Encoding other than chunked", `${INDEX}Transfer-Encoding: gzip\r\n\r\n`, 400, 400],
    ["a 64 KiB header", `${get}X: ${"a".repeat(64 * 1024)}\r\n\r\n`, 431, 400],
    ["300 header fields", `${get}${fields(300)}\r\n`, 431, 400],
  ];
  for (const [what, request, bunStatus, denoStatus] of cases) {
    test(`${what}: ${onBun ? bunStatus : denoStatus}, no body, Connection: close, the connection closed`, async () => {
      const a = await exchange(server.port, [request], CLOSE_WAIT_MS);
      expect(a.status).toBe(onBun ? bunStatus : denoStatus);
      expect(a.body).toBe("");
      // Bun sends the status line and `Connection: close` only; Deno a zero length, its date and the close.
      const names = a.headers.map((h) => h.slice(0, h.indexOf(":")).toLowerCase());
      expect(names).toEqual(onBun ? ["connection"] : ["content-length", "date", "connection"]);
      expect(named(a, "connection").map((h) => h.toLowerCase())).toEqual(["connection: close"]);
      if (!onBun) expect(named(a, "content-length")).toEqual(["content-length: 0"]);
      expect(a.closed).toBe(true);
    });
  }

  test("the head limits: Bun takes 16 KiB and Deno 64 KiB; below them the handler answers", async () => {
    const a = await exchange(server.port, [`${get}Connection: close\r\nX: ${"a".repeat(15 * 1024)}\r\n\r\n`], 0);
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body)).toEqual({ live: true });
    const b = await exchange(server.port, [`${get}Connection: close\r\nX: ${"a".repeat(32 * 1024)}\r\n\r\n`], 0);
    expect(b.status).toBe(onBun ? 431 : 200);
  });
});
