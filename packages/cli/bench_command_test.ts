/**
 * `nrt bench` stopped by SIGTERM or SIGINT passes the signal to the benchmark process it runs, waits for it, and exits
 * 128 + the signal's number; no benchmark process outlives it. Runs `nrt bench exec` as a process of its own and finds
 * its benchmark child in `/proc` (Linux).
 */
import { describe, expect, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const main = join(root, "packages", "cli", "main.ts");
const onDeno = "Deno" in globalThis;

/** The pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    // pid (comm) state ppid …: the command may hold spaces and parentheses, so read after the last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === pid) out.push(Number(entry));
  }
  return out;
}

/** Whether `pid` is a process that has not been reaped (a zombie counts as ended). */
function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Waits (a hang guard, in polls) until `cond()` holds. */
async function until(cond: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function exited(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

describe("nrt bench stopped by a signal", () => {
  for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
    test(
      `${signal}: the benchmark process gets it and ends first; nrt bench exits ${code}`,
      async () => {
        if (!existsSync("/proc/self/stat")) return; // the process table is read from /proc (Linux)
        const argv = onDeno ? ["run", "-A", main, "bench", "exec"] : [main, "bench", "exec"];
        const nrt = spawn(process.execPath, argv, { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
        let err = "";
        nrt.stderr!.on("data", (d: Uint8Array) => (err += String(d)));
        const done = exited(nrt);
        let bench: number | undefined;
        try {
          await until(() => childrenOf(nrt.pid!).length > 0, "nrt bench to start the benchmark process");
          bench = childrenOf(nrt.pid!)[0];
          // process.kill, not nrt.kill: Deno's ChildProcess reports a child it signalled itself as ended by that
          // signal, whatever its exit code.
          process.kill(nrt.pid!, signal);
          const end = await done;
          // Whether the benchmark process is still there right when nrt bench has exited: it must not be.
          const orphan = alive(bench);
          expect({ ...end, orphan }).toEqual({ code, signal: null, orphan: false });
          expect(err).toContain(`nrt bench: exec ended by ${signal}`);
          expect(err).toContain(`nrt bench: stopped by ${signal}`);
        } finally {
          if (bench !== undefined && alive(bench)) process.kill(bench, "SIGKILL");
          if (nrt.exitCode === null && nrt.signalCode === null) nrt.kill("SIGKILL");
        }
      },
      120_000,
    );
  }
});
