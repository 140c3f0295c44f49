// Neuron Monitor User Guide: "The JSON output format", "instance_info", "neuron_hardware_info", "Metric Groups",
// "neuroncore_counters", "execution_stats", "memory_used", "neuron_runtime_vcpu_usage", "neuron_hw_counters",
// "vcpu_usage", "memory_info", "Execution model".
import { describe, expect, test } from "bun:test";
import {
  buildMonitorReport,
  groupKey,
  latencyPercentiles,
  type NeuronMonitorReport,
  scheduleMonitorGroups,
  serializeMonitorReport,
} from "./neuron_monitor.ts";
import { defaultMonitorConfig, parseMonitorConfig } from "./neuron_monitor_config.ts";
import type { NeuronSnapshot } from "./snapshot.ts";
import { testSnapshot } from "./_testing.ts";

const GiB = 2 ** 30;

function report(snap: NeuronSnapshot = testSnapshot()): NeuronMonitorReport {
  return buildMonitorReport(snap, defaultMonitorConfig());
}

describe("buildMonitorReport(): the JSON output format", () => {
  test("buildMonitorReport() has the four documented top-level objects, runtime entries and sorted groups", () => {
    const r = report();
    expect(Object.keys(r)).toEqual(["neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"]);
    expect(r.neuron_runtime_data.map((e) => Object.keys(e))).toEqual([
      ["pid", "neuron_runtime_tag", "error", "report"],
      ["pid", "neuron_runtime_tag", "error", "report"],
    ]);
    expect(r.neuron_runtime_data.map((e) => [e.pid, e.neuron_runtime_tag, e.error])).toEqual([[4242, "demo", ""], [
      5151,
      "5151",
      "",
    ]]);
    expect(Object.keys(r.neuron_runtime_data[0].report)).toEqual([
      "execution_stats",
      "memory_used",
      "neuron_runtime_vcpu_usage",
      "neuroncore_counters",
    ]);
    expect(Object.keys(r.system_data ?? {})).toEqual(["memory_info", "neuron_hw_counters", "vcpu_usage"]);
  });

  test("buildMonitorReport() gives every group its period and an empty error when healthy (Metric Groups)", () => {
    const r = report();
    const groups = [...Object.values(r.neuron_runtime_data[0].report), ...Object.values(r.system_data ?? {})];
    expect(groups.length).toBe(7);
    for (const g of groups) {
      expect(g.period).toBe(2);
      expect(g.error).toBe("");
      expect(Object.keys(g)[0]).toBe("period");
      expect(Object.keys(g).at(-1)).toBe("error");
    }
  });

  test("buildMonitorReport() with no runtime gives an empty neuron_runtime_data array", () => {
    const r = report({ ...testSnapshot(), runtimes: [] });
    expect(r.neuron_runtime_data).toEqual([]);
    expect(serializeMonitorReport(r)).toContain('"neuron_runtime_data":[]');
  });

  test("buildMonitorReport() keeps only the groups and applications the config selects", () => {
    const config = parseMonitorConfig(JSON.stringify({
      neuron_runtimes: [{ tag_filter: "^demo$", metrics: [{ type: "memory_used" }] }],
    }));
    const r = buildMonitorReport(testSnapshot(), config);
    expect(r.neuron_runtime_data.map((e) => e.pid)).toEqual([4242]);
    expect(Object.keys(r.neuron_runtime_data[0].report)).toEqual(["memory_used"]);
    expect(r.system_data).toBeNull();
  });

  test("buildMonitorReport() reports an unreadable application with its error and an empty report", () => {
    const snap = testSnapshot();
    const r = report({ ...snap, runtimes: [{ ...snap.runtimes[0], error: "runtime 4242 is not responding" }] });
    expect(r.neuron_runtime_data).toEqual([{
      pid: 4242,
      neuron_runtime_tag: "demo",
      error: "runtime 4242 is not responding",
      report: {},
    }]);
  });

  test("buildMonitorReport() carries a group's collection error with its data", () => {
    const snap = testSnapshot();
    const r = report({
      ...snap,
      runtimes: [{
        ...snap.runtimes[0],
        groupErrors: { neuron_runtime_vcpu_usage: "open /proc/4242/stat: no such file" },
      }],
      system: { ...snap.system, groupErrors: { memory_info: "cannot read /proc/meminfo" } },
    });
    expect(r.neuron_runtime_data[0].report.neuron_runtime_vcpu_usage?.error).toBe("open /proc/4242/stat: no such file");
    expect(r.neuron_runtime_data[0].report.neuroncore_counters?.error).toBe("");
    expect(r.system_data?.memory_info?.error).toBe("cannot read /proc/meminfo");
    expect(r.system_data?.memory_info?.memory_total_bytes).toBe(24 * GiB);
  });

  test("buildMonitorReport() refuses a period that is not positive", () => {
    expect(() => report({ ...testSnapshot(), periodSeconds: 0 })).toThrow("the period is 0 s, expected > 0");
  });
});

