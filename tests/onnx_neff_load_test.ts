/**
 * The multi-op custom-op NEFF the ONNX compiler writes, at `Runtime.load`: weights bound from the NEFF's own
 * metaneff and checkpoint, intermediate buffers (`virtual` vars), views (Pool.json `tensors`) and 64-bit scalars as
 * decimal strings; and every malformed variant refused with `NRT_INVALID` before it touches the device.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import {
  buildCustomOpNeff,
  buildNeff,
  type CustomOpModelSpec,
  MemoryLogger,
  NrtError,
  NrtStatus,
  readNeff,
  Runtime,
} from "@nrt/core";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { execute, f32, OP_LIBRARIES } from "./onnx_testing.ts";

let c: NrtContainer;
let rt: Runtime;
beforeAll(async () => {
  c = createNrtContainer();
  rt = await Runtime.init({ ...nrtPlugins(c), visibleCores: [0, 1], logger: new MemoryLogger() });
});
afterAll(async () => {
  await rt.close();
  await c.resolve(PortalToken).close();
});

const f32Bits = (v: number): bigint => new BigInt64Array(new Float64Array([v]).buffer)[0];
const t = (name: string, shape: number[]) => ({ name, dtype: "float32", shape });
const W = Float32Array.from({ length: 8 }, (_, i) => i - 3.5);

/**
 * y = LeakyRelu(x + w, alpha 0.25) through a buffer: `elementwise.binary_f32` writes the sum into a view of buffer
 * "tmp", `activation.unary_f32` reads it back as a [2, 4] view. alpha travels as its float64 bit pattern, which is
 * not a safe integer, so the NEFF writes it as a decimal string.
 */
function spec(patch: Partial<CustomOpModelSpec> = {}): CustomOpModelSpec {
  return {
    name: "add_leaky",
    target: "cayman",
    inputs: [t("x", [8])],
    outputs: [t("y", [2, 4])],
    weights: [{ ...t("w", [8]), data: new Uint8Array(W.buffer) }],
    buffers: [{ name: "tmp", size: 64 }],
    views: [{ name: "sum", var: "tmp", offset: 0, dtype: "float32", shape: [8] }, {
      name: "sum2d",
      var: "tmp",
      offset: 0,
      dtype: "float32",
      shape: [2, 4],
    }],
    libraries: [
      {
        name: "elementwise",
        wasm: OP_LIBRARIES.get("elementwise")!,
        totalCpus: 8,
        functions: [{ opcode: 1, name: "binary_f32" }],
      },
      {
        name: "activation",
        wasm: OP_LIBRARIES.get("activation")!,
        totalCpus: 1,
        functions: [{ opcode: 2, name: "unary_f32" }],
      },
    ],
    calls: [
      { opcode: 1, inputs: ["x", "w"], outputs: ["sum"], ints: [0, 1, 8, 1, 1] },
      { opcode: 2, inputs: ["sum2d"], outputs: ["y"], ints: [1, 8, f32Bits(0.25), 0] },
    ],
    ...patch,
  };
}

const X = Float32Array.from({ length: 8 }, (_, i) => (i % 3) - 1);
const expected = Array.from(X, (v, i) => Math.fround(Math.fround(v + W[i]) * (v + W[i] < 0 ? 0.25 : 1)));

async function run(neff: Uint8Array, options: Parameters<Runtime["load"]>[1] = {}): Promise<number[]> {
  const model = await rt.load(neff, options);
  try {
    return Array.from(f32((await execute(rt, model, { x: { shape: [8], data: X } })).y));
  } finally {
    await model.unload();
  }
}

/** The NEFF with one JSON member rewritten. */
function patchMember(neff: Uint8Array, member: string, edit: (json: Record<string, unknown>) => void): Uint8Array {
  const file = readNeff(neff);
  const json = JSON.parse(new TextDecoder().decode(file.members.get(member)!));
  edit(json);
  const members = new Map(file.members);
  members.set(member, new TextEncoder().encode(JSON.stringify(json)));
  return buildNeff({ name: file.header.name, members });
}

