/**
 * The `nrt` command (composition root). Every command answers `--help`; data commands take `--json`; exit codes
 * are 0 (done), 1 (the work failed, message on stderr) and 2 (usage error).
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { BENCHMARKS, runBench } from "./bench_command.ts";
import { runDemo } from "./demo.ts";
import { DEVICE_SIM_USAGE, runDeviceDaemon } from "./device_daemon.ts";
import { runDevices } from "./devices.ts";
import { runInspect } from "./inspect.ts";
import { runPack } from "./pack.ts";
import { runModel } from "./run_model.ts";
import { runServe, UsageError } from "./serve.ts";

/** One command of the `nrt` tool. */
interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly run: (args: string[]) => Promise<number>;
}

const io = {
  readFile: async (p: string) => new Uint8Array(await readFile(p)),
  stdout: (s: string) => console.log(s),
  stderr: (s: string) => console.error(s),
};

const COMMANDS: Readonly<Record<string, Command>> = {
  serve: {
    usage: "nrt serve --models DIR [--arch A] [--port P] [--host H] [--max-body BYTES] [--demo]\n" +
      "          [--admin [--admin-token-file FILE]] [--model-control none|explicit] [--allowed-host NAME ...]",
    summary: "Serve the NEFFs of DIR over the Open Inference Protocol v2 (REST) on the simulated device;\n" +
      "--demo writes the demo models first (npm start); --admin enables the dashboard's operator actions behind\n" +
      "a per-start token (refused on a non-loopback host without --admin-token-file); --model-control explicit\n" +
      "allows repository load/unload with that token (docs/security.md)",
    run: (a) => runServe(a),
  },
  demo: { usage: "nrt demo", summary: "Run the reference kernels on the simulated device and check the results", run: () => runDemo() },
  inspect: { usage: "nrt inspect FILE [--json]", summary: "Show a NEFF's header, hash, graphs, members, signature and custom-op libraries", run: (a) => runInspect(a, io) },
  run: { usage: "nrt run FILE --input NAME=FILE.json ... [--json]", summary: "Execute a NEFF on the embedded simulator and print its outputs", run: (a) => runModel(a) },
  compile: { usage: "nrt compile MODEL.onnx -o MODEL.neff [--target sunda|cayman|mariana] [--input-shape NAME=DIMS ...]", summary: "Compile an ONNX model into a custom-op NEFF of op-library kernels (docs/onnx.md)", run: async (a) => (await import("./compile_command.ts")).runCompile(a) },
  pack: { usage: "nrt pack MANIFEST(.json|.yaml) -o OUT.neff", summary: "Build a custom-op NEFF from a manifest (compiles AssemblyScript sources)", run: (a) => runPack(a) },
  devices: { usage: "nrt devices [--arch A] [--json]", summary: "List the (simulated) devices: generation, NeuronCores, memory", run: (a) => runDevices(a) },
  bench: { usage: `nrt bench [${BENCHMARKS.join("|")} ...] [--deno] [--json]`, summary: "Run the benchmarks under bench/ and print their ratio tables (--json: one JSON document)", run: (a) => runBench(a) },
  "device-sim": { usage: DEVICE_SIM_USAGE.split("\n")[0].replace(/^Usage: /, ""), summary: "Run the simulated device as a daemon shared by runtime processes", run: (a) => runDeviceDaemon(a) },
};

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  ${c.usage}\n      ${c.summary.replaceAll("\n", "\n      ")}`);
  return `Usage: nrt <command> [options]   (nrt <command> --help for one command)\n\nCommands:\n${lines.join("\n")}\n`;
}

/** Runs the command line; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const [cmd, ...rest] = args;
  if (cmd === undefined || cmd === "help" || cmd === "--help" || cmd === "-h") {
    const which = cmd === "help" ? rest[0] : undefined;
    if (which !== undefined && COMMANDS[which] !== undefined) {
      console.log(`Usage: ${COMMANDS[which].usage}\n\n${COMMANDS[which].summary}`);
      return 0;
    }
    (cmd === undefined ? console.error : console.log)(usage());
    return cmd === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (command === undefined) {
    console.error(`nrt: unknown command "${cmd}"\n${usage()}`);
    return 2;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    console.log(cmd === "device-sim" ? DEVICE_SIM_USAGE : `Usage: ${command.usage}\n\n${command.summary}`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (e) {
    console.error(`nrt ${cmd}: ${e instanceof Error ? e.message : String(e)}`);
    return e instanceof UsageError ? 2 : 1;
  }
}

if (import.meta.main) {
  const g = globalThis as { Deno?: { args: string[] }; process?: { argv: string[]; exit(code: number): never } };
  const code = await main(g.Deno ? g.Deno.args : g.process!.argv.slice(2));
  // The simulator's Q7 Workers may keep the event loop alive; the command is done.
  g.process ? g.process.exit(code) : (globalThis as unknown as { Deno: { exit(c: number): never } }).Deno.exit(code);
}
