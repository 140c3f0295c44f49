// /proc/stat and /proc/meminfo as proc(5) documents them, read for nrt monitor's vcpu_usage and memory_info.
import { describe, expect, test } from "bun:test";
import { HostStats, parseMeminfo, parseProcStat } from "./host_stats.ts";

describe("host_stats", () => {
  test("parseProcStat() reads each cpuN line's seven times and ctxt, not the aggregate cpu line", () => {
    const r = parseProcStat(
      "cpu  9 9 9 9 9 9 9 0 0 0\ncpu0 10 1 5 80 2 1 1 0 0 0\ncpu1 20 0 10 70 0 0 0 0 0 0\nintr 1 2\nctxt 1234\n",
    );
    expect(r.cpus).toEqual([
      { user: 10, nice: 1, system: 5, idle: 80, ioWait: 2, irq: 1, softIrq: 1 },
      { user: 20, nice: 0, system: 10, idle: 70, ioWait: 0, irq: 0, softIrq: 0 },
    ]);
    expect(r.ctxt).toBe(1234);
  });

  test("parseMeminfo() gives bytes; used is total minus MemAvailable", () => {
    const m = parseMeminfo(
      "MemTotal:       1000 kB\nMemFree:  100 kB\nMemAvailable:    400 kB\nSwapTotal: 50 kB\nSwapFree: 20 kB\n",
    );
    expect(m).toEqual({ total: 1024000, used: 614400, swapTotal: 51200, swapUsed: 30720 });
    expect(() => parseMeminfo("MemTotal: 1 kB\n")).toThrow("/proc/meminfo has no SwapTotal");
  });

  test("HostStats.sample() gives one share set per vCPU summing to 100 % (or 0 when no time passed)", () => {
    const h = new HostStats();
    const s = h.sample();
    expect(s.vcpus.length).toBe(h.vcpuCount);
    for (const v of s.vcpus) {
      const sum = v.user + v.nice + v.system + v.idle + v.ioWait + v.irq + v.softIrq;
      expect(sum === 0 || Math.abs(sum - 100) < 1e-9).toBe(true);
    }
    expect(s.memoryTotalBytes).toBeGreaterThan(s.memoryUsedBytes);
    expect(h.sample(false).vcpus).toEqual([]);
  });
});
