/** `nrt device-sim`: the bound on `--devices`, the watchdog's `--exec-timeout` and where the device runs (`--agents`). */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { oneOpNeff } from "../../tests/_kernels.ts";
import { SHIPPED_ARCH_PACKS } from "./container.ts";
import { connectDeviceDaemon } from "./transports.ts";
import { runNrt } from "../../tests/_cli.ts";
import { UsageError } from "./command_args.ts";
import {
  DEVICE_SIM_COMMAND,
  MAX_SIMULATED_DEVICES,
  parseDeviceDaemonArgs,
  startDeviceDaemon,
} from "./device_daemon.ts";

const refused = (why: string) => new UsageError(`Cannot parse nrt device-sim arguments: ${why}`);

describe("nrt device-sim --devices", () => {
  test("takes 1 to 16 devices, as many as the largest Trn and Inf instances have", () => {
    expect(MAX_SIMULATED_DEVICES).toBe(16);
    expect(parseDeviceDaemonArgs(["--port", "0", "--devices", "16"])?.devices).toBe(16);
    expect(parseDeviceDaemonArgs(["--port", "0", "--devices", "1"])?.devices).toBe(1);
    for (const n of ["17", "1000", "9007199254740991"]) {
      expect(() => parseDeviceDaemonArgs(["--port", "0", "--devices", n])).toThrow(
        refused(`--devices ${n} is not an integer from 1 to 16`),
      );
    }
  });

  test("nrt device-sim --devices 1000 exits 2 with one line and the usage, before simulating anything", async () => {
    const r = await runNrt(["device-sim", "--port", "0", "--devices", "1000"]);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `Cannot parse nrt device-sim arguments: --devices 1000 is not an integer from 1 to 16\nUsage: ${DEVICE_SIM_COMMAND.usage}`,
    );
    expect(r.out).toBe("");
  });

  test("--help names the bound", async () => {
    const r = await runNrt(["device-sim", "--help"]);
    expect(r.out).toMatch(/^ +--devices N +simulated devices, 1 to 16 /m);
  });
});

describe("nrt device-sim --exec-timeout", () => {
  test("takes whole seconds from 1 to INT_MAX, as NEURON_RT_EXEC_TIMEOUT does; absent, the environment decides", () => {
    expect(parseDeviceDaemonArgs(["--socket", "/tmp/x.sock", "--exec-timeout", "2"])?.execTimeoutSeconds).toBe(2);
    expect(parseDeviceDaemonArgs(["--socket", "/tmp/x.sock"])?.execTimeoutSeconds).toBeUndefined();
    for (const s of ["0", "1.5", "2147483648", "-1"]) {
      expect(() => parseDeviceDaemonArgs(["--port", "0", "--exec-timeout", s])).toThrow(
        refused(`--exec-timeout ${s} is not an integer from 1 to 2147483647`),
      );
    }
  });

  test("--help lists it with its default", async () => {
    const r = await runNrt(["device-sim", "--help"]);
    expect(r.out).toMatch(/^ +--exec-timeout S +the device watchdog: .*\(default: NEURON_RT_EXEC_TIMEOUT, else 30\)$/m);
  });
});

describe("nrt device-sim --agents", () => {
  test("takes inline, device or core; absent, the daemon runs the device inline", () => {
    for (const m of ["inline", "device", "core"]) {
      expect(parseDeviceDaemonArgs(["--socket", "/tmp/x.sock", "--agents", m])?.agents).toBe(m);
    }
    expect(parseDeviceDaemonArgs(["--socket", "/tmp/x.sock"])?.agents).toBeUndefined();
    for (const m of ["Inline", "worker", ""]) {
      expect(() => parseDeviceDaemonArgs(["--port", "0", "--agents", m])).toThrow(
        refused(`--agents ${m} is not one of inline, device, core`),
      );
    }
  });

  for (const [given, runs] of [[undefined, "inline"], ["device", "device"], ["core", "core"]] as const) {
    test(
      `a daemon started with ${given ?? "no --agents"} runs its device ${runs} and executes over the socket`,
      async () => {
        const dir = mkdtempSync(join(tmpdir(), "nrt-agents-"));
        const path = join(dir, "d.sock");
        const running = await startDeviceDaemon({ address: { path }, agents: given, log: () => {} });
        try {
          expect(running.sim.agents).toBe(runs);
          const portal = await connectDeviceDaemon({ path });
          const rt = await Runtime.init({ portal, archPacks: SHIPPED_ARCH_PACKS, logger: new MemoryLogger() });
          try {
            const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
            const model = await rt.load(oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
            const x = await rt.allocateTensor({ size: 32, name: "x" });
            const y = await rt.allocateTensor({ size: 32, name: "y" });
            await x.write(new Float32Array([-1, 2, -3, 4, -5, 6, -7, 8]));
            const ins = new TensorSet(), outs = new TensorSet();
            ins.add("x", x);
            outs.add("y", y);
            // Enough executes for relu to be learned quick and run on the device's own thread from then on.
            for (let i = 0; i < 5; i++) await model.execute(ins, outs);
            const out = await y.read();
            expect([...new Float32Array(out.buffer, out.byteOffset, 8)]).toEqual([0, 2, 0, 4, 0, 6, 0, 8]);
          } finally {
            await rt.close();
          }
        } finally {
          await running.stop();
          rmSync(dir, { recursive: true, force: true });
        }
      },
      60_000,
    );
  }

  test("--help lists it with its default", async () => {
    const r = await runNrt(["device-sim", "--help"]);
    expect(r.out).toMatch(/^ +--agents M +where the device runs: inline \(default: on the daemon's main thread\), /m);
  });
});
