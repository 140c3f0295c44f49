/**
 * HTTP throughput of the inference server against a bare Hono route returning the same JSON, on the same
 * runtime, in one run: 64 concurrent connections from a client Worker, loopback only, for `--seconds` (default 1)
 * per target and round (`--requests` bounds a turn by a count as well), each target after the same warm-up of
 * 20,000 requests (a server's steady state, JIT compiled: after 3,000 the JIT threads still took a quarter of a CPU
 * through the measurement on Bun, 145 FTL compiles of the server's functions, and each row now prints that share so
 * a short warm-up shows). A second limit is the bare route with relu computed by a bare Worker over one
 * SharedArrayBuffer (`_bare_device.ts`): the thread hops of a device off the HTTP thread, with nothing of ours. Each
 * row also gives the server's main-thread CPU per request where `/proc` tells it, and the whole process's (server,
 * device threads and client) with the CPUs it kept busy: a target that keeps all the machine's CPUs busy is bound by
 * CPU. The targets run in `--rounds` rounds (default 6), in turn, each round starting at the next target, so that a
 * change of the machine's speed hits them alike: a ratio is taken within each round and reported as the median and
 * the range over rounds; a row's throughput, CPU and latency quantiles are over all its rounds (this machine's bare
 * route swung from 11k to 64k req/s between runs; turns of a fixed 5,000 requests lasted 0.1 s for the bare route
 * on a fast day and their ratios spread 0.20–0.64 within one run, where turns of 1 s spread 0.24–0.33). Under Bun
 * it then runs itself under Deno (and the other way round) and prints both;
 * `--here` measures the current runtime only; `--json` prints one table line per runtime. `--wrk` loads each turn
 * with `wrk` (Debian's package) in a process of its own instead of the client Worker (`_wrk.ts`): a JavaScript client
 * in the server's process costs every request a share of the same CPUs, a fast target more than a slow one; rows then
 * give the median round's p50 and p99, and the process CPU is the server's alone.
 *
 * Usage: `bun bench/http.ts [--requests N] [--rounds R] [--seconds S] [--connections C] [--instances I] [--warmup N]
 *        [--wrk] [--here] [--json]`
 *        `deno run -A bench/http.ts …`
 *
 * @module
 */
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { buildCustomOpNeff, type ExecutionEvent, MemoryLogger, Runtime } from "@nrt/core";
import { DrainGate } from "../packages/cli/http_listener.ts";
import { createInferenceApp, DashboardMonitor, filesFromMap, ModelRepository, NeuronActivity } from "@nrt/http-api";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { processCost, threadsCpu, threadsDelta } from "./_proc.ts";
import { emit, inRounds, JSON_OUTPUT, RUNTIME } from "./_timing.ts";
import process from "node:process";
import { type LoadJob, type LoadResult, quantile } from "./_http_client.ts";
import { BareDevice } from "./_bare_device.ts";
import { hasWrk, wrkLoad } from "./_wrk.ts";
import { arg, bareDeviceRoute, bareJsonRoute, type Fetch, serve } from "./_serve.ts";

function load(job: LoadJob): Promise<LoadResult> {
  const w = new Worker(new URL("./_http_client.ts", import.meta.url), { type: "module" });
  return new Promise<LoadResult>((resolve, reject) => {
    w.onmessage = (
      e: MessageEvent<{ ok?: LoadResult; error?: string }>,
    ) => (e.data.ok ? resolve(e.data.ok) : reject(new Error(e.data.error)));
    w.onerror = (e) => reject(new Error(String((e as ErrorEvent).message)));
    w.postMessage(job);
  }).finally(() => w.terminate());
}

/**
 * A target's load over all its rounds, with the server's main-thread CPU per request, the share of one CPU the JIT and
 * GC helper threads took meanwhile (a warm-up too short for the JIT shows here), and the whole process's CPU per
 * request with the CPUs it kept busy: near the machine's CPU count the run was bound by CPU, and two such targets'
 * throughputs then stand in the inverse ratio of their process CPU per request.
 */
