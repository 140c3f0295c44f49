import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Dtype, IMAGE_BYTES, KILL_FLAG_ADDR, MAILBOX, MB_USERS, SBUF_BASE, STDIO_ENTRIES } from "./_abi.ts";
import { guardLoops } from "./_loop_guard.ts";
import { type SpawnedWorker, spawnHere } from "../worker_spawn.ts";
import {
  DEFAULT_Q7_MAX_LIBRARIES,
  defaultQ7Workers,
  type DispatchResult,
  Q7_WORKERS_ENV,
  Q7Cluster,
  type Q7MemorySlot,
  type TensorDesc,
} from "./q7_cluster.ts";

const SBUF_BYTES = 28 << 20; // Cayman
const ARCH_ID = 0xca7a0003;
const LIBRARIES = ["cpu_map", "faults", "matmul", "noop", "reduce_sum", "relu", "softmax", "vector_add"];

function kernel(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(`../../../kernels/wasm/${name}.wasm`, import.meta.url)));
}

/** A seeded PRNG (mulberry32), so every run sees the same "random" inputs. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomF32(n: number, seed: number, scale = 10): Float32Array {
  const next = random(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

/** Places tensors one after another in the SBUF window, 64-byte aligned. */
class SbufArena {
  #next = SBUF_BASE;
  constructor(readonly cluster: Q7Cluster) {}
  f32(dims: number[], data?: Float32Array): { desc: TensorDesc; view: Float32Array } {
    const n = dims.reduce((a, b) => a * b, 1);
    const desc = this.#alloc(n * 4, Dtype.float32, dims);
    const view = new Float32Array(this.cluster.memory.buffer, desc.addr, n);
    if (data) view.set(data);
    else view.fill(Number.NaN); // an output a kernel forgets to write is caught
    return { desc, view };
  }
  i32(dims: number[]): { desc: TensorDesc; view: Int32Array } {
    const n = dims.reduce((a, b) => a * b, 1);
    const desc = this.#alloc(n * 4, Dtype.int32, dims);
    const view = new Int32Array(this.cluster.memory.buffer, desc.addr, n);
    view.fill(-1);
    return { desc, view };
  }
  #alloc(bytes: number, dtype: number, dims: number[]): TensorDesc {
    const addr = this.#next;
    this.#next += Math.ceil(bytes / 64) * 64;
    if (this.#next > SBUF_BASE + SBUF_BYTES) throw new RangeError("test arena is full");
    return { addr, bytes, dtype, dims };
  }
}

function expectAllOk(result: DispatchResult, totalCpus: number): void {
  expect(result.cores.map((c) => [c.cpu, c.ran, c.status, c.committed])).toEqual(
    Array.from({ length: 8 }, (_, cpu) => [cpu, cpu < totalCpus, "ok", cpu < totalCpus]),
  );
}

/** Compares element-wise within `rel` relative error (plus a tiny absolute floor); returns the first mismatch. */
function firstMismatch(actual: Float32Array, expected: Float32Array, rel: number): string | undefined {
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    if (!(Math.abs(a - e) <= rel * Math.abs(e) + 1e-30)) return `element ${i}: got ${a}, expected ${e}`;
  }
  return undefined;
}

/** Element counts from 1 element to 4 MiB of float32, with sizes that do not split evenly over 8 cores. */
const SIZES = [1, 7, 8, 9, 1000, 65_537, 1 << 20];

