/**
 * `bench/collectives.ts`: what a collective on the simulated device costs against a plain copy of the same bytes.
 * One process, side by side: the median time of a float32 sum all-reduce of 1 MiB per rank over 4 logical cores
 * (every byte through the device's DMA queues, `docs/collectives.md`), of a device-to-device tensor copy of 1 MiB
 * (`nrt_tensor_copy`: through the host), of an all-gather in which each rank's DMA queues copy 1 MiB (4 × 256 KiB, the
 * ranks in parallel: the device's plain-copy rate), and of a host `Uint8Array.set` of 1 MiB. Prints the bytes the DMA
 * queues moved per run.
 *
 * Run: `bun bench/collectives.ts` or `deno run -A bench/collectives.ts` (`RUNS=50` to change the sample count).
 *
 * @module
 */
import { cayman } from "@nrt/arch-cayman";
import { MemoryLogger, Runtime } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "../tests/_kernels.ts";
import { emit, timeUs } from "./_timing.ts";

const RUNS_HERE = Number(
  (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.RUNS ?? 50,
);
const MIB = 1 << 20, RANKS = 4;

const sim = new DeviceSimPortal();
const rt = await Runtime.init({
  portal: sim,
  archPacks: [cayman],
  visibleCores: [0, 1, 2, 3],
  virtualCoreSize: 1,
  logger: new MemoryLogger(),
});
try {
  const neff = oneOpNeff(
    "relu",
    "relu",
    [{ name: "x", dtype: "float32", shape: [64] }],
    [{ name: "y", dtype: "float32", shape: [64] }],
    8,
    [],
    "cayman",
  );
  for (let v = 0; v < RANKS; v++) await rt.loadCollectives(neff, { vnc: v });
  const ins = await Promise.all(
    [...Array(RANKS).keys()].map((v) => rt.allocateTensor({ size: MIB, vnc: v, name: `in${v}` })),
  );
  const outs = await Promise.all(
    [...Array(RANKS).keys()].map((v) => rt.allocateTensor({ size: MIB, vnc: v, name: `out${v}` })),
  );
  for (const t of ins) await t.write(new Uint8Array(Float32Array.from({ length: MIB / 4 }, (_, i) => i % 1000).buffer));
  const ar = await rt.collectives.prepare({ op: "all-reduce", count: MIB / 4, inputs: ins, outputs: outs });
  const allReduce = await timeUs(() => ar.run(), RUNS_HERE);
  const ag = await rt.collectives.prepare({ op: "all-gather", count: MIB / 16, inputs: ins, outputs: outs });
  const allGather = await timeUs(() => ag.run(), RUNS_HERE);
  await ag.release();
  const tensorCopy = await timeUs(() => outs[0].copyFrom(ins[0]), RUNS_HERE);
  const src = new Uint8Array(MIB), dst = new Uint8Array(MIB);
  const hostCopy = await timeUs(() => Promise.resolve(dst.set(src)), RUNS_HERE);
  await ar.release();
  emit("collectives", "1 MiB float32 per rank, 4 logical cores of a simulated Cayman", [
    {
      what: "all-reduce (sum)",
      us: Math.round(allReduce),
      dmaBytesPerRun: ar.bytesPerRun,
      ratioToTensorCopy: +(allReduce / tensorCopy).toFixed(2),
    },
    {
      what: "all-gather: each rank DMA-copies 1 MiB",
      us: Math.round(allGather),
      dmaBytesPerRun: 4 * MIB,
      ratioToTensorCopy: +(allGather / tensorCopy).toFixed(2),
    },
    {
      what: "nrt_tensor_copy 1 MiB (device → device)",
      us: Math.round(tensorCopy),
      dmaBytesPerRun: 0,
      ratioToTensorCopy: 1,
    },
    {
      what: "host Uint8Array.set 1 MiB",
      us: Math.round(hostCopy),
      dmaBytesPerRun: 0,
      ratioToTensorCopy: +(hostCopy / tensorCopy).toFixed(3),
    },
  ]);
} finally {
  await rt.close();
}
