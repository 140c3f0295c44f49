/** `nrt device-sim`: the bound on `--devices` and the watchdog's `--exec-timeout`. */
import { describe, expect, test } from "bun:test";
import { runNrt } from "../../tests/_cli.ts";
import { UsageError } from "./command_args.ts";
import { DEVICE_SIM_COMMAND, MAX_SIMULATED_DEVICES, parseDeviceDaemonArgs } from "./device_daemon.ts";

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
