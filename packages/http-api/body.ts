/**
 * Reading a request body under a byte limit, and parsing JSON under a nesting limit. The limit is enforced on the
 * bytes actually received, so a chunked body (no `Content-Length`) is cut off as soon as it passes the limit.
 *
 * @module
 */
import { setTimeout } from "node:timers";
import { HttpError } from "./http_error.ts";
import { CLIENT_CLOSED_REQUEST } from "./served_model.ts";

/**
 * Reads a request body, refusing it past `limit` bytes.
 *
 * @param req The request.
 * @param limit The largest body accepted, in bytes.
 * @returns The body bytes (empty when there is none).
 * @throws {HttpError} 400 when `Content-Length` and `Transfer-Encoding` are both present (RFC 9112 §6.3 — a
 *   smuggling vector) or `Content-Length` is malformed or disagrees with the body; 413 when the declared or the
 *   received length passes `limit`; {@linkcode CLIENT_CLOSED_REQUEST} when the runtime cannot read the body (the
 *   client closed or half-closed its connection, or aborted or broke the framing of a chunked body, mid-body).
 *
 * @example Read a small body
 * ```ts
 * import { readBody } from "@nrt/http-api";
 * const bytes = await readBody(new Request("http://x/", { method: "POST", body: "{}" }), 1024);
 * console.log(bytes.length); // 2
 * ```
 */
