/**
 * Socket transports for the device daemon (ours): a Unix socket path or a loopback TCP port, adapted to the
 * platform-free `Link`/`LinkEvents` of `@nrt/device-sim`'s remote folder. The sockets themselves come from the
 * platform adapter (`platform.ts`). Writes issued in one task are coalesced into one socket write, so pipelined
 * requests cost one syscall, and a partial write is finished when the socket drains, so a frame is never cut by
 * back-pressure.
 *
 * @module
 */
import { lstatSync, type Stats, unlinkSync } from "node:fs";
import process from "node:process";
import {
  type Dialer,
  type Link,
  type LinkEvents,
  RemotePortal,
  type RemotePortalOptions,
} from "@nrt/device-sim/remote";
import {
  connectSocket,
  serveSocket,
  type SocketAddress,
  type SocketConnection,
  type SocketEvents,
} from "./platform.ts";

export type { SocketAddress } from "./platform.ts";

/** A listening daemon socket. */
export interface SocketListener {
  /** `unix:PATH` or `HOST:PORT` (with the port the OS chose for port 0). */
  readonly address: string;
  /** The TCP port, for a TCP listener. */
  readonly port?: number;
  /** Stops accepting, closes every accepted connection and removes the Unix socket file. */
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
  if (m === null) {
    throw new TypeError(`Cannot parse the daemon address "${text}": expected unix:PATH, HOST:PORT or PORT`);
  }
  return { hostname: m[1] ?? "127.0.0.1", port: Number(m[2]) };
}

/**
 * Connects a {@linkcode RemotePortal} to the daemon at `address`.
 *
 * @param address The daemon's socket.
 * @param options Identity (default: this process's pid and its command line) and the request timeout.
 * @returns The connected portal.
 */
export function connectDeviceDaemon(
  address: SocketAddress,
  options: Partial<RemotePortalOptions> = {},
): Promise<RemotePortal> {
  return RemotePortal.connect(socketDialer(address), {
    pid: options.pid ?? process.pid,
    name: options.name ?? process.argv.slice(1).join(" ").slice(0, 200),
    requestTimeoutMs: options.requestTimeoutMs,
  });
}

/**
 * A dialer for `address`: each call opens one connection.
 *
 * @param address The daemon's socket.
 * @returns The dialer; it rejects with an `Error` naming the address when the connection cannot be made.
 */
export function socketDialer(address: SocketAddress): Dialer {
  return async (events) => {
    // deno-lint-ignore prefer-const -- assigned once connected; the socket's events read it lazily
    let queue: WriteQueue | undefined;
    let connection: SocketConnection;
    try {
      connection = await connectSocket(address, socketEvents(events, () => queue));
    } catch (e) {
      throw new Error(
        `Cannot connect to the device daemon at ${formatAddress(address)}: ${
          e instanceof Error ? e.message : String(e)
        }`,
        { cause: e },
      );
    }
    queue = new WriteQueue(connection);
    return linkOf(connection, queue);
  };
}

/**
 * Listens on `address`; each accepted connection is handed to `accept`. At a Unix socket path, only a leftover
 * socket (one nobody accepts on: its daemon died) is replaced; a live daemon's socket is refused, and so is anything
 * that is not a socket (a file, a folder, a symbolic link), which is never removed.
 *
 * @param address Where to listen (TCP port 0: the OS picks one, reported in the listener).
 * @param accept Wires an accepted connection to the protocol side.
 * @returns The listener.
 * @throws {Error} When another daemon listens on the Unix socket, the path holds something other than a socket, or
 * the address cannot be bound.
 */
