/**
 * The platform adapter of the `nrt` command (ours; Hono's shape, where each runtime's serve code sits in an adapter
 * and the app sees only `Request`/`Response`): the one module that knows which JavaScript runtime runs it.
 *
 * - The command line, the exit and the shutdown signals go through `node:process`, which Bun and Deno both provide.
 * - HTTP serving names `Bun.serve` and `Deno.serve` here and nowhere else: {@linkcode serveHttp}.
 * - Unix and TCP sockets name `Bun.connect`/`Bun.listen` and `Deno.connect`/`Deno.listen` here and nowhere else:
 *   {@linkcode connectSocket} and {@linkcode serveSocket}. `node:net` runs on both runtimes too, but measured side
 *   by side it cost 1-2 µs more per small round trip and a quarter to a half more per MiB over a Unix socket,
 *   and the device daemon's portal traffic is exactly that.
 *
 * @module
 */
import process from "node:process";

/** The parts of `Bun` this module uses. */
interface BunServer {
  readonly port: number;
  stop(closeActiveConnections?: boolean): Promise<void>;
  timeout(req: Request, seconds: number): void;
}
interface BunApi {
  connect(o: Record<string, unknown>): Promise<BunSocket>;
  listen(o: Record<string, unknown>): { readonly port?: number; stop(closeActiveConnections?: boolean): void };
  serve(o: {
    hostname: string;
    port: number;
    fetch: (req: Request, server: BunServer) => Response | Promise<Response>;
    error: (e: Error) => Response;
    maxRequestBodySize: number;
    idleTimeout: number;
    development: boolean;
  }): BunServer;
}

/** A `Bun.connect`/`Bun.listen` socket; `data` is ours. */
interface BunSocket {
  write(data: Uint8Array): number;
  end(): void;
  setNoDelay?(on: boolean): void;
  data: BunSocketState | undefined;
}
interface BunSocketState {
  readonly connection: SocketConnection;
  events: SocketEvents | undefined;
  ended: boolean;
}

/** A `Deno.connect`/`Deno.listen` connection. */
interface DenoConn {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
  setNoDelay?(on: boolean): void;
}

/** The parts of `Deno` this module uses. */
interface DenoApi {
  connect(o: Record<string, unknown>): Promise<DenoConn>;
  listen(o: Record<string, unknown>): AsyncIterable<DenoConn> & { readonly addr: { port?: number }; close(): void };
  serve(
    o: { hostname: string; port: number; onListen(addr: { port: number }): void; onError(e: unknown): Response },
    fetch: Fetch,
  ): { shutdown(): Promise<void>; finished: Promise<void> };
}

const runtimeGlobals = globalThis as unknown as { Bun?: BunApi; Deno?: DenoApi };

/**
 * The arguments the process was started with, after the script's path (Deno's `Deno.args`).
 *
 * @returns A copy of the arguments.
 */
export function commandLineArgs(): string[] {
  return process.argv.slice(2);
}

/**
 * Ends the process with `code`, even while Workers (the simulator's Q7 cores) would keep it alive.
 *
 * @param code The exit code: 0 done, 1 failed, 2 usage error.
 */
export function exit(code: number): never {
  return process.exit(code);
}

/** The signals that ask a server or daemon to shut down. */
export type ShutdownSignal = "SIGINT" | "SIGTERM";

/** The exit code of a process stopped by `signal`: 128 + its number (130, 143), as a shell reports it. */
export function signalExitCode(signal: ShutdownSignal): number {
  return 128 + (signal === "SIGINT" ? 2 : 15);
}

/** What {@linkcode shutdownSignals} does with each signal. */
export interface ShutdownSignalHandlers {
  /** The first signal, while the program still starts (before `started()`): serve and the daemon exit at once. */
  onStarting(signal: ShutdownSignal): void;
  /** Every signal after the first: the shutdown it started goes on. */
  onAgain(signal: ShutdownSignal): void;
}

/** The shutdown signals of a process, from {@linkcode shutdownSignals}. */
export interface ShutdownSignals {
  /** The program is up: resolves with the first signal (at once if one came while it started). */
  started(): Promise<ShutdownSignal>;
  /** Removes the listeners (tests; a server keeps them until it exits). */
  close(): void;
}

