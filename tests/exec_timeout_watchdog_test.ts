/**
 * The simulated device's watchdog gets the runtime's `NEURON_RT_EXEC_TIMEOUT` (docs/faults.md: "Give the watchdog
 * the runtime's budget"): in the embedded simulator `createNrtContainer` builds, and in `nrt device-sim` (its
 * environment or `--exec-timeout`). With a short budget, the run the runtime gave up on (5) is dropped by the device at
 * the same budget, so the next execute on that core runs; with a budget above the 30 s default, the device does not
 * drop a run the runtime still waits for. Host and device clocks are virtual (`VirtualClock`, `sim.elapse`): no test
 * waits for a budget, and a model's budget never elapses unless the test moves the clock.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryLogger, NrtError, NrtStatus, Runtime, VirtualClock } from "@nrt/core";
import type { DeviceSimPortal } from "@nrt/device-sim";
import {
  createNrtContainer,
  nrtPlugins,
  PortalToken,
  resolvedExecTimeoutMs,
  SHIPPED_ARCH_PACKS,
} from "../packages/cli/container.ts";
import { parseDeviceDaemonArgs, startDeviceDaemon } from "../packages/cli/device_daemon.ts";
import { connectDeviceDaemon } from "../packages/cli/transports.ts";
import { exec, load, RELU_NEFF, until } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const SPIN_NEFF = oneOpNeff("faults", "spin", [f32("x", 64)], [f32("y", 64)]);

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** `p`, or `what` when it has not settled after `ms` of real time (a hang guard, not a measurement). */
function guard<T>(p: Promise<T>, ms: number, what: string): Promise<T | string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<string>((r) => (timer = setTimeout(() => r(what), ms))),
  ]);
}

/** A runtime on `portal` with one logical core per NeuronCore, on core 0 only, on a virtual clock. */
async function runtimeOn(
  plugins: Pick<Parameters<typeof Runtime.init>[0], "portal" | "archPacks">,
  env: Record<string, string>,
): Promise<{ rt: Runtime; clock: VirtualClock }> {
  const clock = new VirtualClock();
  const rt = await Runtime.init({
    ...plugins,
    env,
    clock,
    visibleCores: [0],
    virtualCoreSize: 1,
    logger: new MemoryLogger(),
  });
  return { rt, clock };
}

/**
 * A spinning kernel under a 2 s budget returns 5, then a healthy model on the same core executes with 0 — without the
 * virtual clock moving again, so it can only end by completing, within its budget.
 */
async function spinThenHealthy(rt: Runtime, clock: VirtualClock, sim: DeviceSimPortal): Promise<void> {
  const ok = await load(rt, RELU_NEFF, 0);
  expect(await exec(ok)).toBe(NrtStatus.NRT_SUCCESS);
  const spin = await load(rt, SPIN_NEFF, 0);
  const timedOut = exec(spin);
  await until(() => clock.pendingSleepers > 0 && sim.q7Busy(0, 0), "the kernel to spin");
  await sim.elapse(0, 2_000); // the device's clock reaches the budget
  await clock.advance(2_000); // and the host's
  expect(await timedOut).toBe(NrtStatus.NRT_TIMEOUT);
  expect(await guard(exec(ok), 20_000, "still queued behind the spinning run")).toBe(NrtStatus.NRT_SUCCESS);
  expect(sim.sequencerFaults(0, 0).some((f) => f.message.startsWith("watchdog: "))).toBe(true);
}

