/**
 * `nrt device-sim` (ours): runs the simulated device as its own process, serving it to runtime processes over a Unix
 * socket or a loopback TCP port (the `remote` portal backend connects to it). Prints one line
 * `nrt device-sim: listening on ADDRESS` once it accepts connections (with the real port for `--port 0`), then
 * logs sessions and reclamations; SIGINT/SIGTERM stop it cleanly.
 *
 * Run as `nrt device-sim …`, or directly: `bun packages/cli/device_daemon.ts --socket /tmp/nrt.sock`.
 *
 * @module
 */
import { envFromProcess, resolveRuntimeConfig } from "@nrt/core";
import { type DeviceAgentMode, DeviceSimPortal } from "@nrt/device-sim";
import process from "node:process";
import { DeviceDaemon } from "@nrt/device-sim/remote";
import { resolvedExecTimeoutMs, simulatedSpec } from "./container.ts";
import {
  type CommandSpec,
  formatHelp,
  parseCommandArgs,
  parseIntegerOption,
  UsageError,
  usageError,
} from "./command_args.ts";
import { listenSocket, type SocketAddress, type SocketListener } from "./transports.ts";
import { commandLineArgs, exit, shutdownSignals, signalExitCode } from "./platform.ts";
import { announce, type Announced, ownCommandLine } from "./neuron_discovery.ts";

/**
 * The most devices `nrt device-sim --devices` simulates: 16, as many as the largest Trn and Inf instances have
 * (trn1.32xlarge, trn2.48xlarge: 16 Neuron devices). Each simulated device holds about 14 MB of its own, so the cap
 * also keeps a typo (`--devices 1000`) from taking gigabytes.
 */
export const MAX_SIMULATED_DEVICES = 16;

/** `NEURON_RT_EXEC_TIMEOUT`'s largest value (INT_MAX seconds), the bound of `--exec-timeout` too. */
const MAX_EXEC_TIMEOUT_SECONDS = 0x7fff_ffff;