/** Loading `neff` is NRT_INVALID with a message matching `why`, and the device memory is what it was. */
async function refused(neff: Uint8Array, why: RegExp, options: Parameters<Runtime["load"]>[1] = {}): Promise<void> {
  const before = rt.memoryStats(0).bytesUsed;
  let err: unknown;
  try {
    await (await rt.load(neff, options)).unload();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(NrtError);
  expect((err as NrtError).status).toBe(NrtStatus.NRT_INVALID);
  expect((err as NrtError).message).toMatch(why);
  expect(rt.memoryStats(0).bytesUsed).toBe(before);
}

describe("multi-op custom-op NEFFs at load", () => {
  test(
    "weights from the NEFF's own checkpoint, a buffer read back through a second view, a 64-bit scalar",
    async () => {
      const neff = buildCustomOpNeff(spec());
      const file = readNeff(neff);
      expect(file.members.has("metaneff.json")).toBe(true);
      const pool = JSON.parse(new TextDecoder().decode(file.members.get("sg00/Pool.json")!));
      expect(pool.calls[1].ints[2]).toBe(f32Bits(0.25).toString());
      expect(await run(neff)).toEqual(expected);
    },
    60_000,
  );

  test(
    "a caller's checkpoint entry replaces the NEFF's weight; a caller's metaneff replaces the NEFF's binding",
    async () => {
      const ones = new Float32Array(8).fill(1);
      const plusOne = Array.from(X, (v) => Math.fround(v + 1) * (v + 1 < 0 ? 0.25 : 1));
      expect(await run(buildCustomOpNeff(spec()), { checkpoint: { w0: new Uint8Array(ones.buffer) } })).toEqual(
        plusOne,
      );
      const metaneff = {
        input_tensors: [
          { name: "x", shape: [8], data_type: "float32" },
          { name: "w", shape: [8], data_type: "float32", type: "INPUT_WEIGHT" as const, checkpoint_key: "mine" },
        ],
        output_tensors: [{ name: "y", shape: [2, 4], data_type: "float32" }],
      };
      expect(await run(buildCustomOpNeff(spec()), { metaneff, checkpoint: { mine: new Uint8Array(ones.buffer) } }))
        .toEqual(plusOne);
      // The caller's metaneff does not see the NEFF's checkpoint.
      await refused(buildCustomOpNeff(spec()), /needs checkpoint key "w0"/, {
        metaneff: {
          ...metaneff,
          input_tensors: [metaneff.input_tensors[0], { ...metaneff.input_tensors[1], checkpoint_key: "w0" }],
        },
      });
    },
    60_000,
  );

  test("a NEFF whose checkpoint member is missing or of the wrong size is refused", async () => {
    const file = readNeff(buildCustomOpNeff(spec()));
    const without = new Map(file.members);
    without.delete("checkpoint/w0");
    await refused(buildNeff({ name: "add_leaky", members: without }), /INPUT_WEIGHT "w" needs checkpoint key "w0"/);
    const short = new Map(file.members);
    short.set("checkpoint/w0", new Uint8Array(4));
    await refused(buildNeff({ name: "add_leaky", members: short }), /checkpoint "w0" is 4 bytes, "w" needs 32/);
  }, 60_000);

  test("a view outside its var, in an unknown var, named like a var, or of a bad dtype is refused", async () => {
    const view = (v: Partial<{ var: string; offset: number; dtype: string; shape: number[]; name: string }>) =>
      buildCustomOpNeff(
        spec({
          views: [{ name: "sum", var: "tmp", offset: 0, dtype: "float32", shape: [8], ...v }, {
            name: "sum2d",
            var: "tmp",
            offset: 0,
            dtype: "float32",
            shape: [2, 4],
          }],
        }),
      );
    await refused(view({ offset: 40 }), /tensor "sum" does not fit in "tmp" \(64 bytes\)/);
    await refused(view({ shape: [9, 2] }), /tensor "sum" does not fit in "tmp"/);
    await refused(view({ var: "nowhere" }), /tensor "sum" lies in unknown var "nowhere"/);
    await refused(view({ dtype: "complex64" }), /tensor "sum" has unknown dtype "complex64"/);
    await refused(view({ shape: [0, 8] }), /tensor "sum" needs a shape of at most 8 positive integers/);
    await refused(
      patchMember(buildCustomOpNeff(spec()), "sg00/Pool.json", (p) => {
        (p.tensors as Record<string, unknown>).x = { var: "tmp", offset: 0, dtype: "float32", shape: [8] };
      }),
      /tensor "x" has the name of a var/,
    );
  }, 60_000);

  test("a call that writes into an input through a view, or names a view of rank 5, is refused", async () => {
    const intoInput = spec({
      views: [...spec().views!, { name: "xv", var: "x", offset: 0, dtype: "float32", shape: [8] }],
      calls: [{ opcode: 1, inputs: ["x", "w"], outputs: ["xv"], ints: [0, 1, 8, 1, 1] }, spec().calls[1]],
    });
    await refused(buildCustomOpNeff(intoInput), /call 0 writes input "xv"/);
    const rank5 = spec({
      views: [{ name: "sum", var: "tmp", offset: 0, dtype: "float32", shape: [1, 1, 2, 2, 2] }, spec().views![1]],
    });
    await refused(buildCustomOpNeff(rank5), /tensor "sum" has rank 5 > 4/);
  }, 60_000);

  test(
    "a virtual var without a size, a scalar that is not a 64-bit integer, and an unbacked weight are refused",
    async () => {
      await refused(
        patchMember(buildCustomOpNeff(spec()), "sg00/def.json", (d) => {
          delete (d.var as Record<string, Record<string, unknown>>).tmp.size;
        }),
        /virtual var "tmp" needs a positive size/,
      );
      for (const bad of ["1e3", "9223372036854775808", "0x10", 1.5]) {
        await refused(
          patchMember(buildCustomOpNeff(spec()), "sg00/Pool.json", (p) => {
            (p.calls as Array<{ ints: unknown[] }>)[1].ints[2] = bad;
          }),
          /call 1 has a scalar that is not a 64-bit integer/,
        );
      }
      expect(() => buildCustomOpNeff(spec({ weights: [{ ...t("w", [8]), data: new Uint8Array(8) }] }))).toThrow(
        'weight "w" has 8 bytes, its shape needs 32',
      );
      expect(() => buildCustomOpNeff(spec({ buffers: [{ name: "x", size: 64 }] }))).toThrow(
        'the name "x" is used twice',
      );
    },
    60_000,
  );
});