export async function listenSocket(
  address: SocketAddress,
  accept: (link: Link) => LinkEvents,
): Promise<SocketListener> {
  if ("path" in address) {
    const found = entryAt(address.path, address);
    if (found !== undefined) {
      if (!found.isSocket()) {
        throw new Error(
          `Cannot listen on ${formatAddress(address)}: ${address.path} is ${kindOf(found)}, not a socket; ` +
            "remove it or choose another path",
        );
      }
      const live = await socketDialer(address)({ data() {}, closed() {} }).then((l) => (l.close(), true), () => false);
      if (live) throw new Error(`Cannot listen on ${formatAddress(address)}: another daemon is listening there`);
      unlinkSync(address.path);
    }
  }
  let server;
  try {
    server = serveSocket(address, (connection) => {
      const queue = new WriteQueue(connection);
      return socketEvents(accept(linkOf(connection, queue)), () => queue);
    });
  } catch (e) {
    throw new Error(`Cannot listen on ${formatAddress(address)}: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
  const port = server.port;
  return {
    address: formatAddress("path" in address ? address : { ...address, port: port! }),
    port,
    close: () => {
      server.close();
      // Our own socket only: whatever replaced it meanwhile stays.
      if ("path" in address && entryAt(address.path)?.isSocket() === true) unlinkSync(address.path);
      return Promise.resolve();
    },
  };
}

/**
 * What is at `path` (the entry itself, not a symbolic link's target), or `undefined` when nothing is.
 *
 * @throws {Error} Naming the address when the path cannot be examined (with `address`; otherwise nothing is assumed
 * there).
 */
function entryAt(path: string, address?: SocketAddress): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT" || address === undefined) return undefined;
    throw new Error(`Cannot listen on ${formatAddress(address)}: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
}

function kindOf(s: Stats): string {
  if (s.isFile()) return "a file";
  if (s.isDirectory()) return "a folder";
  if (s.isSymbolicLink()) return "a symbolic link";
  return "a special file";
}

/** The socket's events, delivered to the protocol side and to the connection's write queue. */
function socketEvents(events: LinkEvents, queue: () => WriteQueue | undefined): SocketEvents {
  return {
    data: (chunk) => events.data(chunk),
    drain: () => void queue()?.flush(),
    closed: (reason) => {
      const q = queue();
      if (q !== undefined) q.closed = true;
      events.closed(reason);
    },
  };
}

function linkOf(connection: SocketConnection, queue: WriteQueue): Link {
  return {
    send: (bytes) => queue.push(bytes),
    close: () => queue.end(() => connection.close()),
    queued: () => queue.bytes,
  };
}

/** How long a closing link waits for its peer to take what was sent before it closes anyway (ours). */
const CLOSE_FLUSH_MS = 1000;

/** Coalesces the sends of one task into one write; finishes a partial write when the socket drains. */
class WriteQueue {
  readonly #connection: SocketConnection;
  #queue: Uint8Array[] = [];
  #scheduled = false;
  #busy = false;
  /** Set by `end`: closes the connection once the queue is written. */
  #onEmpty: (() => void) | undefined;
  closed = false;
  /** Bytes queued and not yet taken by the socket. */
  bytes = 0;

  constructor(connection: SocketConnection) {
    this.#connection = connection;
  }

  push(bytes: Uint8Array): void {
    if (this.closed || this.#onEmpty !== undefined) return;
    this.#queue.push(bytes);
    this.bytes += bytes.byteLength;
    if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => {
        this.#scheduled = false;
        void this.flush();
      });
    }
  }

  /**
   * Takes no more bytes, and closes with `close` once what is queued is written, or after {@linkcode CLOSE_FLUSH_MS}
   * for a peer that does not read.
   */
  end(close: () => void): void {
    if (this.closed || this.#onEmpty !== undefined) return;
    let done = false;
    const once = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.closed = true;
      close();
    };
    this.#onEmpty = once;
    const timer = setTimeout(once, CLOSE_FLUSH_MS);
    if (this.#queue.length === 0 && !this.#busy && !this.#scheduled) once();
  }

  /** Writes what is queued; returns when the queue is empty or the socket is full (then `drain` calls again). */
  async flush(): Promise<void> {
    if (this.#busy || this.closed) return;
    this.#busy = true;
    try {
      while (this.#queue.length > 0 && !this.closed) {
        const chunk = this.#queue.length === 1 ? this.#queue[0] : concat(this.#queue);
        this.#queue = [chunk];
        const n = await this.#connection.write(chunk);
        if (n >= chunk.byteLength) {
          this.#queue.shift();
          this.bytes -= chunk.byteLength;
        } else {
          const taken = Math.max(0, n);
          this.#queue[0] = chunk.subarray(taken);
          this.bytes -= taken;
          return;
        }
      }
    } finally {
      this.#busy = false;
    }
    if (this.#queue.length === 0) this.#onEmpty?.();
  }
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
