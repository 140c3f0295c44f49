// Our neuron-monitor reports read the way neuron-monitor-prometheus.py reads them (Neuron Monitor User Guide,
// "neuron-monitor-prometheus.py"): metric names, label names and values checked against the snapshot that produced
// the reports.
import { describe, expect, test } from "bun:test";
import {
  ExporterStopped,
  floatToGoString,
  NeuronMonitorPrometheusReader,
  pyFloatRepr,
} from "../../../tests/_neuron_monitor_prometheus.ts";
import { buildMonitorReport, serializeMonitorReport } from "./neuron_monitor.ts";
import { defaultMonitorConfig } from "./neuron_monitor_config.ts";
import type { NeuronSnapshot } from "./snapshot.ts";
import { testSnapshot } from "./_testing.ts";

const GiB = 2 ** 30;
const NOW = 1_700_000_000;

const INSTANCE = {
  instance_name: "nrt-sim",
  instance_id: "i-0123456789abcdef0",
  instance_type: "trn2.48xlarge",
  availability_zone: "us-west-2b",
  region: "us-west-2",
  subnet_id: "subnet-0123abcd",
};

function line(snap: NeuronSnapshot = testSnapshot()): string {
  return serializeMonitorReport(buildMonitorReport(snap, defaultMonitorConfig()));
}

function read(...lines: string[]): NeuronMonitorPrometheusReader {
  const reader = new NeuronMonitorPrometheusReader({ now: () => NOW });
  reader.consume(lines.join(""));
  return reader;
}

