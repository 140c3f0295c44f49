import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { attr, checkFused, checkOp } from "./_testing.ts";

const harness = await OpHarness.create();

describe("norm.layer_norm_f32 against onnxruntime", () => {
  test("LayerNormalization() over the last axis, the last two, with and without bias", async () => {
    for (
      const [shape, axis] of [[[4, 16], -1], [[2, 3, 10], -1], [[2, 3, 10], 1], [[1, 768], -1], [[5, 1], -1], [
        [3, 33],
        1,
      ]] as const
    ) {
      const normalized = shape.slice(axis < 0 ? shape.length + axis : axis);
      for (const bias of [true, false]) {
        await checkOp(harness, {
          opType: "LayerNormalization",
          attributes: { axis: attr.i(axis), epsilon: attr.f(1e-5) },
          inputs: [
            { name: "x", shape: [...shape], range: [-3, 5] },
            { name: "scale", shape: [...normalized], constant: true },
            bias ? { name: "b", shape: [...normalized], constant: true } : null,
          ],
          outputs: ["y"],
          opset: 17,
        });
      }
    }
  }, 60_000);

  test(
    "LayerNormalization() with a Scale and B that broadcast along a normalized axis (ONNX spec: unidirectional)",
    async () => {
      // Each was refused ("neither a scalar nor the normalized shape") before.
      for (
        const [scale, b, constant] of [
          [[1, 4], null, true],
          [[4], [3, 1], true],
          [[3, 1], [1, 1, 4], false],
          [[1, 1, 4], [4], false],
        ] as const
      ) {
        await checkOp(harness, {
          opType: "LayerNormalization",
          attributes: { axis: attr.i(-2), epsilon: attr.f(1e-5) },
          inputs: [
            { name: "x", shape: [2, 3, 4], range: [-3, 5] },
            { name: "scale", shape: [...scale], constant },
            b ? { name: "b", shape: [...b], constant } : null,
          ],
          outputs: ["y"],
          opset: 17,
        });
      }
    },
    60_000,
  );

  test("LayerNormalization() with its Mean and InvStdDev outputs", async () => {
    await checkOp(harness, {
      opType: "LayerNormalization",
      inputs: [{ name: "x", shape: [3, 4, 12] }, { name: "scale", shape: [12] }, { name: "b", shape: [12] }],
      outputs: ["y", "mean", "inv"],
      opset: 17,
    });
  }, 60_000);
});

describe("nrt.LayerNorm against the decomposed pattern in onnxruntime", () => {
  const CONSTANTS = [
    { name: "eps", shape: [], data: [1e-5], constant: true },
    { name: "two", shape: [], data: [2], constant: true },
    { name: "axes", dtype: "int64" as const, shape: [1], data: [-1], constant: true },
  ];
  const pattern = (affine: boolean) => [
    { opType: "ReduceMean", inputs: ["x", "axes"], outputs: ["mean"] },
    { opType: "Sub", inputs: ["x", "mean"], outputs: ["d"] },
    { opType: "Pow", inputs: ["d", "two"], outputs: ["d2"] },
    { opType: "ReduceMean", inputs: ["d2", "axes"], outputs: ["var"] },
    { opType: "Add", inputs: ["var", "eps"], outputs: ["ve"] },
    { opType: "Sqrt", inputs: ["ve"], outputs: ["sd"] },
    { opType: "Div", inputs: ["d", "sd"], outputs: affine ? ["n"] : ["y"] },
    ...(affine
      ? [{ opType: "Mul", inputs: ["n", "gamma"], outputs: ["ng"] }, {
        opType: "Add",
        inputs: ["ng", "beta"],
        outputs: ["y"],
      }]
      : []),
  ];

  test("LayerNorm() with scale and bias, and without either", async () => {
    await checkFused(harness, {
      opType: "LayerNorm",
      attributes: { epsilon: attr.f(1e-5) },
      inputs: [
        { name: "x", shape: [2, 5, 32], range: [-2, 4] },
        { name: "gamma", shape: [32], constant: true },
        { name: "beta", shape: [32], constant: true },
      ],
      output: "y",
      reference: pattern(true),
      referenceInputs: CONSTANTS,
    });
    await checkFused(harness, {
      opType: "LayerNorm",
      attributes: { epsilon: attr.f(1e-5) },
      inputs: [{ name: "x", shape: [7, 19], range: [-2, 4] }],
      output: "y",
      reference: pattern(false),
      referenceInputs: CONSTANTS,
    });
  }, 60_000);
});

describe("norm.batch_norm_f32 and norm.instance_norm_f32 against onnxruntime", () => {
  test("BatchNormalization() in inference mode over NCHW, NC and NCW", async () => {
    for (const shape of [[2, 3, 5, 7], [4, 6], [1, 5, 9], [1, 1, 1, 1]]) {
      const c = shape[1];
      await checkOp(harness, {
        opType: "BatchNormalization",
        attributes: { epsilon: attr.f(1e-3) },
        inputs: [
          { name: "x", shape },
          { name: "scale", shape: [c], constant: true },
          { name: "b", shape: [c], constant: true },
          { name: "mean", shape: [c], constant: true },
          { name: "var", shape: [c], constant: true, range: [0.5, 2] },
        ],
        outputs: ["y"],
      });
    }
  }, 60_000);

  test("InstanceNormalization() over NCHW and NCW", async () => {
    for (const shape of [[2, 3, 5, 7], [1, 4, 33]]) {
      const c = shape[1];
      await checkOp(harness, {
        opType: "InstanceNormalization",
        inputs: [{ name: "x", shape, range: [-1, 3] }, { name: "scale", shape: [c] }, { name: "b", shape: [c] }],
        outputs: ["y"],
      });
    }
  }, 60_000);
});
