/**
 * `bench/portal.ts`: what crossing the process boundary costs. For a no-op kernel and for vector_add at 1 MiB per
 * tensor it measures, in one process run, the median `Model.execute` time on the embedded simulator (in-process
 * `DeviceSimPortal`) and on the `remote` backend (a `RemotePortal` talking to a `nrt device-sim` daemon process over
 * a Unix socket), the two alternating in blocks of back-to-back executes, and prints the ratio remote ÷ in-process.
 * Tensors are device-resident, as in `bench/exec.ts`, so what differs is the execute path's portal traffic: the
 * doorbell, the compute setup, the NQ and stdio polls.
 * Also prints the round trip of one CSR read and the throughput of a 1 MiB `memWrite` + `memRead`. The limit beside
 * them, with nothing of ours: a 16-byte round trip over a Unix socket to an echo process on the runtime's native
 * sockets (`_bare_socket.ts`, timed in the same alternation as the no-op executes). The `floor` row is the in-process
 * execute plus that round trip, ÷ in-process: what a remote execute would take if crossing the process boundary cost
 * one bare round trip and nothing else (close, not exact: the remote side has no host ↔ agent thread wakes, and adds
 * the daemon's decoding and answer); `remote_over_floor` is what our protocol and daemon add on top.
 *
 * Each side is warmed up first: the remote protocol takes thousands of runs to reach its steady state (`CASES`).
 * Run: `bun bench/portal.ts` or `deno run -A bench/portal.ts` (`RUNS=500` to change the sample count, `WARM=n` the
 * no-op's warm-up runs; `--agents M` starts the daemon with `nrt device-sim --agents M`).
 *
 * @module
 */
