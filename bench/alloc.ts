/**
 * What one execute allocates on the host's thread (and, on Bun, on the device's), against the limit with nothing of
 * ours: a bare Worker that applies relu to 8 floats over one SharedArrayBuffer (`_bare_device.ts`: a store, a notify,
 * an `Atomics.waitAsync` back). The execute is the one a server makes per request: a relu FP32[8] model with host
 * tensors (input written, output read back), the device agent in its Worker. Garbage per execute is what the host's
 * collector must sweep (an eden collection stops the thread) and what an execute after an idle gap must bring back
 * into the caches.
 *
 * - Bun: JavaScript cells allocated per execute, counted from `bun:jsc`'s heap statistics over a run with no
 *   collection in it.
 * - Deno: bytes allocated per execute, from V8's sampling heap profiler (`node:inspector`, 64-byte sampling), every
 *   sample counted whether or not it was collected since.
 * - The device's thread (Bun only): the cells the device agent's thread allocates per execute
 *   (`DeviceSimPortal.agentHeapCells`, two readings around the run, the first after a collection), beside the bare
 *   Worker's own thread per call. Its collections are the device-side stalls of back-to-back executes.
 *
 * Usage: `bun bench/alloc.ts [--json]`, `deno run -A bench/alloc.ts [--json]`.
 *
 * @module
 */
import "reflect-metadata";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "../tests/_kernels.ts";
import { BareDevice } from "./_bare_device.ts";
import { emit, RUNTIME } from "./_timing.ts";

/** Allocation of `fn` per call: JS cells (Bun) or sampled bytes (Deno). */
type Meter = (fn: () => Promise<unknown>, calls: number) => Promise<number>;

/** Bun: cells per call, from the heap's per-type counts before and after (no collection runs in between). */
async function bunMeter(): Promise<{ unit: string; meter: Meter }> {
  const specifier = "bun:jsc";
  const jsc = await import(specifier) as {
    heapStats(): { objectTypeCounts: Record<string, number> };
    gcAndSweep(): void;
  };
  const cells = (): number => {
    let n = 0;
    for (const v of Object.values(jsc.heapStats().objectTypeCounts)) n += v;
    return n;
  };
  return {
    unit: "JS cells",
    meter: async (fn, calls) => {
      jsc.gcAndSweep();
      const before = cells();
      for (let i = 0; i < calls; i++) await fn();
      // The statistics object itself and its type table are a handful of cells: noise next to the calls'.
      return (cells() - before) / calls;
    },
  };
}

/** Deno: bytes per call, from V8's sampling heap profiler at a 64-byte interval. */
async function v8Meter(): Promise<{ unit: string; meter: Meter }> {
  const { Session } = await import("node:inspector/promises");
  type Node = { selfSize: number; children: Node[] };
  const total = (n: Node): number => n.selfSize + n.children.reduce((a, c) => a + total(c), 0);
  return {
    unit: "bytes",
    meter: async (fn, calls) => {
      const s = new Session();
      s.connect();
      try {
        await s.post("HeapProfiler.enable");
        await s.post("HeapProfiler.startSampling", {
          samplingInterval: 64,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
        for (let i = 0; i < calls; i++) await fn();
        const { profile } = await s.post("HeapProfiler.stopSampling") as { profile: { head: Node } };
        return total(profile.head) / calls;
      } finally {
        s.disconnect();
      }
    },
  };
}

const { unit, meter } = RUNTIME === "bun" ? await bunMeter() : await v8Meter();
const CALLS = RUNTIME === "bun" ? 300 : 3000;
const WARM = 3000;

const n = 8;
const f32 = (name: string) => ({ name, dtype: "float32", shape: [n] });
const container = createNrtContainer();
const rt = await Runtime.init({ ...nrtPlugins(container), logger: new MemoryLogger() });
const device = new BareDevice();
const rows = [];
try {
  const ins = new TensorSet(), outs = new TensorSet();
  const x = await rt.allocateTensor({ size: n * 4, name: "x", location: "host" });
  const y = await rt.allocateTensor({ size: n * 4, name: "y", location: "host" });
  ins.add("x", x);
  outs.add("y", y);
  const model = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
  const input = new Uint8Array(new Float32Array([-3, -2, -1, 0, 1, 2, 3, 4]).buffer);
  const execute = async () => {
    await x.write(input);
    await model.execute(ins, outs);
    return await y.read();
  };
  const values = [-3, -2, -1, 0, 1, 2, 3, 4];
  const bare = () => device.relu(values);
  for (let i = 0; i < WARM; i++) await execute();
  for (let i = 0; i < WARM; i++) await bare();
  const ours = await meter(execute, CALLS);
  const limit = await meter(bare, CALLS);
  rows.push({
    case: "relu FP32[8]: write, execute, read",
    unit,
    per_execute: Math.round(ours),
    bare_worker_per_call: Math.round(limit),
    ratio: +(ours / limit).toFixed(1),
  });
  // The device's side: cells the agent's thread (and the bare Worker's) allocates per call, no collection in between.
  const portal = container.resolve(PortalToken);
  if (portal instanceof DeviceSimPortal) {
    const onDevice = async (count: (collect: boolean) => Promise<number | undefined>, fn: () => Promise<unknown>) => {
      const before = await count(true);
      for (let i = 0; i < CALLS; i++) await fn();
      const after = await count(false);
      return before === undefined || after === undefined ? undefined : (after - before) / CALLS;
    };
    const agent = await onDevice((c) => portal.agentHeapCells(0, 0, c), execute);
    const bareThread = await onDevice((c) => device.heapCells(c), bare);
    if (agent !== undefined && bareThread !== undefined) {
      rows.push({
        case: "the device's thread, same calls",
        unit,
        per_execute: Math.round(agent),
        bare_worker_per_call: Math.round(bareThread),
        ratio: +(agent / Math.max(bareThread, 1)).toFixed(1),
      });
    }
  }
  await model.unload();
} finally {
  device.close();
  await rt.close();
  await container.resolve(PortalToken).close();
}
emit(
  "alloc",
  `Allocation per execute on the host's thread (on Bun also on the device's) ÷ a bare Worker's relu over one ` +
    `SharedArrayBuffer (${unit}; nothing of ours)`,
  rows,
);
