// The Neuron tools against real processes, as a user runs them: `nrt serve` started as its own process announces
// itself (docs/neuron-tools.md, "How the tools find nrt processes"), `nrt ls --output-format json` lists it holding
// its NeuronCores (Neuron LS User Guide, "Field Definitions": `neuron_processes[].pid`), `nrt monitor --count 1`
// reports it in `neuron_runtime_data` with every group's `error` empty (Neuron Monitor User Guide, "The JSON output
// format", "Metric Groups"), and SIGTERM removes the announcement.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import type { NeuronLsJson } from "../packages/cli/neuron/neuron_ls.ts";
import type { NeuronMonitorReport } from "../packages/cli/neuron/neuron_monitor.ts";
import { oneOpNeff } from "./_kernels.ts";
import { BUN, spawnServe } from "./_serve_process.ts";

const MAIN = new URL("../packages/cli/main.ts", import.meta.url).pathname;
const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });

/** Runs `nrt ARGS` as its own process with `env` added, bounded. */
function nrt(args: string[], env: Record<string, string>): { code: number | null; out: string; err: string } {
  const r = spawnSync(BUN, [MAIN, ...args], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe("nrt ls and nrt monitor find a running nrt serve", () => {
  test(
    "the server announces itself; ls lists it with its cores, monitor reports it; SIGTERM withdraws it",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-tools-"));
      const env = { NRT_RUNTIME_DIR: join(dir, "run"), NRT_ARCH: "cayman" };
      writeFileSync(join(dir, "relu.neff"), oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
      const server = spawnServe(["--models", dir, "--port", "0", "--grpc-port", "0"], "runtime", env);
      try {
        const url = /listening on (\S+)/.exec(await server.line(/listening on /, 60_000))![1];
        const pid = server.child.pid!;
        expect(readdirSync(env.NRT_RUNTIME_DIR)).toEqual([`serve-${pid}.json`]);

        const ls = nrt(["ls", "--output-format", "json"], env);
        expect(ls.code).toBe(0);
        const doc = JSON.parse(ls.out) as NeuronLsJson;
        expect(doc.neuron_devices[0].neuron_processes.map((p) => [p.pid, p.neuroncore_ids])).toEqual([[pid, [
          0,
          1,
          2,
          3,
        ]]]);

        const res = await fetch(`${url}/v2/models/relu/infer`, {
          method: "POST",
          body: JSON.stringify({
            inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }],
          }),
        });
        expect(res.status).toBe(200);
        await res.body?.cancel();
        const mon = nrt(["monitor", "--count", "1"], env);
        expect(mon.code).toBe(0);
        const lines = mon.out.trim().split("\n");
        expect(lines.length).toBe(1);
        const report = JSON.parse(lines[0]) as NeuronMonitorReport;
        expect(report.neuron_runtime_data.map((r) => [r.pid, r.error])).toEqual([[pid, ""]]);
        const groups = Object.values(report.neuron_runtime_data[0].report);
        expect(groups.length).toBe(4);
        for (const g of groups) expect(g.error).toBe("");
        expect(report.neuron_runtime_data[0].report.memory_used?.neuron_runtime_used_bytes.neuron_device)
          .toBeGreaterThan(0);

        server.kill("SIGTERM");
        await server.exited(30_000);
        expect(readdirSync(env.NRT_RUNTIME_DIR)).toEqual([]);
        const none = JSON.parse(nrt(["monitor", "--count", "1"], env).out) as NeuronMonitorReport;
        expect(none.neuron_runtime_data).toEqual([]);
      } finally {
        server.kill();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );

  test(
    "the announced command is the one typed: bun packages/cli/main.ts serve …, or nrt serve … through the npm bin",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nrt-tools-"));
      try {
        for (const [how, typed] of [["shell", "bun packages/cli/main.ts serve"], ["bin", "nrt serve"]] as const) {
          const env = { NRT_RUNTIME_DIR: join(dir, `run-${how}`), NRT_ARCH: "cayman" };
          const args = ["--models", dir, "--port", "0", "--grpc-port", "0"];
          const server = spawnServe(args, how, env);
          let pid: number | undefined;
          try {
            await server.line(/listening on /, 60_000);
            const [file] = readdirSync(env.NRT_RUNTIME_DIR);
            const announced = JSON.parse(readFileSync(join(env.NRT_RUNTIME_DIR, file), "utf8"));
            pid = announced.pid;
            expect(announced.command).toBe(`${typed} ${args.join(" ")}`);
            const ls = nrt(["ls", "--output-format", "json", "-w"], env);
            // nrt ls shows it, cut at 80 characters with -w as neuron-ls cuts it.
            const shown = announced.command.length <= 80 ? announced.command : `${announced.command.slice(0, 77)}...`;
            expect(JSON.parse(ls.out).neuron_devices[0].neuron_processes[0].command).toBe(shown);
            server.kill("SIGTERM"); // the bin shim forwards it to the server
            expect(await server.exited(30_000)).toBe(0);
          } finally {
            server.kill();
            // The server under the shim is its child: never left behind.
            if (pid !== undefined && pid !== server.child.pid) {
              try {
                process.kill(pid, "SIGKILL");
              } catch { /* already gone */ }
            }
          }
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
