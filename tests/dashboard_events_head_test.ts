/**
 * `HEAD /v2/dashboard/events` answers the stream's headers and takes none of the event-stream slots: Hono runs the GET
 * route for a HEAD and drops the body, so a stream started for it held its slot until its first write timed out, and
 * any page could keep the dashboard's own stream out with no-cors HEADs (16 of them: the cap). A HEAD while the cap is
 * reached answers what a GET would, 503.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LogLevel, MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { createInferenceApp, DashboardMonitor, filesFromMap, type InferenceApp, ModelRepository } from "@nrt/http-api";
import { testModels } from "./_http.ts";

let app: InferenceApp;
let monitor: DashboardMonitor;
let close: () => Promise<void>;

beforeAll(async () => {
  const container = createNrtContainer();
  monitor = new DashboardMonitor();
  const runtime = await Runtime.init({
    ...nrtPlugins(container),
    logger: monitor.wrapLogger(new MemoryLogger(LogLevel.ERROR)),
    onExecution: monitor.onExecution,
  });
  const repository = new ModelRepository({ runtime, files: filesFromMap({ "relu.neff": testModels()["relu.neff"] }) });
  await repository.scan();
  await repository.loadAll();
  app = createInferenceApp({ runtime, repository, dashboard: { monitor, maxEventStreams: 4 } });
  close = async () => {
    monitor.close();
    try {
      await repository.close();
      await runtime.close();
    } finally {
      await container.resolve(PortalToken).close();
    }
  };
});

afterAll(async () => {
  await close?.();
});

const head = () => app.request("/v2/dashboard/events", { method: "HEAD" });

describe("HEAD /v2/dashboard/events", () => {
  test("answers the stream's headers with no body and takes no slot: GETs still get every slot after many HEADs", async () => {
    for (let i = 0; i < 12; i++) {
      const res = await head();
      expect([res.status, res.headers.get("content-type"), await res.text()]).toEqual([200, "text/event-stream", ""]);
    }
    const opened: Response[] = [];
    const aborts: AbortController[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const ac = new AbortController();
        aborts.push(ac);
        opened.push(await app.request("/v2/dashboard/events", { signal: ac.signal }));
      }
      expect(opened.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      // The cap is reached: a HEAD says so, as a GET would, and still takes nothing.
      const full = await head();
      expect([full.status, await full.text()]).toEqual([503, ""]);
      const refused = await app.request("/v2/dashboard/events");
      expect(refused.status).toBe(503);
      expect((await refused.json()).error).toBe(
        "Cannot open a dashboard event stream: 4 are open; poll GET /v2/dashboard/state instead",
      );
    } finally {
      for (const ac of aborts) ac.abort();
      for (const r of opened) await r.body?.cancel().catch(() => {});
    }
  });
});
