/**
 * What the HTTP benches share (ours): their `--name value` arguments, a loopback server on a free port on Bun or
 * Deno, and the limit they measure against, a bare Hono route that parses the request's JSON and answers a fixed JSON
 * (nothing of ours).
 *
 * @module
 */
import { Hono } from "hono";
import process from "node:process";
import type { BareDevice } from "./_bare_device.ts";

/** A request handler. */
export type Fetch = (req: Request) => Response | Promise<Response>;

/** A server listening on a loopback port. */
export interface Server {
  readonly port: number;
  stop(): Promise<void>;
}

const g = globalThis as unknown as {
  Bun?: {
    serve(o: { hostname: string; port: number; fetch: Fetch }): { port: number; stop(force?: boolean): Promise<void> };
  };
  Deno?: {
    serve(
      o: { hostname: string; port: number; onListen(a: { port: number }): void },
      f: Fetch,
    ): { shutdown(): Promise<void> };
  };
};

/** The number after `--name` on the command line, or `fallback`. */
export function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/** Serves `fetch` on 127.0.0.1, on a free port. */
export function serve(fetch: Fetch): Promise<Server> {
  if (g.Bun !== undefined) {
    const s = g.Bun.serve({ hostname: "127.0.0.1", port: 0, fetch });
    return Promise.resolve({ port: s.port, stop: () => s.stop(true) });
  }
  const deno = g.Deno!;
  return new Promise((resolve) => {
    const s = deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen: (a) => resolve({ port: a.port, stop: () => s.shutdown() }),
    }, fetch);
  });
}

/** The limit: `POST /v2/models/relu/infer` parsing the request's JSON and answering `answer` (400 without inputs). */
export function bareJsonRoute(answer: unknown): Hono {
  const app = new Hono();
  app.post("/v2/models/relu/infer", async (c) => {
    const req = await c.req.json();
    if (!Array.isArray(req.inputs)) return c.json({ error: "no inputs" }, 400);
    return c.json(answer as Record<string, unknown>);
  });
  return app;
}

/**
 * The limit for a device off the HTTP thread: the bare route with relu computed by a bare Worker over one
 * SharedArrayBuffer (`_bare_device.ts`: a store, a notify when it sleeps, an `Atomics.waitAsync` back), answering
 * `answer` with the computed data (nothing of ours).
 */
export function bareDeviceRoute(answer: { outputs: Array<Record<string, unknown>> }, device: BareDevice): Hono {
  const app = new Hono();
  app.post("/v2/models/relu/infer", async (c) => {
    const req = await c.req.json();
    if (!Array.isArray(req.inputs)) return c.json({ error: "no inputs" }, 400);
    const y = await device.relu(req.inputs[0].data);
    return c.json({ ...answer, outputs: [{ ...answer.outputs[0], data: y }] });
  });
  return app;
}
