import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { attr, checkOp, type TensorSpec } from "./_testing.ts";

const harness = await OpHarness.create();

const i64 = (name: string, data: number[]): TensorSpec => ({
  name,
  dtype: "int64",
  shape: [data.length],
  data,
  constant: true,
});

describe("shape.copy against onnxruntime", () => {
  test("Reshape(), Flatten(), Squeeze(), Unsqueeze(), Identity() and Dropout() copy bytes of any dtype", async () => {
    for (const dtype of ["float32", "int64", "bool", "uint8"] as const) {
      await checkOp(harness, {
        opType: "Reshape",
        inputs: [{ name: "x", dtype, shape: [2, 3, 4] }, i64("s", [4, -1])],
        outputs: ["y"],
      });
      await checkOp(harness, {
        opType: "Flatten",
        attributes: { axis: attr.i(2) },
        inputs: [{ name: "x", dtype, shape: [2, 3, 4, 5] }],
        outputs: ["y"],
      });
      await checkOp(harness, {
        opType: "Squeeze",
        inputs: [{ name: "x", dtype, shape: [1, 7, 1] }, i64("a", [0, 2])],
        outputs: ["y"],
      });
      await checkOp(harness, {
        opType: "Unsqueeze",
        inputs: [{ name: "x", dtype, shape: [7] }, i64("a", [0, 2])],
        outputs: ["y"],
      });
      await checkOp(harness, { opType: "Identity", inputs: [{ name: "x", dtype, shape: [] }], outputs: ["y"] });
    }
    await checkOp(harness, { opType: "Dropout", inputs: [{ name: "x", shape: [5, 5] }], outputs: ["y"] });
  }, 60_000);
});

