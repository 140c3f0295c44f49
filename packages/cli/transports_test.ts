import { describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Link, LinkEvents } from "../device-sim/remote/mod.ts";
import { serveSocket } from "./platform.ts";
import { listenSocket, type SocketAddress, socketDialer } from "./transports.ts";

/** A link end that records what it receives and settles when `bytes` have arrived or it closed. */
function recorder(): LinkEvents & {
  chunks: Uint8Array[];
  received(): Uint8Array;
  arrived(bytes: number): Promise<void>;
  closedWith: Promise<unknown>;
} {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let wanted = Infinity;
  let onBytes = () => {};
  let onClosed: (r: unknown) => void = () => {};
  const closedWith = new Promise<unknown>((r) => (onClosed = r));
  return {
    chunks,
    closedWith,
    data(chunk) {
      chunks.push(chunk.slice());
      total += chunk.byteLength;
      if (total >= wanted) onBytes();
    },
    closed: (reason) => onClosed(reason),
    received() {
      const out = new Uint8Array(total);
      let at = 0;
      for (const c of chunks) {
        out.set(c, at);
        at += c.byteLength;
      }
      return out;
    },
    arrived(bytes) {
      wanted = bytes;
      return total >= bytes ? Promise.resolve() : new Promise((r) => (onBytes = r));
    },
  };
}

/** A listener whose accepted links echo every byte back. */
async function echoServer(address: SocketAddress) {
  let onAccept: (link: Link) => void = () => {};
  const accepted = new Promise<Link>((r) => (onAccept = r));
  const listener = await listenSocket(address, (link) => {
    onAccept(link);
    return { data: (c) => link.send(c.slice()), closed() {} };
  });
  return { listener, accepted };
}

/**
 * Leaves a socket at `path` that nobody accepts on, as a daemon killed with SIGKILL does: a listener bound elsewhere
 * in the folder is moved to `path`, then closed (closing removes only the name it was bound to).
 */
function staleSocket(path: string): void {
  const server = serveSocket({ path: `${path}.bound` }, () => ({ data() {}, drain() {}, closed() {} }));
  renameSync(`${path}.bound`, path);
  server.close();
}

function pattern(n: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (i * 31 + (i >> 8)) & 0xff);
}

