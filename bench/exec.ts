/**
 * `bench/exec.ts`: `Model.execute` against the limit of this machine, each pair measured in the same run.
 *
 * - **execute vs bare Workers.** A no-op kernel (16 floats) and vector_add at 1 MiB per tensor, through the public
 *   runtime on the simulated device (doorbell → device agent → sequencer → DMA → the 8 Q7 cores, on the Workers or,
 *   once the op is learned quick, on the agent's thread → DRAIN → completion record → host wake), against the same
 *   kernel's raw `.wasm` on 8 bare Workers over one shared memory (`_bare_workers.ts`, nothing of ours) plus a plain
 *   copy of the inputs in and the output out. The plain copy of the same bytes is printed too: the floor of moving
 *   them.
 * - **SPMD.** vector_add at 1 MiB on 8 Q7 cores against 1, through the runtime and on bare Workers, the two timed in
 *   alternation (two models on one NeuronCore; the bare side's one set of Workers). The goal is ≥ 0.8 × min(8, CPUs).
 * - Both for each number of Workers the 8 Q7 cores run on (`q7_workers`, `NRT_SIM_Q7_WORKERS`): the default,
 *   min(8, CPUs), and 8 (one Worker per core), side by side in one run; the bare side also runs its 8 cores on that
 *   many Workers (`bare_same_workers_us`), the limit of the multiplexed design.
 * - **First execute after load** against the steady median of the same model, paired round by round (the Q7 Workers
 *   start at load), beside two limits of this machine, each bare Workers' first dispatch against their own steady
 *   median: after an idle gap as long as a load, and after as long a span of bare loads of the same NEFF on the host
 *   thread (`_bare_load.ts`: gunzip, ustar walk, MD5, staging into fresh shared memory), the host work our first
 *   execute follows.
 * - **Execute after idle**: a loaded model's execute after 20 ms of quiet (sporadic traffic) against its steady
 *   median, beside bare Workers after the same gap.
 * - **First REST request after a load**, as `nrt serve` answers it: the model repository loads the model and warms
 *   each instance (one execute on zeroed inputs) before the model is READY, then one `/infer` (in one process, no
 *   socket) against the steady median, beside a bare Hono route with relu on a bare Worker device (`_serve.ts`,
 *   `_bare_device.ts`, nothing of ours) after an idle gap as long as the load, and after as long of bare loads.
 * - **Where the device runs**: one agent Worker per device, per NeuronCore, or on the host thread (no-op kernel).
 *
 * Each side runs with only its own Workers alive (parked Workers of the other side slow a wake). Run:
 * `bun bench/exec.ts` or `deno run -A bench/exec.ts` (`RUNS=500` for more samples, `--json` for one JSON line per
 * table, `--q7-workers=1,2,8` for other Worker counts).
 *
 * @module
 */
import "reflect-metadata";
import { availableParallelism } from "node:os";
import { readFileSync } from "node:fs";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { readNeffHeader } from "@nrt/core/neff";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { createInferenceApp, filesFromMap, ModelRepository } from "@nrt/http-api";
import type { DeviceAgentMode } from "@nrt/device-sim";
import { defaultQ7Workers, Q7_WORKERS_ENV } from "../packages/device-sim/q7/q7_cluster.ts";
import { oneOpNeff } from "../tests/_kernels.ts";
import { BareDevice } from "./_bare_device.ts";
import { busyLoading } from "./_bare_load.ts";
import { BareWorkers, DATA_BASE } from "./_bare_workers.ts";
import { bareDeviceRoute } from "./_serve.ts";
import { alternatingUs, emit, median, RUNS, timeUs } from "./_timing.ts";

const CPUS = availableParallelism();
const kernel = (n: string) => new Uint8Array(readFileSync(new URL(`../kernels/wasm/${n}.wasm`, import.meta.url)));
const CASES = [
  { name: "noop", lib: "noop", fn: "noop", n: 16, ins: 1 },
  { name: "vector_add 1 MiB", lib: "vector_add", fn: "vector_add", n: (1 << 20) / 4, ins: 2 },
] as const;
type Case = (typeof CASES)[number];
const inputData = (n: number) => new Uint8Array(new Float32Array(n).fill(1.5).buffer);

const argv = (globalThis as { process?: { argv: string[] } }).process?.argv ?? [];
const workersFlag = argv.find((a) => a.startsWith("--q7-workers="))?.slice("--q7-workers=".length);
/** The Q7 Worker counts the execute and SPMD tables compare: the default and 8, or `--q7-workers=a,b,…`. */
const Q7_WORKERS = workersFlag !== undefined
  ? workersFlag.split(",").map(Number)
  : [...new Set([defaultQ7Workers(), 8])];

