import { beforeEach, describe, expect, test } from "bun:test";
import { NrtError, NrtStatus, readNeff } from "@nrt/core";
import { filesFromMap } from "@nrt/http-api";
import { Buffer } from "node:buffer";
import { readFile } from "node:fs/promises";
import { compileTestHooks, liveCompileWorkers, type OnnxCompileJob, OnnxCompiler } from "./onnx_compiler.ts";
import { onnxFiles } from "./onnx_source.ts";
import { mlpModel, unsupportedOpModel } from "../onnx/_test_models.ts";
import { OP_LIBRARY_WASM_DIR } from "@nrt/ops";

const enc = new TextEncoder();
const json = (v: unknown) => enc.encode(JSON.stringify(v));
const LIBRARIES = ["activation", "conv", "elementwise", "linalg", "norm", "reduce", "shape"];
const libraries = async () =>
  new Map(
    await Promise.all(
      LIBRARIES.map(async (n) =>
        [n, new Uint8Array(await readFile(new URL(`${n}.wasm`, OP_LIBRARY_WASM_DIR)))] as const
      ),
    ),
  );
const job = async (file = "m.onnx", onnx = mlpModel(2)): Promise<OnnxCompileJob> => ({
  file,
  onnx,
  target: "cayman",
  inputShapes: {},
  name: "m.neff",
  libraries: await libraries(),
});
const tick = () => new Promise((r) => setTimeout(r, 1));

/**
 * Runs `f` with every compile Worker held (compile_worker.ts): it sets word 1 once the compiler is loaded, then blocks
 * its thread until word 0 is set.
 */
async function held<T>(f: (hold: Int32Array) => Promise<T>): Promise<T> {
  const hold = new Int32Array(new SharedArrayBuffer(8));
  compileTestHooks.hold = hold;
  try {
    return await f(hold);
  } finally {
    delete compileTestHooks.hold;
    Atomics.store(hold, 0, 1);
    Atomics.notify(hold, 0);
  }
}

/** Waits (on this thread's event loop) until a held Worker is in the compiler, counting the turns it took. */
async function entered(hold: Int32Array): Promise<number> {
  let turns = 0;
  while (Atomics.load(hold, 1) === 0) {
    await tick();
    turns++;
  }
  Atomics.store(hold, 1, 0);
  return turns;
}

function release(hold: Int32Array): void {
  Atomics.store(hold, 0, 1);
  Atomics.notify(hold, 0);
}

const statusOf = (e: unknown) => (e instanceof NrtError ? [e.status, e.message] : e);