interface Row extends LoadResult {
  readonly mainCpuUs?: number;
  readonly jitGcPct?: number;
  readonly processCpuUs?: number;
  readonly busyCpus?: number;
}

/** A ratio of two targets' throughputs taken within each round: the median round's and the range. */
interface Ratio {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/** One runtime's figures: the plain app, the app with nrt serve's hooks, the bare route, and it with a bare device. */
interface Measured {
  readonly runtime: string;
  readonly rounds: number;
  readonly infer: Row;
  readonly served: Row;
  readonly bare: Row;
  readonly bareDevice: Row;
  readonly ratio: Ratio;
  readonly servedRatio: Ratio;
  readonly bareDeviceRatio: Ratio;
}

const rps = (r: LoadResult): number => r.completed / (r.elapsedMs / 1000);

/** One round of one target: its load and the CPU the process's threads took meanwhile. */
interface Round {
  readonly load: LoadResult;
  readonly cpu?: { main: number; jitGc: number; process: number };
}

/** A target's rounds as one row: sums, CPU per request, and latency quantiles over every request of every round. */
function mergeRounds(rounds: readonly Round[]): Row {
  let completed = 0, errors = 0, wrong = 0, elapsedMs = 0, main = 0, jitGc = 0, proc = 0, n = 0;
  for (const r of rounds) {
    completed += r.load.completed;
    errors += r.load.errors;
    wrong += r.load.wrong ?? 0;
    elapsedMs += r.load.elapsedMs;
    n += r.load.latenciesMs?.length ?? 0;
    if (r.cpu !== undefined) (main += r.cpu.main), (jitGc += r.cpu.jitGc), (proc += r.cpu.process);
  }
  const all = new Float64Array(n);
  let at = 0;
  for (const r of rounds) {
    if (r.load.latenciesMs !== undefined) all.set(r.load.latenciesMs, at), (at += r.load.latenciesMs.length);
  }
  all.sort();
  // wrk reports quantiles, not latencies: then the median round's p50 and p99.
  const middle = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const p50Ms = n > 0 ? quantile(all, 0.5) : middle(rounds.map((r) => r.load.p50Ms));
  const p99Ms = n > 0 ? quantile(all, 0.99) : middle(rounds.map((r) => r.load.p99Ms));
  const row: Row = { completed, errors, wrong, elapsedMs, p50Ms, p99Ms };
  if (rounds.some((r) => r.cpu === undefined)) return row;
  return {
    ...row,
    mainCpuUs: main / Math.max(1, completed),
    jitGcPct: (100 * jitGc) / (elapsedMs * 1000),
    processCpuUs: proc / Math.max(1, completed),
    busyCpus: proc / (elapsedMs * 1000),
  };
}

/** The throughput ratio a ÷ b within each round: the median over rounds and the range. */
function roundRatio(a: readonly Round[], b: readonly Round[]): Ratio {
  const xs = a.map((r, i) => rps(r.load) / rps(b[i].load)).sort((x, y) => x - y);
  return { median: xs[Math.floor(xs.length / 2)], min: xs[0], max: xs[xs.length - 1] };
}

/** The Host values the hooks row's server answers (set once it listens). */
let servedHosts: readonly string[] | undefined;

async function measure(): Promise<Measured> {
  const connections = arg("connections", 64),
    rounds = Math.max(1, arg("rounds", 6)),
    requests = arg("requests", 1e9),
    seconds = arg("seconds", 1),
    instances = arg("instances", 4),
    warmup = arg("warmup", 20_000);
  const wasm = new Uint8Array(readFileSync(new URL("../kernels/wasm/relu.wasm", import.meta.url)));
  const neff = buildCustomOpNeff({
    name: "relu.neff",
    target: CAYMAN_SPEC.name,
    inputs: [{ name: "x", dtype: "float32", shape: [8] }],
    outputs: [{ name: "y", dtype: "float32", shape: [8] }],
    libraries: [{
      name: "relu",
      wasm,
      totalCpus: Number(process.env.CPUS ?? 8) as 1 | 8,
      functions: [{ opcode: 1, name: "relu" }],
    }],
    calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
  });
  // Two servers of the same model on two simulated devices: the plain app, and the app wired as `nrt serve` wires
  // it — the dashboard's and the Neuron tools' hooks on every execution (onExecution, onSpan), the drain gate and the
  // Host check of a loopback bind.
  const setup = async (hooks: boolean) => {
    const container = createNrtContainer({ agents: (process.env.AGENTS ?? "device") as "device" });
    const monitor = hooks ? new DashboardMonitor() : undefined;
    const activity = hooks ? new NeuronActivity() : undefined;
    const runtime = await Runtime.init({
      ...nrtPlugins(container),
      logger: new MemoryLogger(),
      ...(hooks
        ? {
          onExecution: (e: ExecutionEvent) => {
            monitor!.onExecution(e);
            activity!.onExecution(e);
          },
          onSpan: monitor!.onSpan,
          timeExecution: monitor!.timeExecution,
        }
        : {}),
    });
    const files = filesFromMap({
      "relu.neff": neff,
      "relu.json": new TextEncoder().encode(JSON.stringify({ vnc: 0, instances })),
    });
    const repository = new ModelRepository({ runtime, files });
    await repository.scan();
    await repository.loadAll();
    const app = createInferenceApp({
      runtime,
      repository,
      // nrt serve's Host check on a loopback bind: a function, its list known once the port is.
      ...(hooks ? { dashboard: { monitor: monitor! }, activity, allowedHosts: () => servedHosts } : {}),
    });
    const fetch: Fetch = hooks ? new DrainGate(app.fetch).fetch : app.fetch;
    const close = async () => {
      monitor?.close();
      await repository.close();
      await runtime.close();
      await container.resolve(PortalToken).close();
    };
    return { app, fetch, close };
  };
  const plain = await setup(false), served = await setup(true);
  const app = plain.app;
  // Eight bodies with different inputs, sent in turn, so that an answer given to the wrong request shows.
  const inputs = Array.from({ length: 8 }, (_, k) => Array.from({ length: 8 }, (_, j) => j - 3 + (k - 4) / 2));
  const bodies = inputs.map((data) => JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data }] }));
  const SAMPLE = 4; // the body of the sample answer, of the bare route's answer and of the --wrk load
  const body = bodies[SAMPLE];
  const sample = await app.request("/v2/models/relu/infer", { method: "POST", body });
  const json = await sample.text();
  if (sample.status !== 200) throw new Error(`The bench model does not run: ${json}`);
  // The limit: a bare Hono route that parses the same request body and answers the same JSON (nothing of ours).
  const answer = JSON.parse(json);
  const bare = bareJsonRoute(answer);
  // The limit for any device off the HTTP thread: the same bare route, with relu computed by a bare Worker over one
  // SharedArrayBuffer (a store, a notify when it sleeps, an Atomics.waitAsync back). Nothing of ours.
  const device = new BareDevice();
  const bareDev = bareDeviceRoute(answer, device);
  const inferServer = await serve(plain.fetch);
  const servedServer = await serve(served.fetch);
  servedHosts = ["127.0.0.1", "localhost"].flatMap((h) => [h, `${h}:${servedServer.port}`]);
  const bareServer = await serve(bare.fetch);
  const bareDeviceServer = await serve(bareDev.fetch);
  try {
    const url = (port: number) => `http://127.0.0.1:${port}/v2/models/relu/infer`;
    // Each target's answer to each body sent alone, checked: relu of the inputs (the bare route answers one fixed
    // JSON whatever it is sent). Under load every answer must be the same text.
    const answersOf = async (port: number, computes: boolean): Promise<string[]> => {
      const texts: string[] = [];
      for (let k = 0; k < bodies.length; k++) {
        const res = await fetch(url(port), { method: "POST", body: bodies[k] });
        const text = await res.text();
        const got = (JSON.parse(text) as { outputs?: Array<{ data?: unknown }> }).outputs?.[0]?.data;
        const want = computes ? inputs[k].map((x) => Math.max(0, x)) : answer.outputs[0].data;
        if (res.status !== 200 || JSON.stringify(got) !== JSON.stringify(want)) {
          throw new Error(
            `The target on port ${port} answers body ${k} wrongly (${res.status}): ${text.slice(0, 300)}`,
          );
        }
        texts.push(text);
      }
      return texts;
    };
    const answers = new Map<number, string[]>();
    const computing = [
      [inferServer, true],
      [servedServer, true],
      [bareServer, false],
      [bareDeviceServer, true],
    ] as const;
    for (const [s, computes] of computing) answers.set(s.port, await answersOf(s.port, computes));
    const job = (port: number, n: number, s = seconds): LoadJob => ({
      url: url(port),
      bodies,
      answers: answers.get(port),
      connections,
      requests: n,
      seconds: s,
    });
    // The same warm-up for every target (JIT tiers, connections, staging buffers): a server's steady state.
    for (const s of [inferServer, servedServer, bareServer, bareDeviceServer]) await load(job(s.port, warmup, 60));
    // With --wrk each turn's load comes from `wrk` in a process of its own, on the sample body.
    const useWrk = process.argv.includes("--wrk");
    if (useWrk && !hasWrk()) throw new Error("--wrk: wrk is not installed (apt-get install wrk)");
    const turn = (port: number): Promise<LoadResult> =>
      useWrk
        ? wrkLoad({ url: url(port), body, answer: answers.get(port)![SAMPLE], connections, seconds })
        : load(job(port, requests));
    // From `/proc`: this process's main thread (the server's), its JIT compiler and GC helper threads (Bun:
    // `JITWorker`, `HeapHelper`; Deno: V8's `DefaultWorker`s, which do both), and the whole process (the server, its
    // device's threads and the client Worker).
    const main = String(process.pid);
    const jitGc = (_tid: string, comm: string) => /^(JITWorker|HeapHelper|V8 DefaultWorke)/.test(comm);
    const measured = async (port: number): Promise<Round> => {
      const t0 = threadsCpu("self"), p0 = processCost("self");
      const result = await turn(port);
      const t1 = threadsCpu("self"), p1 = processCost("self");
      if (t0 === undefined || t1 === undefined || p0 === undefined || p1 === undefined) return { load: result };
      return {
        load: result,
        cpu: {
          main: threadsDelta(t0, t1, (tid) => tid === main),
          jitGc: threadsDelta(t0, t1, jitGc),
          process: p1.us - p0.us,
        },
      };
    };
    const ports = [inferServer.port, servedServer.port, bareServer.port, bareDeviceServer.port];
    const [infer, served, bareRounds, bareDevice] = await inRounds(rounds, ports.length, (k) => measured(ports[k]));
    return {
      runtime: RUNTIME,
      rounds,
      infer: mergeRounds(infer),
      served: mergeRounds(served),
      bare: mergeRounds(bareRounds),
      bareDevice: mergeRounds(bareDevice),
      ratio: roundRatio(infer, bareRounds),
      servedRatio: roundRatio(served, bareRounds),
      bareDeviceRatio: roundRatio(bareDevice, bareRounds),
    };
  } finally {
    await inferServer.stop();
    await servedServer.stop();
    await bareServer.stop();
    await bareDeviceServer.stop();
    device.close();
    await plain.close();
    await served.close();
  }
}