/** Sets the Q7 Worker count of the device agents started from now on (they read it from the environment). */
function setQ7Workers(workers: number): void {
  const g = globalThis as { Deno?: { env: { set(k: string, v: string): void } } };
  if (g.Deno !== undefined) g.Deno.env.set(Q7_WORKERS_ENV, String(workers));
  else process.env[Q7_WORKERS_ENV] = String(workers);
}

/** The one-op NEFF of `c` (inputs `a`, `b` as the case has them; output `out`), on `cpus` Q7 cores (default 8). */
function caseNeff(c: Case, cpus?: 1 | 8): Uint8Array {
  const f32 = (name: string) => ({ name, dtype: "float32", shape: [c.n] });
  return oneOpNeff(c.lib, c.fn, ["a", "b"].slice(0, c.ins).map(f32), [f32("out")], cpus);
}

/** Host tensors for `c`'s NEFF: the inputs filled with 1.5, the output empty. */
async function caseTensors(rt: Runtime, c: Case): Promise<{ ins: TensorSet; outs: TensorSet }> {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const n of ["a", "b"].slice(0, c.ins)) {
    const t = await rt.allocateTensor({ size: c.n * 4, name: n });
    await t.write(inputData(c.n));
    ins.add(n, t);
  }
  outs.add("out", await rt.allocateTensor({ size: c.n * 4, name: "out" }));
  return { ins, outs };
}

/** A runtime on the simulated device with one model of `c` loaded on `cpus` Q7 cores; `first` is its first execute. */
function withModel<T>(
  c: Case,
  cpus: 1 | 8,
  agents: DeviceAgentMode,
  f: (execute: () => Promise<void>, first: number) => Promise<T>,
): Promise<T> {
  return withModels(c, [cpus], agents, ([m]) => f(m.execute, m.first));
}

/**
 * A runtime on the simulated device with one model of `c` per entry of `cpus`, each on that many Q7 cores of the same
 * NeuronCore (so two of them share its Q7 Workers and can be timed in alternation); `first` is each one's first
 * execute.
 */
async function withModels<T>(
  c: Case,
  cpus: ReadonlyArray<1 | 8>,
  agents: DeviceAgentMode,
  f: (models: Array<{ execute: () => Promise<void>; first: number }>) => Promise<T>,
): Promise<T> {
  const container = createNrtContainer({ agents });
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1], logger: new MemoryLogger() });
  try {
    const models = [];
    for (const k of cpus) {
      const model = await rt.load(caseNeff(c, k));
      const { ins, outs } = await caseTensors(rt, c);
      const execute = () => model.execute(ins, outs);
      const t0 = performance.now();
      await execute();
      const first = (performance.now() - t0) * 1000;
      const out = await outs.get("out").read();
      const want = c.fn === "vector_add" ? 3 : undefined;
      if (want !== undefined && new Float32Array(out.buffer, out.byteOffset, 4)[0] !== want) {
        throw new Error(`${c.name}: wrong result`);
      }
      models.push({ execute, first });
    }
    return await f(models);
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close();
  }
}

/**
 * `c`'s kernel on `workers` bare Workers; `f` gets one run: inputs copied in, a dispatch on `cpus` of the 8 cores
 * (none with `copyOnly`), the output copied out.
 */
async function withBare<T>(
  c: Case,
  workers: number,
  f: (once: (cpus: 1 | 8, copyOnly?: boolean) => Promise<void>) => Promise<T>,
): Promise<T> {
  const bytes = c.n * 4;
  const b = await BareWorkers.start(kernel(c.lib), c.fn, (c.ins + 1) * bytes, workers);
  try {
    const t = (k: number) => ({ addr: DATA_BASE + k * bytes, bytes });
    b.describe(Array.from({ length: c.ins }, (_, k) => t(k)), [t(c.ins)]);
    const mem = new Uint8Array(b.memory.buffer);
    const host = Array.from({ length: c.ins }, () => inputData(c.n));
    const out = new Uint8Array(bytes);
    return await f(async (cpus, copyOnly = false) => {
      host.forEach((h, k) => mem.set(h, DATA_BASE + k * bytes));
      if (!copyOnly) await b.dispatch(cpus);
      out.set(mem.subarray(DATA_BASE + c.ins * bytes, DATA_BASE + (c.ins + 1) * bytes));
    });
  } finally {
    b.stop();
  }
}

