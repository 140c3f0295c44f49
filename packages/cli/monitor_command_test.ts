/**
 * `nrt monitor` waits one period between reports: with no metric group enabled (one report per root period), and with
 * a period beyond what one timer takes (about 24.8 days; a longer delay fires at once). The timers are the test's:
 * each records the delay asked for and fires at once, so no test waits for a period.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_TIMER_MS, type MonitorTimers, runMonitor } from "./monitor_command.ts";

const dir = mkdtempSync(join(tmpdir(), "nrt-monitor-wait-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Timers that record each delay asked for and fire at once. */
function recordingTimers(): { delays: number[]; timers: MonitorTimers } {
  const delays: number[] = [];
  return {
    delays,
    timers: {
      setTimeout: (run, ms) => {
        delays.push(ms);
        queueMicrotask(run);
        return delays.length;
      },
      clearTimeout: () => {},
    },
  };
}

/**
 * Runs `nrt monitor -c CONFIG --count N` against a server that is not there (each report lists it with its error),
 * returning the reports and the delays waited.
 */
async function monitor(config: unknown, count: number): Promise<{ reports: string[]; delays: number[] }> {
  const file = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(config));
  const { delays, timers } = recordingTimers();
  const reports: string[] = [];
  const code = await runMonitor(
    ["-c", file, "--url", "http://127.0.0.1:1", "--count", String(count)],
    (line) => reports.push(line),
    undefined,
    timers,
  );
  expect(code).toBe(0);
  return { reports, delays };
}

/** What the delays add up to, and that each one is a delay a timer takes. */
function total(delays: readonly number[]): number {
  for (const d of delays) {
    expect(Number.isFinite(d)).toBe(true);
    expect(d).toBeGreaterThanOrEqual(0);
    expect(d).toBeLessThanOrEqual(MAX_TIMER_MS);
  }
  return delays.reduce((a, b) => a + b, 0);
}

const HOUR_MS = 3_600_000;
/** Slack for the time a collection itself takes (the wait is to the next due time): far more than it ever takes. */
const SLACK_MS = 60_000;

describe("nrt monitor waits one period between reports", () => {
  for (
    const [name, config] of [
      ["no metric group enabled", { period: "1h", neuron_runtimes: [], system_metrics: [] }],
      ["only a root period", { period: "1h" }],
    ] as const
  ) {
    test(`with ${name}: one report per root period, not reports back to back`, async () => {
      const { reports, delays } = await monitor(config, 3);
      expect(reports).toHaveLength(3);
      expect(delays).toHaveLength(2);
      for (const d of delays) {
        expect(d).toBeGreaterThan(HOUR_MS - SLACK_MS);
        expect(d).toBeLessThanOrEqual(HOUR_MS);
      }
      for (const r of reports) {
        expect(Object.keys(JSON.parse(r))).toEqual([
          "neuron_runtime_data",
          "system_data",
          "instance_info",
          "neuron_hardware_info",
        ]);
      }
    });
  }

  for (const hours of [720, 1000]) {
    test(`with a ${hours} h period: the wait is cut into timers a timer takes, adding up to the period`, async () => {
      const { reports, delays } = await monitor({
        period: `${hours}h`,
        neuron_runtimes: [{ metrics: [{ type: "neuroncore_counters" }] }],
        system_metrics: [{ type: "vcpu_usage" }],
      }, 2);
      expect(reports).toHaveLength(2);
      expect(delays.length).toBe(Math.ceil(hours * HOUR_MS / MAX_TIMER_MS));
      const waited = total(delays);
      expect(waited).toBeGreaterThan(hours * HOUR_MS - SLACK_MS);
      expect(waited).toBeLessThanOrEqual(hours * HOUR_MS);
    });
  }

  test("a stop during a long wait ends it at once, without another report", async () => {
    const file = join(dir, "long.json");
    writeFileSync(file, JSON.stringify({ period: "1000h" }));
    const stop = new AbortController();
    const asked: number[] = [];
    const reports: string[] = [];
    const code = await runMonitor(
      ["-c", file, "--url", "http://127.0.0.1:1"],
      (line) => reports.push(line),
      stop.signal,
      {
        // Never fires: only the stop ends the wait.
        setTimeout: (_run, ms) => {
          asked.push(ms);
          queueMicrotask(() => stop.abort());
          return asked.length;
        },
        clearTimeout: () => {},
      },
    );
    expect(code).toBe(0);
    expect(reports).toHaveLength(1);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toBeLessThanOrEqual(MAX_TIMER_MS);
  });
});