const ratioText = (x: Ratio): string => `${x.median.toFixed(2)} (${x.min.toFixed(2)}–${x.max.toFixed(2)})`;

function report(r: Measured): string {
  const line = (name: string, x: Row) =>
    `  ${name.padEnd(26)} ${String(Math.round(x.completed / (x.elapsedMs / 1000))).padStart(7)} req/s  ${
      String(x.completed).padStart(6)
    } requests  ` +
    `p50 ${x.p50Ms.toFixed(2)} ms  p99 ${x.p99Ms.toFixed(2)} ms  errors ${x.errors}  wrong ${x.wrong}` +
    (x.mainCpuUs === undefined ? "" : `  main thread ${x.mainCpuUs.toFixed(0)} µs/req`) +
    (x.jitGcPct === undefined ? "" : `  JIT+GC threads ${x.jitGcPct.toFixed(0)}%`) +
    (x.processCpuUs === undefined || x.busyCpus === undefined
      ? ""
      : `  process ${x.processCpuUs.toFixed(0)} µs/req (${x.busyCpus.toFixed(2)} CPUs busy)`);
  return [
    `${r.runtime}:`,
    line("POST /infer (relu FP32[8])", r.infer),
    line("  with nrt serve's hooks", r.served),
    line("bare Hono route", r.bare),
    line("  + bare Worker device", r.bareDevice),
    `  throughput ratio infer/bare: ${ratioText(r.ratio)}; with nrt serve's hooks: ${ratioText(r.servedRatio)}; ` +
    `bare route with a bare Worker device: ${ratioText(r.bareDeviceRatio)} (within each of ${r.rounds} rounds: ` +
    `median, range)`,
    ...(r.bare.processCpuUs === undefined || r.infer.processCpuUs === undefined ? [] : [
      `  process CPU per request, bare ÷ infer: ${(r.bare.processCpuUs / r.infer.processCpuUs).toFixed(2)} ` +
      `(the throughput ratio when both keep the same CPUs busy)`,
    ]),
  ].join("\n");
}

