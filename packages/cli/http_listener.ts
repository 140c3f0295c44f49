/**
 * The gate a graceful shutdown closes in front of the HTTP handler: once closed, every new request is answered 503
 * with `Connection: close` (also on a connection kept alive from before), while the requests already in the handler
 * run to their end and their answers carry `Connection: close` too, so no client is left writing on a kept-alive
 * connection the server is about to close. Ours (docs/rest-api.md, "Shutdown"): the seeds describe no server.
 *
 * @module
 */

import { type Clock, SystemClock } from "@nrt/core";
import type { Fetch } from "./platform.ts";

const json = (status: number, error: string, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify({ error }), { status, headers: { "content-type": "application/json", ...headers } });

/** The most of a refused request's body read and thrown away before its connection closes. */
const DISCARD_LIMIT = 1 << 20;

/**
 * The longest a refused request's body is read for (ours): a client that trickles its body, or declares one and
 * sends nothing, gets its 503 after this long instead of holding the refusal open until the listener stops.
 */
export const DISCARD_MS = 5_000;

/**
 * Reads a refused request's body and throws it away (up to {@linkcode DISCARD_LIMIT}, for at most
 * {@linkcode DISCARD_MS} of `clock`), so that closing the connection after the 503 does not reset it: a socket closed
 * with unread input sends a TCP RST, and the client may then lose the 503 it was about to read.
 */
async function discardBody(req: Request, clock: Clock): Promise<void> {
  const reader = req.body?.getReader();
  if (reader === undefined) return;
  const stop = new AbortController();
  const late = clock.sleep(DISCARD_MS, stop.signal).then(() => "late" as const, () => "late" as const);
  try {
    for (let read = 0; read <= DISCARD_LIMIT;) {
      const next = await Promise.race([reader.read(), late]);
      if (next === "late") break;
      if (next.done) return;
      read += next.value.byteLength;
    }
    await reader.cancel();
  } catch {
    // the client went away
  } finally {
    stop.abort();
  }
}

/** The answer to a request that reached a closed gate: its body read away (up to a bound), then 503. */
async function refuse(req: Request, clock: Clock): Promise<Response> {
  await discardBody(req, clock);
  return json(503, "Cannot serve the request: the server is shutting down", { connection: "close" });
}

/**
 * A gate in front of a handler that counts the requests inside it and, once closed, refuses new ones.
 *
 * @example Close the gate, then wait for the requests inside
 * ```ts
 * import { DrainGate } from "./http_listener.ts";
 * const gate = new DrainGate(() => new Response("ok"));
 * console.log((await gate.fetch(new Request("http://x/"))).status); // 200
 * gate.close();
 * console.log((await gate.fetch(new Request("http://x/"))).status); // 503
 * await gate.idle();
 * ```
 */
export class DrainGate {
  readonly #inner: Fetch;
  readonly #clock: Clock;
  #closed = false;
  #active = 0;
  #waiters: Array<() => void> = [];
  /** When the last request reached the gate (served or refused), on the clock. */
  #lastArrival = -Infinity;

  /**
   * @param inner The handler behind the gate.
   * @param clock The clock of {@linkcode DrainGate.quiet} and of a refused body's read (virtual in tests).
   */
  constructor(inner: Fetch, clock: Clock = new SystemClock()) {
    this.#inner = inner;
    this.#clock = clock;
  }

  /** Requests inside the handler now (their responses not yet produced). */
  get active(): number {
    return this.#active;
  }

  /**
   * The gated handler. Not a coroutine: every request of `nrt serve` passes here, and the inner handler's promise is
   * followed with two callbacks made once per gate (ours: three allocations less per request).
   */
  readonly fetch: Fetch = (req) => {
    this.#lastArrival = this.#clock.now();
    if (this.#closed) return refuse(req, this.#clock);
    this.#active++;
    let res: Response | Promise<Response>;
    try {
      res = this.#inner(req);
    } catch (e) {
      this.#leave();
      return Promise.reject(e);
    }
    return res instanceof Promise ? res.then(this.#answered, this.#failed) : this.#answered(res);
  };

  /** A request's answer, once produced: it leaves the gate. */
  readonly #answered = (res: Response): Response => {
    this.#leave();
    if (!this.#closed) return res;
    // Answered during the drain: the client must open a new connection for its next request.
    const headers = new Headers(res.headers);
    headers.set("connection", "close");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  };

  /** A request whose handler failed: it leaves the gate, and the failure goes on. */
  readonly #failed = (e: unknown): never => {
    this.#leave();
    throw e;
  };

  #leave(): void {
    if (--this.#active === 0) { for (const w of this.#waiters.splice(0)) w(); }
  }

  /** Refuses every request from now on. */
  close(): void {
    this.#closed = true;
  }

  /** Settles when no request is inside the handler. */
  idle(): Promise<void> {
    return this.#active === 0 ? Promise.resolve() : new Promise((r) => this.#waiters.push(r));
  }

  /**
   * Settles once no request is inside the handler and none has reached the gate for `ms` (ours). A listener that
   * stops as soon as the gate is idle resets the connections whose next request the server has not read yet: a client
   * whose answer came before the drain began keeps its connection and may already have sent that request. Waiting for
   * a quiet spell lets such a request reach the gate and get its 503 with `Connection: close` instead.
   *
   * Clients that keep sending (each refused) would hold the spell off for ever, so it waits at most `maxMs` after the
   * gate first went idle.
   *
   * @param ms The quiet spell, in ms of the gate's clock.
   * @param maxMs The longest wait once the gate is idle.
   */
  async quiet(ms: number, maxMs: number = Infinity): Promise<void> {
    await this.idle();
    const until = this.#clock.now() + maxMs;
    for (;;) {
      const now = this.#clock.now();
      const since = now - this.#lastArrival;
      if ((since >= ms && this.#active === 0) || now >= until) return;
      await this.#clock.sleep(Math.max(0, Math.min(ms - since, until - now)));
      await this.idle();
    }
  }
}
