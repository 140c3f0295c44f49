// The runtime's execution statistics (kmetric_update_nds_*, seed lifecycle-error-model §5.2) on /metrics: after a
// failed and a successful inference through the REST app, the per-model counters by final NRT_STATUS (with
// neuron-monitor's status_type / error_type) and by kbl_infer_errors flag.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { control, type HttpFixture, httpFixture, injectOnModel, post, testModels } from "./_http.ts";

let fx: HttpFixture;

beforeAll(async () => {
  fx = await httpFixture();
});

afterAll(async () => {
  await fx?.close();
});

const x8 = () => post({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] });

/** The value of one sample line of the exposition, 0 when absent. */
function sample(text: string, name: string, labels: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** Every `nrt_model_execution_error_flags_total` sample of a model, by flag. */
function flags(text: string, model: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of text.split("\n")) {
    const m = /^nrt_model_execution_error_flags_total\{model="([^"]*)",version="1",core="\d+",flag="(\w+)"\} (\d+)$/
      .exec(l);
    if (m !== null && m[1] === model) out[m[2]] = (out[m[2]] ?? 0) + Number(m[3]);
  }
  return out;
}

describe("/metrics: execution statistics per model (Runtime.executionStats)", () => {
  test("a failed (OOB) and a successful inference: +1 under each final status, +1 on the oob flag only", async () => {
    const nc = fx.runtime.cores()[fx.repository.get("relu")!.served!.instances[0].vnc].ncs[0];
    const base = `model="relu",version="1",core="${nc}"`;
    const ok = `${base},status="NRT_SUCCESS",status_type="completed"`;
    const oob = `${base},status="NRT_EXEC_OOB",status_type="completed_with_err",error_type="model"`;
    const before = await (await fx.app.request("/metrics")).text();
    expect(before).toContain("# TYPE nrt_model_execution_status_total counter");
    expect(before).toContain("# TYPE nrt_model_execution_error_flags_total counter");
    const flagsBefore = flags(before, "relu");
    // Nine flags per model and NeuronCore, the width of kbl_infer_errors.
    expect(Object.keys(flagsBefore).length).toBe(9);

    injectOnModel(fx, "relu", { kind: "oob" });
    const failed = await fx.app.request("/v2/models/relu/infer", x8());
    expect(failed.status).toBe(500);
    expect((await failed.json()).error).toMatch(/NRT_EXEC_OOB/);
    expect((await fx.app.request("/v2/models/relu/infer", x8())).status).toBe(200);

    const after = await (await fx.app.request("/metrics")).text();
    expect(
      sample(after, "nrt_model_execution_status_total", oob) - sample(before, "nrt_model_execution_status_total", oob),
    )
      .toBe(1);
    expect(
      sample(after, "nrt_model_execution_status_total", ok) - sample(before, "nrt_model_execution_status_total", ok),
    )
      .toBe(1);
    const flagsAfter = flags(after, "relu");
    const delta = Object.fromEntries(Object.keys(flagsAfter).map((f) => [f, flagsAfter[f] - flagsBefore[f]]));
    expect(delta).toEqual({
      nc_ue: 0,
      hbm_ue: 0,
      dma_abort: 0,
      oob: 1,
      collectives: 0,
      network_proxy: 0,
      timeout: 0,
      tpb_fatal: 0,
      tpb_nonfatal: 0,
    });
    // The runtime's own view agrees.
    const stats = fx.runtime.executionStats().find((s) =>
      s.handle === fx.repository.get("relu")!.served!.instances[0].handle
    )!;
    expect(stats.cores[0].errors.OOB).toBe(flagsAfter.oob);
  });

  test("a Band-C fault (nc-ue on trap) counts under its status with error_type hardware and the nc_ue flag", async () => {
    const nc = fx.runtime.cores()[fx.repository.get("trap")!.served!.instances[0].vnc].ncs[0];
    injectOnModel(fx, "trap", { kind: "nc-ue" });
    expect(
      (await fx.app.request(
        "/v2/models/trap/infer",
        post({
          inputs: [{ name: "x", shape: [4], datatype: "FP32", data: [1, 2, 3, 4] }],
        }),
      )).status,
    ).toBe(500);
    const text = await (await fx.app.request("/metrics")).text();
    const labels =
      `model="trap",version="1",core="${nc}",status="NRT_EXEC_HW_ERR_NC_UE",status_type="completed_with_err",error_type="hardware"`;
    expect(sample(text, "nrt_model_execution_status_total", labels)).toBe(1);
    expect(flags(text, "trap").nc_ue).toBe(1);
  });

  test(
    "a model unloaded, then out of the runtime's list (256 unloads later), keeps its counts: counters never drop",
    async () => {
      const nc = fx.runtime.cores()[fx.repository.get("add")!.served!.instances[0].vnc].ncs[0];
      const ok = `model="add",version="1",core="${nc}",status="NRT_SUCCESS",status_type="completed"`;
      const a16 = post({
        inputs: [
          { name: "a", shape: [16], datatype: "FP32", data: Array(16).fill(1) },
          { name: "b", shape: [16], datatype: "FP32", data: Array(16).fill(2) },
        ],
      });
      expect((await fx.app.request("/v2/models/add/infer", a16)).status).toBe(200);
      const seen = sample(await (await fx.app.request("/metrics")).text(), "nrt_model_execution_status_total", ok);
      expect(seen).toBeGreaterThan(0);
      const handle = fx.repository.get("add")!.served!.instances[0].handle;
      expect((await fx.app.request("/v2/repository/models/add/unload", control())).status).toBe(200);
      // Unloaded: still listed, not loaded, with its counts.
      expect(fx.runtime.executionStats().find((m) => m.handle === handle)?.loaded).toBe(false);
      expect(sample(await (await fx.app.request("/metrics")).text(), "nrt_model_execution_status_total", ok)).toBe(
        seen,
      );
      // 256 more models unloaded after it: the runtime lists it no more, and its counts are in the per-core total.
      const relu = testModels()["relu.neff"];
      for (let i = 0; i < 256; i++) await (await fx.runtime.load(relu)).unload();
      expect(fx.runtime.executionStats().find((m) => m.handle === handle)).toBeUndefined();
      expect(fx.runtime.executionStats().filter((m) => !m.loaded).length).toBe(256);
      // The series keeps the last count scraped: a Prometheus counter that dropped would read as a reset.
      expect(sample(await (await fx.app.request("/metrics")).text(), "nrt_model_execution_status_total", ok)).toBe(
        seen,
      );
      // Loaded again, the model's series goes on from there.
      expect((await fx.app.request("/v2/repository/models/add/load", control())).status).toBe(200);
      expect((await fx.app.request("/v2/models/add/infer", a16)).status).toBe(200);
      const again = sample(await (await fx.app.request("/metrics")).text(), "nrt_model_execution_status_total", ok);
      expect(again).toBeGreaterThan(seen);
    },
    120_000,
  );
});
