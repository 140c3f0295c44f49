// `nrt ls` against real sources: the embedded simulator with announced servers, and a device daemon with client
// processes. Field names follow the Neuron LS User Guide, "Field Definitions" (`neuron_device`, `nc_count`,
// `memory_size`, `neuroncore_ids`, `neuron_processes[].pid/command/neuron_runtime_version`, `instance_type`,
// `logical_neuroncore_config`) and "Examples" (the table's headers and preamble).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { startDeviceDaemon } from "../packages/cli/device_daemon.ts";
import { collectLs } from "../packages/cli/ls_command.ts";
import { formatNeuronLs, type NeuronLsJson, type NeuronLsLegacyDeviceJson } from "../packages/cli/neuron/neuron_ls.ts";
import { announce, discover, NRT_RUNTIME_VERSION } from "../packages/cli/neuron_discovery.ts";
import { connectDeviceDaemon } from "../packages/cli/transports.ts";
import { runNrt } from "./_cli.ts";
import { CLIENT_ENTRY, DAEMON_ENTRY, type Proc, spawnBun } from "./_remote.ts";

const GiB = 2 ** 30;

function scratch(): { path: string; env: Record<string, string>; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "nrt-ls-"));
  return {
    path,
    env: { NRT_RUNTIME_DIR: join(path, "run") },
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}

describe("nrt ls: the embedded simulator and the servers announced on this machine", () => {
  test("a Cayman device: 4 logical NeuronCores of 2, 96 GB, and the announced server holding all of them", async () => {
    const s = scratch();
    try {
      const a = await announce({
        kind: "serve",
        pid: process.pid,
        command: "nrt serve --models /m",
        url: "http://127.0.0.1:1",
        runtimeVersion: NRT_RUNTIME_VERSION,
        ncs: [0, 1, 2, 3, 4, 5, 6, 7],
        started: 1,
      }, s.env);
      // A server killed with SIGKILL leaves its file behind: skipped, as its pid is gone.
      writeFileSync(
        join(s.env.NRT_RUNTIME_DIR, "serve-2147483646.json"),
        JSON.stringify({
          kind: "serve",
          pid: 2147483646,
          command: "gone",
          url: "http://x",
          runtimeVersion: "0",
          started: 1,
        }),
      );
      writeFileSync(join(s.env.NRT_RUNTIME_DIR, "serve-77.json"), "{not json");
      const snap = await collectLs({ arch: "cayman", env: s.env });
      const doc = JSON.parse(formatNeuronLs(snap, { format: "json" })) as NeuronLsJson;
      expect(doc.instance_type).toBe("trn2");
      expect(doc.logical_neuroncore_config).toBe(2);
      expect(doc.neuron_devices).toEqual([{
        neuron_device: 0,
        bdf: "",
        cpu_affinity: "",
        numa_node: "",
        connected_to: [],
        nc_count: 4,
        memory_size: 96 * GiB,
        neuroncore_ids: [0, 1, 2, 3],
        neuron_processes: [{
          pid: process.pid,
          command: "nrt serve --models /m",
          neuron_runtime_version: "0.1.0",
          neuroncore_ids: [0, 1, 2, 3],
        }],
      }]);
      const table = formatNeuronLs(snap);
      const lines = table.split("\n");
      expect(lines.slice(0, 3)).toEqual(["instance-type: trn2", "instance-id: ", "logical-neuroncore-config: 2"]);
      const cells = (line: string) => line.split("|").slice(1, -1).map((c) => c.trim());
      expect(cells(lines[4])).toEqual(["NEURON", "NEURON", "NEURON", "NEURON", "PID", "COMMAND", "RUNTIME"]);
      expect(cells(lines[5])).toEqual(["DEVICE", "CORES", "CORE IDS", "MEMORY", "", "", "VERSION"]);
      expect(lines[4].startsWith("| NEURON | NEURON |  NEURON  | NEURON |")).toBe(true);
      expect(table).toContain(`| 0      | 4      | 0-3      | 96 GB  | ${process.pid} | nrt serve --models /m`);
      await a.remove();
      expect(readdirSync(s.env.NRT_RUNTIME_DIR).filter((n) => n.startsWith(`serve-${process.pid}`))).toEqual([]);
      expect((await collectLs({ arch: "cayman", env: s.env })).processes).toEqual([]);
    } finally {
      s.remove();
    }
  });

  test("a Trn1 device has no logical NeuronCore config, as neuron-ls on Trn1", async () => {
    const s = scratch();
    try {
      const doc = JSON.parse(
        formatNeuronLs(await collectLs({ arch: "trn1", env: s.env }), { format: "legacy-json" }),
      ) as NeuronLsLegacyDeviceJson[];
      expect(doc.length).toBe(1);
      expect(doc[0].instance_type).toBe("trn1");
      expect(doc[0].nc_count).toBe(2);
      expect("logical_neuroncore_config" in doc[0]).toBe(false);
    } finally {
      s.remove();
    }
  });

  test("discover() refuses an announcement folder others may write to", async () => {
    const s = scratch();
    try {
      await announce({ kind: "device-sim", pid: process.pid, command: "x", address: "unix:/x", started: 1 }, s.env);
      const { chmodSync } = await import("node:fs");
      chmodSync(s.env.NRT_RUNTIME_DIR, 0o777);
      await expect(discover(s.env)).rejects.toThrow(/others may write to it \(mode 777\)/);
    } finally {
      s.remove();
    }
  });
});

