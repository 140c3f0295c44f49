/**
 * The host's side of `nrt monitor`'s `system_data` (Neuron Monitor User Guide, "vcpu_usage" and "memory_info"): the
 * share of each vCPU's time in user, nice, system, idle, io_wait, irq and soft_irq over a period, the context
 * switches in it, and the host's memory and swap. Read from Linux's `/proc/stat` and `/proc/meminfo` (proc(5));
 * where they cannot be read (not Linux), `node:os` gives the vCPU times it knows (no io_wait, soft_irq or context
 * switches) and the memory, and each group whose source failed carries the reason in its `error` (ours).
 *
 * Memory used is total minus available (`MemAvailable`), as `free` counts it (ours).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { cpus, freemem, totalmem } from "node:os";
import type { SystemSnapshot, VcpuShares } from "./neuron/snapshot.ts";

/** One vCPU's cumulative times, in clock ticks (any unit: only shares are used). */
interface CpuTimes {
  readonly user: number;
  readonly nice: number;
  readonly system: number;
  readonly idle: number;
  readonly ioWait: number;
  readonly irq: number;
  readonly softIrq: number;
}

interface Reading {
  readonly cpus: CpuTimes[];
  readonly ctxt: number | undefined;
  readonly error?: string;
}

/**
 * Parses the text of `/proc/stat`: the `cpuN` lines (user nice system idle iowait irq softirq …) and `ctxt`.
 *
 * @param text The file's text.
 * @returns Per-vCPU times, vCPU 0 first, and the context switches since boot.
 */
export function parseProcStat(text: string): { cpus: CpuTimes[]; ctxt: number | undefined } {
  const out: CpuTimes[] = [];
  let ctxt: number | undefined;
  for (const line of text.split("\n")) {
    const m = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (m !== null) {
      const [user, nice, system, idle, ioWait, irq, softIrq] = m[2].trim().split(/\s+/).map(Number);
      out[Number(m[1])] = { user, nice, system, idle, ioWait: ioWait ?? 0, irq: irq ?? 0, softIrq: softIrq ?? 0 };
    } else if (line.startsWith("ctxt ")) ctxt = Number(line.slice(5));
  }
  return { cpus: out.filter((c) => c !== undefined), ctxt };
}

/**
 * Parses the text of `/proc/meminfo` (kB values).
 *
 * @returns Bytes of memory total and used (total − available), swap total and used.
 */
export function parseMeminfo(text: string): { total: number; used: number; swapTotal: number; swapUsed: number } {
  const kb = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(text);
    if (m === null) throw new Error(`/proc/meminfo has no ${key}`);
    return Number(m[1]) * 1024;
  };
  const total = kb("MemTotal"), swapTotal = kb("SwapTotal");
  return { total, used: total - kb("MemAvailable"), swapTotal, swapUsed: swapTotal - kb("SwapFree") };
}

function readCpus(): Reading {
  try {
    return parseProcStat(readFileSync("/proc/stat", "utf8"));
  } catch (e) {
    const list = cpus().map((c) => ({
      user: c.times.user,
      nice: c.times.nice,
      system: c.times.sys,
      idle: c.times.idle,
      ioWait: 0,
      irq: c.times.irq,
      softIrq: 0,
    }));
    return {
      cpus: list,
      ctxt: undefined,
      error: `cannot read /proc/stat (${
        e instanceof Error ? e.message : String(e)
      }); io_wait, soft_irq and context switches are not known`,
    };
  }
}

function share(a: CpuTimes | undefined, b: CpuTimes): VcpuShares {
  const d = (k: keyof CpuTimes): number => Math.max(0, b[k] - (a?.[k] ?? 0));
  const total = d("user") + d("nice") + d("system") + d("idle") + d("ioWait") + d("irq") + d("softIrq");
  const pct = (k: keyof CpuTimes): number => (total === 0 ? 0 : (d(k) / total) * 100);
  return {
    user: pct("user"),
    nice: pct("nice"),
    system: pct("system"),
    idle: pct("idle"),
    ioWait: pct("ioWait"),
    irq: pct("irq"),
    softIrq: pct("softIrq"),
  };
}

/** Reads the host's vCPU and memory state; each {@linkcode HostStats.sample} covers the time since the previous one. */
export class HostStats {
  #last: Reading = readCpus();

  /** The host's vCPU count. */
  get vcpuCount(): number {
    return Math.max(1, this.#last.cpus.length);
  }

  /**
   * The system part of a snapshot. With `cpu` the vCPU shares and context switches cover the time since the last
   * call with `cpu` (or since the object was made) and the next one counts from now; without it they are empty.
   */
  sample(cpu = true): SystemSnapshot {
    let vcpus: VcpuShares[] = [];
    let ctxt = 0;
    let cpuError: string | undefined;
    if (cpu) {
      const now = readCpus();
      const before = this.#last;
      this.#last = now;
      vcpus = now.cpus.map((c, i) => share(before.cpus[i], c));
      ctxt = now.ctxt === undefined || before.ctxt === undefined ? 0 : Math.max(0, now.ctxt - before.ctxt);
      cpuError = now.error;
    }
    let mem: { total: number; used: number; swapTotal: number; swapUsed: number };
    let memError: string | undefined;
    try {
      mem = parseMeminfo(readFileSync("/proc/meminfo", "utf8"));
    } catch (e) {
      mem = { total: totalmem(), used: totalmem() - freemem(), swapTotal: 0, swapUsed: 0 };
      memError = `cannot read /proc/meminfo (${e instanceof Error ? e.message : String(e)}); swap is not known`;
    }
    const errors = {
      ...(cpuError === undefined ? {} : { vcpu_usage: cpuError }),
      ...(memError === undefined ? {} : { memory_info: memError }),
    };
    return {
      vcpus,
      contextSwitches: ctxt,
      memoryTotalBytes: mem.total,
      memoryUsedBytes: mem.used,
      swapTotalBytes: mem.swapTotal,
      swapUsedBytes: mem.swapUsed,
      ...(Object.keys(errors).length === 0 ? {} : { groupErrors: errors }),
    };
  }
}
