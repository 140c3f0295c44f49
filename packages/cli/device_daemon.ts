/**
 * `nrt device-sim`: runs the simulated device as its own process, serving it to runtime processes over a Unix
 * socket or a loopback TCP port (the `remote` portal backend connects to it). Prints one line
 * `nrt device-sim: listening on ADDRESS` once it accepts connections (with the real port for `--port 0`), then
 * logs sessions and reclamations; SIGINT/SIGTERM stop it cleanly.
 *
 * Run directly (`bun packages/cli/device_daemon.ts --socket /tmp/nrt.sock`) or as `nrt device-sim …` once the
 * command is wired into `main.ts`.
 *
 * @module
 */
import { DeviceSimPortal } from "@nrt/device-sim";
import type { NrtArchName } from "@nrt/core";
import { DeviceDaemon } from "../device-sim/remote/mod.ts";
import { simulatedSpec } from "./container.ts";
import { listenSocket, type SocketAddress, type SocketListener } from "./transports.ts";

/** Usage of the `device-sim` command. */
export const DEVICE_SIM_USAGE = `Usage: nrt device-sim (--socket PATH | --port P [--host 127.0.0.1]) [--arch A] [--devices N] [--hbm-bytes B]

Runs the simulated Neuron device as a daemon shared by runtime processes (the "remote" portal backend).
  --socket PATH    listen on a Unix socket
  --port P         listen on TCP port P of the loopback host (0: the OS picks; the line printed names it)
  --arch A         sunda (trn1/inf2), cayman (trn2, default) or mariana
  --devices N      simulated devices (default 1)
  --hbm-bytes B    HBM per device (default: the generation's)`;

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
  readonly arch?: NrtArchName;
  /** Simulated devices. */
  readonly devices?: number;
  /** HBM bytes per device. */
  readonly hbmBytes?: number;
  /** Log sink (default: stderr). */
  readonly log?: (line: string) => void;
}

/**
 * Parses the command line of `nrt device-sim`.
 *
 * @throws {TypeError} On a missing or malformed option.
 */
export function parseDeviceDaemonArgs(args: readonly string[]): DeviceDaemonCliOptions {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    if (i < 0) return undefined;
    const v = args[i + 1];
    if (v === undefined || v.startsWith("--")) throw new TypeError(`nrt device-sim: ${flag} needs a value`);
    return v;
  };
  const int = (flag: string) => {
    const v = value(flag);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`nrt device-sim: ${flag} ${v} is not a non-negative integer`);
    return n;
  };
  const socket = value("--socket"), port = int("--port"), host = value("--host") ?? "127.0.0.1";
  if ((socket === undefined) === (port === undefined)) throw new TypeError("nrt device-sim: give exactly one of --socket PATH and --port P");
  if (port !== undefined && port > 65535) throw new TypeError(`nrt device-sim: --port ${port} is out of range`);
  if (!/^(127\.\d+\.\d+\.\d+|localhost|::1)$/.test(host)) throw new TypeError(`nrt device-sim: --host ${host} is not a loopback address`);
  return {
    address: socket !== undefined ? { path: socket } : { port: port!, hostname: host },
    arch: value("--arch") as NrtArchName | undefined,
    devices: int("--devices"),
    hbmBytes: int("--hbm-bytes"),
  };
}

/** Starts the simulator, the daemon and the socket. */
export async function startDeviceDaemon(options: DeviceDaemonCliOptions): Promise<RunningDeviceDaemon> {
  const log = options.log ?? ((line: string) => console.error(`nrt device-sim: ${line}`));
  const sim = new DeviceSimPortal({ spec: simulatedSpec({ arch: options.arch }), devices: options.devices, hbmBytes: options.hbmBytes });
  const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc), log });
  let listener: SocketListener;
  try {
    listener = await listenSocket(options.address, (link) => daemon.accept(link));
  } catch (e) {
    await sim.close();
    throw e;
  }
  let stopping: Promise<void> | undefined;
  return {
    listener,
    daemon,
    sim,
    stop: () =>
      stopping ??= (async () => {
        await listener.close();
        await daemon.close();
        await sim.close();
      })(),
  };
}

/**
 * The `device-sim` command: runs until SIGINT/SIGTERM; returns the exit code.
 *
 * @param args The arguments after `device-sim`.
 */
export async function runDeviceDaemon(args: readonly string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(DEVICE_SIM_USAGE);
    return 0;
  }
  let options: DeviceDaemonCliOptions;
  try {
    options = parseDeviceDaemonArgs(args);
  } catch (e) {
    console.error(`${(e as Error).message}\n${DEVICE_SIM_USAGE}`);
    return 2;
  }
  const running = await startDeviceDaemon(options);
  const spec = running.sim.spec;
  console.log(`nrt device-sim: listening on ${running.listener.address} (${spec.name}, ${spec.ncPerDevice} NeuronCores per device)`);
  const proc = (globalThis as unknown as { process: { once(sig: string, f: () => void): void } }).process;
  await new Promise<void>((resolve) => {
    proc.once("SIGINT", resolve);
    proc.once("SIGTERM", resolve);
  });
  await running.stop();
  return 0;
}

if (import.meta.main) {
  const args = (globalThis as { Bun?: unknown }).Bun ? process.argv.slice(2) : (globalThis as unknown as { Deno: { args: string[] } }).Deno.args;
  const code = await runDeviceDaemon(args[0] === "device-sim" ? args.slice(1) : args);
  process.exit(code);
}
