/**
 * Memory stays bounded whatever a client sends (docs/security.md, finding 5): against a real `nrt serve` child
 * process, 64 MiB bodies for an 8-element input (declared and chunked), a thousand idle event-stream clients and a
 * gzip-bomb NEFF each leave the server's peak resident memory within idle + 4 × the body limit. The latency of
 * `/v2/health/live` during the same attacks is a measured figure (docs/security.md), not asserted here: these
 * machines are shared.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import {
  type AttackFigure,
  demoRepository,
  loadUnloadUnderTraffic,
  runAdversary,
  type ServerChild,
  startServerChild,
} from "./_adversary.ts";

const BODY_LIMIT_MIB = 64;
let dir: string;
let server: ServerChild;
let figures: AttackFigure[] = [];
beforeAll(async () => {
  dir = await demoRepository();
  server = await startServerChild(dir);
  figures = await runAdversary(server, dir);
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const figure = (prefix: string): AttackFigure => {
  const f = figures.find((x) => x.attack.startsWith(prefix));
  if (f === undefined) throw new Error(`no figure for ${prefix}`);
  return f;
};

describe("nrt serve under hostile load", () => {
  test("oversized bodies, declared or chunked, are refused without being buffered", () => {
    for (const prefix of ["6 × 64 MiB JSON bodies", "6 × 64 MiB chunked bodies"]) {
      const f = figure(prefix);
      // The server answers 413 and closes; a client still sending may see only the close.
      const refused = (f.statuses["HTTP/1.1 413 Payload Too Large"] ?? 0) + (f.statuses["closed"] ?? 0);
      expect({ prefix, refused }).toEqual({ prefix, refused: 6 });
      expect(f.peakRssMiB - f.idleRssMiB).toBeLessThan(4 * BODY_LIMIT_MIB);
      // Far less in fact: the per-model bound stops an 8-element request at about 64 KiB.
      expect(f.peakRssMiB - f.idleRssMiB).toBeLessThan(32);
    }
  });

  test("a thousand idle event-stream clients: 16 are served, the rest get 503, memory stays bounded", () => {
    const f = figure("1000 idle dashboard event streams");
    expect(f.statuses).toEqual({ "HTTP/1.1 200 OK": 16, "HTTP/1.1 503 Service Unavailable": 984 });
    expect(f.peakRssMiB - f.idleRssMiB).toBeLessThan(4 * BODY_LIMIT_MIB);
  });

  test("a 1 MB gzip-bomb NEFF is refused at the inflate cap, four times, within the memory bound", () => {
    const f = figure("gzip-bomb NEFF");
    expect(f.statuses).toEqual({ "HTTP 400": 4 });
    expect(f.peakRssMiB - f.idleRssMiB).toBeLessThan(4 * BODY_LIMIT_MIB);
  });
});

describe("nrt serve under model churn", () => {
  test(
    "50 unload/load cycles under 8 inferring clients: no wrong answer, only 200 or 503, device memory back to where it was",
    async () => {
      const r = await loadUnloadUnderTraffic(server, 50);
      expect(r.wrong).toBe(0);
      expect(r.answered).toBeGreaterThan(0);
      expect([...new Set(r.statuses)].sort()).toEqual(["infer 200", "infer 503", "load 200", "unload 200"]);
      expect(r.bytesAfter).toBe(r.bytesBefore);
    },
    60_000,
  );
});
