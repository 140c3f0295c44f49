import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { type Attr, attr, checkOp } from "./_testing.ts";

const harness = await OpHarness.create();

/** Edge shapes: rank 0, one element, sizes not divisible by 4 or 8, rank 4. */
const SHAPES = [[], [1], [7], [3, 13], [2, 3, 5, 9]];

interface Unary {
  readonly op: string;
  readonly range?: readonly [number, number];
  readonly attributes?: Readonly<Record<string, Attr>>;
  readonly opset?: number;
}

const UNARY: readonly Unary[] = [
  { op: "Relu" },
  { op: "LeakyRelu", attributes: { alpha: attr.f(0.2) } },
  { op: "Sigmoid", range: [-12, 12] },
  { op: "Tanh", range: [-6, 6] },
  { op: "Exp", range: [-30, 30] },
  { op: "Log", range: [1e-3, 50] },
  { op: "Sqrt", range: [0, 100] },
  { op: "Erf", range: [-5, 5] },
  { op: "Gelu", range: [-6, 6] },
  { op: "Gelu", range: [-6, 6], attributes: { approximate: attr.s("tanh") } },
  { op: "Neg" },
  { op: "Abs" },
  { op: "Reciprocal", range: [0.1, 4] },
  { op: "Floor", range: [-9, 9] },
  { op: "Ceil", range: [-9, 9] },
  { op: "Round", range: [-9, 9] },
  { op: "Softplus", range: [-30, 30] },
  { op: "HardSigmoid", range: [-4, 4], attributes: { alpha: attr.f(0.25), beta: attr.f(0.4) } },
  { op: "HardSwish", range: [-5, 5] },
  { op: "Elu", range: [-5, 5], attributes: { alpha: attr.f(0.7) } },
  { op: "Selu", range: [-5, 5] },
  { op: "Celu", range: [-5, 5], attributes: { alpha: attr.f(1.5) } },
  { op: "Softsign", range: [-9, 9] },
  { op: "ThresholdedRelu", range: [-2, 2], attributes: { alpha: attr.f(0.5) } },
  { op: "Sign", range: [-2, 2] },
  { op: "Mish", range: [-10, 10] },
];

describe("activation.unary_f32 against onnxruntime", () => {
  for (const u of UNARY) {
    const label = u.attributes ? `${u.op}(${Object.keys(u.attributes).join(", ")})` : `${u.op}()`;
    test(`${label} matches over rank 0 to 4`, async () => {
      for (const shape of SHAPES) {
        await checkOp(harness, {
          opType: u.op,
          attributes: u.attributes,
          inputs: [{ name: "x", shape, range: u.range }],
          outputs: ["y"],
          opset: u.opset,
          seed: shape.length + 1,
        });
      }
    }, 60_000);
  }

  test("Erf() and Tanh() near zero, where only the relative error counts", async () => {
    for (const op of ["Erf", "Tanh", "Sigmoid", "Exp", "Gelu"]) {
      await checkOp(harness, {
        opType: op,
        inputs: [{ name: "x", shape: [64], range: [-1e-3, 1e-3] }],
        outputs: ["y"],
        atol: 0,
      });
    }
  }, 60_000);

  test("Clip() with constant bounds, one bound, and opset-10 attributes", async () => {
    const x = { name: "x", shape: [4, 9], range: [-3, 3] } as const;
    await checkOp(harness, {
      opType: "Clip",
      inputs: [x, { name: "lo", shape: [], data: [-1], constant: true }, {
        name: "hi",
        shape: [],
        data: [0.5],
        constant: true,
      }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Clip",
      inputs: [x, null, { name: "hi", shape: [], data: [6], constant: true }],
      outputs: ["y"],
    });
    await checkOp(harness, { opType: "Clip", inputs: [x], outputs: ["y"] });
    await checkOp(harness, {
      opType: "Clip",
      attributes: { min: attr.f(0), max: attr.f(1) },
      inputs: [x],
      outputs: ["y"],
      opset: 10,
    });
  }, 60_000);

  test("Relu() over a tensor large enough for all 8 cores to take a share", async () => {
    await checkOp(harness, { opType: "Relu", inputs: [{ name: "x", shape: [3, 1000, 7] }], outputs: ["y"] });
    await checkOp(harness, { opType: "Tanh", inputs: [{ name: "x", shape: [4099], range: [-4, 4] }], outputs: ["y"] });
  }, 60_000);
});
