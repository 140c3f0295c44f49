/**
 * The REST goal as it is worded: `nrt serve --demo` in a process of its own against a bare Hono route (`Bun.serve`
 * or `Deno.serve`, parsing the request's JSON and answering the same JSON as relu's) in another, and beside them
 * `nrt serve --demo --agents inline` (the device on the HTTP thread) in a third, and in a fourth the bare route with
 * relu computed by a bare Worker device over one SharedArrayBuffer that takes as many requests at once as the demo
 * serves relu instances (one per logical core, each NeuronCore running one execution at a time: the limit of the
 * design, nothing of ours), all loaded by `wrk`
 * (Debian's package; a process of its own) with 32 connections, in alternating rounds of `--seconds` (default 5), after a
 * warm-up of each. Every answer is checked (`_wrk.ts`). Unlike bench/http.ts, no client and no other server share the
 * servers' processes. Each server takes a free port and prints it. Without `wrk` it says so and measures nothing.
 * Each server's resident memory is sampled from `/proc` every 250 ms while the bench runs (Linux; its peak, and its
 * value at the end, are columns): garbage a collector keeps under a sustained load shows there. Where `/proc` tells
 * them, each round also reads the server's CPU time, its main thread's and its other threads' (the device agent, the
 * collector's and compiler's helpers), and its page faults: per request, the median round's are columns, so what
 * limits a server is in the table, not only its throughput. On Bun every server starts
 * with the environment the `nrt` command gives Bun (packages/cli/bin/bun_env.mjs), the bare route's too: the same
 * process settings on both sides, as `npx nrt serve` and `npm start` run.
 *
 * Usage: `bun bench/serve.ts [--rounds R] [--seconds S] [--connections C] [--deno] [--json]`
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { emit, inRounds, RUNTIME } from "./_timing.ts";
import { hasWrk, wrkLoad } from "./_wrk.ts";
import type { LoadResult } from "./_http_client.ts";
import { arg, bareDeviceRoute, bareJsonRoute, serve } from "./_serve.ts";
import { BareDevice } from "./_bare_device.ts";
import { processCost, threadsCpu, threadsDelta } from "./_proc.ts";
import { bunEnv } from "../packages/cli/bin/bun_env.mjs";

const BODY = JSON.stringify({
  inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, 4] }],
});
const PATH = "/v2/models/relu/infer";
/** The line both servers print once they listen (nrt serve's own, which the bare server prints alike). */
const LISTENING = /listening on http:\/\/127\.0\.0\.1:(\d+)/;

// The bare servers, when this file is started as one: `--bare ANSWER`, or `--bare-device ANSWER K`.
const bareAt = process.argv.indexOf("--bare");
const bareDeviceAt = process.argv.indexOf("--bare-device");
if (bareAt >= 0) {
  const server = await serve(bareJsonRoute(JSON.parse(process.argv[bareAt + 1])).fetch);
  console.log(`bare: listening on http://127.0.0.1:${server.port}`);
} else if (bareDeviceAt >= 0) {
  const device = new BareDevice(Number(process.argv[bareDeviceAt + 2]));
  const server = await serve(bareDeviceRoute(JSON.parse(process.argv[bareDeviceAt + 1]), device).fetch);
  console.log(`bare device: listening on http://127.0.0.1:${server.port}`);
} else await main();