/** The same kernel on bare Workers: inputs copied in, dispatch on `cpus` of 8 cores on `workers`, output copied out. */
function bare(c: Case, cpus: 1 | 8, copyOnly = false, workers = 8): Promise<number> {
  return withBare(c, workers, (once) => timeUs(() => once(cpus, copyOnly)));
}

/** `runs` timings of `fn` in µs, back to back. */
async function timesUs(fn: () => Promise<unknown>, runs: number): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    xs.push((performance.now() - t) * 1000);
  }
  return xs;
}

/** One run after an idle gap against the steady state: over the rounds, the medians of both runs and of their ratio. */
interface AfterIdle {
  readonly firstUs: number;
  readonly steadyUs: number;
  readonly ratio: number;
}

/**
 * After 300 warm-up runs of `once`, over 10 rounds: `gap` (idling or busy host work), one run, then the median of the
 * runs that follow it; the medians of both and of their ratio.
 */
async function afterGap(once: () => Promise<unknown>, gap: () => Promise<unknown> | void): Promise<AfterIdle> {
  for (let i = 0; i < 300; i++) await once();
  const firsts: number[] = [], steadies: number[] = [], ratios: number[] = [];
  for (let round = 0; round < 10; round++) {
    await gap();
    const t0 = performance.now();
    await once();
    const first = (performance.now() - t0) * 1000;
    const steady = median(await timesUs(once, STEADY));
    firsts.push(first);
    steadies.push(steady);
    ratios.push(first / steady);
  }
  return { firstUs: median(firsts), steadyUs: median(steadies), ratio: median(ratios) };
}

/** {@linkcode afterGap} after `idleMs` of idling. */
function afterIdle(once: () => Promise<unknown>, idleMs: number): Promise<AfterIdle> {
  return afterGap(once, () => new Promise((r) => setTimeout(r, idleMs)));
}

/**
 * {@linkcode afterGap} after `ms` of bare loads of `neff` on this thread (`_bare_load.ts`: gunzip, ustar walk, MD5,
 * staging into fresh shared memory), the span of host work a first run after a load of ours follows.
 */
function afterBareLoad(once: () => Promise<unknown>, neff: Uint8Array, ms: number): Promise<AfterIdle> {
  const payload = neff.subarray(readNeffHeader(neff).headerSize);
  return afterGap(once, () => busyLoading(payload, ms));
}

/** {@linkcode afterIdle} of `c` on 8 cores of bare Workers (inputs in and output out, as `bare` does). */
function bareAfterIdle(c: Case, idleMs: number): Promise<AfterIdle> {
  return withBare(c, defaultQ7Workers(), (run) => afterIdle(() => run(8), idleMs));
}

/** {@linkcode afterBareLoad} of `c` on 8 cores of bare Workers. */
function bareAfterLoad(c: Case, neff: Uint8Array, ms: number): Promise<AfterIdle> {
  return withBare(c, defaultQ7Workers(), (run) => afterBareLoad(() => run(8), neff, ms));
}

/** A first run after a load against the steady state: the medians over the rounds. */
interface AfterLoad {
  readonly loadMs: number;
  readonly firstUs: number;
  readonly steadyUs: number;
  readonly ratio: number;
}

/**
 * Over 11 rounds (round 0 only warms the load's and the first run's own code): `load`, one timed `once`, the median of
 * STEADY more, `unload`; paired per round, so both come from the same moment of this shared machine.
 */
async function afterLoad<T>(
  load: () => Promise<T>,
  once: (x: T) => Promise<unknown>,
  unload: (x: T) => Promise<unknown>,
): Promise<AfterLoad> {
  const first: number[] = [], steady: number[] = [], ratio: number[] = [], loadMs: number[] = [];
  for (let round = 0; round < 11; round++) {
    let t0 = performance.now();
    const x = await load();
    const ms = performance.now() - t0;
    t0 = performance.now();
    await once(x);
    const us = (performance.now() - t0) * 1000;
    const s = median(await timesUs(() => once(x), STEADY));
    await unload(x);
    if (round === 0) continue;
    loadMs.push(ms);
    first.push(us);
    steady.push(s);
    ratio.push(us / s);
  }
  return { loadMs: median(loadMs), firstUs: median(first), steadyUs: median(steady), ratio: median(ratio) };
}

/**
 * A row of a first-run-after-load table: ours, and two limits: after an idle gap as long as the load, and after as long
 * of bare loads on the host thread; goal ≤ 2.
 */