describe("buildMonitorReport(): Neuron application level metric groups", () => {
  test("neuroncore_counters: utilization in percent per logical core, v3d per physical core, flops per second", () => {
    const [a, b] = report().neuron_runtime_data;
    expect(a.report.neuroncore_counters?.neuroncores_in_use).toEqual({
      "0": {
        neuroncore_utilization: 25,
        v3d: { "nc_v3.0": { neuroncore_utilization: 25 }, "nc_v3.1": { neuroncore_utilization: 12.5 } },
      },
      "1": { neuroncore_utilization: 50, flops: 2e12 },
    });
    expect(b.report.neuroncore_counters?.neuroncores_in_use).toEqual({ "4": { neuroncore_utilization: 0 } });
  });

  test("neuroncore_counters: utilization is clamped to 100 % and v3d appears only on NC-v3", () => {
    const snap = testSnapshot();
    const busy = { ...snap.runtimes[0], cores: [{ ...snap.runtimes[0].cores[0], busySeconds: 3 }] };
    const devices = snap.devices.map((d) => ({ ...d, generation: "NC-v2" }));
    const counters = report({ ...snap, devices, runtimes: [busy] }).neuron_runtime_data[0].report.neuroncore_counters;
    expect(counters?.neuroncores_in_use["0"]).toEqual({ neuroncore_utilization: 100 });
  });

  test("memory_used: host and device totals, the host breakdown and the per-core device breakdown", () => {
    const m = report().neuron_runtime_data[0].report.memory_used;
    expect(m?.neuron_runtime_used_bytes).toEqual({
      host: 10220,
      neuron_device: 81792,
      usage_breakdown: {
        host: { application_memory: 5100, constants: 0, dma_buffers: 4096, tensors: 1024 },
        neuroncore_memory_usage: {
          "0": { constants: 4096, model_code: 3072, model_shared_scratchpad: 512, runtime_memory: 384, tensors: 8192 },
          "1": { constants: 0, model_code: 0, model_shared_scratchpad: 0, runtime_memory: 0, tensors: 65536 },
        },
      },
    });
  });

  test("memory_used: loaded_models with one subgraph, its memory and placement", () => {
    const [a, b] = report().neuron_runtime_data;
    expect(a.report.memory_used?.loaded_models).toEqual([{
      name: "vector_add",
      uuid: "00a04c535fd94f07bffdd5eacdefc852",
      model_id: 10001,
      is_running: true,
      subgraphs: {
        sg_00: {
          memory_used_bytes: {
            host: 100,
            neuron_device: 5608,
            usage_breakdown: {
              host: { application_memory: 100, constants: 0, dma_buffers: 0, tensors: 0 },
              neuron_device: { constants: 4096, model_code: 1000, runtime_memory: 512, tensors: 0 },
            },
          },
          neuroncore_index: 0,
          neuron_device_index: 0,
        },
      },
    }]);
    expect(b.report.memory_used?.loaded_models).toEqual([]);
  });

  test("execution_stats: both summaries and the latency percentiles in seconds", () => {
    const e = report().neuron_runtime_data[0].report.execution_stats;
    expect(e?.error_summary).toEqual({ generic: 0, numerical: 2, transient: 3, model: 0, runtime: 1, hardware: 1 });
    expect(e?.execution_summary).toEqual({
      completed: 10,
      completed_with_err: 1,
      completed_with_num_err: 2,
      timed_out: 1,
      incorrect_input: 0,
      failed_to_queue: 3,
    });
    expect(e?.latency_stats).toEqual({
      total_latency: { p0: 0.001, p1: 0.001, p25: 0.001, p50: 0.002, p75: 0.003, p99: 0.004, p100: 0.004 },
      device_latency: { p0: 0.0008, p1: 0.0008, p25: 0.0008, p50: 0.0015, p75: 0.0025, p99: 0.0035, p100: 0.0035 },
    });
  });

  test("execution_stats: with nothing executed the latency objects are null", () => {
    const e = report().neuron_runtime_data[1].report.execution_stats;
    expect(e?.latency_stats).toEqual({ total_latency: null, device_latency: null });
    expect(serializeMonitorReport(report())).toContain('"latency_stats":{"total_latency":null,"device_latency":null}');
    expect(Object.values(e?.execution_summary ?? {}).every((n) => n === 0)).toBe(true);
  });

  test("neuron_runtime_vcpu_usage: user and system percent", () => {
    expect(report().neuron_runtime_data[0].report.neuron_runtime_vcpu_usage?.vcpu_usage).toEqual({
      user: 12.35,
      system: 3.21,
    });
  });
});