describe("Q7Cluster", () => {
  let cluster: Q7Cluster;
  let firmware: { apiLevel?: number; arch?: number };

  beforeAll(async () => {
    cluster = await Q7Cluster.create({ sbufBytes: SBUF_BYTES });
    const dram = new Uint8Array(64);
    new DataView(dram.buffer).setUint32(0, ARCH_ID, true);
    firmware = await cluster.boot({ iram: kernel("stock_pool"), dram });
    for (const name of LIBRARIES) await cluster.prepare(name, kernel(name));
  });

  afterAll(() => cluster?.terminate());

  test("Q7Cluster.create() sizes the shared memory to 0x200000 + sbufBytes", () => {
    expect(cluster.memory.buffer.byteLength).toBe(SBUF_BASE + SBUF_BYTES);
    expect(cluster.memory.buffer instanceof SharedArrayBuffer).toBe(true);
  });

  test("Q7Cluster.create() rejects an SBUF size that is not a multiple of 64 KiB", async () => {
    await expect(Q7Cluster.create({ sbufBytes: 1000 })).rejects.toThrow(RangeError);
  });

  test("Q7Cluster.boot() copies the DRAM image to address 0 and reports the firmware's api level and arch", async () => {
    expect(firmware).toEqual({ apiLevel: 3, arch: ARCH_ID });
    expect(new DataView(cluster.memory.buffer).getUint32(0, true)).toBe(ARCH_ID);
    const result = await cluster.dispatch({ key: "", fn: "noop", totalCpus: 8, args: { inputs: [], outputs: [] } });
    expectAllOk(result, 8);
  });

  test("Q7Cluster.dispatch() runs vector_add on all 8 cores", async () => {
    for (const n of SIZES) {
      const arena = new SbufArena(cluster);
      const a = arena.f32([n], randomF32(n, n));
      const b = arena.f32([n], randomF32(n, n + 1));
      const c = arena.f32([n]);
      const result = await cluster.dispatch({
        key: "vector_add",
        fn: "vector_add",
        totalCpus: 8,
        args: { inputs: [a.desc, b.desc], outputs: [c.desc] },
      });
      expectAllOk(result, 8);
      const expected = new Float32Array(n);
      for (let i = 0; i < n; i++) expected[i] = a.view[i] + b.view[i];
      expect({ n, mismatch: firstMismatch(c.view, expected, 0) }).toEqual({ n, mismatch: undefined });
    }
  });

  test("Q7Cluster.dispatch() runs relu on all 8 cores", async () => {
    for (const n of SIZES) {
      const arena = new SbufArena(cluster);
      const x = arena.f32([n], randomF32(n, 7 * n));
      const y = arena.f32([n]);
      expectAllOk(
        await cluster.dispatch({
          key: "relu",
          fn: "relu",
          totalCpus: 8,
          args: { inputs: [x.desc], outputs: [y.desc] },
        }),
        8,
      );
      const expected = x.view.map((v) => Math.max(v, 0));
      expect({ n, mismatch: firstMismatch(y.view, expected, 0) }).toEqual({ n, mismatch: undefined });
    }
  });

  test("Q7Cluster.dispatch() runs softmax_rows on all 8 cores, partitioned by rows", async () => {
    for (const [rows, cols] of [[1, 1], [1, 9], [3, 5], [17, 33], [1024, 1024]]) {
      const arena = new SbufArena(cluster);
      const x = arena.f32([rows, cols], randomF32(rows * cols, rows * 31 + cols));
      const y = arena.f32([rows, cols]);
      expectAllOk(
        await cluster.dispatch({
          key: "softmax",
          fn: "softmax_rows",
          totalCpus: 8,
          args: { inputs: [x.desc], outputs: [y.desc] },
        }),
        8,
      );
      const expected = new Float32Array(rows * cols);
      for (let r = 0; r < rows; r++) {
        const row = x.view.subarray(r * cols, (r + 1) * cols);
        const max = Math.max(...row);
        const sum = row.reduce((s, v) => s + Math.exp(v - max), 0);
        for (let j = 0; j < cols; j++) expected[r * cols + j] = Math.exp(row[j] - max) / sum;
      }
      expect({ rows, cols, mismatch: firstMismatch(y.view, expected, 1e-5) }).toEqual({
        rows,
        cols,
        mismatch: undefined,
      });
    }
  });

  test("Q7Cluster.dispatch() runs matmul on all 8 cores, partitioned by rows of C", async () => {
    for (const [m, k, n] of [[1, 1, 1], [5, 7, 3], [33, 17, 9], [1024, 1024, 16]]) {
      const arena = new SbufArena(cluster);
      const a = arena.f32([m, k], randomF32(m * k, m + k, 1));
      const b = arena.f32([k, n], randomF32(k * n, k + n, 1));
      const c = arena.f32([m, n]);
      expectAllOk(
        await cluster.dispatch({
          key: "matmul",
          fn: "matmul",
          totalCpus: 8,
          args: { inputs: [a.desc, b.desc], outputs: [c.desc] },
        }),
        8,
      );
      const expected = new Float32Array(m * n);
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let acc = 0;
          for (let t = 0; t < k; t++) acc += a.view[i * k + t] * b.view[t * n + j];
          expected[i * n + j] = acc;
        }
      }
      expect({ m, k, n, mismatch: firstMismatch(c.view, expected, 1e-5) }).toEqual({ m, k, n, mismatch: undefined });
    }
  });

  test("Q7Cluster.dispatch() gives core c the elements [c·ceil(n/8), min(n, (c+1)·ceil(n/8))) (cpu_map)", async () => {
    for (const n of [1, 7, 8, 9, 17, 1000, 65_537]) {
      const arena = new SbufArena(cluster);
      const x = arena.i32([n]); // any dtype: only the element count matters
      const y = arena.i32([n]);
      expectAllOk(
        await cluster.dispatch({
          key: "cpu_map",
          fn: "cpu_map",
          totalCpus: 8,
          args: { inputs: [x.desc], outputs: [y.desc] },
        }),
        8,
      );
      const chunk = Math.ceil(n / 8);
      const expected = Int32Array.from({ length: n }, (_, i) => Math.floor(i / chunk));
      expect({ n, owners: Array.from(y.view) }).toEqual({ n, owners: Array.from(expected) });
    }
  });

  test("Q7Cluster.dispatch() with totalCpus 1 runs core 0 only (cpu_map)", async () => {
    const arena = new SbufArena(cluster);
    const x = arena.i32([3, 5]);
    const y = arena.i32([15]);
    expectAllOk(
      await cluster.dispatch({
        key: "cpu_map",
        fn: "cpu_map",
        totalCpus: 1,
        args: { inputs: [x.desc], outputs: [y.desc] },
      }),
      1,
    );
    expect(Array.from(y.view)).toEqual(new Array(15).fill(0));
  });

  test("Q7Cluster.dispatch() runs sum_all (a total_cpus = 1 library) on core 0 only", async () => {
    for (const n of [1, 1000, 1 << 20]) {
      const arena = new SbufArena(cluster);
      const x = arena.f32([n], randomF32(n, 99 + n));
      const y = arena.f32([1]);
      const result = await cluster.dispatch({
        key: "reduce_sum",
        fn: "sum_all",
        totalCpus: 1,
        args: { inputs: [x.desc], outputs: [y.desc] },
      });
      expectAllOk(result, 1);
      expect(result.cores[0].elapsedNs).toBeGreaterThan(0);
      let sum = 0;
      for (let i = 0; i < n; i++) sum += x.view[i];
      expect(y.view[0]).toBe(Math.fround(sum));
    }
  });

  test('Q7Cluster.dispatch() reports a wasm trap as status "trap" on every core', async () => {
    const result = await cluster.dispatch({
      key: "faults",
      fn: "trap",
      totalCpus: 8,
      args: { inputs: [], outputs: [] },
    });
    expect(result.cores.map((c) => [c.status, c.committed])).toEqual(new Array(8).fill(["trap", false]));
    expect(result.cores[0].message).toMatch(/unreachable/i);
  });

  test('Q7Cluster.dispatch() reports an out-of-bounds load as status "oob"', async () => {
    const result = await cluster.dispatch({
      key: "faults",
      fn: "oob",
      totalCpus: 8,
      args: { inputs: [], outputs: [] },
    });
    expect(result.cores.map((c) => [c.status, c.committed])).toEqual(new Array(8).fill(["oob", false]));
  });

  test('Q7Cluster.dispatch() reports a dram_addr_to_soc_addr aperture fault as status "oob"', async () => {
    const result = await cluster.dispatch({
      key: "faults",
      fn: "bad_dram",
      totalCpus: 1,
      args: { inputs: [], outputs: [] },
    });
    expect([result.cores[0].status, result.cores[0].committed]).toEqual(["oob", false]);
    expect(result.cores[0].message).toContain("0x12345");
    expect(result.cores.slice(1).every((c) => !c.ran)).toBe(true);
  });

  test('Q7Cluster.dispatch() reports a function the library does not export as "missing-function"', async () => {
    const result = await cluster.dispatch({ key: "relu", fn: "gelu", totalCpus: 8, args: { inputs: [], outputs: [] } });
    expect(result.cores.map((c) => c.status)).toEqual(new Array(8).fill("missing-function"));
  });

  test("Q7Cluster.dispatch() still runs kernels after faults", async () => {
    const arena = new SbufArena(cluster);
    const x = arena.f32([100], randomF32(100, 5));
    const y = arena.f32([100]);
    expectAllOk(
      await cluster.dispatch({
        key: "relu",
        fn: "relu",
        totalCpus: 8,
        args: { inputs: [x.desc], outputs: [y.desc] },
      }),
      8,
    );
    expect(firstMismatch(y.view, x.view.map((v) => Math.max(v, 0)), 0)).toBeUndefined();
  });

  test("Q7Cluster.dispatch() rejects a tensor outside the SBUF window and an unprepared library", async () => {
    const desc = { addr: 0x1000, bytes: 16, dtype: Dtype.float32, dims: [4] };
    await expect(cluster.dispatch({ key: "relu", fn: "relu", totalCpus: 8, args: { inputs: [desc], outputs: [] } }))
      .rejects.toThrow(RangeError);
    await expect(cluster.dispatch({ key: "nope", fn: "x", totalCpus: 8, args: { inputs: [], outputs: [] } }))
      .rejects.toThrow('library "nope" is not prepared');
    // The cluster is not left busy by a rejected dispatch.
    expectAllOk(
      await cluster.dispatch({ key: "noop", fn: "noop", totalCpus: 8, args: { inputs: [], outputs: [] } }),
      8,
    );
  });

  test("Q7Cluster.drainStdio() returns printf lines in order with their core and stream", async () => {
    cluster.drainStdio();
    const one = await cluster.dispatch({
      key: "faults",
      fn: "printf",
      totalCpus: 1,
      args: { inputs: [], outputs: [], ints: [12n] },
    });
    expectAllOk(one, 1);
    expect(cluster.drainStdio()).toEqual(
      Array.from({ length: 12 }, (_, k) => ({ cpu: 0, stream: 1, text: `line ${k} from core 0\n` })),
    );
    expectAllOk(
      await cluster.dispatch({
        key: "faults",
        fn: "printf",
        totalCpus: 8,
        args: { inputs: [], outputs: [], ints: [5n] },
      }),
      8,
    );
    const drained = cluster.drainStdio();
    expect(drained.length).toBe(40);
    for (let cpu = 0; cpu < 8; cpu++) {
      expect(drained.filter((e) => e.cpu === cpu).map((e) => e.text)).toEqual(
        Array.from({ length: 5 }, (_, k) => `line ${k} from core ${cpu}\n`),
      );
    }
    expect(cluster.drainStdio()).toEqual([]);
  });

  test("Q7Cluster.drainStdio() keeps the newest entries when the ring overruns", async () => {
    cluster.drainStdio();
    const before = cluster.stdioDropped;
    const lines = STDIO_ENTRIES + 100;
    await cluster.dispatch({
      key: "faults",
      fn: "printf",
      totalCpus: 1,
      args: { inputs: [], outputs: [], ints: [BigInt(lines)] },
    });
    const drained = cluster.drainStdio();
    expect(drained.length).toBe(STDIO_ENTRIES);
    expect(cluster.stdioDropped - before).toBe(100);
    expect(drained[0].text).toBe("line 100 from core 0\n");
    expect(drained[drained.length - 1].text).toBe(`line ${lines - 1} from core 0\n`);
  });
});

