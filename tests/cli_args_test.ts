/**
 * Every `nrt` command's argument parser through `main`: a missing value, an unknown option, a value given to a flag,
 * the positional count, a bad number, and `--help`, each with its exit code and the exact message on stderr.
 */
import { describe, expect, test } from "bun:test";
import { BENCH_COMMAND } from "../packages/cli/bench_command.ts";
import { type CommandSpec, formatHelp } from "../packages/cli/command_args.ts";
import { DEMO_COMMAND } from "../packages/cli/demo.ts";
import { DEVICE_SIM_COMMAND } from "../packages/cli/device_daemon.ts";
import { DEVICES_COMMAND } from "../packages/cli/devices.ts";
import { INSPECT_COMMAND } from "../packages/cli/inspect.ts";
import { PACK_COMMAND } from "../packages/cli/pack.ts";
import { RUN_COMMAND } from "../packages/cli/run_model.ts";
import { runNrt } from "./_cli.ts";

const SPECS: readonly CommandSpec[] = [
  DEVICES_COMMAND,
  RUN_COMMAND,
  INSPECT_COMMAND,
  PACK_COMMAND,
  BENCH_COMMAND,
  DEMO_COMMAND,
  DEVICE_SIM_COMMAND,
];

/** The stderr of a usage error of `spec`. */
const refused = (spec: CommandSpec, why: string): string =>
  `Cannot parse nrt ${spec.name} arguments: ${why}\nUsage: ${spec.usage}`;

/** Command lines and the usage error each must give (exit code 2). */
const USAGE_ERRORS: ReadonlyArray<readonly [readonly string[], CommandSpec, string]> = [
  [["devices", "--arch"], DEVICES_COMMAND, "--arch needs a value"],
  [["devices", "--arch", "--json"], DEVICES_COMMAND, "--arch needs a value"],
  [["devices", "--frob"], DEVICES_COMMAND, "unknown option --frob"],
  [["devices", "--json=yes"], DEVICES_COMMAND, "--json takes no value"],
  [["devices", "nd0"], DEVICES_COMMAND, 'unexpected argument "nd0" (nrt devices takes no arguments)'],
  [["run"], RUN_COMMAND, "FILE.neff is missing"],
  [["run", "m.neff", "extra.neff"], RUN_COMMAND, 'unexpected argument "extra.neff"'],
  [["run", "m.neff", "--input"], RUN_COMMAND, "--input needs a value"],
  [["run", "m.neff", "--input", "x"], RUN_COMMAND, "--input x is not NAME=FILE.json"],
  [["run", "m.neff", "--input", "x=a.json", "--input", "x=b.json"], RUN_COMMAND, '--input names "x" twice'],
  [["run", "m.neff", "-z"], RUN_COMMAND, "unknown option -z"],
  [["inspect"], INSPECT_COMMAND, "FILE is missing"],
  [["inspect", "a.neff", "b.neff"], INSPECT_COMMAND, 'unexpected argument "b.neff"'],
  [["inspect", "a.neff", "--frob"], INSPECT_COMMAND, "unknown option --frob"],
  [["inspect", "a.neff", "--json=1"], INSPECT_COMMAND, "--json takes no value"],
  [["pack", "m.json"], PACK_COMMAND, "-o OUT.neff is required"],
  [["pack", "m.json", "-o"], PACK_COMMAND, "-o needs a value"],
  [["pack", "m.json", "--out", "--json"], PACK_COMMAND, "--out needs a value"],
  [["pack", "-o", "x.neff"], PACK_COMMAND, "MANIFEST is missing"],
  [["pack", "m.json", "-o", "x.neff", "--watch"], PACK_COMMAND, "unknown option --watch"],
  [
    ["bench", "nosuch"],
    BENCH_COMMAND,
    "unknown benchmark nosuch; choose from exec, pipeline, portal, http, serve, grpc, guard, neff, idle, onnx, collectives, alloc",
  ],
  [["bench", "--quick"], BENCH_COMMAND, "unknown option --quick"],
  [["bench", "--deno=yes"], BENCH_COMMAND, "--deno takes no value"],
  [["demo", "now"], DEMO_COMMAND, 'unexpected argument "now" (nrt demo takes no arguments)'],
  [["demo", "--fast"], DEMO_COMMAND, "unknown option --fast"],
  [["device-sim"], DEVICE_SIM_COMMAND, "give exactly one of --socket PATH and --port P"],
  [
    ["device-sim", "--socket", "/tmp/a.sock", "--port", "7000"],
    DEVICE_SIM_COMMAND,
    "give exactly one of --socket PATH and --port P",
  ],
  [["device-sim", "--port"], DEVICE_SIM_COMMAND, "--port needs a value"],
  [["device-sim", "--port", "x1"], DEVICE_SIM_COMMAND, "--port x1 is not an integer from 0 to 65535"],
  [["device-sim", "--port", "65536"], DEVICE_SIM_COMMAND, "--port 65536 is not an integer from 0 to 65535"],
  [["device-sim", "--port", "-1"], DEVICE_SIM_COMMAND, "--port -1 is not an integer from 0 to 65535"],
  [
    ["device-sim", "--socket", "/tmp/a.sock", "--devices", "0"],
    DEVICE_SIM_COMMAND,
    "--devices 0 is not an integer from 1 to 16",
  ],
  [
    ["device-sim", "--socket", "/tmp/a.sock", "--hbm-bytes", "1.5"],
    DEVICE_SIM_COMMAND,
    "--hbm-bytes 1.5 is not an integer from 1 to 9007199254740991",
  ],
  [
    ["device-sim", "--port", "7000", "--host", "0.0.0.0"],
    DEVICE_SIM_COMMAND,
    "--host 0.0.0.0 is not a loopback address",
  ],
  [
    ["device-sim", "--socket", "/tmp/a.sock", "--host", "127.0.0.1"],
    DEVICE_SIM_COMMAND,
    "--host goes with --port, not --socket",
  ],
  [["device-sim", "--socket", "/tmp/a.sock", "--bogus"], DEVICE_SIM_COMMAND, "unknown option --bogus"],
];

