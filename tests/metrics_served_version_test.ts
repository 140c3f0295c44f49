/**
 * `/metrics` and the statistics extension label a model with the version it is served as, in every family: a model
 * served from a version folder (`relu/3/model.neff`) is `version="3"` in the request counters, readiness, instances
 * and the runtime's execution statistics alike, and its statistics say `"version": "3"`. Each request counts under
 * the version that served it, so a new version starts series of its own and the old version's stay. The runtime's
 * per-handle execution statistics name the repository model from a handle's first execution — its warm-up — because
 * the repository records the handle before the warm-up runs: a warm-up that fails (the load never completes, so no
 * scrape ever saw the model served) is still counted under `{model="relu",version="3"}`, not under the NEFF's name
 * and an empty version.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type ExecutionEvent, MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import type { DeviceSimPortal } from "@nrt/device-sim";
import {
  createInferenceApp,
  filesFromMap,
  type InferenceApp,
  InferenceMetrics,
  ModelRepository,
  type RepositoryFiles,
} from "@nrt/http-api";
import { ADMIN_TOKEN, control, post, testModels } from "./_http.ts";

const x8 = () => post({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }] });

/** The sample lines of a family (`name{…} value`) that name `model`. */
function samplesOf(text: string, family: string, model: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${family}{`) && l.includes(`model="${model}"`));
}

/** The value of one sample, 0 when absent. */
function valueOf(text: string, family: string, labels: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${family}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

interface Fixture {
  readonly app: InferenceApp;
  readonly runtime: Runtime;
  readonly repository: ModelRepository;
  readonly metrics: InferenceMetrics;
  readonly sim: DeviceSimPortal;
  /** The version the repository's files serve `relu` as (Triton's highest version folder). */
  version: string;
  /** The handles each execution started on, with what the repository said of them at that moment. */
  readonly started: Array<{ handle: number; said: ReturnType<ModelRepository["modelOfHandle"]> }>;
  close(): Promise<void>;
}

/** A runtime and an app over relu served as version 3, the metrics told the repository as `nrt serve` tells them. */
async function fixture(metricsOf: (repo: ModelRepository) => InferenceMetrics): Promise<Fixture> {
  const container = createNrtContainer();
  const own: { repository?: ModelRepository } = {};
  const started: Fixture["started"] = [];
  const onExecution = (e: ExecutionEvent): void => {
    if (e.phase === "start") started.push({ handle: e.model, said: own.repository?.modelOfHandle?.(e.model) });
  };
  const runtime = await Runtime.init({ logger: new MemoryLogger(), onExecution, ...nrtPlugins(container) });
  const fx = { version: "3" } as Fixture & { version: string };
  const map = filesFromMap({
    "relu.neff": testModels()["relu.neff"],
    "relu.json": new TextEncoder().encode('{"vnc": 0}'),
  });
  const files: RepositoryFiles = { ...map, version: () => Promise.resolve(fx.version) };
  const repository = own.repository = new ModelRepository({ runtime, files });
  await repository.scan();
  await repository.loadAll();
  const metrics = metricsOf(repository);
  const app = createInferenceApp({ runtime, repository, metrics, modelControl: "explicit", adminToken: ADMIN_TOKEN });
  return Object.assign(fx, {
    app,
    runtime,
    repository,
    metrics,
    started,
    sim: container.resolve(PortalToken) as DeviceSimPortal,
    close: async () => {
      try {
        await repository.close();
        await runtime.close();
      } finally {
        await container.resolve(PortalToken).close();
      }
    },
  });
}

describe("/metrics and statistics: the served version everywhere", () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await fixture((repository) => new InferenceMetrics({ repository }));
  });
  afterAll(async () => {
    await fx?.close();
  });

  test("every family that names relu, served from version folder 3, says version 3; so do its statistics", async () => {
    expect(fx.repository.get("relu")!.version).toBe("3");
    expect((await fx.app.request("/v2/models/relu/infer", x8())).status).toBe(200);
    const text = await (await fx.app.request("/metrics")).text();
    const families = [
      "nrt_inference_request_success",
      "nrt_inference_request_failure",
      "nrt_inference_count",
      "nrt_inference_exec_count",
      "nrt_inference_request_duration_us",
      "nrt_inference_pending_request_count",
      "nrt_model_ready",
      "nrt_model_instances",
      "nrt_model_instance_ready",
      "nrt_model_execution_status_total",
      "nrt_model_execution_error_flags_total",
    ];
    for (const family of families) {
      const lines = samplesOf(text, family, "relu");
      expect({ family, some: lines.length > 0 }).toEqual({ family, some: true });
      expect({ family, other: lines.filter((l) => !l.includes(`model="relu",version="3"`)) }).toEqual({
        family,
        other: [],
      });
    }
    expect(valueOf(text, "nrt_inference_request_success", 'model="relu",version="3"')).toBe(1);
    expect(valueOf(text, "nrt_model_ready", 'model="relu",version="3"')).toBe(1);
    for (const path of ["/v2/models/relu/stats", "/v2/models/relu/versions/3/stats", "/v2/models/stats"]) {
      const stats = (await (await fx.app.request(path)).json()).model_stats;
      expect({
        path,
        stats: stats.map((s: { version: string; inference_count: number }) => [s.version, s.inference_count]),
      })
        .toEqual({ path, stats: [["3", 1]] });
    }
  });

  test("a new version counts under its own series; the old version's series stay, never lower", async () => {
    const before = await (await fx.app.request("/metrics")).text();
    const v3 = valueOf(before, "nrt_inference_request_success", 'model="relu",version="3"');
    expect(v3).toBeGreaterThan(0);
    fx.version = "4";
    try {
      expect((await fx.app.request("/v2/repository/models/relu/unload", control())).status).toBe(200);
      expect((await fx.app.request("/v2/repository/models/relu/load", control())).status).toBe(200);
      expect(fx.repository.get("relu")!.version).toBe("4");
      expect((await fx.app.request("/v2/models/relu/infer", x8())).status).toBe(200);
      const after = await (await fx.app.request("/metrics")).text();
      expect(valueOf(after, "nrt_inference_request_success", 'model="relu",version="3"')).toBe(v3);
      expect(valueOf(after, "nrt_inference_request_success", 'model="relu",version="4"')).toBe(1);
      expect(samplesOf(after, "nrt_model_ready", "relu")).toEqual(['nrt_model_ready{model="relu",version="4"} 1']);
      expect(fx.metrics.modelStatistics("relu").version).toBe("4");
      expect(fx.metrics.modelStatistics("relu").inference_count).toBe(1);
      expect(fx.metrics.modelStatistics("relu", "3").inference_count).toBe(v3);
      // The dashboard's row counts the model over its versions.
      expect(fx.metrics.modelSummary("relu").success).toBe(v3 + 1);
    } finally {
      fx.version = "3";
      await fx.repository.unload("relu");
      await fx.repository.load("relu");
    }
  });

  test("the repository names each handle from its warm-up on: a failed warm-up counts under relu, version 3", async () => {
    expect((await fx.app.request("/v2/repository/models/relu/unload", control())).status).toBe(200);
    const scraped = await (await fx.app.request("/metrics")).text();
    fx.started.length = 0;
    // The next execution on relu's NeuronCore (logical core 0, relu.json) is the reload's warm-up: it fails.
    fx.sim.faults.inject({ kind: "oob", nc: fx.runtime.cores()[0].ncs[0], atExecution: 1 });
    const load = await fx.app.request("/v2/repository/models/relu/load", control());
    expect(load.status).toBe(500);
    expect((await load.json()).error).toMatch(/Warm-up of model "relu".*NRT_EXEC_OOB/);
    // No scrape saw the handle served (it never was); its execution is relu's all the same.
    const text = await (await fx.app.request("/metrics")).text();
    expect(text.split("\n").filter((l) => l.includes('version=""'))).toEqual([]);
    const oob = (t: string) =>
      samplesOf(t, "nrt_model_execution_status_total", "relu").filter((l) =>
        l.startsWith('nrt_model_execution_status_total{model="relu",version="3",') &&
        l.includes('status="NRT_EXEC_OOB"')
      ).reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    expect(oob(text) - oob(scraped)).toBe(1);
    // During its warm-up, the handle was already the repository's relu, version 3.
    expect(fx.started.length).toBe(1);
    expect(fx.started[0].said).toEqual({ model: "relu", version: "3" });
    // Loaded again: its instances are relu's from their warm-up too.
    fx.started.length = 0;
    expect((await fx.app.request("/v2/repository/models/relu/load", control())).status).toBe(200);
    expect(fx.started.map((s) => s.said)).toEqual([{ model: "relu", version: "3" }]);
    const handle = fx.repository.get("relu")!.served!.instances[0].handle;
    expect(fx.started[0].handle).toBe(handle);
    expect(fx.repository.modelOfHandle(handle)).toEqual({ model: "relu", version: "3" });
    expect(fx.repository.modelOfHandle(-1)).toBeUndefined();
  });
});

describe("/metrics without a repository given to the counters", () => {
  test("is labelled with the served version all the same", async () => {
    const fx = await fixture(() => new InferenceMetrics());
    try {
      expect((await fx.app.request("/v2/models/relu/infer", x8())).status).toBe(200);
      const text = await (await fx.app.request("/metrics")).text();
      expect(samplesOf(text, "nrt_inference_request_success", "relu")).toEqual([
        'nrt_inference_request_success{model="relu",version="3"} 1',
      ]);
      expect(samplesOf(text, "nrt_model_ready", "relu")).toEqual(['nrt_model_ready{model="relu",version="3"} 1']);
      expect(fx.metrics.modelStatistics("relu", "3")).toMatchObject({ version: "3", inference_count: 1 });
    } finally {
      await fx.close();
    }
  });

  test("an app given no counters makes its own over the repository: its statistics say the served version", async () => {
    const fx = await fixture(() => new InferenceMetrics());
    try {
      const app = createInferenceApp({ runtime: fx.runtime, repository: fx.repository });
      expect((await app.request("/v2/models/relu/infer", x8())).status).toBe(200);
      for (const path of ["/v2/models/relu/stats", "/v2/models/relu/versions/3/stats", "/v2/models/stats"]) {
        const stats = (await (await app.request(path)).json()).model_stats;
        expect({
          path,
          stats: stats.map((s: { version: string; inference_count: number }) => [s.version, s.inference_count]),
        })
          .toEqual({ path, stats: [["3", 1]] });
      }
      const text = await (await app.request("/metrics")).text();
      expect(samplesOf(text, "nrt_inference_request_success", "relu")).toEqual([
        'nrt_inference_request_success{model="relu",version="3"} 1',
      ]);
    } finally {
      await fx.close();
    }
  });
});
