/**
 * The arch-pack conformance suite: the full runtime — init, load, execute, unload, close of the reference kernels —
 * run over one {@linkcode Khal} and a portal that simulates (or is) its generation, plus the trace properties the
 * seeds pin, the teardown order and the tensor API. Every pack runs it; what a pack cannot honour it declares in
 * `skips` as data, `{test, reason}`.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, one HAL per generation behind one dispatch), §2.1 (per NeuronCore 5 NX + 8
 * Q7 cores; the Pool image DRAM before IRAM, broadcast to all 8 Q7 cores; run-stall release per arch: Cayman/Mariana
 * host CSR 0x3000 0xFF → 0x00, Sunda no CSR write — the Q7s come online under SEQ/SP through EVT_SEM), §3.3 (one
 * semaphore increment per execute), §4.5 (virtual core size; Sunda forces 1); spmd-teardown §6.2 (the close order);
 * lifecycle-error-model §4.5 (error_id bound 0x0b, 12-entry text table).
 *
 * The cases are declared with the test API the caller passes (`describe`, `test`, `expect`); each case inits a
 * runtime over the pack and a traced portal of its generation.
 *
 * @example Run the suite for a pack (in a `*_test.ts` file)
 * ```ts ignore
 * import { describe, expect, test } from "bun:test";
 * import { cayman } from "@nrt/arch-cayman";
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * import { khalContract } from "@nrt/core/testing";
 * khalContract({ describe, test, expect }, "cayman", () => cayman, async (spec) => {
 *   const sim = new DeviceSimPortal({ spec });
 *   return { portal: sim, spec, close: () => sim.close(), q7Events: () => sim.q7Events() };
 * });
 * ```
 *
 * @module
 */
import { expect, type TestApi, useTestApi } from "./test_api.ts";
import { NrtError } from "./error.ts";
import { buildCustomOpNeff, type CustomOpTensorSpec } from "./kelf/custom_op_neff.ts";
import { type ArchPack, createKhal, type Khal } from "./khal.ts";
import { MemoryLogger } from "./log.ts";
import type { ContractSkip, PortalContractSubject } from "./portal_contract.ts";
import { Runtime, type RuntimeInitOptions, TensorSet } from "./runtime.ts";
import { ncBlock, type SiliconSpec } from "./silicon_spec.ts";
import { NrtInitState } from "./state.ts";
import { NrtStatus } from "./status.ts";
import { type TraceEntry, TracingPortal } from "./trace_portal.ts";

export type { ContractSkip } from "./portal_contract.ts";

/** One Q7 lifecycle event as a simulator reports it (`DeviceSimPortal.q7Events()`). */
export interface KhalContractQ7Event {
  /** NeuronCore. */
  readonly nc: number;
  /** `released`, `boot-failed`, `cluster-started`, `cluster-terminated`. */
  readonly kind: string;
  /** How the cores left run-stall (for `released`). */
  readonly via?: string;
}

/** What the pack suite runs against: a fresh backend of the pack's generation per case. */
export interface KhalContractSubject extends PortalContractSubject {
  /** The backend's Q7 lifecycle events, where it can observe them (the EVT_SEM boot check needs them). */
  q7Events?(): readonly KhalContractQ7Event[];
}

/** Options of {@linkcode khalContract}. */
export interface KhalContractOptions {
  /**
   * Loads a reference kernel's `.wasm` by library name (`vector_add`, `relu`, `softmax`, `matmul`, `cpu_map`,
   * `reduce_sum`). Default: `fetch` of `kernels/wasm/<name>.wasm` relative to this module in the nrt repository.
   */
  readonly kernel?: (name: string) => Promise<Uint8Array>;
}

/** The names of the cases {@linkcode khalContract} declares, in order. */
export const KHAL_CONTRACT_CASES: readonly string[] = Object.freeze([
  "Runtime.init() resolves this pack from the arch the portal reports and creates 5 NX + 8 Q7 cores per NeuronCore",
  "nrt_init installs the Pool image DRAM before IRAM on all 8 Q7 cores of every NeuronCore",
  "nrt_init releases run-stall the spec's way: host CSR 0xFF → 0x00, or no CSR write and an EVT_SEM boot on the first run",
  "the virtual core size is the spec's default, or the forced size whatever the option says",
  "vector_add, relu, softmax_rows and matmul give the reference results",
  "cpu_map shows all 8 Q7 cores worked and sum_all runs with total_cpus 1",
  "nrt_execute rings exactly one semaphore increment per execution",
  "nrt_unload releases the vNC and nrt_close leaves no device memory behind",
  "nrt_close destroys each NeuronCore in the seed's order",
  "the tensor API allocates DEVICE, HOST and VIRTUAL tensors, reads, writes, copies, memsets, slices and frees",
  "errorSubtype() returns 0 above error_id 11 and isaErrorText() has 12 entries and a default",
  "stockPoolUcode() fits the Q7 and carries the arch id in DRAM word 0",
]);