describe("nrt command-line parsing", () => {
  for (const [args, spec, why] of USAGE_ERRORS) {
    test(`nrt ${args.join(" ")} exits 2: ${why}`, async () => {
      const r = await runNrt([...args]);
      expect(r.code).toBe(2);
      expect(r.err).toBe(refused(spec, why));
      expect(r.out).toBe("");
    });
  }

  for (const spec of SPECS) {
    test(`nrt ${spec.name} --help, -h and nrt help ${spec.name} print its options on stdout and exit 0`, async () => {
      for (
        const args of [[spec.name, "--help"], [spec.name, "-h"], ["help", spec.name], [spec.name, "--frob", "--help"]]
      ) {
        const r = await runNrt(args);
        expect(r.code).toBe(0);
        expect(r.out).toBe(formatHelp(spec));
        expect(r.err).toBe("");
      }
      for (const name of Object.keys(spec.options)) expect(formatHelp(spec)).toContain(`--${name}`);
    });
  }

  test("nrt help with an unknown command exits 2 naming it", async () => {
    const r = await runNrt(["help", "frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.err.split("\n")[0]).toBe('nrt: unknown command "frobnicate"');
  });

  test("a command that fails after parsing exits 1 with nrt <command>: and the message", async () => {
    const arch = await runNrt(["devices", "--arch", "nosuch"]);
    expect(arch.code).toBe(1);
    expect(arch.err).toMatch(/^nrt devices: .*"nosuch"/);
    const run = await runNrt(["run", "/nonexistent/m.neff"]);
    expect(run.code).toBe(1);
    expect(run.err).toMatch(/^nrt run: Cannot run \/nonexistent\/m\.neff: /);
    const pack = await runNrt(["pack", "/nonexistent/m.json", "-o", "/nonexistent/m.neff"]);
    expect(pack.code).toBe(1);
    expect(pack.err).toMatch(/^nrt pack: Cannot pack manifest: \/nonexistent\/m\.json cannot be read: /);
  });
});

describe("nrt: what any command prints on failure", () => {
  test("a control character in an error message is shown escaped, on every command", async () => {
    const missing = "/nonexistent-nrt-dir/x\u001b[31m\u0007";
    const compile = await runNrt(["compile", `${missing}.onnx`, "-o", "/nonexistent-nrt-dir/out.neff"]);
    expect(compile.code).toBe(1);
    expect(compile.err).toContain("/nonexistent-nrt-dir/x\\x1b[31m\\x07.onnx");
    for (const args of [["compile", `${missing}.onnx`], ["run", `${missing}.neff`], ["inspect", `${missing}.neff`]]) {
      const r = await runNrt(args);
      expect({ args, controls: [...r.err].filter((c) => (c < " " && c !== "\n") || (c >= "\u007f" && c <= "\u009f")) })
        .toEqual({ args, controls: [] });
    }
  });
});
