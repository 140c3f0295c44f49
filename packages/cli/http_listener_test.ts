import { describe, expect, test } from "bun:test";
import { VirtualClock } from "@nrt/core";
import { DISCARD_MS, DrainGate } from "./http_listener.ts";

/** Lets the settled promises' callbacks run (the virtual clock's sleeps settle on `advance`). */
const turn = () => new Promise<void>((r) => setTimeout(r, 0));

describe("DrainGate", () => {
  test("quiet() settles only once no request has reached the gate for the spell, refused ones included", async () => {
    const clock = new VirtualClock();
    let release!: () => void;
    const gate = new DrainGate(
      () => new Promise<Response>((r) => (release = () => r(new Response("ok")))),
      clock,
    );
    const running = gate.fetch(new Request("http://x/"));
    gate.close();
    let settled = false;
    const quiet = gate.quiet(100).then(() => (settled = true));
    await turn();
    expect(settled).toBe(false); // a request is inside the handler

    await clock.advance(60);
    release();
    const answer = await running;
    expect(answer.headers.get("connection")).toBe("close"); // answered during the drain
    await turn();
    expect(settled).toBe(false); // idle, but the last request arrived 60 ms ago

    // A request sent on a kept-alive connection before the drain arrives now: it is refused, and the spell restarts.
    const late = await gate.fetch(new Request("http://x/", { method: "POST", body: "{}" }));
    expect(late.status).toBe(503);
    expect(late.headers.get("connection")).toBe("close");
    await clock.advance(60);
    await turn();
    expect(settled).toBe(false); // 60 ms since the refused one
    await clock.advance(40);
    await turn();
    await quiet;
    expect(settled).toBe(true);
    expect(gate.active).toBe(0);
  });

  test("quiet() gives up after its longest wait when refused requests keep arriving", async () => {
    const clock = new VirtualClock();
    const gate = new DrainGate(() => new Response("ok"), clock);
    gate.close();
    let settled = false;
    const quiet = gate.quiet(100, 1_000).then(() => (settled = true));
    for (let t = 0; t < 950; t += 50) {
      expect((await gate.fetch(new Request("http://x/"))).status).toBe(503);
      await clock.advance(50);
      await turn();
      expect(settled).toBe(false); // never 100 ms without a request
    }
    await clock.advance(50); // 1,000 ms since the gate went idle
    await turn();
    await quiet;
    expect(settled).toBe(true);
    expect(clock.pendingSleepers).toBe(0);
  });

  test("quiet() settles at once on a gate that saw no request for the spell", async () => {
    const clock = new VirtualClock(1_000);
    const gate = new DrainGate(() => new Response("ok"), clock);
    gate.close();
    let settled = false;
    const quiet = gate.quiet(100).then(() => (settled = true));
    await turn();
    expect(settled).toBe(true);
    await quiet;
    expect(clock.pendingSleepers).toBe(0);
  });
  test("a refused request whose body stalls gets its 503 after the discard time, its body cancelled", async () => {
    const clock = new VirtualClock();
    const gate = new DrainGate(() => new Response("ok"), clock);
    gate.close();
    let cancelled: unknown = "not cancelled";
    const body = new ReadableStream<Uint8Array>({
      start: (c) => c.enqueue(new Uint8Array(100)), // a first chunk, then nothing: a client that stalls
      cancel: (reason) => void (cancelled = reason),
    });
    let status = 0;
    const answer = Promise.resolve(
      gate.fetch(new Request("http://x/", { method: "POST", body, duplex: "half" } as RequestInit)),
    )
      .then((r) => (status = r.status));
    await turn();
    await clock.advance(DISCARD_MS - 1);
    await turn();
    expect(status).toBe(0); // still reading
    await clock.advance(1);
    await answer;
    expect(status).toBe(503);
    expect(cancelled).toBeUndefined(); // cancel(reason) ran, with no reason
    expect(clock.pendingSleepers).toBe(0);
  });

  test("a refused request's body read to its end holds no timer", async () => {
    const clock = new VirtualClock();
    const gate = new DrainGate(() => new Response("ok"), clock);
    gate.close();
    const res = await gate.fetch(new Request("http://x/", { method: "POST", body: "x".repeat(10_000) }));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "Cannot serve the request: the server is shutting down" });
    expect(clock.pendingSleepers).toBe(0);
  });
});