/** How `nrt device-sim` is called. */
export const DEVICE_SIM_COMMAND = {
  name: "device-sim",
  usage:
    "nrt device-sim (--socket PATH | --port P [--host 127.0.0.1]) [--arch A] [--devices N] [--hbm-bytes B] [--exec-timeout S] [--agents M]",
  summary: 'Run the simulated Neuron device as a daemon shared by runtime processes (the "remote" portal backend).',
  options: {
    socket: { type: "string", value: "PATH", description: "listen on a Unix socket" },
    port: {
      type: "string",
      value: "P",
      description: "listen on TCP port P of the loopback host (0: the OS picks; the line printed names it)",
    },
    host: { type: "string", value: "H", description: "the loopback address to bind with --port (default 127.0.0.1)" },
    arch: { type: "string", value: "A", description: "sunda (trn1/inf2), cayman (trn2, default) or mariana" },
    devices: {
      type: "string",
      value: "N",
      description: `simulated devices, 1 to ${MAX_SIMULATED_DEVICES} (default 1; 16: trn1.32xlarge, trn2.48xlarge)`,
    },
    "hbm-bytes": { type: "string", value: "B", description: "HBM per device (default: the generation's)" },
    "exec-timeout": {
      type: "string",
      value: "S",
      description:
        "the device watchdog: a run still going after S seconds is dropped (default: NEURON_RT_EXEC_TIMEOUT, else 30)",
    },
    agents: {
      type: "string",
      value: "M",
      description:
        "where the device runs: inline (default: on the daemon's main thread), device (a Worker per device) or core (a Worker per NeuronCore)",
    },
  },
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

/** A running daemon. */
export interface RunningDeviceDaemon {
  /** The listening socket. */
  readonly listener: SocketListener;
  /** The daemon (sessions, ownership). */
  readonly daemon: DeviceDaemon;
  /** The simulated device. */
  readonly sim: DeviceSimPortal;
  /** Stops: closes connections (reclaiming each session), the socket and the simulator. */
  stop(): Promise<void>;
}

/** Options of {@linkcode startDeviceDaemon}. */
export interface DeviceDaemonCliOptions {
  /** Where to listen. */
  readonly address: SocketAddress;
  /** Architecture to simulate. */
  readonly arch?: string;
  /** Simulated devices. */
  readonly devices?: number;
  /** HBM bytes per device. */
  readonly hbmBytes?: number;
  /**
   * The device watchdog's budget in whole seconds (`--exec-timeout`): a run still in progress this long after its
   * doorbell is dropped by the device. Give it the `NEURON_RT_EXEC_TIMEOUT` of the runtime processes (docs/faults.md).
   * Default: `NEURON_RT_EXEC_TIMEOUT` of {@linkcode DeviceDaemonCliOptions.env}, else 30 (libnrt's default).
   */
  readonly execTimeoutSeconds?: number;
  /**
   * Where the device runs (`--agents`, ours). Default `"inline"`: on the daemon's main thread, which already sits
   * between the runtimes and the device, so an execute crosses one thread boundary each way (the socket) instead of
   * two; small ops run there too, under the watchdog Worker an agent Worker has. `"device"` or `"core"` put the device
   * in agent Workers as the embedded simulator does: a step of the device then never delays the daemon's answers on
   * other cores (docs/architecture.md §5 has what each costs).
   */
  readonly agents?: DeviceAgentMode;
  /** The environment to read `NEURON_RT_EXEC_TIMEOUT` from (`nrt device-sim`: its own; default none). */
  readonly env?: Record<string, string | undefined>;
  /** Log sink (default: stderr). */
  readonly log?: (line: string) => void;
  /**
   * Announce the daemon to `nrt ls` and `nrt monitor` on this machine (`neuron_discovery.ts`; the environment names
   * the folder): `nrt device-sim` does; default off.
   */
  readonly announce?: Record<string, string | undefined>;
}

/**
 * Parses the command line of `nrt device-sim`.
 *
 * @param args The arguments after `device-sim`.
 * @returns The options, or `undefined` when `--help` was asked for.
 * @throws {UsageError} On an unknown option, a missing or malformed value, both or neither of `--socket` and
 * `--port`, a `--host` that is not a loopback address, or `--devices` above {@linkcode MAX_SIMULATED_DEVICES}.
 */
export function parseDeviceDaemonArgs(args: readonly string[]): DeviceDaemonCliOptions | undefined {
  const { help, values: v } = parseCommandArgs(DEVICE_SIM_COMMAND, args);
  if (help) return undefined;
  const int = (flag: string, text: string | undefined, min: number, max: number) =>
    text === undefined ? undefined : parseIntegerOption(DEVICE_SIM_COMMAND, flag, text, min, max);
  const port = int("--port", v.port, 0, 65535);
  if ((v.socket === undefined) === (port === undefined)) {
    throw usageError(DEVICE_SIM_COMMAND, "give exactly one of --socket PATH and --port P");
  }
  if (v.host !== undefined && v.socket !== undefined) {
    throw usageError(DEVICE_SIM_COMMAND, "--host goes with --port, not --socket");
  }
  const host = v.host ?? "127.0.0.1";
  if (!/^(127\.\d+\.\d+\.\d+|localhost|::1)$/.test(host)) {
    throw usageError(DEVICE_SIM_COMMAND, `--host ${host} is not a loopback address`);
  }
  return {
    address: v.socket !== undefined ? { path: v.socket } : { port: port!, hostname: host },
    arch: v.arch,
    devices: int("--devices", v.devices, 1, MAX_SIMULATED_DEVICES),
    hbmBytes: int("--hbm-bytes", v["hbm-bytes"], 1, Number.MAX_SAFE_INTEGER),
    execTimeoutSeconds: int("--exec-timeout", v["exec-timeout"], 1, MAX_EXEC_TIMEOUT_SECONDS),
    agents: parseAgentMode(DEVICE_SIM_COMMAND, v.agents),
  };
}

const AGENT_MODES: readonly DeviceAgentMode[] = ["inline", "device", "core"];

/**
 * An `--agents` value (`nrt device-sim`, `nrt serve`): where a simulated device runs.
 *
 * @param spec The command, for the message.
 * @param text The value given, or `undefined`.
 * @returns The mode, or `undefined` when none was given.
 * @throws {UsageError} For any other text.
 */
export function parseAgentMode(spec: CommandSpec, text: string | undefined): DeviceAgentMode | undefined {
  if (text === undefined) return undefined;
  const mode = AGENT_MODES.find((m) => m === text);
  if (mode === undefined) throw usageError(spec, `--agents ${text} is not one of ${AGENT_MODES.join(", ")}`);
  return mode;
}

/**
 * Starts the simulator, the daemon and the socket.
 *
 * @throws {NrtError} `NRT_INVALID` for an unknown `arch`, or a `NEURON_RT_EXEC_TIMEOUT` in `env` that the runtime
 * would refuse (without `execTimeoutSeconds`).
 * @throws {Error} When the socket cannot be listened on (see {@linkcode listenSocket}).
 */
export async function startDeviceDaemon(options: DeviceDaemonCliOptions): Promise<RunningDeviceDaemon> {
  const log = options.log ?? ((line: string) => console.error(`nrt device-sim: ${line}`));
  const spec = simulatedSpec({ arch: options.arch });
  if (options.execTimeoutSeconds === undefined && options.env?.NEURON_RT_EXEC_TIMEOUT !== undefined) {
    // Refused as the runtime refuses it, rather than a watchdog on a budget nobody asked for.
    resolveRuntimeConfig({}, { NEURON_RT_EXEC_TIMEOUT: options.env.NEURON_RT_EXEC_TIMEOUT });
  }
  const sim = new DeviceSimPortal({
    spec,
    devices: options.devices,
    hbmBytes: options.hbmBytes,
    watchdogMs: resolvedExecTimeoutMs({ execTimeoutSeconds: options.execTimeoutSeconds, env: options.env }),
    agents: options.agents ?? "inline",
  });
  const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc), log });
  let listener: SocketListener;
  try {
    listener = await listenSocket(options.address, (link) => daemon.accept(link));
  } catch (e) {
    await sim.close();
    throw e;
  }
  let announced: Announced | undefined;
  if (options.announce !== undefined) {
    try {
      announced = await announce({
        kind: "device-sim",
        pid: process.pid,
        command: ownCommandLine(),
        address: listener.address,
        started: Date.now(),
      }, options.announce);
    } catch (e) {
      log(`not announced to nrt ls / nrt monitor: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  let stopping: Promise<void> | undefined;
  return {
    listener,
    daemon,
    sim,
    stop: () =>
      stopping ??= (async () => {
        await announced?.remove();
        await listener.close();
        await daemon.close();
        await sim.close();
      })(),
  };
}

/**
 * The `device-sim` command: runs until SIGINT/SIGTERM.
 *
 * @param args The arguments after `device-sim`.
 * @param log Where the listening line and `--help` go.
 * @returns 0 once stopped.
 * @throws {UsageError} For a malformed command line (see {@linkcode parseDeviceDaemonArgs}).
 */
export async function runDeviceDaemon(
  args: readonly string[],
  log: (s: string) => void = console.log,
): Promise<number> {
  const options = parseDeviceDaemonArgs(args);
  if (options === undefined) {
    log(formatHelp(DEVICE_SIM_COMMAND));
    return 0;
  }
  // Listened for from before the daemon starts until it exits (platform.ts: a Ctrl-C arrives twice through a
  // launcher): the first signal while starting stops at once, a later one does not cut the shutdown short.
  const signals = shutdownSignals({
    onStarting: (s) => {
      log(`nrt device-sim: ${s} while starting: stopped`);
      exit(signalExitCode(s));
    },
    onAgain: (s) => log(`nrt device-sim: ${s} again: still stopping; SIGKILL stops at once`),
  });
  const running = await startDeviceDaemon({ ...options, env: envFromProcess(), announce: process.env });
  const spec = running.sim.spec;
  log(
    `nrt device-sim: listening on ${running.listener.address} (${spec.name}, ${spec.ncPerDevice} NeuronCores per device)`,
  );
  await signals.started();
  await running.stop();
  return 0;
}

if (import.meta.main) {
  const args = commandLineArgs();
  exit(
    await runDeviceDaemon(args[0] === "device-sim" ? args.slice(1) : args).catch((e) => {
      console.error(e instanceof Error ? e.message : String(e));
      return e instanceof UsageError ? 2 : 1;
    }),
  );
}
