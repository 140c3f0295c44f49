// `nrt monitor` against a real `nrt serve` (in this process) that ran a known workload, read the way AWS's
// neuron-monitor-prometheus.py reads the stream (tests/_neuron_monitor_prometheus.ts). Field names follow the Neuron
// Monitor User Guide: "The JSON output format", "Metric Groups" (`period`, `error`), "neuroncore_counters"
// (`neuroncores_in_use`, `neuroncore_utilization`), "memory_used" (`neuron_runtime_used_bytes`, `usage_breakdown`,
// `neuroncore_memory_usage`), "execution_stats" (`error_summary`, `execution_summary`, `latency_stats`),
// "neuron_runtime_vcpu_usage", "neuron_hw_counters", "vcpu_usage", "memory_info", "instance_info",
// "neuron_hardware_info", and "neuron-monitor-prometheus.py".
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import type { NeuronStatus } from "@nrt/http-api";
import { type RunningServer, startServer } from "../packages/cli/serve.ts";
import { startDeviceDaemon } from "../packages/cli/device_daemon.ts";
import { MonitorCollector } from "../packages/cli/monitor_command.ts";
import { deviceMemoryBreakdown } from "../packages/cli/neuron/memory_categories.ts";
import type { NeuronMonitorReport } from "../packages/cli/neuron/neuron_monitor.ts";
import { defaultMonitorConfig, parseMonitorConfig } from "../packages/cli/neuron/neuron_monitor_config.ts";
import { serializeMonitorReport } from "../packages/cli/neuron/neuron_monitor.ts";
import { connectDeviceDaemon } from "../packages/cli/transports.ts";
import { runNrt } from "./_cli.ts";
import { oneOpNeff } from "./_kernels.ts";
import { NeuronMonitorPrometheusReader } from "./_neuron_monitor_prometheus.ts";

const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
const RUNS = 6;

let dir: string;
let env: Record<string, string>;
let server: RunningServer;

async function infer(): Promise<void> {
  const res = await fetch(`${server.url}/v2/models/relu/infer`, {
    method: "POST",
    body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] }),
  });
  expect(res.status).toBe(200);
  expect((await res.json()).outputs[0].data).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
}

async function status(): Promise<NeuronStatus> {
  return await (await fetch(`${server.url}/v2/neuron/status`)).json() as NeuronStatus;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nrt-monitor-"));
  env = { NRT_RUNTIME_DIR: join(dir, "run"), NRT_ARCH: "cayman" };
  writeFileSync(join(dir, "relu.neff"), oneOpNeff("relu", "relu", [f32("x", [8])], [f32("y", [8])]));
  server = await startServer({ models: dir, port: 0, grpcPort: "off", arch: "cayman", announce: env, log: () => {} });
});

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("GET /v2/neuron/status (ours)", () => {
  test("is read-only JSON without a credential, and refuses a malformed after=", async () => {
    const s = await status();
    expect(s.schema).toBe("nrt-neuron-status/1");
    expect(s.pid).toBe(process.pid);
    expect(s.device).toMatchObject({
      arch: "cayman",
      generation: "NC-v3",
      physical_cores: 8,
      virtual_core_size: 2,
      device_busy: true,
    });
    expect(s.models.map((m) => [m.name, m.vnc])).toEqual([["relu.neff", 0]]); // the NEFF header's name
    expect((await fetch(`${server.url}/v2/neuron/status?after=x`)).status).toBe(400);
    expect((await fetch(`${server.url}/v2/neuron/status`, { method: "POST" })).status).toBe(405);
  });
});