describe("socket transports", () => {
  for (const kind of ["unix", "tcp"] as const) {
    test(`listenSocket() and socketDialer() carry bytes both ways in order over ${kind}, 8 MiB included`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-transport-"));
      const { listener } = await echoServer(kind === "unix" ? { path: join(dir, "d.sock") } : { port: 0 });
      try {
        const address: SocketAddress = kind === "unix" ? { path: join(dir, "d.sock") } : { port: listener.port! };
        if (kind === "tcp") expect(listener.address).toBe(`127.0.0.1:${listener.port}`);
        else expect(listener.address).toBe(`unix:${join(dir, "d.sock")}`);
        const client = recorder();
        const link = await socketDialer(address)(client);
        // Several sends in one task, then one large one: all arrive, in order, whole.
        const small = [pattern(12), pattern(100).reverse(), pattern(3)];
        const big = pattern(8 << 20);
        for (const s of small) link.send(s);
        link.send(big);
        const total = small.reduce((n, s) => n + s.byteLength, 0) + big.byteLength;
        await client.arrived(total);
        const got = client.received();
        expect(got.byteLength).toBe(total);
        expect(got.subarray(0, 12)).toEqual(small[0]);
        expect(got.subarray(12, 112)).toEqual(small[1]);
        expect(got.subarray(112, 115)).toEqual(small[2]);
        expect(got.subarray(115).every((b, i) => b === big[i])).toBe(true);
        link.close();
        expect(await client.closedWith).toBeUndefined();
      } finally {
        await listener.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }, 30_000);
  }

  test("closing the listener closes the accepted connections; the client sees its link close", async () => {
    const { listener, accepted } = await echoServer({ port: 0 });
    const client = recorder();
    await socketDialer({ port: listener.port! })(client);
    await accepted;
    await listener.close();
    await client.closedWith;
    await expect(socketDialer({ port: listener.port! })(recorder())).rejects.toThrow(
      `Cannot connect to the device daemon at 127.0.0.1:${listener.port}: `,
    );
  });

  test("listenSocket() replaces a stale socket file, refuses a live daemon's, and removes its own on close", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-transport-"));
    const path = join(dir, "d.sock");
    try {
      staleSocket(path); // what a daemon that died leaves behind: a socket nobody accepts on
      expect(lstatSync(path).isSocket()).toBe(true);
      const { listener } = await echoServer({ path });
      await expect(echoServer({ path })).rejects.toThrow(
        `Cannot listen on unix:${path}: another daemon is listening there`,
      );
      await listener.close();
      expect(existsSync(path)).toBe(false);
      await expect(socketDialer({ path })(recorder())).rejects.toThrow(
        `Cannot connect to the device daemon at unix:${path}: `,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("listenSocket() refuses a path that holds a file, a folder or a symbolic link, and leaves it as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-transport-"));
    try {
      const file = join(dir, "notes.txt");
      writeFileSync(file, "my thesis");
      const folder = join(dir, "empty");
      mkdirSync(folder);
      const link = join(dir, "link.sock");
      staleSocket(join(dir, "target.sock"));
      symlinkSync(join(dir, "target.sock"), link);
      for (const [path, kind] of [[file, "a file"], [folder, "a folder"], [link, "a symbolic link"]]) {
        await expect(echoServer({ path })).rejects.toThrow(
          `Cannot listen on unix:${path}: ${path} is ${kind}, not a socket; remove it or choose another path`,
        );
      }
      expect(readFileSync(file, "utf8")).toBe("my thesis");
      expect(lstatSync(folder).isDirectory()).toBe(true);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("listenSocket() on a TCP port already in use rejects naming the address", async () => {
    const { listener } = await echoServer({ port: 0 });
    try {
      await expect(echoServer({ port: listener.port! })).rejects.toThrow(
        `Cannot listen on 127.0.0.1:${listener.port}: `,
      );
    } finally {
      await listener.close();
    }
  });
  test("close() writes what was sent before it, then closes: an answer sent just before is not lost", async () => {
    const { listener, accepted } = await echoServer({ port: 0 });
    try {
      const client = recorder();
      await socketDialer({ port: listener.port! })(client);
      const server = await accepted;
      const last = pattern(1 << 20); // more than one socket write takes at once
      server.send(last);
      server.close();
      await client.closedWith;
      const got = client.received();
      expect(got.byteLength).toBe(last.byteLength);
      expect(got.every((b, i) => b === last[i])).toBe(true);
    } finally {
      await listener.close();
    }
  });

  test(
    "queued() counts the bytes a peer that does not read leaves behind, and drops them as they are taken",
    async () => {
      const { createConnection } = await import("node:net");
      let onAccept: (link: Link) => void = () => {};
      const accepted = new Promise<Link>((r) => (onAccept = r));
      const listener = await listenSocket({ port: 0 }, (link) => (onAccept(link), { data() {}, closed() {} }));
      const socket = createConnection({ port: listener.port!, host: "127.0.0.1" });
      try {
        socket.pause(); // reads nothing
        const server = await accepted;
        expect(server.queued?.()).toBe(0);
        for (let i = 0; i < 16; i++) server.send(pattern(4 << 20)); // 64 MiB: more than the socket buffers take
        await new Promise((r) => setTimeout(r, 50));
        // What the socket has not taken stays counted (Deno counts a write's bytes as taken when the write ends).
        expect(server.queued!()).toBeGreaterThan(0);
        socket.resume();
        for (let i = 0; i < 2000 && server.queued!() > 0; i++) await new Promise((r) => setTimeout(r, 5));
        expect(server.queued!()).toBe(0);
      } finally {
        socket.destroy();
        await listener.close();
      }
    },
    30_000,
  );
});
