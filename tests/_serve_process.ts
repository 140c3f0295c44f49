/**
 * Test helpers for `nrt serve` as a real process: spawn it (with the runtime running the tests, or through the
 * container image's `deploy/container/nrt` wrapper), read its lines, find a free port, send it a signal and wait
 * for its exit — every wait bounded, the process killed in `finally` by the caller.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import process from "node:process";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const MAIN = `${ROOT}packages/cli/main.ts`;
/** The workspace's Bun (the image's runtime). */
export const BUN: string = `${ROOT}node_modules/.bin/bun`;
/** The image's `nrt` command. */
export const CONTAINER_NRT: string = `${ROOT}deploy/container/nrt`;

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/** A spawned server. */
export interface ServeProcess {
  readonly child: ChildProcess;
  /** Lines printed on stdout so far. */
  readonly lines: string[];
  /** What it printed on stderr. */
  readonly stderr: string[];
  /** Waits for a stdout line matching `re` (at most `timeoutMs`). */
  line(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Waits for the exit code (at most `timeoutMs`). */
  exited(timeoutMs?: number): Promise<number | null>;
  /** Kills it unless it exited. */
  kill(signal?: NodeJS.Signals): void;
}

/** The npm bin shim, `npx nrt`. */
export const BIN_NRT: string = `${ROOT}packages/cli/bin/nrt.mjs`;

/**
 * Starts `nrt serve ARGS`: with the runtime running the tests (`how: "runtime"`); as the image does it, through
 * `deploy/container/nrt` with the workspace's Bun and sources in place of `/usr/local/bin/bun` and `/app`; through
 * the npm bin shim as `npx nrt` runs it (`"bin"`, on Node); or as a user types `bun packages/cli/main.ts serve` in
 * the checkout (`"shell"`, the workspace's Bun first on the PATH).
 */
export function spawnServe(
  args: readonly string[],
  how: "runtime" | "container" | "bin" | "shell" = "runtime",
  env: Record<string, string> = {},
): ServeProcess {
  const [file, argv] = how === "container"
    ? ["sh", [CONTAINER_NRT, "serve", ...args]]
    : how === "bin"
    ? ["node", [BIN_NRT, "serve", ...args]]
    : how === "shell"
    ? ["sh", ["-c", 'exec bun packages/cli/main.ts serve "$@"', "sh", ...args]]
    : isDeno
    ? [process.execPath, ["run", "-A", MAIN, "serve", ...args]]
    : [process.execPath, [MAIN, "serve", ...args]];
  const shell = how === "shell" ? { PATH: `${ROOT}node_modules/.bin:${process.env.PATH ?? ""}` } : {};
  const child = spawn(file, argv, {
    ...(how === "shell" ? { cwd: ROOT } : {}),
    env: { ...process.env, NRT_BUN: BUN, NRT_HOME: ROOT.replace(/\/$/, ""), ...shell, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [], stderr: string[] = [];
  let exit: number | null | undefined;
  let pending = "";
  child.stdout!.on("data", (d: Uint8Array) => {
    pending += new TextDecoder().decode(d);
    const parts = pending.split("\n");
    pending = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.on("data", (d: Uint8Array) => stderr.push(new TextDecoder().decode(d)));
  child.on("exit", (code) => (exit = code));
  const until = async <T>(f: () => T | undefined, timeoutMs: number, what: () => string): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = f();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const describe = () => `stdout: ${lines.join(" | ")}; stderr: ${stderr.join("")}`;
  return {
    child,
    lines,
    stderr,
    line: (re, timeoutMs = 60_000) =>
      until(
        () => {
          const l = lines.find((x) => re.test(x));
          if (l === undefined && exit !== undefined) {
            throw new Error(
              `nrt serve exited with ${exit} before printing ${re}; ${describe()}`,
            );
          }
          return l;
        },
        timeoutMs,
        () => `${re}; ${describe()}`,
      ),
    exited: (timeoutMs = 60_000) =>
      until(() => (exit === undefined ? undefined : { code: exit }), timeoutMs, () => `the exit; ${describe()}`).then((
        r,
      ) => r.code),
    kill: (signal = "SIGKILL") => {
      // process.kill, not child.kill: Deno 2.9.6's node:child_process reports a child it sent SIGTERM to as killed
      // by the signal (exit code null) even when the child handled it and exited 0.
      if (exit === undefined && child.pid !== undefined) process.kill(child.pid, signal);
    },
  };
}

/** A TCP port that was free a moment ago (for servers whose command line cannot take 0 for "any"). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
