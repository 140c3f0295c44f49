/**
 * `bench/exec.ts`: the cost of the runtime around a kernel. For a no-op kernel and for vector_add at 1 MiB per
 * tensor it measures, in one process run, the median time of `Model.execute` (doorbell → sequencer → DMA → 8 Q7
 * Workers → DRAIN → completion record → host poll) and of the same kernel invoked directly on a bare 8-Worker
 * `Q7Cluster` (copy inputs into the Q7 memory, dispatch, copy the output out), and prints their ratio.
 *
 * Run: `bun bench/exec.ts` or `deno run -A bench/exec.ts` (`RUNS=500` to change the sample count).
 *
 * @module
 */
import "reflect-metadata";
import { MemoryLogger, Portal, Runtime, TensorPlacement, TensorSet } from "@nrt/core";
import { createNrtContainer } from "@nrt/cli";
import { CAYMAN_SPEC, caymanStockPoolUcode } from "@nrt/arch-cayman";
import { Q7Cluster } from "../packages/device-sim/q7/q7_cluster.ts";
import { readFileSync } from "node:fs";
import { oneOpNeff } from "../tests/_kernels.ts";
import { RUNS, timeUs } from "./_timing.ts";

const kernel = (n: string) => new Uint8Array(readFileSync(new URL(`../kernels/wasm/${n}.wasm`, import.meta.url)));


const CASES = [{ name: "noop", fn: "noop", n: 16, ins: 1 }, { name: "vector_add", fn: "vector_add", n: (1 << 20) / 4, ins: 2 }];
const SBUF = 0x200000;
const inputData = (n: number) => new Uint8Array(new Float32Array(n).fill(1.5).buffer);

// Each side runs with only its own 8 Workers alive: parked Workers of the other side measurably slow a dispatch
// (about 15 µs here), so the runtime side runs first, its device is closed, then the bare cluster runs.
const runtimeUs: number[] = [];
{
  const container = createNrtContainer();
  const rt = await Runtime.init({ container, visibleCores: [0, 1], logger: new MemoryLogger() });
  try {
    for (const c of CASES) {
      const names = ["a", "b"].slice(0, c.ins);
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [c.n] });
      const model = await rt.load(oneOpNeff(c.name, c.fn, names.map(f32), [f32("out")]));
      const ins = new TensorSet(), outs = new TensorSet();
      for (const n of names) {
        const t = await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, c.n * 4, n);
        await t.write(inputData(c.n));
        ins.add(n, t);
      }
      outs.add("out", await rt.allocateTensor(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, c.n * 4, "out"));
      runtimeUs.push(await timeUs(() => model.execute(ins, outs)));
      await model.unload();
    }
  } finally {
    await rt.close();
    await container.resolve(Portal).close();
  }
}

// The same kernels invoked directly on 8 Workers: inputs copied into the Q7 memory, dispatch, output copied out.
const directUs: number[] = [];
{
  const cluster = await Q7Cluster.create({ sbufBytes: CAYMAN_SPEC.sbufBytesPerCore });
  try {
    await cluster.boot(caymanStockPoolUcode());
    for (const c of CASES) {
      await cluster.prepare(c.name, kernel(c.name));
      const mem = new Uint8Array(cluster.memory.buffer);
      const bytes = c.n * 4;
      const host = Array.from({ length: c.ins }, () => inputData(c.n));
      const desc = (k: number) => ({ addr: SBUF + k * bytes, bytes, dtype: 0, dims: [c.n] });
      const args = { inputs: host.map((_, k) => desc(k)), outputs: [desc(c.ins)], ints: [] };
      const out = new Uint8Array(bytes);
      directUs.push(await timeUs(async () => {
        host.forEach((h, k) => mem.set(h, SBUF + k * bytes));
        await cluster.dispatch({ key: c.name, fn: c.fn, totalCpus: 8, args });
        out.set(mem.subarray(SBUF + c.ins * bytes, SBUF + (c.ins + 1) * bytes));
      }));
    }
  } finally {
    cluster.terminate();
  }
}

const rows = CASES.map((c, i) => ({
  case: c.name === "noop" ? "noop" : "vector_add 1 MiB",
  runtime_us: Math.round(runtimeUs[i]),
  direct_us: Math.round(directUs[i]),
  ratio: +(runtimeUs[i] / directUs[i]).toFixed(2),
}));
console.log(`nrt_execute vs direct 8-Worker dispatch, median of ${RUNS} runs each (${(globalThis as { Bun?: unknown }).Bun ? "bun" : "deno"})`);
console.table(rows);
