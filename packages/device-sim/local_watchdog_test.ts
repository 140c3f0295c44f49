import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { DOORBELL_RING_BYTES } from "./device_agent.ts";
import { LocalWatchdog } from "./local_watchdog.ts";
import {
  defaultLocalOpBytes,
  type DispatchOp,
  LOCAL_LEARN_MAX_NS,
  LOCAL_UNLEARN_NS,
  localLearnNs,
  MAX_QUICK_OPS,
  Q7_LOCAL_OP_BYTES_ENV,
  Q7Cluster,
  type TensorDesc,
  WORKER_HOPS_NS,
} from "./q7/q7_cluster.ts";
import { doorbellWord, Dtype, MAILBOX, MB_DONE, SBUF_BASE } from "./q7/_abi.ts";

const kernel = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../kernels/wasm/${name}.wasm`, import.meta.url)));
const NOW = () => performance.timeOrigin + performance.now();
/** `faults.printf` with `lines` lines per core: quick with 1, endless (for a test) with 2^50. */
const printf = (lines: bigint, deadlineMs?: number) => ({
  key: "faults",
  fn: "printf",
  totalCpus: 8 as const,
  args: { inputs: [], outputs: [], ints: [lines] },
  deadlineMs,
});

async function cluster(
  quick?: Set<string>,
  dog = new LocalWatchdog(new SharedArrayBuffer(DOORBELL_RING_BYTES)),
): Promise<{ c: Q7Cluster; dog: LocalWatchdog; ring: SharedArrayBuffer }> {
  const ring = dog.ring;
  const c = await Q7Cluster.create({
    sbufBytes: 1 << 20,
    workers: 2,
    localOpBytes: 1024,
    watchdog: dog.forCore(3),
    quick,
  });
  await c.boot({ iram: kernel("stock_pool"), dram: new Uint8Array(4) });
  await c.prepare("faults", kernel("faults"));
  await c.prepare("relu", kernel("relu"));
  // The watchdog's Worker takes the cluster's memory on its own time; until then every op runs on the Workers.
  for (let i = 0; i < 5000 && !c.localReady; i++) await new Promise((r) => setTimeout(r, 1));
  expect(c.localReady).toBe(true);
  return { c, dog, ring };
}

/**
 * Runs an op (by default the quick printf) until the cluster has learned it quick (a run of a cold or preempted kernel
 * may take more than the kernel time learning asks for, `localLearnNs`); resolves once an op of it ran on this thread.
 */
async function learn(c: Q7Cluster, op: () => DispatchOp = () => printf(1n, NOW() + 60_000)): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const done = c.dispatch(op());
    const here = c.hasPending;
    c.runPending();
    await done;
    if (here) return;
  }
  throw new Error(`${op().fn} was never learned quick`);
}

/** relu over `n` floats, in and out at the start of the SBUF window, on `totalCpus` cores, with a far deadline. */
function relu(n: number, totalCpus: 1 | 8 = 8): DispatchOp {
  const t = (at: number): TensorDesc => ({ addr: SBUF_BASE + at, bytes: n * 4, dtype: Dtype.float32, dims: [n] });
  return {
    key: "relu",
    fn: "relu",
    totalCpus,
    args: { inputs: [t(0)], outputs: [t(n * 4)], ints: [] },
    deadlineMs: NOW() + 60_000,
  };
}

/** Runs `job` on another thread (the host while this one is blocked); resolves when it has acted. */
function fromAnotherThread(job: Record<string, unknown>): Promise<Worker> {
  const w = new Worker(new URL("../../tests/_local_watchdog_worker.ts", import.meta.url), { type: "module" });
  return new Promise((resolve) => {
    w.onmessage = () => resolve(w);
    w.postMessage(job);
  });
}

describe("Q7Cluster ops on the calling thread, under the local watchdog", () => {
  test("localOpBytes is an integer ≥ 0: no bound for the device agent, NRT_SIM_LOCAL_OP_BYTES sets one", async () => {
    expect(Q7_LOCAL_OP_BYTES_ENV).toBe("NRT_SIM_LOCAL_OP_BYTES");
    expect(defaultLocalOpBytes({})).toBe(9007199254740991);
    expect(defaultLocalOpBytes({ NRT_SIM_LOCAL_OP_BYTES: "0" })).toBe(0);
    expect(defaultLocalOpBytes({ NRT_SIM_LOCAL_OP_BYTES: "4096" })).toBe(4096);
    for (const text of ["-1", "1.5", "lots"]) {
      expect(() => defaultLocalOpBytes({ NRT_SIM_LOCAL_OP_BYTES: text })).toThrow(
        `NRT_SIM_LOCAL_OP_BYTES is "${text}"`,
      );
    }
    for (const localOpBytes of [-1, 0.5, Number.NaN]) {
      await expect(Q7Cluster.create({ sbufBytes: 1 << 20, workers: 1, localOpBytes })).rejects.toThrow(RangeError);
    }
  });

  test("a small op with a deadline runs on the calling thread once it has returned quickly on the Workers", async () => {
    const { c, dog } = await cluster();
    try {
      const far = NOW() + 60_000;
      // First on the Workers (the dispatch is under way, nothing is left for this thread).
      const first = c.dispatch(printf(1n, far));
      expect(c.hasPending).toBe(false);
      expect((await first).cores.map((r) => r.status)).toEqual(Array(8).fill("ok"));
      expect(c.drainStdio().length).toBe(8);
      await learn(c); // one quick run on the Workers is enough, unless the cold first one took too long
      c.drainStdio();
      // Then here: the dispatch only writes the mailbox; runPending runs it and settles it.
      const second = c.dispatch(printf(2n, far));
      expect(c.hasPending).toBe(true);
      c.runPending();
      expect(c.hasPending).toBe(false);
      expect((await second).cores.map((r) => [r.status, r.committed])).toEqual(Array(8).fill(["ok", true]));
      expect(c.drainStdio().map((e) => e.text).filter((t) => t === "line 1 from core 7\n").length).toBe(1);
      // No deadline, or more bytes than localOpBytes: the Workers.
      const noDeadline = c.dispatch(printf(1n));
      expect(c.hasPending).toBe(false);
      await noDeadline;
      expect(c.watchdogFired).toBe(false);
    } finally {
      c.terminate();
      dog.stop();
    }
  });

  test("a Worker woken for something else does not run an op left for the calling thread", async () => {
    // The race behind an mlp warm-up that hung on Deno one load in ten: a Worker that woke on a doorbell it had not
    // consumed found the mailbox of an op left for the agent's own cores and ran it too, and its late count kept the
    // next op on the Workers from ever joining. Here both Workers are woken while such an op waits for runPending.
    const { c, dog } = await cluster();
    try {
      await learn(c);
      c.drainStdio();
      const far = NOW() + 60_000;
      const op = c.dispatch(printf(1n, far));
      expect(c.hasPending).toBe(true);
      const i32 = new Int32Array(c.memory.buffer, MAILBOX);
      for (const w of [0, 1]) {
        Atomics.add(i32, doorbellWord(w), 1);
        Atomics.notify(i32, doorbellWord(w));
      }
      await new Promise((r) => setTimeout(r, 100)); // time for a Worker to take the op, if it would
      expect(Atomics.load(i32, MB_DONE)).toBe(0);
      c.runPending();
      expect((await op).cores.map((r) => r.status)).toEqual(Array(8).fill("ok"));
      expect(Atomics.load(i32, MB_DONE)).toBe(8);
      expect(c.drainStdio().map((e) => e.cpu).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]); // each core printed once
      // The next op on the Workers joins.
      expect((await c.dispatch(printf(1n))).cores.map((r) => r.status)).toEqual(Array(8).fill("ok"));
    } finally {
      c.terminate();
      dog.stop();
    }
  });

  test(
    "the watchdog stops a local op that overruns its deadline: the dispatch rejects and the cluster is terminated",
    async () => {
      const { c, dog } = await cluster();
      try {
        await learn(c);
        const endless = c.dispatch(printf(1n << 50n, NOW() + 50));
        expect(c.hasPending).toBe(true);
        c.runPending(); // blocks this thread until the watchdog sets the kill flag
        await expect(endless).rejects.toThrow("the watchdog stopped the op at its deadline");
        expect(c.watchdogFired).toBe(true);
        await expect(c.dispatch(printf(1n))).rejects.toThrow("terminated");
      } finally {
        c.terminate();
        dog.stop();
      }
    },
    20_000,
  );

  test("an elapse from the host moves the deadline of a local op past while this thread is blocked in it", async () => {
    const { c, dog, ring } = await cluster();
    let helper: Worker | undefined;
    try {
      await learn(c);
      const endless = c.dispatch(printf(1n << 50n, NOW() + 3_600_000));
      expect(c.hasPending).toBe(true);
      const acted = fromAnotherThread({ ring, action: "elapse", ms: 7_200_000, delayMs: 30 });
      c.runPending();
      const stopped = expect(endless).rejects.toThrow("deadline");
      helper = await acted;
      await stopped;
      expect(c.watchdogFired).toBe(true);
    } finally {
      helper?.terminate();
      c.terminate();
      dog.stop();
    }
  }, 20_000);

  test(
    "clusters that share a quick set run a function learned in one on the calling thread in the next; a deadline stop unlearns it",
    async () => {
      const quick = new Set<string>();
      const first = await cluster(quick);
      const second = await cluster(quick, first.dog);
      try {
        await learn(first.c); // learned on the first cluster
        expect([...quick]).toEqual(["faults\u0000printf\u00000/8"]); // the function, its tensor bytes, its fan-out
        const local = second.c.dispatch(printf(1n, NOW() + 60_000));
        expect(second.c.hasPending).toBe(true); // the second cluster's first op of it: here
        second.c.runPending();
        expect((await local).cores.every((r) => r.status === "ok")).toBe(true);
        const endless = second.c.dispatch(printf(1n << 50n, NOW() + 50));
        second.c.runPending();
        await expect(endless).rejects.toThrow("deadline");
        expect(quick.size).toBe(0); // the next op of printf goes to the Workers first
        first.c.dispatch(printf(1n, NOW() + 60_000)).catch(() => {});
        expect(first.c.hasPending).toBe(false);
      } finally {
        first.c.terminate();
        second.c.terminate();
        first.dog.stop();
      }
    },
    20_000,
  );

  test("an op's shape is what is learned: other tensor bytes or fan-out go to the Workers first", async () => {
    const { c, dog } = await cluster();
    try {
      await learn(c, () => relu(16));
      for (const op of [relu(32), relu(16, 1)]) {
        const other = c.dispatch(op);
        expect({ n: op.args.inputs[0].bytes / 4, cpus: op.totalCpus, here: c.hasPending }).toEqual({
          n: op.args.inputs[0].bytes / 4,
          cpus: op.totalCpus,
          here: false,
        });
        expect((await other).cores.filter((r) => r.ran).every((r) => r.status === "ok")).toBe(true);
      }
      const again = c.dispatch(relu(16)); // the learned shape still runs here
      expect(c.hasPending).toBe(true);
      c.runPending();
      expect((await again).cores.every((r) => r.status === "ok")).toBe(true);
    } finally {
      c.terminate();
      dog.stop();
    }
  });

  test("a quick set keeps at most 4096 ops, dropping the oldest", async () => {
    expect(MAX_QUICK_OPS).toBe(4096);
    const quick = new Set(Array.from({ length: 4096 }, (_, i) => `old ${i}`));
    const { c, dog } = await cluster(quick);
    try {
      await learn(c);
      expect(quick.size).toBe(4096);
      expect(quick.has("old 0")).toBe(false);
      expect(quick.has("old 1")).toBe(true);
      expect(quick.has("faults\u0000printf\u00000/8")).toBe(true);
    } finally {
      c.terminate();
      dog.stop();
    }
  });

  test("an op is learned quick under hops × p / (p − 1), p = min(Workers, CPUs, fan-out), at most 1 ms", () => {
    expect(WORKER_HOPS_NS).toBe(100_000);
    expect(LOCAL_LEARN_MAX_NS).toBe(1_000_000);
    expect(LOCAL_UNLEARN_NS).toBe(10_000_000); // and back to the Workers past 10 ms
    expect(localLearnNs(2, 2)).toBe(200_000);
    expect(localLearnNs(8, 2)).toBe(200_000); // 8 Workers on 2 CPUs run 2 at a time
    expect(localLearnNs(4, 4)).toBe(133_333);
    expect(localLearnNs(8, 8)).toBe(114_286);
    expect(localLearnNs(8, 16)).toBe(114_286);
    expect(localLearnNs(1, 8)).toBe(1_000_000); // one Worker gains nothing from parallelism
    expect(localLearnNs(2, 1)).toBe(1_000_000);
    expect(localLearnNs(8, 8, 1)).toBe(1_000_000); // an op on one core runs on one Worker
    expect(localLearnNs(8, 8, 8)).toBe(114_286);
  });

  for (const action of ["reset", "close"] as const) {
    test(
      `a ${action} from the host stops a local op at once; its dispatch then waits for the caller to give up`,
      async () => {
        const { c, dog, ring } = await cluster();
        let helper: Worker | undefined;
        try {
          await learn(c);
          const controller = new AbortController();
          const endless = c.dispatch(printf(1n << 50n, NOW() + 3_600_000), controller.signal);
          expect(c.hasPending).toBe(true);
          // A reset of another NeuronCore's cores would leave this one alone; this cluster is NeuronCore 3's.
          const acted = fromAnotherThread({ ring, action, nc: 3, delayMs: 30 });
          c.runPending();
          helper = await acted;
          expect(c.watchdogFired).toBe(false);
          controller.abort(new Error("dropped"));
          await expect(endless).rejects.toThrow("dropped");
          await expect(c.dispatch(printf(1n))).rejects.toThrow("terminated");
        } finally {
          helper?.terminate();
          c.terminate();
          dog.stop();
        }
      },
      20_000,
    );
  }
});