describe("OnnxCompiler", () => {
  // The Workers of other suites' compiles (their compile ended, their exit is under way) are gone first.
  beforeEach(async () => {
    while (liveCompileWorkers() > 0) await new Promise((r) => setTimeout(r, 1));
  });

  test("compiles in a Worker: this thread's timers keep firing while the compiler blocks its own thread", async () => {
    const compiler = new OnnxCompiler();
    await held(async (hold) => {
      const files = onnxFiles(
        filesFromMap({ "mlp.onnx": mlpModel(), "mlp.json": json({ onnx: { inputShapes: { x: [3, 16] } } }) }),
        { target: "sunda", compiler, log: () => {} },
      );
      const events: string[] = [];
      const neff = files.read("mlp.neff").then((b) => {
        events.push("compiled");
        return b;
      });
      await entered(hold);
      expect(liveCompileWorkers()).toBe(1);
      // The Worker's thread is blocked inside the compile; this one goes on.
      for (let i = 0; i < 5; i++) {
        await tick();
        events.push("tick");
      }
      events.push("released");
      release(hold);
      const bytes = (await neff)!;
      expect(events).toEqual(["tick", "tick", "tick", "tick", "tick", "released", "compiled"]);
      const read = readNeff(bytes);
      expect([read.header.name, read.target, read.inputs[0].shape]).toEqual(["mlp.neff", "sunda", [3, 16]]);
    });
    await compiler.idle();
    expect(liveCompileWorkers()).toBe(0);
  });

  test("one compile at a time: the next Worker starts once the previous one has exited", async () => {
    const compiler = new OnnxCompiler();
    await held(async (hold) => {
      const order: string[] = [];
      const a = compiler.compile(await job("a.onnx")).then(() => order.push("a"));
      const b = compiler.compile(await job("b.onnx")).then(() => order.push("b"));
      await entered(hold);
      for (let i = 0; i < 5; i++) await tick();
      expect(liveCompileWorkers()).toBe(1); // b waits for a
      release(hold);
      await Promise.all([a, b]);
      expect(order).toEqual(["a", "b"]);
    });
    await compiler.idle();
    expect(liveCompileWorkers()).toBe(0);
  });

  test("the caller's ONNX bytes stay usable: a view into a larger buffer, or a Buffer, is copied, never detached", async () => {
    const model = mlpModel(2);
    const big = new Uint8Array(model.byteLength + 64);
    big.set(model, 32);
    const view = big.subarray(32, 32 + model.byteLength);
    const buffer = Buffer.from(model); // a Buffer, whose slice() is a view
    const compiler = new OnnxCompiler();
    for (const onnx of [view, buffer]) {
      const { neff, calls } = await compiler.compile({ ...await job(), onnx });
      expect(onnx.byteLength).toBe(model.byteLength);
      expect(new Uint8Array(onnx)).toEqual(model);
      expect(calls).toBeGreaterThan(0);
      expect(readNeff(neff).header.name).toBe("m.neff");
    }
    expect(big.byteLength).toBe(model.byteLength + 64);
    await compiler.idle();
  });

  test("a model the compiler refuses: NRT_INVALID with the compiler's message", async () => {
    const compiler = new OnnxCompiler();
    const refused = await compiler.compile(await job("bad.onnx", unsupportedOpModel())).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NrtError);
    expect((refused as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    expect((refused as NrtError).message).toMatch(
      /^Cannot compile node "transpose_by_einsum" \(Einsum\): op Einsum is not supported/,
    );
    await compiler.idle();
    expect(liveCompileWorkers()).toBe(0);
  });

  test("another error, a Worker's error event or its exit: NRT_FAILURE saying so, and the Worker is gone", async () => {
    const compiler = new OnnxCompiler();
    const outcomes: unknown[] = [];
    for (const fail of ["throw", "uncaught", "exit"] as const) {
      compileTestHooks.fail = fail;
      try {
        outcomes.push(statusOf(await compiler.compile(await job()).catch((e: unknown) => e)));
      } finally {
        delete compileTestHooks.fail;
      }
      await compiler.idle();
      expect(liveCompileWorkers()).toBe(0);
    }
    expect(outcomes).toEqual([
      [NrtStatus.NRT_FAILURE, "Cannot compile m.onnx: TypeError: a failure for the test"],
      [NrtStatus.NRT_FAILURE, "Cannot compile m.onnx: the compiler's Worker failed: an uncaught failure for the test"],
      [NrtStatus.NRT_FAILURE, "Cannot compile m.onnx: the compiler's Worker exited (code 3) before it answered"],
    ]);
    // The compiler goes on.
    expect((await compiler.compile(await job())).calls).toBeGreaterThan(0);
    await compiler.idle();
  });

  test("past the memory limit the Worker is stopped and the compile fails with 11 (NRT_FAIL_HOST_MEM_ALLOC)", async () => {
    // 256 MiB of resident memory's growth, on both runtimes (the Worker's heap limit, 384 MiB, is only a backstop).
    const compiler = new OnnxCompiler({ maxMemoryBytes: 256 * 2 ** 20 });
    compileTestHooks.fail = "grow";
    let outcome: unknown;
    try {
      outcome = statusOf(await compiler.compile(await job()).catch((e: unknown) => e));
    } finally {
      delete compileTestHooks.fail;
    }
    expect(outcome).toEqual([11, "Cannot compile m.onnx: the compiler used more than its memory limit (256 MiB)"]);
    await compiler.idle();
    expect(liveCompileWorkers()).toBe(0);
    // The compiler goes on, and a real compile fits the limit.
    expect((await compiler.compile(await job())).calls).toBeGreaterThan(0);
    await compiler.idle();
    expect(() => new OnnxCompiler({ maxMemoryBytes: 2 ** 20 })).toThrow(RangeError);
  });

  test("past the time limit the Worker is terminated and the compile fails with NRT_TIMEOUT; the next one runs", async () => {
    const compiler = new OnnxCompiler({ timeoutMs: 1 });
    await held(async () => {
      // Held, the compile cannot end before its limit, whatever this machine's speed.
      const late = await compiler.compile(await job("slow.onnx")).catch((e: unknown) => e);
      expect(statusOf(late)).toEqual([
        NrtStatus.NRT_TIMEOUT,
        "Cannot compile slow.onnx: the compiler ran past its time limit (0.001 s) and was stopped",
      ]);
      await compiler.idle();
      expect(liveCompileWorkers()).toBe(0);
    });
    const roomy = new OnnxCompiler({ timeoutMs: 600_000 });
    expect((await roomy.compile(await job())).calls).toBeGreaterThan(0);
    await roomy.idle();
    expect(() => new OnnxCompiler({ timeoutMs: 0 })).toThrow(RangeError);
  });

  test("an aborted signal stops the running compile and drops the waiting ones: NRT_CLOSED, no Worker left", async () => {
    const compiler = new OnnxCompiler();
    const stop = new AbortController();
    await held(async (hold) => {
      const running = compiler.compile(await job("a.onnx"), stop.signal).catch((e: unknown) => e);
      const waiting = compiler.compile(await job("b.onnx"), stop.signal).catch((e: unknown) => e);
      const other = compiler.compile(await job("c.onnx")).catch((e: unknown) => e); // another caller's
      await entered(hold);
      stop.abort("the server is shutting down");
      expect(statusOf(await running)).toEqual([
        NrtStatus.NRT_CLOSED,
        "Cannot compile a.onnx: the server is shutting down",
      ]);
      expect(statusOf(await waiting)).toEqual([
        NrtStatus.NRT_CLOSED,
        "Cannot compile b.onnx: the server is shutting down",
      ]);
      // The other caller's compile starts once a's Worker exited, and runs.
      await entered(hold);
      expect(liveCompileWorkers()).toBe(1);
      release(hold);
      expect(await other).toMatchObject({ calls: expect.any(Number) });
    });
    await compiler.idle();
    expect(liveCompileWorkers()).toBe(0);
    const later = await compiler.compile(await job("d.onnx"), stop.signal).catch((e: unknown) => e);
    expect((later as NrtError).status).toBe(NrtStatus.NRT_CLOSED);
    expect(liveCompileWorkers()).toBe(0);
  });
});
