/**
 * Raw HTTP/1.x over `node:net` (Bun and Deno): requests a `fetch` cannot make — no `Host`, an empty or malformed
 * `Host`, another `Host` than the URL's (Deno's fetch drops a `Host` header), pipelining.
 */
import net from "node:net";

/** One parsed response. */
export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * Sends `request` (exact bytes, CRLFs included) and collects every response until the server closes the
 * connection or `timeoutMs` passes.
 */
export function rawExchange(
  port: number,
  request: string,
  timeoutMs = 5000,
): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString("utf8"), closed });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on("connect", () => socket.write(request));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("end", () => finish(true));
    socket.on("close", () => finish(true));
    socket.on("error", () => finish(true));
  });
}

/** Splits a byte stream of HTTP/1.x responses (Content-Length or chunked bodies). */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split("\r\n");
    const status = Number(statusLine.split(" ")[1]);
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(":");
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    rest = rest.slice(end + 4);
    let body = "";
    if (headers["transfer-encoding"] === "chunked") {
      for (;;) {
        const nl = rest.indexOf("\r\n");
        const size = parseInt(rest.slice(0, nl), 16);
        rest = rest.slice(nl + 2);
        if (!(size > 0)) {
          rest = rest.slice(2);
          break;
        }
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
    } else {
      const n = Number(headers["content-length"] ?? 0);
      body = rest.slice(0, n);
      rest = rest.slice(n);
    }
    out.push({ status, headers, body });
  }
  return out;
}

/** One request, one response (the connection is closed after it). */
export async function rawRequest(port: number, request: string, timeoutMs?: number): Promise<RawResponse | undefined> {
  const { text } = await rawExchange(port, request, timeoutMs);
  return parseResponses(text)[0];
}
