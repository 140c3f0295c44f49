/**
 * gRPC ModelInfer against REST JSON `/infer` for the same model (relu FP32[8], 4 instances) on the same runtime,
 * at the same concurrency (32 requests in flight), in one run: REST served by `Bun.serve`/`Deno.serve` as `nrt
 * serve` does and loaded by bench/_http_client.ts; gRPC ModelInfer with typed `fp32_contents` and with
 * `raw_input_contents`. Two baselines that use nothing of ours bound each transport: a bare Hono route and a bare
 * `@grpc/grpc-js` ModelInfer, each returning a canned answer. Every load generator runs in a Worker, off the
 * server's thread, and sends a prepared request: the REST one a JSON body, the gRPC one the encoded message over
 * HTTP/2, reading each answer whole without decoding it. Answers are checked once, before the load, with the
 * client built from the fixture proto (tests/_grpc_client.ts).
 *
 * The targets run in `--rounds` rounds, in turn, so that a change of machine load hits them alike; each line
 * reports the round with the median throughput and the range over rounds. Under Bun it then runs itself under Deno
 * (and the other way round); `--here` measures the current runtime only.
 *
 * Usage: `bun bench/grpc.ts [--requests N] [--seconds S] [--rounds R] [--inflight C] [--instances I] [--warmup N]
 *        [--here]`
 *        `deno run -A bench/grpc.ts …`
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { buildCustomOpNeff, MemoryLogger, Runtime } from "@nrt/core";
import { createInferenceApp, filesFromMap, ModelRepository } from "@nrt/http-api";
import { Hono } from "hono";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import process from "node:process";
import { isMainThread } from "node:worker_threads";
import { createGrpcInferenceServer, GRPC_SERVICE_NAME } from "../packages/grpc-api/mod.ts";
import { FIXTURE_PROTO, oipClient } from "../tests/_grpc_client.ts";
import type { LoadJob, LoadResult } from "./_http_client.ts";
import { inRounds } from "./_timing.ts";
import { arg, serve } from "./_serve.ts";

/** What the gRPC load worker is asked to do. */
interface GrpcJob {
  /** `host:port` (loopback only). */
  readonly address: string;
  /** The encoded `ModelInferRequest`. */
  readonly message: Uint8Array;
  /** Calls in flight. */
  readonly inflight: number;
  /** Calls to make at most. */
  readonly requests: number;
  /** Seconds to run at most. */
  readonly seconds: number;
}

const g = globalThis as unknown as {
  Bun?: unknown;
  WorkerGlobalScope?: unknown;
  onmessage: ((e: MessageEvent<GrpcJob>) => void) | null;
  postMessage(v: unknown): void;
};
const RUNTIME = g.Bun !== undefined ? "bun" : "deno";
// A Worker shows as such through node:worker_threads under Bun, through WorkerGlobalScope under Deno.
const IN_WORKER = !isMainThread || typeof g.WorkerGlobalScope === "function";

const INPUT = [-3, -2, -1, 0, 1, 2, 3, 4];
const REST = "REST JSON /infer", TYPED = "gRPC ModelInfer typed", RAW = "gRPC ModelInfer raw";
const BARE_REST = "bare Hono route", BARE_GRPC = "bare grpc-js ModelInfer";

const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;
const END_STREAM = 0x1, ACK = 0x1, END_HEADERS = 0x4;

function frame(type: number, flags: number, stream: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(9 + payload.byteLength);
  const v = new DataView(out.buffer);
  v.setUint32(0, payload.byteLength << 8); // 24-bit length, then the type byte, overwritten next
  out[3] = type;
  out[4] = flags;
  v.setUint32(5, stream);
  out.set(payload, 9);
  return out;
}

/** An HPACK string literal without Huffman coding (RFC 7541 §5.2), for strings under 127 bytes. */
function hpackString(s: string): number[] {
  const b = new TextEncoder().encode(s);
  return [b.length, ...b];
}

/**
 * A minimal HTTP/2 client over one TCP socket (RFC 9113), enough for unary gRPC calls of one prepared request: it
 * writes HEADERS and DATA in one write, acknowledges SETTINGS and PING, keeps the connection window open, and
 * counts a call as answered when a DATA frame came before END_STREAM (a gRPC error is a trailers-only answer). As a
 * load generator it costs less than a `node:http2` session, as `fetch` does on the REST side.
 */
class H2Caller {
  readonly #socket: Socket;
  readonly #request: (stream: number) => Uint8Array;
  readonly #open = new Map<number, { data: boolean; done(ok: boolean): void }>();
  #pending = new Uint8Array(0);
  #next = 1;
  #unacked = 0;

