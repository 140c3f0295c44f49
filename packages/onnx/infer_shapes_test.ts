import { describe, expect, test } from "bun:test";
import * as ort from "onnxruntime-web";
import { ortSession } from "../../kernels/ops/_onnx_model.ts";
import type { OpDtype } from "../../kernels/ops/op_node.ts";
import { type FoldedGraph, foldGraph } from "./fold.ts";
import { type BuilderAttribute, float, OnnxBuilder } from "./onnx_builder.ts";
import { DEFAULT_LIMITS, parseModel } from "./parse.ts";
import { ConstTensor } from "./tensor.ts";

ort.env.wasm.numThreads = 1;

interface In {
  readonly shape: readonly number[];
  readonly dtype?: OpDtype;
  /** A constant input (an initializer) instead of a runtime one. */
  readonly value?: ConstTensor;
}

/** A one-node model over `ins`; returns its bytes, the runtime inputs and the output names. */
function single(op: string, ins: readonly (In | null)[], attrs: Record<string, BuilderAttribute> = {}, outputs = 1) {
  const b = new OnnxBuilder(op);
  const names = ins.map((v, i) => {
    if (v === null) return "";
    if (v.value !== undefined) return b.initializer(`c${i}`, v.value);
    return b.input(`in${i}`, v.dtype ?? "float32", v.shape);
  });
  const outs = b.nodeN(op, names, attrs, { outputs: Array.from({ length: outputs }, (_, i) => `out${i}`) });
  const dtypes: Record<string, OpDtype[]> = { ArgMax: ["int64"], TopK: ["float32", "int64"], Cast: ["int64"] };
  outs.forEach((o, i) => b.output(o, dtypes[op]?.[i] ?? "float32", undefined));
  return { bytes: b.toBytes(), outs };
}

function fold(bytes: Uint8Array, inputShapes: Record<string, number[]> = {}): FoldedGraph {
  return foldGraph(parseModel(bytes), { inputShapes, limits: DEFAULT_LIMITS, supportedOps: [], maxFoldBytes: 1 << 26 });
}

const i64 = (values: number[]) => ({
  shape: [values.length],
  value: ConstTensor.fromNumbers("int64", [values.length], values),
});
const f32 = (shape: number[]): In => ({ shape });

/** The cases: op, inputs, attributes, number of outputs. */
const CASES: [string, (In | null)[], Record<string, BuilderAttribute>, number?][] = [
  ["Add", [f32([2, 1, 4]), f32([3, 1])], {}],
  ["Where", [{ shape: [3, 1], dtype: "bool" }, f32([1, 4]), f32([3, 4])], {}],
  ["MatMul", [f32([2, 1, 3, 5]), f32([4, 5, 6])], {}],
  ["MatMul", [f32([5]), f32([2, 5, 6])], {}],
  ["MatMul", [f32([2, 3, 5]), f32([5])], {}],
  ["Gemm", [f32([5, 3]), f32([4, 5]), f32([4])], { transA: 1, transB: 1 }],
  ["Conv", [f32([1, 4, 9, 7]), f32([6, 2, 3, 2]), f32([6])], {
    group: 2,
    strides: [2, 1],
    pads: [1, 0, 2, 1],
    dilations: [1, 2],
  }],
  ["Conv", [f32([2, 3, 10, 11]), f32([5, 3, 4, 3])], { strides: [3, 2], auto_pad: "SAME_LOWER" }],
  ["Conv", [f32([1, 2, 9]), f32([3, 2, 4])], { auto_pad: "VALID", strides: [2] }],
  ["MaxPool", [f32([1, 2, 10, 9])], { kernel_shape: [3, 2], strides: [2, 2], ceil_mode: 1 }],
  ["AveragePool", [f32([1, 2, 7, 7])], { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] }],
  ["GlobalAveragePool", [f32([2, 3, 5, 4])], {}],
  ["Reshape", [f32([2, 3, 4]), i64([0, -1, 2])], {}],
  ["Flatten", [f32([2, 3, 4, 5])], { axis: 2 }],
  ["Flatten", [f32([2, 3])], { axis: 0 }],
  // A negative axis counts from the back of [-r, r]: -1 is r - 1 (it was read as r, giving [32, 3] here).
  ["Flatten", [f32([4, 2, 4, 3])], { axis: -2 }],
  ["Flatten", [f32([3, 4, 2])], { axis: -3 }],
  ["Flatten", [f32([3])], { axis: -1 }],
  ["Squeeze", [f32([1, 3, 1, 2]), i64([-2])], {}],
  ["Squeeze", [f32([1, 3, 1, 2])], {}],
  ["Unsqueeze", [f32([3, 2]), i64([0, -1])], {}],
  ["Concat", [f32([2, 3]), f32([2, 5])], { axis: -1 }],
  ["Split", [f32([2, 7]), i64([3, 4])], { axis: 1 }, 2],
  ["Split", [f32([6, 2])], {}, 3],
  ["Slice", [f32([5, 6, 7]), i64([1, -2]), i64([9223372036854775807, 0]), i64([0, 2]), i64([2, -1])], {}],
  ["Slice", [f32([10]), i64([-1]), i64([-9223372036854775807]), i64([0]), i64([-3])], {}],
  [
    "Gather",
    [f32([4, 5, 6]), { shape: [2, 3], value: ConstTensor.fromNumbers("int64", [2, 3], [0, 1, 2, 3, -1, 0]) }],
    { axis: 1 },
  ],
  ["Transpose", [f32([2, 3, 4])], { perm: [2, 0, 1] }],
  ["Transpose", [f32([2, 3, 4])], {}],
  ["ReduceMean", [f32([2, 3, 4])], { axes: [0, -1], keepdims: 0 }],
  ["ReduceSum", [f32([2, 3, 4]), i64([1])], { keepdims: 1 }],
  ["ReduceMax", [f32([2, 3, 4])], {}],
  ["ArgMax", [f32([2, 3, 4])], { axis: 1, keepdims: 0 }],
  ["Expand", [f32([3, 1]), i64([2, 1, 4])], {}],
  ["Tile", [f32([2, 3]), i64([3, 2])], {}],
  ["Pad", [f32([2, 3]), i64([1, 0, 2, 3])], { mode: "constant" }],
  ["Softmax", [f32([2, 3, 4])], { axis: 1 }],
  ["LayerNormalization", [f32([2, 3, 4]), f32([4]), f32([4])], { axis: -1, epsilon: float(1e-5) }],
  ["BatchNormalization", [f32([2, 3, 4, 4]), f32([3]), f32([3]), f32([3]), {
    shape: [3],
    value: ConstTensor.fromNumbers("float32", [3], [1, 2, 3]),
  }], {}],
  ["DepthToSpace", [f32([1, 8, 2, 3])], { blocksize: 2 }],
  ["SpaceToDepth", [f32([1, 2, 4, 6])], { blocksize: 2 }],
  ["TopK", [f32([3, 7]), i64([4])], { axis: 1 }, 2],
  ["Cast", [f32([2, 3])], { to: 7 }],
];

