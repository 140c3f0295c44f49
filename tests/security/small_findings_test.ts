/**
 * The smaller findings of docs/security.md (finding 9): strict fault specs, a kernel that returns without its commit
 * fence, and the readiness message of a poisoned model.
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { MemoryLogger, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { DeviceSimPortal, FaultKind } from "@nrt/device-sim";
import { DeviceDaemon, linkPair, RemotePortal } from "@nrt/device-sim/remote";
import { buildCustomOpNeff } from "@nrt/core";
import { type HttpFixture, httpFixture, injectOnModel, post } from "../_http.ts";

describe("FaultInjector.inject()", () => {
  const portal = new DeviceSimPortal();
  afterAll(() => portal.close());
  const refused = (spec: unknown): string => {
    try {
      portal.faults.inject(spec as never);
    } catch (e) {
      expect(e).toBeInstanceOf(RangeError);
      return (e as Error).message;
    }
    throw new Error(`${JSON.stringify(spec)} was accepted`);
  };

  test("FaultInjector.inject() names the field of every loosely typed or unknown part of a spec", () => {
    expect(refused({ kind: "tpb-error", fatal: "no" })).toBe(
      'Cannot inject fault "tpb-error": "fatal" is "no", expected true or false',
    );
    expect(refused({ kind: "hang", atExecution: 1e308 })).toBe(
      'Cannot inject fault "hang": "atExecution" is 1e+308, expected an integer from 1 to 2147483647',
    );
    expect(refused({ kind: "oob", nc: 0, color: "red" })).toMatch(
      /^Cannot inject fault "oob": unknown field "color"; the fields are kind, device, nc/,
    );
    expect(refused({ kind: "hbm-ue", repairable: 1 })).toBe(
      'Cannot inject fault "hbm-ue": "repairable" is 1, expected true or false',
    );
    expect(refused({ kind: "nc-ue", metadata: -1 })).toBe(
      'Cannot inject fault "nc-ue": "metadata" is -1, expected an integer from 0 to 4294967295',
    );
    expect(refused({ kind: "collectives-hang", collectives: { op: 1, stage: 2 } })).toBe(
      'Cannot inject fault "collectives-hang": unknown field "collectives.stage"; the fields are variant, op, total',
    );
    expect(refused({ kind: 7 })).toMatch(/^Cannot inject fault: "kind" must be one of tpb-error, hbm-ue/);
    expect(refused(null)).toBe("Cannot inject fault: the spec must be an object");
    expect(portal.faults.pending()).toEqual([]);
    // A well-formed spec is still accepted.
    expect(portal.faults.inject({ kind: FaultKind.TPB_ERROR, fatal: false, nc: 1, atExecution: 2 }).ncs).toEqual([1]);
    portal.faults.clear();
  });
});

/** A library whose `lazy` returns without calling customop_cleanup (no imports, an empty body). */
const LAZY = new Uint8Array([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00, // magic, version
  0x01,
  0x04,
  0x01,
  0x60,
  0x00,
  0x00, // type: () -> ()
  0x03,
  0x02,
  0x01,
  0x00, // function 0 has type 0
  0x07,
  0x08,
  0x01,
  0x04,
  0x6c,
  0x61,
  0x7a,
  0x79,
  0x00,
  0x00, // export "lazy" = function 0
  0x0a,
  0x04,
  0x01,
  0x02,
  0x00,
  0x0b, // code: no locals, end
]);

describe("a kernel without customop_cleanup", () => {
  test("Model.execute() completes with NRT_EXEC_COMPLETED_WITH_ERR (1004) and a warning per uncommitted core", async () => {
    const container = createNrtContainer();
    const logger = new MemoryLogger();
    const rt = await Runtime.init({ ...nrtPlugins(container), logger, visibleCores: [0, 1] });
    try {
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [16] });
      const neff = buildCustomOpNeff({
        name: "lazy.neff",
        target: "cayman",
        inputs: [f32("x")],
        outputs: [f32("y")],
        libraries: [{ name: "lazy", wasm: LAZY, totalCpus: 8, functions: [{ opcode: 1, name: "lazy" }] }],
        calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
      });
      const model = await rt.load(neff);
      const ins = new TensorSet(), outs = new TensorSet();
      ins.add("x", await rt.allocateTensor({ location: "host", size: 64, name: "x" }));
      outs.add("y", await rt.allocateTensor({ location: "host", size: 64, name: "y" }));
      let status: number | undefined;
      try {
        await model.execute(ins, outs);
      } catch (e) {
        expect(e).toBeInstanceOf(NrtError);
        status = (e as NrtError).status;
      }
      expect(status).toBe(NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR);
      const warned = logger.messages().filter((m) => m.includes("returned without customop_cleanup"));
      expect(warned.length).toBe(8);
      expect(warned[0]).toBe(
        "[ND 0][NC 0] Q7 core 0 returned without customop_cleanup on model lazy.neff: its results are not committed",
      );
      // The execution completed: the model runs again.
      await expect(model.execute(ins, outs)).rejects.toMatchObject({ status: NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR });
    } finally {
      await rt.close();
      await container.resolve(PortalToken).close();
    }
  });
});

describe("readiness of a poisoned model", () => {
  let fx: HttpFixture;
  afterAll(() => fx?.close());
  test("GET /v2/health/ready names the poisoned model in one readable sentence", async () => {
    fx = await httpFixture();
    // A Band-C fault poisons the model (seed lifecycle-error-model §4.1); the kernel's own trap (6) would not.
    injectOnModel(fx, "trap", { kind: "hbm-ue" });
    const res = await fx.app.request(
      "/v2/models/trap/infer",
      post({ inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
    );
    expect(res.status).toBe(500);
    const ready = await fx.app.request("/v2/health/ready");
    expect(ready.status).toBe(503);
    expect((await ready.json()).error).toBe(
      'Server is not ready: model "trap" is not ready (it is poisoned by NRT_EXEC_HW_ERR_HBM_UE (a fault during execution); load it again to recover)',
    );
  });
});

describe("the device daemon's log", () => {
  test("a core named twice in one request is acquired, logged and reclaimed once", async () => {
    const sim = new DeviceSimPortal();
    const lines: string[] = [];
    const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, log: (l) => lines.push(l) });
    const portal = await RemotePortal.connect(linkPair((l) => daemon.accept(l)), { pid: 4242, name: "twice" });
    try {
      await portal.acquireCores!(0, [3, 3, 2]);
      expect(lines).toContain('process 4242 ("twice") acquired nc2,nc3 of device 0');
      expect((await portal.stats()).grants.map((g) => g.nc)).toEqual([2, 3]);
    } finally {
      await portal.close();
      await sim.close();
    }
    expect(lines.at(-1)).toMatch(/^process 4242 \("twice"\) .*reclaimed 2 NeuronCore\(s\) \(nc2,nc3\)/);
  });
});