describe("Q7Cluster hang", () => {
  for (const workers of [undefined, 1, 8]) {
    const label = workers === undefined ? "" : ` (${workers} Worker${workers > 1 ? "s" : ""})`;
    test(
      `Q7Cluster.terminate() stops cores spinning in a kernel after the caller aborts the dispatch${label}`,
      async () => {
        await spinThenTerminate(workers);
      },
      10_000,
    );
  }
});

/** Aborts a dispatch of `spin` on all 8 cores, terminates the cluster and starts a fresh one. */
async function spinThenTerminate(workers: number | undefined): Promise<void> {
  const cluster = await Q7Cluster.create({ sbufBytes: 1 << 20, workers });
  try {
    await cluster.prepare("faults", kernel("faults"));
    const controller = new AbortController();
    const pending = cluster.dispatch(
      { key: "faults", fn: "spin", totalCpus: 8, args: { inputs: [], outputs: [] } },
      controller.signal,
    );
    // The one real-clock wait in this suite: a spinning kernel never completes, so give up after 100 ms.
    const timer = setTimeout(() => controller.abort(new Error("hung")), 100);
    await expect(pending).rejects.toThrow("hung");
    clearTimeout(timer);
    await expect(cluster.dispatch({ key: "faults", fn: "trap", totalCpus: 8, args: { inputs: [], outputs: [] } }))
      .rejects.toThrow("busy");
  } finally {
    cluster.terminate();
  }
  await expect(cluster.dispatch({ key: "faults", fn: "trap", totalCpus: 8, args: { inputs: [], outputs: [] } }))
    .rejects.toThrow("terminated");
  // The process is fine: a fresh cluster starts and runs a kernel.
  const fresh = await Q7Cluster.create({ sbufBytes: 1 << 20 });
  try {
    await fresh.prepare("noop", kernel("noop"));
    expectAllOk(
      await fresh.dispatch({ key: "noop", fn: "noop", totalCpus: 8, args: { inputs: [], outputs: [] } }),
      8,
    );
  } finally {
    fresh.terminate();
  }
}