describe("nrt monitor: reports of the servers announced on this machine", () => {
  test("a workload of known size shows in the next report, and the exporter's reader gets the same values", async () => {
    const collector = new MonitorCollector({ config: defaultMonitorConfig(), source: { kind: "discover" }, env });
    const first = (await collector.collect()).report;
    expect(first.neuron_runtime_data.map((r) => [r.pid, r.neuron_runtime_tag, r.error])).toEqual([[
      process.pid,
      String(process.pid),
      "",
    ]]);
    // The first reading is the baseline: no activity yet.
    expect(first.neuron_runtime_data[0].report.execution_stats?.execution_summary.completed).toBe(0);

    const before = await status();
    const t0 = performance.now();
    for (let i = 0; i < RUNS; i++) await infer();
    const elapsed = (performance.now() - t0) / 1000;
    const after = await status();
    const second = (await collector.collect(true)).report;
    const rt = second.neuron_runtime_data[0];
    expect(rt.error).toBe("");
    const groups = [...Object.values(rt.report), ...Object.values(second.system_data ?? {})];
    expect(groups.length).toBe(7);
    for (const g of groups) expect(g.error).toBe("");

    // execution_stats: exactly the workload, every execution completed; latencies from those executions.
    const stats = rt.report.execution_stats!;
    expect(stats.execution_summary).toEqual({
      completed: RUNS,
      completed_with_err: 0,
      completed_with_num_err: 0,
      timed_out: 0,
      incorrect_input: 0,
      failed_to_queue: 0,
    });
    expect(Object.values(stats.error_summary).every((n) => n === 0)).toBe(true);
    const total = stats.latency_stats.total_latency!;
    const device = stats.latency_stats.device_latency!;
    expect(total.p0).toBeGreaterThan(0);
    expect(total.p0).toBeLessThanOrEqual(total.p50);
    expect(total.p50).toBeLessThanOrEqual(total.p100);
    expect(total.p100).toBeLessThanOrEqual(elapsed);
    expect(device.p100).toBeLessThanOrEqual(total.p100);
    expect(device.p0).toBeGreaterThan(0);

    // neuroncore_counters: relu runs on logical core 0 (physical 0 and 1); the device's busy counters grew by its
    // runs; the other logical cores stayed idle.
    const counters = rt.report.neuroncore_counters!;
    expect(Object.keys(counters.neuroncores_in_use)).toEqual(["0", "1", "2", "3"]);
    const busy = (s: NeuronStatus, nc: number) =>
      s.cores.flatMap((c) => c.ncs.map((n, i) => [n, c.busy_ms[i]] as const)).find(([n]) => n === nc)![1];
    const busy0 = (busy(after, 0) - busy(before, 0)) / 1000;
    expect(busy0).toBeGreaterThan(0);
    expect(busy0).toBeGreaterThanOrEqual(device.p0 * RUNS - 1e-9);
    const u0 = counters.neuroncores_in_use["0"];
    expect(u0.neuroncore_utilization).toBeGreaterThan(0);
    expect(u0.neuroncore_utilization).toBeLessThanOrEqual(100);
    expect(Object.keys(u0.v3d ?? {})).toEqual(["nc_v3.0", "nc_v3.1"]);
    for (const k of ["1", "2", "3"]) expect(counters.neuroncores_in_use[k].neuroncore_utilization).toBe(0);

    // memory_used: the ledger's rows of each logical core, folded into the documented categories.
    const mem = rt.report.memory_used!;
    const core0 = mem.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage["0"];
    expect(core0).toEqual(deviceMemoryBreakdown(after.cores[0].device_memory));
    expect(core0.model_code).toBeGreaterThan(0); // relu's code and instructions
    expect(mem.neuron_runtime_used_bytes.neuron_device).toBe(
      after.cores.reduce((a, c) => a + c.device_memory.reduce((x, y) => x + y, 0), 0),
    );
    // host: the ledger's host-DRAM rows plus the process's resident set at that reading (as application_memory;
    // the resident set moves between readings, so it is not compared with another reading's).
    const hostParts = mem.neuron_runtime_used_bytes.usage_breakdown.host;
    expect(mem.neuron_runtime_used_bytes.host).toBe(Object.values(hostParts).reduce((a, b) => a + b, 0));
    expect(hostParts.application_memory).toBeGreaterThan(0);

    // neuron_hardware_info and instance_info: the simulated Trn2 device.
    expect(second.neuron_hardware_info).toMatchObject({
      neuron_device_type: "trainium2",
      neuroncore_version: "v3d",
      neuron_device_count: 1,
      neuroncore_per_device_count: 4,
      logical_neuroncore_config: 2,
      neuron_device_memory_size: 96 * 2 ** 30,
      error: "",
    });
    expect(second.instance_info.instance_type).toBe("trn2");
    expect(second.system_data?.neuron_hw_counters?.neuron_devices).toEqual([
      {
        neuron_device_index: 0,
        mem_ecc_corrected: 0,
        mem_ecc_uncorrected: 0,
        sram_ecc_uncorrected: 0,
        sram_ecc_corrected: 0,
      },
    ]);

    // The exporter's reading of the two lines.
    const reader = new NeuronMonitorPrometheusReader();
    reader.consume(serializeMonitorReport(first) + serializeMonitorReport(second));
    expect(reader.diagnostics).toEqual([]);
    const tag = { runtime_tag: String(process.pid) };
    expect(reader.value("execution_status_total", { ...tag, status_type: "completed" })).toBe(RUNS);
    expect(reader.value("execution_errors_total", { ...tag, error_type: "hardware" })).toBe(0);
    expect(reader.value("neuroncore_utilization_ratio", { ...tag, neuroncore: "0" })).toBeCloseTo(
      u0.neuroncore_utilization / 100,
      12,
    );
    expect(reader.value("neuroncore_utilization_ratio", { ...tag, neuroncore: "3" })).toBe(0);
    expect(reader.value("execution_latency_seconds", { ...tag, percentile: "p100" })).toBe(total.p100);
    expect(reader.value("neuroncore_memory_usage_model_code", { ...tag, neuroncore: "0" })).toBe(core0.model_code);
    expect(reader.value("neuron_runtime_memory_used_bytes", { ...tag, memory_location: "neuron_device" })).toBe(
      mem.neuron_runtime_used_bytes.neuron_device,
    );
    expect(reader.samples("hardware_ecc_events_total").map((s) => s.value)).toEqual([0, 0, 0, 0]);
    expect(reader.value("neuron_hardware_info", { neuron_device_count: "1" })).toBe(1);
    expect(reader.value("system_vcpu_count")).toBeGreaterThan(0);
  });

  test("Execution model: a group not due is repeated; when it falls due it counts everything since it last ran", async () => {
    const config = parseMonitorConfig(
      JSON.stringify({ neuron_runtimes: [{ metrics: [{ type: "execution_stats", period: "1h" }] }] }),
    );
    const c = new MonitorCollector({ config, source: { kind: "url", url: server.url }, env });
    const first = (await c.collect()).report;
    await infer();
    await infer();
    const second = (await c.collect()).report; // within the hour: nothing is due
    expect(second.neuron_runtime_data[0].report.execution_stats).toEqual(
      first.neuron_runtime_data[0].report.execution_stats,
    );
    await infer();
    const third = (await c.collect(true)).report;
    expect(third.neuron_runtime_data[0].report.execution_stats?.execution_summary.completed).toBe(3);
    expect(third.system_data).toBeNull();
  });

  test("with no process announced, reports still come, with an empty neuron_runtime_data", async () => {
    const empty = { NRT_RUNTIME_DIR: join(dir, "nobody") };
    const collector = new MonitorCollector({
      config: defaultMonitorConfig(),
      source: { kind: "discover" },
      env: empty,
      arch: "trn1",
    });
    const r: NeuronMonitorReport = (await collector.collect()).report;
    expect(r.neuron_runtime_data).toEqual([]);
    expect(Object.keys(r)).toEqual(["neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"]);
    expect(r.neuron_hardware_info).toMatchObject({
      neuron_device_type: "trainium",
      neuron_device_count: 1,
      neuroncore_per_device_count: 2,
      error: "",
    });
    expect("logical_neuroncore_config" in r.neuron_hardware_info).toBe(false);
    const reader = new NeuronMonitorPrometheusReader();
    reader.consume(serializeMonitorReport(r));
    expect(reader.diagnostics).toEqual([]);
    expect(reader.samples("instance_info").length).toBe(1);
    expect(reader.family("neuroncore_utilization_ratio")).toBeUndefined();
  });

  test("--socket: a daemon client that is not an nrt serve is listed with its error, which the exporter skips", async () => {
    const running = await startDeviceDaemon({ address: { path: join(dir, "d.sock") }, log: () => {} });
    const client = await connectDeviceDaemon({ path: join(dir, "d.sock") }, { pid: 4242, name: "python3 infer.py" });
    try {
      await client.acquireCores(0, [0, 1]);
      const collector = new MonitorCollector({
        config: defaultMonitorConfig(),
        source: { kind: "socket", address: `unix:${join(dir, "d.sock")}` },
        env,
      });
      const r = (await collector.collect()).report;
      expect(r.neuron_runtime_data).toEqual([{
        pid: 4242,
        neuron_runtime_tag: "4242",
        error: `process 4242 holds NeuronCores of the device daemon at unix:${
          join(dir, "d.sock")
        } but announces no status endpoint (not an nrt serve)`,
        report: {},
      }]);
      const reader = new NeuronMonitorPrometheusReader();
      reader.consume(serializeMonitorReport(r));
      expect(reader.diagnostics).toEqual([`Runtime 4242 error: ${r.neuron_runtime_data[0].error}`]);
    } finally {
      await client.close();
      await running.stop();
    }
  });

  test("nrt monitor --url -c CONFIG --count 2 prints two one-line reports with the configured groups", async () => {
    const config = join(dir, "monitor.json");
    writeFileSync(
      config,
      JSON.stringify({
        period: "50ms",
        neuron_runtimes: [{ tag_filter: ".*", metrics: [{ type: "execution_stats" }, { type: "memory_used" }] }],
        system_metrics: [{ type: "memory_info" }],
      }),
    );
    const r = await runNrt(["monitor", "--url", server.url, "-c", config, "--count", "2"]);
    expect(r.code).toBe(0);
    const lines = r.out.split("\n");
    expect(lines.length).toBe(2);
    for (const line of lines) {
      const report = JSON.parse(line) as NeuronMonitorReport;
      expect(Object.keys(report.neuron_runtime_data[0].report)).toEqual(["execution_stats", "memory_used"]);
      expect(Object.keys(report.system_data ?? {})).toEqual(["memory_info"]);
    }
  });

  test("usage errors exit 2 and name the cause", async () => {
    const both = await runNrt(["monitor", "--url", "http://127.0.0.1:1", "--socket", "/x"]);
    expect([both.code, both.err.split("\n")[0]]).toEqual([
      2,
      "Cannot parse nrt monitor arguments: --url and --socket exclude each other",
    ]);
    const url = await runNrt(["monitor", "--url", "ftp://x"]);
    expect([url.code, url.err.split("\n")[0]]).toEqual([
      2,
      "Cannot parse nrt monitor arguments: --url ftp://x is not an http or https URL",
    ]);
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ period: "soon" }));
    const cfg = await runNrt(["monitor", "-c", bad]);
    expect(cfg.code).toBe(2);
    expect(cfg.err).toContain(
      `Cannot parse nrt monitor arguments: ${bad}: Cannot use neuron-monitor config: period is "soon"`,
    );
  });
});
