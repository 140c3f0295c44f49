/**
 * The observer of `_adversary.ts`, in a process of its own so that the attacker's work never delays it: samples a
 * server's resident memory every 5 ms and times `GET /v2/health/live` back to back (10 ms apart), printing
 * `r <bytes>` and `h <ms>` lines until it is killed.
 *
 *   bun tests/security/_health_probe.ts PID PORT
 */
import { readFileSync } from "node:fs";
import process from "node:process";

const [pid, port] = process.argv.slice(-2).map(Number);
const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
let peak = 0;
setInterval(() => {
  try {
    const r = rss();
    if (r > peak) {
      peak = r;
      process.stdout.write(`r ${r}\n`);
    }
  } catch {
    // the server is gone
  }
}, 5);
for (;;) {
  const t = performance.now();
  // While a check waits, report how long it has waited so far (a check that never returns still counts).
  const timer = setInterval(() => process.stdout.write(`w ${(performance.now() - t).toFixed(1)}\n`), 25);
  try {
    await (await fetch(`http://127.0.0.1:${port}/v2/health/live`)).arrayBuffer();
  } catch {
    // refused: reported as a slow check
  }
  clearInterval(timer);
  process.stdout.write(`h ${(performance.now() - t).toFixed(2)}\n`);
  await new Promise((r) => setTimeout(r, 10));
}
