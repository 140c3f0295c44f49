/**
 * The object API under misuse: every entry of `Runtime`, `Model`, `Tensor` and `TensorSet` checks the runtime's state
 * first (14 after close), then its arguments (`NRT_INVALID`, 2, with the value quoted so the string "8" and the
 * number 8 read differently); bytes in and out are the bytes of any `ArrayBuffer` or `ArrayBufferView`; close frees
 * the tensors the application left, on a shared portal too; and two runtimes of one process cannot bring up the same
 * NeuronCores of one portal (4). Seed: lifecycle-error-model §1.1 (the state guard at the top of every entry).
 *
 * Statuses are written as numbers on purpose: they are libnrt's values, not whatever the enum says today.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import {
  MemoryLogger,
  type Model,
  nrtaSeq,
  NrtaXu,
  NrtError,
  type Portal,
  type PreparedExecution,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";

const N = 16;
const f32 = (name: string) => ({ name, dtype: "float32", shape: [N] });
const RELU = oneOpNeff("relu", "relu", [f32("x")], [f32("y")]);

const portals: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of portals.splice(0)) await p.close();
});

/** A simulator the test closes itself (runtimes on it do not own it). */
function sim(): DeviceSimPortal {
  const p = new DeviceSimPortal();
  portals.push(p);
  return p;
}

async function runtime(portal: Portal = sim(), cores = [0, 1]): Promise<Runtime> {
  return await Runtime.init({
    portal,
    archPacks: [cayman],
    ownsPortal: false,
    logger: new MemoryLogger(),
    visibleCores: cores,
    virtualCoreSize: 1,
  });
}

/** The `NrtError` `f` throws or rejects with (any other outcome fails the test). */
async function refusal(f: () => unknown): Promise<NrtError> {
  let thrown: unknown;
  try {
    await f();
  } catch (e) {
    thrown = e;
  }
  if (!(thrown instanceof NrtError)) {
    throw new Error(`expected an NrtError, got ${thrown === undefined ? "success" : String(thrown)}`);
  }
  return thrown;
}

/** `[status, message]` of the refusal of `f`. */
async function refused(f: () => unknown): Promise<[number, string]> {
  const e = await refusal(f);
  return [e.status, e.message];
}

async function io(rt: Runtime, model: Model, location: "host" | "device" = "device") {
  const x = await rt.allocateTensor({ size: N * 4, name: "x", vnc: model.vnc, location });
  const y = await rt.allocateTensor({ size: N * 4, name: "y", vnc: model.vnc, location });
  await x.write(new Float32Array(N).fill(-3).map((v, i) => v + i));
  const ins = new TensorSet(), outs = new TensorSet();
  ins.add("x", x);
  outs.add("y", y);
  return { x, y, ins, outs };
}

/** What RELU writes for the input `io` writes. */
const RELU_OUT = Array.from({ length: N }, (_, i) => Math.max(0, i - 3));