/** Everything one case works with. */
interface Fixture {
  readonly khal: Khal;
  readonly spec: SiliconSpec;
  readonly subject: KhalContractSubject;
  readonly trace: TracingPortal;
  readonly kernel: (name: string) => Promise<Uint8Array>;
  init(options?: Partial<RuntimeInitOptions>): Promise<Runtime>;
}

const f32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "float32", shape });
const i32 = (name: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype: "int32", shape });
const bytesOf = (a: Float32Array | Int32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const floats = (b: Uint8Array): Float32Array => new Float32Array(b.slice().buffer);

/** A one-call custom-op NEFF for `fn` of library `lib`, built for the fixture's generation. */
async function neff(
  f: Fixture,
  lib: string,
  fn: string,
  inputs: CustomOpTensorSpec[],
  outputs: CustomOpTensorSpec[],
  totalCpus = 8,
): Promise<Uint8Array> {
  return buildCustomOpNeff({
    name: `${fn}.neff`,
    target: f.spec.name,
    inputs,
    outputs,
    libraries: [{ name: lib, wasm: await f.kernel(lib), totalCpus, functions: [{ opcode: 1, name: fn }] }],
    calls: [{ opcode: 1, inputs: inputs.map((t) => t.name), outputs: outputs.map((t) => t.name) }],
  });
}

/** Loads `bytes`, runs it once on HOST tensors filled from `inputs`, returns the outputs by name. */
async function runOnce(
  rt: Runtime,
  bytes: Uint8Array,
  inputs: Record<string, Uint8Array>,
): Promise<Record<string, Uint8Array>> {
  const model = await rt.load(bytes);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location: "host", size: t.size, name: t.name });
    await x.write(inputs[t.name]);
    ins.add(t.name, x);
  }
  for (const t of model.outputs) {
    outs.add(t.name, await rt.allocateTensor({ location: "host", size: t.size, name: t.name }));
  }
  await model.execute(ins, outs);
  const out: Record<string, Uint8Array> = {};
  for (const t of model.outputs) out[t.name] = await outs.get(t.name).read();
  await model.unload();
  return out;
}

/** Position in the trace of the BAR writes that hit `[start, start + bytes)` of NeuronCore `nc`'s block. */
function writesIn(
  spec: SiliconSpec,
  entries: readonly TraceEntry[],
  nc: number,
  start: number,
  bytes: number,
): TraceEntry[] {
  const lo = ncBlock(spec, nc) + start;
  return entries.filter((e) =>
    (e.op === "barWrite" || e.op === "barWrite32") && e.target >= lo && e.target < lo + bytes
  );
}

type Body = (f: Fixture) => Promise<void>;

