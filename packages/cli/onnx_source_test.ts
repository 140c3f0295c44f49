import { describe, expect, test } from "bun:test";
import { NrtError, NrtStatus, readNeff } from "@nrt/core";
import { filesFromMap, HttpError } from "@nrt/http-api";
import { chmod, mkdtemp, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onnxFiles } from "./onnx_source.ts";
import { cnnModel, mlpModel, unsupportedOpModel } from "../onnx/_test_models.ts";

const enc = new TextEncoder();
const json = (v: unknown) => enc.encode(JSON.stringify(v));

describe("onnxFiles()", () => {
  test("lists x.onnx as x.neff and reads it as the NEFF it compiles to, with the config's input shapes", async () => {
    const files = onnxFiles(
      filesFromMap({
        "mlp.onnx": mlpModel(),
        "mlp.json": json({ instances: 2, onnx: { inputShapes: { x: [3, 16] } } }),
      }),
      { target: "sunda", log: () => {} },
    );
    expect((await files.list()).sort()).toEqual(["mlp.json", "mlp.neff", "mlp.onnx"]);
    const neff = readNeff((await files.read("mlp.neff"))!);
    expect([neff.header.name, neff.target, neff.inputs[0].shape]).toEqual(["mlp.neff", "sunda", [3, 16]]);
    // The repository sees the config without the onnx key, which it would refuse.
    expect(JSON.parse(new TextDecoder().decode((await files.read("mlp.json"))!))).toEqual({ instances: 2 });
    expect(await files.read("other.neff")).toBeUndefined();
  });

  test("a real x.neff beside x.onnx wins, and its config is passed through untouched", async () => {
    const real = new Uint8Array([1, 2, 3]);
    const config = json({ onnx: { inputShapes: {} } });
    const files = onnxFiles(filesFromMap({ "m.onnx": mlpModel(), "m.neff": real, "m.json": config }), {
      target: "cayman",
      log: () => {},
    });
    expect((await files.list()).sort()).toEqual(["m.json", "m.neff", "m.onnx"]);
    expect(await files.read("m.neff")).toBe(real);
    expect(await files.read("m.json")).toBe(config);
  });

  test(
    "compiled NEFFs are cached by content hash in a private folder and reused; a changed model compiles again",
    async () => {
      const cache = await mkdtemp(join(tmpdir(), "nrt-onnx-cache-"));
      const map: Record<string, Uint8Array> = {
        "cnn.onnx": cnnModel(),
        "cnn.json": json({ onnx: { inputShapes: { x: [2, 3, 16, 16] } } }),
      };
      const logged: string[] = [];
      const files = onnxFiles(filesFromMap(map), { target: "cayman", cache, log: (m) => logged.push(m) });
      const [a, b] = await Promise.all([files.read("cnn.neff"), files.read("cnn.neff")]); // one compile for both
      expect(b).toEqual(a);
      expect(logged.filter((l) => l.startsWith("Compiled cnn.onnx")).length).toBe(1);
      const cached = await readdir(join(cache, "onnx"));
      expect(cached).toHaveLength(1);
      expect(cached[0]).toMatch(/^[0-9a-f]{64}\.neff$/);
      expect((await stat(join(cache, "onnx"))).mode & 0o777).toBe(0o700);
      expect((await stat(join(cache, "onnx", cached[0]))).mode & 0o777).toBe(0o600);
      // A fresh source (a server restart) reads the cached NEFF instead of compiling.
      const again = onnxFiles(filesFromMap(map), { target: "cayman", cache, log: (m) => logged.push(m) });
      expect(await again.read("cnn.neff")).toEqual(a);
      expect(logged.filter((l) => l.startsWith("Compiled cnn.onnx")).length).toBe(1);
      // What is served comes from the cache: a marked cache file is what the next read returns.
      await writeFile(join(cache, "onnx", cached[0]), new Uint8Array([7]));
      expect(await again.read("cnn.neff")).toEqual(new Uint8Array([7]));
      // Another model, shape or target is another key.
      map["cnn.onnx"] = cnnModel("N", 99);
      await again.read("cnn.neff");
      map["cnn.json"] = json({ onnx: { inputShapes: { x: [1, 3, 16, 16] } } });
      await again.read("cnn.neff");
      await onnxFiles(filesFromMap(map), { target: "mariana", cache, log: () => {} }).read("cnn.neff");
      expect(await readdir(join(cache, "onnx"))).toHaveLength(4);
      expect(new Uint8Array(await readFile(join(cache, "onnx", cached[0])))).toEqual(new Uint8Array([7]));
    },
    60_000,
  );

  test("a cache folder others may write to is refused, never read from", async () => {
    const cache = await mkdtemp(join(tmpdir(), "nrt-onnx-cache-"));
    await chmod(cache, 0o777);
    const files = onnxFiles(filesFromMap({ "m.onnx": mlpModel(1) }), { target: "cayman", cache, log: () => {} });
    await expect(files.read("m.neff")).rejects.toThrow(/others may write to it \(mode 777\)/);
  });

  test("a model the compiler refuses reads as NRT_INVALID with the compiler's message; a bad onnx key as a 400", async () => {
    const files = onnxFiles(
      filesFromMap({
        "bad.onnx": unsupportedOpModel(),
        "dyn.onnx": mlpModel(),
        "cfg.onnx": mlpModel(),
        "cfg.json": json({ onnx: { shapes: {} } }),
      }),
      { target: "cayman", log: () => {} },
    );
    const err = await files.read("bad.neff").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NrtError);
    expect((err as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    expect((err as NrtError).message).toMatch(
      /^Cannot compile node "transpose_by_einsum" \(Einsum\): op Einsum is not supported/,
    );
    await expect(files.read("dyn.neff")).rejects.toThrow(
      'input "x" has a dynamic dim 0 ("N"): give its size with --input-shape',
    );
    const cfg = await files.read("cfg.json").catch((e: unknown) => e);
    expect(cfg).toBeInstanceOf(HttpError);
    expect((cfg as HttpError).status).toBe(400);
    expect((cfg as HttpError).message).toBe('Cannot load model "cfg": cfg.json "onnx" has an unknown key "shapes"');
  });
});
