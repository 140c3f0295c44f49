import { describe, test } from "bun:test";
import { OpHarness } from "./harness.ts";
import { attr, checkOp, type TensorSpec } from "./_testing.ts";

const harness = await OpHarness.create();

/** Shape pairs that broadcast: equal, scalar, rank-0, size-1 axes on either side, odd sizes, rank 4. */
const PAIRS: ReadonlyArray<[number[], number[]]> = [
  [[37], [37]],
  [[1], [1]],
  [[], []],
  [[5, 7], []],
  [[], [3, 9]],
  [[4, 13], [13]],
  [[4, 13], [4, 1]],
  [[1, 13], [6, 1]],
  [[2, 3, 5, 7], [3, 1, 7]],
  [[2, 1, 5, 1], [1, 3, 1, 9]],
  [[8, 16, 33], [8, 16, 33]],
  [[1, 1, 1, 1], [1]],
];

describe("elementwise.binary_f32 against onnxruntime", () => {
  for (const op of ["Add", "Sub", "Mul", "Div", "Max", "Min"]) {
    test(`${op}() broadcasts like numpy`, async () => {
      for (const [a, b] of PAIRS) {
        const inputs: TensorSpec[] = [{ name: "a", shape: a }, {
          name: "b",
          shape: b,
          range: op === "Div" ? [0.5, 2] : undefined,
        }];
        await checkOp(harness, { opType: op, inputs, outputs: ["y"], seed: a.length * 10 + b.length });
      }
    }, 60_000);
  }

  test("Pow() with float exponents, a squared deviation and a constant cube", async () => {
    await checkOp(harness, {
      opType: "Pow",
      inputs: [{ name: "a", shape: [3, 17], range: [0.1, 3] }, { name: "b", shape: [17], range: [-2, 2] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Pow",
      inputs: [{ name: "a", shape: [2, 9] }, { name: "b", shape: [], data: [2], constant: true }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Pow",
      inputs: [{ name: "a", shape: [11] }, { name: "b", shape: [1], data: [3] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("PRelu() with a per-channel slope", async () => {
    await checkOp(harness, {
      opType: "PRelu",
      inputs: [{ name: "x", shape: [2, 3, 4, 5] }, { name: "s", shape: [3, 1, 1] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("Mod() with fmod = 1 on floats", async () => {
    await checkOp(harness, {
      opType: "Mod",
      attributes: { fmod: attr.i(1) },
      inputs: [{ name: "a", shape: [4, 6], range: [-10, 10] }, { name: "b", shape: [6], range: [1, 3] }],
      outputs: ["y"],
    });
  }, 60_000);

  test("variadic Max(), Min(), Sum() and Mean() over 1 to 3 inputs", async () => {
    for (const op of ["Max", "Min", "Sum", "Mean"]) {
      await checkOp(harness, { opType: op, inputs: [{ name: "a", shape: [3, 5] }], outputs: ["y"] });
      await checkOp(harness, {
        opType: op,
        inputs: [{ name: "a", shape: [3, 1] }, { name: "b", shape: [5] }, { name: "c", shape: [2, 1, 1] }],
        outputs: ["y"],
      });
    }
  }, 60_000);
});

describe("elementwise integer ops against onnxruntime", () => {
  for (const dtype of ["int32", "int64"] as const) {
    test(`Add(), Sub(), Mul(), Div(), Max(), Min(), Mod() on ${dtype}`, async () => {
      for (const op of ["Add", "Sub", "Mul", "Div", "Max", "Min", "Mod"]) {
        const divisor = op === "Div" || op === "Mod";
        await checkOp(harness, {
          opType: op,
          inputs: [
            { name: "a", dtype, shape: [3, 7], range: [-50, 50] },
            { name: "b", dtype, shape: [7], range: divisor ? [1, 9] : [-50, 50] },
          ],
          outputs: ["y"],
        });
      }
    }, 60_000);
  }

  test("Mod() with fmod = 1 on int64 keeps the dividend's sign", async () => {
    await checkOp(harness, {
      opType: "Mod",
      attributes: { fmod: attr.i(1) },
      inputs: [{ name: "a", dtype: "int64", shape: [9], range: [-20, 20] }, {
        name: "b",
        dtype: "int64",
        shape: [1],
        data: [-7],
      }],
      outputs: ["y"],
    });
  }, 60_000);
});

describe("elementwise comparisons, logic and Where against onnxruntime", () => {
  test("Equal(), Less(), LessOrEqual(), Greater(), GreaterOrEqual() on float32, int32 and int64", async () => {
    for (const op of ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]) {
      await checkOp(harness, {
        opType: op,
        inputs: [{ name: "a", shape: [4, 5], data: [...Array(20)].map((_, i) => i % 3) }, {
          name: "b",
          shape: [5],
          data: [0, 1, 2, 1, 0],
        }],
        outputs: ["y"],
      });
      for (const dtype of ["int32", "int64"] as const) {
        await checkOp(harness, {
          opType: op,
          inputs: [{ name: "a", dtype, shape: [2, 1, 6], range: [0, 3] }, {
            name: "b",
            dtype,
            shape: [3, 1],
            range: [0, 3],
          }],
          outputs: ["y"],
        });
      }
    }
  }, 60_000);

  test("And(), Or(), Xor(), Not() and Equal() on bool", async () => {
    for (const op of ["And", "Or", "Xor", "Equal"]) {
      await checkOp(harness, {
        opType: op,
        inputs: [{ name: "a", dtype: "bool", shape: [3, 8] }, { name: "b", dtype: "bool", shape: [8] }],
        outputs: ["y"],
      });
    }
    await checkOp(harness, { opType: "Not", inputs: [{ name: "a", dtype: "bool", shape: [17] }], outputs: ["y"] });
  }, 60_000);

  test("Where() broadcasts the condition and both branches", async () => {
    await checkOp(harness, {
      opType: "Where",
      inputs: [{ name: "c", dtype: "bool", shape: [4, 1, 6] }, { name: "x", shape: [3, 6] }, { name: "z", shape: [] }],
      outputs: ["y"],
    });
    await checkOp(harness, {
      opType: "Where",
      inputs: [{ name: "c", dtype: "bool", shape: [5] }, { name: "x", dtype: "int64", shape: [2, 5] }, {
        name: "z",
        dtype: "int64",
        shape: [5],
      }],
      outputs: ["y"],
    });
  }, 60_000);
});

describe("elementwise.cast against onnxruntime", () => {
  const TO: Record<string, number> = { float32: 1, uint8: 2, int8: 3, int32: 6, int64: 7, bool: 9, float64: 11 };
  test("Cast() between float32, float64, int8, uint8, int32, int64 and bool", async () => {
    const pairs: Array<[keyof typeof TO, keyof typeof TO]> = [
      ["float32", "int32"],
      ["float32", "int64"],
      ["float32", "bool"],
      ["float32", "float64"],
      ["float32", "int8"],
      ["int64", "float32"],
      ["int32", "float32"],
      ["int64", "int32"],
      ["int32", "int64"],
      ["bool", "float32"],
      ["uint8", "float32"],
      ["float64", "float32"],
      ["int64", "bool"],
      ["float32", "float32"],
    ];
    for (const [from, to] of pairs) {
      const range: [number, number] = from === "float32" || from === "float64" ? [-100, 100] : [-100, 100];
      const spec: TensorSpec = {
        name: "x",
        dtype: from as never,
        shape: [3, 11],
        range: from === "uint8" ? [0, 200] : range,
      };
      await checkOp(harness, { opType: "Cast", attributes: { to: attr.i(TO[to]) }, inputs: [spec], outputs: ["y"] });
    }
  }, 60_000);
});
