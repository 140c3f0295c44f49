/**
 * `bench/guard.ts`: what the Q7 loop guard (`packages/device-sim/q7/_loop_guard.ts`) costs a healthy kernel, and
 * how fast it stops a spinning one, measured in one process run.
 *
 * - Cost: `kernels/wasm/vector_add.wasm` at 1 MiB per tensor (262144 float32 elements), one core (the main thread
 *   over a shared memory laid out as the Q7 one), in three builds: as committed (raw, nothing of ours), guarded by
 *   `guardLoops` (a countdown polls the kill flag every GUARD_INTERVAL iterations), and guarded the way it was
 *   before the countdown (`interval: 1`: an atomic load at every loop header). The calls are interleaved; each
 *   build's figure is the median of RUNS calls, printed as a ratio to raw.
 * - Stop: `kernels/wasm/faults.wasm` `spin` in a Worker under each guard; the time from setting the kill flag to
 *   the Worker's report of the trap (median of STOPS runs).
 *
 * Run: `bun bench/guard.ts` or `deno run -A bench/guard.ts` (`RUNS=1000 STOPS=9` to change the sample counts).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { DESC, DESC_BYTES, Dtype, KILL_FLAG_ADDR, SBUF_BASE } from "../packages/device-sim/q7/_abi.ts";
import { GUARD_INTERVAL, guardLoops } from "../packages/device-sim/q7/_loop_guard.ts";
import { emit, median, RUNS } from "./_timing.ts";

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
const STOPS = Number(env.STOPS ?? 5);
const kernel = (n: string) => new Uint8Array(readFileSync(new URL(`../kernels/wasm/${n}.wasm`, import.meta.url)));

const N = (1 << 20) / 4;
const BYTES = N * 4;
const PAGES = (SBUF_BASE + 3 * BYTES) / 0x10000;
const DESCS = SBUF_BASE - 0x1000; // the end of the control area, far from the kill flag

const BUILDS: { name: string; wasm: (raw: Uint8Array) => Uint8Array }[] = [
  { name: "raw", wasm: (raw) => raw },
  { name: `countdown (interval ${GUARD_INTERVAL})`, wasm: (raw) => guardLoops(raw, KILL_FLAG_ADDR) },
  { name: "every header (before)", wasm: (raw) => guardLoops(raw, KILL_FLAG_ADDR, { interval: 1 }) },
];

// ---- Cost: vector_add 1 MiB ---------------------------------------------------------------------------------

const memory = new WebAssembly.Memory({ initial: PAGES, maximum: PAGES, shared: true });
const view = new DataView(memory.buffer);
for (let k = 0; k < 3; k++) {
  const at = DESCS + k * DESC_BYTES;
  view.setUint32(at + DESC.addr, SBUF_BASE + k * BYTES, true);
  view.setUint32(at + DESC.bytes, BYTES, true);
  view.setUint32(at + DESC.dtype, Dtype.float32, true);
  view.setUint32(at + DESC.rank, 1, true);
  view.setUint32(at + DESC.dims, N, true);
}
new Float32Array(memory.buffer, SBUF_BASE, N).forEach((_, i, a) => (a[i] = i * 0.5));
new Float32Array(memory.buffer, SBUF_BASE + BYTES, N).fill(1.25);
const out = new Float32Array(memory.buffer, SBUF_BASE + 2 * BYTES, N);

let inputs = 0;
const imports = {
  env: {
    memory,
    get_cpu_id: () => 0,
    customop_total_cpus: () => 1,
    customop_next_tensor: () => (inputs < 2 ? DESCS + DESC_BYTES * inputs++ : 0),
    customop_return_tensor: () => DESCS + 2 * DESC_BYTES,
    customop_cleanup: () => {},
  },
};
const calls = BUILDS.map((b) => {
  const module = new WebAssembly.Module(b.wasm(kernel("vector_add")) as Uint8Array<ArrayBuffer>);
  const fn = new WebAssembly.Instance(module, imports).exports.vector_add as () => void;
  return () => {
    inputs = 0;
    fn();
  };
});

const expected = Float32Array.from({ length: N }, (_, i) => Math.fround(i * 0.5 + 1.25));
for (const [k, call] of calls.entries()) {
  out.fill(Number.NaN);
  call();
  if (!out.every((v, i) => v === expected[i])) {
    throw new Error(`Cannot bench ${BUILDS[k].name}: vector_add returned a wrong sum`);
  }
}
for (let i = 0; i < 300; i++) for (const call of calls) call(); // every build reaches its optimizing tier
const samples: number[][] = BUILDS.map(() => []);
for (let i = 0; i < RUNS; i++) {
  calls.forEach((call, k) => {
    const t = performance.now();
    call();
    samples[k].push(performance.now() - t);
  });
}
const us = samples.map((xs) => median(xs) * 1000);

// ---- Stop: faults.wasm spin in a Worker ----------------------------------------------------------------------

const WORKER = `self.onmessage = (e) => {
  const { module, memory } = e.data;
  const env = { memory };
  for (const i of WebAssembly.Module.imports(module)) if (i.kind === "function") env[i.name] = () => 0;
  const spin = new WebAssembly.Instance(module, { env }).exports.spin;
  self.postMessage("spinning");
  try { spin(); self.postMessage("returned"); } catch { self.postMessage("trapped"); }
};`;

/** Milliseconds from setting the kill flag to the Worker's "trapped", with `spin` guarded by `wasm`. */
async function stopMs(wasm: Uint8Array): Promise<number> {
  const flagMemory = new WebAssembly.Memory({ initial: PAGES, maximum: PAGES, shared: true });
  const url = URL.createObjectURL(new Blob([WORKER], { type: "application/javascript" }));
  const worker = new Worker(url, { type: "module" });
  try {
    return await new Promise<number>((resolve, reject) => {
      let flagged = 0;
      const timer = setTimeout(() => reject(new Error("Cannot bench the stop: spin did not trap within 10 s")), 10_000);
      worker.onmessage = (e: MessageEvent) => {
        if (e.data === "spinning") {
          flagged = performance.now();
          Atomics.store(new Int32Array(flagMemory.buffer), KILL_FLAG_ADDR / 4, 1);
          return;
        }
        clearTimeout(timer);
        if (e.data === "trapped") resolve(performance.now() - flagged);
        else reject(new Error(`Cannot bench the stop: spin ${e.data}`));
      };
      worker.postMessage({ module: new WebAssembly.Module(wasm as Uint8Array<ArrayBuffer>), memory: flagMemory });
    });
  } finally {
    worker.terminate();
    URL.revokeObjectURL(url);
  }
}

const stops: number[] = [];
for (const b of BUILDS.slice(1)) {
  const xs: number[] = [];
  for (let i = 0; i < STOPS; i++) xs.push(await stopMs(b.wasm(kernel("faults"))));
  stops.push(median(xs));
}

emit(
  "guard",
  `Loop guard: vector_add 1 MiB (float32, ${N} elements) on one core (main thread, shared memory), ` +
    `median of ${RUNS} interleaved calls; spin stop time median of ${STOPS}`,
  BUILDS.map((b, k) => ({
    build: b.name,
    vector_add_us: Math.round(us[k]),
    ratio_to_raw: +(us[k] / us[0]).toFixed(2),
    spin_stop_ms: k === 0 ? "never" : +stops[k - 1].toFixed(2),
  })),
);