  constructor(socket: Socket, path: string, authority: string, message: Uint8Array) {
    this.#socket = socket;
    // :method POST and :scheme http are static-table entries 3 and 6; :path (4), :authority (1) and content-type (31)
    // are literals with an indexed name; te is a literal with a new name.
    const block = new Uint8Array([
      0x83,
      0x86,
      0x04,
      ...hpackString(path),
      0x01,
      ...hpackString(authority),
      0x0f,
      0x10,
      ...hpackString("application/grpc"),
      0x00,
      ...hpackString("te"),
      ...hpackString("trailers"),
    ]);
    const body = new Uint8Array(5 + message.byteLength); // gRPC framing: flag 0, big-endian length, message
    new DataView(body.buffer).setUint32(1, message.byteLength);
    body.set(message, 5);
    this.#request = (id) => {
      const h = frame(FRAME.HEADERS, END_HEADERS, id, block), d = frame(FRAME.DATA, END_STREAM, id, body);
      const out = new Uint8Array(h.byteLength + d.byteLength);
      out.set(h);
      out.set(d, h.byteLength);
      return out;
    };
    socket.setNoDelay(true);
    socket.on("data", (chunk: Uint8Array) => this.#read(chunk));
    socket.on("close", () => this.#failAll());
    socket.on("error", () => this.#failAll());
    const preface = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    socket.write(new Uint8Array([...preface, ...frame(FRAME.SETTINGS, 0, 0, new Uint8Array(0))]));
  }

  /** One call: whether it was answered with a message. */
  call(): Promise<boolean> {
    const id = this.#next;
    this.#next += 2;
    return new Promise((done) => {
      this.#open.set(id, { data: false, done });
      this.#socket.write(this.#request(id));
    });
  }

  close(): void {
    this.#socket.destroy();
  }

  #read(chunk: Uint8Array): void {
    let buf = chunk;
    if (this.#pending.byteLength > 0) {
      buf = new Uint8Array(this.#pending.byteLength + chunk.byteLength);
      buf.set(this.#pending);
      buf.set(chunk, this.#pending.byteLength);
    }
    let at = 0;
    while (buf.byteLength - at >= 9) {
      const length = (buf[at] << 16) | (buf[at + 1] << 8) | buf[at + 2];
      if (buf.byteLength - at < 9 + length) break;
      const type = buf[at + 3], flags = buf[at + 4];
      const stream = new DataView(buf.buffer, buf.byteOffset + at + 5, 4).getUint32(0) & 0x7fffffff;
      const payload = buf.subarray(at + 9, at + 9 + length);
      at += 9 + length;
      const s = this.#open.get(stream);
      if (type === FRAME.DATA) {
        if (s !== undefined) s.data = true;
        this.#unacked += length;
        if (this.#unacked >= 16384) { // give the connection window back
          const inc = new Uint8Array(4);
          new DataView(inc.buffer).setUint32(0, this.#unacked);
          this.#socket.write(frame(FRAME.WINDOW_UPDATE, 0, 0, inc));
          this.#unacked = 0;
        }
      } else if (type === FRAME.SETTINGS && (flags & ACK) === 0) {
        this.#socket.write(frame(FRAME.SETTINGS, ACK, 0, new Uint8Array(0)));
      } else if (type === FRAME.PING && (flags & ACK) === 0) {
        this.#socket.write(frame(FRAME.PING, ACK, 0, payload.slice()));
      } else if (type === FRAME.GOAWAY) {
        this.#failAll();
      }
      if (
        s !== undefined &&
        (type === FRAME.RST_STREAM || ((type === FRAME.HEADERS || type === FRAME.DATA) && (flags & END_STREAM) !== 0))
      ) {
        this.#open.delete(stream);
        s.done(type !== FRAME.RST_STREAM && s.data);
      }
    }
    this.#pending = buf.slice(at);
  }

  #failAll(): void {
    for (const s of this.#open.values()) s.done(false);
    this.#open.clear();
  }
}

/** The gRPC load loop (in the Worker): `inflight` call loops over one HTTP/2 connection. */
async function grpcLoad(job: GrpcJob): Promise<LoadResult> {
  const at = job.address.lastIndexOf(":");
  const host = job.address.slice(0, at), port = Number(job.address.slice(at + 1));
  if (host !== "127.0.0.1" && host !== "localhost") throw new Error(`Refusing to load ${host}: loopback only`);
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port }, () => resolve(s));
    s.once("error", reject);
  });
  const caller = new H2Caller(socket, `/${GRPC_SERVICE_NAME}/ModelInfer`, job.address, job.message);
  const deadline = performance.now() + job.seconds * 1000;
  const latencies: number[] = [];
  let started = 0, errors = 0;
  const t0 = performance.now();
  const loop = async (): Promise<void> => {
    while (started < job.requests && performance.now() < deadline) {
      started++;
      const t = performance.now();
      if (!(await caller.call())) errors++;
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: job.inflight }, loop));
  const elapsedMs = performance.now() - t0;
  caller.close();
  latencies.sort((a, b) => a - b);
  const q = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { completed: latencies.length, errors, elapsedMs, p50Ms: q(0.5), p99Ms: q(0.99) };
}

