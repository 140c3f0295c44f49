// The names AWS's neuron-monitor-prometheus.py exports (Neuron Monitor User Guide, "neuron-monitor-prometheus.py":
// neuroncore_utilization_ratio, neuron_runtime_memory_used_bytes, neuroncore_memory_usage_*, execution_status_total,
// execution_errors_total, execution_latency_seconds, hardware_ecc_events_total, with its label names) on nrt serve's
// own /metrics, beside nrt's names, checked against a workload of known size run through the server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import type { NeuronStatus } from "@nrt/http-api";
import { type RunningServer, startServer } from "../packages/cli/serve.ts";
import { deviceMemoryBreakdown } from "../packages/cli/neuron/memory_categories.ts";
import { ownCommandLine } from "../packages/cli/neuron_discovery.ts";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
const RUNS = 5;

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (0.0.4), and each family's TYPE. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t !== null) types.set(t[1], t[2]);
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`Not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { samples, types };
}

let dir: string;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nrt-metrics-"));
  writeFileSync(join(dir, "relu.neff"), oneOpNeff("relu", "relu", [f32("x", [8])], [f32("y", [8])]));
  writeFileSync(join(dir, "relu.json"), JSON.stringify({ warmup: false })); // every execution is the test's own
  server = await startServer({ models: dir, port: 0, grpcPort: "off", arch: "cayman", log: () => {} });
});

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("/metrics: neuron-monitor-prometheus.py's names beside nrt's", () => {
  test("a known workload: RUNS completed executions, the busy core, the ledger's memory, no ECC event", async () => {
    const t0 = performance.now();
    for (let i = 0; i < RUNS; i++) {
      const res = await fetch(`${server.url}/v2/models/relu/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -2, 3, -4, 5, -6, 7, -8] }],
        }),
      });
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    const elapsed = (performance.now() - t0) / 1000;
    const before = await (await fetch(`${server.url}/v2/neuron/status`)).json() as NeuronStatus;
    const { samples, types } = parseExposition(await (await fetch(`${server.url}/metrics`)).text());
    const after = await (await fetch(`${server.url}/v2/neuron/status`)).json() as NeuronStatus;
    const tag = String(process.pid);

    // The status document's command is the line as typed (as `nrt ls` shows it), not the runtime's absolute path.
    expect(before.command).toBe(ownCommandLine());
    expect(before.command.startsWith(process.execPath)).toBe(false);
    const instance = {
      instance_name: "",
      instance_id: "",
      instance_type: "trn2",
      availability_zone: "",
      region: "",
      subnet_id: "",
    };
    const pick = (name: string, labels: Record<string, string> = {}) =>
      samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    const one = (name: string, labels: Record<string, string>) => {
      const found = pick(name, labels);
      expect({ name, labels, count: found.length }).toEqual({ name, labels, count: 1 });
      return found[0].value;
    };

    // nrt's own names are still there.
    expect(one("nrt_execution_status_total", { status: "completed" })).toBe(RUNS);

    // execution_status_total / execution_errors_total: counters with status_type / error_type.
    expect(types.get("execution_status_total")).toBe("counter");
    expect(pick("execution_status_total")[0].labels).toEqual({
      ...instance,
      runtime_tag: tag,
      status_type: "completed",
    });
    expect(one("execution_status_total", { runtime_tag: tag, status_type: "completed" })).toBe(RUNS);
    for (
      const s of ["completed_with_err", "completed_with_num_err", "timed_out", "incorrect_input", "failed_to_queue"]
    ) {
      expect(one("execution_status_total", { status_type: s })).toBe(0);
    }
    expect(pick("execution_errors_total").map((s) => [s.labels.error_type, s.value])).toEqual([
      ["generic", 0],
      ["numerical", 0],
      ["transient", 0],
      ["model", 0],
      ["runtime", 0],
      ["hardware", 0],
    ]);

    // execution_latency_seconds: the seven percentiles of the runs just made, within the time they took.
    const lat = Object.fromEntries(
      pick("execution_latency_seconds", { runtime_tag: tag }).map((s) => [s.labels.percentile, s.value]),
    );
    expect(Object.keys(lat)).toEqual(["p0", "p1", "p25", "p50", "p75", "p99", "p100"]);
    expect(lat.p0).toBeGreaterThan(0);
    expect(lat.p0).toBeLessThanOrEqual(lat.p50);
    expect(lat.p100).toBeLessThanOrEqual(elapsed);
    expect(lat.p100).toBe(Math.max(...after.latency.map((l) => l.totalSeconds)));

    // neuroncore_utilization_ratio: relu ran on logical core 0 only; its ratio is the device busy time since the
    // server started (well under the one-minute window) over that time.
    expect(after.time.clock_ms - after.time.since_ms).toBeLessThan(60_000);
    const u = Object.fromEntries(
      pick("neuroncore_utilization_ratio", { runtime_tag: tag }).map((s) => [s.labels.neuroncore, s.value]),
    );
    expect(Object.keys(u)).toEqual(["0", "1", "2", "3"]);
    const busy0 = (s: NeuronStatus) => (s.cores[0].busy_ms[0] + s.cores[0].busy_ms[1]) / 2;
    expect(busy0(after)).toBeGreaterThan(0);
    expect(u["0"]).toBeGreaterThanOrEqual(busy0(before) / (after.time.clock_ms - after.time.since_ms) - 1e-9);
    expect(u["0"]).toBeLessThanOrEqual(busy0(after) / (before.time.clock_ms - before.time.since_ms) + 1e-9);
    expect([u["1"], u["2"], u["3"]]).toEqual([0, 0, 0]);

    // Memory: the ledger's rows, folded into the exporter's categories, memory_location "None" as the exporter writes.
    const core0 = deviceMemoryBreakdown(after.cores[0].device_memory);
    expect(core0.model_code).toBeGreaterThan(0);
    for (const [cat, bytes] of Object.entries(core0)) {
      expect(one(`neuroncore_memory_usage_${cat}`, { runtime_tag: tag, neuroncore: "0", memory_location: "None" }))
        .toBe(bytes);
    }
    const hbm = after.cores.reduce((a, c) => a + c.device_memory.reduce((x, y) => x + y, 0), 0);
    expect(one("neuron_runtime_memory_used_bytes", { runtime_tag: tag, memory_location: "neuron_device" })).toBe(hbm);
    expect(one("neuron_runtime_memory_used_bytes", { memory_location: "host" })).toBe(
      after.cores.reduce((a, c) => a + c.host_memory.reduce((x, y) => x + y, 0), 0),
    );

    // hardware_ecc_events_total: the four counters of device 0, without runtime_tag.
    expect(types.get("hardware_ecc_events_total")).toBe("counter");
    expect(
      pick("hardware_ecc_events_total").map((
        s,
      ) => [s.labels.event_type, s.labels.neuron_device_index, "runtime_tag" in s.labels, s.value]),
    ).toEqual([
      ["mem_ecc_corrected", "0", false, 0],
      ["mem_ecc_uncorrected", "0", false, 0],
      ["sram_ecc_corrected", "0", false, 0],
      ["sram_ecc_uncorrected", "0", false, 0],
    ]);
  });
});
