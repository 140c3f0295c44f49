/**
 * Load by upload (`POST /v2/repository/models/{m}/load` with Triton's `file:<version>/model.neff` parameter): only
 * under explicit model control with the admin token; a new model is added and stored; a served model is replaced
 * atomically while requests keep arriving (each answer is the old model's or the new one's, none fails); a bad file,
 * a failed warm-up, a bad config (a logical core that is not there included) or malformed parameters change nothing;
 * an oversized file is refused before it is decoded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { control, type HttpFixture, httpFixture, post } from "./_http.ts";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
/** Two models with one signature, x FP32 [1, 8] → y FP32 [1, 8], and different answers. */
const reluNeff = () => oneOpNeff("relu", "relu", [f32("x", [1, 8])], [f32("y", [1, 8])]);
const softmaxNeff = () => oneOpNeff("softmax", "softmax_rows", [f32("x", [1, 8])], [f32("y", [1, 8])]);
const trapNeff = () => oneOpNeff("faults", "trap", [f32("x", [1, 8])], [f32("y", [1, 8])]);
const X = [1, -1, 2, -2, 3, -3, 4, -4];
const inferReq = () => post({ inputs: [{ name: "x", shape: [1, 8], datatype: "FP32", data: [X] }] });

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** A load body carrying `bytes` as `file:<version>/<file>`, and optionally a config. */
const uploadBody = (bytes: Uint8Array, o: { version?: string; file?: string; config?: unknown } = {}) => ({
  parameters: {
    [`file:${o.version ?? "1"}/${o.file ?? "model.neff"}`]: base64(bytes),
    ...(o.config === undefined ? {} : { config: JSON.stringify(o.config) }),
  },
});

let fx: HttpFixture;
const load = (m: string, body: unknown, token?: string) =>
  fx.app.request(`/v2/repository/models/${m}/load`, control(body, token));
const outputOf = async (m: string): Promise<number[]> => {
  const res = await fx.app.request(`/v2/models/${m}/infer`, inferReq());
  expect(res.status).toBe(200);
  return (await res.json()).outputs[0].data;
};