import "reflect-metadata";
import { MemoryLogger, Portal, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { container } from "tsyringe";
import { connectDeviceDaemon } from "../packages/cli/transports.ts";
import type { RemotePortal } from "../packages/device-sim/remote/mod.ts";
import { oneOpNeff } from "../tests/_kernels.ts";
import { alternatingBlocksUs, emit, RUNS, timeUs } from "./_timing.ts";
import { type BareEcho, connectBareEcho } from "./_bare_socket.ts";
import { ArchPackToken, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { cayman } from "@nrt/arch-cayman";
import process from "node:process";
import { bunEnv } from "../packages/cli/bin/bun_env.mjs";

/**
 * The cases, each with the warm-up runs of each side before the counted ones (ours; `WARM=n` sets the no-op's): the
 * remote side's protocol code, in this process and in the daemon's, reaches its steady state far later than the
 * in-process execute. Measured on Bun (no-op, the daemon started as below): 300 warm-up runs read 2.38–2.86 (remote
 * 185–233 µs, in-process 77–81), 10,000 read 1.65–1.78 (remote 82–83 µs, in-process 47–50).
 */
const CASES = [{ name: "noop", fn: "noop", n: 16, ins: 1, warmup: Number(process.env.WARM ?? 10_000) }, {
  name: "vector_add",
  fn: "vector_add",
  n: (1 << 20) / 4,
  ins: 2,
  warmup: 1_000,
}];

/** A runtime on the portal registered in `c` with every case loaded: an execute per case, and a close. */
async function openCases(c: NrtContainer): Promise<{ executes: Array<() => Promise<void>>; close(): Promise<void> }> {
  const portal = c.resolve(PortalToken);
  await portal.acquireCores?.(0, [0, 1]);
  // The portal outlives the runtime: portalTimes() below uses it again.
  const rt = await Runtime.init({
    ...nrtPlugins(c),
    ownsPortal: false,
    visibleCores: [0, 1],
    logger: new MemoryLogger(),
  });
  const close = async () => {
    await rt.close();
    await portal.releaseCores?.(0, [0, 1]);
  };
  try {
    const executes: Array<() => Promise<void>> = [];
    for (const k of CASES) {
      const names = ["a", "b"].slice(0, k.ins);
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [k.n] });
      const model = await rt.load(oneOpNeff(k.name, k.fn, names.map(f32), [f32("out")]));
      const ins = new TensorSet(), outs = new TensorSet();
      for (const n of names) {
        const t = await rt.allocateTensor({ size: k.n * 4, name: n });
        await t.write(new Uint8Array(new Float32Array(k.n).fill(1.5).buffer));
        ins.add(n, t);
      }
      outs.add("out", await rt.allocateTensor({ size: k.n * 4, name: "out" }));
      executes.push(() => model.execute(ins, outs));
    }
    return { executes, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** CSR round trip and 1 MiB write+read on a portal (µs). */
async function portalTimes(p: Portal): Promise<[number, number]> {
  const m = await p.memAlloc({ device: 0, nc: 0, bytes: 1 << 20 });
  const data = new Uint8Array(1 << 20).fill(7);
  try {
    const csr = await timeUs(() => p.barRead32(0, 0, 0x3000));
    const bulk = await timeUs(async () => {
      await p.memWrite(m, 0, data);
      await p.memRead(m, 0, data.byteLength);
    }, Math.min(RUNS, 100));
    return [csr, bulk];
  } finally {
    await p.memFree(m);
  }
}

const sim = new DeviceSimPortal();
const local = container.createChildContainer();
local.register(ArchPackToken, { useValue: cayman });
local.register(PortalToken, { useValue: sim });

// `--agents M` runs the daemon's device in mode M (`nrt device-sim --agents`); default: the daemon's own default.
const argv = (globalThis as { process?: { argv: string[] } }).process?.argv ?? [];
const agentsAt = argv.indexOf("--agents");
const daemonAgents = agentsAt >= 0 ? ["--agents", argv[agentsAt + 1]] : [];
const dir = mkdtempSync(join(tmpdir(), "nrt-bench-"));
const sock = join(dir, "d.sock");
const bun = new URL("../node_modules/.bin/bun", import.meta.url).pathname;
// The daemon with the environment the `nrt` command gives Bun (`npx nrt device-sim` runs it so): with Bun's defaults
// instead, its allocator returned the pages it freed and faulted them back, and the no-op read 2.31–2.36 where it
// read 1.62–1.79 (10,000 warm-up runs, two runs each). The echo process gets the same, as bench/serve.ts gives its
// bare route.
const daemon = spawn(bun, [
  new URL("../packages/cli/device_daemon.ts", import.meta.url).pathname,
  "--socket",
  sock,
  ...daemonAgents,
], {
  stdio: ["ignore", "pipe", "ignore"],
  env: bunEnv(process.env),
});
// The bare limit's echo process, on the daemon's runtime.
const echoSock = join(dir, "echo.sock");
const echo = spawn(bun, [new URL("./_bare_socket.ts", import.meta.url).pathname, echoSock], {
  stdio: ["ignore", "pipe", "ignore"],
  env: bunEnv(process.env),
});
/** Resolves once `child` prints `line`; rejects when it exits first or stays silent for 15 s. */
const started = (child: typeof daemon, line: string, what: string) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 15 s`)), 15_000);
    child.stdout!.on("data", (d: Uint8Array) => {
      if (String(d).includes(line)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", () => reject(new Error(`${what} exited`)));
  });
let remote: RemotePortal | undefined;
let bare: BareEcho | undefined;
try {
  await started(daemon, "listening on", "the daemon");
  await started(echo, "listening", "the echo process");
  remote = await connectDeviceDaemon({ path: sock }, { name: "bench/portal.ts" });
  bare = await connectBareEcho(echoSock);
  const echoOnce = bare.roundTrip;
  const rc = container.createChildContainer();
  rc.register(ArchPackToken, { useValue: cayman });
  rc.register(PortalToken, { useValue: remote });

  // Each case's in-process and remote executes alternate in blocks of back-to-back runs, so a change of this shared
  // machine's speed moves both alike (timed one whole series after the other, the in-process noop read 81 to 142 µs
  // between runs of the same code).
  const inProcess: number[] = [], overSocket: number[] = [];
  let roundTrip = 0;
  const a = await openCases(local);
  try {
    const b = await openCases(rc);
    try {
      for (let k = 0; k < CASES.length; k++) {
        // The no-op's alternation also times the bare round trip.
        const [x, y, z] = await alternatingBlocksUs(
          [a.executes[k], b.executes[k], ...(k === 0 ? [echoOnce] : [])],
          20,
          CASES[k].warmup,
        );
        inProcess.push(x);
        overSocket.push(y);
        if (k === 0) roundTrip = z;
      }
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
  const [csrLocal, bulkLocal] = await portalTimes(sim);
  const [csrRemote, bulkRemote] = await portalTimes(remote);
  const row = (name: string, a: number, b: number) => ({
    case: name,
    in_process_us: Math.round(a),
    remote_us: Math.round(b),
    ratio: +(b / a).toFixed(2),
  });
  emit(
    "portal",
    `nrt_execute on the remote backend (daemon process, Unix socket) vs in-process, median of ${RUNS} runs each, in alternating blocks of 20`,
    [
      row("execute noop", inProcess[0], overSocket[0]),
      {
        case: "floor: in-process noop + a bare 16-byte socket round trip",
        in_process_us: Math.round(inProcess[0]),
        remote_us: Math.round(inProcess[0] + roundTrip),
        ratio: +((inProcess[0] + roundTrip) / inProcess[0]).toFixed(2),
        bare_round_trip_us: Math.round(roundTrip),
        remote_over_floor: +(overSocket[0] / (inProcess[0] + roundTrip)).toFixed(2),
      },
      row("execute vector_add 1 MiB", inProcess[1], overSocket[1]),
      row("barRead32 round trip", csrLocal, csrRemote),
      row("memWrite+memRead 1 MiB", bulkLocal, bulkRemote),
    ],
  );
} finally {
  bare?.close();
  await remote?.close();
  await sim.close();
  daemon.kill("SIGTERM");
  echo.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}
