import { describe, test } from "bun:test";
import { prng } from "../../packages/core/_testing.ts";
import { OpHarness } from "./harness.ts";
import { lowerNode } from "./lowering.ts";
import type { OpAttribute, OpNode, OpValue } from "./op_node.ts";
import { type Attr, attr, decoded, makeData, type OnnxNode, opValue, runOrt, type TensorSpec } from "./_onnx_model.ts";
import { expectClose } from "./_testing.ts";

const harness = await OpHarness.create();

/** One node of a small graph, with the shapes of the values it produces. */
interface GraphNode extends OnnxNode {
  readonly shapes: readonly (readonly number[])[];
}

describe("a lowered graph run by OpHarness against onnxruntime", () => {
  test("a small CNN (Conv, BatchNormalization, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm, Softmax)", async () => {
    const specs: TensorSpec[] = [
      { name: "image", shape: [2, 3, 16, 16] },
      { name: "w1", shape: [8, 3, 3, 3], constant: true },
      { name: "b1", shape: [8], constant: true },
      { name: "scale", shape: [8], constant: true },
      { name: "shift", shape: [8], constant: true },
      { name: "mean", shape: [8], constant: true },
      { name: "var", shape: [8], constant: true, range: [0.5, 2] },
      { name: "w2", shape: [10, 8], constant: true },
      { name: "b2", shape: [10], constant: true },
    ];
    const nodes: GraphNode[] = [
      {
        opType: "Conv",
        inputs: ["image", "w1", "b1"],
        outputs: ["c1"],
        attributes: { pads: attr.ints([1, 1, 1, 1]) },
        shapes: [[2, 8, 16, 16]],
      },
      {
        opType: "BatchNormalization",
        inputs: ["c1", "scale", "shift", "mean", "var"],
        outputs: ["bn"],
        shapes: [[2, 8, 16, 16]],
      },
      { opType: "Relu", inputs: ["bn"], outputs: ["r"], shapes: [[2, 8, 16, 16]] },
      {
        opType: "MaxPool",
        inputs: ["r"],
        outputs: ["p"],
        attributes: { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) },
        shapes: [[2, 8, 8, 8]],
      },
      { opType: "GlobalAveragePool", inputs: ["p"], outputs: ["g"], shapes: [[2, 8, 1, 1]] },
      { opType: "Flatten", inputs: ["g"], outputs: ["f"], shapes: [[2, 8]] },
      {
        opType: "Gemm",
        inputs: ["f", "w2", "b2"],
        outputs: ["logits"],
        attributes: { transB: attr.i(1) },
        shapes: [[2, 10]],
      },
      { opType: "Softmax", inputs: ["logits"], outputs: ["probs"], shapes: [[2, 10]] },
    ];
    const random = prng(7);
    const inputs = specs.map((spec) => ({ spec, data: makeData(spec, random) }));
    const ref = await runOrt(nodes, inputs, ["probs"]);

    const values = new Map<string, OpValue>(inputs.map((i) => [i.spec.name, opValue(i.spec, i.data)]));
    for (const n of nodes) {
      n.outputs.forEach((name, k) => values.set(name, { name, dtype: "float32", shape: [...n.shapes[k]] }));
    }
    const attributes = (a: Readonly<Record<string, Attr>> = {}): Record<string, OpAttribute> =>
      Object.fromEntries(Object.entries(a).map(([k, v]) => [k, decoded(v)]));
    const calls = nodes.flatMap((n, i) => {
      const node: OpNode = {
        name: `node${i}`,
        domain: "",
        opType: n.opType,
        attributes: attributes(n.attributes),
        inputs: n.inputs.map((name) => values.get(name)!),
        outputs: n.outputs.map((name) => values.get(name)!),
      };
      return lowerNode(node);
    });
    const got = await harness.run(calls, [...values.values()], { image: inputs[0].data });
    expectClose("probs", "float32", got.get("probs")!, ref.probs, { atol: 1e-6 * Math.sqrt(27) });
  }, 60_000);
});