function inWorker<J>(url: URL, job: J): Promise<LoadResult> {
  const w = new Worker(url, { type: "module" });
  return new Promise<LoadResult>((resolve, reject) => {
    w.onmessage = (
      e: MessageEvent<{ ok?: LoadResult; error?: string }>,
    ) => (e.data.ok ? resolve(e.data.ok) : reject(new Error(e.data.error)));
    w.onerror = (e) => reject(new Error(String((e as ErrorEvent).message)));
    w.postMessage(job);
  }).finally(() => w.terminate());
}

/** A `@grpc/grpc-js` server of the fixture's ModelInfer alone, answering every call with `answer`. */
async function bareGrpc(answer: Record<string, unknown>): Promise<{ port: number; stop(): void }> {
  const loaded = grpc.loadPackageDefinition(
    loadSync(FIXTURE_PROTO, { keepCase: true, longs: String, defaults: true, arrays: true }),
  );
  const service =
    (loaded as unknown as { inference: { GRPCInferenceService: { service: grpc.ServiceDefinition } } }).inference;
  const server = new grpc.Server();
  server.addService(service.GRPCInferenceService.service, {
    ModelInfer: (_call: unknown, done: grpc.sendUnaryData<unknown>) => done(null, answer),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      "127.0.0.1:0",
      grpc.ServerCredentials.createInsecure(),
      (e, p) => (e === null ? resolve(p) : reject(e)),
    )
  );
  return { port, stop: () => server.forceShutdown() };
}

/** The rounds of one target. */
type Rounds = LoadResult[];

interface Measurement {
  readonly runtime: string;
  readonly results: Record<string, Rounds>;
}

/** One measurement in this runtime. */
async function measure(): Promise<Measurement> {
  const inflight = arg("inflight", 32), requests = arg("requests", 6_000), seconds = arg("seconds", 6);
  const rounds = arg("rounds", 3), instances = arg("instances", 4), warmup = arg("warmup", 10_000);
  const wasm = new Uint8Array(readFileSync(new URL("../kernels/wasm/relu.wasm", import.meta.url)));
  const neff = buildCustomOpNeff({
    name: "relu.neff",
    target: CAYMAN_SPEC.name,
    inputs: [{ name: "x", dtype: "float32", shape: [8] }],
    outputs: [{ name: "y", dtype: "float32", shape: [8] }],
    libraries: [{ name: "relu", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
    calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
  });
  const container = createNrtContainer();
  const runtime = await Runtime.init({ ...nrtPlugins(container), logger: new MemoryLogger() });
  const config = new TextEncoder().encode(JSON.stringify({ vnc: 0, instances }));
  const repository = new ModelRepository({ runtime, files: filesFromMap({ "relu.neff": neff, "relu.json": config }) });
  await repository.scan();
  await repository.loadAll();
  const app = createInferenceApp({ runtime, repository });
  const body = JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: INPUT }] });
  const sample = await app.request("/v2/models/relu/infer", { method: "POST", body });
  const json = await sample.text();
  if (sample.status !== 200) throw new Error(`The bench model does not run: ${json}`);
  const bare = new Hono();
  bare.post("/v2/models/relu/infer", async (c) => {
    await c.req.arrayBuffer();
    return c.body(json, 200, { "content-type": "application/json" });
  });
  const typed = {
    model_name: "relu",
    inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: INPUT } }],
  };
  const raw = {
    model_name: "relu",
    inputs: [{ name: "x", datatype: "FP32", shape: [8] }],
    raw_input_contents: [new Uint8Array(new Float32Array(INPUT).buffer)],
  };
  const restServer = await serve(app.fetch);
  const bareRest = await serve(bare.fetch);
  const grpcServer = createGrpcInferenceServer({ runtime, repository });
  const { port: grpcPort } = await grpcServer.listen("127.0.0.1", 0);
  const check = oipClient(`127.0.0.1:${grpcPort}`);
  const answer = await check.modelInfer(typed);
  const rawAnswer = await check.modelInfer(raw);
  check.close();
  const relu = JSON.stringify(INPUT.map((v) => Math.max(0, v)));
  if (JSON.stringify(answer.outputs[0].contents.fp32_contents) !== relu) {
    throw new Error(`Wrong gRPC answer: ${JSON.stringify(answer)}`);
  }
  if (JSON.stringify([...new Float32Array(new Uint8Array(rawAnswer.raw_output_contents[0]).buffer)]) !== relu) {
    throw new Error(`Wrong raw gRPC answer: ${JSON.stringify(rawAnswer)}`);
  }
  const requestType = loadSync(FIXTURE_PROTO, { keepCase: true })["inference.ModelInferRequest"] as unknown as {
    serialize(m: unknown): Uint8Array;
  };
  const bareGrpcServer = await bareGrpc(answer);
  try {
    const rest = (port: number) => (n: number): Promise<LoadResult> =>
      inWorker<LoadJob>(new URL("./_http_client.ts", import.meta.url), {
        url: `http://127.0.0.1:${port}/v2/models/relu/infer`,
        bodies: [body],
        connections: inflight,
        requests: n,
        seconds,
      });
    const rpc = (port: number, request: unknown) => (n: number): Promise<LoadResult> =>
      inWorker<GrpcJob>(new URL(import.meta.url), {
        address: `127.0.0.1:${port}`,
        message: new Uint8Array(requestType.serialize(request)),
        inflight,
        requests: n,
        seconds,
      });
    const targets: Record<string, (n: number) => Promise<LoadResult>> = {
      [REST]: rest(restServer.port),
      [TYPED]: rpc(grpcPort, typed),
      [RAW]: rpc(grpcPort, raw),
      [BARE_REST]: rest(bareRest.port),
      [BARE_GRPC]: rpc(bareGrpcServer.port, typed),
    };
    // Warm-up: JIT, connections, staging buffers. A few hundred requests leave the server's functions compiling through
    // the measurement (bench/http.ts measured a quarter of a CPU in its JIT threads after 3,000).
    for (const run of Object.values(targets)) await run(warmup);
    const names = Object.keys(targets);
    const rows = await inRounds(rounds, names.length, (k) => targets[names[k]](requests));
    const results: Record<string, Rounds> = Object.fromEntries(names.map((name, k) => [name, rows[k]]));
    return { runtime: RUNTIME, results };
  } finally {
    bareGrpcServer.stop();
    await grpcServer.close();
    await restServer.stop();
    await bareRest.stop();
    await repository.close();
    await runtime.close();
    await container.resolve(PortalToken).close();
  }
}