describe("shape.strided_copy against onnxruntime", () => {
  test("Transpose() with default and explicit perms up to rank 6", async () => {
    await checkOp(harness, { opType: "Transpose", inputs: [{ name: "x", shape: [3, 5] }], outputs: ["y"] });
    await checkOp(harness, {
      opType: "Transpose",
      attributes: { perm: attr.ints([0, 2, 1, 3]) },
      inputs: [{ name: "x", shape: [2, 3, 4, 5] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Transpose",
      attributes: { perm: attr.ints([3, 1, 0, 2]) },
      inputs: [{ name: "x", dtype: "int64", shape: [2, 1, 4, 3] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Transpose",
      attributes: { perm: attr.ints([5, 0, 4, 1, 3, 2]) },
      inputs: [{ name: "x", shape: [2, 3, 2, 3, 2, 3] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Transpose",
      inputs: [{ name: "x", dtype: "uint8", shape: [17, 9] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("Slice() with steps, negative indices, negative steps and clamped ends", async () => {
    const x = { name: "x", shape: [6, 7, 8] };
    const cases: Array<[number[], number[], number[]?, number[]?]> = [
      [[1], [4]],
      [[0, 2], [-1, 7], [0, 1]],
      [[-1], [-1000], [2], [-1]],
      [[5, 6], [0, 0], [1, 2], [-2, -3]],
      [[0, 0, 0], [6, 7, 8], [0, 1, 2], [2, 3, 3]],
      [[2], [1e9], [-1], [1]],
    ];
    for (const [starts, ends, axes, steps] of cases) {
      const inputs: Array<TensorSpec | null> = [
        x,
        i64("s", starts),
        i64("e", ends),
        axes ? i64("a", axes) : null,
        steps ? i64("t", steps) : null,
      ];
      await checkOp(harness, { opType: "Slice", inputs, outputs: ["y"] });
    }
  }, 60_000);

  test("Expand() and Tile()", async () => {
    await checkOp(harness, {
      opType: "Expand",
      inputs: [{ name: "x", shape: [3, 1] }, i64("s", [2, 3, 4])],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Expand",
      inputs: [{ name: "x", dtype: "int32", shape: [1] }, i64("s", [5])],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Tile",
      inputs: [{ name: "x", shape: [2, 3] }, i64("r", [3, 2])],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Tile",
      inputs: [{ name: "x", dtype: "int64", shape: [2, 1, 3] }, i64("r", [1, 4, 1])],
      outputs: ["y"],
    });
  }, 60_000);

  test("DepthToSpace() in DCR and CRD modes and SpaceToDepth()", async () => {
    for (const mode of ["DCR", "CRD"]) {
      await checkOp(harness, {
        opType: "DepthToSpace",
        attributes: { blocksize: attr.i(2), mode: attr.s(mode) },
        inputs: [{ name: "x", shape: [2, 8, 3, 5] }],
        outputs: ["y"],
      });
    }
    await checkOp(harness, {
      opType: "SpaceToDepth",
      attributes: { blocksize: attr.i(3) },
      inputs: [{ name: "x", shape: [1, 2, 6, 9] }],
      outputs: ["y"],
    });
  }, 60_000);
});

describe("shape.concat and shape.split against onnxruntime", () => {
  test("Concat() along every axis, with 1 to 5 inputs", async () => {
    await checkOp(harness, {
      opType: "Concat",
      attributes: { axis: attr.i(0) },
      inputs: [{ name: "a", shape: [3] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Concat",
      attributes: { axis: attr.i(1) },
      inputs: [{ name: "a", shape: [2, 3, 4] }, { name: "b", shape: [2, 1, 4] }, { name: "c", shape: [2, 5, 4] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Concat",
      attributes: { axis: attr.i(-1) },
      inputs: [1, 2, 3, 4, 5].map((k) => ({ name: `x${k}`, dtype: "int64" as const, shape: [3, k] })),
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Concat",
      attributes: { axis: attr.i(0) },
      inputs: [{ name: "a", shape: [100, 7] }, { name: "b", shape: [33, 7] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("Split() by sizes and into equal parts", async () => {
    await checkOp(harness, {
      opType: "Split",
      attributes: { axis: attr.i(1) },
      inputs: [{ name: "x", shape: [2, 9, 3] }, i64("s", [2, 3, 4])],
      outputs: ["a", "b", "c"],
    });
    await checkOp(harness, {
      opType: "Split",
      attributes: { axis: attr.i(0), num_outputs: attr.i(2) },
      inputs: [{ name: "x", dtype: "int32", shape: [10, 3] }],
      outputs: ["a", "b"],
    });
    await checkOp(harness, {
      opType: "Split",
      attributes: { axis: attr.i(-1), num_outputs: attr.i(3) },
      inputs: [{ name: "x", shape: [4, 7] }],
      outputs: ["a", "b", "c"],
    });
  }, 60_000);
});

describe("shape.gather and shape.pad against onnxruntime", () => {
  test("Gather() with int64 and int32 indices, negative indices, scalar indices, any axis", async () => {
    await checkOp(harness, {
      opType: "Gather",
      inputs: [{ name: "x", shape: [10, 16] }, {
        name: "i",
        dtype: "int64",
        shape: [2, 3],
        data: [0, 9, -1, 4, 4, -10],
      }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Gather",
      attributes: { axis: attr.i(1) },
      inputs: [{ name: "x", shape: [3, 5, 4] }, { name: "i", dtype: "int32", shape: [4], data: [4, 0, -2, 1] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Gather",
      attributes: { axis: attr.i(-1) },
      inputs: [{ name: "x", dtype: "int64", shape: [3, 5] }, { name: "i", dtype: "int64", shape: [], data: [3] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Gather",
      inputs: [{ name: "emb", shape: [50, 24], constant: true }, {
        name: "ids",
        dtype: "int64",
        shape: [2, 7],
        range: [0, 49],
      }],
      outputs: ["y"],
    });
  }, 60_000);

  test("Pad() constant, edge, reflect and wrap, with axes and negative pads", async () => {
    const x = { name: "x", shape: [3, 4, 5] };
    for (const mode of ["constant", "edge", "reflect", "wrap"]) {
      await checkOp(harness, {
        opType: "Pad",
        attributes: { mode: attr.s(mode) },
        inputs: [x, i64("p", [1, 0, 2, 2, 3, 1])],
        outputs: ["y"],
      });
    }
    await checkOp(harness, {
      opType: "Pad",
      inputs: [x, i64("p", [1, 2]), { name: "v", shape: [], data: [-7.5], constant: true }, i64("a", [-1])],
      outputs: ["y"],
    });
    await checkOp(harness, { opType: "Pad", inputs: [x, i64("p", [0, -1, 1, 0, -2, 0])], outputs: ["y"] });
    // A negative pad facing a positive one: the padding reads the cropped input, as onnxruntime does (wrap of
    // [a, b, c] with pads [1, -1] is [b, a, b]; it was [c, a, b], wrapped from the uncropped input).
    for (const mode of ["edge", "reflect", "wrap"]) {
      await checkOp(harness, {
        opType: "Pad",
        attributes: { mode: attr.s(mode) },
        inputs: [x, i64("p", [1, -1, 2, -1, 2, 0])],
        outputs: ["y"],
      });
      await checkOp(harness, {
        opType: "Pad",
        attributes: { mode: attr.s(mode) },
        inputs: [{ name: "x", shape: [3] }, i64("p", [1, -1])],
        outputs: ["y"],
      });
    }
    await checkOp(harness, {
      opType: "Pad",
      inputs: [{ name: "x", dtype: "int64", shape: [2, 2] }, i64("p", [1, 1, 1, 1])],
      outputs: ["y"],
    });
  }, 60_000);
});
