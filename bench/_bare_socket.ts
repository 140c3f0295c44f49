/**
 * The floor under a remote execute, with nothing of ours: one round trip of a small message over a Unix socket
 * between two processes, on the runtime's native sockets (`Bun.listen`/`Bun.connect`, `Deno.listen`/`Deno.connect`).
 * Run as a program (`bun bench/_bare_socket.ts PATH`), it echoes every byte it reads on a socket at PATH and prints
 * `listening` once it accepts; {@linkcode connectBareEcho} is the client. Used by bench/portal.ts. Ours.
 *
 * @module
 */

/** A client of the echo server: `roundTrip()` writes `bytes` bytes and resolves once as many came back. */
export interface BareEcho {
  roundTrip(): Promise<void>;
  close(): void;
}

interface BunSocket {
  write(d: Uint8Array): number;
  end(): void;
}

const g = globalThis as unknown as {
  Bun?: {
    listen(o: { unix: string; socket: { data(s: BunSocket, d: Uint8Array): void } }): unknown;
    connect(o: { unix: string; socket: { data(s: BunSocket, d: Uint8Array): void } }): Promise<BunSocket>;
  };
  Deno?: {
    listen(o: { transport: "unix"; path: string }): AsyncIterable<DenoConn>;
    connect(o: { transport: "unix"; path: string }): Promise<DenoConn>;
  };
};

interface DenoConn {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/** Connects to the echo server at `path`; each round trip sends `bytes` bytes (the size of a small frame). */
export async function connectBareEcho(path: string, bytes = 16): Promise<BareEcho> {
  const msg = new Uint8Array(bytes).fill(1);
  if (g.Bun !== undefined) {
    let got = 0, done: (() => void) | undefined;
    const s = await g.Bun.connect({
      unix: path,
      socket: {
        data(_s, d) {
          got += d.byteLength;
          if (got >= bytes && done !== undefined) {
            got -= bytes;
            const r = done;
            done = undefined;
            r();
          }
        },
      },
    });
    return {
      roundTrip: () => new Promise<void>((r) => (done = r, s.write(msg))),
      close: () => s.end(),
    };
  }
  const conn = await g.Deno!.connect({ transport: "unix", path });
  const buf = new Uint8Array(4096);
  return {
    async roundTrip() {
      await conn.write(msg);
      for (let got = 0; got < bytes;) {
        const n = await conn.read(buf);
        if (n === null) throw new Error("the echo server closed the socket");
        got += n;
      }
    },
    close: () => conn.close(),
  };
}

/** Serves the echo at `path` until the process is killed. */
async function serveEcho(path: string): Promise<void> {
  if (g.Bun !== undefined) {
    g.Bun.listen({ unix: path, socket: { data: (s, d) => void s.write(d) } });
    console.log("listening");
    return;
  }
  const listener = g.Deno!.listen({ transport: "unix", path });
  console.log("listening");
  for await (const conn of listener) {
    (async () => {
      const buf = new Uint8Array(65536);
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) return conn.close();
        await conn.write(buf.subarray(0, n));
      }
    })();
  }
}

if (import.meta.main) {
  const argv = (globalThis as { process?: { argv: string[] } }).process?.argv ?? [];
  await serveEcho(argv[argv.length - 1]);
}
