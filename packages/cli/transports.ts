/**
 * Socket transports for the device daemon (composition-root code: it uses `Bun.*` or `Deno.*`): a Unix socket
 * path or a loopback TCP port, adapted to the platform-free `Link`/`LinkEvents` of `@nrt/device-sim`'s remote
 * folder. Writes issued in one task are coalesced into one socket write (pipelined requests cost one syscall), and
 * a partial write is finished when the socket drains, so a frame is never cut by back-pressure.
 *
 * @module
 */
import { existsSync, unlinkSync } from "node:fs";
import { type Dialer, type Link, type LinkEvents, RemotePortal, type RemotePortalOptions } from "../device-sim/remote/mod.ts";

/** Where a daemon listens: a Unix socket path, or a TCP port on a loopback host (default 127.0.0.1). */
export type SocketAddress = { readonly path: string } | { readonly port: number; readonly hostname?: string };

/** A listening daemon socket. */
export interface SocketListener {
  /** `unix:PATH` or `HOST:PORT` (with the port the OS chose for port 0). */
  readonly address: string;
  /** The TCP port, for a TCP listener. */
  readonly port?: number;
  /** Stops accepting and closes every accepted connection. */
  close(): Promise<void>;
}

/** Formats an address for messages (`unix:/tmp/nrt.sock`, `127.0.0.1:7000`). */
export function formatAddress(a: SocketAddress): string {
  return "path" in a ? `unix:${a.path}` : `${a.hostname ?? "127.0.0.1"}:${a.port}`;
}

/**
 * Parses `unix:PATH`, an absolute or `./` path, `HOST:PORT` or `PORT`.
 *
 * @throws {TypeError} When the text is none of these.
 */
export function parseAddress(text: string): SocketAddress {
  if (text.startsWith("unix:")) return { path: text.slice(5) };
  if (text.startsWith("/") || text.startsWith(".")) return { path: text };
  const m = /^(?:([\w.-]+):)?(\d{1,5})$/.exec(text);
  if (m === null) throw new TypeError(`Cannot parse the daemon address "${text}": expected unix:PATH, HOST:PORT or PORT`);
  return { hostname: m[1] ?? "127.0.0.1", port: Number(m[2]) };
}

/**
 * Connects a {@linkcode RemotePortal} to the daemon at `address`.
 *
 * @param address The daemon's socket.
 * @param options Identity (default: this process's pid and its command line) and the request timeout.
 */
export function connectDeviceDaemon(address: SocketAddress, options: Partial<RemotePortalOptions> = {}): Promise<RemotePortal> {
  const proc = (globalThis as { process?: { pid: number; argv: string[] } }).process;
  return RemotePortal.connect(socketDialer(address), {
    pid: options.pid ?? proc?.pid ?? 0,
    name: options.name ?? proc?.argv.slice(1).join(" ").slice(0, 200) ?? "nrt",
    requestTimeoutMs: options.requestTimeoutMs,
  });
}

/** A dialer for `address` on the running platform. */
export function socketDialer(address: SocketAddress): Dialer {
  return isBun() ? bunDial(address) : denoDial(address);
}

/**
 * Listens on `address`; each accepted connection is handed to `accept`. A stale Unix socket file (its daemon
 * died) is replaced; a live one is refused.
 */
export async function listenSocket(address: SocketAddress, accept: (link: Link) => LinkEvents): Promise<SocketListener> {
  if ("path" in address && existsSync(address.path)) {
    const live = await socketDialer(address)({ data() {}, closed() {} }).then((l) => (l.close(), true), () => false);
    if (live) throw new Error(`Cannot listen on ${formatAddress(address)}: another daemon is listening there`);
    unlinkSync(address.path);
  }
  return isBun() ? bunListen(address, accept) : denoListen(address, accept);
}

function isBun(): boolean {
  return (globalThis as { Bun?: unknown }).Bun !== undefined;
}

/** Coalesces the sends of one task into one write; finishes partial writes when the socket drains. */
class WriteQueue {
  readonly #write: (bytes: Uint8Array) => number | Promise<number>;
  #queue: Uint8Array[] = [];
  #scheduled = false;
  #busy = false;
  closed = false;

  constructor(write: (bytes: Uint8Array) => number | Promise<number>) {
    this.#write = write;
  }