/** Unsigned LEB128. */
function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 of an i32. */
function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) return [...out, byte];
    out.push(byte | 0x80);
  }
}

const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
const name = (text: string) => vec([...new TextEncoder().encode(text)].map((b) => [b]));

/**
 * A library that tells the cores apart, assembled here (the reference kernels treat every core alike). Imports the
 * shared memory, get_cpu_id, customop_cleanup and dram_addr_to_soc_addr; one mutable i32 global; exports:
 * - `per_core`: core 1 executes `unreachable`, core 2 loads from 0xFFFFFFF0, core 5 passes 0x12345 to
 *   dram_addr_to_soc_addr, core 6 returns without its commit fence; the others commit.
 * - `bump`: increments the global and stores it at SBUF_BASE + 4·cpu, then commits.
 */
function coreTellingLibrary(): Uint8Array {
  const ID = 0, CLEANUP = 1, SOC = 2; // imported function indexes
  const ifCpu = (cpu: number, body: number[]) => [0x10, ID, 0x41, ...sleb(cpu), 0x46, 0x04, 0x40, ...body, 0x0b];
  const perCore = [
    ...ifCpu(1, [0x00]), // unreachable
    ...ifCpu(2, [0x41, ...sleb(-16), 0x28, 0x02, 0x00, 0x1a]), // i32.load (i32.const 0xFFFFFFF0); drop
    ...ifCpu(5, [0x41, ...sleb(0x12345), 0x10, SOC, 0x1a]),
    ...ifCpu(6, [0x0f]), // return
    0x10,
    CLEANUP,
    0x0b,
  ];
  const bump = [
    ...[0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00], // global.set 0 (global.get 0 + 1)
    ...[0x41, ...sleb(SBUF_BASE), 0x10, ID, 0x41, 0x02, 0x74, 0x6a], // SBUF_BASE + (cpu << 2)
    ...[0x23, 0x00, 0x36, 0x02, 0x00], // i32.store (global.get 0)
    ...[0x10, CLEANUP, 0x0b],
  ];
  const code = (body: number[]) => [...uleb(body.length + 1), 0x00, ...body];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, vec([[0x60, 0x00, 0x01, 0x7f], [0x60, 0x00, 0x00], [0x60, 0x01, 0x7f, 0x01, 0x7f]])),
    ...section(
      2,
      vec([
        [...name("env"), ...name("memory"), 0x02, 0x03, 0x01, ...uleb(65536)],
        [...name("env"), ...name("get_cpu_id"), 0x00, 0x00],
        [...name("env"), ...name("customop_cleanup"), 0x00, 0x01],
        [...name("env"), ...name("dram_addr_to_soc_addr"), 0x00, 0x02],
      ]),
    ),
    ...section(3, vec([[0x01], [0x01]])),
    ...section(6, vec([[0x7f, 0x01, 0x41, 0x00, 0x0b]])),
    ...section(7, vec([[...name("per_core"), 0x00, 3], [...name("bump"), 0x00, 4]])),
    ...section(10, vec([code(perCore), code(bump)])),
  ]);
}

/** What a dispatch reports, without the timings. */
const outcome = (r: DispatchResult) =>
  r.cores.map(({ cpu, ran, status, message, committed }) => ({ cpu, ran, status, message, committed }));

