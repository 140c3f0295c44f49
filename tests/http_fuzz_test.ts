/**
 * A seeded HTTP fuzz of the REST server: 6,000 requests across every route — valid, mutated and garbage — sent 8
 * at a time. No response may be a 5xx other than the documented ones (503 not ready / poisoned / queue full, 504
 * timeout, 500 naming the NRT status of a hardware fault), every error body is `{"error": string}` and conforms
 * to the OpenAPI document, and no promise rejection goes unhandled.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import process from "node:process";
import { ADMIN_TOKEN, type HttpFixture, httpFixture } from "./_http.ts";
import { OipValidator } from "./_oip.ts";
import { prng as rng } from "../packages/core/_testing.ts";

const SEED = 0x5eed_0007;
const REQUESTS = 6_000;
const CONCURRENCY = 8;
const LIMIT = 256 * 1024;

interface Shot {
  method: string;
  path: string;
  body?: string | Uint8Array<ArrayBuffer>;
  headers: Record<string, string>;
}

function generator(random: () => number): () => Shot {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  const models = [
    "relu",
    "add",
    "cpu_map",
    "mixed",
    "trap",
    "nope",
    "..%2Fetc",
    "%00",
    "a".repeat(200),
    "stats",
    "relu%20",
    "ReLU",
    ".hidden",
    "%E0%A4%A",
  ];
  const datatypes = ["FP32", "FP16", "BF16", "INT32", "INT64", "UINT8", "BOOL", "BYTES", "fp32", "", "FP8_E5M2", 7];
  const values = [0, -1, 1.5, 1e300, -1e300, "x", true, null, [], {}, [1, [2]], 2 ** 53, -(2 ** 31)];
  const shapes = (): unknown =>
    pick<unknown>([[8], [16], [4], [2, 3], [-1], [0], [1.5], [2 ** 53], [2 ** 32, 2 ** 32, 2 ** 32], "8", null, [], [
      8,
      1,
    ], new Array(40).fill(1)]);
  const validInput = (name: string, n: number, shape?: unknown[]) => ({
    name,
    shape: shape ?? [n],
    datatype: "FP32",
    data: Array.from({ length: n }, () => int(-5, 5)),
  });
  const valid = (m: string): Record<string, unknown> => {
    if (m === "add") return { inputs: [validInput("a", 16), validInput("b", 16)] };
    if (m === "cpu_map") return { inputs: [validInput("x", 16)] };
    if (m === "trap") return { inputs: [validInput("x", 4)] };
    if (m === "mixed") {
      return { inputs: [{ name: "i", shape: [2, 3], datatype: "INT32", data: [[1, 2, 3], [4, 5, 6]] }] };
    }
    return { inputs: [validInput("x", 8)] };
  };
  const mutate = (req: Record<string, unknown>): unknown => {
    const inputs = req.inputs as Array<Record<string, unknown>>;
    const x = inputs[0];
    switch (int(0, 15)) {
      case 0:
        x.shape = shapes();
        break;
      case 1:
        x.datatype = pick(datatypes);
        break;
      case 2:
        (x.data as unknown[]).splice(int(0, 7), 1, pick(values));
        break;
      case 3:
        delete x[pick(["name", "shape", "datatype", "data"])];
        break;
      case 4:
        x.name = pick(["y", "", "x".repeat(1000), 1, "a", "b"]);
        break;
      case 5:
        req.outputs = Array.from({ length: int(0, 1100) }, () => ({ name: pick(["y", "out", "z", "oh"]) }));
        break;
      case 6:
        req.outputs = [{ name: "y", parameters: { binary_data: pick([true, false, "yes", 1]) } }];
        break;
      case 7:
        req.id = pick([42, "id", null, { a: 1 }]);
        break;
      case 8:
        req.parameters = pick([{ binary_data_output: true }, { binary_data_output: "no" }, [], "p"]);
        break;
      case 9:
        x.parameters = { binary_data_size: pick([32, 64, -1, 1e20, "8"]) };
        break;
      case 10:
        req.inputs = pick([null, {}, "x", [], [1, 2]]);
        break;
      case 11:
        inputs.push({ ...x });
        break;
      case 12:
        x.data = Array.from({ length: int(0, 3) }, () => x.data);
        break;
      case 13:
        return pick([[], null, 1, "s", true]);
      case 14:
        x.data = "[".repeat(int(1, 100)) + "]".repeat(int(1, 100));
        break;
      default:
        break;
    }
    return req;
  };
  const garbage = (): string => {
    switch (int(0, 5)) {
      case 0:
        return "{".repeat(int(1, 20_000));
      case 1:
        return "[".repeat(int(60, 70)) + "]".repeat(int(60, 70));
      case 2:
        return String.fromCharCode(...Array.from({ length: int(0, 300) }, () => int(0, 255)));
      case 3:
        return '{"inputs": [' + '{"name":"x"},'.repeat(int(1, 50));
      case 4:
        return " ".repeat(int(LIMIT - 2, LIMIT + 2));
      default:
        return "";
    }
  };
  return () => {
    const m = pick(models);
    const v = pick(["1", "2", "x", ""]);
    const base = random() < 0.15 ? `/v2/models/${m}/versions/${v}` : `/v2/models/${m}`;
    const route = pick([
      "infer",
      "infer",
      "infer",
      "infer",
      "infer",
      "meta",
      "ready",
      "stats",
      "allstats",
      "live",
      "sready",
      "server",
      "index",
      "load",
      "unload",
      "metrics",
      "bogus",
    ]);
    const headers: Record<string, string> = {};
    let method = "GET", path = "/", body: string | Uint8Array<ArrayBuffer> | undefined;
    switch (route) {
      case "infer": {
        method = "POST";
        path = `${base}/infer`;
        const r = random();
        if (r < 0.4) body = JSON.stringify(valid(m));
        else if (r < 0.85) body = JSON.stringify(mutate(valid(m)));
        else body = garbage();
        if (random() < 0.1) {
          const json = JSON.stringify({
            inputs: [{ name: "x", shape: [8], datatype: "FP32", parameters: { binary_data_size: 32 } }],
            parameters: { binary_data_output: random() < 0.5 },
          });
          const bytes = new TextEncoder().encode(json);
          const tail = new Uint8Array(int(0, 40)).map(() => int(0, 255));
          body = new Uint8Array([...bytes, ...tail]);
          headers["inference-header-content-length"] = String(pick([bytes.length, bytes.length, 0, -1, 1e9, "x"]));
        }
        break;
      }
      case "meta":
        path = base;
        break;
      case "ready":
        path = `${base}/ready`;
        break;
      case "stats":
        path = `${base}/stats`;
        break;
      case "allstats":
        path = "/v2/models/stats";
        break;
      case "live":
        path = "/v2/health/live";
        break;
      case "sready":
        path = "/v2/health/ready";
        break;
      case "server":
        path = pick(["/v2", "/v2/"]);
        break;
      case "index":
        method = "POST";
        path = "/v2/repository/index";
        body = pick(["", "{}", '{"ready":true}', '{"ready":1}', "[", "null"]);
        break;
      case "load":
      case "unload":
        method = "POST";
        path = `/v2/repository/models/${pick(["relu", "add", "trap", "mixed", "nope", "..%2Fetc"])}/${route}`;
        // Model control needs the admin token and a JSON body: most requests have both, some miss one.
        if (random() < 0.8) {
          headers.authorization = `Bearer ${random() < 0.9 ? ADMIN_TOKEN : "wrong-token-wrong-token"}`;
        }
        if (random() < 0.8) headers["content-type"] = "application/json";
        break;
      case "metrics":
        path = "/metrics";
        break;
      default:
        path = pick([
          "/",
          "/v1/models",
          "/v2/models",
          "/v2/models//infer",
          "/v2/repository",
          "/v2/models/relu/infer/extra",
        ]);
    }
    if (random() < 0.1) method = pick(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]);
    if (method === "GET" || method === "HEAD") body = undefined;
    if (body !== undefined && random() < 0.05) {
      headers["content-length"] = String(pick([0, 5, 1e12, -3]));
      if (random() < 0.5) headers["transfer-encoding"] = "chunked";
    }
    return { method, path, body, headers };
  };
}

describe("REST fuzz", () => {
  let fx: HttpFixture;
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);

  beforeAll(async () => {
    fx = await httpFixture({ limits: { maxBodyBytes: LIMIT } });
    process.on("unhandledRejection", onUnhandled);
  });
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    await fx.close();
  });

  test(`${REQUESTS} seeded requests across every route get only documented statuses`, async () => {
    const next = generator(rng(SEED));
    const oip = new OipValidator();
    const statuses = new Map<number, number>();
    const problems: string[] = [];
    let sent = 0;
    const worker = async () => {
      while (sent < REQUESTS) {
        sent++;
        const s = next();
        let res: Response;
        try {
          res = await fx.app.request(s.path, { method: s.method, body: s.body, headers: s.headers });
        } catch (e) {
          problems.push(`${s.method} ${s.path}: the app threw ${String(e)}`);
          continue;
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (s.method === "HEAD" || s.method === "OPTIONS" && res.status !== 405 && res.status !== 404) {
          await res.body?.cancel();
          continue;
        }
        const where = `${s.method} ${s.path.slice(0, 80)} → ${res.status}`;
        if (![200, 400, 401, 403, 404, 405, 413, 415, 500, 503, 504].includes(res.status)) {
          problems.push(`${where}: undocumented status`);
        }
        if (res.status >= 400) {
          const text = await res.clone().text();
          let body: { error?: unknown };
          try {
            body = JSON.parse(text);
          } catch {
            problems.push(`${where}: error body is not JSON: ${text.slice(0, 80)}`);
            continue;
          }
          if (typeof body.error !== "string" || Object.keys(body).length !== 1) {
            problems.push(`${where}: error body ${text.slice(0, 80)}`);
          }
          if (res.status === 500 && !/\((NRT_[A-Z_]+)\)$/.test(body.error as string)) {
            problems.push(`${where}: 500 without an NRT status: ${body.error}`);
          }
          if (res.status === 500 && !s.path.includes("/trap/")) {
            problems.push(`${where}: 500 from a model that cannot fault: ${body.error}`);
          }
        }
        for (const p of await oip.check(s.method, s.path, res)) problems.push(`${where}: ${p}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    // On failure, the runtime's log (less the expected trap faults) says what the device saw.
    const log = problems.length === 0 ? [] : fx.logger.messages().filter((m) => !m.includes("trap.neff")).slice(0, 30);
    expect({ problems: problems.slice(0, 20), log }).toEqual({ problems: [], log: [] });
    expect(sent).toBe(REQUESTS);
    // The mix reaches every documented class.
    for (const s of [200, 400, 404, 405, 413, 503]) {
      expect({ status: s, seen: (statuses.get(s) ?? 0) > 0 }).toEqual({ status: s, seen: true });
    }
    expect((await fx.app.request("/v2/health/live")).status).toBe(200);
    expect(unhandled).toEqual([]);
  }, 120_000);
});