const rps = (x: LoadResult): number => x.completed / (x.elapsedMs / 1000);

/** The round with the median throughput. */
function median(rounds: Rounds): LoadResult {
  return [...rounds].sort((a, b) => rps(a) - rps(b))[Math.floor(rounds.length / 2)];
}

function report(m: Measurement): string {
  const line = (name: string, rounds: Rounds): string => {
    const x = median(rounds);
    const all = rounds.map(rps);
    return `  ${name.padEnd(24)} ${String(Math.round(rps(x))).padStart(6)} req/s ` +
      `(${Math.round(Math.min(...all))}–${Math.round(Math.max(...all))} over ${rounds.length} rounds)  ` +
      `p50 ${x.p50Ms.toFixed(2)} ms  p99 ${x.p99Ms.toFixed(2)} ms  errors ${rounds.reduce((a, b) => a + b.errors, 0)}`;
  };
  const r = m.results;
  const ratio = (a: string, b: string): string => (rps(median(r[a])) / rps(median(r[b]))).toFixed(2);
  return [
    `${m.runtime}:`,
    ...Object.entries(r).map(([name, rounds]) => line(name, rounds)),
    `  throughput ratio gRPC typed / REST JSON:    ${ratio(TYPED, REST)}`,
    `  throughput ratio gRPC raw / REST JSON:      ${ratio(RAW, REST)}`,
    `  throughput ratio bare grpc-js / bare Hono:  ${ratio(BARE_GRPC, BARE_REST)}`,
  ].join("\n");
}

if (IN_WORKER) {
  g.onmessage = (e) => {
    grpcLoad(e.data).then((r) => g.postMessage({ ok: r }), (err) => g.postMessage({ error: String(err) }));
  };
} else if (process.argv.includes("--child")) {
  console.log(JSON.stringify(await measure()));
  process.exit(0);
} else {
  const results = [await measure()];
  if (!process.argv.includes("--here")) {
    const other = RUNTIME === "bun" ? "deno" : "bun";
    const bin = new URL(`../node_modules/.bin/${other}`, import.meta.url).pathname;
    if (existsSync(bin)) {
      const script = new URL(import.meta.url).pathname;
      const extra = process.argv.slice(2).filter((a) => a !== "--child");
      const argv = other === "deno" ? ["run", "-A", script, "--child", ...extra] : [script, "--child", ...extra];
      const child = spawnSync(bin, argv, { encoding: "utf8", maxBuffer: 1 << 22 });
      const last = child.stdout.trim().split("\n").pop() ?? "";
      if (child.status === 0 && last.startsWith("{")) results.push(JSON.parse(last));
      else console.error(`${other}: the child run failed (${child.status}): ${child.stderr.slice(-2000)}`);
    }
  }
  for (const m of results) console.log(report(m));
  process.exit(0);
}