describe("Q7Cluster workers", () => {
  const NONE = { inputs: [], outputs: [] };

  /** Runs the same ops on a cluster of `workers` Workers and returns everything the host can observe. */
  async function observe(workers: number): Promise<unknown> {
    const cluster = await Q7Cluster.create({ sbufBytes: 4 << 20, workers });
    try {
      expect(cluster.workers).toBe(workers);
      const dram = new Uint8Array(64);
      new DataView(dram.buffer).setUint32(0, ARCH_ID, true);
      const firmware = await cluster.boot({ iram: kernel("stock_pool"), dram });
      for (const name of ["cpu_map", "faults", "reduce_sum", "vector_add"]) await cluster.prepare(name, kernel(name));
      await cluster.prepare("cores", coreTellingLibrary());
      const seen: Record<string, unknown> = { firmware };
      seen.noop = outcome(await cluster.dispatch({ key: "", fn: "noop", totalCpus: 8, args: NONE }));
      for (const n of [1, 7, 9, 1000, 65_537]) {
        const arena = new SbufArena(cluster);
        const x = arena.i32([n]);
        const y = arena.i32([n]);
        const r = await cluster.dispatch({
          key: "cpu_map",
          fn: "cpu_map",
          totalCpus: 8,
          args: { inputs: [x.desc], outputs: [y.desc] },
        });
        seen[`cpu_map ${n}`] = { cores: outcome(r), owners: Array.from(y.view) };
      }
      {
        const n = 65_537;
        const arena = new SbufArena(cluster);
        const a = arena.f32([n], randomF32(n, 1)), b = arena.f32([n], randomF32(n, 2)), c = arena.f32([n]);
        const r = await cluster.dispatch({
          key: "vector_add",
          fn: "vector_add",
          totalCpus: 8,
          args: { inputs: [a.desc, b.desc], outputs: [c.desc] },
        });
        seen.vector_add = { cores: outcome(r), sum: Array.from(c.view) };
        const y = arena.f32([1]);
        const one = await cluster.dispatch({
          key: "reduce_sum",
          fn: "sum_all",
          totalCpus: 1,
          args: { inputs: [a.desc], outputs: [y.desc] },
        });
        seen.sum_all = { cores: outcome(one), sum: y.view[0] };
      }
      for (const fn of ["trap", "oob", "bad_dram"]) {
        seen[fn] = outcome(await cluster.dispatch({ key: "faults", fn, totalCpus: 8, args: NONE }));
      }
      seen.per_core = outcome(await cluster.dispatch({ key: "cores", fn: "per_core", totalCpus: 8, args: NONE }));
      seen.per_core_1 = outcome(await cluster.dispatch({ key: "cores", fn: "per_core", totalCpus: 1, args: NONE }));
      const globals = new Int32Array(cluster.memory.buffer, SBUF_BASE, 8);
      globals.fill(-1);
      for (let i = 0; i < 3; i++) await cluster.dispatch({ key: "cores", fn: "bump", totalCpus: 8, args: NONE });
      seen.globals = Array.from(globals);
      cluster.drainStdio();
      await cluster.dispatch({ key: "faults", fn: "printf", totalCpus: 8, args: { ...NONE, ints: [3n] } });
      const stdio = cluster.drainStdio();
      seen.stdio = Array.from({ length: 8 }, (_, cpu) => stdio.filter((e) => e.cpu === cpu));
      return seen;
    } finally {
      cluster.terminate();
    }
  }

  test("Q7Cluster with 1, 2 or 8 Workers shows the host and the kernels the same 8 cores", async () => {
    const one = await observe(1);
    expect(await observe(2)).toEqual(one);
    expect(await observe(8)).toEqual(one);
    const seen = one as Record<string, unknown>;
    expect(seen["cpu_map 9"]).toEqual({
      cores: Array.from({ length: 8 }, (_, cpu) => ({ cpu, ran: true, status: "ok", committed: true })),
      owners: [0, 0, 1, 1, 2, 2, 3, 3, 4],
    });
    // Each core has its own instance of a library, so its own globals.
    expect(seen.globals).toEqual(new Array(8).fill(3));
    expect(seen.stdio).toEqual(
      Array.from(
        { length: 8 },
        (_, cpu) => Array.from({ length: 3 }, (_, k) => ({ cpu, stream: 1, text: `line ${k} from core ${cpu}\n` })),
      ),
    );
  }, 30_000);

  test("Q7Cluster attributes each fault to the core that took it, whatever the number of Workers", async () => {
    for (const workers of [1, 2, 3, 8]) {
      const cluster = await Q7Cluster.create({ sbufBytes: 1 << 20, workers });
      try {
        await cluster.prepare("cores", coreTellingLibrary());
        const result = await cluster.dispatch({ key: "cores", fn: "per_core", totalCpus: 8, args: NONE });
        const status = (cpu: number) => cpu === 1 ? "trap" : cpu === 2 || cpu === 5 ? "oob" : "ok";
        expect({ workers, cores: result.cores.map((c) => [c.cpu, c.status, c.committed]) }).toEqual({
          workers,
          cores: Array.from({ length: 8 }, (_, cpu) => [cpu, status(cpu), status(cpu) === "ok" && cpu !== 6]),
        });
        expect(result.cores[1].message).toMatch(/unreachable/i);
        expect(result.cores[5].message).toContain("0x12345");
        expect(result.cores.every((c) => c.startMs! > 0 && c.elapsedNs! >= 0)).toBe(true);
        // A Worker whose core faulted runs its later cores, and the next op, as usual.
        expectAllOk(await cluster.dispatch({ key: "cores", fn: "bump", totalCpus: 8, args: NONE }), 8);
      } finally {
        cluster.terminate();
      }
    }
  }, 30_000);

  test("Q7Cluster.create() takes 1 to 8 Workers, by default NRT_SIM_Q7_WORKERS or min(8, CPUs)", async () => {
    for (const workers of [0, 9, 1.5]) {
      await expect(Q7Cluster.create({ sbufBytes: 1 << 20, workers })).rejects.toThrow(RangeError);
    }
    expect(defaultQ7Workers({ [Q7_WORKERS_ENV]: "3" })).toBe(3);
    for (const text of ["0", "9", "two"]) expect(() => defaultQ7Workers({ [Q7_WORKERS_ENV]: text })).toThrow(text);
    const cpus = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 8;
    expect(defaultQ7Workers({})).toBe(Math.min(8, cpus));
    expect(defaultQ7Workers({ [Q7_WORKERS_ENV]: "" })).toBe(Math.min(8, cpus));
  });
});

