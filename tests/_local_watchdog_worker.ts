/**
 * A thread that plays the host while the test's own thread is blocked in a local op: after `delayMs`, it moves the
 * device clock, sends a Q7 reset or closes, through the same functions the host's agent link uses.
 *
 * @module
 */
import { addClockSkew, killLocalOps, resetLocalOps } from "../packages/device-sim/local_watchdog.ts";

interface Job {
  ring: SharedArrayBuffer;
  action: "elapse" | "reset" | "close";
  ms?: number;
  nc?: number;
  delayMs: number;
}

const scope = globalThis as unknown as { onmessage: (e: MessageEvent<Job>) => void; postMessage(m: unknown): void };
scope.onmessage = (e) => {
  const job = e.data;
  setTimeout(() => {
    if (job.action === "elapse") addClockSkew(job.ring, job.ms ?? 0);
    else if (job.action === "reset") resetLocalOps(job.ring, job.nc ?? 0);
    else killLocalOps(job.ring);
    scope.postMessage("done");
  }, job.delayMs);
};