  push(bytes: Uint8Array): void {
    if (this.closed) return;
    this.#queue.push(bytes);
    if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => {
        this.#scheduled = false;
        void this.flush();
      });
    }
  }

  /** Writes what is queued; returns when the queue is empty or the socket is full (then `drain` calls again). */
  async flush(): Promise<void> {
    if (this.#busy || this.closed) return;
    this.#busy = true;
    try {
      while (this.#queue.length > 0 && !this.closed) {
        const chunk = this.#queue.length === 1 ? this.#queue[0] : concat(this.#queue);
        this.#queue = [chunk];
        const n = await this.#write(chunk);
        if (n >= chunk.byteLength) this.#queue.shift();
        else {
          this.#queue[0] = chunk.subarray(Math.max(0, n));
          if (isBun()) return; // Bun calls `drain` when the socket can take more
        }
      }
    } finally {
      this.#busy = false;
    }
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

// ---- Bun ------------------------------------------------------------------------------------------------------

interface BunSocket {
  write(data: Uint8Array): number;
  end(): void;
  setNoDelay?(on: boolean): void;
  data: BunConn;
}
interface BunConn {
  events?: LinkEvents;
  queue: WriteQueue;
  link: Link;
  ended: boolean;
}
interface BunApi {
  connect(o: Record<string, unknown>): Promise<BunSocket>;
  listen(o: Record<string, unknown>): { port?: number; stop(closeActive?: boolean): void };
}

function bunAddress(a: SocketAddress): Record<string, unknown> {
  return "path" in a ? { unix: a.path } : { hostname: a.hostname ?? "127.0.0.1", port: a.port };
}

function bunConn(socket: BunSocket): BunConn {
  const queue = new WriteQueue((b) => socket.write(b));
  const conn: BunConn = {
    queue,
    ended: false,
    link: {
      send: (bytes) => queue.push(bytes),
      close: () => {
        if (conn.ended) return;
        queue.closed = true;
        socket.end();
      },
    },
  };
  return conn;
}

function bunHandlers(onOpen: (s: BunSocket) => void): Record<string, unknown> {
  const ended = (s: BunSocket, reason?: unknown) => {
    const c = s.data;
    if (c === undefined || c.ended) return;
    c.ended = true;
    c.queue.closed = true;
    c.events?.closed(reason);
  };
  return {
    open: onOpen,
    data: (s: BunSocket, chunk: Uint8Array) => s.data?.events?.data(chunk),
    drain: (s: BunSocket) => void s.data?.queue.flush(),
    close: (s: BunSocket) => ended(s),
    end: (s: BunSocket) => ended(s),
    error: (s: BunSocket, e: unknown) => ended(s, e),
    connectError: (s: BunSocket, e: unknown) => ended(s, e),
  };
}

function bunDial(address: SocketAddress): Dialer {
  const Bun = (globalThis as unknown as { Bun: BunApi }).Bun;
  return async (events) => {
    const socket = await Bun.connect({
      ...bunAddress(address),
      socket: bunHandlers((s) => {
        s.data = bunConn(s);
        s.data.events = events;
        s.setNoDelay?.(true);
      }),
    });
    return socket.data.link;
  };
}

function bunListen(address: SocketAddress, accept: (link: Link) => LinkEvents): Promise<SocketListener> {
  const Bun = (globalThis as unknown as { Bun: BunApi }).Bun;
  const open = new Set<BunSocket>();
  const server = Bun.listen({
    ...bunAddress(address),
    socket: bunHandlers((s) => {
      s.data = bunConn(s);
      s.setNoDelay?.(true);
      open.add(s);
      const events = accept(s.data.link);
      s.data.events = {
        data: (c) => events.data(c),
        closed: (r) => {
          open.delete(s);
          events.closed(r);
        },
      };
    }),
  });
  const port = "path" in address ? undefined : server.port;
  return Promise.resolve({
    address: formatAddress("path" in address ? address : { ...address, port: port! }),
    port,
    close: () => {
      server.stop(true);
      for (const s of open) s.data.link.close();
      if ("path" in address && existsSync(address.path)) unlinkSync(address.path);
      return Promise.resolve();
    },
  });
}

// ---- Deno -----------------------------------------------------------------------------------------------------

interface DenoConn {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
  setNoDelay?(on: boolean): void;
}
interface DenoListener extends AsyncIterable<DenoConn> {
  readonly addr: { port?: number };
  close(): void;
}
interface DenoApi {
  connect(o: Record<string, unknown>): Promise<DenoConn>;
  listen(o: Record<string, unknown>): DenoListener;
}

function denoAddress(a: SocketAddress): Record<string, unknown> {
  return "path" in a ? { transport: "unix", path: a.path } : { hostname: a.hostname ?? "127.0.0.1", port: a.port };
}

/** Wires a Deno connection to `events`; returns its link. */
function denoLink(conn: DenoConn, events: () => LinkEvents | undefined): Link {
  let ended = false;
  const queue = new WriteQueue((b) => conn.write(b));
  const end = (reason?: unknown) => {
    if (ended) return;
    ended = true;
    queue.closed = true;
    try {
      conn.close();
    } catch { /* already closed */ }
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
    send: (bytes) => queue.push(bytes),
    close: () => end(),
  };
}

function denoDial(address: SocketAddress): Dialer {
  const Deno = (globalThis as unknown as { Deno: DenoApi }).Deno;
  return async (events) => denoLink(await Deno.connect(denoAddress(address)), () => events);
}

function denoListen(address: SocketAddress, accept: (link: Link) => LinkEvents): Promise<SocketListener> {
  const Deno = (globalThis as unknown as { Deno: DenoApi }).Deno;
  const listener = Deno.listen(denoAddress(address));
  const links = new Set<Link>();
  void (async () => {
    try {
      for await (const conn of listener) {
        // deno-lint-ignore prefer-const -- assigned after the link exists; the link reads it lazily
        let events: LinkEvents | undefined;
        const link = denoLink(conn, () => events);
        links.add(link);
        const inner = accept(link);
        events = {
          data: (c) => inner.data(c),
          closed: (r) => {
            links.delete(link);
            inner.closed(r);
          },
        };
      }
    } catch { /* listener closed */ }
  })();
  const port = "path" in address ? undefined : listener.addr.port;
  return Promise.resolve({
    address: formatAddress("path" in address ? address : { ...address, port: port! }),
    port,
    close: () => {
      listener.close();
      for (const l of links) l.close();
      if ("path" in address && existsSync(address.path)) unlinkSync(address.path);
      return Promise.resolve();
    },
  });
}
