import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { connect } from "node:net";
import process from "node:process";
import { serveHttp, shutdownSignals } from "./platform.ts";

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const onBun = (process.versions as Record<string, string | undefined>).bun !== undefined;

/** Runs `nrt ...args` as a child process on this runtime; resolves its exit code and output. */
function nrtProcess(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const argv = onBun ? [MAIN, ...args] : ["run", "-A", MAIN, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    child.stdout.on("data", (d) => (out += String(d)));
    child.stderr.on("data", (d) => (err += String(d)));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
}

/** Sends `raw` over a plain TCP connection and resolves everything the server answers until it closes. */
function rawRequest(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port }, () => socket.write(raw));
    let answer = "";
    socket.on("data", (d) => (answer += String(d)));
    socket.on("error", reject);
    socket.on("close", () => resolve(answer));
  });
}

describe("commandLineArgs() and exit()", () => {
  test("a real nrt process gets its arguments and ends with the command's exit code", async () => {
    const usage = await nrtProcess(["devices", "--arch"]);
    expect(usage.code).toBe(2);
    expect(usage.err).toContain("Cannot parse nrt devices arguments: --arch needs a value");
    const help = await nrtProcess(["devices", "--help"]);
    expect(help.code).toBe(0);
    expect(help.out.startsWith("Usage: nrt devices [--arch A] [--json]\n")).toBe(true);
  }, 60_000);
});

describe("shutdownSignals()", () => {
  test("the first signal after started() resolves it; later ones go to onAgain; the listeners stay", async () => {
    const before = { int: process.listenerCount("SIGINT"), term: process.listenerCount("SIGTERM") };
    const again: string[] = [], starting: string[] = [];
    const signals = shutdownSignals({ onStarting: (s) => starting.push(s), onAgain: (s) => again.push(s) });
    try {
      expect([process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")]).toEqual([
        before.int + 1,
        before.term + 1,
      ]);
      const first = signals.started();
      process.emit("SIGTERM" as never);
      process.emit("SIGINT" as never);
      process.emit("SIGINT" as never);
      expect(await first).toBe("SIGTERM");
      expect([starting, again]).toEqual([[], ["SIGINT", "SIGINT"]]);
      // Never fewer listeners than before the first signal: no gap for the default action.
      expect([process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")]).toEqual([
        before.int + 1,
        before.term + 1,
      ]);
    } finally {
      signals.close();
    }
    expect([process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")]).toEqual([before.int, before.term]);
  });

  test("a signal while starting goes to onStarting, and started() then resolves with it", async () => {
    const starting: string[] = [], again: string[] = [];
    const signals = shutdownSignals({ onStarting: (s) => starting.push(s), onAgain: (s) => again.push(s) });
    try {
      process.emit("SIGINT" as never);
      process.emit("SIGTERM" as never);
      expect([starting, again]).toEqual([["SIGINT"], ["SIGTERM"]]);
      expect(await signals.started()).toBe("SIGINT");
    } finally {
      signals.close();
    }
  });
});

describe("serveHttp()", () => {
  test("serveHttp() lets a request chosen as unlimited outlast the idle timeout, then idles its connection out", async () => {
    const server = await serveHttp(async (req) => {
      if (new URL(req.url).pathname === "/slow") await new Promise((r) => setTimeout(r, 2_500));
      return new Response("done");
    }, {
      host: "127.0.0.1",
      port: 0,
      requestTimeoutSeconds: (req) => (new URL(req.url, "http://h").pathname === "/slow" ? 0 : 1),
      idleTimeoutSeconds: 1,
    });
    try {
      // A keep-alive request: on Bun the server ends the connection once it has idled 1 s after the answer (before,
      // the unlimited timeout stayed on the connection and it never closed); Deno keeps its own idle timeout.
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(
          { host: "127.0.0.1", port: server.port },
          () => socket.write("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n"),
        );
        let text = "";
        const giveUp = setTimeout(() => socket.destroy(new Error("the connection stayed open 20 s")), 20_000);
        socket.on("data", (d) => {
          text += String(d);
          if (!onBun && text.endsWith("done")) socket.end();
        });
        socket.on("error", (e) => {
          clearTimeout(giveUp);
          reject(e);
        });
        socket.on("close", () => {
          clearTimeout(giveUp);
          resolve(text);
        });
      });
      expect(answer.startsWith("HTTP/1.1 200")).toBe(true);
      expect(answer.endsWith("done")).toBe(true);
    } finally {
      await server.stop(true);
    }
  });

  test("serveHttp() serves the handler with absolute URLs until stop()", async () => {
    const seen: string[] = [];
    const server = await serveHttp((req) => {
      seen.push(req.url);
      return new Response(`hello ${new URL(req.url).pathname}`);
    }, { host: "127.0.0.1", port: 0, requestTimeoutSeconds: 60 });
    expect(server.port).toBeGreaterThan(0);
    const res = await fetch(`http://127.0.0.1:${server.port}/a?b=1`);
    expect(await res.text()).toBe("hello /a");
    // HTTP/1.0 without a Host header: the handler still gets an absolute URL with the path.
    const raw = await rawRequest(server.port, "GET /raw HTTP/1.0\r\n\r\n");
    expect(raw.startsWith("HTTP/1.")).toBe(true);
    expect(raw.endsWith("hello /raw")).toBe(true);
    expect(seen.length).toBe(2);
    for (const url of seen) expect(url).toMatch(/^http:\/\//);
    await server.stop();
    await expect(fetch(`http://127.0.0.1:${server.port}/`)).rejects.toThrow();
  });

  test("serveHttp() answers a throwing handler with a JSON 500 that reveals nothing, or with onError", async () => {
    const boom = () => {
      throw new Error("secret detail");
    };
    const plain = await serveHttp(boom, { host: "127.0.0.1", port: 0, requestTimeoutSeconds: 60 });
    const custom = await serveHttp(boom, {
      host: "127.0.0.1",
      port: 0,
      requestTimeoutSeconds: 60,
      onError: () => new Response("custom", { status: 503 }),
    });
    try {
      const res = await fetch(`http://127.0.0.1:${plain.port}/`);
      expect(res.status).toBe(500);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toEqual({ error: "Cannot answer the request: internal server error" });
      const res2 = await fetch(`http://127.0.0.1:${custom.port}/`);
      expect(res2.status).toBe(503);
      expect(await res2.text()).toBe("custom");
    } finally {
      await plain.stop();
      await custom.stop();
    }
  });

  test("serveHttp() on an address this host does not have rejects naming it", async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address, so the bind fails on every machine.
    await expect(serveHttp(() => new Response("x"), { host: "192.0.2.1", port: 0, requestTimeoutSeconds: 60 }))
      .rejects.toThrow("Cannot listen on 192.0.2.1:0: ");
  });
});