export async function readBody(
  req: Request,
  limit: number,
  options: { deadlineMs?: number } = {},
): Promise<Uint8Array> {
  const cl = req.headers.get("content-length");
  if (cl !== null && req.headers.has("transfer-encoding")) {
    await req.body?.cancel().catch(() => {});
    throw new HttpError(400, "Cannot read the request body: it has both Content-Length and Transfer-Encoding");
  }
  let declared: number | undefined;
  if (cl !== null) {
    // Any run of digits (RFC 9110 §8.6): one past 2^53 is still a byte count, over any limit; Bun.serve hands the
    // handler lengths of up to 17 digits, Deno.serve up to 2^64 - 1 (docs/rest-api.md, "Errors"): 413, not 400.
    if (!/^[0-9]+$/.test(cl)) {
      await req.body?.cancel().catch(() => {});
      throw new HttpError(400, `Cannot read the request body: Content-Length "${cl.slice(0, 32)}" is not a byte count`);
    }
    declared = Number(cl);
    if (declared > limit) {
      await req.body?.cancel().catch(() => {});
      // The header's digits, not `declared`: past 2^53 the number is rounded.
      const shown = cl.replace(/^0+(?=.)/, "");
      throw new HttpError(
        413,
        `Cannot read the request body: ${
          shown.length > 32 ? `${shown.slice(0, 32)}…` : shown
        } bytes is over the ${limit}-byte limit`,
        { headers: CLOSE },
      );
    }
  }
  // `req.body` is not read on the declared path: on Bun that getter builds the request's JavaScript stream (a
  // ReadableStream and its source, per request) which the native read below does not need.
  if (declared === 0) return new Uint8Array(0);
  if (declared === undefined && req.body === null) return new Uint8Array(0);
  // A client that trickles its body must not hold the server's body budget for ever.
  const deadline = options.deadlineMs === undefined ? undefined : Date.now() + options.deadlineMs;
  if (declared !== undefined) {
    // A declared length frames the body (the server's HTTP parser reads exactly that many bytes, at most `limit`), so
    // the runtime reads it whole, natively, without a JavaScript stream and its reader (ours: on Bun the stream's
    // machinery was the largest item of the JSON endpoint's body handling).
    let buf: ArrayBuffer;
    try {
      const whole = req.arrayBuffer();
      buf = deadline === undefined ? await whole : await before(whole, deadline, options.deadlineMs!, req);
    } catch (e) {
      throw bodyLost(e);
    }
    if (buf.byteLength !== declared) {
      throw new HttpError(
        400,
        `Cannot read the request body: Content-Length is ${declared} but ${buf.byteLength} bytes arrived`,
      );
    }
    return new Uint8Array(buf);
  }
  const reader = req.body!.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let read: ReadableStreamReadResult<Uint8Array>;
    try {
      read = deadline === undefined
        ? await reader.read()
        : await before(reader.read(), deadline, options.deadlineMs!, reader);
    } catch (e) {
      throw bodyLost(e);
    }
    const { done, value } = read;
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw new HttpError(413, `Cannot read the request body: it is over the ${limit}-byte limit`, { headers: CLOSE });
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

/**
 * The error of a body read that failed: ours (the 408 of the deadline) as it is; the runtime's, which says the body can
 * no longer arrive, as {@linkcode CLIENT_CLOSED_REQUEST}. Bun reports "The connection was closed." and Deno "Cannot
 * read (request) body as underlying resource unavailable" alike for a client that closed or half-closed its connection
 * mid-body, aborted a chunked body or sent an invalid chunk (Bun then answers a 400 itself). The request failed on the
 * client's side, not the server's, so it is not a 500, not logged as a server error, and counted as a failure of
 * reason `OTHER`, with the status of a client that left while its request was queued (`served_model.ts`): the same
 * case one step earlier (ours). Bun has closed the connection, so nobody reads the answer; Deno.serve still sends it
 * to a client that only half-closed, which reads the 499 and its message with the `Connection: close` Deno adds
 * itself (one of ours would be sent twice).
 */
function bodyLost(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  return new HttpError(
    CLIENT_CLOSED_REQUEST,
    "Cannot read the request body: the client's connection ended before all of it arrived",
    { cause: e },
  );
}

/**
 * A refused body is not drained: the answer closes the connection, so the rest of a large or endless body is never
 * read (docs/security.md).
 */
const CLOSE: Readonly<Record<string, string>> = { connection: "close" };

/**
 * Marks a request whose body a read given up on still holds (ours): that read (`arrayBuffer()`) cannot be cancelled,
 * so the runtime sees the body as still arriving. A global symbol, read by the Deno adapter of the `nrt` command
 * (`packages/cli/platform.ts`), which then leaves `Connection: close` to Deno.serve: it adds its own in that case.
 */
const BODY_STILL_READ = Symbol.for("nrt.http.bodyStillRead");

/** The rejection of a deadline bucket that passed (mapped to a 408 by the request that raced it). */
const LATE = Symbol("late");

/**
 * Requests whose body deadlines end in the same slot share one timer (ours): a timer per request costs each request
 * a timer insert and removal and a `Timeout`, for a deadline that almost never passes. A slot is a twentieth of the
 * deadline (at most 1 s): the 408 comes at most that much late. A slot lives until its end even when no request waits
 * on it any more: a body is read in microseconds, so under load the slot's last reader was usually gone before the
 * next request came, and a slot cleared then was made again, timer and all, for every request. Its timer keeps the
 * process alive only while a request waits on it (ref'd and unref'd, which allocates nothing); a deadline has at most
 * 21 slots pending. A waiting request is in the slot's list until it leaves, so the slot holds nothing of a request
 * that has gone: raced against one promise per slot (`Promise.race`), every request left a reaction on that promise,
 * holding its body, until the slot ended — 1.3 GB after a minute of 15k requests a second.
 */
interface DeadlineSlot {
  readonly timer: ReturnType<typeof setTimeout>;
  /**
   * The rejections of the reads waiting on the slot, in places reused once free (`free`): not a `Set`, whose storage
   * a request's add and delete made JavaScriptCore rebuild, every rebuilt storage then surviving eden collections
   * until a full one (in_flight.ts says how).
   */
  readonly waiting: Array<((reason: unknown) => void) | undefined>;
  readonly free: number[];
  /** How many reads wait. */
  count: number;
}

/** The slots by their end (epoch ms). */
const SLOTS = new Map<number, DeadlineSlot>();

/** The slot of a deadline `deadlineMs` long ending at `deadline`: made (and its timer started) if none is pending. */
function slotOf(deadline: number, deadlineMs: number): DeadlineSlot {
  const width = Math.min(1000, Math.max(1, Math.floor(deadlineMs / 20)));
  const end = Math.ceil(deadline / width) * width;
  let slot = SLOTS.get(end);
  if (slot === undefined) {
    const waiting: DeadlineSlot["waiting"] = [];
    const timer = setTimeout(() => {
      SLOTS.delete(end);
      for (const late of waiting) late?.(LATE);
    }, Math.max(0, end - Date.now()));
    timer.unref();
    slot = { timer, waiting, free: [], count: 0 };
    SLOTS.set(end, slot);
  }
  return slot;
}

/**
 * `read`'s value, or a 408 once `deadline` (epoch ms, `deadlineMs` after the read began) passes; a failed or late read
 * cancels the body it reads `from` first (the request's or the reader's: passed, not a closure, since every body read
 * comes here).
 */
async function before<T>(
  read: Promise<T>,
  deadline: number,
  deadlineMs: number,
  from: Request | ReadableStreamDefaultReader<Uint8Array>,
): Promise<T> {
  const slot = slotOf(deadline, deadlineMs);
  // Settled by the read, or rejected by the slot's timer at the deadline (no executor closure per read).
  const settled = Promise.withResolvers<T>();
  read.then(settled.resolve, settled.reject);
  if (slot.count++ === 0) slot.timer.ref();
  const at = slot.free.pop() ?? slot.waiting.length;
  slot.waiting[at] = settled.reject;
  try {
    return await settled.promise;
  } catch (e) {
    read.catch(() => {}); // a read given up on settles when the connection closes
    if (from instanceof Request && from.body?.locked === true) {
      // A body a read holds cannot be cancelled (its `cancel()` rejects): the answer closes the connection.
      if (e === LATE) (from as unknown as Record<symbol, boolean>)[BODY_STILL_READ] = true;
    } else {
      try {
        await (from instanceof Request ? from.body?.cancel() : from.cancel())?.catch(() => {});
      } catch { /* the runtime's stream refused the cancel: the answer closes the connection */ }
    }
    if (e === LATE) {
      throw new HttpError(408, "Cannot read the request body: it did not arrive in time", { headers: CLOSE });
    }
    throw e;
  } finally {
    slot.waiting[at] = undefined;
    slot.free.push(at);
    if (--slot.count === 0) slot.timer.unref();
  }
}

/**
 * A budget of request-body bytes the server holds at once (docs/security.md): a request reserves what its body may
 * take before reading it and releases it when it is answered, so concurrent large bodies wait their turn instead of
 * adding up. Ours.
 *
 * @example Two reservations that fit, a third that waits
 * ```ts
 * import { BodyBudget } from "@nrt/http-api";
 * const budget = new BodyBudget(100, 1000);
 * const a = await budget.reserve(60);
 * const b = budget.reserve(60); // waits until `a` is released
 * a();
 * (await b)();
 * console.log(budget.reserved); // 0
 * ```
 */
export class BodyBudget {
  /** Bytes the budget holds. */
  readonly bytes: number;
  readonly #maxWaitMs: number;
  readonly #waiters: Array<{ n: number; grant: () => void }> = [];
  #reserved = 0;

  /**
   * A budget of `bytes`, where a request waits up to `maxWaitMs` for room.
   *
   * @param bytes Bytes of request bodies held at once.
   * @param maxWaitMs Longest wait for room before a request is refused with 503.
   */
  constructor(bytes: number, maxWaitMs: number) {
    this.bytes = bytes;
    this.#maxWaitMs = maxWaitMs;
  }

  /** Bytes reserved now. */
  get reserved(): number {
    return this.#reserved;
  }

  /**
   * Reserves `n` bytes (at most the whole budget), waiting in line for room.
   *
   * @returns The release function (idempotent).
   * @throws {HttpError} 503 when no room came within the wait.
   */
  reserve(n: number): Promise<() => void> {
    const now = this.tryReserve(n);
    if (now !== undefined) return Promise.resolve(now);
    const want = this.#want(n);
    return new Promise((resolve, reject) => {
      const w = {
        n: want,
        grant: () => {
          clearTimeout(timer);
          this.#reserved += want;
          resolve(this.#release(want));
        },
      };
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(w);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(
          new HttpError(503, "Cannot read the request: the server is busy with other large requests; retry later"),
        );
        this.#pump();
      }, this.#maxWaitMs);
      this.#waiters.push(w);
    });
  }

  /**
   * Reserves `n` bytes (at most the whole budget) if there is room now and no request waits for room before it: what
   * {@linkcode BodyBudget.reserve} does without a promise when it need not wait (ours: every request asks).
   *
   * @returns The release function (idempotent), or `undefined` when the request would have to wait.
   */
  tryReserve(n: number): (() => void) | undefined {
    const want = this.#want(n);
    if (this.#waiters.length > 0 || this.#reserved + want > this.bytes) return undefined;
    this.#reserved += want;
    return this.#release(want);
  }

  /** What a reservation of `n` bytes takes: at least none, at most the whole budget. */
  #want(n: number): number {
    return Math.min(Math.max(0, n), this.bytes);
  }

  /** The release function of a reservation of `want` bytes: it gives them back once. */
  #release(want: number): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#reserved -= want;
      this.#pump();
    };
  }

  #pump(): void {
    while (this.#waiters.length > 0 && this.#reserved + this.#waiters[0].n <= this.bytes) {
      this.#waiters.shift()!.grant();
    }
  }
}

