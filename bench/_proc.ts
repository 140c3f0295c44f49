/**
 * What a process has spent so far, from `/proc` (Linux), for the HTTP benches (ours): each thread's CPU time by
 * thread id with its name, and the process's CPU time and minor page faults. Elsewhere every reading is `undefined`.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";

/** One thread's CPU time so far, in µs, and its name (`comm`: `JITWorker`, `HeapHelper`, `Worker`, …). */
export interface ThreadCpu {
  readonly comm: string;
  readonly us: number;
}

/** What a whole process has spent so far. */
export interface ProcessCost {
  /** CPU time of all its threads, µs. */
  readonly us: number;
  /** Minor page faults. */
  readonly minorFaults: number;
}

/** The fields of a `stat` line after the command name (field 3, the state, at index 0). */
function fields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** utime + stime (fields 14 and 15) in µs: clock ticks of 10 ms. */
const cpuUs = (f: string[]): number => (Number(f[11]) + Number(f[12])) * 10_000;

/** Each thread of process `pid` (`"self"`: this one) by thread id; a thread that ends while it is read is left out. */
export function threadsCpu(pid: number | "self"): Map<string, ThreadCpu> | undefined {
  try {
    const threads = new Map<string, ThreadCpu>();
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
        threads.set(tid, { comm, us: cpuUs(fields(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"))) });
      } catch { /* the thread ended */ }
    }
    return threads;
  } catch {
    return undefined;
  }
}

/** Process `pid`'s CPU time and minor page faults (field 10) so far. */
export function processCost(pid: number | "self"): ProcessCost | undefined {
  try {
    const f = fields(readFileSync(`/proc/${pid}/stat`, "utf8"));
    return { us: cpuUs(f), minorFaults: Number(f[7]) };
  } catch {
    return undefined;
  }
}

/**
 * CPU the threads `pick` takes spent between two readings: a thread that started meanwhile counts from 0, one that
 * ended is not counted.
 */
export function threadsDelta(
  before: Map<string, ThreadCpu>,
  after: Map<string, ThreadCpu>,
  pick: (tid: string, comm: string) => boolean = () => true,
): number {
  let d = 0;
  for (const [tid, t] of after) if (pick(tid, t.comm)) d += t.us - (before.get(tid)?.us ?? 0);
  return d;
}