async function main(): Promise<void> {
  if (!hasWrk()) {
    console.log("bench/serve.ts: wrk is not installed (apt-get install wrk); nothing measured");
    return;
  }
  // The servers run on the runtime running this file, or on Deno with --deno.
  const deno = process.argv.includes("--deno") || RUNTIME === "deno";
  const runtime = deno ? "deno" : "bun";
  const bin = new URL(`../node_modules/.bin/${runtime}`, import.meta.url).pathname;
  const run = (args: string[]) => (deno ? ["run", "-A", ...args] : args);
  const rounds = arg("rounds", 4), seconds = arg("seconds", 5), connections = arg("connections", 32);
  const dir = mkdtempSync(join(tmpdir(), "nrt-serve-bench-"));
  const children: ChildProcess[] = [];
  /** Starts a server and resolves with the port it prints, or rejects when it exits or stays silent for 60 s. */
  const start = (args: string[]) =>
    new Promise<number>((resolve, reject) => {
      const env = deno ? process.env : bunEnv(process.env);
      const child = spawn(bin, run(args), { stdio: ["ignore", "pipe", "inherit"], env });
      children.push(child);
      let out = "";
      const timer = setTimeout(() => reject(new Error(`${args.join(" ")}: no port within 60 s`)), 60_000);
      child.stdout!.on("data", (d: Uint8Array) => {
        out += new TextDecoder().decode(d);
        const m = LISTENING.exec(out);
        if (m !== null) clearTimeout(timer), resolve(Number(m[1]));
      });
      child.once(
        "exit",
        (code) => (clearTimeout(timer), reject(new Error(`${args.join(" ")} exited ${code}: ${out}`))),
      );
    });
  try {
    const cli = new URL("../packages/cli/main.ts", import.meta.url).pathname;
    const serveArgs = [cli, "serve", "--demo", "--models", dir, "--port", "0", "--grpc-port", "0"];
    const nrtPort = await start(serveArgs);
    const answer = await answerOf(nrtPort);
    const want = [0, 0, 0, 0, 1, 2, 3, 4];
    if (JSON.stringify(JSON.parse(answer).outputs[0].data) !== JSON.stringify(want)) {
      throw new Error(`nrt serve --demo answers relu wrongly: ${answer}`);
    }
    // The same server with its device on the HTTP thread (`--agents inline`): no thread hop per request.
    const inlinePort = await start([...serveArgs, "--agents", "inline"]);
    if ((await answerOf(inlinePort)) !== answer) {
      throw new Error("nrt serve --demo --agents inline answers differently");
    }
    const barePort = await start([new URL(import.meta.url).pathname, "--bare", answer]);
    if ((await answerOf(barePort)) !== answer) throw new Error("The bare route's answer differs");
    // The limit of the design: the bare route with relu on a bare Worker device that takes as many requests at once
    // as `nrt serve --demo` has instances of relu (one per logical core; a NeuronCore runs one execution at a time).
    const instances = await instancesOf(nrtPort);
    const deviceArgs = [new URL(import.meta.url).pathname, "--bare-device", answer, String(instances)];
    const bareDevicePort = await start(deviceArgs);
    if ((await answerOf(bareDevicePort)) !== answer) throw new Error("The bare device's answer differs");
    const ports = [nrtPort, inlinePort, barePort, bareDevicePort];
    // Resident memory of each server (its process: children[k] serves ports[k]).
    const rss = children.map(() => ({ peak: 0, last: 0 }));
    const sampler = setInterval(() => {
      children.forEach((c, i) => {
        const mb = rssMb(c.pid);
        if (mb !== undefined) rss[i] = { peak: Math.max(rss[i].peak, mb), last: mb };
      });
    }, 250);
    const load = (port: number, s: number): Promise<LoadResult> =>
      wrkLoad({ url: `http://127.0.0.1:${port}${PATH}`, body: BODY, answer, connections, seconds: s });
    for (const port of ports) await load(port, 5);
    /** One round of server k, with what its process spent on it per request (from `/proc`, when it can be read). */
    const round = async (k: number): Promise<Round> => {
      const pid = children[k].pid ?? -1, main = String(pid);
      const t0 = threadsCpu(pid), p0 = processCost(pid);
      const r = await load(ports[k], seconds);
      const t1 = threadsCpu(pid), p1 = processCost(pid);
      if (t0 === undefined || t1 === undefined || p0 === undefined || p1 === undefined || r.completed === 0) return r;
      return {
        ...r,
        mainUs: threadsDelta(t0, t1, (tid) => tid === main) / r.completed,
        otherUs: threadsDelta(t0, t1, (tid) => tid !== main) / r.completed,
        faults: (p1.minorFaults - p0.minorFaults) / r.completed,
      };
    };
    const [nrt, inline, bare, bareDevice] = await inRounds(rounds, ports.length, round).finally(() =>
      clearInterval(sampler)
    );
    const rps = (r: Round) => r.completed / (r.elapsedMs / 1000);
    // Each round's ratio against the bare route's (or another target's) turn in the same round.
    const ratios = (xs: Round[], to = bare) => xs.map((r, i) => rps(r) / rps(to[i])).sort((a, b) => a - b);
    const summary = (xs: Round[], to = bare) => {
      const r = ratios(xs, to);
      return `${r[Math.floor(r.length / 2)].toFixed(2)}, range ${r[0].toFixed(2)}–${r[r.length - 1].toFixed(2)}`;
    };
    // The ratio to the bare route as columns too (`--json`): the median round's and the range.
    const ratioColumns = (xs: Round[]) => {
      const r = ratios(xs);
      return {
        ratio: +r[Math.floor(r.length / 2)].toFixed(2),
        ratioMin: +r[0].toFixed(2),
        ratioMax: +r.at(-1)!.toFixed(2),
      };
    };
    const row = (target: string, xs: Round[], mem: { peak: number; last: number }) => {
      const mid = (f: (r: Round) => number) => xs.map(f).sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      // The median round's figure per request, or null where `/proc` could not be read.
      const perRequest = (f: (r: Round) => number | undefined, digits: number) =>
        xs.some((r) => f(r) === undefined) ? null : +mid((r) => f(r)!).toFixed(digits);
      return {
        target,
        reqPerS: Math.round(mid(rps)),
        ...ratioColumns(xs),
        p50Ms: +mid((r) => r.p50Ms).toFixed(2),
        p99Ms: +mid((r) => r.p99Ms).toFixed(2),
        p99MaxMs: +Math.max(...xs.map((r) => r.p99Ms)).toFixed(2),
        mainCpuUs: perRequest((r) => r.mainUs, 1),
        otherCpuUs: perRequest((r) => r.otherUs, 1),
        faults: perRequest((r) => r.faults, 2),
        errors: xs.reduce((a, r) => a + r.errors, 0),
        wrong: xs.reduce((a, r) => a + (r.wrong ?? 0), 0),
        rssPeakMB: mem.peak,
        rssEndMB: mem.last,
      };
    };
    emit(
      "serve",
      `nrt serve --demo ÷ a bare Hono route, relu FP32[8] over REST, wrk with ${connections} connections, ` +
        `${rounds} alternating rounds of ${seconds} s (median round; ratio ${summary(nrt)}; with --agents inline ` +
        `${summary(inline)}; the bare route with a bare Worker device taking ${instances} requests at once ` +
        `${summary(bareDevice)}, and nrt serve --demo ÷ it ${summary(nrt, bareDevice)})`,
      [
        row("nrt serve --demo", nrt, rss[0]),
        row("nrt serve --demo --agents inline", inline, rss[1]),
        row("bare Hono route", bare, rss[2]),
        row(`bare Hono route + bare Worker device, ${instances} at once`, bareDevice, rss[3]),
      ],
      runtime,
    );
  } finally {
    for (const c of children) c.kill("SIGTERM");
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(0) : c.once("exit", r)))));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A `wrk` round, with what the server's process spent per request (`undefined` where `/proc` cannot be read). */
type Round = LoadResult & { mainUs?: number; otherUs?: number; faults?: number };

/** The resident memory of process `pid` in MB (`/proc`, Linux), or `undefined` where it cannot be read. */
function rssMb(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return kb === null ? undefined : Math.round(Number(kb[1]) / 1024);
  } catch {
    return undefined;
  }
}

/** How many instances of relu the server on `port` serves (`GET /v2/models/relu`'s `instances`). */
async function instancesOf(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/v2/models/relu`);
  const meta = await res.json() as { instances?: unknown[] };
  if (res.status !== 200 || !Array.isArray(meta.instances)) {
    throw new Error(`The server on port ${port} lists no instances of relu: ${JSON.stringify(meta)}`);
  }
  return meta.instances.length;
}

/** The answer of the server on `port` to the bench's body (it listens already). */
async function answerOf(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}${PATH}`, { method: "POST", body: BODY });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`The server on port ${port} answers ${res.status}: ${text}`);
  return text;
}
