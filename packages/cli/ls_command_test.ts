/**
 * `nrt ls` with an announced device daemon that cannot be reached (a stale announcement whose pid is alive, reused
 * after a SIGKILL): skipped with a line on stderr, as `nrt monitor` skips it, for the next announced daemon or the
 * embedded simulator. A `--device` that cannot be reached still fails.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { runNrt } from "../../tests/_cli.ts";
import { startDeviceDaemon } from "./device_daemon.ts";
import { collectLs } from "./ls_command.ts";
import { connectDeviceDaemon } from "./transports.ts";

/** A private announcement folder in a scratch folder. */
function scratch(): { path: string; env: Record<string, string>; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "nrt-ls-stale-"));
  const run = join(path, "run");
  mkdirSync(run, { mode: 0o700 });
  return { path, env: { NRT_RUNTIME_DIR: run }, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Announces a device daemon at `address` under `pid` (a process that is alive), as `nrt device-sim` does. */
function announceDaemon(env: Record<string, string>, pid: number, address: string): void {
  writeFileSync(
    join(env.NRT_RUNTIME_DIR, `device-sim-${pid}.json`),
    JSON.stringify({ kind: "device-sim", pid, command: "nrt device-sim", address, started: 1 }),
  );
}

describe("nrt ls skips an announced device daemon it cannot reach", () => {
  test("a stale announcement alone: the embedded simulator is listed, and stderr says what was skipped", async () => {
    const s = scratch();
    try {
      const gone = `unix:${join(s.path, "gone.sock")}`;
      announceDaemon(s.env, process.pid, gone);
      const warned: string[] = [];
      const snap = await collectLs({ env: s.env, warn: (l) => warned.push(l) });
      expect(snap.instance.instanceType).toBe("trn2");
      expect(snap.devices.map((d) => [d.index, d.physicalCores])).toEqual([[0, 8]]);
      expect(snap.processes).toEqual([]);
      expect(warned).toHaveLength(1);
      const prefix = `nrt ls: skipping the device daemon announced by process ${process.pid} at ${gone}: `;
      expect(warned[0].slice(0, prefix.length)).toBe(prefix);
      expect(warned[0]).toContain("Cannot connect to the device daemon");
    } finally {
      s.remove();
    }
  });

  test("a stale announcement before a live one: the live daemon's clients are listed", async () => {
    const s = scratch();
    const sock = join(s.path, "d.sock");
    const running = await startDeviceDaemon({ address: { path: sock }, log: () => {} });
    const client = await connectDeviceDaemon({ path: sock }, { pid: 4242, name: "python3 infer.py" });
    try {
      await client.acquireCores(0, [0, 1]);
      // Both pids are alive; the stale one sorts first (announcements are read by pid).
      const [stale, live] = [process.pid, process.ppid].sort((a, b) => a - b);
      announceDaemon(s.env, stale, `unix:${join(s.path, "gone.sock")}`);
      announceDaemon(s.env, live, `unix:${sock}`);
      const warned: string[] = [];
      const snap = await collectLs({ env: s.env, warn: (l) => warned.push(l) });
      expect(snap.processes.map((p) => [p.pid, p.command, p.neuroncoreIds])).toEqual([[4242, "python3 infer.py", [0]]]);
      expect(warned).toHaveLength(1);
      const prefix = `nrt ls: skipping the device daemon announced by process ${stale} at unix:${
        join(s.path, "gone.sock")
      }: `;
      expect(warned[0].slice(0, prefix.length)).toBe(prefix);
    } finally {
      await client.close();
      await running.stop();
      s.remove();
    }
  });

  test("nrt ls --device naming a daemon that is not there still exits 1", async () => {
    const s = scratch();
    try {
      const r = await runNrt(["ls", "--device", `unix:${join(s.path, "gone.sock")}`]);
      expect(r.code).toBe(1);
      expect(r.err).toContain("Cannot connect to the device daemon");
    } finally {
      s.remove();
    }
  });
});