/**
 * Listens for SIGINT and SIGTERM from now until the process ends, with one listener each that is never removed
 * (ours). A Ctrl-C in a terminal reaches both a launcher (npm, the `npx nrt` shim) and the program, and the launcher
 * passes its copy on, so one key press arrives twice, microseconds apart. With no listener in between (one removed
 * after the first signal, or one added only once the server was up) the runtime's default action ended the process
 * in the middle of its shutdown: `nrt serve` lost about one drain in four that way when signalled as it came up.
 *
 * @param handlers What the first signal while starting and every later signal do.
 * @returns The first signal once the program has started, and a way to stop listening.
 *
 * @example Drain a server on the first Ctrl-C, whatever follows
 * ```ts ignore
 * import { shutdownSignals } from "./platform.ts";
 * const signals = shutdownSignals({
 *   onStarting: () => process.exit(130),
 *   onAgain: (s) => console.log(`${s} again: still stopping`),
 * });
 * // ... start the server ...
 * console.log(`${await signals.started()}: stopping`);
 * ```
 */
export function shutdownSignals(handlers: ShutdownSignalHandlers): ShutdownSignals {
  let first: ShutdownSignal | undefined;
  let wake: ((s: ShutdownSignal) => void) | undefined;
  const on = (s: ShutdownSignal): void => {
    if (first !== undefined) return handlers.onAgain(s);
    first = s;
    if (wake !== undefined) wake(s);
    else handlers.onStarting(s);
  };
  const listeners = (["SIGINT", "SIGTERM"] as const).map((s) => [s, () => on(s)] as const);
  for (const [s, h] of listeners) process.on(s, h);
  return {
    started: () => first !== undefined ? Promise.resolve(first) : new Promise((resolve) => (wake = resolve)),
    close: () => {
      for (const [s, h] of listeners) process.off(s, h);
    },
  };
}

/** A `fetch` handler, such as a Hono app's `fetch`. */
export type Fetch = (req: Request) => Response | Promise<Response>;

/** Options of {@linkcode serveHttp}. */
export interface HttpServeOptions {
  /** The interface to bind, such as `127.0.0.1` or `::`. */
  readonly host: string;
  /** The port (0: the OS picks one; {@linkcode HttpListener.port} names it). */
  readonly port: number;
  /**
   * Seconds a request may take before Bun drops its connection (0: no limit), for every request or chosen per
   * request; Deno sets no such limit.
   */
  readonly requestTimeoutSeconds: number | ((req: Request) => number);
  /** Seconds an idle keep-alive connection stays open on Bun (default 30); Deno keeps its own. */
  readonly idleTimeoutSeconds?: number;
  /** The answer when the handler throws (default: a JSON 500 that reveals nothing). */
  readonly onError?: (error: unknown) => Response;
}

/** A listening HTTP server. */
export interface HttpListener {
  /** The port bound. */
  readonly port: number;
  /**
   * Stops listening. Without `force` the requests in flight go on and the promise settles when they are answered;
   * with it, Bun closes the open connections now (Deno has no such call and ignores it). A later call with
   * `force` still forces.
   */
  stop(force?: boolean): Promise<void>;
}

/** The answer when something escapes the handler: JSON, never the runtime's own error page. */
function internalError(): Response {
  return new Response(JSON.stringify({ error: "Cannot answer the request: internal server error" }), {
    status: 500,
    headers: { "content-type": "application/json" },
  });
}

