/**
 * A served model's tensors are bounded by the server's limit (`ModelRepositoryOptions.maxTensorBytes`, ours; `nrt
 * serve` passes its body limit): an 11 KB NEFF can declare a 2 GiB output, which the warm-up would fill and every
 * request would read back whole. Such a model is refused with 400 before any tensor is allocated or run.
 */
import { describe, expect, test } from "bun:test";
import { MemoryLogger, Runtime } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { DEFAULT_MAX_TENSOR_BYTES, filesFromMap, HttpError, ModelRepository } from "@nrt/http-api";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

describe("served model tensor limit", () => {
  test("a model with a tensor over maxTensorBytes is refused with 400 naming it; the device keeps nothing", async () => {
    expect(DEFAULT_MAX_TENSOR_BYTES).toBe(64 * 1024 * 1024);
    const container = createNrtContainer();
    const rt = await Runtime.init({ ...nrtPlugins(container), logger: new MemoryLogger() });
    try {
      const before = await rt.deviceMemory();
      const repo = new ModelRepository({
        runtime: rt,
        files: filesFromMap({
          "relu.neff": oneOpNeff("relu", "relu", [f32("x", 8)], [f32("y", 8)]), // 32 bytes each way
          "wide.neff": oneOpNeff("relu", "relu", [f32("x", 8)], [f32("y", 32)]), // a 128-byte output
        }),
        maxTensorBytes: 64,
      });
      await repo.scan();
      await repo.load("relu");
      expect(repo.lookup("relu").state).toBe("READY");
      const refused = await repo.load("wide").then(() => undefined, (e: unknown) => e);
      expect(refused).toBeInstanceOf(HttpError);
      expect([(refused as HttpError).status, (refused as HttpError).message]).toEqual([
        400,
        'Cannot load model "wide": output "y" is 128 bytes, over the server\'s 64-byte tensor limit (the body limit, --max-body)',
      ]);
      expect(repo.lookup("wide").state).not.toBe("READY");
      await repo.close();
      expect(await rt.deviceMemory()).toEqual(before);
    } finally {
      await rt.close();
      await container.resolve(PortalToken).close();
    }
  });
});