function afterLoadRow(
  name: string,
  first: string,
  ours: AfterLoad,
  idle: AfterIdle,
  loaded: AfterIdle,
): Record<string, unknown> {
  return {
    case: name,
    load_ms: +ours.loadMs.toFixed(2),
    [first]: Math.round(ours.firstUs),
    steady_us: Math.round(ours.steadyUs),
    ratio: +ours.ratio.toFixed(2),
    bare_first_us: Math.round(idle.firstUs),
    bare_steady_us: Math.round(idle.steadyUs),
    bare_after_idle_ratio: +idle.ratio.toFixed(2),
    bare_after_load_first_us: Math.round(loaded.firstUs),
    bare_after_load_steady_us: Math.round(loaded.steadyUs),
    bare_after_load_ratio: +loaded.ratio.toFixed(2),
    ratio_over_bare_after_load: +(ours.ratio / loaded.ratio).toFixed(2),
    goal: 2,
  };
}

// 1. execute vs the limit, for each Q7 Worker count.
const vsLimit: Array<Record<string, unknown>> = [];
for (const c of CASES) {
  const bareUs = await bare(c, 8);
  const copyUs = await bare(c, 8, true);
  for (const workers of Q7_WORKERS) {
    setQ7Workers(workers);
    const runtimeUs = await withModel(c, 8, "device", (execute) => timeUs(execute));
    const sameUs = workers === 8 ? bareUs : await bare(c, 8, false, workers);
    vsLimit.push({
      case: c.name,
      q7_workers: workers,
      execute_us: Math.round(runtimeUs),
      bare_workers_us: Math.round(bareUs),
      bare_same_workers_us: Math.round(sameUs),
      plain_copy_us: Math.round(copyUs),
      ratio: +(runtimeUs / bareUs).toFixed(2),
    });
  }
}
emit("exec", `Model.execute vs the raw kernel on 8 bare Workers + copies, median of ${RUNS} runs`, vsLimit);

// 2. SPMD: 8 cores against 1, for each Q7 Worker count.
const va = CASES[1];
const spmd = [];
for (const workers of Q7_WORKERS) {
  setQ7Workers(workers);
  for (const side of ["runtime", "bare Workers"] as const) {
    // The 1-core and the 8-core execute in alternation, on the same Workers.
    const [one, eight] = side === "runtime"
      ? await withModels(va, [1, 8], "device", ([m1, m8]) => alternatingUs(m1.execute, m8.execute))
      : await withBare(va, workers, (run) => alternatingUs(() => run(1), () => run(8)));
    spmd.push({
      side,
      q7_workers: workers,
      one_core_us: Math.round(one),
      eight_cores_us: Math.round(eight),
      speedup: +(one / eight).toFixed(2),
      goal: +(0.8 * Math.min(8, CPUS)).toFixed(2),
    });
  }
}
emit("exec", `SPMD: vector_add 1 MiB on 8 Q7 cores vs 1 (${CPUS} CPUs), median of ${RUNS} runs`, spmd);
setQ7Workers(Q7_WORKERS[0]);

// 3. First execute after load vs the steady state, in a running runtime (as a server loads a model). Paired: each
// round loads the model, times its first execute, then the median of STEADY executes of the same model, so both
// come from the same moment of this shared machine. The limits beside it, with nothing of ours: bare Workers' first
// dispatch against their own steady median, after they were left idle as long as the load took (what waking threads
// that slept costs on this machine), and after the host thread spent as long on bare loads of the same NEFF (what
// the span of host work a load is costs the next run: a load does not leave the machine idle).
const STEADY = 20;
const firsts = [];
{
  const container = createNrtContainer();
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1], logger: new MemoryLogger() });
  try {
    for (const c of CASES) {
      const neff = caseNeff(c);
      const { ins, outs } = await caseTensors(rt, c);
      const ours = await afterLoad(
        () => rt.load(neff),
        (model) => model.execute(ins, outs),
        (model) => model.unload(),
      );
      const idle = await bareAfterIdle(c, ours.loadMs);
      const loaded = await bareAfterLoad(c, neff, ours.loadMs);
      firsts.push(afterLoadRow(c.name, "first_execute_us", ours, idle, loaded));
    }
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close();
  }
}
emit(
  "exec",
  `First execute after a load vs the steady median of the same model (median of 10 rounds); bare_*: 8 bare ` +
    `Workers' first dispatch after an idle gap as long as a load, their steady median, and the ratio of the two; ` +
    `bare_after_load_*: the same after as long of bare loads of the same NEFF on the host thread`,
  firsts,
);

