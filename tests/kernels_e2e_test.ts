import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { buildCustomOpNeff, MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import type { DeviceSimPortal } from "@nrt/device-sim";
import { kernel, oneOpNeff } from "./_kernels.ts";

// Reference kernels through the whole runtime (seed runtime-synthesis §3: doorbell → DMA → 8 Q7 → DRAIN → NQ).
let c: NrtContainer;
let rt: Runtime;
beforeAll(async () => {
  c = createNrtContainer();
  rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
});
afterAll(async () => {
  await rt.close();
  await c.resolve(PortalToken).close();
});

let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const f32s = (n: number) => Float32Array.from({ length: n }, rand);
const spec = (name: string, shape: number[], dtype = "float32") => ({ name, dtype, shape });

async function run(neff: Uint8Array, inputs: Record<string, Float32Array>, location: "device" | "host" = "device") {
  const model = await rt.load(neff);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location, size: t.size, name: t.name });
    await x.write(new Uint8Array(inputs[t.name].buffer));
    ins.add(t.name, x);
  }
  for (const t of model.outputs) outs.add(t.name, await rt.allocateTensor({ location, size: t.size, name: t.name }));
  await model.execute(ins, outs);
  const out: Record<string, Uint8Array> = {};
  for (const t of model.outputs) out[t.name] = (await outs.get(t.name).read()).slice();
  for (const n of [...ins.names()]) await ins.get(n).free();
  for (const n of [...outs.names()]) await outs.get(n).free();
  await model.unload();
  return out;
}

function close(a: Float32Array, b: Float64Array | number[], rel = 1e-5) {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(1e-6, Math.abs(b[i])));
  expect(worst).toBeLessThanOrEqual(rel);
}

describe("reference kernels end to end on the simulated Cayman device", () => {
  for (const n of [1, 7, 1000, 65_537, (4 << 20) / 4]) {
    test(`vector_add and relu are exact for ${n} elements`, async () => {
      const a = f32s(n), b = f32s(n);
      const add = new Float32Array(
        (await run(oneOpNeff("vector_add", "vector_add", [spec("a", [n]), spec("b", [n])], [spec("o", [n])]), { a, b }))
          .o.buffer,
      );
      for (let i = 0; i < n; i += Math.max(1, n >> 12)) expect(add[i]).toBe(Math.fround(a[i] + b[i]));
      expect(add[n - 1]).toBe(Math.fround(a[n - 1] + b[n - 1]));
      const r = new Float32Array(
        (await run(oneOpNeff("relu", "relu", [spec("a", [n])], [spec("o", [n])]), { a }, "host")).o.buffer,
      );
      expect(r.every((v, i) => v === Math.max(0, a[i]))).toBe(true);
    }, 60_000);
  }

  for (const [rows, cols] of [[1, 1], [3, 5], [64, 100], [1024, 1024]]) {
    test(`softmax_rows matches the reference for [${rows}, ${cols}]`, async () => {
      const x = f32s(rows * cols).map((v) => v * 20);
      const got = new Float32Array(
        (await run(oneOpNeff("softmax", "softmax_rows", [spec("x", [rows, cols])], [spec("y", [rows, cols])]), { x })).y
          .buffer,
      );
      const ref = new Float64Array(rows * cols);
      for (let r = 0; r < rows; r++) {
        let m = -Infinity, s = 0;
        for (let k = 0; k < cols; k++) m = Math.max(m, x[r * cols + k]);
        for (let k = 0; k < cols; k++) s += Math.exp(x[r * cols + k] - m);
        for (let k = 0; k < cols; k++) ref[r * cols + k] = Math.exp(x[r * cols + k] - m) / s;
      }
      close(got, ref);
    }, 60_000);
  }

  // The last case has a 4 MiB A operand (1024 × 1024 float32), kept cheap by a narrow B.
  for (const [m, k, n] of [[1, 1, 1], [5, 3, 7], [64, 64, 64], [256, 512, 128], [1024, 1024, 8]]) {
    test(`matmul matches the reference for [${m}, ${k}] × [${k}, ${n}]`, async () => {
      const a = f32s(m * k), b = f32s(k * n);
      const got = new Float32Array(
        (await run(oneOpNeff("matmul", "matmul", [spec("a", [m, k]), spec("b", [k, n])], [spec("c", [m, n])]), {
          a,
          b,
        })).c.buffer,
      );
      const ref = new Float64Array(m * n);
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let t = 0; t < k; t++) s += a[i * k + t] * b[t * n + j];
          ref[i * n + j] = s;
        }
      }
      // 1e-5 relative; sums that cancel to near zero get an absolute floor of 1e-7 (float32 rounding of the result).
      for (let i = 0; i < m * n; i++) {
        expect(Math.abs(got[i] - ref[i])).toBeLessThanOrEqual(1e-5 * Math.abs(ref[i]) + 1e-7);
      }
    }, 60_000);
  }

  test("cpu_map shows all 8 Q7 cores took their share, and the DMA queues moved 1/8 each", async () => {
    const n = 8000;
    const portal = c.resolve(PortalToken) as unknown as DeviceSimPortal;
    const got = new Int32Array(
      (await run(oneOpNeff("cpu_map", "cpu_map", [spec("x", [n])], [spec("id", [n], "int32")]), { x: f32s(n) })).id
        .buffer,
    );
    const counts = new Array(8).fill(0);
    for (const v of got) counts[v]++;
    expect(counts).toEqual(new Array(8).fill(n / 8));
    const q = portal.queueBytes(0, 0);
    expect(q.m2s.every((b: number) => b > 0)).toBe(true);
  }, 60_000);

  test("a total_cpus = 1 library runs on core 0 only", async () => {
    const n = 1000;
    const x = f32s(n);
    const got = new Float32Array(
      (await run(oneOpNeff("reduce_sum", "sum_all", [spec("x", [n])], [spec("s", [1])], 1), { x })).s.buffer,
    );
    expect(Math.abs(got[0] - x.reduce((a, b) => a + b, 0))).toBeLessThan(1e-3);
  }, 60_000);

  test("two calls in one NEFF run in order: relu then vector_add", async () => {
    const n = 512;
    const neff = buildCustomOpNeff({
      name: "chain",
      target: "cayman",
      inputs: [spec("a", [n]), spec("b", [n])],
      outputs: [spec("r", [n]), spec("o", [n])],
      libraries: [
        { name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] },
        {
          name: "vector_add",
          wasm: kernel("vector_add"),
          totalCpus: 8,
          functions: [{ opcode: 2, name: "vector_add" }],
        },
      ],
      calls: [{ opcode: 1, inputs: ["a"], outputs: ["r"] }, { opcode: 2, inputs: ["r", "b"], outputs: ["o"] }],
    });
    const a = f32s(n), b = f32s(n);
    const out = await run(neff, { a, b });
    const o = new Float32Array(out.o.buffer);
    expect(Array.from(o)).toEqual(Array.from(a, (v, i) => Math.fround(Math.max(0, v) + b[i])));
  }, 60_000);
});

