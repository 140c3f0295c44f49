// Neuron Monitor User Guide, "Configuration file example" and "JSON objects and fields in the configuration file".
import { describe, expect, test } from "bun:test";
import {
  defaultMonitorConfig,
  type MonitorConfig,
  NeuronMonitorConfigError,
  parseGoDuration,
  parseMonitorConfig,
  selectRuntime,
  validateMonitorConfig,
} from "./neuron_monitor_config.ts";

/** The structure of the guide's example: every group, root period 1s, neuron_hw_counters every 2s. */
const GUIDE_EXAMPLE = JSON.stringify({
  period: "1s",
  neuron_runtimes: [{
    tag_filter: ".*",
    metrics: [
      { type: "neuroncore_counters" },
      { type: "memory_used" },
      { type: "neuron_runtime_vcpu_usage" },
      { type: "execution_stats" },
    ],
  }],
  system_metrics: [{ type: "vcpu_usage" }, { type: "memory_info" }, { period: "2s", type: "neuron_hw_counters" }],
});

function fieldOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (e instanceof NeuronMonitorConfigError) return e.field;
    throw e;
  }
  throw new Error("Cannot check the field: nothing was thrown");
}

describe("parseMonitorConfig()", () => {
  test("parseMonitorConfig() reads the guide's example with a group period overriding the root's", () => {
    const c = parseMonitorConfig(GUIDE_EXAMPLE);
    expect(c.runtimes.length).toBe(1);
    expect(c.runtimes[0].tagFilter?.source).toBe(".*");
    expect(c.runtimes[0].groups).toEqual([
      { type: "neuroncore_counters", periodSeconds: 1 },
      { type: "memory_used", periodSeconds: 1 },
      { type: "neuron_runtime_vcpu_usage", periodSeconds: 1 },
      { type: "execution_stats", periodSeconds: 1 },
    ]);
    expect(c.system).toEqual([
      { type: "vcpu_usage", periodSeconds: 1 },
      { type: "memory_info", periodSeconds: 1 },
      { type: "neuron_hw_counters", periodSeconds: 2 },
    ]);
  });

  test("parseMonitorConfig() applies a neuron_runtimes entry's period to its groups, and 5 s without any", () => {
    const c = parseMonitorConfig(JSON.stringify({
      neuron_runtimes: [{
        period: "250ms",
        metrics: [{ type: "memory_used" }, { type: "execution_stats", period: "1m" }],
      }],
      system_metrics: [{ type: "memory_info" }],
    }));
    expect(c.runtimes[0].tagFilter).toBeNull();
    expect(c.runtimes[0].groups).toEqual([
      { type: "memory_used", periodSeconds: 0.25 },
      { type: "execution_stats", periodSeconds: 60 },
    ]);
    expect(c.system).toEqual([{ type: "memory_info", periodSeconds: 5 }]);
  });

  test("parseMonitorConfig() of an empty object collects nothing, and keeps the root period", () => {
    expect(parseMonitorConfig("{}")).toEqual({ runtimes: [], system: [], periodSeconds: 5 });
    expect(parseMonitorConfig('{"period":"1m30s"}')).toEqual({ runtimes: [], system: [], periodSeconds: 90 });
    expect(defaultMonitorConfig().periodSeconds).toBe(5);
  });

  test("parseMonitorConfig() names the field of every kind of mistake", () => {
    expect(fieldOf(() => parseMonitorConfig("{"))).toBe("");
    expect(fieldOf(() => parseMonitorConfig("[]"))).toBe("");
    expect(fieldOf(() => parseMonitorConfig('{"perod": "1s"}'))).toBe("perod");
    expect(fieldOf(() => parseMonitorConfig('{"period": "soon"}'))).toBe("period");
    expect(fieldOf(() => parseMonitorConfig('{"period": 5}'))).toBe("period");
    expect(fieldOf(() => parseMonitorConfig('{"period": "0s"}'))).toBe("period");
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": {}}'))).toBe("neuron_runtimes");
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{}]}'))).toBe("neuron_runtimes[0].metrics");
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"metrics": [], "address": "x"}]}'))).toBe(
      "neuron_runtimes[0].address",
    );
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"metrics": [{"type": "flops"}]}]}'))).toBe(
      "neuron_runtimes[0].metrics[0].type",
    );
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"metrics": [{}]}]}'))).toBe(
      "neuron_runtimes[0].metrics[0].type",
    );
    expect(
      fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"metrics": [{"type": "memory_used", "period": "x"}]}]}')),
    )
      .toBe("neuron_runtimes[0].metrics[0].period");
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"tag_filter": "(", "metrics": []}]}'))).toBe(
      "neuron_runtimes[0].tag_filter",
    );
    expect(fieldOf(() => parseMonitorConfig('{"neuron_runtimes": [{"tag_filter": 1, "metrics": []}]}'))).toBe(
      "neuron_runtimes[0].tag_filter",
    );
    expect(fieldOf(() => parseMonitorConfig('{"system_metrics": [{"type": "memory_used"}]}'))).toBe(
      "system_metrics[0].type",
    );
    expect(fieldOf(() => parseMonitorConfig('{"system_metrics": [{"type": "vcpu_usage"}, {"type": "vcpu_usage"}]}')))
      .toBe(
        "system_metrics[1].type",
      );
  });

  test("parseMonitorConfig() says what it expected in the message", () => {
    expect(() => parseMonitorConfig('{"system_metrics": [{"type": "memory_used"}]}')).toThrow(
      'Cannot use neuron-monitor config: system_metrics[0].type is "memory_used", ' +
        "expected one of vcpu_usage, memory_info, " +
        "neuron_hw_counters",
    );
    expect(() => parseMonitorConfig('{"period": "soon"}')).toThrow(
      'Cannot use neuron-monitor config: period is "soon", expected a duration such as "500ms", "1s" or "1m30s"',
    );
  });
});