describe("NeuronMonitorPrometheusReader: metrics from one report", () => {
  test("it creates the exporter's families, in registration order, with the exporter's types", () => {
    const families = read(line()).families().map((f) => `${f.name}:${f.type}`);
    expect(families).toEqual([
      "execution_errors:counter",
      "execution_status:counter",
      "execution_latency_seconds:gauge",
      "neuron_runtime_memory_used_bytes:gauge",
      "neuroncore_memory_usage_constants:gauge",
      "neuroncore_memory_usage_model_code:gauge",
      "neuroncore_memory_usage_model_shared_scratchpad:gauge",
      "neuroncore_memory_usage_runtime_memory:gauge",
      "neuroncore_memory_usage_tensors:gauge",
      "neuron_runtime_vcpu_usage_ratio:gauge",
      "neuroncore_utilization_ratio:gauge",
      "system_memory_total_bytes:gauge",
      "system_memory_used_bytes:gauge",
      "system_swap_total_bytes:gauge",
      "system_swap_used_bytes:gauge",
      "hardware_ecc_events:counter",
      "system_vcpu_count:gauge",
      "system_vcpu_usage_ratio:gauge",
      "instance:info",
      "neuron_hardware:info",
    ]);
  });

  test("neuroncore_utilization_ratio is the core's utilization / 100, labelled by runtime_tag and neuroncore", () => {
    const r = read(line());
    expect(r.family("neuroncore_utilization_ratio")?.labelNames).toEqual([
      ...Object.keys(INSTANCE),
      "runtime_tag",
      "neuroncore",
    ]);
    expect(r.samples("neuroncore_utilization_ratio")).toEqual([
      {
        name: "neuroncore_utilization_ratio",
        labels: { ...INSTANCE, runtime_tag: "demo", neuroncore: "0" },
        value: 0.25,
      },
      {
        name: "neuroncore_utilization_ratio",
        labels: { ...INSTANCE, runtime_tag: "demo", neuroncore: "1" },
        value: 0.5,
      },
      { name: "neuroncore_utilization_ratio", labels: { ...INSTANCE, runtime_tag: "5151", neuroncore: "4" }, value: 0 },
    ]);
  });

  test("memory: runtime totals by memory_location, and the per-core breakdown gauges with memory_location None", () => {
    const r = read(line());
    expect(r.value("neuron_runtime_memory_used_bytes", { runtime_tag: "demo", memory_location: "host" })).toBe(10220);
    expect(r.value("neuron_runtime_memory_used_bytes", { runtime_tag: "demo", memory_location: "neuron_device" })).toBe(
      81792,
    );
    expect(r.family("neuroncore_memory_usage_tensors")?.labelNames).toEqual([
      ...Object.keys(INSTANCE),
      "runtime_tag",
      "memory_location",
      "neuroncore",
    ]);
    const core0 = { runtime_tag: "demo", neuroncore: "0", memory_location: "None" };
    expect(r.value("neuroncore_memory_usage_constants", core0)).toBe(4096);
    expect(r.value("neuroncore_memory_usage_model_code", core0)).toBe(3072);
    expect(r.value("neuroncore_memory_usage_model_shared_scratchpad", core0)).toBe(512);
    expect(r.value("neuroncore_memory_usage_runtime_memory", core0)).toBe(384);
    expect(r.value("neuroncore_memory_usage_tensors", core0)).toBe(8192);
    expect(r.value("neuroncore_memory_usage_tensors", { runtime_tag: "demo", neuroncore: "1" })).toBe(65536);
    expect(r.value("neuroncore_memory_usage_tensors", { runtime_tag: "5151", neuroncore: "4" })).toBe(0);
  });

  test("execution_status_total and execution_errors_total count each outcome and error kind", () => {
    const r = read(line());
    const status = Object.fromEntries(
      r.samples("execution_status_total", { runtime_tag: "demo" }).map((s) => [s.labels.status_type, s.value]),
    );
    expect(status).toEqual({
      completed: 10,
      completed_with_err: 1,
      completed_with_num_err: 2,
      timed_out: 1,
      incorrect_input: 0,
      failed_to_queue: 3,
    });
    const errors = Object.fromEntries(
      r.samples("execution_errors_total", { runtime_tag: "demo" }).map((s) => [s.labels.error_type, s.value]),
    );
    expect(errors).toEqual({ generic: 0, numerical: 2, transient: 3, model: 0, runtime: 1, hardware: 1 });
    expect(r.samples("execution_status_created", { runtime_tag: "demo", status_type: "completed" })[0].value).toBe(NOW);
  });

  test("execution_latency_seconds has the total latency percentiles, none for a runtime that ran nothing", () => {
    const r = read(line());
    const p = Object.fromEntries(
      r.samples("execution_latency_seconds", { runtime_tag: "demo" }).map((s) => [s.labels.percentile, s.value]),
    );
    expect(p).toEqual({ p0: 0.001, p1: 0.001, p25: 0.001, p50: 0.002, p75: 0.003, p99: 0.004, p100: 0.004 });
    expect(r.samples("execution_latency_seconds", { runtime_tag: "5151" })).toEqual([]);
  });

  test("hardware_ecc_events_total counts the four ECC counters per device, without runtime_tag", () => {
    const r = read(line());
    expect(r.family("hardware_ecc_events")?.labelNames).toEqual([
      ...Object.keys(INSTANCE),
      "event_type",
      "neuron_device_index",
    ]);
    const dev0 = Object.fromEntries(
      r.samples("hardware_ecc_events_total", { neuron_device_index: "0" }).map((s) => [s.labels.event_type, s.value]),
    );
    expect(dev0).toEqual({
      mem_ecc_corrected: 2,
      mem_ecc_uncorrected: 1,
      sram_ecc_corrected: 0,
      sram_ecc_uncorrected: 3,
    });
    expect(r.samples("hardware_ecc_events_total", { neuron_device_index: "1" }).map((s) => s.value)).toEqual([
      0,
      0,
      0,
      0,
    ]);
  });

  test("system and vCPU gauges: counts, ratios aggregated as the exporter does, memory bytes", () => {
    const r = read(line());
    expect(r.value("system_vcpu_count")).toBe(2);
    expect(r.value("system_vcpu_usage_ratio", { usage_type: "user" })).toBeCloseTo(0.155, 12);
    expect(r.value("system_vcpu_usage_ratio", { usage_type: "system" })).toBeCloseTo(0.095, 12);
    expect(r.value("neuron_runtime_vcpu_usage_ratio", { runtime_tag: "demo", usage_type: "user" })).toBeCloseTo(
      0.1235,
      12,
    );
    expect(r.value("system_memory_total_bytes")).toBe(24 * GiB);
    expect(r.value("system_memory_used_bytes")).toBe(8 * GiB);
    expect(r.value("system_swap_total_bytes")).toBe(0);
    expect(r.samples("system_vcpu_count")[0].labels).toEqual(INSTANCE);
  });

  test("instance_info and neuron_hardware_info carry the instance and device counts as labels", () => {
    const r = read(line());
    expect(r.samples("instance_info")).toEqual([{ name: "instance_info", labels: INSTANCE, value: 1 }]);
    expect(r.samples("neuron_hardware_info")).toEqual([{
      name: "neuron_hardware_info",
      labels: { neuron_device_count: "2", neuroncore_per_device_count: "4", ...INSTANCE },
      value: 1,
    }]);
  });
});