const BODIES: Readonly<Record<string, Body>> = {
  [KHAL_CONTRACT_CASES[0]]: async (f) => {
    const rt = await f.init();
    try {
      expect(rt.spec).toBe(f.spec);
      expect(rt.device.arch).toBe(f.spec.arch);
      expect(rt.state).toBe(NrtInitState.NRT_STATE_INIT);
      for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
        expect(rt.events.list().filter((e) => e.startsWith(`ucode_nx_core_create nc=${nc} `)).length).toBe(5);
        expect(rt.events.list().filter((e) => e.startsWith(`ucode_pooling_q7_core_create nc=${nc} `)).length).toBe(8);
        expect(rt.events.list()).toContain(`release_run_stall nc=${nc}`);
      }
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[1]]: async (f) => {
    const rt = await f.init();
    try {
      const c = f.spec.csr;
      for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
        const base = ncBlock(f.spec, nc);
        const images = f.trace.entries.filter((e) =>
          e.op === "barWrite" &&
          ((e.target >= base + c.q7Iram && e.target < base + c.q7Iram + 8 * c.q7IramStride) ||
            (e.target >= base + c.q7Dram && e.target < base + c.q7Dram + 8 * c.q7DramStride))
        );
        const seq = images.map((e) =>
          e.target >= base + c.q7Dram && e.target < base + c.q7Dram + 8 * c.q7DramStride
            ? `D${(e.target - base - c.q7Dram) / c.q7DramStride}`
            : `I${(e.target - base - c.q7Iram) / c.q7IramStride}`
        );
        expect(seq).toEqual([
          "D0",
          "I0",
          "D1",
          "I1",
          "D2",
          "I2",
          "D3",
          "I3",
          "D4",
          "I4",
          "D5",
          "I5",
          "D6",
          "I6",
          "D7",
          "I7",
        ]);
        const stock = f.khal.stockPoolUcode();
        expect(images.map((e) => e.value)).toEqual(
          images.map((_, i) => (i % 2 === 0 ? stock.dram.byteLength : stock.iram.byteLength)),
        );
      }
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[2]]: async (f) => {
    const rt = await f.init();
    try {
      const c = f.spec.csr;
      const events = f.subject.q7Events;
      if (f.spec.runStallRelease === "host-csr") {
        expect(c.runStall).toBe(0x3000); // seed: runtime-synthesis §2.1
        for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
          const stall = writesIn(f.spec, f.trace.entries, nc, 0x3000, 4);
          expect(stall.map((e) => [e.op, e.value])).toEqual([["barWrite32", 0xff], ["barWrite32", 0x00]]);
          const lastImage = f.trace.entries.findLastIndex((e) =>
            e.op === "barWrite" && e.target >= ncBlock(f.spec, nc) + c.q7Iram &&
            e.target < ncBlock(f.spec, nc) + c.q7Iram + 8 * c.q7IramStride
          );
          expect(f.trace.entries.indexOf(stall[1])).toBeGreaterThan(lastImage);
          expect(f.trace.entries.indexOf(stall[0])).toBeLessThan(lastImage);
        }
        if (events) {
          const released = events.call(f.subject).filter((e) => e.kind === "released");
          expect(released.map((e) => [e.nc, e.via])).toEqual(
            [...Array(f.spec.ncPerDevice).keys()].map((nc) => [nc, "host-csr"]),
          );
        }
      } else {
        expect(c.runStall).toBeNull();
        // No write lands on any generation's run-stall offset (0x3000), in any NeuronCore block.
        for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
          expect(writesIn(f.spec, f.trace.entries, nc, 0x3000, 4)).toEqual([]);
        }
        if (events) {
          expect(events.call(f.subject).filter((e) => e.kind === "released")).toEqual([]);
          await runOnce(rt, await neff(f, "relu", "relu", [f32("x", [64])], [f32("y", [64])]), {
            x: bytesOf(new Float32Array(64).fill(-1)),
          });
          const after = events.call(f.subject);
          expect(after.filter((e) => e.kind === "released").map((e) => [e.nc, e.via])).toEqual([[0, "evt-sem"]]);
          expect(after.some((e) => e.nc === 0 && e.kind === "cluster-started")).toBe(true);
        }
        for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
          expect(writesIn(f.spec, f.trace.entries, nc, 0x3000, 4)).toEqual([]);
        }
      }
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[3]]: async (f) => {
    const rt = await f.init();
    const expected = f.spec.forcedVirtualCoreSize ?? f.spec.defaultVirtualCoreSize;
    try {
      expect(rt.virtualCoreSize).toBe(expected);
      expect(rt.visibleVncCount).toBe(f.spec.ncPerDevice / expected);
    } finally {
      await rt.close();
    }
    if (f.spec.ncPerDevice % 2 !== 0) return;
    const rt2 = await f.init({ virtualCoreSize: 2 });
    try {
      expect(rt2.virtualCoreSize).toBe(f.spec.forcedVirtualCoreSize ?? 2);
    } finally {
      await rt2.close();
    }
  },
  [KHAL_CONTRACT_CASES[4]]: async (f) => {
    const rt = await f.init();
    try {
      const n = 1000;
      const a = Float32Array.from({ length: n }, (_, i) => i * 0.5),
        b = Float32Array.from({ length: n }, (_, i) => 1000 - i * 1.25);
      const add = floats(
        (await runOnce(
          rt,
          await neff(f, "vector_add", "vector_add", [f32("a", [n]), f32("b", [n])], [f32("out", [n])]),
          { a: bytesOf(a), b: bytesOf(b) },
        )).out,
      );
      expect(Array.from(add)).toEqual(Array.from(a, (x, i) => Math.fround(x + b[i])));

      const x = Float32Array.from({ length: n }, (_, i) => i - 500.5);
      const relu = floats(
        (await runOnce(rt, await neff(f, "relu", "relu", [f32("x", [n])], [f32("y", [n])]), { x: bytesOf(x) })).y,
      );
      expect(Array.from(relu)).toEqual(Array.from(x, (v) => Math.max(v, 0)));

      const rows = 4, cols = 16;
      const s = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i) * 3);
      const soft = floats(
        (await runOnce(
          rt,
          await neff(f, "softmax", "softmax_rows", [f32("x", [rows, cols])], [f32("y", [rows, cols])]),
          { x: bytesOf(s) },
        )).y,
      );
      for (let r = 0; r < rows; r++) {
        const row = Array.from(s.subarray(r * cols, (r + 1) * cols));
        const max = Math.max(...row);
        const e = row.map((v) => Math.exp(v - max));
        const sum = e.reduce((p, q) => p + q, 0);
        for (let k = 0; k < cols; k++) expect(soft[r * cols + k]).toBeCloseTo(e[k] / sum, 6);
      }

      const M = 8, K = 16, N = 4;
      const A = Float32Array.from({ length: M * K }, (_, i) => (i % 7) - 3),
        B = Float32Array.from({ length: K * N }, (_, i) => (i % 5) - 2);
      const C = floats(
        (await runOnce(
          rt,
          await neff(f, "matmul", "matmul", [f32("a", [M, K]), f32("b", [K, N])], [f32("c", [M, N])]),
          { a: bytesOf(A), b: bytesOf(B) },
        )).c,
      );
      for (let i = 0; i < M; i++) {
        for (let j = 0; j < N; j++) {
          let acc = 0;
          for (let t = 0; t < K; t++) acc += A[i * K + t] * B[t * N + j];
          expect(C[i * N + j]).toBe(acc);
        }
      }
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[5]]: async (f) => {
    const rt = await f.init();
    try {
      const n = 64;
      const map = new Int32Array(
        (await runOnce(rt, await neff(f, "cpu_map", "cpu_map", [i32("x", [n])], [i32("y", [n])]), {
          x: new Uint8Array(n * 4),
        })).y.slice().buffer,
      );
      expect([...new Set(map)].sort((p, q) => p - q)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      for (let i = 1; i < n; i++) expect(map[i]).toBeGreaterThanOrEqual(map[i - 1]); // contiguous shares, by rank
      const xs = Float32Array.from({ length: n }, (_, i) => i);
      const sum = floats(
        (await runOnce(rt, await neff(f, "reduce_sum", "sum_all", [f32("x", [n])], [f32("s", [1])], 1), {
          x: bytesOf(xs),
        })).s,
      );
      expect(sum[0]).toBe((n * (n - 1)) / 2);
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[6]]: async (f) => {
    const rt = await f.init();
    try {
      const n = 256;
      const model = await rt.load(
        await neff(f, "vector_add", "vector_add", [f32("a", [n]), f32("b", [n])], [f32("out", [n])]),
      );
      const ins = new TensorSet(), outs = new TensorSet();
      for (const name of ["a", "b"]) {
        const t = await rt.allocateTensor({ size: n * 4, name });
        await t.write(bytesOf(Float32Array.from({ length: n }, (_, i) => i)));
        ins.add(name, t);
      }
      outs.add("out", await rt.allocateTensor({ size: n * 4, name: "out" }));
      const c = f.spec.csr;
      for (let k = 0; k < 3; k++) {
        f.trace.clear();
        await model.execute(ins, outs);
        const incs = f.trace.entries.filter((e) => e.op === "semaphoreIncrement");
        expect(incs.map((e) => e.value)).toEqual([1]);
        // Nor is a doorbell rung through the BAR0 increment window.
        for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
          expect(writesIn(f.spec, f.trace.entries, nc, c.semaphoreIncrement, 4 * f.spec.semaphoresPerCore)).toEqual([]);
        }
      }
      expect(floats(await outs.get("out").read())[100]).toBe(200);
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[7]]: async (f) => {
    const rt = await f.init();
    const bytes = await neff(f, "relu", "relu", [f32("x", [32])], [f32("y", [32])]);
    const first = await runOnce(rt, bytes, { x: bytesOf(Float32Array.from({ length: 32 }, (_, i) => i - 16)) });
    // runOnce unloaded the model: the vNC is free again, so the same model loads on it once more.
    const again = await runOnce(rt, bytes, { x: bytesOf(Float32Array.from({ length: 32 }, (_, i) => i - 16)) });
    expect(Array.from(again.y)).toEqual(Array.from(first.y));
    await rt.load(bytes); // left loaded: nrt_close unloads it
    await rt.close();
    expect((await f.trace.memUsage(0)).allocations).toBe(0);
    const closed = await rt.load(bytes).catch((e: unknown) => e);
    expect(closed).toBeInstanceOf(NrtError);
    expect((closed as NrtError).status).toBe(NrtStatus.NRT_CLOSED);
  },
  [KHAL_CONTRACT_CASES[8]]: async (f) => {
    const rt = await f.init();
    await rt.load(await neff(f, "reduce_sum", "sum_all", [f32("x", [64])], [f32("s", [1])], 1));
    await rt.close();
    for (let nc = 0; nc < f.spec.ncPerDevice; nc++) {
      const ev = rt.events.list().filter((e) => e.includes(` nc=${nc}`) && /destroy|halt|free_lib/.test(e)).map((e) =>
        e.replace(` nc=${nc}`, "")
      );
      const order = ev.map((e) => e.split(" ")[0]);
      expect(order[0]).toBe("hw_exec_queue_add_halt_request");
      expect(ev.filter((e) => e.startsWith("ucode_core_destroy NX")).length).toBe(5);
      expect(ev.filter((e) => e.startsWith("ucode_core_destroy Q7")).length).toBe(8);
      expect(ev.findIndex((e) => e.startsWith("ucode_core_destroy Q7"))).toBeGreaterThan(
        ev.findLastIndex((e) => e.startsWith("ucode_core_destroy NX")),
      );
      const idx = (s: string) => order.indexOf(s);
      expect(idx("notification_destroy")).toBeGreaterThan(order.lastIndexOf("ucode_core_destroy"));
      expect(idx("pool_stdio_block_destroy")).toBeGreaterThan(idx("notification_destroy"));
      expect(idx("ucode_free_lib_set")).toBeGreaterThan(idx("pool_stdio_block_destroy"));
      expect(idx("model_db_destroy")).toBeGreaterThan(idx("ucode_free_lib_set"));
    }
  },
  [KHAL_CONTRACT_CASES[9]]: async (f) => {
    const rt = await f.init();
    try {
      const before = (await f.trace.memUsage(0)).allocations;
      const dev = await rt.allocateTensor({ size: 64, name: "dev" });
      const host = await rt.allocateTensor({ location: "host", size: 64, name: "host" });
      const virt = await rt.allocateTensor({ location: "virtual", size: 64, name: "virt" });
      expect((await f.trace.memUsage(0)).allocations).toBe(before + 1); // only the DEVICE tensor takes device memory
      expect(dev.devicePa).toBeDefined();
      expect(host.devicePa).toBeUndefined();
      await expect(virt.read()).rejects.toBeInstanceOf(NrtError); // no buffer attached yet
      virt.attachBuffer(new Uint8Array(64));
      const data = Uint8Array.from({ length: 64 }, (_, i) => i);
      await dev.write(data);
      expect(Array.from(await dev.read(8, 4))).toEqual([8, 9, 10, 11]);
      await host.copyFrom(dev);
      await virt.copyFrom(host, 16, 0, 16);
      expect(Array.from(await virt.read(0, 16))).toEqual(Array.from(data.subarray(16, 32)));
      await dev.memset(0xab, 60);
      expect(Array.from(await dev.read(56, 8))).toEqual([56, 57, 58, 59, 0xab, 0xab, 0xab, 0xab]);
      const view = dev.slice(4, 8);
      expect(view.devicePa).toBe(dev.devicePa! + 4);
      await view.write(new Uint8Array(8).fill(1));
      expect(Array.from(await dev.read(2, 12))).toEqual([2, 3, 1, 1, 1, 1, 1, 1, 1, 1, 12, 13]);
      await expect(dev.read(60, 8)).rejects.toBeInstanceOf(NrtError);
      await dev.free();
      expect((await f.trace.memUsage(0)).allocations).toBe(before + 1); // the slice still holds the memory
      await view.free();
      expect((await f.trace.memUsage(0)).allocations).toBe(before);
      await host.free();
      await virt.free();
    } finally {
      await rt.close();
    }
  },
  [KHAL_CONTRACT_CASES[10]]: (f) => {
    const word = (id: number, mask: number) => BigInt(id) | (BigInt(mask) << 8n);
    for (let id = 12; id < 256; id++) expect(f.khal.errorSubtype(word(id, 0xffff))).toBe(0);
    expect(f.khal.errorSubtype(word(4, 0))).toBe(2);
    expect(f.khal.errorSubtype(word(4, 0xfd6b))).toBe(3);
    const texts = Array.from({ length: 12 }, (_, id) => f.khal.isaErrorText(id));
    const fallback = f.khal.isaErrorText(12);
    expect(texts.every((t) => typeof t === "string" && t.length > 0 && t !== fallback)).toBe(true);
    for (const id of [13, 0x80, 255, -1]) expect(f.khal.isaErrorText(id)).toBe(fallback);
    return Promise.resolve();
  },
  [KHAL_CONTRACT_CASES[11]]: (f) => {
    const a = f.khal.stockPoolUcode(), b = f.khal.stockPoolUcode();
    expect(a.iram.byteLength).toBeLessThanOrEqual(f.spec.q7IramBytes);
    expect(a.dram.byteLength).toBeLessThanOrEqual(f.spec.q7DramBytes);
    expect(Array.from(a.iram.subarray(0, 4))).toEqual([0x00, 0x61, 0x73, 0x6d]); // "\0asm": the simulator's Q7 ISA
    expect(new DataView(a.dram.buffer, a.dram.byteOffset).getUint32(0, true)).toBe(f.spec.arch);
    a.iram[0] = 0xff;
    expect(b.iram[0]).toBe(0); // each call is a fresh copy
    expect(f.khal.stockPoolUcode().iram[0]).toBe(0);
    return Promise.resolve();
  },
};

async function defaultKernel(name: string): Promise<Uint8Array> {
  const url = new URL(`../../kernels/wasm/${name}.wasm`, import.meta.url);
  const res = await fetch(url);
  if (!res.ok) {
    throw new TypeError(
      `Cannot load reference kernel "${name}" from ${url.href}: HTTP ${res.status}; pass options.kernel`,
    );
  }
  return new Uint8Array(await res.arrayBuffer());
}

/**
 * Declares the arch-pack conformance cases for one pack.
 *
 * @param name The pack's name, shown in the `describe` title.
 * @param api The test framework's `describe`, `test` and `expect` (`bun:test`, `@std/testing/bdd` + `@std/expect`…).
 * @param makePack The pack (its HAL is built with `createKhal` for each case).
 * @param makePortal Creates a backend of the HAL's generation (a fresh one per case; the suite closes it).
 * @param skips Cases this pack does not run, each with its reason (names from {@linkcode KHAL_CONTRACT_CASES}).
 * @param options Where the reference kernels come from.
 * @throws {TypeError} When a skip names a case the suite does not declare.
 */
export function khalContract(
  api: TestApi,
  name: string,
  makePack: () => ArchPack,
  makePortal: (spec: SiliconSpec) => Promise<KhalContractSubject>,
  skips: readonly ContractSkip[] = [],
  options: KhalContractOptions = {},
): void {
  for (const s of skips) {
    if (!KHAL_CONTRACT_CASES.includes(s.test)) {
      throw new TypeError(`khalContract(${name}): skip names no case: "${s.test}"`);
    }
  }
  const kernelCache = new Map<string, Promise<Uint8Array>>();
  const load = options.kernel ?? defaultKernel;
  const kernel = (k: string): Promise<Uint8Array> => {
    let p = kernelCache.get(k);
    if (p === undefined) kernelCache.set(k, p = load(k));
    return p;
  };
  const { describe, test } = useTestApi(api);
  describe(`khalContract(${name})`, () => {
    for (const c of KHAL_CONTRACT_CASES) {
      const skip = skips.find((s) => s.test === c);
      if (skip !== undefined) {
        test.skip(`${c} (skipped: ${skip.reason})`, () => {});
        continue;
      }
      test(c, async () => {
        const pack = makePack();
        const khal = createKhal(pack);
        const subject = await makePortal(pack.spec);
        const trace = new TracingPortal(subject.portal);
        const runtimes: Runtime[] = [];
        const fixture: Fixture = {
          khal,
          spec: khal.spec,
          subject,
          trace,
          kernel,
          async init(extra = {}) {
            const rt = await Runtime.init({
              logger: new MemoryLogger(),
              ...extra,
              portal: trace,
              archPacks: [pack],
              ownsPortal: false,
            });
            runtimes.push(rt);
            return rt;
          },
        };
        try {
          await BODIES[c](fixture);
        } finally {
          for (const rt of runtimes) if (rt.state === NrtInitState.NRT_STATE_INIT) await rt.close().catch(() => {});
          await subject.close();
        }
      }, 30_000);
    }
  });
}
