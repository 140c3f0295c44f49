/**
 * Tensors carry their owner (runtime and logical core): executing with another runtime's tensor, a freed tensor or a
 * DEVICE tensor of another logical core is `NRT_INVALID` naming the tensor, and no device memory is touched. Without
 * the check a kernel wrote this device at a foreign tensor's address (docs/security.md, finding 2).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { MemoryLogger, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "../_kernels.ts";

const sim = new DeviceSimPortal();
afterAll(() => sim.close());
const N = 16;
const f32 = (name: string) => ({ name, dtype: "float32", shape: [N] });
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a"), f32("b")], [f32("out")]);
const bytes = (v: number) => new Uint8Array(new Float32Array(N).fill(v).buffer);

async function runtimeOn(cores: number[]): Promise<Runtime> {
  // Several runtimes share the one simulator here: none of them owns it.
  return await Runtime.init({
    portal: sim,
    archPacks: [cayman],
    ownsPortal: false,
    logger: new MemoryLogger(),
    visibleCores: cores,
    virtualCoreSize: 1,
  });
}

async function rejection(p: Promise<unknown>): Promise<NrtError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(NrtError);
    return e as NrtError;
  }
  throw new Error("expected the execution to be refused");
}

describe("Runtime.execute() tensor ownership", () => {
  test("Runtime.execute() refuses another runtime's device tensor and leaves that runtime's memory alone", async () => {
    const rt1 = await runtimeOn([0, 1]);
    const rt2 = await runtimeOn([2, 3]);
    try {
      const model = await rt1.load(ADD, 0);
      const ins = new TensorSet(), outs = new TensorSet();
      for (const n of ["a", "b"]) {
        const t = await rt1.allocateTensor({ size: N * 4, name: n });
        await t.write(bytes(2.5));
        ins.add(n, t);
      }
      // The victim: a device tensor of the other runtime, holding 42.
      const victim = await rt2.allocateTensor({ size: N * 4, name: "victim" });
      await victim.write(bytes(42));
      outs.add("out", victim);
      const e = await rejection(model.execute(ins, outs));
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toBe(
        'Cannot execute model "vector_add.neff": tensor "victim" bound to "out" was not allocated by this runtime',
      );
      expect(new Float32Array((await victim.read()).buffer)).toEqual(new Float32Array(N).fill(42));
      // With its own output the same request runs.
      const out = await rt1.allocateTensor({ size: N * 4, name: "out" });
      outs.add("out", out);
      await model.execute(ins, outs);
      expect(new Float32Array((await out.read()).buffer)).toEqual(new Float32Array(N).fill(5));
    } finally {
      await rt1.close();
      await rt2.close();
    }
  });

  test("Runtime.execute() refuses a freed tensor and a device tensor of another logical core, naming the tensor", async () => {
    const rt = await runtimeOn([0, 1]);
    try {
      const model = await rt.load(ADD, 0);
      const ins = new TensorSet(), outs = new TensorSet();
      for (const n of ["a", "b"]) ins.add(n, await rt.allocateTensor({ location: "host", size: N * 4, name: n }));
      const freed = await rt.allocateTensor({ size: N * 4, name: "gone" });
      await freed.free();
      outs.add("out", freed);
      let e = await rejection(model.execute(ins, outs));
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toBe('Cannot execute model "vector_add.neff": tensor "gone" bound to "out" was freed');
      const elsewhere = await rt.allocateTensor({ vnc: 1, size: N * 4, name: "core1" });
      outs.add("out", elsewhere);
      e = await rejection(model.execute(ins, outs));
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toBe(
        'Cannot execute model "vector_add.neff": tensor "core1" bound to "out" is in the device memory of logical core 1; ' +
          "the model runs on logical core 0",
      );
      // A HOST tensor allocated for another logical core is host memory: it is staged and works.
      const host = await rt.allocateTensor({ location: "host", vnc: 1, size: N * 4, name: "host1" });
      outs.add("out", host);
      await model.execute(ins, outs);
    } finally {
      await rt.close();
    }
  });
});

describe("Runtime.allocateTensor() failures", () => {
  test("Runtime.allocateTensor() rejects (never throws synchronously) for a logical core that is not visible", async () => {
    const rt = await runtimeOn([0]);
    try {
      let thrown: unknown;
      let p: Promise<unknown> | undefined;
      try {
        p = rt.allocateTensor({ location: "host", vnc: 7, size: 16, name: "t" });
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeUndefined();
      const e = await rejection(p!);
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toBe('Cannot allocate tensor "t": logical core 7 is not visible');
    } finally {
      await rt.close();
    }
  });

  test("Runtime.allocateTensor() maps a host allocation the engine refuses to NRT_FAIL_HOST_MEM_ALLOC", async () => {
    const rt = await runtimeOn([0]);
    try {
      const e = await rejection(rt.allocateTensor({ location: "host", size: 64 * 2 ** 30, name: "huge" }));
      expect(e.status).toBe(NrtStatus.NRT_FAIL_HOST_MEM_ALLOC);
      expect(e.message).toBe('Cannot allocate tensor "huge": 68719476736 bytes of host memory are not available');
    } finally {
      await rt.close();
    }
  });
});
