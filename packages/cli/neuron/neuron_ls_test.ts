// Neuron LS User Guide, "Examples" (the table, --wide, --show-all-procs, -j) and "Field Definitions"; the recorded
// output of aws-neuronx-tools 2.32 on a trn2.48xlarge (one device visible, two runtime processes) and on a
// trn2.3xlarge (one device, no links, no process).
import { describe, expect, test } from "bun:test";
import {
  formatNeuronLs,
  neuronLsJson,
  neuronLsLegacyJson,
  type NeuronLsSnapshot,
  neuronLsSnapshot,
  neuronLsTable,
  parseNeuronLsArgs,
} from "./neuron_ls.ts";
import { LONG_COMMAND, testSnapshot } from "./_testing.ts";

const GiB = 2 ** 30;

/** The trn2.48xlarge recording: device 0 seen from a container, two processes whose command is not readable. */
const RECORDED_TRN2_48XL: NeuronLsSnapshot = {
  instance: { instanceType: "trn2.48xlarge", instanceId: "i-0dcf246b9a7d5f066" },
  logicalNeuronCoreConfig: 2,
  devices: [{
    index: 0,
    physicalCores: 8,
    hbmBytes: 96 * GiB,
    connectedDevices: [12, 1, 9, 14],
    pciBdf: "0000:e1:00.0",
    cpuAffinity: "48-95,144-191",
    numaNode: 1,
  }],
  processes: [
    { pid: 1966681, command: "", runtimeVersion: "2.34.10", devices: [0] },
    { pid: 1966680, command: "", runtimeVersion: "2.34.10", devices: [0] },
  ],
};

/** What neuron-ls printed for {@linkcode RECORDED_TRN2_48XL}. */
const RECORDED_TRN2_48XL_TABLE = [
  "instance-type: trn2.48xlarge",
  "instance-id: i-0dcf246b9a7d5f066",
  "logical-neuroncore-config: 2",
  "+--------+--------+----------+--------+--------------+--------------+---------+---------------+------+---------+",
  "| NEURON | NEURON |  NEURON  | NEURON |  CONNECTED   |     PCI      |   PID   |      CPU      | NUMA | RUNTIME |",
  "| DEVICE | CORES  | CORE IDS | MEMORY |   DEVICES    |     BDF      |         |   AFFINITY    | NODE | VERSION |",
  "+--------+--------+----------+--------+--------------+--------------+---------+---------------+------+---------+",
  "| 0      | 4      | 0-3      | 96 GB  | 12, 1, 9, 14 | 0000:e1:00.0 | 1966680 | 48-95,144-191 | 1    | 2.34.10 |",
  "|        |        |          |        |              |              | 1966681 |               |      | 2.34.10 |",
  "+--------+--------+----------+--------+--------------+--------------+---------+---------------+------+---------+",
  "",
].join("\n");

