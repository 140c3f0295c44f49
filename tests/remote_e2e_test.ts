/**
 * One end-to-end test — nrt_init, load vector_add, execute, unload, close — run unchanged on the embedded
 * simulator and on the remote backend (a `nrt device-sim` process over loopback TCP), with the same results and
 * the device left as it was found.
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { container } from "tsyringe";
import { oneOpNeff } from "./_kernels.ts";
import { type DaemonProc, remoteContainer, startDaemon } from "./_remote.ts";
import { ArchPackToken, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { cayman } from "@nrt/arch-cayman";

const n = 1 << 16;
const f32 = (name: string) => ({ name, dtype: "float32", shape: [n] });
const NEFF = oneOpNeff("vector_add", "vector_add", [f32("a"), f32("b")], [f32("out")]);

let daemon: DaemonProc | undefined;
const sims: DeviceSimPortal[] = [];
afterAll(async () => {
  daemon?.kill();
  for (const s of sims.splice(0)) await s.close();
});

/** The end-to-end body: returns what it observed. */
async function endToEnd(c: NrtContainer) {
  const portal = c.resolve(PortalToken);
  const before = await portal.memUsage(0);
  await portal.acquireCores?.(0, [2, 3]); // what nrt_init does for NEURON_RT_VISIBLE_CORES=2-3 once wired
  const rt = await Runtime.init({
    ...nrtPlugins(c),
    ownsPortal: false,
    visibleCores: [2, 3],
    logger: new MemoryLogger(),
  });
  const model = await rt.load(NEFF);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const [k, name] of ["a", "b"].entries()) {
    const t = await rt.allocateTensor({ location: "host", size: n * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i * (k + 1)).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ location: "host", size: n * 4, name: "out" }));
  await model.execute(ins, outs);
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  await model.unload();
  await rt.close();
  await portal.releaseCores?.(0, [2, 3]);
  const after = await portal.memUsage(0);
  return { out: [out[0], out[1], out[1000], out[n - 1]], before, after };
}

describe("end to end on both backends", () => {
  const expected = [0, 3, 3000, 3 * (n - 1)];

  test("init/load/execute vector_add/unload/close on the embedded simulator", async () => {
    const sim = new DeviceSimPortal();
    sims.push(sim);
    const c = container.createChildContainer();
    c.register(ArchPackToken, { useValue: cayman });
    c.register(PortalToken, { useValue: sim });
    const r = await endToEnd(c);
    expect(r.out).toEqual(expected);
    expect(r.after).toEqual(r.before);
  }, 30_000);

  test("init/load/execute vector_add/unload/close on the remote backend (nrt device-sim over TCP)", async () => {
    daemon = await startDaemon({ port: 0 });
    expect(daemon.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const { c, portal } = await remoteContainer(daemon.address, "e2e");
    try {
      const r = await endToEnd(c);
      expect(r.out).toEqual(expected);
      expect(r.after).toEqual(r.before);
      expect((await portal.stats()).grants).toEqual([]);
    } finally {
      await portal.close();
    }
  }, 30_000);
});
