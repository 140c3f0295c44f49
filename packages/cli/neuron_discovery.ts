/**
 * How `nrt ls` and `nrt monitor` find the nrt processes of this machine (ours: neuron-monitor finds runtimes
 * through the Neuron driver, which a simulated device does not have). Each `nrt serve` and `nrt device-sim` writes
 * one small JSON file, its announcement, into a per-user runtime folder and removes it when it stops:
 *
 * - the folder is `$NRT_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/nrt`, else `<tmpdir>/nrt-<uid>`; it is made with mode
 *   700 and used only when it is a folder of this user that others cannot write to;
 * - a file is `serve-<pid>.json` or `device-sim-<pid>.json`, mode 600, written under a temporary name and renamed,
 *   so a reader never sees half of one;
 * - a reader skips files it cannot parse and files whose process is gone (a server killed with SIGKILL leaves its
 *   file behind; the next announcement of the same pid replaces it).
 *
 * An announcement says where to read the process (a server's loopback URL, a daemon's socket); it grants nothing:
 * what a reader can do there is what any local process can do (read-only routes, a daemon client session).
 *
 * @module
 */
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, isAbsolute, join, relative } from "node:path";
import process from "node:process";

/** An `nrt serve` process. */
export interface ServeAnnouncement {
  /** `serve`. */
  readonly kind: "serve";
  /** Process id. */
  readonly pid: number;
  /** Its command line. */
  readonly command: string;
  /** `http://host:port` of its REST listener. */
  readonly url: string;
  /** The nrt runtime version it runs. */
  readonly runtimeVersion: string;
  /** The device daemon it uses (`unix:PATH`, `HOST:PORT`), absent for an embedded simulator. */
  readonly device?: string;
  /** The physical NeuronCores its runtime holds on device 0 of its embedded simulator (absent with a daemon). */
  readonly ncs?: readonly number[];
  /** Milliseconds since the epoch when it started. */
  readonly started: number;
}

/** An `nrt device-sim` daemon. */
export interface DaemonAnnouncement {
  /** `device-sim`. */
  readonly kind: "device-sim";
  /** Process id. */
  readonly pid: number;
  /** Its command line. */
  readonly command: string;
  /** Where it listens: `unix:PATH` or `HOST:PORT`. */
  readonly address: string;
  /** Milliseconds since the epoch when it started. */
  readonly started: number;
}

/** The version `nrt_get_version` reports for this runtime, which `nrt ls` and `nrt monitor` print for it. */
export const NRT_RUNTIME_VERSION = "0.1.0";

/** One announcement. */
export type Announcement = ServeAnnouncement | DaemonAnnouncement;

/** A written announcement: its file, and the call that removes it. */
export interface Announced {
  /** The file. */
  readonly file: string;
  /** Removes the file (once; later calls do nothing). */
  remove(): Promise<void>;
}

type Env = Record<string, string | undefined>;

/**
 * The runtime folder announcements live in.
 *
 * @param env The environment (default: the process's).
 * @returns `$NRT_RUNTIME_DIR`, `$XDG_RUNTIME_DIR/nrt` or `<tmpdir>/nrt-<uid>`.
 */
export function discoveryDir(env: Env = process.env): string {
  if (env.NRT_RUNTIME_DIR !== undefined && env.NRT_RUNTIME_DIR !== "") return env.NRT_RUNTIME_DIR;
  if (env.XDG_RUNTIME_DIR !== undefined && env.XDG_RUNTIME_DIR !== "") return join(env.XDG_RUNTIME_DIR, "nrt");
  const uid = typeof process.getuid === "function" ? process.getuid() : "user";
  return join(tmpdir(), `nrt-${uid}`);
}

/** Throws unless `dir` is a folder of this user that others cannot write to. */
async function checkPrivate(dir: string): Promise<void> {
  const st = await lstat(dir);
  const me = typeof process.getuid === "function" ? process.getuid() : undefined;
  if (!st.isDirectory()) throw new Error(`Cannot use ${dir} for nrt's process announcements: it is not a folder`);
  if (me !== undefined && st.uid !== me) {
    throw new Error(
      `Cannot use ${dir} for nrt's process announcements: it belongs to uid ${st.uid}, not to this user (${me})`,
    );
  }
  if ((st.mode & 0o022) !== 0) {
    throw new Error(
      `Cannot use ${dir} for nrt's process announcements: others may write to it (mode ${
        (st.mode & 0o777).toString(8)
      })`,
    );
  }
}

