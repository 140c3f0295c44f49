import { describe, expect, test } from "bun:test";
import { lowerNode, SUPPORTED_OPS } from "./lowering.ts";
import { type OpAttribute, type OpNode, type OpValue, UnsupportedOpError } from "./op_node.ts";

const f32 = (name: string, shape: number[]): OpValue => ({ name, dtype: "float32", shape });
const i64 = (name: string, values: number[]): OpValue => ({
  name,
  dtype: "int64",
  shape: [values.length],
  constant: new Uint8Array(new BigInt64Array(values.map(BigInt)).buffer),
});

function node(
  opType: string,
  inputs: Array<OpValue | undefined>,
  outputs: OpValue[],
  attributes: Record<string, OpAttribute> = {},
  domain: "" | "nrt" = "",
): OpNode {
  return { name: "n", domain, opType, attributes, inputs, outputs };
}

/** The message of the UnsupportedOpError that lowering `n` throws. */
function refusal(n: OpNode, options?: { sbufBytes?: number }): string {
  try {
    lowerNode(n, options);
  } catch (e) {
    expect(e).toBeInstanceOf(UnsupportedOpError);
    expect((e as UnsupportedOpError).node).toBe("n");
    return (e as Error).message;
  }
  throw new Error("expected an UnsupportedOpError, but the node was lowered");
}

describe("SUPPORTED_OPS", () => {
  test("SUPPORTED_OPS lists every op the library promises, once", () => {
    const keys = SUPPORTED_OPS.map((o) => `${o.domain}:${o.opType}`);
    expect(new Set(keys).size).toBe(keys.length);
    const required = [
      "Add",
      "Sub",
      "Mul",
      "Div",
      "Max",
      "Min",
      "Gemm",
      "MatMul",
      "Conv",
      "MaxPool",
      "AveragePool",
      "GlobalAveragePool",
      "Relu",
      "LeakyRelu",
      "Sigmoid",
      "Tanh",
      "Exp",
      "Log",
      "Sqrt",
      "Pow",
      "Clip",
      "Erf",
      "ReduceMean",
      "ReduceMax",
      "ReduceSum",
      "Softmax",
      "LayerNormalization",
      "BatchNormalization",
      "Transpose",
      "Concat",
      "Slice",
      "Gather",
      "Flatten",
      "Reshape",
      "Squeeze",
      "Unsqueeze",
    ];
    for (const op of required) expect(keys).toContain(`:${op}`);
    expect(keys).toContain("nrt:FusedGemm");
    expect(keys).toContain("nrt:LayerNorm");
    for (const o of SUPPORTED_OPS.filter((o) => required.includes(o.opType))) {
      expect({ op: o.opType, float32: o.dtypes.includes("float32") }).toEqual({ op: o.opType, float32: true });
    }
  });
});

describe("lowerNode() refusals", () => {
  test("lowerNode() names an unknown op, and asks for shape ops to be folded", () => {
    expect(refusal(node("NonMaxSuppression", [f32("x", [2])], [f32("y", [2])]))).toBe(
      'Cannot lower node "n" (NonMaxSuppression): the op is not supported',
    );
    expect(refusal(node("Shape", [f32("x", [2])], [{ name: "y", dtype: "int64", shape: [1] }]))).toContain(
      "must be constant-folded",
    );
    expect(refusal(node("Relu", [f32("x", [2])], [f32("y", [2])], {}, "nrt"))).toContain("(nrt.Relu)");
  });

  test("lowerNode() rejects an unknown attribute, a bad attribute value and a bad attribute type", () => {
    expect(refusal(node("Relu", [f32("x", [2])], [f32("y", [2])], { alpha: 1 }))).toContain(
      'attribute "alpha" is not supported',
    );
    const a = f32("a", [2, 3]), b = f32("b", [3, 4]), y = f32("y", [2, 4]);
    expect(refusal(node("Gemm", [a, b], [y], { transA: 2 }))).toContain("transA = 2 is not supported");
    expect(refusal(node("Gemm", [a, b], [y], { alpha: "x" }))).toContain('attribute "alpha" must be a number');
    expect(refusal(node("FusedGemm", [a, b], [y], { activation: "Swish" }, "nrt"))).toContain('activation "Swish"');
    expect(refusal(node("Gelu", [f32("x", [2])], [f32("y", [2])], { approximate: "erf" }))).toContain(
      'approximate "erf"',
    );
    expect(
      refusal(node(
        "BatchNormalization",
        [f32("x", [1, 2]), ...["s", "b", "m", "v"].map((n) => f32(n, [2]))],
        [f32("y", [1, 2])],
        { training_mode: 1 },
      )),
    )
      .toContain("training_mode = 1");
  });

  test("lowerNode() rejects unsupported dtypes and ranks", () => {
    const xi = { name: "x", dtype: "int32", shape: [4] } as const;
    expect(refusal(node("Relu", [xi], [{ ...xi, name: "y" }]))).toContain(
      'dtype int32 of "x" is not supported (supported: float32)',
    );
    const x16 = { name: "x", dtype: "float16", shape: [4] } as const;
    expect(refusal(node("Add", [x16, x16], [{ ...x16, name: "y" }]))).toContain("dtype float16");
    expect(refusal(node("Conv", [f32("x", [1, 1, 4, 4, 4]), f32("w", [1, 1, 2, 2, 2])], [f32("y", [1, 1, 3, 3, 3])])))
      .toContain("only 1-D and 2-D");
    expect(refusal(node("Add", [f32("a", [2, 3]), f32("b", [4])], [f32("y", [2, 3])]))).toContain("do not broadcast");
  });

  test("lowerNode() rejects a non-constant input it must read, and output shapes it did not expect", () => {
    const x = f32("x", [4, 5]);
    const starts = { name: "s", dtype: "int64", shape: [1] } as const;
    expect(refusal(node("Slice", [x, starts, i64("e", [2])], [f32("y", [2, 5])]))).toContain(
      'starts ("s") must be a constant',
    );
    expect(refusal(node("Transpose", [x], [f32("y", [4, 5])]))).toContain("output shape [4,5] is not [5,4]");
    expect(refusal(node("MatMul", [f32("a", [2, 3]), f32("b", [3, 4])], [f32("y", [2, 5])]))).toContain(
      "is not the product's shape",
    );
    expect(refusal(node("Conv", [f32("x", [1, 2, 5, 5]), f32("w", [3, 2, 3, 3])], [f32("y", [1, 3, 5, 5])]))).toContain(
      "output shape [1,3,5,5] is not [1,3,3,3]",
    );
  });

  test("lowerNode() rejects MatMul batches that need more than 2 levels, and an empty tensor", () => {
    const a = f32("a", [2, 1, 3, 4, 5]), b = f32("b", [1, 2, 1, 5, 6]);
    // Batch [2, 2, 3]: A's strides [20·3, 0, 20], B's [0, 30, 0] do not merge.
    expect(refusal(node("MatMul", [a, b], [f32("y", [2, 2, 3, 4, 6])]))).toContain("more than 2");
    expect(refusal(node("Relu", [f32("x", [0, 3])], [f32("y", [0, 3])]))).toContain("is empty");
  });

  test("lowerNode() rejects a call whose inputs and outputs exceed the SBUF, by default 24 MiB", () => {
    const a = f32("a", [1, 2048]), w = f32("w", [2048, 4096]), y = f32("y", [1, 4096]);
    expect(refusal(node("MatMul", [a, w], [y]))).toMatch(
      /linalg\.gemm needs \d+ bytes of SBUF for its inputs and outputs, more than 25165824/,
    );
    expect(lowerNode(node("MatMul", [a, f32("w", [2048, 1024])], [f32("y", [1, 1024])]))).toHaveLength(1);
    expect(refusal(node("Relu", [f32("x", [1024])], [f32("y", [1024])]), { sbufBytes: 4096 })).toContain(
      "more than 4096",
    );
  });
});