describe("NeuronMonitorPrometheusReader: state across reports", () => {
  test("counters add each report's counts; gauges take the latest value", () => {
    const snap = testSnapshot();
    const slower = {
      ...snap,
      runtimes: [{ ...snap.runtimes[0], cores: [{ ...snap.runtimes[0].cores[0], busySeconds: 2 }] }],
    };
    const r = read(line(), line(slower));
    expect(r.value("execution_status_total", { runtime_tag: "demo", status_type: "completed" })).toBe(20);
    expect(r.value("hardware_ecc_events_total", { neuron_device_index: "0", event_type: "sram_ecc_uncorrected" })).toBe(
      6,
    );
    expect(r.value("neuroncore_utilization_ratio", { runtime_tag: "demo", neuroncore: "0" })).toBe(1);
    // The second report no longer has runtime 5151: its last values stay.
    expect(r.value("neuroncore_utilization_ratio", { runtime_tag: "5151", neuroncore: "4" })).toBe(0);
  });

  test("a report without runtimes clears every gauge and counter; families, system data and info stay", () => {
    const r = read(line(), line({ ...testSnapshot(), runtimes: [] }));
    expect(r.family("neuroncore_utilization_ratio")?.samples).toEqual([]);
    expect(r.family("execution_status")?.samples).toEqual([]);
    expect(r.value("system_memory_total_bytes")).toBe(24 * GiB);
    // Cleared, then incremented by this report alone.
    expect(r.value("hardware_ecc_events_total", { neuron_device_index: "0", event_type: "mem_ecc_corrected" })).toBe(2);
    expect(r.samples("instance_info").length).toBe(1);
  });

  test("the instance labels come from the first report only", () => {
    const snap = testSnapshot();
    const moved = { ...snap, instance: { ...snap.instance, instanceId: "i-fffffffffffffffff" } };
    const r = read(line(), line(moved));
    expect(r.samples("neuroncore_utilization_ratio").every((s) => s.labels.instance_id === "i-0123456789abcdef0")).toBe(
      true,
    );
  });

  test("an unreadable runtime is skipped with a message; the others are read", () => {
    const snap = testSnapshot();
    const r = read(line({ ...snap, runtimes: [{ ...snap.runtimes[0], error: "not responding" }, snap.runtimes[1]] }));
    expect(r.diagnostics).toEqual(["Runtime demo error: not responding"]);
    expect(r.samples("neuroncore_utilization_ratio").map((s) => s.labels.runtime_tag)).toEqual(["5151"]);
  });

  test("a group with an error is skipped with a message naming the group and the runtime tag", () => {
    const snap = testSnapshot();
    const failing = {
      ...snap.runtimes[0],
      groupErrors: { neuron_runtime_vcpu_usage: "open /proc/4242/stat: no such file" },
    };
    const r = read(
      line({ ...snap, runtimes: [failing], system: { ...snap.system, groupErrors: { vcpu_usage: "no /proc/stat" } } }),
    );
    expect(r.diagnostics).toEqual([
      "Error getting neuron_runtime_vcpu_usage for runtime tag demo: open /proc/4242/stat: no such file",
      "Error getting vcpu_usage: no /proc/stat",
    ]);
    expect(r.family("neuron_runtime_vcpu_usage_ratio")).toBeUndefined();
    expect(r.family("system_vcpu_count")).toBeUndefined();
  });

  test("a line that is not JSON is reported and skipped", () => {
    const r = read("{not json\n", line());
    expect(r.diagnostics.length).toBe(1);
    expect(r.diagnostics[0].startsWith("Unable to decode JSON")).toBe(true);
    expect(r.value("system_vcpu_count")).toBe(2);
  });

  test("a group without a handler is ignored; system_data null and no neuron_hardware_info are allowed", () => {
    const report = JSON.parse(line());
    report.system_data = null;
    report.neuron_runtime_data[0].report.neuron_k8s_info = { period: 1, error: "" };
    const withoutHw = JSON.parse(line());
    withoutHw.neuron_hardware_info = null;
    const r = new NeuronMonitorPrometheusReader({ now: () => NOW });
    r.consumeLine(JSON.stringify(withoutHw));
    expect(r.family("neuron_hardware")).toBeUndefined();
    r.consumeLine(JSON.stringify(report));
    expect(r.family("neuron_hardware")?.samples.length).toBe(1);
  });
});

