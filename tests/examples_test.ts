import { describe, expect, test } from "bun:test";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "@nrt/cli";
import { main as idiomatic } from "../examples/idiomatic.ts";
import { main as facade } from "../examples/facade.ts";
import { main as faults } from "../examples/fault_injection.ts";
import { main as restClient } from "../examples/rest_client.ts";

const quiet = () => {};

describe("examples/", () => {
  test("idiomatic.ts: softmax rows sum to 1 and increase along each row", async () => {
    const rows = await idiomatic(quiet);
    expect(rows.length).toBe(4);
    for (const r of rows) {
      expect(Math.abs(r.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-5);
      for (let i = 1; i < r.length; i++) expect(r[i]).toBeGreaterThan(r[i - 1]);
    }
  }, 60_000);

  test("facade.ts: every nrt_* step returns NRT_SUCCESS", async () => {
    const steps = await facade(quiet);
    expect(Object.keys(steps)).toContain("nrt_execute");
    expect(Object.values(steps).every((s) => s === 0)).toBe(true);
  }, 60_000);

  test("fault_injection.ts: healthy 0, injected HBM UE 1201, poisoned 1201, recovered 0", async () => {
    expect(await faults(quiet)).toEqual([0, 1201, 1201, 0]);
  }, 60_000);

  test("rest_client.ts runs an inference over HTTP against the demo server", async () => {
    const server = await startServer({
      models: await mkdtemp(join(tmpdir(), "nrt-example-")),
      demo: true,
      port: 0,
      log: quiet,
    });
    try {
      const out = await restClient(server.url, quiet);
      expect(out.data.length).toBeGreaterThan(0);
      expect(out.data.every((v) => Number.isFinite(v))).toBe(true);
    } finally {
      await server.close();
    }
  }, 60_000);
});
