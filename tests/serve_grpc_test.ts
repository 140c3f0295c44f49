/**
 * `nrt serve` with gRPC beside REST (packages/cli/serve.ts): the new flags; a Triton-style repository whose versions
 * both protocols report and check; an `.onnx` model and an uploaded `.onnx` model answered alike over both; the
 * device daemon as the device (`--device unix:PATH`); and the shutdown report.
 */
import { describe, expect, test } from "bun:test";
import { parseServeArgs, startServer, UsageError } from "@nrt/cli";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { mlpModel, randomInput } from "../packages/onnx/_test_models.ts";
import { Code, failure, oipClient, rawCall } from "./_grpc_client.ts";
import { connect as h2connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { oneOpNeff } from "./_kernels.ts";
import { startDaemon, tempDir } from "./_remote.ts";

const f32 = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
const reluNeff = () => oneOpNeff("relu", "relu", [f32("x", [8])], [f32("y", [8])]);
const X8 = [1, -1, 2, -2, 3, -3, 4, -4];
const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

async function writeTree(dir: string, files: Record<string, Uint8Array | string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(dir, path, ".."), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Runs `f` with XDG_CACHE_HOME in a fresh folder (the ONNX cache), then restores it. */
async function withCache<T>(f: () => Promise<T>): Promise<T> {
  const cache = await mkdtemp(join(tmpdir(), "nrt-serve-grpc-xdg-"));
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  try {
    return await f();
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
    await rm(cache, { recursive: true, force: true });
  }
}

describe("nrt serve with gRPC", () => {
  test("parseServeArgs() reads --grpc-port, --model-name, --device, --drain-timeout and --body-timeout", () => {
    expect(
      parseServeArgs([
        "--models",
        "m",
        "--grpc-port",
        "9001",
        "--model-name",
        "relu",
        "--device",
        "unix:/run/nrt/d.sock",
        "--drain-timeout",
        "5",
        "--body-timeout",
        "120",
      ]),
    )
      .toEqual({
        models: "m",
        grpcPort: 9001,
        modelName: "relu",
        device: "unix:/run/nrt/d.sock",
        drainTimeoutSeconds: 5,
        bodyTimeoutSeconds: 120,
      });
    expect(parseServeArgs(["--grpc-port", "0", "--device", "sim"])).toEqual({ grpcPort: "off" });
    expect(() => parseServeArgs(["--grpc-port", "65536"])).toThrow(
      "--grpc-port 65536 is not an integer from 0 to 65535",
    );
    expect(() => parseServeArgs(["--drain-timeout", "-1"])).toThrow(UsageError);
    expect(() => parseServeArgs(["--body-timeout", "0"])).toThrow(UsageError);
    expect(() => parseServeArgs(["--model-name", "../etc"])).toThrow('--model-name "../etc" is not a model name');
  });

  test("startServer() refuses --arch with --device, and a device daemon that is not on a loopback address", async () => {
    await expect(startServer({ models: "/nonexistent", arch: "sunda", device: "unix:/tmp/x.sock" })).rejects.toThrow(
      "--arch and --device exclude each other",
    );
    await expect(startServer({ models: "/nonexistent", device: "10.0.0.1:7000" })).rejects.toThrow(
      "it is not on a loopback address",
    );
  });

  test.if(hasServe)(
    "a Triton-style repository with ONNX, over REST and gRPC: versions, answers, an ONNX upload, the shutdown",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-serve-grpc-"));
      const mlp = mlpModel();
      await writeTree(dir, {
        "relu/1/model.neff": reluNeff(),
        "relu/3/model.neff": reluNeff(),
        "mlp/1/model.onnx": mlp,
        "mlp/config.json": JSON.stringify({ onnx: { inputShapes: { x: [2, 16] } } }),
      });
      const lines: string[] = [];
      const server = await withCache(() =>
        startServer({
          models: dir,
          port: 0,
          grpcPort: 0,
          admin: true,
          adminTokenFile: join(dir, ".token"),
          modelControl: "explicit",
          log: (l) => lines.push(l),
        })
      );
      const client = oipClient(`127.0.0.1:${server.grpcPort}`);
      try {
        expect(lines[0]).toMatch(/^nrt: 2 of 2 model\(s\) from .* ready on the simulated cayman device/);
        expect(lines).toContain(`nrt: gRPC (inference.GRPCInferenceService) on 127.0.0.1:${server.grpcPort}`);
        expect(await client.serverReady()).toEqual({ ready: true });
        expect((await client.modelMetadata("relu")).versions).toEqual(["3"]);
        expect((await (await fetch(`${server.url}/v2/models/relu`)).json()).versions).toEqual(["3"]);
        const relu = (version: string) =>
          client.modelInfer({
            model_name: "relu",
            model_version: version,
            inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: X8 } }],
          });
        const ok = await relu("3");
        expect([ok.model_version, ok.outputs[0].contents.fp32_contents]).toEqual(["3", X8.map((v) => Math.max(0, v))]);
        const v1 = await failure(relu("1"));
        expect([v1.code, v1.details]).toEqual([
          Code.NOT_FOUND,
          'Cannot find version "1" of model "relu": it has only version 3',
        ]);
        expect((await fetch(`${server.url}/v2/models/relu/versions/1/ready`)).status).toBe(404);

        // The ONNX model answers alike over both protocols; so does the same model uploaded as model.onnx.
        const x = Array.from(randomInput(7, [2, 16]));
        const viaRest = async (m: string): Promise<number[]> => {
          const res = await fetch(`${server.url}/v2/models/${m}/infer`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ inputs: [{ name: "x", shape: [2, 16], datatype: "FP32", data: x }] }),
          });
          expect(res.status).toBe(200);
          return (await res.json()).outputs[0].data;
        };
        const viaGrpc = async (m: string): Promise<number[]> =>
          (await client.modelInfer({
            model_name: m,
            inputs: [{ name: "x", datatype: "FP32", shape: [2, 16], contents: { fp32_contents: x } }],
          }))
            .outputs[0].contents.fp32_contents;
        const restOut = await viaRest("mlp");
        expect(restOut.length).toBe(20);
        expect(await viaGrpc("mlp")).toEqual(restOut);
        const upload = await fetch(`${server.url}/v2/repository/models/mlp2/load`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${server.adminToken}` },
          body: JSON.stringify({
            parameters: {
              "file:1/model.onnx": base64(mlp),
              config: JSON.stringify({ onnx: { inputShapes: { x: [2, 16] } } }),
            },
          }),
        });
        expect(await upload.json()).toEqual({ name: "mlp2", state: "READY" });
        expect((await readdir(join(dir, "mlp2"))).sort()).toEqual(["1", "config.json"]);
        expect(await readdir(join(dir, "mlp2", "1"))).toEqual(["model.onnx"]);
        expect(await viaGrpc("mlp2")).toEqual(restOut);
      } finally {
        client.close();
        expect(await server.close()).toEqual({ unfinished: 0, refused: 0 });
        await rm(dir, { recursive: true, force: true });
      }
      const after = oipClient(`127.0.0.1:${server.grpcPort}`);
      try {
        expect((await failure(after.serverLive())).code).toBe(Code.UNAVAILABLE);
      } finally {
        after.close();
      }
    },
    120_000,
  );

  test.if(hasServe)("--device unix:PATH serves on a device daemon's simulated device, over REST and gRPC", async () => {
    const sockets = tempDir();
    const daemon = await startDaemon({ socket: join(sockets.path, "device.sock") });
    const dir = await mkdtemp(join(tmpdir(), "nrt-serve-daemon-"));
    await writeFile(join(dir, "relu.neff"), reluNeff());
    const lines: string[] = [];
    try {
      const server = await startServer({
        models: dir,
        device: daemon.address,
        port: 0,
        grpcPort: 0,
        log: (l) => lines.push(l),
      });
      const client = oipClient(`127.0.0.1:${server.grpcPort}`);
      try {
        expect(lines[0]).toBe(
          `nrt: 1 of 1 model(s) from ${dir} ready on the cayman device of the daemon at ${daemon.address} (4 logical cores)`,
        );
        const res = await fetch(`${server.url}/v2/models/relu/infer`, {
          method: "POST",
          body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: X8 }] }),
        });
        expect((await res.json()).outputs[0].data).toEqual(X8.map((v) => Math.max(0, v)));
        const rpc = await client.modelInfer({
          model_name: "relu",
          inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: X8 } }],
        });
        expect(rpc.outputs[0].contents.fp32_contents).toEqual(X8.map((v) => Math.max(0, v)));
      } finally {
        client.close();
        await server.close();
      }
    } finally {
      daemon.kill("SIGTERM");
      await daemon.exit().catch(() => daemon.kill());
      sockets.remove();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
  test.if(hasServe)("the shutdown report counts a gRPC call still running at the drain deadline", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-serve-grpc-drain-"));
    await writeTree(dir, { "relu.neff": reluNeff() });
    const server = await startServer({ models: dir, port: 0, grpcPort: 0, drainTimeoutSeconds: 2, log: () => {} });
    const session = h2connect(`http://127.0.0.1:${server.grpcPort}`);
    session.on("error", () => {});
    // A ModelInfer whose message never comes holds its slot (up to the 60 s message deadline); the ServerLive after
    // it on the same connection answers once the server has taken both.
    const stalled = rawCall(server.grpcPort!, "ModelInfer", undefined, session);
    try {
      expect(await rawCall(server.grpcPort!, "ServerLive", new Uint8Array(0), session).status).toEqual({
        code: Code.OK,
        message: "OK",
      });
      // The REST side is quiet at once; gRPC's drain closes the stalled call at the deadline and reports it.
      expect(await server.close()).toEqual({ unfinished: 1, refused: 0 });
    } finally {
      stalled.close();
      session.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
  test.if(hasServe)("--body-timeout bounds a REST body's and a gRPC message's arrival alike", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-serve-body-timeout-"));
    await writeTree(dir, { "relu.neff": reluNeff() });
    const server = await startServer({ models: dir, port: 0, grpcPort: 0, bodyTimeoutSeconds: 1, log: () => {} });
    const stalled = rawCall(server.grpcPort!, "ModelInfer");
    try {
      expect(await stalled.status).toEqual({
        code: Code.DEADLINE_EXCEEDED,
        message: "Cannot read the request: its message did not arrive within 1000 ms",
      });
      // REST: 100 bytes declared, 1 sent, then nothing.
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = netConnect({ host: "127.0.0.1", port: server.port }, () => {
          socket.write(
            "POST /v2/models/relu/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
              "Content-Length: 100\r\n\r\n{",
          );
        });
        let text = "";
        // Deno.serve keeps a connection open after its 408 (docs/security.md): the status line is the answer.
        socket.on("data", (d) => {
          text += d.toString();
          if (text.includes("\r\n")) (resolve(text), socket.destroy());
        });
        socket.on("close", () => resolve(text));
        socket.on("error", reject);
      });
      expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout");
    } finally {
      stalled.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