/** `kernel(name)` with a custom section holding `n` appended: the same code, distinct bytes (a distinct library). */
function variant(name: string, n: number): Uint8Array {
  const wasm = kernel(name);
  const payload = [1, 0x76, n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24]; // name "v", then n (u32)
  return new Uint8Array([...wasm, 0, payload.length, ...payload]);
}

describe("Q7Cluster memory slot (ours)", () => {
  const NONE = { inputs: [], outputs: [] };

  /** The memory's count of the threads that may still touch it (MB_USERS). */
  const users = (memory: WebAssembly.Memory) => Atomics.load(new Int32Array(memory.buffer, MAILBOX), MB_USERS);

  /** Waits (polling, no clock assert) until the memory's users have all left it; whether they did within 5 s. */
  async function usersLeft(memory: WebAssembly.Memory): Promise<boolean> {
    for (let i = 0; i < 500 && users(memory) !== 0; i++) await new Promise((r) => setTimeout(r, 10));
    return users(memory) === 0;
  }

  async function booted(slot: Q7MemorySlot, workers: number): Promise<Q7Cluster> {
    const cluster = await Q7Cluster.create({ sbufBytes: 1 << 20, workers, memorySlot: slot });
    await cluster.boot({ iram: kernel("stock_pool"), dram: new Uint8Array([7, 7, 7, 7]) });
    await cluster.prepare("faults", kernel("faults"));
    await cluster.prepare("relu", kernel("relu"));
    return cluster;
  }

  for (const workers of [1, 2]) {
    test(
      `a cluster on the slot of a terminated one takes over its memory once its ${workers} Worker(s) left it, after a hang too`,
      async () => {
        const slot: Q7MemorySlot = {};
        const first = await booted(slot, workers);
        expect(slot.memory).toBe(first.memory);
        expect(users(first.memory)).toBe(workers);
        const u8 = new Uint8Array(first.memory.buffer);
        u8.fill(0x5a, SBUF_BASE, SBUF_BASE + 64); // data in the SBUF
        await first.dispatch({
          key: "faults",
          fn: "printf",
          totalCpus: 8,
          args: { inputs: [], outputs: [], ints: [2n] },
        });
        u8.fill(9, 4, IMAGE_BYTES); // the image region, beside the stdio ring and status records the op wrote
        // A kernel spinning on every core when the cluster is terminated (the device's recovery from a hang).
        const controller = new AbortController();
        const spinning = first.dispatch({ key: "faults", fn: "spin", totalCpus: 8, args: NONE }, controller.signal);
        controller.abort(new Error("hung"));
        await expect(spinning).rejects.toThrow("hung");
        first.terminate();
        expect(await usersLeft(first.memory)).toBe(true); // each Worker counted itself out as it left

        const second = await Q7Cluster.create({ sbufBytes: 1 << 20, workers, memorySlot: slot });
        try {
          expect(second.memory).toBe(first.memory);
          expect(slot.memory).toBe(second.memory);
          expect(users(second.memory)).toBe(workers);
          // Below the SBUF as in a new memory (but for the mailbox words the new cluster wrote), the SBUF as it was.
          expect(u8.subarray(0, MAILBOX).some((b) => b !== 0)).toBe(false);
          expect(u8.subarray(MAILBOX + 0x100, SBUF_BASE).some((b) => b !== 0)).toBe(false);
          expect(u8[SBUF_BASE]).toBe(0x5a);
          await second.boot({ iram: kernel("stock_pool"), dram: new Uint8Array(4) });
          await second.prepare("faults", kernel("faults"));
          await second.prepare("relu", kernel("relu"));
          const arena = new SbufArena(second);
          const x = arena.f32([64], randomF32(64, 3)), y = arena.f32([64]);
          expectAllOk(
            await second.dispatch({
              key: "relu",
              fn: "relu",
              totalCpus: 8,
              args: { inputs: [x.desc], outputs: [y.desc] },
            }),
            8,
          );
          expect(firstMismatch(y.view, x.view.map((v) => Math.max(0, v)), 0)).toBeUndefined();
          const trapped = await second.dispatch({ key: "faults", fn: "trap", totalCpus: 8, args: NONE });
          expect(trapped.cores.map((c) => c.status)).toEqual(Array(8).fill("trap"));
          expect(second.drainStdio()).toEqual([]);
        } finally {
          second.terminate();
        }
      },
      20_000,
    );
  }

  test("a terminated cluster's Workers are stopped when the next cluster takes its memory, not a second later", async () => {
    const slot: Q7MemorySlot = {};
    let stopped = 0;
    const spawn = (script: "q7-cores" | "q7-watchdog"): SpawnedWorker => {
      const worker = spawnHere(script);
      const terminate = worker.terminate.bind(worker);
      worker.terminate = () => {
        stopped++;
        terminate();
      };
      return worker;
    };
    const first = await Q7Cluster.create({ sbufBytes: 1 << 20, workers: 2, memorySlot: slot, spawn });
    first.terminate();
    // The Workers leave at the ring; the next cluster takes the memory in the same task as the count reads 0, before
    // any task of this thread could see the 0 (as when a recovery boots the next cluster at once).
    for (let i = 0; i < 1e9 && users(first.memory) !== 0; i++);
    expect(users(first.memory)).toBe(0);
    const second = await Q7Cluster.create({ sbufBytes: 1 << 20, workers: 1, memorySlot: slot });
    try {
      expect(second.memory).toBe(first.memory);
      expect(stopped).toBe(2);
    } finally {
      second.terminate();
    }
  });

  test("a cluster on the slot of one still running gets a memory of its own", async () => {
    const slot: Q7MemorySlot = {};
    const first = await booted(slot, 1);
    const second = await booted(slot, 1);
    try {
      expect(second.memory).not.toBe(first.memory);
      expect(slot.memory).toBe(second.memory);
      expect(users(first.memory)).toBe(1);
      expectAllOk(await first.dispatch({ key: "", fn: "noop", totalCpus: 8, args: NONE }), 8);
      expectAllOk(await second.dispatch({ key: "", fn: "noop", totalCpus: 8, args: NONE }), 8);
    } finally {
      first.terminate();
      second.terminate();
    }
  });
});