describe("buildMonitorReport(): system level groups, instance and hardware info", () => {
  test("vcpu_usage: per-vCPU data keyed by index, the average and the context switches", () => {
    const v = report().system_data?.vcpu_usage;
    expect(v?.average_usage).toEqual({
      user: 15,
      nice: 0.5,
      system: 7.5,
      idle: 75,
      io_wait: 1,
      irq: 0.5,
      soft_irq: 0.5,
    });
    expect(Object.keys(v?.usage_data ?? {})).toEqual(["0", "1"]);
    expect(v?.usage_data["1"]).toEqual({ user: 20, nice: 0, system: 10, idle: 70, io_wait: 0, irq: 0, soft_irq: 0 });
    expect(v?.context_switch_count).toBe(1234);
  });

  test("memory_info and neuron_hw_counters carry the documented fields", () => {
    const s = report().system_data;
    expect(s?.memory_info).toEqual({
      period: 2,
      memory_total_bytes: 24 * GiB,
      memory_used_bytes: 8 * GiB,
      swap_total_bytes: 0,
      swap_used_bytes: 0,
      error: "",
    });
    expect(s?.neuron_hw_counters?.neuron_devices).toEqual([
      {
        neuron_device_index: 0,
        mem_ecc_corrected: 2,
        mem_ecc_uncorrected: 1,
        sram_ecc_uncorrected: 3,
        sram_ecc_corrected: 0,
      },
      {
        neuron_device_index: 1,
        mem_ecc_corrected: 0,
        mem_ecc_uncorrected: 0,
        sram_ecc_uncorrected: 0,
        sram_ecc_corrected: 0,
      },
    ]);
  });

  test("instance_info has every documented key, in order, error last", () => {
    expect(report().instance_info).toEqual({
      instance_name: "nrt-sim",
      instance_id: "i-0123456789abcdef0",
      instance_type: "trn2.48xlarge",
      instance_availability_zone: "us-west-2b",
      instance_availability_zone_id: "usw2-az2",
      instance_region: "us-west-2",
      ami_id: "ami-0123456789abcdef0",
      subnet_id: "subnet-0123abcd",
      error: "",
    });
    expect(Object.keys(report().instance_info).at(-1)).toBe("error");
  });

  test("neuron_hardware_info names a Trn2 as the guide's example does", () => {
    const hw = report().neuron_hardware_info;
    expect(hw).toEqual({
      neuron_device_type: "trainium2",
      neuron_device_version: "v4",
      neuroncore_version: "v3d",
      neuron_device_count: 2,
      neuron_device_memory_size: 103079215104,
      neuroncore_per_device_count: 4,
      logical_neuroncore_config: 2,
      error: "",
    });
    expect(Object.keys(hw)).toEqual([
      "neuron_device_type",
      "neuron_device_version",
      "neuroncore_version",
      "neuron_device_count",
      "neuron_device_memory_size",
      "neuroncore_per_device_count",
      "logical_neuroncore_config",
      "error",
    ]);
  });
});

