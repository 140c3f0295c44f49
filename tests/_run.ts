/** Test helper: runs a program to its end and gives its exit code and what it printed. */
import { execFile } from "node:child_process";
import process from "node:process";

/**
 * Runs `file args` with this process's environment and `env` on top (a key set to `undefined` is removed, not passed
 * as the text "undefined"); resolves to its exit code (-1 when it was killed or did not start, after `timeoutMs`
 * too) and its stdout followed by its stderr.
 */
export function runProgram(
  file: string,
  args: string[],
  env: Record<string, string | undefined> = {},
  timeoutMs = 60_000,
): Promise<{ code: number; out: string }> {
  const all: Record<string, string | undefined> = { ...process.env, ...env };
  for (const k of Object.keys(all)) if (all[k] === undefined) delete all[k];
  return new Promise((resolve) => {
    execFile(file, args, { env: all as Record<string, string>, timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err === null
        ? 0
        : typeof (err as { code?: unknown }).code === "number"
        ? (err as { code: number }).code
        : -1;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}
