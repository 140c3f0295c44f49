/**
 * `nrt serve --models DIR` with `.onnx` files beside `.neff`: each ONNX model is compiled at load (cached by content
 * hash in the private cache), its metadata reports the ONNX inputs and outputs, and its REST inference returns
 * exactly what `nrt run` prints for the NEFF `nrt compile` writes, which matches onnxruntime-web; gRPC ModelInfer
 * answers the same numbers as REST.
 */
import { describe, expect, test } from "bun:test";
import { startServer } from "@nrt/cli";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { cnnModel, mlpModel, randomInput, unsupportedOpModel } from "../packages/onnx/_test_models.ts";
import { runNrt } from "./_cli.ts";
import { oipClient } from "./_grpc_client.ts";
import { oneOpNeff } from "./_kernels.ts";
import { maxRelError, runOrt } from "./onnx_testing.ts";

const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

describe("nrt serve with ONNX models", () => {
  test.if(hasServe)(
    ".onnx is served over REST and gRPC with the ONNX signature and the outputs of nrt run",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-onnx-serve-"));
      const cache = await mkdtemp(join(tmpdir(), "nrt-onnx-xdg-"));
      const models = join(dir, "models");
      await mkdir(models);
      const mlp = mlpModel(), cnn = cnnModel(1);
      await writeFile(join(models, "mlp.onnx"), mlp);
      await writeFile(join(models, "mlp.json"), JSON.stringify({ onnx: { inputShapes: { x: [2, 16] } } }));
      await writeFile(join(models, "cnn.onnx"), cnn);
      await writeFile(join(models, "bad.onnx"), unsupportedOpModel());
      await writeFile(
        join(models, "relu.neff"),
        oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [4] }], [{
          name: "y",
          dtype: "float32",
          shape: [4],
        }]),
      );
      const xdg = process.env.XDG_CACHE_HOME;
      process.env.XDG_CACHE_HOME = cache;
      const lines: string[] = [];
      const server = await startServer({ models, port: 0, grpcPort: 0, log: (s) => lines.push(s) }).finally(() => {
        if (xdg === undefined) delete process.env.XDG_CACHE_HOME;
        else process.env.XDG_CACHE_HOME = xdg;
      });
      const grpc = oipClient(`127.0.0.1:${server.grpcPort}`);
      try {
        expect(lines[0]).toMatch(/^nrt: 3 of 4 model\(s\) from .* ready/);
        // Compiled at load, cached by content hash in the private cache folder.
        expect((await readdir(join(cache, "nrt", "onnx"))).filter((f) => f.endsWith(".neff"))).toHaveLength(2);

        const meta = await (await fetch(`${server.url}/v2/models/mlp`)).json();
        expect(meta).toEqual({
          name: "mlp",
          versions: ["1"],
          platform: "neuron",
          inputs: [{ name: "x", datatype: "FP32", shape: [2, 16] }],
          outputs: [{ name: "probs", datatype: "FP32", shape: [2, 10] }],
          instances: [{ name: "mlp_0", vnc: expect.any(Number), ready: true }],
        });
        expect((await (await fetch(`${server.url}/v2/models/cnn`)).json()).inputs).toEqual([{
          name: "x",
          datatype: "FP32",
          shape: [1, 3, 16, 16],
        }]);
        const index = await (await fetch(`${server.url}/v2/repository/index`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        })).json();
        const bad = index.find((e: { name: string }) => e.name === "bad");
        expect(bad.state).toBe("UNAVAILABLE");
        expect(bad.reason).toMatch(/^load failed: Cannot compile node "transpose_by_einsum" \(Einsum\)/);

        for (
          const [name, onnx, shape, out] of [["mlp", mlp, [2, 16], "probs"], [
            "cnn",
            cnn,
            [1, 3, 16, 16],
            "logits",
          ]] as const
        ) {
          const x = randomInput(41, shape);
          const res = await fetch(`${server.url}/v2/models/${name}/infer`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ inputs: [{ name: "x", shape, datatype: "FP32", data: Array.from(x) }] }),
          });
          expect(res.status).toBe(200);
          const rest = (await res.json()).outputs[0];
          expect([rest.name, rest.shape]).toEqual([out, name === "mlp" ? [2, 10] : [1, 10]]);
          const rpc = await grpc.modelInfer({
            model_name: name,
            inputs: [{ name: "x", datatype: "FP32", shape, contents: { fp32_contents: Array.from(x) } }],
          });
          expect([rpc.outputs[0].name, rpc.outputs[0].shape.map(Number), rpc.outputs[0].contents.fp32_contents])
            .toEqual([out, rest.shape, rest.data]);

          // nrt compile + nrt run on the same model and input print exactly the same numbers.
          const onnxFile = join(dir, `${name}.onnx`),
            neffFile = join(dir, `${name}.neff`),
            xFile = join(dir, `${name}_x.json`);
          await writeFile(onnxFile, onnx);
          await writeFile(xFile, JSON.stringify(Array.from(x)));
          expect((await runNrt(["compile", onnxFile, "-o", neffFile, "--input-shape", `x=${shape.join(",")}`])).code)
            .toBe(0);
          const run = await runNrt(["run", neffFile, "--input", `x=${xFile}`, "--json"]);
          expect(run.code).toBe(0);
          expect(rest.data).toEqual(JSON.parse(run.out).outputs[out]);
          const ref = (await runOrt(onnx, { x: { shape, data: x } }))[out];
          expect(maxRelError(Float32Array.from(rest.data as number[]), ref)).toBeLessThan(1e-4);
        }
      } finally {
        grpc.close(); // before the server's GOAWAY (denoland/deno#36788)
        await server.close();
        await rm(dir, { recursive: true, force: true });
        await rm(cache, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