describe("Q7Cluster libraries", () => {
  const NONE = { inputs: [], outputs: [] };

  async function booted(maxLibraries: number): Promise<Q7Cluster> {
    const cluster = await Q7Cluster.create({ sbufBytes: 4 << 20, workers: 2, maxLibraries });
    await cluster.boot({ iram: kernel("stock_pool"), dram: new Uint8Array(4) });
    return cluster;
  }

  async function vectorAdd(cluster: Q7Cluster, key: string, n: number): Promise<void> {
    const arena = new SbufArena(cluster);
    const a = arena.f32([n], randomF32(n, n)), b = arena.f32([n], randomF32(n, n + 1)), c = arena.f32([n]);
    const r = await cluster.dispatch({
      key,
      fn: "vector_add",
      totalCpus: 8,
      args: { inputs: [a.desc, b.desc], outputs: [c.desc] },
    });
    expectAllOk(r, 8);
    const expected = a.view.map((v, i) => v + b.view[i]);
    expect({ key, mismatch: firstMismatch(c.view, expected, 0) }).toEqual({ key, mismatch: undefined });
  }

  test("Q7Cluster.create() takes maxLibraries as an integer ≥ 1, 32 by default", async () => {
    for (const maxLibraries of [0, 1.5, -1]) {
      await expect(Q7Cluster.create({ sbufBytes: 1 << 20, workers: 1, maxLibraries })).rejects.toThrow(RangeError);
    }
    expect(DEFAULT_Q7_MAX_LIBRARIES).toBe(32);
    const cluster = await Q7Cluster.create({ sbufBytes: 1 << 20, workers: 1 });
    expect(cluster.maxLibraries).toBe(DEFAULT_Q7_MAX_LIBRARIES);
    cluster.terminate();
  });

  test("Q7Cluster.prepare() past maxLibraries evicts the least recently used; an evicted library prepares again and computes", async () => {
    const cluster = await booted(3);
    try {
      const key = (i: number) => `va${i}`;
      for (let i = 0; i < 3; i++) expect(await cluster.prepare(key(i), variant("vector_add", i))).toEqual([]);
      expect(cluster.libraries).toEqual(["va0", "va1", "va2"]);
      await vectorAdd(cluster, "va0", 9); // a dispatch marks va0 used
      expect(await cluster.prepare("va3", variant("vector_add", 3))).toEqual(["va1"]);
      expect(cluster.libraries).toEqual(["va2", "va0", "va3"]);
      expect(cluster.touch("va2")).toBe(true); // so does a touch, and a prepare of a prepared key
      expect(await cluster.prepare("va0", variant("vector_add", 0))).toEqual([]);
      expect(cluster.touch("va1")).toBe(false);
      expect(await cluster.prepare("va4", variant("vector_add", 4))).toEqual(["va3"]);
      expect(cluster.libraries).toEqual(["va2", "va0", "va4"]);
      expect(cluster.libraryCount).toBe(3);
      await expect(cluster.dispatch({ key: "va1", fn: "vector_add", totalCpus: 8, args: NONE })).rejects.toThrow(
        'library "va1" is not prepared',
      );
      expect(await cluster.prepare("va1", variant("vector_add", 1))).toEqual(["va2"]);
      for (const k of ["va1", "va0", "va4"]) await vectorAdd(cluster, k, 65_537);
      expect(cluster.libraryCount).toBe(3);
      expectAllOk(await cluster.dispatch({ key: "", fn: "noop", totalCpus: 8, args: NONE }), 8); // firmware: slot 0
    } finally {
      cluster.terminate();
    }
  });

  test("Q7Cluster: a reused slot runs only its new library, with per-core faults attributed as before", async () => {
    const cluster = await booted(2);
    try {
      await cluster.prepare("cores", coreTellingLibrary());
      const first = outcome(await cluster.dispatch({ key: "cores", fn: "per_core", totalCpus: 8, args: NONE }));
      await cluster.prepare("faults", kernel("faults"));
      expect(
        outcome(await cluster.dispatch({ key: "faults", fn: "trap", totalCpus: 8, args: NONE })).map((c) => c.status),
      )
        .toEqual(Array(8).fill("trap"));
      // Evict "cores" then "faults" (least recently used first); their slots go to two no-op libraries.
      expect(await cluster.prepare("n0", variant("noop", 0))).toEqual(["cores"]);
      expect(await cluster.prepare("n1", variant("noop", 1))).toEqual(["faults"]);
      // Workers dropped the evicted instances and their cached exports: "trap" is not in the library now in the slot.
      for (const key of ["n0", "n1"]) {
        expect(outcome(await cluster.dispatch({ key, fn: "trap", totalCpus: 8, args: NONE })).map((c) => c.status))
          .toEqual(Array(8).fill("missing-function"));
        expectAllOk(await cluster.dispatch({ key, fn: "noop", totalCpus: 8, args: NONE }), 8);
      }
      await cluster.prepare("cores", coreTellingLibrary());
      expect(outcome(await cluster.dispatch({ key: "cores", fn: "per_core", totalCpus: 8, args: NONE }))).toEqual(
        first,
      );
    } finally {
      cluster.terminate();
    }
  });

  test("Q7Cluster never evicts the library of the dispatch in flight, and terminate() still stops its spinning cores", async () => {
    const cluster = await booted(2);
    try {
      await cluster.prepare("a", variant("noop", 0));
      await cluster.prepare("b", variant("noop", 1));
      expect(await cluster.prepare("faults", kernel("faults"))).toEqual(["a"]); // into a reused slot
      await cluster.prepare("b", variant("noop", 1)); // "faults" is now the least recently used
      const spinning = cluster.dispatch({ key: "faults", fn: "spin", totalCpus: 8, args: NONE });
      await expect(cluster.prepare("c", variant("noop", 2))).rejects.toThrow("busy");
      expect(cluster.libraries).toEqual(["b", "faults"]);
      cluster.terminate(); // the loop guard stops the spinning cores of the reused slot
      await expect(spinning).rejects.toThrow("terminated");
    } finally {
      cluster.terminate();
    }
  });

  test("Q7Cluster (2 Workers) preparing many distinct libraries keeps its library count at the cap", async () => {
    const cluster = await booted(4);
    try {
      const counts = new Set<number>();
      for (let i = 0; i < 48; i++) {
        const key = `noop${i}`;
        const evicted = await cluster.prepare(key, variant("noop", i));
        expect(evicted).toEqual(i < 4 ? [] : [`noop${i - 4}`]);
        expectAllOk(await cluster.dispatch({ key, fn: "noop", totalCpus: 8, args: NONE }), 8);
        counts.add(cluster.libraryCount);
      }
      expect([...counts]).toEqual([1, 2, 3, 4]);
      expect(cluster.libraries).toEqual(["noop44", "noop45", "noop46", "noop47"]);
    } finally {
      cluster.terminate();
    }
  }, 30_000);
});

