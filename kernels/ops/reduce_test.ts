import { describe, expect, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { lowerNode } from "./lowering.ts";
import { attr, checkOp, type TensorSpec } from "./_testing.ts";

const harness = await OpHarness.create();

const REDUCES = [
  "ReduceSum",
  "ReduceMean",
  "ReduceMax",
  "ReduceMin",
  "ReduceProd",
  "ReduceSumSquare",
  "ReduceL1",
  "ReduceL2",
  "ReduceLogSum",
  "ReduceLogSumExp",
];

/** [shape, axes, keepdims]; axes undefined = all. */
const AXES: ReadonlyArray<[number[], number[] | undefined, number]> = [
  [[7], [0], 1],
  [[1], undefined, 0],
  [[3, 5], [1], 1],
  [[3, 5], [0], 0],
  [[2, 3, 4, 5], [1, 3], 1],
  [[2, 3, 4, 5], [0, 2], 0],
  [[2, 3, 4, 5], [-1, -2], 1],
  [[2, 3, 4, 5], undefined, 0],
  [[4, 1, 6], [1], 0],
  [[6, 9], [0, 1], 1],
];

function positive(op: string): boolean {
  return op === "ReduceLogSum" || op === "ReduceProd";
}

describe("reduce.reduce_f32 against onnxruntime (opset 18: axes as an input)", () => {
  for (const op of REDUCES) {
    test(`${op}() over any axes, with and without keepdims`, async () => {
      for (const [shape, axes, keepdims] of AXES) {
        const inputs: Array<TensorSpec | null> = [{ name: "x", shape, range: positive(op) ? [0.5, 1.5] : [-1, 1] }];
        if (axes) inputs.push({ name: "axes", dtype: "int64", shape: [axes.length], data: axes, constant: true });
        await checkOp(harness, {
          opType: op,
          attributes: { keepdims: attr.i(keepdims) },
          inputs,
          outputs: ["y"],
          opset: 18,
        });
      }
    }, 60_000);
  }

  test("noop_with_empty_axes without axes applies each reduction's function to every element", async () => {
    // ReduceL1 of one element is |x|, ReduceSumSquare x², ReduceLogSum log x (the spec's reference computes
    // these); the input was copied unchanged, so ReduceL1 of -0.885 gave -0.885 where onnxruntime gives 0.885.
    for (const op of REDUCES) {
      await checkOp(harness, {
        opType: op,
        attributes: { noop_with_empty_axes: attr.i(1), keepdims: attr.i(0) },
        inputs: [{ name: "x", shape: [3, 4], range: positive(op) ? [0.5, 1.5] : [-1, 1] }],
        outputs: ["y"],
        opset: 18,
      });
    }
  }, 60_000);

  test("ReduceSum() with the axes attribute (opset 11) and noop_with_empty_axes (opset 18)", async () => {
    await checkOp(harness, {
      opType: "ReduceSum",
      attributes: { axes: attr.ints([0, 2]) },
      inputs: [{ name: "x", shape: [3, 4, 5] }],
      outputs: ["y"],
      opset: 11,
    });
    await checkOp(harness, {
      opType: "ReduceMean",
      attributes: { noop_with_empty_axes: attr.i(1) },
      inputs: [{ name: "x", shape: [3, 4] }],
      outputs: ["y"],
      opset: 18,
    });
  }, 60_000);

  test("a large reduction into few outputs runs as a partial call and a finishing call", async () => {
    const x = { name: "x", dtype: "float32", shape: [2, 100, 100] } as const;
    const y = { name: "y", dtype: "float32", shape: [2] } as const;
    const axes = {
      name: "axes",
      dtype: "int64",
      shape: [2],
      constant: new Uint8Array(new BigInt64Array([1n, 2n]).buffer),
    } as const;
    const calls = lowerNode({
      name: "r",
      domain: "",
      opType: "ReduceSum",
      attributes: { keepdims: 0 },
      inputs: [x, axes],
      outputs: [y],
    });
    expect(calls.map((c) => c.fn)).toEqual(["reduce_f32", "reduce_finish_f32"]);
    for (const op of REDUCES) {
      await checkOp(harness, {
        opType: op,
        attributes: { keepdims: attr.i(0) },
        inputs: [
          {
            name: "x",
            shape: [2, 100, 100],
            range: op === "ReduceProd" ? [0.99, 1.01] : positive(op) ? [0.5, 1.5] : [-1, 1],
          },
          { name: "axes", dtype: "int64", shape: [2], data: [1, 2], constant: true },
        ],
        outputs: ["y"],
        opset: 18,
        atol: 1e-6 * Math.sqrt(100 * 100),
      });
    }
  }, 60_000);
});

describe("reduce.softmax_f32 against onnxruntime", () => {
  for (const op of ["Softmax", "LogSoftmax", "Hardmax"]) {
    test(`${op}() over the last, a middle and the first axis`, async () => {
      for (
        const [shape, axis] of [[[7], -1], [[3, 10], -1], [[2, 5, 4], 1], [[4, 3, 2], 0], [[1, 1], 1], [
          [2, 3, 300],
          2,
        ]] as const
      ) {
        const range = op === "Hardmax" ? [-3, 3] as const : [-10, 10] as const;
        await checkOp(harness, {
          opType: op,
          attributes: { axis: attr.i(axis) },
          inputs: [{ name: "x", shape: [...shape], range }],
          outputs: ["y"],
        });
      }
    }, 60_000);
  }

  test("Softmax() at opset 11 flattens the axes from axis on", async () => {
    await checkOp(harness, {
      opType: "Softmax",
      inputs: [{ name: "x", shape: [2, 3, 4], range: [-5, 5] }],
      outputs: ["y"],
      opset: 11,
    });
    await checkOp(harness, {
      opType: "LogSoftmax",
      attributes: { axis: attr.i(0) },
      inputs: [{ name: "x", shape: [2, 3, 4] }],
      outputs: ["y"],
      opset: 11,
    });
  }, 60_000);

  test("Softmax() over a row longer than the cache of exponentials", async () => {
    await checkOp(harness, {
      opType: "Softmax",
      inputs: [{ name: "x", shape: [2, 7000], range: [-10, 10] }],
      outputs: ["y"],
    });
  }, 60_000);
});

describe("reduce.arg_f32 against onnxruntime", () => {
  test("ArgMax() and ArgMin() with keepdims and select_last_index", async () => {
    for (const op of ["ArgMax", "ArgMin"]) {
      for (const [shape, axis] of [[[9], 0], [[3, 6], 1], [[4, 3, 5], 1], [[4, 3, 5], -3]] as const) {
        for (const last of [0, 1]) {
          // Few distinct values, so ties exercise select_last_index.
          const n = shape.reduce((a: number, b: number) => a * b, 1);
          await checkOp(harness, {
            opType: op,
            attributes: { axis: attr.i(axis), keepdims: attr.i(last), select_last_index: attr.i(last) },
            inputs: [{ name: "x", shape: [...shape], data: Array.from({ length: n }, (_, i) => (i * 7) % 4) }],
            outputs: ["y"],
          });
        }
      }
    }
  }, 60_000);
});