describe("inferNode()", () => {
  for (const [op, ins, attrs, outputs] of CASES) {
    const shapes = ins.map((i) => (i ? `[${i.shape}]` : "-")).join(" ");
    test(`inferNode() gives ${op} the shapes onnxruntime computes (${shapes})`, async () => {
      const { bytes, outs } = single(op, ins, attrs, outputs ?? 1);
      const feeds: Record<string, ort.Tensor> = {};
      ins.forEach((v, i) => {
        if (v === null || v.value !== undefined) return;
        const n = v.shape.reduce((a, b) => a * b, 1);
        feeds[`in${i}`] = v.dtype === "bool"
          ? new ort.Tensor("bool", new Uint8Array(n).fill(1), [...v.shape])
          : new ort.Tensor("float32", Float32Array.from({ length: n }, (_, k) => (k % 7) - 3), [...v.shape]);
      });
      const session = await ortSession(bytes);
      const ref = await session.run(feeds);
      const g = fold(bytes);
      for (const o of outs) expect({ o, shape: [...g.values.get(o)!.shape] }).toEqual({ o, shape: [...ref[o].dims] });
    });
  }

  test("inferNode() refuses shapes that do not fit the op, naming the node and why", () => {
    const bad: [string, (In | null)[], Record<string, BuilderAttribute>, string][] = [
      ["Add", [f32([2, 3]), f32([4])], {}, "shapes [2,3] and [4] do not broadcast"],
      ["MatMul", [f32([2, 3]), f32([4, 5])], {}, "inner dimensions differ: [2,3] × [4,5]"],
      ["Reshape", [f32([2, 3]), i64([4, -1])], {}, "cannot reshape [2,3] to [4,-1]"],
      ["Conv", [f32([1, 3, 5, 5]), f32([4, 2, 3, 3])], {}, "X has 3 channels but W is [4,2,3,3] with group 1"],
      ["Transpose", [f32([2, 3])], { perm: [0, 0] }, "perm [0,0] is not a permutation of rank 2"],
      ["Squeeze", [f32([2, 3]), i64([0])], {}, "cannot squeeze axis 0 of size 2"],
      ["Concat", [f32([2, 3]), f32([3, 3])], { axis: 1 }, "input shapes [2,3], [3,3] differ outside axis 1"],
      ["Flatten", [f32([2, 3])], { axis: -3 }, "axis -3 is out of range [-2, 2]"],
      // The spec takes nothing here (the end clamps to dim - 1); onnxruntime takes the whole axis reversed.
      [
        "Slice",
        [f32([4]), i64([-1]), i64([2147483647]), i64([0]), i64([-1])],
        {},
        "ends[0] = INT32_MAX with the negative step -1 is read as empty by the ONNX spec",
      ],
      [
        "Slice",
        [
          f32([3, 4]),
          i64([0, 3]),
          {
            shape: [2],
            value: new ConstTensor("int64", [2], new Uint8Array(BigInt64Array.of(2n, 0x7fffffffffffffffn).buffer)),
          },
          i64([0, 1]),
          i64([1, -2]),
        ],
        {},
        "ends[1] = INT64_MAX with the negative step -2",
      ],
    ];
    for (const [op, ins, attrs, why] of bad) {
      const { bytes } = single(op, ins, attrs);
      expect(() => fold(bytes)).toThrow(`Cannot compile node "${op}_0" (${op}): ${why}`);
    }
  });

  test("inferNode() needs parameter inputs known at compile time", () => {
    const { bytes } = single("Reshape", [f32([2, 3]), { shape: [2], dtype: "int64" }]);
    expect(() => fold(bytes)).toThrow(
      'Cannot compile node "Reshape_0" (Reshape): input 1 (shape) must be known at compile time: ' +
        "a constant or computed from shapes and constants",
    );
  });
});