describe("guardLoops()", () => {
  test("guardLoops() keeps every reference kernel valid and leaves loop-free modules unchanged", () => {
    for (const name of [...LIBRARIES, "stock_pool"]) {
      const wasm = kernel(name);
      const guarded = guardLoops(wasm, KILL_FLAG_ADDR);
      expect({ name, valid: WebAssembly.validate(guarded as Uint8Array<ArrayBuffer>) }).toEqual({ name, valid: true });
      if (name === "noop" || name === "stock_pool") expect(guarded).toBe(wasm);
      else expect(guarded.length).toBeGreaterThan(wasm.length);
    }
  });

  test("guardLoops() adds an env.memory import to a module with a loop and no memory", () => {
    // (module (func (export "f") (loop)))
    const wasm = new Uint8Array([
      0,
      97,
      115,
      109,
      1,
      0,
      0,
      0,
      1,
      4,
      1,
      96,
      0,
      0,
      3,
      2,
      1,
      0,
      7,
      5,
      1,
      1,
      102,
      0,
      0,
      10,
      7,
      1,
      5,
      0,
      3,
      64,
      11,
      11,
    ]);
    expect(WebAssembly.validate(wasm)).toBe(true);
    const guarded = guardLoops(wasm, KILL_FLAG_ADDR) as Uint8Array<ArrayBuffer>;
    expect(WebAssembly.validate(guarded)).toBe(true);
    const imports = WebAssembly.Module.imports(new WebAssembly.Module(guarded));
    expect(imports).toEqual([{ module: "env", name: "memory", kind: "memory" }]);
  });
});
