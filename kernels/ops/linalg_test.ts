import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { type Attr, attr, checkFused, checkOp } from "./_testing.ts";

const harness = await OpHarness.create();

// Dot products summed by onnxruntime in float32 carry its rounding error, which is absolute: about
// sqrt(K) · 2^-24 · |terms|. The floor near zero is 1e-6 · sqrt(K) for inputs in [-1, 1).
const floor = (k: number) => 1e-6 * Math.sqrt(k);

describe("linalg.gemm as MatMul against onnxruntime", () => {
  const CASES: ReadonlyArray<[number[], number[]]> = [
    [[1, 1], [1, 1]],
    [[5], [5]],
    [[7], [7, 3]],
    [[4, 9], [9]],
    [[3, 5], [5, 7]],
    [[13, 33], [33, 17]],
    [[64, 64], [64, 64]],
    [[1, 300], [300, 70]],
    [[2, 3, 8, 16], [16, 24]],
    [[2, 1, 5, 6], [3, 6, 4]],
    [[4, 1, 5, 6], [3, 6, 9]],
    [[2, 2, 7, 40], [2, 2, 40, 9]],
    [[70, 1100], [1100, 12]],
    [[3, 1, 20], [20, 10]],
    [[2, 1, 33], [2, 33, 5]],
    [[1, 2100], [2100, 40]],
  ];
  for (const [a, b] of CASES) {
    test(`MatMul() [${a}] x [${b}]`, async () => {
      const k = a[a.length - 1];
      await checkOp(harness, {
        opType: "MatMul",
        inputs: [{ name: "a", shape: a }, { name: "b", shape: b }],
        outputs: ["y"],
        atol: floor(k),
      });
    }, 60_000);
  }

  test("MatMul() with a constant weight, as models have", async () => {
    await checkOp(harness, {
      opType: "MatMul",
      inputs: [{ name: "a", shape: [2, 7, 48] }, { name: "w", shape: [48, 40], constant: true }],
      outputs: ["y"],
      atol: floor(48),
    });
  }, 60_000);
});

describe("linalg.gemm as Gemm against onnxruntime", () => {
  const SHAPES: ReadonlyArray<[number, number, number]> = [[1, 1, 1], [3, 5, 7], [1, 64, 10], [4, 100, 33], [
    37,
    20,
    19,
  ]];
  for (const [m, k, n] of SHAPES) {
    for (const transA of [0, 1]) {
      for (const transB of [0, 1]) {
        test(`Gemm() M=${m} K=${k} N=${n} transA=${transA} transB=${transB}`, async () => {
          await checkOp(harness, {
            opType: "Gemm",
            attributes: { transA: attr.i(transA), transB: attr.i(transB), alpha: attr.f(0.75), beta: attr.f(1.5) },
            inputs: [
              { name: "a", shape: transA ? [k, m] : [m, k] },
              { name: "b", shape: transB ? [n, k] : [k, n], constant: true },
              { name: "c", shape: [n] },
            ],
            outputs: ["y"],
            atol: floor(k),
          });
        }, 60_000);
      }
    }
  }

  test("Gemm() with C broadcast from [M, 1], [1, 1], a full [M, N] and no C", async () => {
    for (const c of [[6, 1], [1, 1], [6, 5], null]) {
      await checkOp(harness, {
        opType: "Gemm",
        inputs: [{ name: "a", shape: [6, 11] }, { name: "b", shape: [11, 5] }, c ? { name: "c", shape: c } : null],
        outputs: ["y"],
        atol: floor(11),
      });
    }
  }, 60_000);
});

