/**
 * Ours: keeps a client's HTTP/2 GOAWAY frames away from a gRPC server whose HTTP/2 stack aborts the process on one.
 *
 * Deno's `node:http2` (2.9.6) can abort the whole process inside nghttp2 when a GOAWAY arrives (denoland/deno#36788,
 * `find_stream_on_goaway_func: Assertion 'stream->closed_next == NULL' failed`), before any JavaScript runs. A grpc-js
 * client sends one when it closes its channel, so clients that come and go killed a gRPC server run under Deno (in
 * two of three runs of 300 connections of Deno clients; measurement log, "2026-12-05, night"). Under Deno the server
 * therefore listens behind this relay: each client connection is joined to one connection to the gRPC server, which
 * listens on an ephemeral port of 127.0.0.1. The server's bytes pass unchanged; the client's pass unchanged except
 * GOAWAY frames, which are dropped. Dropping one loses nothing a server needs: a client's GOAWAY only says which
 * server-initiated streams it will still process, and a gRPC server initiates none. When the client's side ends, the
 * relay resets the server's side (a TCP reset): Deno's server cancels the calls of a connection that is reset, as of
 * one that sent a GOAWAY, but not of one that merely ended, whose calls would hold their slots.
 *
 * Spec: RFC 9113 §3.4 (the 24-byte client connection preface), §4.1 (the 9-byte frame header: a 24-bit length, the
 * type, flags, a stream identifier), §6.8 (GOAWAY, type 0x07).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { connect, createServer, type Server, type Socket } from "node:net";

/** Bytes of the client connection preface, `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n` (RFC 9113 §3.4). */
const PREFACE_BYTES = 24;
/** Bytes of a frame header (RFC 9113 §4.1). */
const FRAME_HEADER_BYTES = 9;
/** The GOAWAY frame type (RFC 9113 §6.8). */
const GOAWAY = 0x07;

/**
 * The client-to-server byte stream of one HTTP/2 connection, without its GOAWAY frames. It keeps at most one frame
 * header (9 bytes) between chunks, so its memory is bounded whatever a client sends.
 */
export class GoawayFilter {
  #preface = PREFACE_BYTES;
  readonly #head = new Uint8Array(FRAME_HEADER_BYTES);
  #have = 0;
  #pass = 0;
  #skip = 0;
  #dropped = 0;

  /** GOAWAY frames dropped so far. */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * Takes the next chunk the client sent.
   *
   * @returns The pieces to send on to the server, in order (views of `chunk`, and copies of frame headers that
   *   spanned chunks).
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.length) {
      const left = chunk.length - at;
      if (this.#preface > 0 || this.#pass > 0) {
        const n = Math.min(this.#preface > 0 ? this.#preface : this.#pass, left);
        out.push(chunk.subarray(at, at + n));
        if (this.#preface > 0) this.#preface -= n;
        else this.#pass -= n;
        at += n;
        continue;
      }
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, left);
        this.#skip -= n;
        at += n;
        continue;
      }
      const n = Math.min(FRAME_HEADER_BYTES - this.#have, left);
      this.#head.set(chunk.subarray(at, at + n), this.#have);
      this.#have += n;
      at += n;
      if (this.#have < FRAME_HEADER_BYTES) continue;
      this.#have = 0;
      const h = this.#head;
      const length = (h[0] << 16) | (h[1] << 8) | h[2];
      if (h[3] === GOAWAY) {
        this.#skip = length;
        this.#dropped++;
      } else {
        out.push(h.slice());
        this.#pass = length;
      }
    }
    return out;
  }
}

/** A relay in front of one gRPC server. */
export interface GoawayRelay {
  /** The port the relay listens on. */
  readonly port: number;
  /** Stops taking connections; those open stay until either side closes them. */
  stopListening(): void;
  /** Stops taking connections and closes every one. */
  close(): Promise<void>;
}

/**
 * Listens on `host:port` and joins each connection to one to the gRPC server on `127.0.0.1:target`, dropping the
 * client's GOAWAY frames ({@linkcode GoawayFilter}). When the client's side ends or fails, the server's is reset; when
 * the server's ends, the client's ends once what the server sent is written; when it fails, the client's is closed. A
 * server slower than its client pauses the client's reads.
 *
 * @param host The interface to listen on.
 * @param port The port (0: any free one).
 * @param target The gRPC server's port on 127.0.0.1.
 */
export function listenGoawayRelay(host: string, port: number, target: number): Promise<GoawayRelay> {
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    open.add(client).add(upstream);
    // Each side's writes go out at once: with Nagle's algorithm a relayed request waited for the delayed ACK of the
    // one before (Deno: 1.3-1.9k gRPC calls a second and a p99 of 86-91 ms, against 6.6k without the relay).
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const filter = new GoawayFilter();
    client.on("data", (chunk: Uint8Array) => {
      const pieces = filter.push(chunk);
      // One write per chunk read, as the client wrote it: a piece per frame header would be a segment per header.
      const out = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
      if (out.length > 0 && !upstream.write(out)) client.pause();
    });
    upstream.on("drain", () => client.resume());
    upstream.pipe(client);
    // The client's side ending or failing resets the server's and ends the pair.
    const clientGone = (): void => {
      if (!upstream.destroyed) upstream.resetAndDestroy();
      client.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("end", clientGone);
    client.on("error", clientGone);
    client.on("close", clientGone);
    // The server's side ending is passed on once what it sent has been written (the pipe ends the client's side);
    // failing, it closes the client's at once.
    upstream.on("error", () => client.destroy());
    upstream.on("close", () => {
      open.delete(upstream);
      if (!client.destroyed) client.end();
    });
  });
  let closing: Promise<void> | undefined;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      // A connection the relay could not take (out of descriptors) is that client's loss: the listener goes on.
      server.on("error", () => {});
      resolve({
        port: (server.address() as { port: number }).port,
        stopListening: () => void server.close(),
        close: () =>
          closing ??= new Promise<void>((done) => {
            // Closed already (stopListening): its callback may never come, so nothing waits for it.
            if (server.listening) server.close(() => done());
            else done();
            for (const s of open) s.destroy();
            open.clear();
          }),
      });
    });
  });
}