/** `p`, or a failure naming `what` if it has not settled after 5 s (a hang fails the test under Deno too). */
async function inTime<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle in 5 s`)), 5_000);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const bytesOfFloats = (...v: number[]) => Array.from(new Uint8Array(new Float32Array(v).buffer));

describe("Runtime arguments", () => {
  test("Runtime.load() refuses a NEFF that is not bytes and options that are not a logical core with 2", async () => {
    const rt = await runtime();
    try {
      expect(await refused(() => rt.load(null as never))).toEqual([
        2,
        "Cannot load NEFF: expected its bytes (a Uint8Array or an ArrayBuffer), got null",
      ]);
      for (const bad of [undefined, "neff", [1, 2, 3], {}, 42]) {
        expect((await refusal(() => rt.load(bad as never))).status).toBe(2);
      }
      // An ArrayBuffer is NEFF bytes: a blank one is a bad NEFF (2), not an engine TypeError.
      const blank = await refusal(() => rt.load(new ArrayBuffer(2048)));
      expect(blank.status).toBe(2);
      expect(blank.message).toBe("Cannot read NEFF: header_size is 0, expected 1024");
      expect(await refused(() => rt.load(RELU, null as never))).toEqual([
        2,
        "Cannot load NEFF: the options must be an object, got null",
      ]);
      expect(await refused(() => rt.load(RELU, { vnc: NaN }))).toEqual([
        2,
        "Cannot load NEFF: logical core NaN is not a non-negative integer",
      ]);
      expect(await refused(() => rt.load(RELU, { vnc: "0" as never }))).toEqual([
        2,
        'Cannot load NEFF: logical core "0" is not a non-negative integer',
      ]);
      expect((await refusal(() => rt.load(RELU, { vnc: -1 }))).status).toBe(2);
      expect((await refusal(() => rt.load(RELU, 1.5))).status).toBe(2);
      expect((await refusal(() => rt.load(RELU, { metaneff: "m" as never }))).status).toBe(2);
      expect((await refusal(() => rt.load(RELU, { checkpoint: 7 as never }))).status).toBe(2);
      expect((await refusal(() => rt.loadCollectives(RELU, null as never))).status).toBe(2);
      // Nothing was reserved or staged by the refusals: both logical cores are empty.
      expect(rt.cores().map((c) => c.models.length)).toEqual([0, 0]);
    } finally {
      await rt.close();
    }
  });

  test("Runtime.load() takes an ArrayBuffer (or any view) of the NEFF as its bytes", async () => {
    const rt = await runtime();
    try {
      const copy = RELU.slice().buffer;
      const a = await rt.load(copy);
      const { x, ins, outs, y } = await io(rt, a);
      await a.execute(ins, outs);
      expect(Array.from(new Float32Array((await y.read()).buffer))).toEqual(
        Array.from({ length: N }, (_, i) => Math.max(0, i - 3)),
      );
      // A DataView over the NEFF bytes loads the same model (interned: the same digest on the same core).
      const b = await rt.load(new DataView(copy) as never);
      expect(b.name).toBe(a.name);
      await b.unload();
      await a.unload();
      await x.free();
    } finally {
      await rt.close();
    }
  });

  test("Runtime.allocateTensor() refuses bad options with 2 and quotes the values", async () => {
    const rt = await runtime();
    try {
      const before = await rt.deviceMemory();
      expect(await refused(() => rt.allocateTensor(null as never))).toEqual([
        2,
        "Cannot allocate tensor: the options must be an object, got null",
      ]);
      expect(await refused(() => rt.allocateTensor({ size: "8" as never }))).toEqual([
        2,
        'Cannot allocate tensor "tensor": size "8" is not a positive integer',
      ]);
      expect(await refused(() => rt.allocateTensor({ size: 8.5 }))).toEqual([
        2,
        'Cannot allocate tensor "tensor": size 8.5 is not a positive integer',
      ]);
      expect(await refused(() => rt.allocateTensor({ size: 8, vnc: "0" as never }))).toEqual([
        2,
        'Cannot allocate tensor "tensor": logical core "0" is not a non-negative integer',
      ]);
      expect(await refused(() => rt.allocateTensor({ size: 8, name: 5 as never }))).toEqual([
        2,
        "Cannot allocate tensor: name 5 is not a string",
      ]);
      expect(await refused(() => rt.allocateTensor({ size: 8, location: "gpu" as never }))).toEqual([
        2,
        'Cannot allocate tensor "tensor": unknown placement "gpu"',
      ]);
      expect(await rt.deviceMemory()).toEqual(before);
    } finally {
      await rt.close();
    }
  });

  test("execute, run, submit, prepareExecution and unload refuse what is not a Model or a TensorSet with 2", async () => {
    const rt = await runtime();
    try {
      const m = await rt.load(RELU);
      const { ins, outs } = await io(rt, m);
      expect(await refused(() => m.execute(null as never, outs))).toEqual([
        2,
        'Cannot execute model "relu.neff": the inputs must be a TensorSet, got null',
      ]);
      expect(await refused(() => m.execute(ins, {} as never))).toEqual([
        2,
        'Cannot execute model "relu.neff": the outputs must be a TensorSet, got an object',
      ]);
      expect(await refused(() => m.execute(ins, new Map() as never))).toEqual([
        2,
        'Cannot execute model "relu.neff": the outputs must be a TensorSet, got a Map',
      ]);
      expect(await refused(() => rt.execute(null as never, ins, outs))).toEqual([
        2,
        "Cannot execute: null is not a Model",
      ]);
      expect((await refusal(() => rt.run({ handle: m.handle } as never, ins, outs))).status).toBe(2);
      expect((await refusal(() => rt.prepareExecution(undefined as never, ins, outs))).status).toBe(2);
      expect((await refusal(() => rt.submit(null as never, ins, outs))).status).toBe(2);
      expect(await refused(() => rt.unload(null as never))).toEqual([2, "Cannot unload: null is not a Model"]);
      expect((await refusal(() => rt.isLoaded("m" as never))).status).toBe(2);
      expect((await refusal(() => rt.poisonedStatus(1 as never))).status).toBe(2);
      // A prepared execution runs once: again is 2, not an engine RangeError.
      const once = rt.prepareExecution(m, ins, outs);
      await once.run();
      expect(await refused(() => once.run())).toEqual([2, 'Execution of model "relu.neff" was already run']);
      // The refusals took no model reference: the model still runs and unloads.
      await m.execute(ins, outs);
      await m.unload();
      expect((await refusal(() => m.unload())).status).toBe(3);
    } finally {
      await rt.close();
    }
  });

  test("the queries refuse a logical core that is a string with 2 (an array index would have found core 0)", async () => {
    const rt = await Runtime.init({
      portal: sim(),
      archPacks: [cayman],
      ownsPortal: false,
      logger: new MemoryLogger(),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      asyncExecMaxInflightRequests: 2,
    });
    try {
      expect(await refused(() => rt.poll("0" as never))).toEqual([2, 'Logical core "0" is not visible']);
      expect((await refusal(() => rt.tryPoll(NaN))).status).toBe(2);
      expect((await refusal(() => rt.drainAsync("1" as never))).status).toBe(2);
      expect(await refused(() => rt.memoryStats("0" as never))).toEqual([2, 'Logical core "0" is not visible']);
      expect((await refusal(() => rt.setAsyncListener("f" as never))).status).toBe(2);
      expect(rt.poll(0)).toBeUndefined();
    } finally {
      await rt.close();
    }
  });
});

describe("Tensor and TensorSet arguments", () => {
  test("Tensor methods refuse arguments of the wrong type with 2, never an engine TypeError or RangeError", async () => {
    const rt = await runtime();
    try {
      const x = await rt.allocateTensor({ size: 16, name: "x" });
      const v = await rt.allocateTensor({ size: 16, name: "v", location: "virtual" });
      const cases: Array<[string, () => unknown, string]> = [
        [
          "write(null)",
          () => x.write(null as never),
          'Cannot write tensor "x": data must be an ArrayBuffer or an ArrayBufferView (such as a Uint8Array), got null',
        ],
        [
          "write([1, 2, 3])",
          () => x.write([1, 2, 3] as never),
          'Cannot write tensor "x": data must be an ArrayBuffer or an ArrayBufferView (such as a Uint8Array), got ' +
          "an array of 3",
        ],
        [
          'write(bytes, "0")',
          () => x.write(new Uint8Array(4), "0" as never),
          'Cannot write tensor "x": offset "0" is not a non-negative integer',
        ],
        [
          "write(20 bytes)",
          () => x.write(new Uint8Array(20)),
          'Cannot write tensor "x": range [0, 20) is outside its 16 bytes',
        ],
        ['read("4")', () => x.read("4" as never), 'Cannot read tensor "x": offset "4" is not a non-negative integer'],
        ["read(0, NaN)", () => x.read(0, NaN), 'Cannot read tensor "x": length NaN is not a non-negative integer'],
        [
          "readInto(null)",
          () => x.readInto(null as never),
          'Cannot read tensor "x": the destination must be an ArrayBuffer or an ArrayBufferView (such as a ' +
          "Uint8Array), got null",
        ],
        ['memset("1")', () => x.memset("1" as never), 'Cannot memset tensor "x": value "1" is not an integer'],
        [
          "copyFrom(null)",
          () => x.copyFrom(null as never),
          'Cannot copy into tensor "x": the source must be a Tensor, got null',
        ],
        [
          "copyFrom({})",
          () => x.copyFrom({ size: 4 } as never),
          'Cannot copy into tensor "x": the source must be a Tensor, got an object',
        ],
        [
          'slice("0", 4)',
          () => x.slice("0" as never, 4),
          'Cannot slice tensor "x": offset "0" is not a non-negative integer',
        ],
        ["slice(0, 4, 7)", () => x.slice(0, 4, 7 as never), 'Cannot slice tensor "x": name 7 is not a string'],
        [
          "attachBuffer(null)",
          () => v.attachBuffer(null as never),
          'Cannot attach a buffer to tensor "v": the buffer must be an ArrayBuffer or an ArrayBufferView (such as a ' +
          "Uint8Array), got null",
        ],
        [
          "attachBuffer(8 bytes)",
          () => v.attachBuffer(new Float32Array(2)),
          'Cannot attach a buffer to tensor "v": 8 bytes is smaller than 16',
        ],
        [
          "attachBuffer on a device tensor",
          () => x.attachBuffer(new Uint8Array(16)),
          'Cannot attach a buffer to tensor "x": it is not virtual',
        ],
      ];
      for (const [what, f, message] of cases) {
        expect([what, ...(await refused(f))]).toEqual([what, 2, message]);
      }
      await x.free();
      await v.free();
    } finally {
      await rt.close();
    }
  });

  test("TensorSet refuses names that are not strings and values that are not Tensors with 2", async () => {
    const rt = await runtime();
    try {
      const t = await rt.allocateTensor({ size: 4, name: "t", location: "host" });
      const set = new TensorSet();
      expect(await refused(() => set.add(8 as never, t))).toEqual([
        2,
        "Cannot add to tensor set: name 8 is not a non-empty string",
      ]);
      expect((await refusal(() => set.add("", t))).status).toBe(2);
      expect(await refused(() => set.add("t", null as never))).toEqual([
        2,
        'Cannot add to tensor set: the value for "t" is null, not a Tensor',
      ]);
      expect(await refused(() => set.get(8 as never))).toEqual([2, "Tensor set has no tensor named 8"]);
      expect(await refused(() => set.get("8"))).toEqual([2, 'Tensor set has no tensor named "8"']);
      expect((await refusal(() => set.has(null as never))).status).toBe(2);
      expect(set.names()).toEqual([]);
      set.add("t", t);
      expect(set.get("t")).toBe(t);
    } finally {
      await rt.close();
    }
  });

  test("the nrta scheduler refuses a tensor that is not one with 2", async () => {
    const rt = await runtime();
    try {
      expect(await refused(() => rt.nrta.tensorWrite(null as never, new Uint8Array(4)))).toEqual([
        2,
        "Cannot schedule: null is not a Tensor",
      ]);
    } finally {
      await rt.close();
    }
  });
});

describe("Tensor bytes: any ArrayBuffer or ArrayBufferView", () => {
  for (const location of ["host", "device"] as const) {
    test(`Tensor.write() and Tensor.readInto() move the bytes of any view (${location})`, async () => {
      const rt = await runtime();
      try {
        const t = await rt.allocateTensor({ size: 8, name: "t", location });
        await t.write(new Float32Array([1.5, 300]));
        expect(Array.from(await t.read())).toEqual([0, 0, 192, 63, 0, 0, 150, 67]);
        expect(bytesOfFloats(1.5, 300)).toEqual([0, 0, 192, 63, 0, 0, 150, 67]);

        const dv = new DataView(new ArrayBuffer(8));
        dv.setUint32(0, 0xdeadbeef);
        await t.write(dv);
        expect(Array.from(await t.read())).toEqual([0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);

        await t.write(new Uint8Array(8).fill(9).buffer);
        expect(Array.from(await t.read())).toEqual([9, 9, 9, 9, 9, 9, 9, 9]);

        // A view with a byte offset: only its own bytes, at the tensor offset given.
        const wide = new Uint16Array([0xffff, 0x0201, 0x0403, 0xffff]);
        await t.write(wide.subarray(1, 3), 2);
        expect(Array.from(await t.read())).toEqual([9, 9, 1, 2, 3, 4, 9, 9]);

        await t.write(new Float32Array([-2, 0.25]));
        const f = new Float32Array(2);
        await t.readInto(f);
        expect(Array.from(f)).toEqual([-2, 0.25]);
        const ab = new ArrayBuffer(4);
        await t.readInto(ab, 4);
        expect(Array.from(new Float32Array(ab))).toEqual([0.25]);
        const dvOut = new DataView(new ArrayBuffer(12), 4, 4);
        await t.readInto(dvOut);
        expect(dvOut.getFloat32(0, true)).toBe(-2);
        await t.free();
      } finally {
        await rt.close();
      }
    });
  }

  test("Tensor.attachBuffer() takes any view and the tensor reads and writes its bytes in place", async () => {
    const rt = await runtime();
    try {
      const v = await rt.allocateTensor({ size: 16, name: "v", location: "virtual" });
      const buf = new Float32Array(4);
      v.attachBuffer(buf);
      await v.write(new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer));
      expect(Array.from(buf)).toEqual([1, 2, 3, 4]);
      const back = new Float32Array(2);
      await v.readInto(back, 8);
      expect(Array.from(back)).toEqual([3, 4]);
      const ab = new ArrayBuffer(16);
      v.attachBuffer(ab);
      await v.write(new Float32Array([7]), 12);
      expect(new Float32Array(ab)[3]).toBe(7);
      await v.free();
    } finally {
      await rt.close();
    }
  });
});

describe("close and the state guard", () => {
  test("close() on a shared portal frees the device memory of the tensors the application left", async () => {
    const portal = sim();
    const rt = await runtime(portal);
    const m = await rt.load(RELU);
    const { ins, outs } = await io(rt, m);
    await m.execute(ins, outs);
    const forgotten = await rt.allocateTensor({ size: 1 << 20, name: "forgotten", vnc: 1 });
    const viewed = await rt.allocateTensor({ size: 4096, name: "viewed" });
    const view = viewed.slice(1024, 1024);
    await viewed.free(); // the view still holds the memory
    expect((await portal.memUsage(0)).allocations).toBeGreaterThan(0);
    await rt.close();
    expect(await portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
    expect(rt.memory().total).toBe(0);
    // The tensors are gone with the runtime: using one is 14, and disposing one does nothing.
    expect((await refusal(() => forgotten.read())).status).toBe(14);
    expect((await refusal(() => view.free())).status).toBe(14);
    await forgotten[Symbol.asyncDispose]();
    // The portal is still usable: another runtime brings the same cores up on it and leaves it empty too.
    const again = await runtime(portal);
    await again.allocateTensor({ size: 4096, name: "left" });
    await again.close();
    expect(await portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  });

  test("after close every entry is 14, before any argument check", async () => {
    const rt = await runtime();
    const m = await rt.load(RELU);
    const { x, ins, outs } = await io(rt, m, "host");
    const v = await rt.allocateTensor({ size: 16, name: "v", location: "virtual" });
    const seq = rt.nrta.tensorWrite(x, new Uint8Array(4)).seq;
    await rt.nrta.drain();
    expect(rt.nrta.isCompleted(seq)).toBe(true);
    await rt.close();
    const entries: Array<[string, () => unknown]> = [
      ["rt.load(null)", () => rt.load(null as never)],
      ["rt.loadCollectives(null, null)", () => rt.loadCollectives(null as never, null as never)],
      ["rt.allocateTensor(null)", () => rt.allocateTensor(null as never)],
      ["rt.execute(null, …)", () => rt.execute(null as never, ins, outs)],
      ["model.execute(null, null)", () => m.execute(null as never, null as never)],
      ["rt.submit(null, …)", () => rt.submit(null as never, ins, outs)],
      ["rt.unload(null)", () => rt.unload(null as never)],
      ["model.unload()", () => m.unload()],
      ['rt.memoryStats("x")', () => rt.memoryStats("x" as never)],
      ["rt.poll()", () => rt.poll()],
      ["rt.setAsyncListener(7)", () => rt.setAsyncListener(7 as never)],
      ["rt.close()", () => rt.close()],
      ["v.attachBuffer(null)", () => v.attachBuffer(null as never)],
      ["v.attachBuffer(16 bytes)", () => v.attachBuffer(new Uint8Array(16))],
      ["x.write(null)", () => x.write(null as never)],
      ["x.read()", () => x.read()],
      ["x.readInto(null)", () => x.readInto(null as never)],
      ["x.memset(0)", () => x.memset(0)],
      ["x.copyFrom(null)", () => x.copyFrom(null as never)],
      ["x.slice(0, 4)", () => x.slice(0, 4)],
      ["x.free()", () => x.free()],
      ["rt.nrta.isCompleted(seq)", () => rt.nrta.isCompleted(seq)],
      ["rt.nrta.isCompleted(-1n)", () => rt.nrta.isCompleted(-1n)],
      ["rt.nrta.getSequence(0, 1, 0)", () => rt.nrta.getSequence(0, 1, 0)],
      ['rt.nrta.getSequence("a", 1, 0)', () => rt.nrta.getSequence("a" as never, 1, 0)],
      ["rt.nrta.tensorWrite(null, …)", () => rt.nrta.tensorWrite(null as never, new Uint8Array(4))],
      ["rt.nrta.tensorRead(null, x)", () => rt.nrta.tensorRead(null as never, x)],
      ["rt.nrta.tensorCopy(x, 0, x, 0, 4)", () => rt.nrta.tensorCopy(x, 0, x, 0, 4)],
    ];
    for (const [what, f] of entries) expect([what, (await refusal(f)).status]).toEqual([what, 14]);
  });

  test("a freed tensor refuses attachBuffer with 3, like every other use of it", async () => {
    const rt = await runtime();
    try {
      const v = await rt.allocateTensor({ size: 16, name: "v", location: "virtual" });
      v.attachBuffer(new Uint8Array(16));
      const view = v.slice(0, 8);
      await v.free();
      expect(await refused(() => v.attachBuffer(new Uint8Array(16)))).toEqual([
        3,
        'Cannot attach a buffer to tensor "v": it was freed',
      ]);
      // Before the type check: the handle is dead whatever the argument.
      expect((await refusal(() => v.attachBuffer(null as never))).status).toBe(3);
      expect((await refusal(() => v.write(new Uint8Array(4)))).status).toBe(3);
      // A view not freed still works on the shared backing.
      view.attachBuffer(new Uint8Array(16));
      await view.write(new Uint8Array([1, 2, 3, 4]));
      expect(Array.from(await view.read(0, 4))).toEqual([1, 2, 3, 4]);
    } finally {
      await rt.close();
    }
  });
});

describe("two runtimes on one portal", () => {
  test("a second runtime on cores a live runtime holds is refused with 4 naming the cores; the first still runs", async () => {
    const portal = sim();
    const first = await runtime(portal, [0, 1]);
    try {
      const m = await first.load(RELU);
      const { ins, outs, y } = await io(first, m);
      await m.execute(ins, outs);
      expect(await refused(() => runtime(portal, [1, 2]))).toEqual([
        4,
        "Cannot initialize: NeuronCore nc1 of device 0 is held by another runtime on the same portal; close it, or " +
        "give each runtime its own cores (visibleCores)",
      ]);
      expect(await refused(() => runtime(portal, [0, 1]))).toEqual([
        4,
        "Cannot initialize: NeuronCores nc0, nc1 of device 0 are held by another runtime on the same portal; close " +
        "it, or give each runtime its own cores (visibleCores)",
      ]);
      // A runtime that would own the portal is refused the same way, and leaves the portal open for the first.
      const owning = await refusal(() =>
        Runtime.init({ portal, archPacks: [cayman], logger: new MemoryLogger(), visibleCores: [0], virtualCoreSize: 1 })
      );
      expect(owning.status).toBe(4);
      // Disjoint cores are fine.
      const other = await runtime(portal, [2, 3]);
      const m2 = await other.load(RELU);
      const io2 = await io(other, m2);
      await m2.execute(io2.ins, io2.outs);
      // The first runtime's cores were never brought up again: its model still runs.
      await y.write(new Uint8Array(N * 4));
      await m.execute(ins, outs);
      expect(Array.from(new Float32Array((await y.read()).buffer))).toEqual(
        Array.from({ length: N }, (_, i) => Math.max(0, i - 3)),
      );
      await other.close();
    } finally {
      await first.close();
    }
    // Closed, the cores are free to claim again.
    const next = await runtime(portal, [0, 1, 2, 3]);
    await next.close();
    expect(await portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  });

  test("an init that fails after claiming its cores gives them back; the claim holds once init succeeds", async () => {
    const inner = sim();
    let refuse = true;
    // A driver that refuses the cores once (another process holds them), then grants them, and lets its own client
    // take them again (as the remote daemon does): only the runtime's claim tells two runtimes of one process apart.
    const portal = new Proxy(inner, {
      get(target, key) {
        if (key === "acquireCores") {
          return (): Promise<void> => {
            if (!refuse) return Promise.resolve();
            refuse = false;
            return Promise.reject(new NrtError(4 as never, "Cannot acquire NeuronCore(s) nc0,nc1: in use"));
          };
        }
        if (key === "releaseCores") return (): Promise<void> => Promise.resolve();
        const v = Reflect.get(target, key, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as Portal;
    expect(await refused(() => runtime(portal))).toEqual([4, "Cannot acquire NeuronCore(s) nc0,nc1: in use"]);
    const rt = await runtime(portal);
    try {
      expect((await refusal(() => runtime(portal, [1]))).status).toBe(4);
      const m = await rt.load(RELU);
      const { ins, outs } = await io(rt, m);
      await m.execute(ins, outs);
    } finally {
      await rt.close();
    }
    expect(await inner.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  });
});

describe("a tensor freed while an execution uses it", () => {
  test("the memory stays the execution's until it ends: nothing else is overwritten, the execution answers 3", async () => {
    const portal = sim();
    let onStart = () => {};
    const started = new Promise<void>((res) => (onStart = res));
    const rt = await Runtime.init({
      portal,
      archPacks: [cayman],
      ownsPortal: false,
      logger: new MemoryLogger(),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      onExecution: (e) => e.phase === "start" && onStart(),
    });
    try {
      const m = await rt.load(RELU);
      const before = await portal.memUsage(0);
      const { x, ins, outs, y } = await io(rt, m);
      await x.write(new Float32Array(N).fill(5));
      const running = refusal(() => m.execute(ins, outs));
      await started; // on the device now, writing y
      await y.free();
      // A new tensor of y's size, allocated while the device still writes y's memory, keeps its own bytes.
      const z = await rt.allocateTensor({ size: N * 4, name: "z" });
      await z.write(new Float32Array(N).fill(-7));
      const e = await running;
      expect([e.status, e.message]).toEqual([
        3,
        'Cannot execute model "relu.neff": tensor "y" bound to "y" was freed before the execution ended',
      ]);
      expect(Array.from(new Float32Array((await z.read()).buffer))).toEqual(new Array(N).fill(-7));
      // The model still runs, and y's memory went back once the execution ended.
      const outs2 = new TensorSet();
      outs2.add("y", z);
      await m.execute(ins, outs2);
      expect(Array.from(new Float32Array((await z.read()).buffer))).toEqual(new Array(N).fill(5));
      await x.free();
      await z.free();
      expect(await portal.memUsage(0)).toEqual(before);
    } finally {
      await rt.close();
    }
    expect(await portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  });

  test("an input freed while the device reads it is 3, not a hardware error (6); queued executions do not run", async () => {
    const portal = sim();
    let onStart = () => {};
    const started = new Promise<void>((res) => (onStart = res));
    const runs: number[] = [];
    const rt = await Runtime.init({
      portal,
      archPacks: [cayman],
      ownsPortal: false,
      logger: new MemoryLogger(),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      onExecution: (e) => {
        if (e.phase !== "start") return;
        runs.push(e.seq);
        onStart();
      },
    });
    try {
      const m = await rt.load(RELU);
      const before = await portal.memUsage(0);
      const { x, ins, outs, y } = await io(rt, m);
      const first = refusal(() => m.execute(ins, outs));
      const queued = refusal(() => m.execute(ins, outs));
      await started;
      await x.free();
      expect((await first).status).toBe(3);
      const q = await queued;
      expect([q.status, q.message]).toEqual([
        3,
        'Cannot execute model "relu.neff": tensor "x" bound to "x" was freed before the execution ran',
      ]);
      expect(runs.length).toBe(1);
      expect(m.state).toBe(2);
      expect(rt.poisonedStatus(m)).toBeUndefined();
      await y.free();
      expect(await portal.memUsage(0)).toEqual(before);
    } finally {
      await rt.close();
    }
  });
});

describe("the nrta scheduler under misuse", () => {
  test("bad options, requests and sequence ids are refused with 2, never an engine TypeError", async () => {
    const rt = await runtime();
    try {
      const t = await rt.allocateTensor({ size: 16, name: "t" });
      const bytes = new Uint8Array(4);
      const cases: Array<[string, () => unknown]> = [
        ["options null", () => rt.nrta.tensorWrite(t, bytes, 0, null as never)],
        ["options 7", () => rt.nrta.tensorRead(bytes, t, 0, 4, 7 as never)],
        ["after 5", () => rt.nrta.tensorWrite(t, bytes, 0, { after: 5 as never })],
        ["after [null]", () => rt.nrta.tensorWrite(t, bytes, 0, { after: [null as never] })],
        ["after [{}]", () => rt.nrta.tensorWrite(t, bytes, 0, { after: [{} as never] })],
        // Shaped like a request, but never settling: the write would wait for it for ever.
        [
          "after [fake]",
          () => rt.nrta.tensorWrite(t, bytes, 0, { after: [{ seq: 1n, done: new Promise<void>(() => {}) }] }),
        ],
        ["errors {}", () => rt.nrta.tensorWrite(t, bytes, 0, { errors: {} as never })],
        ["executeSchedule(null)", () => rt.nrta.executeSchedule(null as never)],
        ["executeSchedule({})", () => rt.nrta.executeSchedule({} as never)],
        ["isCompleted(5)", () => rt.nrta.isCompleted(5 as never)],
      ];
      for (const [what, f] of cases) expect([what, (await refusal(f)).status]).toEqual([what, 2]);
      // Nothing was scheduled, and the scheduler still works.
      const w = rt.nrta.tensorWrite(t, new Uint8Array([1, 2, 3, 4]));
      expect(w.seq).toBe((1n << 48n) | 1n);
      await w.done;
      expect(Array.from(await t.read(0, 4))).toEqual([1, 2, 3, 4]);
    } finally {
      await rt.close();
    }
  });

  test("a tensor of another runtime is refused with 2, as an execution refuses it", async () => {
    const rt = await runtime();
    const other = await runtime(sim());
    try {
      const mine = await rt.allocateTensor({ size: 16, name: "mine" });
      const theirs = await other.allocateTensor({ size: 16, name: "theirs" });
      const message = 'Cannot schedule: tensor "theirs" was not allocated by this runtime';
      expect(await refused(() => rt.nrta.tensorWrite(theirs, new Uint8Array(4)))).toEqual([2, message]);
      expect(await refused(() => rt.nrta.tensorRead(new Uint8Array(4), theirs))).toEqual([2, message]);
      expect(await refused(() => rt.nrta.tensorCopy(theirs, 0, mine, 0, 4))).toEqual([2, message]);
      expect(await refused(() => rt.nrta.tensorCopy(mine, 0, theirs, 0, 4))).toEqual([2, message]);
    } finally {
      await other.close();
      await rt.close();
    }
  });
});

describe("a prepared execution of another runtime", () => {
  const NOT_OURS = "Cannot schedule an execution: it was not prepared by this runtime";
  const COMPUTE = NrtaXu.NRTA_XU_COMPUTE;

  test("executeSchedule() refuses it with 2, schedules nothing, and its own runtime still runs it", async () => {
    const theirPortal = sim();
    const rt = await runtime();
    const other = await runtime(theirPortal);
    try {
      const start = await theirPortal.memUsage(0);
      const theirs = await other.load(RELU);
      const { x, y, ins, outs } = await io(other, theirs);
      const prepared = other.prepareExecution(theirs, ins, outs);
      expect(await refused(() => rt.nrta.executeSchedule(prepared))).toEqual([2, NOT_OURS]);
      expect(prepared.owner).toBe(other);
      // Nothing was scheduled here: no queue waits for it, no sequence number went to it.
      await inTime("the refusing runtime's drain", rt.nrta.drain());
      expect(rt.nrta.getSequence(0, COMPUTE, 0)).toBe(nrtaSeq(COMPUTE, 0n));
      const mine = await rt.load(RELU);
      const own = await io(rt, mine);
      const next = rt.nrta.executeSchedule(rt.prepareExecution(mine, own.ins, own.outs));
      expect(next.seq).toBe(nrtaSeq(COMPUTE, 1n));
      await next.done;
      // Its own runtime runs it (once: it was neither run nor cancelled by the refusal).
      const ran = other.nrta.executeSchedule(prepared);
      expect(ran.seq).toBe(nrtaSeq(COMPUTE, 1n));
      await inTime("the execution on its own runtime", ran.done);
      expect(Array.from(new Float32Array((await y.read()).buffer))).toEqual(RELU_OUT);
      // Its reference and tensor holds were dropped: the unload does not wait, and the memory is back.
      await x.free();
      await y.free();
      await inTime("the unload of its model", theirs.unload());
      expect(await theirPortal.memUsage(0)).toEqual(start);
    } finally {
      await other.close();
      await rt.close();
    }
  });

  test("a refusal for any reason leaves it alone: 14 after close, 2 before the queue and core checks", async () => {
    const theirPortal = sim();
    const other = await runtime(theirPortal);
    const closed = await runtime();
    await closed.close();
    const narrow = await runtime(sim(), [0]); // one logical core: theirs runs on logical core 1
    try {
      const start = await theirPortal.memUsage(0);
      const theirs = await other.load(RELU, 1);
      const { x, y, ins, outs } = await io(other, theirs);
      const a = other.prepareExecution(theirs, ins, outs);
      const b = other.prepareExecution(theirs, ins, outs);
      // After close the state guard answers first, as at every entry; the execution is not this runtime's to drop.
      expect((await refusal(() => closed.nrta.executeSchedule(a))).status).toBe(14);
      expect(await refused(() => narrow.nrta.executeSchedule(a))).toEqual([2, NOT_OURS]);
      expect(await refused(() => narrow.nrta.executeSchedule(b, { queue: 7 }))).toEqual([2, NOT_OURS]);
      expect(await refused(() => narrow.nrta.executeSchedule(b, null as never))).toEqual([2, NOT_OURS]);
      // Its runtime runs one and cancels the other; then the unload has nothing to wait for.
      await inTime("the run on its own runtime", a.run());
      expect(Array.from(new Float32Array((await y.read()).buffer))).toEqual(RELU_OUT);
      b.cancel();
      await x.free();
      await y.free();
      await inTime("the unload of its model", theirs.unload());
      expect(await theirPortal.memUsage(0)).toEqual(start);
      // The refusing runtime scheduled nothing.
      await inTime("the refusing runtime's drain", narrow.nrta.drain());
      expect(narrow.nrta.getSequence(0, COMPUTE, 0)).toBe(nrtaSeq(COMPUTE, 0n));
    } finally {
      await narrow.close();
      await other.close();
    }
  });

  test("a refused one left untouched does not keep its runtime from closing, nor any device memory", async () => {
    const theirPortal = sim();
    const rt = await runtime();
    const other = await runtime(theirPortal);
    try {
      const theirs = await other.load(RELU);
      const { ins, outs } = await io(other, theirs);
      const left = other.prepareExecution(theirs, ins, outs);
      expect(await refused(() => rt.nrta.executeSchedule(left))).toEqual([2, NOT_OURS]);
      await inTime("the close of its runtime", other.close());
      expect(await theirPortal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
      left.cancel(); // after close: nothing left to drop, and no throw
      expect(await refused(() => left.run())).toEqual([2, 'Execution of model "relu.neff" was already cancelled']);
    } finally {
      await rt.close();
    }
  });

  test("a look-alike that no runtime prepared is refused with 2 and not touched", async () => {
    const rt = await runtime();
    try {
      const calls: string[] = [];
      const fake: PreparedExecution = {
        vnc: 0,
        run: () => (calls.push("run"), Promise.resolve()),
        cancel: () => void calls.push("cancel"),
      };
      expect(await refused(() => rt.nrta.executeSchedule(fake))).toEqual([2, NOT_OURS]);
      expect(await refused(() => rt.nrta.executeSchedule({ ...fake, owner: {} }))).toEqual([2, NOT_OURS]);
      await rt.nrta.drain();
      expect(calls).toEqual([]);
    } finally {
      await rt.close();
    }
  });
});

describe("a model of another runtime", () => {
  test("execute, run, prepareExecution, submit and unload refuse it with 2; both models still run", async () => {
    const rt = await Runtime.init({
      portal: sim(),
      archPacks: [cayman],
      ownsPortal: false,
      logger: new MemoryLogger(),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      asyncExecMaxInflightRequests: 2,
    });
    const other = await runtime(sim());
    try {
      const mine = await rt.load(RELU);
      const theirs = await other.load(RELU);
      expect(theirs.handle).toBe(mine.handle); // handles are per runtime: the lookup alone would find ours
      const own = await io(rt, mine), their = await io(other, theirs);
      const foreign = (action: string) => [2, `${action}: model "relu.neff" was loaded by another runtime`];
      expect(await refused(() => rt.execute(theirs, own.ins, own.outs))).toEqual(foreign("Cannot execute"));
      expect(await refused(() => rt.run(theirs, own.ins, own.outs))).toEqual(foreign("Cannot execute"));
      expect(await refused(() => rt.prepareExecution(theirs, own.ins, own.outs))).toEqual(foreign("Cannot execute"));
      expect(await refused(() => rt.submit(theirs, own.ins, own.outs))).toEqual(foreign("Cannot execute"));
      expect(await refused(() => rt.unload(theirs))).toEqual(foreign("Cannot unload"));
      // The refusals took no reference and unloaded nothing, here or there.
      await mine.execute(own.ins, own.outs);
      await theirs.execute(their.ins, their.outs);
      expect(Array.from(new Float32Array((await their.y.read()).buffer))).toEqual(RELU_OUT);
      expect(rt.isLoaded(mine) && other.isLoaded(theirs)).toBe(true);
      await inTime("the unload of our model", mine.unload());
      await inTime("the unload of theirs", theirs.unload());
      // Unloaded, it is still another runtime's: 2, not this runtime's "not loaded" (3).
      expect(await refused(() => rt.execute(theirs, own.ins, own.outs))).toEqual(foreign("Cannot execute"));
      expect((await refusal(() => rt.execute(mine, own.ins, own.outs))).status).toBe(3);
    } finally {
      await other.close();
      await rt.close();
    }
  });

  test("poisonedStatus() answers for this runtime's models only, not for another's model of the same handle", async () => {
    const portal = sim();
    const rt = await runtime(portal);
    const other = await runtime(sim());
    try {
      const poisoned = await rt.load(RELU);
      const theirs = await other.load(RELU);
      expect(theirs.handle).toBe(poisoned.handle); // handles are per runtime
      const { ins, outs } = await io(rt, poisoned);
      portal.faults.inject({ kind: "hbm-ue", nc: 0, atExecution: 1 });
      expect((await refusal(() => poisoned.execute(ins, outs))).status).toBe(1201);
      expect(rt.poisonedStatus(poisoned)).toBe(1201);
      expect(rt.poisonedStatus(theirs)).toBeUndefined();
      expect(rt.isLoaded(theirs)).toBe(false);
      // A second handle of an interned model that was unloaded no longer names it either.
      const a = await other.load(RELU);
      expect(a.handle).toBe(theirs.handle);
      await theirs.unload();
      expect(other.poisonedStatus(theirs)).toBeUndefined();
      expect(other.isLoaded(a)).toBe(true);
    } finally {
      await other.close();
      await rt.close();
    }
  });
});