// 3b. An execute of a loaded model after it sat idle (sporadic traffic), against its steady median, paired per round;
// beside it bare Workers after the same idle gap.
const IDLE_MS = 20;
const afterIdleRows = [];
for (const c of CASES) {
  const ours = await withModel(c, 8, "device", (execute) => afterIdle(execute, IDLE_MS));
  const limit = await bareAfterIdle(c, IDLE_MS);
  afterIdleRows.push({
    case: c.name,
    idle_ms: IDLE_MS,
    first_execute_us: Math.round(ours.firstUs),
    steady_us: Math.round(ours.steadyUs),
    ratio: +ours.ratio.toFixed(2),
    bare_first_us: Math.round(limit.firstUs),
    bare_steady_us: Math.round(limit.steadyUs),
    bare_after_idle_ratio: +limit.ratio.toFixed(2),
  });
}
emit(
  "exec",
  `Execute after ${IDLE_MS} ms idle ÷ the steady median (median of 10 rounds), beside bare Workers`,
  afterIdleRows,
);

// 3c. The first request after a load as `nrt serve` answers it: the model repository loads the model and warms each
// instance (one execute on zeroed inputs, as Triton's model warm-up does) before the model is READY; then one
// `/infer`, against the steady median of the requests after it, paired per round (in one process, no socket). The
// limits beside it: a bare Hono route with relu on a bare Worker device (nothing of ours), its first request against
// its own steady median after an idle gap as long as the load, and after as long of bare loads of the same NEFF.
const restFirst = [];
{
  const container = createNrtContainer();
  const runtime = await Runtime.init({ ...nrtPlugins(container), logger: new MemoryLogger() });
  const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
  const relu = oneOpNeff("relu", "relu", [f32("x")], [f32("y")]);
  const repository = new ModelRepository({ runtime, files: filesFromMap({ "relu.neff": relu }) });
  const data = [1, -1, 2, -2, 3, -3, 4, -4];
  const body = JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data }] });
  const want = JSON.stringify(data.map((v) => Math.max(v, 0)));
  /** One `/infer` of `fetch`, its answer checked; resolves with the answer. */
  const infer = async (fetch: (r: Request) => Response | Promise<Response>) => {
    const res = await fetch(new Request("http://127.0.0.1/v2/models/relu/infer", { method: "POST", body }));
    const answer = await res.json() as { outputs?: Array<{ data?: unknown }> };
    if (res.status !== 200 || JSON.stringify(answer.outputs?.[0]?.data) !== want) {
      throw new Error(`relu /infer: wrong answer (${res.status}): ${JSON.stringify(answer)}`);
    }
    return answer;
  };
  try {
    await repository.scan();
    const app = createInferenceApp({ runtime, repository });
    let answer: unknown;
    const ours = await afterLoad(
      () => repository.load("relu"),
      async () => answer = await infer(app.fetch),
      () => repository.unload("relu"),
    );
    const device = new BareDevice();
    let idle: AfterIdle, loaded: AfterIdle;
    try {
      const route = bareDeviceRoute(answer as { outputs: Array<Record<string, unknown>> }, device);
      idle = await afterIdle(() => infer(route.fetch), ours.loadMs);
      loaded = await afterBareLoad(() => infer(route.fetch), relu, ours.loadMs);
    } finally {
      device.close();
    }
    restFirst.push(afterLoadRow("relu FP32[8] /infer", "first_request_us", ours, idle, loaded));
  } finally {
    await repository.close();
    await runtime.close();
    await container.resolve(PortalToken).close();
  }
}
emit(
  "exec",
  `First REST request after a load (the repository warms each instance before READY, as nrt serve does) vs the ` +
    `steady median (median of 10 rounds); bare_*: a bare Hono route with relu on a bare Worker device, its first ` +
    `request after an idle gap as long as the load; bare_after_load_*: after as long of bare loads of the NEFF`,
  restFirst,
);

// 4. Where the device runs.
const placements = [];
for (const agents of ["device", "core", "inline"] as const) {
  placements.push({
    agents,
    noop_execute_us: Math.round(await withModel(CASES[0], 8, agents, (execute) => timeUs(execute))),
  });
}
const bareNoop = await bare(CASES[0], 8);
for (const p of placements) Object.assign(p, { ratio_to_bare: +(p.noop_execute_us / bareNoop).toFixed(2) });
emit("exec", `No-op execute by device placement (bare 8-Worker wake and join: ${Math.round(bareNoop)} µs)`, placements);
