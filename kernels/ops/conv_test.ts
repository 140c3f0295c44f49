import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { type Attr, attr, checkFused, checkOp } from "./_testing.ts";

const harness = await OpHarness.create();

const floor = (k: number) => 1e-6 * Math.sqrt(k);

interface ConvCase {
  readonly x: number[];
  readonly w: number[];
  readonly attributes?: Readonly<Record<string, Attr>>;
  readonly bias?: boolean;
}

const CONVS: readonly ConvCase[] = [
  { x: [1, 1, 1, 1], w: [1, 1, 1, 1] },
  { x: [1, 3, 8, 8], w: [4, 3, 3, 3], bias: true },
  { x: [2, 3, 11, 13], w: [5, 3, 3, 3], attributes: { pads: attr.ints([1, 1, 1, 1]) }, bias: true },
  { x: [1, 4, 17, 9], w: [6, 4, 3, 2], attributes: { strides: attr.ints([2, 3]), pads: attr.ints([1, 0, 2, 1]) } },
  { x: [1, 2, 15, 15], w: [3, 2, 3, 3], attributes: { dilations: attr.ints([2, 2]), pads: attr.ints([2, 2, 2, 2]) } },
  { x: [1, 8, 9, 10], w: [8, 2, 3, 3], attributes: { group: attr.i(4), pads: attr.ints([1, 1, 1, 1]) }, bias: true },
  {
    x: [2, 6, 12, 12],
    w: [6, 1, 3, 3],
    attributes: { group: attr.i(6), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) },
  },
  { x: [1, 4, 9, 21], w: [4, 1, 3, 3], attributes: { group: attr.i(4), pads: attr.ints([1, 1, 1, 1]) }, bias: true },
  {
    x: [1, 3, 10, 17],
    w: [3, 1, 5, 5],
    attributes: { group: attr.i(3), pads: attr.ints([2, 1, 2, 3]), dilations: attr.ints([1, 2]) },
  },
  { x: [1, 2, 4, 2], w: [2, 1, 3, 3], attributes: { group: attr.i(2), pads: attr.ints([1, 1, 1, 1]) } },
  { x: [1, 16, 7, 7], w: [32, 16, 1, 1], bias: true },
  { x: [1, 12, 10, 10], w: [20, 12, 1, 1], attributes: { strides: attr.ints([2, 2]) } },
  {
    x: [1, 3, 23, 23],
    w: [8, 3, 7, 7],
    attributes: { strides: attr.ints([2, 2]), pads: attr.ints([3, 3, 3, 3]) },
    bias: true,
  },
  { x: [1, 5, 9, 11], w: [7, 5, 3, 3], attributes: { auto_pad: attr.s("SAME_UPPER") } },
  { x: [1, 5, 9, 11], w: [7, 5, 4, 4], attributes: { auto_pad: attr.s("SAME_LOWER"), strides: attr.ints([2, 2]) } },
  { x: [1, 5, 9, 11], w: [7, 5, 3, 3], attributes: { auto_pad: attr.s("VALID"), strides: attr.ints([2, 1]) } },
  { x: [1, 130, 6, 6], w: [9, 130, 3, 3], attributes: { pads: attr.ints([1, 1, 1, 1]) }, bias: true },
  { x: [1, 4, 5, 5], w: [300, 4, 3, 3], bias: true },
  { x: [2, 4, 30], w: [6, 4, 5], attributes: { pads: attr.ints([2, 2]), strides: attr.ints([2]) }, bias: true },
  { x: [1, 3, 20], w: [4, 3, 3], attributes: { dilations: attr.ints([3]) } },
];

describe("conv.conv2d against onnxruntime", () => {
  for (const c of CONVS) {
    const k = c.w.slice(1).reduce((a, b) => a * b, 1);
    const what = Object.entries(c.attributes ?? {}).map(([name, v]) =>
      `${name}=${JSON.stringify(Object.values(v)[0])}`
    );
    test(`Conv() X [${c.x}] W [${c.w}]${c.bias ? " + B" : ""} ${what.join(" ")}`, async () => {
      await checkOp(harness, {
        opType: "Conv",
        attributes: c.attributes,
        inputs: [
          { name: "x", shape: c.x },
          { name: "w", shape: c.w, constant: true },
          c.bias ? { name: "b", shape: [c.w[0]], constant: true } : null,
        ],
        outputs: ["y"],
        atol: floor(k),
      });
    }, 60_000);
  }
});