/**
 * Serves `fetch` over HTTP with the runtime's own server: the one place that names `Bun.serve` and `Deno.serve`.
 * The handler always sees an absolute request URL, and a handler that throws is answered by `onError`.
 *
 * Bun: `development: false` (its development error page shows stack, cwd and source); Bun's body limit is set out
 * of the way (`Infinity`: at `Number.MAX_SAFE_INTEGER` a `Content-Length` past 2^53 still got Bun's 413, without
 * a body), since it answers an empty 413 and the handler is expected to enforce its own; every request may run
 * for `requestTimeoutSeconds` instead of Bun's 10-second idle timeout, which would drop a request still executing;
 * idle keep-alive connections close after 30 s. Without a usable `Host` (HTTP/1.0, empty, malformed) Bun gives a
 * bare path as the URL; the handler gets an absolute one naming this server, with the `Host` header kept as sent.
 *
 * Deno: an answer carries one `Connection: close` at most ({@linkcode denoConnectionClose}).
 *
 * @param fetch The handler.
 * @param options Where to listen and the request timeout.
 * @returns The listener, once it accepts connections.
 * @throws {Error} When the runtime is neither Bun nor Deno, or the address cannot be bound.
 *
 * @example Serve a handler on a port the OS picks
 * ```ts ignore
 * import { serveHttp } from "./platform.ts";
 * const server = await serveHttp(() => new Response("ok"), { host: "127.0.0.1", port: 0, requestTimeoutSeconds: 60 });
 * console.log(await (await fetch(`http://127.0.0.1:${server.port}/`)).text()); // "ok"
 * await server.stop();
 * ```
 */
export async function serveHttp(fetch: Fetch, options: HttpServeOptions): Promise<HttpListener> {
  const onError = options.onError ?? internalError;
  const { Bun, Deno } = runtimeGlobals;
  const authority = options.host.includes(":") && !options.host.startsWith("[") ? `[${options.host}]` : options.host;
  const cannot = (e: unknown) =>
    new Error(`Cannot listen on ${authority}:${options.port}: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  if (Bun !== undefined) {
    const timeout = options.requestTimeoutSeconds, idle = options.idleTimeoutSeconds ?? 30;
    let server: BunServer;
    try {
      server = Bun.serve({
        hostname: options.host,
        port: options.port,
        fetch: (req, s) => {
          // Bun's per-request timeout takes whole seconds up to 255; 0 disables it.
          const seconds = typeof timeout === "number" ? timeout : timeout(req);
          const unlimited = seconds > 255 || seconds <= 0;
          s.timeout(req, unlimited ? 0 : seconds);
          const answer = req.url.startsWith("/")
            ? fetch(new Request(`http://${authority}:${s.port}${req.url}`, req))
            : fetch(req);
          if (!unlimited) return answer;
          // The connection keeps the last timeout set: without this, one unlimited request left its keep-alive
          // connection open for ever once idle.
          return Promise.resolve(answer).finally(() => s.timeout(req, idle));
        },
        error: onError,
        maxRequestBodySize: Infinity,
        idleTimeout: idle,
        development: false,
      });
    } catch (e) {
      throw cannot(e);
    }
    return { port: server.port, stop: (force = false) => server.stop(force) };
  }
  if (Deno !== undefined) {
    return await new Promise<HttpListener>((resolve, reject) => {
      try {
        let stopping: Promise<void> | undefined;
        const server = Deno.serve({
          hostname: options.host,
          port: options.port,
          onListen: (a) => resolve({ port: a.port, stop: () => (stopping ??= server.shutdown()) }),
          onError,
        }, (req) => {
          const answer = fetch(req);
          return answer instanceof Promise
            ? answer.then((res) => denoConnectionClose(req, res))
            : denoConnectionClose(req, answer);
        });
      } catch (e) {
        reject(cannot(e));
      }
    });
  }
  throw new Error("Cannot serve: neither Bun.serve nor Deno.serve is available; run with bun or deno");
}

/**
 * The symbol under which `readBody` (`@nrt/http-api`, body.ts) marks a request whose body a read it gave up on (the
 * body deadline passed) still holds: that read cannot be cancelled, so the runtime sees the body as still arriving.
 */
const BODY_STILL_READ = Symbol.for("nrt.http.bodyStillRead");

/** A `close` token in a `Connection` header's value. */
const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i;

