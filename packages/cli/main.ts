/**
 * The `nrt` command (ours; the composition root). Every command answers `--help`; data commands take `--json`;
 * exit codes are 0 (done), 1 (the work failed, message on stderr) and 2 (usage error, message and usage line on
 * stderr).
 *
 * @module
 */
import { BENCH_COMMAND, runBench } from "./bench_command.ts";
import { COMPILE_COMMAND } from "./compile_args.ts";
import { type CommandSpec, formatHelp, helpRequested, UsageError } from "./command_args.ts";
import { DEMO_COMMAND, runDemo } from "./demo.ts";
import { DEVICE_SIM_COMMAND, runDeviceDaemon } from "./device_daemon.ts";
import { DEVICES_COMMAND, runDevices } from "./devices.ts";
import { INSPECT_COMMAND, printable, readFileCapped, runInspect } from "./inspect.ts";
import { LS_COMMAND, runLs } from "./ls_command.ts";
import { MONITOR_COMMAND, runMonitor } from "./monitor_command.ts";
import { PROFILE_COMMAND, runProfile } from "./profile_command.ts";
import { PACK_COMMAND, runPack } from "./pack.ts";
import { commandLineArgs, exit } from "./platform.ts";
import { RUN_COMMAND, runModel } from "./run_model.ts";
import { runServe, SERVE_COMMAND, UsageError as ServeUsageError } from "./serve.ts";

/** One command of the `nrt` tool. */
interface Command {
  readonly usage: string;
  readonly summary: string;
  /** The whole `--help` text: the usage, the summary and the options of the command's {@linkcode CommandSpec}. */
  readonly help: string;
  /** Whether the command answers `--help` itself (its parser is `parseCommandArgs`); otherwise `nrt` answers it. */
  readonly answersHelp: boolean;
  readonly run: (args: string[]) => Promise<number>;
}

/** A command whose arguments are parsed by its {@linkcode CommandSpec}. */
function specified(spec: CommandSpec, run: (args: string[]) => Promise<number>): Command {
  return { usage: spec.usage, summary: spec.summary, help: formatHelp(spec), answersHelp: true, run };
}

/**
 * A command that parses its arguments on its own terms (strict `parseArgs`, its own messages) from the option table
 * of its {@linkcode CommandSpec}: `nrt` answers its `--help` from the same table.
 */
function selfParsed(spec: CommandSpec, run: (args: string[]) => Promise<number>): Command {
  return { usage: spec.usage, summary: spec.summary, help: formatHelp(spec), answersHelp: false, run };
}

const io = {
  // Never more than the cap: a 1.5 GB file is refused by its size, /dev/zero by its kind, a pipe after cap + 1 bytes.
  readFile: (p: string, maxBytes: number) => readFileCapped(p, maxBytes),
  stdout: (s: string) => console.log(s.replace(/\n$/, "")),
  stderr: (s: string) => console.error(s.replace(/\n$/, "")),
};

const COMMANDS: Readonly<Record<string, Command>> = {
  serve: selfParsed(SERVE_COMMAND, (a) => runServe(a)),
  demo: specified(DEMO_COMMAND, (a) => runDemo(a)),
  inspect: specified(INSPECT_COMMAND, (a) => runInspect(a, io)),
  run: specified(RUN_COMMAND, (a) => runModel(a)),
  // The compiler (@nrt/onnx) is loaded only to compile.
  compile: selfParsed(COMPILE_COMMAND, async (a) => (await import("./compile_command.ts")).runCompile(a)),
  pack: specified(PACK_COMMAND, (a) => runPack(a)),
  devices: specified(DEVICES_COMMAND, (a) => runDevices(a)),
  bench: specified(BENCH_COMMAND, (a) => runBench(a)),
  "device-sim": specified(DEVICE_SIM_COMMAND, (a) => runDeviceDaemon(a)),
  ls: specified(LS_COMMAND, (a) => runLs(a)),
  monitor: specified(MONITOR_COMMAND, (a) => runMonitor(a)),
  profile: specified(PROFILE_COMMAND, (a) => runProfile(a)),
};

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  ${c.usage}\n      ${c.summary.replaceAll("\n", "\n      ")}`);
  return `Usage: nrt <command> [options]   (nrt <command> --help for one command)\n\nCommands:\n${lines.join("\n")}\n`;
}

/**
 * Runs the command line.
 *
 * @param args The arguments after `nrt`.
 * @returns The exit code: 0 done, 1 the work failed (message on stderr), 2 usage error (message and usage on
 * stderr).
 */
export async function main(args: string[]): Promise<number> {
  const [cmd, ...rest] = args;
  if (cmd === undefined || cmd === "help" || cmd === "--help" || cmd === "-h") {
    const which = cmd === "help" ? rest[0] : undefined;
    if (which !== undefined) {
      if (Object.hasOwn(COMMANDS, which)) {
        console.log(COMMANDS[which].help);
        return 0;
      }
      console.error(`nrt: unknown command "${which}"\n${usage()}`);
      return 2;
    }
    (cmd === undefined ? console.error : console.log)(usage());
    return cmd === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (command === undefined) {
    console.error(`nrt: unknown command "${cmd}"\n${usage()}`);
    return 2;
  }
  // A command parsed by parseCommandArgs answers --help itself; the others are answered here, from the same table.
  if (!command.answersHelp && helpRequested(rest)) {
    console.log(command.help);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (e) {
    // A message may quote a file name or a model's own text: its control characters are shown, never acted on by the
    // terminal (ours); its line breaks stay.
    const shown = (m: string) => m.split("\n").map(printable).join("\n");
    if (e instanceof UsageError || e instanceof ServeUsageError) {
      console.error(`${shown(e.message)}\nUsage: ${command.usage}`);
      return 2;
    }
    console.error(`nrt ${cmd}: ${shown(e instanceof Error ? e.message : String(e))}`);
    return 1;
  }
}

if (import.meta.main) {
  // exit: the simulator's Q7 Workers may keep the event loop alive; the command is done.
  exit(await main(commandLineArgs()));
}
