/** `nrt device-sim` command-line parsing and daemon addresses. */
import { describe, expect, test } from "bun:test";
import { UsageError } from "../packages/cli/command_args.ts";
import { parseDeviceDaemonArgs } from "../packages/cli/device_daemon.ts";
import { formatAddress, parseAddress } from "../packages/cli/transports.ts";

describe("nrt device-sim arguments", () => {
  test("parseDeviceDaemonArgs() takes a socket path or a loopback port, and the simulated silicon", () => {
    expect(parseDeviceDaemonArgs(["--socket", "/tmp/x.sock", "--arch", "trn1"])).toEqual({
      address: { path: "/tmp/x.sock" },
      arch: "trn1",
      devices: undefined,
      hbmBytes: undefined,
    });
    expect(parseDeviceDaemonArgs(["--port", "0", "--devices", "2"])?.address).toEqual({
      port: 0,
      hostname: "127.0.0.1",
    });
  });

  test("parseDeviceDaemonArgs() rejects both or neither address, a non-loopback host and a bad port", () => {
    const refused = (why: string) => new UsageError(`Cannot parse nrt device-sim arguments: ${why}`);
    expect(() => parseDeviceDaemonArgs([])).toThrow(refused("give exactly one of --socket PATH and --port P"));
    expect(() => parseDeviceDaemonArgs(["--socket", "/a", "--port", "1"])).toThrow(UsageError);
    expect(() => parseDeviceDaemonArgs(["--port", "7000", "--host", "0.0.0.0"])).toThrow(
      refused("--host 0.0.0.0 is not a loopback address"),
    );
    expect(() => parseDeviceDaemonArgs(["--port", "70000"])).toThrow(
      refused("--port 70000 is not an integer from 0 to 65535"),
    );
    expect(() => parseDeviceDaemonArgs(["--port", "-1"])).toThrow(
      refused("--port -1 is not an integer from 0 to 65535"),
    );
    expect(parseDeviceDaemonArgs(["--help"])).toBeUndefined();
  });

  test("parseAddress() reads unix:PATH, paths, HOST:PORT and PORT; formatAddress() writes them back", () => {
    expect(parseAddress("unix:/run/nrt.sock")).toEqual({ path: "/run/nrt.sock" });
    expect(parseAddress("./d.sock")).toEqual({ path: "./d.sock" });
    expect(parseAddress("127.0.0.1:7000")).toEqual({ hostname: "127.0.0.1", port: 7000 });
    expect(parseAddress("7001")).toEqual({ hostname: "127.0.0.1", port: 7001 });
    expect(formatAddress({ path: "/x" })).toBe("unix:/x");
    expect(formatAddress({ port: 9 })).toBe("127.0.0.1:9");
    expect(() => parseAddress("nowhere")).toThrow(TypeError);
  });
});