if (process.argv.includes("--child")) {
  // The rows' quantiles are taken already: the latencies need not cross the process boundary.
  const m = await measure();
  const strip = ({ latenciesMs: _, ...x }: Row): Row => x;
  console.log(
    JSON.stringify({
      ...m,
      infer: strip(m.infer),
      served: strip(m.served),
      bare: strip(m.bare),
      bareDevice: strip(m.bareDevice),
    }),
  );
  process.exit(0);
}

const here = await measure();
const results = [here];
if (!process.argv.includes("--here")) {
  const other = RUNTIME === "bun" ? "deno" : "bun";
  const bin = new URL(`../node_modules/.bin/${other}`, import.meta.url).pathname;
  if (existsSync(bin)) {
    const script = new URL(import.meta.url).pathname;
    const extra = process.argv.slice(2).filter((a) => a !== "--child");
    const argv = other === "deno" ? ["run", "-A", script, "--child", ...extra] : [script, "--child", ...extra];
    const child = spawnSync(bin, argv, { encoding: "utf8", maxBuffer: 1 << 20 });
    const last = child.stdout.trim().split("\n").pop() ?? "";
    if (child.status === 0 && last.startsWith("{")) results.push(JSON.parse(last));
    else console.error(`${other}: the child run failed (${child.status}): ${child.stderr.slice(-2000)}`);
  }
}
for (const r of results) {
  if (!JSON_OUTPUT) {
    console.log(report(r));
    continue;
  }
  const row = (target: string, x: Row, ratio: Ratio | undefined) => ({
    target,
    reqPerS: Math.round(x.completed / (x.elapsedMs / 1000)),
    requests: x.completed,
    p50Ms: Number(x.p50Ms.toFixed(2)),
    p99Ms: Number(x.p99Ms.toFixed(2)),
    errors: x.errors,
    wrong: x.wrong,
    mainThreadUsPerReq: x.mainCpuUs === undefined ? null : Math.round(x.mainCpuUs),
    jitGcThreadsPct: x.jitGcPct === undefined ? null : Math.round(x.jitGcPct),
    processUsPerReq: x.processCpuUs === undefined ? null : Math.round(x.processCpuUs),
    ratioToBare: ratio === undefined ? null : Number(ratio.median.toFixed(2)),
    ratioToBareMin: ratio === undefined ? null : Number(ratio.min.toFixed(2)),
    ratioToBareMax: ratio === undefined ? null : Number(ratio.max.toFixed(2)),
  });
  emit("http", `REST /infer (relu FP32[8]) ÷ bare Hono route (${r.runtime})`, [
    row("POST /infer", r.infer, r.ratio),
    row("POST /infer with nrt serve's hooks", r.served, r.servedRatio),
    row("bare Hono route", r.bare, { median: 1, min: 1, max: 1 }),
    row("bare Hono route + bare Worker device", r.bareDevice, r.bareDeviceRatio),
  ], r.runtime);
}
process.exit(0);