describe("lowerNode() call shapes", () => {
  test("lowerNode() merges broadcast dimensions before they reach the kernel", () => {
    const [c] = lowerNode(node("Add", [f32("a", [2, 3, 4, 5]), f32("b", [1, 1, 4, 5])], [f32("y", [2, 3, 4, 5])]));
    // op Add, rank 2: dims [6, 20], A strides [20, 1], B strides [0, 1]
    expect(c.ints).toEqual([0n, 2n, 6n, 20n, 20n, 1n, 0n, 1n]);
    expect([c.library, c.fn, c.totalCpus]).toEqual(["elementwise", "binary_f32", 8]);
  });

  test("lowerNode() passes floats as float64 bit patterns", () => {
    const [c] = lowerNode(node("LeakyRelu", [f32("x", [3])], [f32("y", [3])], { alpha: 0.5 }));
    const view = new DataView(new ArrayBuffer(8));
    view.setBigInt64(0, c.ints[2], true);
    expect(view.getFloat64(0, true)).toBe(0.5);
  });

  test("lowerNode() declares the scratch value of a two-call reduction", () => {
    const calls = lowerNode(node("ReduceMean", [f32("x", [65536])], [f32("y", [])], { keepdims: 0 }));
    expect(calls.map((c) => c.fn)).toEqual(["reduce_f32", "reduce_finish_f32"]);
    expect(calls[0].scratch).toEqual([{ name: "n#partials", dtype: "float64", shape: [1, 8, 2] }]);
    expect(calls[1].inputs).toEqual(["n#partials"]);
  });

  test("lowerNode() crops through scratch before an edge, reflect or wrap Pad that also has negative pads", () => {
    const pad = (mode: string, pads: number[], x: number[], y: number[]) =>
      node("Pad", [f32("x", x), i64("p", pads)], [f32("y", y)], { mode });
    const calls = lowerNode(pad("wrap", [1, -1], [3], [3]));
    expect(calls.map((c) => [c.inputs, c.outputs])).toEqual([[["x"], ["n#cropped"]], [["n#cropped"], ["y"]]]);
    expect(calls[0].scratch).toEqual([{ name: "n#cropped", dtype: "float32", shape: [2] }]);
    // Only negative pads, or constant mode: one call.
    expect(lowerNode(pad("wrap", [0, -1], [3], [2])).length).toBe(1);
    expect(lowerNode(pad("constant", [1, -1], [3], [3])).length).toBe(1);
    // Reflecting 2 past the cropped axis of 2 would read a removed element (onnxruntime refuses it too).
    expect(refusal(pad("reflect", [-1, 2], [3], [4]))).toContain("reflect pads must be smaller than the padded axis");
  });

  test("lowerNode() chains a variadic Max through scratch values", () => {
    const calls = lowerNode(node("Max", [f32("a", [3]), f32("b", [3]), f32("c", [3])], [f32("y", [3])]));
    expect(calls.map((c) => [c.inputs, c.outputs])).toEqual([[["a", "b"], ["n#acc1"]], [["n#acc1", "c"], ["y"]]]);
  });
});