describe("serializeMonitorReport()", () => {
  test("serializeMonitorReport() writes one complete JSON document on one line", () => {
    const r = report();
    const line = serializeMonitorReport(r);
    expect(line.endsWith("\n")).toBe(true);
    expect(line.indexOf("\n")).toBe(line.length - 1);
    expect(JSON.parse(line)).toEqual(r);
  });
});

describe("latencyPercentiles()", () => {
  test("latencyPercentiles() is nearest-rank: p0 the minimum, p100 the maximum", () => {
    const samples = Array.from({ length: 200 }, (_, i) => (200 - i) / 1000);
    expect(latencyPercentiles(samples)).toEqual({
      p0: 0.001,
      p1: 0.002,
      p25: 0.05,
      p50: 0.1,
      p75: 0.15,
      p99: 0.198,
      p100: 0.2,
    });
    expect(latencyPercentiles([0.5])).toEqual({ p0: 0.5, p1: 0.5, p25: 0.5, p50: 0.5, p75: 0.5, p99: 0.5, p100: 0.5 });
    expect(latencyPercentiles([])).toBeNull();
  });

  test("latencyPercentiles() refuses a negative sample", () => {
    expect(() => latencyPercentiles([0.1, -1])).toThrow("sample -1 is not a duration");
  });
});

describe("scheduleMonitorGroups(): the execution model", () => {
  const config = parseMonitorConfig(JSON.stringify({
    period: "1s",
    neuron_runtimes: [{ metrics: [{ type: "neuroncore_counters" }] }],
    system_metrics: [{ type: "memory_info" }, { type: "neuron_hw_counters", period: "2s" }],
  }));
  const core = groupKey("runtime", "neuroncore_counters", 0);
  const mem = groupKey("system", "memory_info");
  const hw = groupKey("system", "neuron_hw_counters");

  test("scheduleMonitorGroups() makes every group never collected due", () => {
    const s = scheduleMonitorGroups(config, new Map(), 100);
    expect([...s.due].sort()).toEqual([core, hw, mem].sort());
    expect(s.nextAt).toBe(101);
  });

  test("scheduleMonitorGroups() waits for each group's own period", () => {
    const last = new Map([[core, 100], [mem, 100], [hw, 100]]);
    expect(scheduleMonitorGroups(config, last, 100.5)).toEqual({ due: new Set(), nextAt: 101 });
    const at101 = scheduleMonitorGroups(config, last, 101);
    expect([...at101.due].sort()).toEqual([core, mem].sort());
    expect(at101.nextAt).toBe(102);
  });

  test("scheduleMonitorGroups() with no group enabled is due once per root period, never at Infinity", () => {
    for (
      const [text, period] of [
        ['{"neuron_runtimes":[],"system_metrics":[]}', 5],
        ['{"period":"1s"}', 1],
        ['{"period":"720h","neuron_runtimes":[{"metrics":[]}]}', 720 * 3600],
      ] as const
    ) {
      const none = parseMonitorConfig(text);
      expect(scheduleMonitorGroups(none, new Map(), 100)).toEqual({ due: new Set(), nextAt: 100 + period });
      expect(scheduleMonitorGroups(none, new Map(), 100 + period).nextAt).toBe(100 + 2 * period);
    }
    // A configuration built in code without a root period: the default.
    expect(scheduleMonitorGroups({ runtimes: [], system: [] }, new Map(), 7).nextAt).toBe(12);
  });

  test("buildMonitorReport() copies a group not due from the previous report", () => {
    const first = buildMonitorReport(testSnapshot(), config);
    const snap = testSnapshot();
    const later: NeuronSnapshot = {
      ...snap,
      devices: snap.devices.map((d) => ({ ...d, ecc: { ...d.ecc, memCorrected: 99 } })),
      system: { ...snap.system, memoryUsedBytes: 9 * GiB },
    };
    const second = buildMonitorReport(later, config, { previous: first, due: new Set([core, mem]) });
    expect(second.system_data?.neuron_hw_counters).toEqual(first.system_data?.neuron_hw_counters);
    expect(second.system_data?.memory_info?.memory_used_bytes).toBe(9 * GiB);
    const all = buildMonitorReport(later, config, { previous: first });
    expect(all.system_data?.neuron_hw_counters?.neuron_devices[0].mem_ecc_corrected).toBe(99);
  });
});