describe("load by upload", () => {
  let reluOut: number[], softmaxOut: number[];
  beforeAll(async () => {
    fx = await httpFixture({
      files: { "m.neff": reluNeff(), "sm.neff": softmaxNeff() },
      limits: { maxUploadBytes: 256 * 1024 },
    });
    reluOut = await outputOf("m");
    softmaxOut = await outputOf("sm");
    expect(reluOut).not.toEqual(softmaxOut);
  });
  afterAll(() => fx?.close());

  test("an upload needs the admin token; without explicit model control it is 403", async () => {
    const denied = await load("fresh", uploadBody(reluNeff()), "wrong-token-0123456789");
    expect(denied.status).toBe(401);
    expect(denied.headers.get("www-authenticate")).toBe('Bearer realm="nrt"');
    const none = await httpFixture({ files: {}, modelControl: "none" });
    try {
      const off = await none.app.request("/v2/repository/models/fresh/load", control(uploadBody(reluNeff())));
      expect(off.status).toBe(403);
      expect((await off.json()).error).toMatch(/model control is off/);
      expect(none.files).toEqual({});
    } finally {
      await none.close();
    }
    expect(fx.repository.get("fresh")).toBeUndefined();
    expect(fx.files["fresh.neff"]).toBeUndefined();
  });

  test("an upload of a new model stores it, loads and warms it up, and serves it", async () => {
    const neff = reluNeff();
    const res = await load("fresh", uploadBody(neff, { config: { instances: 2 } }));
    expect(await res.json()).toEqual({ name: "fresh", state: "READY" });
    expect(fx.files["fresh.neff"]).toEqual(neff);
    expect(JSON.parse(new TextDecoder().decode(fx.files["fresh.json"]))).toEqual({ instances: 2 });
    expect(fx.repository.get("fresh")!.served!.vncs.length).toBe(2);
    expect(await outputOf("fresh")).toEqual(reluOut);
    expect((await fx.app.request("/v2/health/ready")).status).toBe(200);
    const index = await (await fx.app.request("/v2/repository/index", { method: "POST" })).json();
    expect(index.find((e: { name: string }) => e.name === "fresh")).toEqual({
      name: "fresh",
      version: "1",
      state: "READY",
      reason: "",
    });
  });

  test("an upload replaces a served model atomically: under traffic every answer is the old or the new model's", async () => {
    let uploaded = false;
    const seen: Array<{ status: number; data?: number[]; afterUpload: boolean }> = [];
    const client = async (): Promise<void> => {
      for (let k = 0; k < 200 && !(uploaded && seen.filter((s) => s.afterUpload).length >= 16); k++) {
        const afterUpload = uploaded;
        const res = await fx.app.request("/v2/models/m/infer", inferReq());
        const body = await res.json();
        seen.push({ status: res.status, data: body.outputs?.[0].data, afterUpload });
      }
    };
    const clients = Array.from({ length: 6 }, client);
    while (seen.length < 12) await new Promise((r) => setTimeout(r, 0));
    const res = await load("m", uploadBody(softmaxNeff()));
    uploaded = true;
    expect(await res.json()).toEqual({ name: "m", state: "READY" });
    await Promise.all(clients);
    expect(seen.filter((s) => s.status !== 200)).toEqual([]);
    for (const s of seen) expect([reluOut, softmaxOut]).toContainEqual(s.data);
    expect(seen.filter((s) => !s.afterUpload).some((s) => s.data!.every((v, i) => v === reluOut[i]))).toBe(true);
    // Once the upload answered, only the new model answers.
    const after = seen.filter((s) => s.afterUpload);
    expect(after.length).toBeGreaterThan(0);
    for (const s of after) expect(s.data).toEqual(softmaxOut);
    expect(fx.repository.get("m")!.served!.inflight).toBe(0);
  });

  test("a bad file, a failed warm-up or a bad config is refused and the served model keeps serving", async () => {
    const stored = fx.files["m.neff"];
    const garbage = await load("m", uploadBody(new TextEncoder().encode("not a NEFF at all")));
    expect(garbage.status).toBe(400);
    expect((await garbage.json()).error).toMatch(/\(NRT_INVALID\)$/);
    const warm = await load("m", uploadBody(trapNeff()));
    expect(warm.status).toBe(500);
    expect((await warm.json()).error).toMatch(/^Warm-up of model "m" on logical core \d+ failed/);
    const config = await load("m", uploadBody(reluNeff(), { config: { instances: 0 } }));
    expect([config.status, (await config.json()).error])
      .toEqual([
        400,
        'Cannot load model "m": the config parameter "instances" must be an integer from 1 to 64 or "per-core"',
      ]);
    const n = fx.runtime.visibleVncCount;
    const cores = `from 0 to ${n - 1}: the runtime has ${n} visible logical cores`;
    const far = await load("m", uploadBody(reluNeff(), { config: { vnc: 99 } }));
    expect([far.status, (await far.json()).error]).toEqual([
      400,
      `Cannot load model "m": the config parameter "vnc" must be ${cores}`,
    ]);
    expect(fx.files["m.neff"]).toBe(stored);
    expect(await outputOf("m")).toEqual(softmaxOut);
    expect(fx.repository.get("m")!.state).toBe("READY");
    // A bad file for a new name leaves no model behind.
    expect((await load("ghost", uploadBody(new Uint8Array(64)))).status).toBe(400);
    expect(fx.repository.get("ghost")).toBeUndefined();
    expect(fx.files["ghost.neff"]).toBeUndefined();
    expect((await fx.app.request("/v2/health/ready")).status).toBe(200);
  });

  test("an oversized file is refused with 413 before it is decoded, whether the body or the base64 is too long", async () => {
    const big = new Uint8Array(256 * 1024 + 1);
    const text = await load("big", uploadBody(big));
    expect(text.status).toBe(413);
    expect((await text.json()).error).toBe(
      'Cannot load model "big": the file of "file:1/model.neff" is over the 262144-byte limit',
    );
    const body = await load("big", { parameters: { "file:1/model.neff": "A".repeat(512 * 1024) } });
    expect(body.status).toBe(413);
    expect((await body.json()).error).toMatch(
      /^Cannot read the request body: (\d+ bytes|it) is over the \d+-byte limit$/,
    );
    expect(fx.repository.get("big")).toBeUndefined();
  });

  test("malformed upload parameters are 400 naming the problem, and nothing is stored", async () => {
    const neff = base64(reluNeff());
    const cases: Array<[unknown, string]> = [
      [{ parameters: { "file:1/model.neff": neff, "file:2/model.neff": neff } }, "2 file parameters"],
      [{ parameters: { "file:0/model.neff": neff } }, 'parameter "file:0/model.neff" is not "file:<version>/<file>"'],
      [{ parameters: { "file:1/../../etc/passwd": neff } }, "names a file nrt does not serve"],
      [{ parameters: { "file:../1/model.neff": neff } }, 'is not "file:<version>/<file>"'],
      [{ parameters: { "file:1/model.plan": neff } }, "names a file nrt does not serve"],
      [{ parameters: { "file:1/model.neff": "***" } }, "is not base64"],
      [{ parameters: { "file:1/model.neff": 42 } }, "must be a base64 string"],
      [{ parameters: { "file:1/model.neff": neff, lifetime: "forever" } }, 'unknown parameter "lifetime"'],
      [{ parameters: { config: "{}" } }, 'a "config" parameter needs a "file:<version>/model.neff"'],
      [{ parameters: { "file:1/model.neff": neff, config: "{" } }, "the config parameter is not JSON"],
      [{ parameters: "file" }, '"parameters" must be an object'],
    ];
    for (const [body, message] of cases) {
      const res = await load("odd", body);
      expect({ body, status: res.status, error: (await res.json()).error })
        .toEqual({ body, status: 400, error: expect.stringContaining(message) });
    }
    expect(fx.repository.get("odd")).toBeUndefined();
    expect(Object.keys(fx.files).sort()).toEqual(["fresh.json", "fresh.neff", "m.neff", "sm.neff"]);
    // An ONNX upload needs a repository that compiles (nrt serve's does; tests/serve_grpc_test.ts).
    const onnx = await load("odd", uploadBody(new Uint8Array(8), { file: "model.onnx" }));
    expect([onnx.status, (await onnx.json()).error]).toEqual([
      400,
      'Cannot load model "odd": this server does not compile ONNX models',
    ]);
    const version = await load("odd", uploadBody(reluNeff(), { version: "2" }));
    expect([version.status, (await version.json()).error])
      .toEqual([400, 'Cannot store version 2 of model "odd": this repository holds version 1 only']);
    expect(fx.repository.get("odd")).toBeUndefined();
  });
});