const OPEN_BRACKET = 0x5b, CLOSE_BRACKET = 0x5d, OPEN_BRACE = 0x7b, CLOSE_BRACE = 0x7d, QUOTE = 0x22, BACKSLASH = 0x5c;
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses UTF-8 JSON after checking that arrays and objects nest at most `maxDepth` deep, so a hostile body never
 * reaches the parser's recursion.
 *
 * @param bytes UTF-8 text.
 * @param maxDepth The deepest nesting accepted.
 * @returns The parsed value.
 * @throws {HttpError} 400 for nesting past the limit, invalid UTF-8 or malformed JSON.
 *
 * @example Parse a request
 * ```ts
 * import { parseJson } from "@nrt/http-api";
 * console.log(parseJson(new TextEncoder().encode('{"a":[1]}'), 8)); // { a: [1] }
 * ```
 */
export function parseJson(bytes: Uint8Array, maxDepth: number): unknown {
  let depth = 0, inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_BRACKET || b === OPEN_BRACE) {
      if (++depth > maxDepth) {
        throw new HttpError(400, `Cannot parse the JSON body: it nests deeper than ${maxDepth} levels`);
      }
    } else if (b === CLOSE_BRACKET || b === CLOSE_BRACE) depth--;
  }
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (e) {
    throw new HttpError(400, "Cannot parse the JSON body: it is not valid UTF-8", { cause: e });
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `Cannot parse the JSON body: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}
