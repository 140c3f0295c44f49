/**
 * The daemon going away under a runtime: killed mid-execution, the client's `nrt_execute` fails promptly with
 * NRT_HW_ERROR (or NRT_TIMEOUT) instead of hanging, every later call throws "device portal disconnected", and
 * `nrt_close` + `nrt_init` against a restarted daemon works again. A wedged (stopped) daemon turns into NRT_TIMEOUT
 * after the request bound.
 */
import { describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { oneOpNeff } from "./_kernels.ts";
import { type Proc, remoteContainer, startDaemon, tempDir, until } from "./_remote.ts";
import { connectDeviceDaemon, parseAddress } from "../packages/cli/transports.ts";
import { nrtPlugins } from "@nrt/cli";

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

async function io(rt: Runtime, n: number) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) {
    const t = await rt.allocateTensor({ location: "host", size: n * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ location: "host", size: n * 4, name: "out" }));
  return { ins, outs };
}

describe("device daemon failures", () => {
  test(
    "the daemon killed mid-execution fails nrt_execute promptly; a restarted daemon is reachable after nrt_close + nrt_init",
    async () => {
      const dir = tempDir();
      const sock = `${dir.path}/f.sock`;
      const procs: Proc[] = [];
      try {
        const d1 = await startDaemon({ socket: sock });
        procs.push(d1);
        const { c, portal } = await remoteContainer(d1.address, "victim");
        await portal.acquireCores(0, [0, 1]);
        // A 600 s execution budget: only the connection loss can end this execution quickly.
        const rt = await Runtime.init({
          ...nrtPlugins(c),
          visibleCores: [0, 1],
          execTimeoutSeconds: 600,
          logger: new MemoryLogger(),
        });
        const spin = await rt.load(oneOpNeff("faults", "spin", [f32("x", 64)], [f32("y", 64)]));
        const x = await rt.allocateTensor({ location: "host", size: 256, name: "x" });
        const y = await rt.allocateTensor({ location: "host", size: 256, name: "y" });
        const xs = new TensorSet(), ys = new TensorSet();
        xs.add("x", x);
        ys.add("y", y);
        let settled = false;
        const running = spin.execute(xs, ys).then(() => undefined, (e: unknown) => e).finally(() => (settled = true));
        await until(
          () => settled || portal.pendingWaits(0, 0) > 0 || undefined,
          10_000,
          () => "the host to block on its completion wait",
        );
        expect(settled).toBe(false);
        const killedAt = performance.now();
        d1.kill("SIGKILL");
        const e = await running;
        const took = performance.now() - killedAt;
        expect(e).toBeInstanceOf(NrtError);
        expect([NrtStatus.NRT_HW_ERROR, NrtStatus.NRT_TIMEOUT]).toContain((e as NrtError).status);
        expect(took).toBeLessThan(3_000);
        // Every later call fails the same way, at once.
        const later = await rt.allocateTensor({ size: 64, name: "z" }).then(() => undefined, (x: unknown) => x);
        expect((later as NrtError).status).toBe(NrtStatus.NRT_HW_ERROR);
        expect((later as NrtError).message).toContain("device portal disconnected");
        await rt.close().catch(() => {}); // nrt_close on a dead device: the teardown's device writes fail
        await portal.close();

        const d2 = await startDaemon({ socket: sock });
        procs.push(d2);
        const again = await remoteContainer(d2.address, "victim again");
        try {
          await again.portal.acquireCores(0, [0, 1]);
          const rt2 = await Runtime.init({ ...nrtPlugins(again.c), visibleCores: [0, 1], logger: new MemoryLogger() });
          const add = await rt2.load(
            oneOpNeff("vector_add", "vector_add", [f32("a", 256), f32("b", 256)], [f32("out", 256)]),
          );
          const { ins, outs } = await io(rt2, 256);
          await add.execute(ins, outs);
          expect(new Float32Array((await outs.get("out").read()).slice().buffer)[255]).toBe(510);
          await add.unload();
          await rt2.close();
        } finally {
          await again.portal.close();
        }
      } finally {
        for (const p of procs) p.kill("SIGKILL");
        dir.remove();
      }
    },
    60_000,
  );

  test(
    "a stopped (wedged) daemon turns a request into NRT_TIMEOUT after the request bound, then NRT_HW_ERROR",
    async () => {
      const d = await startDaemon({ port: 0 });
      try {
        const portal = await connectDeviceDaemon(parseAddress(d.address), { name: "patient", requestTimeoutMs: 300 });
        await portal.devices();
        d.kill("SIGSTOP");
        const t0 = performance.now();
        const e = await portal.barRead32(0, 0, 0).then(() => undefined, (x: unknown) => x);
        expect((e as NrtError).status).toBe(NrtStatus.NRT_TIMEOUT);
        expect(performance.now() - t0).toBeLessThan(3_000);
        const next = await portal.semaphoreRead(0, 0, 0).then(() => undefined, (x: unknown) => x);
        expect((next as NrtError).status).toBe(NrtStatus.NRT_HW_ERROR);
        await portal.close();
      } finally {
        d.kill("SIGCONT");
        d.kill("SIGKILL");
      }
    },
    30_000,
  );
});