describe("nrt ls: a device daemon's client processes and their cores", () => {
  test("every client session is listed with the logical cores it holds (--device, --output-format json and -j)", async () => {
    const s = scratch();
    const running = await startDeviceDaemon({ address: { path: join(s.path, "d.sock") }, log: () => {} });
    const a = await connectDeviceDaemon({ path: join(s.path, "d.sock") }, {
      pid: 4242,
      name: "python3 infer.py --model a.neff",
    });
    const b = await connectDeviceDaemon({ path: join(s.path, "d.sock") }, {
      pid: 5151,
      name: "nrt serve --device unix:d.sock",
    });
    try {
      await a.acquireCores(0, [0, 1]);
      await b.acquireCores(0, [2, 3, 4, 5]);
      const r = await runNrt(["ls", "--device", `unix:${join(s.path, "d.sock")}`, "--output-format", "json"]);
      expect(r.code).toBe(0);
      const doc = JSON.parse(r.out) as NeuronLsJson;
      expect(doc.neuron_devices[0].neuroncore_ids).toEqual([0, 1, 2, 3]);
      expect(doc.neuron_devices[0].neuron_processes).toEqual([
        { pid: 4242, command: "python3 infer.py --model a.neff", neuron_runtime_version: "0.1.0", neuroncore_ids: [0] },
        {
          pid: 5151,
          command: "nrt serve --device unix:d.sock",
          neuron_runtime_version: "0.1.0",
          neuroncore_ids: [1, 2],
        },
      ]);
      const legacy = await runNrt(["ls", "-j", "--device", `unix:${join(s.path, "d.sock")}`]);
      const devices = JSON.parse(legacy.out) as NeuronLsLegacyDeviceJson[];
      expect(devices[0].neuron_processes.map((p) => [p.pid, "neuroncore_ids" in p])).toEqual([[4242, false], [
        5151,
        false,
      ]]);
      const table = await runNrt(["ls", "--device", `unix:${join(s.path, "d.sock")}`]);
      expect(table.out).toContain("| 4242 | python3 infer.py --model a.neff");
      expect(table.out).toContain("|        |        |          |        | 5151 | nrt serve --device unix:d.sock");
    } finally {
      await a.close();
      await b.close();
      await running.stop();
      s.remove();
    }
  });

  test("with no --device, the daemon announced on this machine is found; its real client process is listed", async () => {
    const s = scratch();
    const procs: Proc[] = [];
    try {
      // The daemon announces itself in this test's folder (NRT_RUNTIME_DIR).
      const d2 = spawnBun([DAEMON_ENTRY, "device-sim", "--socket", join(s.path, "e.sock")], s.env);
      procs.push(d2);
      await d2.line(/listening on /);
      const client = spawnBun([CLIENT_ENTRY, "--address", `unix:${join(s.path, "e.sock")}`, "--name", "server-a"], {
        NEURON_RT_VISIBLE_CORES: "2-3",
      });
      procs.push(client);
      expect(JSON.parse(await client.line(/"event"/, 20_000)).event).toBe("ready");
      const snap = await collectLs({ env: s.env });
      expect(snap.processes.map((p) => [p.pid, p.command, p.neuroncoreIds])).toEqual([[client.child.pid, "server-a", [
        1,
      ]]]);
      client.child.stdin!.end("exit\n");
      expect(await client.exit()).toBe(0);
      d2.kill("SIGTERM");
      await d2.exit();
      // A daemon stopped by SIGTERM removes its announcement.
      expect(readdirSync(s.env.NRT_RUNTIME_DIR)).toEqual([]);
    } finally {
      for (const p of procs) p.kill();
      s.remove();
    }
  });

  test("usage errors exit 2 with the reason", async () => {
    const bad = await runNrt(["ls", "--output-format", "yaml"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("Cannot parse nrt ls arguments: --output-format yaml is not table or json");
    const both = await runNrt(["ls", "--output-format", "json", "-j"]);
    expect(both.code).toBe(2);
    expect(both.err).toContain("--output-format and -j/--json-output exclude each other");
    const addr = await runNrt(["ls", "--device", "nowhere"]);
    expect(addr.code).toBe(2);
    expect(addr.err).toContain(
      'Cannot parse nrt ls arguments: --device nowhere: Cannot parse the daemon address "nowhere"',
    );
  });
});
