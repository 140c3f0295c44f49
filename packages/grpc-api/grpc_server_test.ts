/**
 * The gRPC server against what a hostile or careless client sends, through the independent client of the tests
 * (tests/_grpc_client.ts) and a real server on a loopback port: each case here once crashed, hung or misanswered a
 * call.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createGrpcInferenceServer, type GrpcInferenceServer } from "./mod.ts";
import { Code, failure, type OipClient, oipClient } from "../../tests/_grpc_client.ts";
import { type HttpFixture, httpFixture, testModels } from "../../tests/_http.ts";

let fx: HttpFixture;
let server: GrpcInferenceServer;
let client: OipClient;

const reluIn = [1, -1, 2, -2, 3, -3, 4, -4];

describe("gRPC server against hostile requests", () => {
  beforeAll(async () => {
    fx = await httpFixture({ files: testModels() });
    server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository, metrics: fx.metrics });
    const { port } = await server.listen("127.0.0.1", 0);
    client = oipClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    client.close();
    await server.close();
    await fx.close();
  });

  test("a name cut inside a surrogate pair in the message is answered INVALID_ARGUMENT, not left hanging", async () => {
    // Messages quote a name's first 128 UTF-16 units (a datatype's first 32): here the cut falls inside the emoji,
    // leaving half a surrogate pair, which grpc-js could not percent-encode into grpc-message. The call hung, and the
    // error escaped as an unhandled rejection, which ends a Deno process.
    const cut = (n: number) => "a".repeat(n - 1) + "\u{1F600}";
    const shown = (n: number) => "a".repeat(n - 1) + "\uFFFD";
    const x = { name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: reluIn } };
    const cases: Array<[string, Record<string, unknown>, string]> = [
      [
        "input name",
        { model_name: "relu", inputs: [{ ...x, name: cut(128) }] },
        `Cannot read input "${shown(128)}": the model has no such input; its inputs are x`,
      ],
      [
        "datatype",
        { model_name: "relu", inputs: [{ ...x, datatype: cut(32) }] },
        `Cannot read input "x": datatype "${shown(32)}" is not supported`,
      ],
      [
        "requested output",
        { model_name: "relu", inputs: [x], outputs: [{ name: cut(128) }] },
        `Cannot read requested output "${shown(128)}": the model has no such output; its outputs are y`,
      ],
    ];
    for (const [what, req, details] of cases) {
      const e = await failure(client.modelInfer(req));
      expect({ what, code: e.code, details: e.details }).toEqual({ what, code: Code.INVALID_ARGUMENT, details });
    }
    expect(await client.serverLive()).toEqual({ live: true });
    expect(server.activeCalls).toBe(0);
  });
});
