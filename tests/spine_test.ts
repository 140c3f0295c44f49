import { describe, expect, test } from "bun:test";
import { MemoryLogger, Runtime, TensorSet } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { oneOpNeff } from "./_kernels.ts";

const f32 = (n: number) => ({ dtype: "float32", shape: [n] });

async function withRuntime(fn: (rt: Runtime) => Promise<void>): Promise<void> {
  const container = createNrtContainer();
  const rt = await Runtime.init({ ...nrtPlugins(container), visibleCores: [0, 1], logger: new MemoryLogger() });
  try {
    await fn(rt);
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close(); // terminates the simulated device's Q7 Workers
  }
}

describe("spine", () => {
  test("Runtime runs vector_add on the simulated Cayman device", async () => {
    await withRuntime(async (rt) => {
      const n = 1000;
      const model = await rt.load(
        oneOpNeff("vector_add", "vector_add", [{ name: "a", ...f32(n) }, { name: "b", ...f32(n) }], [{
          name: "out",
          ...f32(n),
        }]),
      );
      const a = Float32Array.from({ length: n }, (_, i) => i * 0.5),
        b = Float32Array.from({ length: n }, (_, i) => 1000 - i);
      const ins = new TensorSet(), outs = new TensorSet();
      const ta = await rt.allocateTensor({ size: n * 4, name: "a" });
      const tb = await rt.allocateTensor({ size: n * 4, name: "b" });
      const to = await rt.allocateTensor({ size: n * 4, name: "out" });
      await ta.write(new Uint8Array(a.buffer));
      await tb.write(new Uint8Array(b.buffer));
      ins.add("a", ta);
      ins.add("b", tb);
      outs.add("out", to);
      await model.execute(ins, outs);
      const got = new Float32Array((await to.read()).slice().buffer);
      for (let i = 0; i < n; i++) expect(got[i]).toBe(Math.fround(a[i] + b[i]));
      await model.unload();
      for (const t of [ta, tb, to]) await t.free();
    });
  }, 30_000);
});
