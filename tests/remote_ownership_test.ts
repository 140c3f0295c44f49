/**
 * Core ownership across real processes sharing one `nrt device-sim` daemon: two runtime processes load and run
 * their own models on disjoint cores; a third asking for a busy core fails with NRT_RESOURCE naming the owner; a
 * client killed with SIGKILL has its cores reclaimed (free for a new client within 5 s) without disturbing the
 * survivor.
 */
import { describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import { CLIENT_ENTRY, type Proc, remoteContainer, spawnBun, startDaemon, tempDir, until } from "./_remote.ts";

const json = (line: string) => JSON.parse(line) as Record<string, unknown> & { pid: number; event: string };

describe("nrt device-sim core ownership (several runtime processes)", () => {
  test(
    "disjoint cores run side by side; a busy core is refused naming its owner; SIGKILL frees cores within 5 s",
    async () => {
      const dir = tempDir();
      const procs: Proc[] = [];
      const client = (name: string, cores: string, seed: number) => {
        const p = spawnBun([
          CLIENT_ENTRY,
          "--address",
          `unix:${dir.path}/d.sock`,
          "--name",
          name,
          "--seed",
          String(seed),
        ], { NEURON_RT_VISIBLE_CORES: cores });
        procs.push(p);
        return p;
      };
      const daemon = await startDaemon({ socket: `${dir.path}/d.sock` });
      procs.push(daemon);
      const { portal: observer } = await remoteContainer(daemon.address, "observer");
      try {
        const a = client("server-a", "0-1", 1), b = client("server-b", "2-3", 2);
        const [ra, rb] = [json(await a.line(/"event"/, 20_000)), json(await b.line(/"event"/, 20_000))];
        expect([ra.event, rb.event]).toEqual(["ready", "ready"]);
        expect([ra.out10, ra.outLast, rb.out10, rb.outLast]).toEqual([20, 8190, 40, 16380]); // i·seed + i·seed
        expect((await observer.stats()).grants.map((g) => [g.nc, g.pid, g.name])).toEqual([
          [0, a.child.pid, "server-a"],
          [1, a.child.pid, "server-a"],
          [2, b.child.pid, "server-b"],
          [3, b.child.pid, "server-b"],
        ]);

        const c = client("server-c", "2-3", 3);
        const rc = json(await c.line(/"event"/, 20_000));
        expect(rc.event).toBe("error");
        expect(rc.stage).toBe("init");
        expect(rc.status).toBe(NrtStatus.NRT_RESOURCE);
        expect(rc.message).toBe(
          `Cannot acquire NeuronCore(s) nc2,nc3 of device 0 for process ${c.child.pid} ("server-c"): ` +
            `nc2 is in use by process ${b.child.pid} ("server-b"); nc3 is in use by process ${b.child.pid} ("server-b")`,
        );
        expect(await c.exit()).toBe(1);

        const killedAt = Date.now();
        a.kill("SIGKILL");
        await until(
          async () => (await observer.stats()).grants.every((g) => g.pid !== a.child.pid) || undefined,
          5_000,
          () => "server-a's cores to be reclaimed",
        );
        expect(Date.now() - killedAt).toBeLessThan(5_000);
        const d = client("server-d", "0-1", 4);
        const rd = json(await d.line(/"event"/, 20_000));
        expect(rd.event).toBe("ready");
        expect(rd.out10).toBe(80);

        // The survivor still runs on its cores, then leaves cleanly; the daemon ends with no owner and no memory.
        for (const p of [b, d]) p.child.stdin!.end("exit\n");
        expect(json(await b.line(/"done"/)).event).toBe("done");
        expect(json(await d.line(/"done"/)).event).toBe("done");
        expect([await b.exit(), await d.exit()]).toEqual([0, 0]);
        await until(
          async () => ((await observer.stats()).sessions === 1 ? true : undefined),
          5_000,
          () => "sessions to end",
        );
        expect((await observer.stats()).grants).toEqual([]);
        expect(await observer.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
        expect(daemon.stderr.join("")).toContain(
          `process ${a.child.pid} ("server-a") disconnected: reclaimed 2 NeuronCore(s) (nc0,nc1)`,
        );
      } finally {
        await observer.close();
        for (const p of procs) {
          p.kill("SIGKILL");
        }
        dir.remove();
      }
    },
    60_000,
  );
});
