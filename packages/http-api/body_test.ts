import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BodyBudget, parseJson, readBody } from "./body.ts";
import { HttpError } from "./http_error.ts";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    return e instanceof HttpError ? e.status : -1;
  }
}

function stream(chunks: number, size: number): ReadableStream<Uint8Array> {
  let n = 0;
  return new ReadableStream({
    pull(c) {
      if (n++ === chunks) c.close();
      else c.enqueue(new Uint8Array(size));
    },
  });
}

describe("body", () => {
  test("readBody() accepts a body up to the limit and refuses one byte more", async () => {
    const req = (n: number) => new Request("http://x/", { method: "POST", body: "a".repeat(n) });
    expect((await readBody(req(100), 100)).length).toBe(100);
    expect(await status(readBody(req(101), 100))).toBe(413);
    expect((await readBody(new Request("http://x/"), 100)).length).toBe(0);
  });

  test("readBody() counts a streamed body and stops reading past the limit", async () => {
    const req = (s: ReadableStream<Uint8Array>) =>
      new Request("http://x/", { method: "POST", body: s, duplex: "half" } as RequestInit);
    expect((await readBody(req(stream(4, 25)), 100)).length).toBe(100);
    expect(await status(readBody(req(stream(1_000_000, 1024)), 4096))).toBe(413);
  });

  test("readBody() answers 408 for a body that does not arrive within its deadline, and reads one that does", async () => {
    // A body that never ends (a client that trickles or stalls), with and without a declared length.
    const stalled = (headers: Record<string, string>) =>
      new Request("http://x/", {
        method: "POST",
        body: new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) }),
        duplex: "half",
        headers,
      } as RequestInit);
    for (const headers of [{ "content-length": "10" }, {}] as Array<Record<string, string>>) {
      const t0 = Date.now();
      expect(await status(readBody(stalled(headers), 100, { deadlineMs: 60 }))).toBe(408);
      // Not before the deadline (the deadline's slot ends at or after it).
      expect(Date.now() - t0).toBeGreaterThanOrEqual(59);
    }
    // Many bodies that arrive in time, under one deadline: every one read whole, none answered 408.
    const ok = (i: number) => new Request("http://x/", { method: "POST", body: "x".repeat(i % 50 + 1) });
    const sizes = await Promise.all(Array.from({ length: 200 }, (_, i) => readBody(ok(i), 100, { deadlineMs: 60 })));
    expect(sizes.map((b) => b.length)).toEqual(Array.from({ length: 200 }, (_, i) => i % 50 + 1));
  });

  test("a body read under a long deadline leaves no timer that keeps the process alive", () => {
    // The deadline's slot outlives the read (it is shared with the reads that follow) but holds the event loop only
    // while a read waits on it: a process that read one body and has nothing else to do exits, not 600 s later.
    const dir = mkdtempSync(join(tmpdir(), "nrt-body-"));
    try {
      const script = join(dir, "read_once.ts");
      writeFileSync(
        script,
        `import { readBody } from ${JSON.stringify(new URL("./body.ts", import.meta.url).href)};\n` +
          `const r = new Request("http://x/", { method: "POST", body: "abc", headers: { "content-length": "3" } });\n` +
          `console.log((await readBody(r, 100, { deadlineMs: 600_000 })).length);\n`,
      );
      const isDeno = (globalThis as { Deno?: unknown }).Deno !== undefined;
      const config = new URL("../../deno.json", import.meta.url).pathname; // the workspace's import map
      const r = spawnSync(process.execPath, isDeno ? ["run", "-A", "--config", config, script] : [script], {
        encoding: "utf8",
        timeout: 60_000,
      });
      expect({ status: r.status, out: r.stdout.trim() }).toEqual({ status: 0, out: "3" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  // The engine's heap counts are Bun's (`bun:jsc`); V8 has no collection a test can force without a flag.
  test.if(typeof (globalThis as { Bun?: unknown }).Bun !== "undefined")(
    "a body read under a deadline is not held by the deadline once read, even while its slot waits for another",
    async () => {
      const require = (import.meta as { require?: (id: string) => unknown }).require!;
      const jsc = require("bun:jsc") as {
        heapStats(): { objectTypeCounts: Record<string, number> };
        gcAndSweep(): void;
      };
      const buffers = () => jsc.heapStats().objectTypeCounts.ArrayBuffer ?? 0;
      // A read that does not end until the test is done keeps the deadline's slot waiting; 200 reads of 64 KiB end
      // meanwhile in that slot.
      let end!: () => void;
      const stalled = new Request("http://x/", {
        method: "POST",
        body: new ReadableStream<Uint8Array>({
          pull: (c) => new Promise<void>((r) => (end = () => (c.close(), r()))),
        }),
        duplex: "half",
      } as RequestInit);
      const pending = readBody(stalled, 100, { deadlineMs: 600_000 });
      jsc.gcAndSweep();
      const before = buffers();
      for (let i = 0; i < 200; i++) {
        const body = new Uint8Array(65_536).fill(i);
        const req = new Request("http://x/", { method: "POST", body, headers: { "content-length": "65536" } });
        expect((await readBody(req, 1 << 20, { deadlineMs: 600_000 })).length).toBe(65_536);
      }
      jsc.gcAndSweep();
      // Held until the slot's end, they were 200 more (13 MB); read and dropped, a few at most remain.
      expect(buffers() - before).toBeLessThan(20);
      end();
      expect((await pending).length).toBe(0);
    },
  );

  test("readBody() refuses a declared length over the limit, a malformed one and a conflict with Transfer-Encoding", async () => {
    const req = (headers: Record<string, string>) => new Request("http://x/", { method: "POST", body: "{}", headers });
    expect(await status(readBody(req({ "content-length": "1000" }), 100))).toBe(413);
    expect(await status(readBody(req({ "content-length": "1e3" }), 100))).toBe(400);
    expect(await status(readBody(req({ "content-length": "2", "transfer-encoding": "chunked" }), 100))).toBe(400);
  });

  test("parseJson() parses within the nesting limit and refuses deeper documents", () => {
    expect(parseJson(enc('{"a":[[1]],"s":"[[[[\\"]]"}'), 3)).toEqual({ a: [[1]], s: '[[[["]]' });
    expect(() => parseJson(enc("[[[[1]]]]"), 3)).toThrow("nests deeper than 3 levels");
    expect(() => parseJson(enc("{"), 3)).toThrow("Cannot parse the JSON body");
    expect(() => parseJson(new Uint8Array([0x22, 0xff, 0x22]), 3)).toThrow("not valid UTF-8");
  });

  test("BodyBudget: tryReserve() takes room only when nothing waits before it; a release lets the next in line in", async () => {
    const budget = new BodyBudget(100, 60_000);
    const a = budget.tryReserve(60)!;
    expect(budget.reserved).toBe(60);
    expect(budget.tryReserve(60)).toBeUndefined(); // no room: nothing taken
    expect(budget.reserved).toBe(60);
    const waiting = budget.reserve(60);
    // Room for 30 now, but a request waits before it: it does not jump the line.
    expect(budget.tryReserve(30)).toBeUndefined();
    a();
    a(); // idempotent
    const b = await waiting;
    expect(budget.reserved).toBe(60);
    b();
    expect(budget.reserved).toBe(0);
    // More than the whole budget is capped at it, and a negative size reserves nothing.
    const all = budget.tryReserve(1_000)!;
    expect(budget.reserved).toBe(100);
    all();
    budget.tryReserve(-5)!();
    expect(budget.reserved).toBe(0);
  });

  test("BodyBudget: a reservation that finds no room within the wait is refused with 503 and the line moves on", async () => {
    const budget = new BodyBudget(10, 20);
    const held = budget.tryReserve(10)!;
    expect(await status(budget.reserve(5))).toBe(503);
    expect(budget.reserved).toBe(10);
    held();
    expect(budget.tryReserve(5)).toBeDefined();
    expect(budget.reserved).toBe(5);
  });
});
