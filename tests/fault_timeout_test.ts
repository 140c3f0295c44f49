import { afterAll, describe, expect, test } from "bun:test";
import { NrtStatus, SystemClock } from "@nrt/core";
import { exec, execHung, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const SPIN_NEFF = oneOpNeff("faults", "spin", [f32("x", 64)], [f32("y", 64)]);

/** A 1 s budget on the real clock, with relu and spin loaded on core 0 and relu run once. */
async function realClockPair() {
  const h = await harness({ visibleCores: [0], execTimeoutSeconds: 1, clock: new SystemClock() });
  const ok = await load(h.rt, RELU_NEFF, 0);
  const spin = await load(h.rt, SPIN_NEFF, 0);
  expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
  return { h, ok, spin };
}

describe("NEURON_RT_EXEC_TIMEOUT (seed lifecycle-error-model §5.4)", () => {
  for (const seconds of [1, 30, 600]) {
    test(
      `a hang under a ${seconds} s budget yields NRT_TIMEOUT at exactly ${seconds * 1000} ms of virtual time`,
      async () => {
        const h = await harness({ visibleCores: [0], execTimeoutSeconds: seconds });
        try {
          const l = await load(h.rt, RELU_NEFF, 0);
          h.sim.faults.inject({ kind: "hang", nc: 0, atExecution: 1 });
          const { status, waitedMs } = await execHung(h, l, seconds * 1000);
          expect(status).toBe(NrtStatus.NRT_TIMEOUT);
          expect(waitedMs).toBe(seconds * 1000);
          expect(h.log.messages()).toContain(
            `(FATAL-RT-UNDEFINED-STATE) [ND 0][NC 0] execution timeout (${
              seconds * 1000
            } ms) on model relu.neff, waiting for execution completion notification`,
          );
          expect(h.clock.pendingSleepers).toBe(0);
          expect(h.sim.notificationWaiters(0, 0)).toBe(0);
          // The hung run was dropped by the device's own watchdog (the host wrote nothing): the sequencer is idle again.
          await h.sim.whenIdle(0, 0);
          expect(h.sim.sequencerFaults(0, 0).some((f) => f.message.startsWith("watchdog: "))).toBe(true);
        } finally {
          await h.rt.close();
        }
      },
      30_000,
    );
  }

  test("100 hangs across the three budgets each end at exactly their budget on the virtual clock", async () => {
    for (const seconds of [1, 30, 600]) {
      const h = await harness({ visibleCores: [0], execTimeoutSeconds: seconds });
      try {
        const n = seconds === 600 ? 34 : 33;
        for (let i = 0; i < n; i++) {
          const l = await load(h.rt, RELU_NEFF, 0);
          h.sim.faults.inject({ kind: "hang", nc: 0, atExecution: 1 });
          const { status, waitedMs } = await execHung(h, l, seconds * 1000);
          expect([status, waitedMs]).toEqual([NrtStatus.NRT_TIMEOUT, seconds * 1000]);
          await l.model.unload();
        }
      } finally {
        await h.rt.close();
      }
    }
  }, 30_000);

  test(
    "an endless kernel loop times out on the virtual clock; the device stops its Q7 Workers and boots fresh ones",
    async () => {
      const h = await harness({ visibleCores: [0] });
      try {
        const spin = await load(h.rt, SPIN_NEFF, 0);
        // Let the kernel really spin on the 8 cores before the budget runs out.
        const { status } = await execHung(h, spin, 30_000, () => h.sim.q7Busy(0, 0));
        expect(status).toBe(NrtStatus.NRT_TIMEOUT);
        // The device's watchdog stopped the spinning cores; the host wrote no stream table (no halt) on the fault path.
        expect(h.sim.q7Events().filter((e) => e.kind === "cluster-terminated").map((e) => e.detail)).toEqual([
          "watchdog",
        ]);
        // The device recovers the engine by itself (ours): a fresh cluster boots from the released image, no host call.
        await h.sim.whenIdle(0, 0);
        expect(h.sim.q7Started(0, 0)).toBe(true);
        expect(h.sim.q7Busy(0, 0)).toBe(false);
        expect(h.sim.q7Events().map((e) => e.kind).slice(-2)).toEqual(["cluster-terminated", "cluster-started"]);
        const streamWrites = (): number =>
          h.trace.entries.filter((e) => e.op === "barWrite" && e.target >= 0x4000 && e.target < 0x5000).length;
        // NRT_TIMEOUT is Band A: not fail-stop (seed lifecycle-error-model §4.1). The model is re-runnable: the next
        // execute really rings the doorbell, spins again on a fresh cluster, and times out again.
        expect(h.rt.poisonedStatus(spin.model)).toBeUndefined();
        h.trace.clear();
        const again = await execHung(h, spin, 30_000, () => h.sim.q7Busy(0, 0));
        expect(again.status).toBe(NrtStatus.NRT_TIMEOUT);
        expect(h.trace.entries.filter((e) => e.op === "semaphoreIncrement").length).toBe(1);
        expect(streamWrites()).toBe(0);
        await h.sim.whenIdle(0, 0);
        expect(h.sim.q7Events().filter((e) => e.kind === "cluster-terminated").map((e) => e.detail)).toEqual([
          "watchdog",
          "watchdog",
        ]);
        expect(h.sim.q7Events().filter((e) => e.kind === "cluster-started")).toHaveLength(3);
        await spin.model.unload();
        const ok = await load(h.rt, RELU_NEFF, 0);
        expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
      } finally {
        await h.rt.close();
      }
    },
    30_000,
  );

  test("on the real clock, a real endless loop is stopped after the 1 s budget", async () => {
    const h = await harness({ visibleCores: [0], execTimeoutSeconds: 1, clock: new SystemClock() });
    try {
      const spin = await load(h.rt, SPIN_NEFF, 0);
      const t0 = performance.now();
      const p = exec(spin);
      const spinning = await new Promise<boolean>((resolve) => {
        const poll = () => (h.sim.q7Busy(0, 0) ? resolve(true) : setTimeout(poll, 5));
        poll();
      });
      expect(spinning).toBe(true);
      expect(await p).toBe(NrtStatus.NRT_TIMEOUT);
      const took = performance.now() - t0;
      expect(took).toBeGreaterThanOrEqual(990);
      expect(took).toBeLessThan(10_000);
      // The device's own watchdog (same 1 s budget, counted from the doorbell) stops the cores, then boots fresh
      // ones.
      await h.sim.whenIdle(0, 0);
      expect(h.sim.q7Events().filter((e) => e.kind === "cluster-terminated").map((e) => e.detail)).toEqual([
        "watchdog",
      ]);
      expect(h.sim.q7Started(0, 0)).toBe(true);
      const ok = await load(h.rt, RELU_NEFF, 0);
      expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
    } finally {
      await h.rt.close();
    }
  }, 30_000);

  test(
    "on the real clock, the device boots a fresh Q7 cluster after a hang, before the next execute asks for it",
    async () => {
      // A timeout does not poison the core's models. The device boots the replacement cluster as soon as its watchdog
      // stops the hung one (ours), so the next execute of a model left loaded on the core finds it running and does
      // not pay that boot inside its own budget.
      const { h, ok, spin } = await realClockPair();
      try {
        expect(await exec(spin)).toBe(NrtStatus.NRT_TIMEOUT);
        await h.sim.whenIdle(0, 0);
        const kinds = () => h.sim.q7Events().map((e) => e.kind);
        expect(kinds().slice(-2)).toEqual(["cluster-terminated", "cluster-started"]);
        expect(h.sim.q7Started(0, 0)).toBe(true);
        const before = kinds().length;
        expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
        expect(kinds().length).toBe(before); // no cluster booted for this execute
      } finally {
        await h.rt.close();
      }
    },
    30_000,
  );

  test(
    "the device's watchdog timer, left pending by a quick run, stops a later hang at that hang's own deadline",
    async () => {
      // The device keeps one watchdog timer across runs (ours): the quick run leaves it due 1 s after its doorbell, and
      // the spin rung 500 ms later must be stopped 1 s after its own doorbell, not when the old timer fires.
      const { h, spin } = await realClockPair();
      try {
        await new Promise((r) => setTimeout(r, 500));
        const t0 = performance.now();
        const p = exec(spin);
        const busy = (want: boolean) =>
          new Promise<number>((resolve) => {
            const poll = () => (h.sim.q7Busy(0, 0) === want ? resolve(performance.now()) : setTimeout(poll, 2));
            poll();
          });
        await busy(true);
        const stopped = await busy(false);
        expect(stopped - t0).toBeGreaterThanOrEqual(990);
        expect(stopped - t0).toBeLessThan(10_000);
        expect(await p).toBe(NrtStatus.NRT_TIMEOUT);
        await h.sim.whenIdle(0, 0);
        expect(h.sim.q7Events().filter((e) => e.kind === "cluster-terminated").map((e) => e.detail)).toEqual([
          "watchdog",
        ]);
        expect(h.sim.q7Busy(0, 0)).toBe(false);
      } finally {
        await h.rt.close();
      }
    },
    30_000,
  );
});