describe("metaneff binding (seed runtime-synthesis §2.3)", () => {
  test("USER_INPUT from the caller, INPUT_WEIGHT from the checkpoint, an aliased output written in place", async () => {
    const n = 64;
    const neff = oneOpNeff("vector_add", "vector_add", [spec("x", [n]), spec("w", [n])], [spec("y", [n])]);
    const w = f32s(n);
    const model = await rt.load(neff, {
      metaneff: {
        input_tensors: [
          { name: "input0", shape: [n], data_type: "float32", type: "USER_INPUT" },
          { name: "input1", shape: [n], data_type: "float32", type: "INPUT_WEIGHT", checkpoint_key: "layer.w" },
        ],
        output_tensors: [{ name: "output0", shape: [n], data_type: "float32" }],
        output_aliases_to: { "0": 0 },
      },
      checkpoint: { "layer.w": new Uint8Array(w.buffer) },
    });
    expect(model.inputs.map((t) => t.name)).toEqual(["input0"]);
    expect(model.outputs.map((t) => t.name)).toEqual(["output0"]);
    const x = f32s(n);
    const tx = await rt.allocateTensor({ size: n * 4, name: "input0" });
    await tx.write(new Uint8Array(x.buffer));
    const ins = new TensorSet();
    ins.add("input0", tx);
    await model.execute(ins, new TensorSet()); // the aliased output may be omitted
    const y = new Float32Array((await tx.read()).slice().buffer);
    expect(Array.from(y)).toEqual(Array.from(x, (v, i) => Math.fround(v + w[i])));
    await model.execute(ins, new TensorSet()); // in place again: x + 2w
    const y2 = new Float32Array((await tx.read()).slice().buffer);
    expect(y2[3]).toBe(Math.fround(y[3] + w[3]));
    await tx.free();
    await model.unload();
  }, 60_000);

  test("a metaneff that disagrees with the NEFF or misses a checkpoint key is NRT_INVALID and leaks nothing", async () => {
    const n = 8;
    const neff = oneOpNeff("relu", "relu", [spec("x", [n])], [spec("y", [n])]);
    const portal = c.resolve(PortalToken);
    const before = (await portal.memUsage(0)).allocations;
    const bad = [
      {
        input_tensors: [{ name: "a", shape: [n + 1], data_type: "float32" }],
        output_tensors: [{ name: "b", shape: [n], data_type: "float32" }],
      },
      {
        input_tensors: [{ name: "a", shape: [n], data_type: "int32" }],
        output_tensors: [{ name: "b", shape: [n], data_type: "float32" }],
      },
      {
        input_tensors: [{ name: "a", shape: [n], data_type: "float32", type: "INPUT_STATE" as const }],
        output_tensors: [{ name: "b", shape: [n], data_type: "float32" }],
      },
      {
        input_tensors: [{ name: "a", shape: [n], data_type: "float32" }],
        output_tensors: [{ name: "b", shape: [n], data_type: "float32" }],
        output_aliases_to: { "0": 3 },
      },
    ];
    for (const metaneff of bad) await expect(rt.load(neff, { metaneff })).rejects.toMatchObject({ status: 2 });
    expect((await portal.memUsage(0)).allocations).toBe(before);
  });
});
