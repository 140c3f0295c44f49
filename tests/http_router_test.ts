/**
 * The REST app's routes stay within what Hono's RegExpRouter takes (ours, docs/architecture.md §7): one static path
 * beside the `:m` routes (as `GET /v2/models/stats` once was) makes Hono's SmartRouter fall back to its trie router
 * for every request, about 1 µs and a few objects more per match. Every optional route group is switched on here.
 * The Host check is made by each handler and by the 404/405 handler, not by a middleware: it must still come first.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import {
  createInferenceApp,
  DashboardMonitor,
  filesFromMap,
  InferenceMetrics,
  ModelRepository,
  NeuronActivity,
} from "@nrt/http-api";
import { ADMIN_TOKEN, testModels } from "./_http.ts";

describe("REST routing", () => {
  const container = createNrtContainer();
  let runtime: Runtime;
  let repository: ModelRepository;
  let app: ReturnType<typeof createInferenceApp>;
  let monitor: DashboardMonitor;

  beforeAll(async () => {
    runtime = await Runtime.init({ logger: new MemoryLogger(), ...nrtPlugins(container) });
    repository = new ModelRepository({ runtime, files: filesFromMap(testModels()) });
    await repository.scan();
    await repository.loadAll();
    monitor = new DashboardMonitor();
    app = createInferenceApp({
      runtime,
      repository,
      metrics: new InferenceMetrics(),
      dashboard: { monitor },
      adminToken: ADMIN_TOKEN,
      modelControl: "explicit",
      activity: new NeuronActivity(),
      inspect: () => undefined,
    });
  });
  afterAll(async () => {
    monitor.close();
    await repository.close();
    await runtime.close();
    await container.resolve(PortalToken).close();
  });

  test("every route fits Hono's RegExpRouter", async () => {
    expect((await app.request("/v2/health/live")).status).toBe(200);
    // SmartRouter names the router it settled on at the first match.
    expect((app as unknown as { router: { name: string } }).router.name).toBe("SmartRouter + RegExpRouter");
  });

  test("the Host check comes before every route, the 404 and the 405", async () => {
    const guarded = createInferenceApp({ runtime, repository, allowedHosts: ["127.0.0.1:8000"] });
    // A refusal can be answered synchronously (Hono calls a lone handler directly): `await` takes either.
    const at = async (path: string, host: string, method = "GET") =>
      (await guarded.request(path, { method, headers: { host } })).status;
    const routes = ["/v2/health/live", "/v2/no/such/path", "/v2/models/relu/infer"];
    for (const path of routes) expect(await at(path, "evil.example:8000")).toBe(403);
    expect(await at("/v2/models/relu/infer", "evil.example:8000", "POST")).toBe(403);
    expect(await at("/v2/health/live", "127.0.0.1:8000")).toBe(200);
    expect(await at("/v2/no/such/path", "127.0.0.1:8000")).toBe(404);
    expect(await at("/v2/models/relu/infer", "127.0.0.1:8000")).toBe(405);
  });

  test("GET /v2/models/stats is every model's statistics, not a model named stats", async () => {
    const res = await app.request("/v2/models/stats");
    expect(res.status).toBe(200);
    const body = await res.json() as { model_stats: Array<{ name: string }> };
    const names = body.model_stats.map((s) => s.name).sort();
    expect(names).toEqual(repository.models().map((m) => m.name).sort());
    expect(names.length).toBeGreaterThan(1);
    const post = await app.request("/v2/models/stats", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });
});
