/**
 * Test helpers for the device daemon: spawn `nrt device-sim` (or a runtime client) as a real process, read its
 * JSON/status lines, wait with bounded deadlines, always kill in `finally`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "reflect-metadata";
import { container, type DependencyContainer } from "tsyringe";
import { type RemotePortal } from "../packages/device-sim/remote/mod.ts";
import { connectDeviceDaemon, parseAddress } from "../packages/cli/transports.ts";
import { ArchPackToken, PortalToken } from "@nrt/cli";
import { sunda } from "@nrt/arch-sunda";
import { cayman } from "@nrt/arch-cayman";
import { mariana } from "@nrt/arch-mariana";

const ROOT = new URL("..", import.meta.url).pathname;
/** The Bun binary of the workspace. */
export const BUN: string = join(ROOT, "node_modules/.bin/bun");
const MAIN = join(ROOT, "packages/cli/main.ts");
/** The daemon entry: `main.ts device-sim` once the command is wired there, the daemon module itself until then. */
export const DAEMON_ENTRY: string = readFileSync(MAIN, "utf8").includes('"device-sim"')
  ? MAIN
  : join(ROOT, "packages/cli/device_daemon.ts");
/** The runtime client used by the multi-process tests. */
export const CLIENT_ENTRY: string = join(ROOT, "tests/_remote_client.ts");

/** A spawned process whose stdout is read line by line. */
export interface Proc {
  readonly child: ChildProcess;
  readonly lines: string[];
  readonly stderr: string[];
  exited: boolean;
  exitCode: number | null;
  /** Waits (bounded) for a stdout line matching `re`. */
  line(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Waits (bounded) for the process to exit. */
  exit(timeoutMs?: number): Promise<number | null>;
  kill(signal?: NodeJS.Signals): void;
}

/** Spawns `args` with the workspace Bun. */
export function spawnBun(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(BUN, args, { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  const p: Proc = {
    child,
    lines: [],
    stderr: [],
    exited: false,
    exitCode: null,
    line: (re, timeoutMs = 15_000) =>
      until(
        () => p.lines.find((l) => re.test(l)),
        timeoutMs,
        () => `no line ${re} from ${args.join(" ")}; stdout: ${p.lines.join(" | ")}; stderr: ${p.stderr.join(" | ")}`,
      ),
    exit: (timeoutMs = 10_000) =>
      until(() => (p.exited ? { code: p.exitCode } : undefined), timeoutMs, () => `${args.join(" ")} did not exit`)
        .then((r) => r.code),
    kill: (signal = "SIGKILL") => {
      if (!p.exited) child.kill(signal);
    },
  };
  let out = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    const parts = out.split("\n");
    out = parts.pop()!;
    p.lines.push(...parts);
  });
  child.stderr!.on("data", (d: Buffer) => p.stderr.push(d.toString()));
  child.on("exit", (code) => {
    p.exited = true;
    p.exitCode = code;
  });
  return p;
}

/** Polls `f` until it returns a value, within `timeoutMs` (no sleeps: a short timer tick between polls). */
export async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  what: () => string = () => "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A temporary directory for socket files. */
export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "nrt-remote-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A daemon process and its address. */
export interface DaemonProc extends Proc {
  readonly address: string;
}

/** Starts a daemon (`--socket PATH` or `--port 0`) and waits for its "listening on" line. */
export async function startDaemon(where: { socket: string } | { port: 0 }, extra: string[] = []): Promise<DaemonProc> {
  const args = [
    DAEMON_ENTRY,
    "device-sim",
    ...("socket" in where ? ["--socket", where.socket] : ["--port", "0"]),
    ...extra,
  ];
  const p = spawnBun(args);
  try {
    const line = await p.line(/listening on /);
    return Object.assign(p, { address: /listening on (\S+)/.exec(line)![1] });
  } catch (e) {
    p.kill();
    throw e;
  }
}

/** A child container with the three arch packs and a RemotePortal connected to `address`. */
export async function remoteContainer(
  address: string,
  name = "nrt-test",
): Promise<{ c: DependencyContainer; portal: RemotePortal }> {
  const portal = await connectDeviceDaemon(parseAddress(address), { name, requestTimeoutMs: 20_000 });
  const c = container.createChildContainer();
  c.register(ArchPackToken, { useValue: sunda });
  c.register(ArchPackToken, { useValue: cayman });
  c.register(ArchPackToken, { useValue: mariana });
  c.register(PortalToken, { useValue: portal });
  return { c, portal };
}