describe("the device watchdog has the runtime's NEURON_RT_EXEC_TIMEOUT", () => {
  test("resolvedExecTimeoutMs(): the option, else NEURON_RT_EXEC_TIMEOUT, else 30 s; a refused value gives 30 s", () => {
    expect(resolvedExecTimeoutMs()).toBe(30_000);
    expect(resolvedExecTimeoutMs({ env: { NEURON_RT_EXEC_TIMEOUT: "2" } })).toBe(2_000);
    expect(resolvedExecTimeoutMs({ env: { NEURON_RT_EXEC_TIMEOUT: "2" }, execTimeoutSeconds: 600 })).toBe(600_000);
    expect(resolvedExecTimeoutMs({ env: { NEURON_RT_EXEC_TIMEOUT: "soon" } })).toBe(30_000);
  });

  test(
    "createNrtContainer: after a spinning kernel's 5 under a 2 s budget, a healthy model on that core runs",
    async () => {
      const env = { NEURON_RT_EXEC_TIMEOUT: "2" };
      const container = createNrtContainer({ env });
      const sim = container.resolve(PortalToken) as DeviceSimPortal;
      const { rt, clock } = await runtimeOn(nrtPlugins(container), env);
      cleanups.push(() => rt.close());
      await spinThenHealthy(rt, clock, sim);
    },
    60_000,
  );

  test(
    "createNrtContainer: under a 60 s budget the device does not drop a run at 30 s, and drops it at 60 s",
    async () => {
      const env = { NEURON_RT_EXEC_TIMEOUT: "60" };
      const container = createNrtContainer({ env });
      const sim = container.resolve(PortalToken) as DeviceSimPortal;
      const { rt, clock } = await runtimeOn(nrtPlugins(container), env);
      cleanups.push(() => rt.close());
      const spin = await load(rt, SPIN_NEFF, 0);
      let settled = false;
      const timedOut = exec(spin).finally(() => (settled = true));
      await until(() => clock.pendingSleepers > 0 && sim.q7Busy(0, 0), "the kernel to spin");
      const dropped = () => sim.sequencerFaults(0, 0).some((f) => f.message.startsWith("watchdog: "));
      await sim.elapse(0, 30_000);
      expect(dropped()).toBe(false);
      expect(sim.q7Busy(0, 0)).toBe(true);
      await sim.elapse(0, 30_000);
      expect(dropped()).toBe(true);
      expect(settled).toBe(false); // the host's own budget decides what the execute returns
      await clock.advance(60_000);
      expect(await timedOut).toBe(NrtStatus.NRT_TIMEOUT);
    },
    60_000,
  );

  for (
    const [how, args, env] of [
      ["NEURON_RT_EXEC_TIMEOUT in its environment", [], { NEURON_RT_EXEC_TIMEOUT: "2" }],
      ["--exec-timeout 2", ["--exec-timeout", "2"], { NEURON_RT_EXEC_TIMEOUT: "30" }],
      ["--exec-timeout 2 --agents device", ["--exec-timeout", "2", "--agents", "device"], {}],
    ] as const
  ) {
    test(`nrt device-sim with ${how}: after a spinning kernel's 5, a healthy model on that core runs`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-watchdog-"));
      cleanups.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
      const path = join(dir, "d.sock");
      const options = parseDeviceDaemonArgs(["--socket", path, ...args])!;
      const running = await startDeviceDaemon({ ...options, env, log: () => {} });
      cleanups.push(() => running.stop());
      const portal = await connectDeviceDaemon({ path });
      // The runtime processes' budget is 2 s either way.
      const { rt, clock } = await runtimeOn({ portal, archPacks: SHIPPED_ARCH_PACKS }, { NEURON_RT_EXEC_TIMEOUT: "2" });
      cleanups.push(() => rt.close());
      await spinThenHealthy(rt, clock, running.sim);
    }, 60_000);
  }

  test("nrt device-sim refuses a NEURON_RT_EXEC_TIMEOUT the runtime refuses, naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-watchdog-"));
    try {
      const start = startDeviceDaemon({
        address: { path: join(dir, "d.sock") },
        env: { NEURON_RT_EXEC_TIMEOUT: "0" },
        log: () => {},
      });
      await expect(start).rejects.toThrow(NrtError);
      await expect(start).rejects.toThrow('Invalid NEURON_RT_EXEC_TIMEOUT "0"');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
