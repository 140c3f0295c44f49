/** Test helper: runs the `nrt` command in-process and captures what it prints. */
import { main } from "../packages/cli/main.ts";

/** Exit code, stdout and stderr of `nrt ...args`. */
export async function runNrt(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [], err: string[] = [];
  const log = console.log, error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(" "));
  console.error = (...a: unknown[]) => void err.push(a.join(" "));
  try {
    return { code: await main(args), out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}