describe("nrt.FusedConv against Conv + activation in onnxruntime", () => {
  test("FusedConv(Relu) and FusedConv(Clip 0..6)", async () => {
    const inputs = [
      { name: "x", shape: [1, 8, 14, 14] },
      { name: "w", shape: [16, 8, 3, 3], constant: true },
      { name: "b", shape: [16], constant: true },
    ];
    const conv = {
      opType: "Conv",
      inputs: ["x", "w", "b"],
      outputs: ["z"],
      attributes: { pads: attr.ints([1, 1, 1, 1]) },
    };
    await checkFused(harness, {
      opType: "FusedConv",
      attributes: { pads: attr.ints([1, 1, 1, 1]), activation: attr.s("Relu") },
      inputs,
      output: "y",
      reference: [conv, { opType: "Relu", inputs: ["z"], outputs: ["y"] }],
      atol: floor(72),
    });
    await checkFused(harness, {
      opType: "FusedConv",
      attributes: {
        pads: attr.ints([1, 1, 1, 1]),
        activation: attr.s("Clip"),
        activation_params: attr.floats([0, 0.5]),
      },
      inputs,
      output: "y",
      reference: [conv, { opType: "Clip", inputs: ["z", "lo", "hi"], outputs: ["y"] }],
      referenceInputs: [{ name: "lo", shape: [], data: [0], constant: true }, {
        name: "hi",
        shape: [],
        data: [0.5],
        constant: true,
      }],
      atol: floor(72),
    });
  }, 60_000);
});

describe("conv.pool2d against onnxruntime", () => {
  const POOLS: ReadonlyArray<[number[], Record<string, Attr>]> = [
    [[1, 2, 8, 8], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) }],
    [[2, 3, 9, 11], { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) }],
    [[1, 1, 10, 10], { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]), ceil_mode: attr.i(1) }],
    [[1, 2, 7, 7], { kernel_shape: attr.ints([2, 2]), auto_pad: attr.s("SAME_UPPER") }],
    [[1, 2, 7, 9], { kernel_shape: attr.ints([3, 2]), strides: attr.ints([1, 2]), pads: attr.ints([0, 1, 2, 0]) }],
    [[1, 3, 16], { kernel_shape: attr.ints([3]), strides: attr.ints([2]), pads: attr.ints([1, 1]) }],
    [[1, 1, 1, 1], { kernel_shape: attr.ints([1, 1]) }],
    [[1, 3, 21, 37], { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) }],
    [[1, 2, 13, 30], { kernel_shape: attr.ints([2, 3]), pads: attr.ints([1, 2, 0, 1]) }],
  ];
  for (const [x, attributes] of POOLS) {
    test(`MaxPool() and AveragePool() over [${x}] ${Object.keys(attributes).join(", ")}`, async () => {
      await checkOp(harness, { opType: "MaxPool", attributes, inputs: [{ name: "x", shape: x }], outputs: ["y"] });
      for (const include of [0, 1]) {
        await checkOp(harness, {
          opType: "AveragePool",
          attributes: { ...attributes, count_include_pad: attr.i(include) },
          inputs: [{ name: "x", shape: x }],
          outputs: ["y"],
        });
      }
    }, 60_000);
  }

  test("MaxPool() with dilations", async () => {
    await checkOp(harness, {
      opType: "MaxPool",
      attributes: { kernel_shape: attr.ints([2, 2]), dilations: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) },
      inputs: [{ name: "x", shape: [1, 2, 9, 9] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("GlobalAveragePool() and GlobalMaxPool() over 1-D, 2-D and a single large plane", async () => {
    for (const x of [[2, 5, 7, 7], [1, 3, 10], [1, 1, 128, 128], [1, 1, 1, 1]]) {
      for (const op of ["GlobalAveragePool", "GlobalMaxPool"]) {
        await checkOp(harness, { opType: op, inputs: [{ name: "x", shape: x }], outputs: ["y"] });
      }
    }
  }, 60_000);
});