describe("nrt.FusedGemm against the Gemm/MatMul + Add + activation graph in onnxruntime", () => {
  const ACTS: ReadonlyArray<[string, string, Record<string, Attr>?]> = [
    ["", ""],
    ["Relu", "Relu"],
    ["Sigmoid", "Sigmoid"],
    ["Tanh", "Tanh"],
    ["Gelu", "Gelu"],
    ["GeluTanh", "Gelu", { approximate: attr.s("tanh") }],
    ["LeakyRelu", "LeakyRelu", { alpha: attr.f(0.1) }],
  ];
  for (const [act, onnxOp, attrs] of ACTS) {
    test(`FusedGemm(activation "${act}") of a batched MatMul with a bias`, async () => {
      const params: Record<string, Attr> = act === "LeakyRelu" ? { activation_params: attr.floats([0.1]) } : {};
      await checkFused(harness, {
        opType: "FusedGemm",
        attributes: { activation: attr.s(act), ...params },
        inputs: [{ name: "a", shape: [2, 9, 24] }, { name: "w", shape: [24, 13], constant: true }, {
          name: "bias",
          shape: [13],
          constant: true,
        }],
        output: "y",
        reference: [
          { opType: "MatMul", inputs: ["a", "w"], outputs: ["ab"] },
          { opType: "Add", inputs: ["ab", "bias"], outputs: act ? ["z"] : ["y"] },
          ...(act ? [{ opType: onnxOp, inputs: ["z"], outputs: ["y"], attributes: attrs }] : []),
        ],
        atol: floor(24),
      });
    }, 60_000);
  }

  test("FusedGemm() of a MatMul with a 1-D operand: C broadcasts to Y, which lacks that operand's axis", async () => {
    // A [2,2,3] · b [3] is Y [2,2]; C [2,1] varies along Y's first axis. It was matched against [2,2,1]
    // (batch, m, n), so it varied along m instead.
    for (
      const [a, b, c] of [
        [[2, 2, 3], [3], [2, 1]],
        [[3], [2, 3, 4], [2, 1]],
        [[3], [3, 4], [4]],
        [[5, 3], [3], [5]],
      ]
    ) {
      await checkFused(harness, {
        opType: "FusedGemm",
        inputs: [{ name: "a", shape: a }, { name: "b", shape: b }, { name: "c", shape: c, constant: true }],
        output: "y",
        reference: [
          { opType: "MatMul", inputs: ["a", "b"], outputs: ["ab"] },
          { opType: "Add", inputs: ["ab", "c"], outputs: ["y"] },
        ],
      });
    }
  }, 60_000);

  test("FusedGemm(transB = 1, Relu) of a Gemm, and Clip as ReLU6", async () => {
    await checkFused(harness, {
      opType: "FusedGemm",
      attributes: { transB: attr.i(1), activation: attr.s("Relu") },
      inputs: [{ name: "a", shape: [3, 50] }, { name: "w", shape: [20, 50], constant: true }, {
        name: "bias",
        shape: [20],
        constant: true,
      }],
      output: "y",
      reference: [
        { opType: "Gemm", inputs: ["a", "w", "bias"], outputs: ["z"], attributes: { transB: attr.i(1) } },
        { opType: "Relu", inputs: ["z"], outputs: ["y"] },
      ],
      atol: floor(50),
    });
    await checkFused(harness, {
      opType: "FusedGemm",
      attributes: { activation: attr.s("Clip"), activation_params: attr.floats([0, 0.5]) },
      inputs: [
        { name: "a", shape: [5, 30] },
        { name: "w", shape: [30, 16], constant: true },
        { name: "bias", shape: [16], constant: true },
      ],
      referenceInputs: [
        { name: "lo", shape: [], data: [0], constant: true },
        { name: "hi", shape: [], data: [0.5], constant: true },
      ],
      output: "y",
      reference: [
        { opType: "Gemm", inputs: ["a", "w", "bias"], outputs: ["z"] },
        { opType: "Clip", inputs: ["z", "lo", "hi"], outputs: ["y"] },
      ],
      atol: floor(30),
    });
  }, 60_000);

  test(
    "FusedGemm(permA, permB) reads transposed operands in place: attention's head transposes, a permuted A with transB",
    async () => {
      // q·kᵀ and attn·v as attention writes them: [N, S, H, Dh] transposed to [N, H, S, Dh] and [N, H, Dh, S].
      await checkFused(harness, {
        opType: "FusedGemm",
        attributes: { permA: attr.ints([0, 2, 1, 3]), permB: attr.ints([0, 2, 3, 1]), alpha: attr.f(0.25) },
        inputs: [{ name: "q", shape: [2, 5, 3, 8] }, { name: "k", shape: [2, 5, 3, 8] }],
        output: "y",
        reference: [
          { opType: "Transpose", inputs: ["q"], outputs: ["qt"], attributes: { perm: attr.ints([0, 2, 1, 3]) } },
          { opType: "Transpose", inputs: ["k"], outputs: ["kt"], attributes: { perm: attr.ints([0, 2, 3, 1]) } },
          { opType: "MatMul", inputs: ["qt", "kt"], outputs: ["s"] },
          { opType: "Mul", inputs: ["s", "quarter"], outputs: ["y"] },
        ],
        referenceInputs: [{ name: "quarter", shape: [], data: [0.25], constant: true }],
        atol: floor(8),
      });
      await checkFused(harness, {
        opType: "FusedGemm",
        attributes: { permB: attr.ints([0, 2, 1, 3]) },
        inputs: [{ name: "p", shape: [2, 3, 5, 5] }, { name: "v", shape: [2, 5, 3, 8] }],
        output: "y",
        reference: [
          { opType: "Transpose", inputs: ["v"], outputs: ["vt"], attributes: { perm: attr.ints([0, 2, 1, 3]) } },
          { opType: "MatMul", inputs: ["p", "vt"], outputs: ["y"] },
        ],
        atol: floor(5),
      });
      await checkFused(harness, {
        opType: "FusedGemm",
        attributes: { permA: attr.ints([1, 0, 2]), transB: attr.i(1), activation: attr.s("Relu") },
        inputs: [{ name: "a", shape: [7, 3, 12] }, { name: "b", shape: [3, 6, 12] }, { name: "c", shape: [6] }],
        output: "y",
        reference: [
          { opType: "Transpose", inputs: ["a"], outputs: ["at"], attributes: { perm: attr.ints([1, 0, 2]) } },
          { opType: "Transpose", inputs: ["b"], outputs: ["bt"], attributes: { perm: attr.ints([0, 2, 1]) } },
          { opType: "MatMul", inputs: ["at", "bt"], outputs: ["ab"] },
          { opType: "Add", inputs: ["ab", "c"], outputs: ["z"] },
          { opType: "Relu", inputs: ["z"], outputs: ["y"] },
        ],
        atol: floor(12),
      });
    },
    60_000,
  );

  test("FusedGemm() batched with transB (one dot product per output) and a C broadcast over rows", async () => {
    await checkFused(harness, {
      opType: "FusedGemm",
      attributes: { transB: attr.i(1), activation: attr.s("Tanh") },
      inputs: [{ name: "a", shape: [2, 3, 16] }, { name: "b", shape: [2, 5, 16] }, { name: "c", shape: [2, 1, 5] }],
      output: "y",
      reference: [
        { opType: "Transpose", inputs: ["b"], outputs: ["bt"], attributes: { perm: attr.ints([0, 2, 1]) } },
        { opType: "MatMul", inputs: ["a", "bt"], outputs: ["ab"] },
        { opType: "Add", inputs: ["ab", "c"], outputs: ["z"] },
        { opType: "Tanh", inputs: ["z"], outputs: ["y"] },
      ],
      atol: floor(16),
    });
  }, 60_000);
});
