// NeuronActivity (ours): counts, latencies and windowed utilization from onExecution events, on a clock and busy
// counters the test drives.
import { describe, expect, test } from "bun:test";
import { NeuronActivity } from "./neuron_activity.ts";

function rig() {
  let now = 1000;
  const busy = new Map<number, number>();
  const a = new NeuronActivity({ now: () => now, busyMs: (nc) => busy.get(nc) ?? 0 });
  return {
    a,
    at: (t: number) => void (now = t),
    run: (seq: number, ncs: number[], from: number, to: number, deviceMs: number, status = 0) => {
      now = from;
      a.onExecution({ phase: "start", ncs, model: 1, seq });
      for (const nc of ncs) busy.set(nc, (busy.get(nc) ?? 0) + deviceMs);
      now = to;
      a.onExecution({ phase: "end", ncs, model: 1, seq, status });
    },
  };
}

describe("NeuronActivity", () => {
  test("counts finished executions by NRT_STATUS and keeps their latencies in order", () => {
    const r = rig();
    r.run(1, [0, 1], 1100, 1110, 4);
    r.run(2, [0, 1], 1200, 1230, 20, 1004);
    r.a.onExecution({ phase: "start", ncs: [2], model: 1, seq: 3 });
    r.a.onExecution({ phase: "end", ncs: [2], model: 1, seq: 3 }); // could not be made: not counted
    expect(r.a.statuses()).toEqual({ 0: 1, 1004: 1 });
    expect(r.a.latencies()).toEqual([
      { seq: 1, at: 1110, totalSeconds: 0.01, deviceSeconds: 0.004 },
      { seq: 2, at: 1230, totalSeconds: 0.03, deviceSeconds: 0.02 },
    ]);
    expect(r.a.latencies(1).map((s) => s.seq)).toEqual([2]);
  });

  test("utilization is the busy time in the window over the window, 0 for a core that never ran", () => {
    const r = rig();
    r.run(1, [0], 1100, 1200, 100); // busy 100 ms of [1000, 2000]
    r.at(2000);
    expect(r.a.utilization(0, 60_000)).toBeCloseTo(0.1, 12); // window reaches back to the start
    expect(r.a.utilization(0, 1000)).toBeCloseTo(0.1, 12);
    expect(r.a.utilization(0, 850)).toBeCloseTo(50 / 850, 12); // from 1150: half the run
    expect(r.a.utilization(0, 500)).toBe(0);
    expect(r.a.utilization(1, 60_000)).toBe(0);
  });

  test("without device counters, busy time is the time executions held their cores", () => {
    let now = 0;
    const a = new NeuronActivity({ now: () => now });
    a.onExecution({ phase: "start", ncs: [3], model: 1, seq: 1 });
    now = 40;
    expect(a.busyMs(3)).toBe(40); // the running one counts up to now
    a.onExecution({ phase: "end", ncs: [3], model: 1, seq: 1, status: 0 });
    now = 100;
    expect(a.busyMs(3)).toBe(40);
    expect(a.utilization(3, 100)).toBeCloseTo(0.4, 12);
    expect(a.latencies()[0].deviceSeconds).toBe(0.04);
    expect(a.deviceBusy).toBe(false);
  });

  test("the latency ring keeps the last samples; a bad capacity is refused", () => {
    const a = new NeuronActivity({ latencyCapacity: 2, now: () => 0 });
    for (let seq = 1; seq <= 3; seq++) {
      a.onExecution({ phase: "start", ncs: [0], model: 1, seq });
      a.onExecution({ phase: "end", ncs: [0], model: 1, seq, status: 0 });
    }
    expect(a.latencies().map((s) => s.seq)).toEqual([2, 3]);
    expect(() => new NeuronActivity({ latencyCapacity: 0 })).toThrow(RangeError);
  });

  test("the busy curve stays bounded at any execution rate, and exact to within its 10 ms resolution", () => {
    const r = rig();
    // 400,000 executions of 50 µs every 100 µs: 40 s, half of it busy.
    for (let seq = 1; seq <= 400_000; seq++) {
      const from = 1000 + seq * 0.1;
      r.run(seq, [0], from, from + 0.05, 0.05);
    }
    // At most two points per 10 ms, plus the first: before the bound, two per execution (800,000).
    expect(r.a.historyPoints(0)).toBeLessThanOrEqual(2 * 4000 + 3);
    expect(r.a.historyPoints(0)).toBeGreaterThan(4000);
    r.at(41_000);
    expect(r.a.utilization(0, 40_000)).toBeCloseTo(0.5, 3);
    expect(Math.abs(r.a.utilization(0, 1000) - 0.5)).toBeLessThanOrEqual(10 / 1000); // at most 10 ms of busy time off
    expect(Math.abs(r.a.utilization(0, 123.45) - 0.5)).toBeLessThanOrEqual(10 / 123.45);
    // Ten minutes later only the point before the history's start and those after it are kept.
    r.run(400_001, [0], 700_000, 700_100, 100);
    r.at(700_100);
    expect(r.a.historyPoints(0)).toBe(3);
    expect(r.a.utilization(0, 200)).toBeCloseTo(0.5, 12);
  });

  test("latencies after a sequence number come from the ring, whatever the number", () => {
    const a = new NeuronActivity({ latencyCapacity: 3, now: () => 0 });
    for (let seq = 1; seq <= 5; seq++) {
      a.onExecution({ phase: "start", ncs: [0], model: 1, seq });
      a.onExecution({ phase: "end", ncs: [0], model: 1, seq, status: 0 });
    }
    expect(a.latencies().map((s) => s.seq)).toEqual([3, 4, 5]);
    expect(a.latencies(3.5).map((s) => s.seq)).toEqual([4, 5]);
    expect(a.latencies(-7).map((s) => s.seq)).toEqual([3, 4, 5]);
    expect(a.latencies(Number.NaN)).toEqual([]);
    expect(a.latencies(5)).toEqual([]);
  });

  test("the ring keeps every sample's numbers as it grows to its capacity and after it wraps", () => {
    let now = 0;
    const a = new NeuronActivity({ latencyCapacity: 1000, now: () => now });
    const run = (seq: number) => {
      now = seq * 10;
      a.onExecution({ phase: "start", ncs: [0], model: 1, seq });
      now = seq * 10 + seq % 7;
      a.onExecution({ phase: "end", ncs: [0], model: 1, seq, status: 0 });
    };
    const sample = (seq: number) => ({
      seq,
      at: seq * 10 + seq % 7,
      totalSeconds: (seq % 7) / 1000,
      deviceSeconds: (seq % 7) / 1000,
    });
    for (let seq = 1; seq <= 700; seq++) run(seq);
    expect(a.latencies()).toEqual(Array.from({ length: 700 }, (_, i) => sample(i + 1)));
    for (let seq = 701; seq <= 1300; seq++) run(seq);
    const kept = a.latencies();
    expect(kept.length).toBe(1000);
    expect(kept[0]).toEqual(sample(301));
    expect(kept[999]).toEqual(sample(1300));
    expect(a.latencies(1299)).toEqual([sample(1300)]);
  });
});