describe("NeuronMonitorPrometheusReader: where the exporter stops", () => {
  test("a first report without instance_info stops it with KeyError", () => {
    const r = new NeuronMonitorPrometheusReader();
    expect(() => r.consumeLine('{"neuron_runtime_data": []}')).toThrow(ExporterStopped);
    expect(() => r.consumeLine('{"neuron_runtime_data": []}')).toThrow("KeyError: 'instance_info'");
  });

  test("a negative counter increment stops it with ValueError", () => {
    const report = JSON.parse(line());
    report.neuron_runtime_data[0].report.execution_stats.execution_summary.completed = -1;
    expect(() => read(JSON.stringify(report))).toThrow(
      "ValueError: Counters can only be incremented by non-negative amounts.",
    );
  });

  test("a group named after another exporter function stops it", () => {
    const report = JSON.parse(line());
    report.system_data.data = { error: "" };
    expect(() => read(JSON.stringify(report))).toThrow("TypeError");
  });
});

describe("NeuronMonitorPrometheusReader.exposition()", () => {
  test("exposition() writes prometheus_client's text format: sorted labels, _total and _created, Go floats", () => {
    const text = read(line()).exposition();
    const labels = (extra: string): string =>
      `availability_zone="us-west-2b",instance_id="i-0123456789abcdef0",instance_name="nrt-sim",` +
      `instance_type="trn2.48xlarge",` +
      `region="us-west-2",${extra}subnet_id="subnet-0123abcd"`;
    expect(text).toContain(
      "# HELP execution_status_total Execution status total\n# TYPE execution_status_total counter\n" +
        `execution_status_total{${labels('runtime_tag="demo",status_type="completed",')}} 10.0\n`,
    );
    expect(text).toContain(
      "# HELP execution_status_created Execution status total\n# TYPE execution_status_created gauge\n" +
        `execution_status_created{${labels('runtime_tag="demo",status_type="completed",')}} 1.7e+09\n`,
    );
    expect(text).toContain(`system_memory_total_bytes{${labels("")}} 2.5769803776e+010\n`);
    expect(text).toContain(
      'neuroncore_utilization_ratio{availability_zone="us-west-2b",instance_id="i-0123456789abcdef0",' +
        'instance_name="nrt-sim",instance_type="trn2.48xlarge",neuroncore="0",region="us-west-2",runtime_tag="demo",' +
        'subnet_id="subnet-0123abcd"} 0.25\n',
    );
    expect(text).toContain(
      `# HELP instance_info EC2 instance information\n# TYPE instance_info gauge\ninstance_info{${labels("")}} 1.0\n`,
    );
  });
});

describe("pyFloatRepr() / floatToGoString()", () => {
  test("pyFloatRepr() writes floats as Python's repr does", () => {
    const cases: [number, string][] = [
      [3, "3.0"],
      [0.1, "0.1"],
      [-2.5, "-2.5"],
      [1e16, "1e+16"],
      [1e15, "1000000000000000.0"],
      [2 ** 53, "9007199254740992.0"],
      [0.0001, "0.0001"],
      [0.00001, "1e-05"],
      [1.5e-7, "1.5e-07"],
      [123456789.123, "123456789.123"],
      [1.7976931348623157e308, "1.7976931348623157e+308"],
    ];
    for (const [x, s] of cases) expect(pyFloatRepr(x)).toBe(s);
  });

  test("floatToGoString() switches to exponents as prometheus_client does", () => {
    const cases: [number, string][] = [
      [12519788544, "1.2519788544e+010"],
      [1000000, "1e+06"],
      [123456, "123456.0"],
      [1234567, "1.234567e+06"],
      [0.25, "0.25"],
      [1e16, "1e+16"],
      [-5, "-5.0"],
      [Infinity, "+Inf"],
    ];
    for (const [x, s] of cases) expect(floatToGoString(x)).toBe(s);
  });
});
