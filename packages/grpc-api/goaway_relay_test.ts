/**
 * The GOAWAY relay (goaway_relay.ts): its filter on every way a client's bytes can be cut, and a server behind it
 * answering clients that come and go, and GOAWAY frames sent in the middle of a connection.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { createGrpcInferenceServer, type GrpcInferenceServer } from "./mod.ts";
import { GoawayFilter } from "./goaway_relay.ts";
import { oipClient } from "../../tests/_grpc_client.ts";
import { type HttpFixture, httpFixture } from "../../tests/_http.ts";

/** A frame: the 9-byte header of RFC 9113 §4.1 (24-bit length, type, flags, stream id) and its payload. */
function frame(type: number, stream: number, payload: number[]): number[] {
  const n = payload.length;
  return [n >> 16, (n >> 8) & 0xff, n & 0xff, type, 0, 0, 0, 0, stream, ...payload];
}
/** What a TCP connection to `port` on 127.0.0.1 comes to: `"connected"`, or the error's code. */
function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.on("connect", () => {
      s.destroy();
      resolve("connected");
    });
    s.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}
const PREFACE = [..."PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"].map((c) => c.charCodeAt(0));

describe("GoawayFilter", () => {
  // Types from RFC 9113 §6: DATA 0x0, HEADERS 0x1, SETTINGS 0x4, PING 0x6, GOAWAY 0x7.
  const settings = frame(0x4, 0, [0, 4, 0, 0, 0, 0]);
  const headers = frame(0x1, 1, [0x82, 0x86, 0x84, 0x41, 0x0f]);
  const goaway = frame(0x7, 0, [0, 0, 0, 0, 0, 0, 0, 0]);
  const goawayDebug = frame(0x7, 0, [0, 0, 0, 3, 0, 0, 0, 2, 0x62, 0x79, 0x65]);
  const data = frame(0x0, 1, [1, 2, 3]);
  const ping = frame(0x6, 0, [1, 2, 3, 4, 5, 6, 7, 8]);
  const stream = [...PREFACE, ...settings, ...headers, ...goaway, ...data, ...goawayDebug, ...ping];
  const kept = [...PREFACE, ...settings, ...headers, ...data, ...ping];

  test("drops every GOAWAY frame and passes every other byte in order, however the bytes are cut", () => {
    expect(PREFACE.length).toBe(24);
    for (let size = 1; size <= stream.length; size++) {
      const f = new GoawayFilter();
      const out: number[] = [];
      for (let at = 0; at < stream.length; at += size) {
        for (const piece of f.push(Uint8Array.from(stream.slice(at, at + size)))) out.push(...piece);
      }
      expect(out).toEqual(kept);
      expect(f.dropped).toBe(2);
    }
  });

  test("a frame header of 0x07 inside another frame's payload is payload, not a GOAWAY", () => {
    const f = new GoawayFilter();
    const inside = [...PREFACE, ...frame(0x0, 1, frame(0x7, 0, [0, 0, 0, 0, 0, 0, 0, 0]))];
    expect(f.push(Uint8Array.from(inside)).flatMap((p) => [...p])).toEqual(inside);
    expect(f.dropped).toBe(0);
  });

  test("a large GOAWAY payload is skipped without being kept", () => {
    const f = new GoawayFilter();
    const big = 1 << 20;
    const head = frame(0x7, 0, []);
    head[0] = big >> 16;
    expect(f.push(Uint8Array.from([...PREFACE, ...head])).flatMap((p) => [...p])).toEqual(PREFACE);
    for (let i = 0; i < 16; i++) expect(f.push(new Uint8Array(big / 16))).toEqual([]);
    expect(f.push(Uint8Array.from(ping)).flatMap((p) => [...p])).toEqual(ping);
  });
});

describe("a gRPC server behind the relay", () => {
  let fx: HttpFixture;
  let server: GrpcInferenceServer;
  let port: number;
  const relu = {
    model_name: "relu",
    inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: [1, -1, 2, -2, 3, -3, 4, -4] } }],
  };
  beforeAll(async () => {
    fx = await httpFixture();
    server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, relayGoaway: true });
    port = (await server.listen("127.0.0.1", 0)).port;
  });
  afterAll(async () => {
    await server.close();
    await fx.close();
  });

  test("answers clients that connect, call and close their channels, and frees their calls", async () => {
    for (let i = 0; i < 20; i++) {
      const client = oipClient(`127.0.0.1:${port}`);
      try {
        expect((await client.modelInfer(relu)).outputs[0].contents.fp32_contents).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
      } finally {
        client.close();
      }
    }
    expect(server.activeCalls).toBe(0);
  });

  test("a client's GOAWAY in the middle of its connection: the server still answers it, and serves the next client", async () => {
    // A raw client: the preface, an empty SETTINGS, then a GOAWAY, then nothing; the server must answer its SETTINGS.
    const raw = connect(port, "127.0.0.1");
    const got: number[] = [];
    raw.on("data", (d: Uint8Array) => got.push(...d));
    await new Promise<void>((r) => raw.once("connect", () => r()));
    raw.write(Uint8Array.from([...PREFACE, ...frame(0x4, 0, []), ...frame(0x7, 0, [0, 0, 0, 0, 0, 0, 0, 0])]));
    for (let i = 0; i < 2000 && got.length < 9; i++) await new Promise((r) => setTimeout(r, 1));
    expect(got[3]).toBe(0x4); // the server's SETTINGS came back through the relay
    raw.destroy();
    const client = oipClient(`127.0.0.1:${port}`);
    try {
      expect(await client.serverLive()).toEqual({ live: true });
    } finally {
      client.close();
    }
  });

  test("close() stops the relay: its port takes no connection", async () => {
    const other = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, relayGoaway: true });
    const p = (await other.listen("127.0.0.1", 0)).port;
    const client = oipClient(`127.0.0.1:${p}`);
    expect(await client.serverLive()).toEqual({ live: true });
    client.close();
    await other.close();
    expect(await connectOutcome(p)).toBe("ECONNREFUSED");
  });

  test("a listen that ends after close() leaves no relay listening", async () => {
    const other = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, relayGoaway: true });
    const listening = other.listen("127.0.0.1", 0);
    await other.close();
    const e = await listening.then(() => undefined, (x: Error) => x);
    expect(e?.message).toMatch(/^Cannot listen on 127\.0\.0\.1:0: the server is shutting down/);
  });

  test("drain() stops the relay taking connections, then closes it", async () => {
    const other = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, relayGoaway: true });
    const p = (await other.listen("127.0.0.1", 0)).port;
    expect(await other.drain(5_000)).toEqual({ unfinished: 0 });
    expect(await connectOutcome(p)).toBe("ECONNREFUSED");
    await other.close();
  });
});