/**
 * The handler's answer as Deno.serve is to send it, with one `Connection: close` at most (ours, measured on Deno 2.9):
 * Deno appends its own `connection: close` whenever it closes the connection after the answer — the client sent
 * `Connection: close`, or the request's body has not all arrived and a read still holds it (a declared body whose 408
 * came while `arrayBuffer()` waited) or nobody read it — even when the answer has one already, so the client got the
 * header twice. When Deno adds its own, the handler's goes; a body nobody read is cancelled, which Deno takes as the
 * handler's choice and adds none. Otherwise the handler's header is the only one: Deno.serve then keeps the
 * connection open, but the client was told to close it.
 *
 * @param req The request.
 * @param res The handler's answer.
 * @returns `res` (once an unread body is cancelled), or a copy without its `Connection` header.
 */
function denoConnectionClose(req: Request, res: Response): Response | Promise<Response> {
  const ours = res.headers.get("connection");
  if (ours === null || !CLOSE_TOKEN.test(ours)) return res;
  const clientCloses = CLOSE_TOKEN.test(req.headers.get("connection") ?? "");
  const stillRead = (req as unknown as Record<symbol, unknown>)[BODY_STILL_READ] === true;
  if (!clientCloses && !stillRead) {
    // Unread (an answer given before the body was looked at): once cancelled, Deno closes nothing on its own.
    if (req.body === null || req.bodyUsed) return res;
    return req.body.cancel().then(() => res, () => res);
  }
  const headers = new Headers(res.headers);
  headers.delete("connection");
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}

/** Where a socket listens or connects: a Unix socket path, or a TCP port on a host (default 127.0.0.1). */
export type SocketAddress = { readonly path: string } | { readonly port: number; readonly hostname?: string };

/** What a connected socket reports to its owner. */
export interface SocketEvents {
  /** Bytes arrived, in any cut. The chunk may be reused after the call returns. */
  data(chunk: Uint8Array): void;
  /** The socket can take more bytes after a {@linkcode SocketConnection.write} that took fewer than offered. */
  drain(): void;
  /** The connection ended: the peer closed, it failed (`reason`), or it was closed here. Called once. */
  closed(reason?: unknown): void;
}

/** A connected socket, with Nagle's delay off. */
export interface SocketConnection {
  /**
   * Writes bytes. Returns how many the socket took, or a promise of it; when fewer than offered (Bun, under
   * back-pressure), write the rest after {@linkcode SocketEvents.drain}.
   */
  write(bytes: Uint8Array): number | Promise<number>;
  /** Closes the connection; {@linkcode SocketEvents.closed} follows. Idempotent. */
  close(): void;
}

/** A listening socket. */
export interface SocketServer {
  /** The TCP port bound (the OS's choice for port 0); `undefined` for a Unix socket. */
  readonly port: number | undefined;
  /** Stops accepting and closes every accepted connection. */
  close(): void;
}

/**
 * Opens a connection to `address`.
 *
 * @param address A Unix socket path or a TCP host and port.
 * @param events Where the connection reports.
 * @returns The connection, once connected.
 * @throws {Error} The runtime's error when nothing accepts at `address`.
 */
export async function connectSocket(address: SocketAddress, events: SocketEvents): Promise<SocketConnection> {
  const { Bun, Deno } = runtimeGlobals;
  if (Bun !== undefined) {
    const socket = await Bun.connect({
      ...bunSocketAddress(address),
      socket: bunSocketHandlers((s) => {
        s.data = { connection: bunConnection(s), events, ended: false };
        s.setNoDelay?.(true);
      }),
    });
    return socket.data!.connection;
  }
  if (Deno !== undefined) return denoConnection(await Deno.connect(denoSocketAddress(address)), () => events);
  throw new Error("Cannot open a socket: neither Bun nor Deno is present; run with bun or deno");
}

/**
 * Listens on `address`; each accepted connection is handed to `accept`, which returns where it reports.
 *
 * @param address A Unix socket path (the file must not exist) or a TCP host and port.
 * @param accept Wires an accepted connection.
 * @returns The listening socket, already accepting.
 * @throws {Error} The runtime's error when the address cannot be bound.
 */