describe("parseGoDuration()", () => {
  test("parseGoDuration() reads Go duration strings", () => {
    expect(parseGoDuration("1s")).toBe(1);
    expect(parseGoDuration("500ms")).toBe(0.5);
    expect(parseGoDuration("1m30s")).toBe(90);
    expect(parseGoDuration("1.5h")).toBe(5400);
    expect(parseGoDuration("250us")).toBeCloseTo(0.00025, 12);
  });

  test("parseGoDuration() refuses a bare number, a sign and zero", () => {
    expect(() => parseGoDuration("5")).toThrow('Cannot parse duration "5"');
    expect(() => parseGoDuration("-1s")).toThrow('Cannot parse duration "-1s"');
    expect(() => parseGoDuration("0s")).toThrow("expected a positive duration");
  });
});

describe("defaultMonitorConfig() / selectRuntime()", () => {
  test("defaultMonitorConfig() collects every group every 5 seconds for every application", () => {
    const c = defaultMonitorConfig();
    expect(c.runtimes[0].tagFilter).toBeNull();
    expect(c.runtimes[0].groups.map((g) => g.type)).toEqual([
      "neuroncore_counters",
      "memory_used",
      "neuron_runtime_vcpu_usage",
      "execution_stats",
    ]);
    expect(c.system.map((g) => g.type)).toEqual(["vcpu_usage", "memory_info", "neuron_hw_counters"]);
    expect([...c.runtimes[0].groups, ...c.system].every((g) => g.periodSeconds === 5)).toBe(true);
  });

  test("selectRuntime() takes the first entry whose tag_filter matches, unanchored", () => {
    const c: MonitorConfig = validateMonitorConfig({
      neuron_runtimes: [
        { tag_filter: "^train", metrics: [{ type: "memory_used" }] },
        { tag_filter: "app", metrics: [{ type: "execution_stats" }] },
      ],
    });
    expect(selectRuntime(c, "training-1")).toBe(c.runtimes[0]);
    expect(selectRuntime(c, "my_app_1")).toBe(c.runtimes[1]);
    expect(selectRuntime(c, "4242")).toBeUndefined();
  });
});
