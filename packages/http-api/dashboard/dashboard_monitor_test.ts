// DashboardMonitor (ours): what it keeps of each NeuronCore's executions, with and without the runtime's sampling of
// the executions it times, driven by hand-made execution events and host spans.
import { describe, expect, test } from "bun:test";
import { DashboardMonitor, LATENCY_BOUNDS_US } from "./dashboard_monitor.ts";

const span = (name: string, seq: number, nc?: number) => ({ name, start: 1, end: 2, seq, nc });
const total = (counts: readonly number[]) => counts.reduce((a, b) => a + b, 0);

describe("DashboardMonitor", () => {
  test("without timeExecution every execution keeps its steps and becomes its cores' last", () => {
    const m = new DashboardMonitor();
    m.onExecution({ phase: "start", ncs: [0, 1], model: 7, seq: 1 });
    expect(m.running(0)?.seq).toBe(1);
    expect(m.running(1)?.model).toBe(7);
    expect(m.executions(0)).toBe(1);
    expect(m.executions(1)).toBe(1);
    m.onSpan(span("doorbell", 1, 0));
    m.onSpan(span("nq_read", 1, 1));
    m.onSpan(span("kmgr_exec_pre", 1));
    m.onSpan(span("doorbell", 99, 0)); // no such execution in flight: dropped
    m.onExecution({ phase: "end", ncs: [0, 1], model: 7, seq: 1, status: 0 });
    expect(m.running(0)).toBeUndefined();
    expect(m.running(1)).toBeUndefined();
    // Each core keeps the steps that act on it and the shared ones.
    expect(m.lastExecution(0)?.steps.map((s) => s.name)).toEqual(["doorbell", "kmgr_exec_pre"]);
    expect(m.lastExecution(1)?.steps.map((s) => s.name)).toEqual(["nq_read", "kmgr_exec_pre"]);
    expect(m.lastExecution(0)).toMatchObject({ model: 7, seq: 1, status: 0 });
    const latency = m.latency(7);
    expect(latency.boundsUs).toBe(LATENCY_BOUNDS_US);
    expect(total(latency.counts)).toBe(1);
    expect(m.executions(2)).toBe(0);
    expect(m.lastExecution(2)).toBeUndefined();
  });

  test("with timeExecution only the sampled execution keeps steps and becomes last; every one is counted", () => {
    const m = new DashboardMonitor();
    expect(m.timeExecution(1, 0, 7)).toBe(true); // the first execution on a core is timed
    m.onExecution({ phase: "start", ncs: [0], model: 7, seq: 1 });
    m.onSpan(span("doorbell", 1, 0));
    m.onExecution({ phase: "end", ncs: [0], model: 7, seq: 1, status: 0 });
    expect(m.lastExecution(0)?.seq).toBe(1);

    // The same model on the same core within STEP_SAMPLE_MS: untimed. It runs and is counted, keeps no steps (a span
    // heard for it is dropped) and does not replace the last timed one.
    expect(m.timeExecution(2, 0, 7)).toBe(false);
    m.onExecution({ phase: "start", ncs: [0], model: 7, seq: 2 });
    expect(m.running(0)?.seq).toBe(2);
    m.onSpan(span("doorbell", 2, 0));
    m.onExecution({ phase: "end", ncs: [0], model: 7, seq: 2, status: 1003 });
    expect(m.running(0)).toBeUndefined();
    expect(m.executions(0)).toBe(2);
    expect(m.lastExecution(0)).toMatchObject({ seq: 1, status: 0 });
    expect(m.lastExecution(0)?.steps.map((s) => s.name)).toEqual(["doorbell"]);
    expect(total(m.latency(7).counts)).toBe(2);

    // Another model is always timed, and becomes the core's last.
    expect(m.timeExecution(3, 0, 8)).toBe(true);
    m.onExecution({ phase: "start", ncs: [0], model: 8, seq: 3 });
    m.onExecution({ phase: "end", ncs: [0], model: 8, seq: 3, status: 0 });
    expect(m.lastExecution(0)).toMatchObject({ model: 8, seq: 3, steps: [] });
    expect(total(m.latency(8).counts)).toBe(1);
    expect(m.executions(0)).toBe(3);
  });

  test("a core's busy time counts its executions, and the one running up to now", () => {
    const m = new DashboardMonitor();
    expect(m.utilization(0).window).toBe(0);
    m.onExecution({ phase: "start", ncs: [0], model: 1, seq: 1 });
    const spin = performance.now() + 5;
    while (performance.now() < spin) { /* the execution holds the core for 5 ms */ }
    expect(m.utilization(0).window).toBeGreaterThan(0);
    m.onExecution({ phase: "end", ncs: [0], model: 1, seq: 1, status: 0 });
    const u = m.utilization(0);
    expect(u.window).toBeGreaterThan(0);
    expect(u.perSecond.some((x) => x > 0)).toBe(true);
    expect(m.utilization(1).window).toBe(0);
  });
});