export function serveSocket(
  address: SocketAddress,
  accept: (connection: SocketConnection) => SocketEvents,
): SocketServer {
  const { Bun, Deno } = runtimeGlobals;
  const unix = "path" in address;
  if (Bun !== undefined) {
    const open = new Set<BunSocket>();
    const server = Bun.listen({
      ...bunSocketAddress(address),
      socket: bunSocketHandlers((s) => {
        const state: BunSocketState = { connection: bunConnection(s), events: undefined, ended: false };
        s.data = state;
        s.setNoDelay?.(true);
        open.add(s);
        const events = accept(state.connection);
        state.events = {
          data: (c) => events.data(c),
          drain: () => events.drain(),
          closed: (r) => {
            open.delete(s);
            events.closed(r);
          },
        };
      }),
    });
    return {
      port: unix ? undefined : server.port,
      close: () => {
        server.stop(true);
        for (const s of open) s.data?.connection.close();
      },
    };
  }
  if (Deno !== undefined) {
    const listener = Deno.listen(denoSocketAddress(address));
    const open = new Set<SocketConnection>();
    let closing = false;
    void (async () => {
      try {
        for await (const conn of listener) {
          // deno-lint-ignore prefer-const -- assigned once accept() returns; the connection reads it lazily
          let events: SocketEvents | undefined;
          const connection = denoConnection(conn, () => events);
          open.add(connection);
          const inner = accept(connection);
          events = {
            data: (c) => inner.data(c),
            drain: () => inner.drain(),
            closed: (r) => {
              open.delete(connection);
              inner.closed(r);
            },
          };
        }
      } catch (e) {
        if (!closing) throw e; // accepting failed for another reason than close(): the process should know
      }
    })();
    return {
      port: unix ? undefined : listener.addr.port,
      close: () => {
        closing = true;
        listener.close();
        for (const c of open) c.close();
      },
    };
  }
  throw new Error("Cannot open a socket: neither Bun nor Deno is present; run with bun or deno");
}

function bunSocketAddress(a: SocketAddress): Record<string, unknown> {
  return "path" in a ? { unix: a.path } : { hostname: a.hostname ?? "127.0.0.1", port: a.port };
}

function bunConnection(s: BunSocket): SocketConnection {
  return {
    write: (bytes) => s.write(bytes),
    close: () => {
      if (s.data?.ended !== true) s.end();
    },
  };
}

/** Bun's socket handlers: each event goes to the socket's state, set by `onOpen`. */
function bunSocketHandlers(onOpen: (s: BunSocket) => void): Record<string, unknown> {
  const ended = (s: BunSocket, reason?: unknown) => {
    const state = s.data;
    if (state === undefined || state.ended) return;
    state.ended = true;
    state.events?.closed(reason);
  };
  return {
    open: onOpen,
    data: (s: BunSocket, chunk: Uint8Array) => s.data?.events?.data(chunk),
    drain: (s: BunSocket) => s.data?.events?.drain(),
    close: (s: BunSocket) => ended(s),
    end: (s: BunSocket) => ended(s),
    error: (s: BunSocket, e: unknown) => ended(s, e),
    connectError: (s: BunSocket, e: unknown) => ended(s, e),
  };
}

function denoSocketAddress(a: SocketAddress): Record<string, unknown> {
  return "path" in a ? { transport: "unix", path: a.path } : { hostname: a.hostname ?? "127.0.0.1", port: a.port };
}

/** Reads `conn` into one reused 256 KiB buffer until it ends; writes are whole (Deno resolves each write). */
function denoConnection(conn: DenoConn, events: () => SocketEvents | undefined): SocketConnection {
  let ended = false;
  const end = (reason?: unknown) => {
    if (ended) return;
    ended = true;
    try {
      conn.close();
    } catch { /* the runtime closed it already */ }
    events()?.closed(reason);
  };
  conn.setNoDelay?.(true);
  void (async () => {
    const buf = new Uint8Array(256 * 1024);
    try {
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        events()?.data(buf.subarray(0, n));
      }
      end();
    } catch (e) {
      end(ended ? undefined : e);
    }
  })();
  return {
    write: async (bytes) => {
      try {
        let at = 0;
        while (at < bytes.byteLength) at += await conn.write(bytes.subarray(at));
        return at;
      } catch (e) {
        end(ended ? undefined : e); // the failure is reported as the connection's end
        return 0;
      }
    },
    close: () => end(),
  };
}