describe("neuronLsTable()", () => {
  test("neuronLsTable() reproduces the recorded trn2.3xlarge table: no link, no process", () => {
    const snap: NeuronLsSnapshot = {
      instance: { instanceType: "trn2.3xlarge", instanceId: "i-0abcdef1234567890" },
      logicalNeuronCoreConfig: 2,
      devices: [{
        index: 0,
        physicalCores: 8,
        hbmBytes: 96 * GiB,
        connectedDevices: [],
        pciBdf: "0000:33:00.0",
        cpuAffinity: "0-11",
        numaNode: 0,
      }],
      processes: [],
    };
    expect(neuronLsTable(snap)).toBe([
      "instance-type: trn2.3xlarge",
      "instance-id: i-0abcdef1234567890",
      "logical-neuroncore-config: 2",
      "+--------+--------+----------+--------+--------------+----------+------+",
      "| NEURON | NEURON |  NEURON  | NEURON |     PCI      |   CPU    | NUMA |",
      "| DEVICE | CORES  | CORE IDS | MEMORY |     BDF      | AFFINITY | NODE |",
      "+--------+--------+----------+--------+--------------+----------+------+",
      "| 0      | 4      | 0-3      | 96 GB  | 0000:33:00.0 | 0-11     | 0    |",
      "+--------+--------+----------+--------+--------------+----------+------+",
      "",
    ].join("\n"));
  });

  test("neuronLsTable() reproduces the recorded trn2.48xlarge table: two processes, no readable command", () => {
    expect(neuronLsTable(RECORDED_TRN2_48XL)).toBe(RECORDED_TRN2_48XL_TABLE);
  });

  test("neuronLsTable() lists runtime processes with their command cut to 40 characters", () => {
    const lines = neuronLsTable(neuronLsSnapshot(testSnapshot())).split("\n");
    expect(lines[4]).toBe(
      "| NEURON | NEURON |  NEURON  | NEURON | CONNECTED |     PCI      | PID  " +
        "|                 COMMAND                  |     CPU     | NUMA | RUNTIME |",
    );
    expect(lines[7]).toBe(
      "| 0      | 4      | 0-3      | 96 GB  | 1         | 0000:cc:00.0 | 4242 " +
        "| bun packages/cli/main.ts serve --demo    | 0-47,96-143 | 0    | 2.31.0  |",
    );
    expect(lines[8]).toContain(
      "| 1      | 4      | 4-7      | 96 GB  | 0         | 0000:b5:00.0 | 5151 " +
        "| python3 infer.py --model /models/resn... |",
    );
    // One row per device: no border between devices.
    expect(lines[9]).toBe(lines[3]);
    expect(lines.length).toBe(11);
    expect(lines.join("\n")).not.toContain("9000");
  });

  test("neuronLsTable() --wide cuts commands at 80 characters instead", () => {
    const table = neuronLsTable(neuronLsSnapshot(testSnapshot()), { wide: true });
    expect(LONG_COMMAND.length).toBeGreaterThan(80);
    expect(table).toContain(`| 5151 | ${LONG_COMMAND.slice(0, 77)}... |`);
    expect(table).toContain("|                                     COMMAND                                      |");
  });

  test("neuronLsTable() --show-all-procs adds other processes as NA, one row each, bordered per device", () => {
    const lines = neuronLsTable(neuronLsSnapshot(testSnapshot()), { showAllProcs: true }).split("\n");
    const border = lines[3];
    const other = "|        |        |          |        |           |              | 9000 " +
      "| neuron-ls --show-all-procs               |             |      | NA      |";
    expect(lines.slice(7, 13)).toEqual([
      lines[7],
      other,
      border,
      lines[10],
      other,
      border,
    ]);
    expect(lines[7]).toContain("| 0      | 4      | 0-3 ");
    expect(lines[10]).toContain("| 1      | 4      | 4-7 ");
  });

  test("neuronLsTable() leaves out the LNC line and the unknown columns of a plain simulated device", () => {
    const table = neuronLsTable({
      instance: { instanceType: "trn1.2xlarge", instanceId: "i-1" },
      devices: [{ index: 0, physicalCores: 2, hbmBytes: 32 * GiB, connectedDevices: [] }],
      processes: [],
    });
    expect(table).toBe([
      "instance-type: trn1.2xlarge",
      "instance-id: i-1",
      "+--------+--------+----------+--------+",
      "| NEURON | NEURON |  NEURON  | NEURON |",
      "| DEVICE | CORES  | CORE IDS | MEMORY |",
      "+--------+--------+----------+--------+",
      "| 0      | 2      | 0-1      | 32 GB  |",
      "+--------+--------+----------+--------+",
      "",
    ].join("\n"));
  });
});