function fileName(a: Pick<Announcement, "kind" | "pid">): string {
  return `${a.kind}-${a.pid}.json`;
}

/**
 * Writes this process's announcement.
 *
 * @param a What to announce.
 * @param env The environment that names the folder.
 * @returns The file and its remover.
 * @throws {Error} When the folder cannot be made or is not private to this user.
 */
export async function announce(a: Announcement, env: Env = process.env): Promise<Announced> {
  const dir = discoveryDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await checkPrivate(dir);
  const file = join(dir, fileName(a));
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(a), { mode: 0o600 });
  await rename(temp, file);
  let removed: Promise<void> | undefined;
  return { file, remove: () => removed ??= rm(file, { force: true }) };
}

/** Whether process `pid` exists (signal 0 checks without sending). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === "EPERM";
  }
}

function parse(text: string): Announcement | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if (
    !Number.isSafeInteger(o.pid) || (o.pid as number) <= 0 || typeof o.command !== "string" ||
    typeof o.started !== "number"
  ) return undefined;
  const ncs = o.ncs === undefined || (Array.isArray(o.ncs) && o.ncs.every((n) => Number.isSafeInteger(n) && n >= 0));
  if (
    o.kind === "serve" && typeof o.url === "string" && typeof o.runtimeVersion === "string" &&
    (o.device === undefined || typeof o.device === "string") && ncs
  ) {
    return o as unknown as ServeAnnouncement;
  }
  if (o.kind === "device-sim" && typeof o.address === "string") return o as unknown as DaemonAnnouncement;
  return undefined;
}

/**
 * The announcements of the processes still running, servers first, each kind by pid.
 *
 * @param env The environment that names the folder.
 * @returns The announcements; none when the folder does not exist.
 * @throws {Error} When the folder exists but is not private to this user.
 */
export async function discover(env: Env = process.env): Promise<Announcement[]> {
  const dir = discoveryDir(env);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return [];
    throw e;
  }
  await checkPrivate(dir);
  const found: Announcement[] = [];
  for (const name of names) {
    if (!/^(serve|device-sim)-\d+\.json$/.test(name)) continue;
    let text: string;
    try {
      text = await readFile(join(dir, name), "utf8");
    } catch {
      continue; // removed while we read
    }
    const a = parse(text);
    if (a !== undefined && fileName(a) === name && processAlive(a.pid)) found.push(a);
  }
  const rank = (a: Announcement): number => (a.kind === "serve" ? 0 : 1);
  return found.sort((a, b) => rank(a) - rank(b) || a.pid - b.pid);
}

/** What {@linkcode commandLineOf} reads: the process's `argv0`, `argv` and working folder. */
export interface CommandLineParts {
  /** The program as it was invoked (`process.argv0`: `bun`, `deno`, or `nrt` from the npm bin shim). */
  readonly argv0?: string;
  /** `process.argv`: the runtime's executable path, the script's path, then the arguments. */
  readonly argv: readonly string[];
  /** The working folder. */
  readonly cwd: string;
}

/**
 * A command line as the user typed it, for announcements and so for the COMMAND cell of `nrt ls` (ours; neuron-ls
 * shows `/proc/<pid>/cmdline`): the program as invoked, the script relative to the working folder when it is inside
 * it, and the arguments — `bun packages/cli/main.ts serve --demo`. Bun and Deno put the runtime's absolute executable
 * path in `argv[0]`, which filled the 40-character cell on its own. The npm bin shim (`npx nrt`, `bin/nrt.mjs`) runs
 * the script with `argv0` `nrt`, so the line is `nrt serve --demo`. Deno's own flags (`run -A`) are not in `argv`
 * and are not shown.
 *
 * @param parts The process's `argv0`, `argv` and working folder.
 * @returns The command line.
 */
export function commandLineOf(parts: CommandLineParts): string {
  const [exe = "", script, ...args] = parts.argv;
  const program = parts.argv0 !== undefined && parts.argv0 !== "" ? parts.argv0 : basename(exe);
  if (program === "nrt") return ["nrt", ...args].join(" ");
  if (script === undefined) return program;
  const rel = relative(parts.cwd, script);
  const shown = rel !== "" && !rel.startsWith("..") && !isAbsolute(rel) ? rel : script;
  return [program, shown, ...args].join(" ");
}

/** This process's command line, as announcements record it ({@linkcode commandLineOf}). */
export function ownCommandLine(): string {
  return commandLineOf({ argv0: process.argv0, argv: process.argv, cwd: process.cwd() });
}