describe("neuronLsLegacyJson() / neuronLsJson()", () => {
  test("neuronLsLegacyJson() reproduces the recorded -j output: fields, order and types", () => {
    const out = formatNeuronLs(RECORDED_TRN2_48XL, { format: "legacy-json" });
    expect(JSON.parse(out)).toEqual([{
      instance_type: "trn2.48xlarge",
      instance_id: "i-0dcf246b9a7d5f066",
      neuron_device: 0,
      bdf: "0000:e1:00.0",
      cpu_affinity: "48-95,144-191",
      numa_node: "1",
      connected_to: [12, 1, 9, 14],
      nc_count: 4,
      logical_neuroncore_config: 2,
      memory_size: 103079215104,
      neuroncore_ids: [0, 1, 2, 3],
      neuron_processes: [
        { pid: 1966680, command: "", neuron_runtime_version: "2.34.10" },
        { pid: 1966681, command: "", neuron_runtime_version: "2.34.10" },
      ],
    }]);
    expect(Object.keys(JSON.parse(out)[0])).toEqual([
      "instance_type",
      "instance_id",
      "neuron_device",
      "bdf",
      "cpu_affinity",
      "numa_node",
      "connected_to",
      "nc_count",
      "logical_neuroncore_config",
      "memory_size",
      "neuroncore_ids",
      "neuron_processes",
    ]);
    expect(out.startsWith('[\n    {\n        "instance_type": "trn2.48xlarge",\n')).toBe(true);
    expect(out.endsWith("\n]\n")).toBe(true);
  });

  test("neuronLsLegacyJson() cuts commands as the table does and numbers core ids across devices", () => {
    const devices = neuronLsLegacyJson(neuronLsSnapshot(testSnapshot()), { showAllProcs: true });
    expect(devices.map((d) => d.neuroncore_ids)).toEqual([[0, 1, 2, 3], [4, 5, 6, 7]]);
    expect(devices[1].neuron_processes).toEqual([
      { pid: 5151, command: "python3 infer.py --model /models/resn...", neuron_runtime_version: "2.31.0" },
      { pid: 9000, command: "neuron-ls --show-all-procs", neuron_runtime_version: "NA" },
    ]);
  });

  test("neuronLsJson() lifts the instance fields to the top and lists devices under neuron_devices (Ours)", () => {
    const doc = neuronLsJson(neuronLsSnapshot(testSnapshot()));
    expect(Object.keys(doc)).toEqual(["instance_type", "instance_id", "logical_neuroncore_config", "neuron_devices"]);
    expect(doc.neuron_devices.length).toBe(2);
    expect(Object.keys(doc.neuron_devices[0])).toEqual([
      "neuron_device",
      "bdf",
      "cpu_affinity",
      "numa_node",
      "connected_to",
      "nc_count",
      "memory_size",
      "neuroncore_ids",
      "neuron_processes",
    ]);
    const withUltraServer = neuronLsJson({
      ...RECORDED_TRN2_48XL,
      instance: { ...RECORDED_TRN2_48XL.instance, ultraserverId: "us-1" },
    });
    expect(withUltraServer.ultraserver_id).toBe("us-1");
  });
});

describe("parseNeuronLsArgs()", () => {
  test("parseNeuronLsArgs() reads --output-format, -j and the table options", () => {
    expect(parseNeuronLsArgs([])).toEqual({ format: "table", wide: false, showAllProcs: false });
    expect(parseNeuronLsArgs(["--output-format", "json"]).format).toBe("json");
    expect(parseNeuronLsArgs(["--output-format=table", "-w", "-a"])).toEqual({
      format: "table",
      wide: true,
      showAllProcs: true,
    });
    expect(parseNeuronLsArgs(["-j"]).format).toBe("legacy-json");
    expect(parseNeuronLsArgs(["--json-output", "--output-format", "json"]).format).toBe("json");
  });

  test("parseNeuronLsArgs() refuses an unknown format or option, naming it", () => {
    expect(() => parseNeuronLsArgs(["--output-format", "yaml"])).toThrow(
      '--output-format is "yaml", expected table or json',
    );
    expect(() => parseNeuronLsArgs(["--output-format"])).toThrow("--output-format is missing its value");
    expect(() => parseNeuronLsArgs(["--topology"])).toThrow('"--topology" is not an option of nrt ls');
  });
});
