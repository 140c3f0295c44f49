import { describe, expect, test } from "bun:test";
import process from "node:process";
import {
  cnnModel,
  denseMlpModel,
  ifModel,
  miscOpsModel,
  mlpModel,
  shapeChainModel,
  transformerModel,
  vggModel,
} from "./_test_models.ts";
import { OnnxCompileError } from "./error.ts";
import type { IrGraph } from "./graph.ts";
import { encodeModel, OnnxBuilder } from "./onnx_builder.ts";
import { DEFAULT_LIMITS, parseModel } from "./parse.ts";
import { ConstTensor } from "./tensor.ts";
import { MAX_TYPE_DEPTH, scanModel } from "./wire_scan.ts";

/** Runs `fn`, which must throw an OnnxCompileError, and returns it. */
function refused(fn: () => unknown): OnnxCompileError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(OnnxCompileError);
    return e as OnnxCompileError;
  }
  throw new Error("expected an OnnxCompileError, but nothing was thrown");
}

// Raw protobuf wire bytes (encoding.md), for files no encoder would write.
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function bytesOf(...parts: (Uint8Array | readonly number[])[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A length-delimited field: tag, length, body. */
function field(num: number, ...body: (Uint8Array | readonly number[])[]): Uint8Array {
  const b = bytesOf(...body);
  return bytesOf([...varint(num * 8 + 2), ...varint(b.length)], b);
}

/** `opset_import { version: 17 }`. */
const OPSET = field(8, [0x10, 17]);

/** A model whose graph (field 7) is `n` bytes of `unit` repeated: 20 MiB of empty messages, for instance. */
function graphOf(unit: readonly number[], n: number): Uint8Array {
  const body = new Uint8Array(n - (n % unit.length));
  for (let i = 0; i < body.length; i++) body[i] = unit[i % unit.length];
  return bytesOf(field(7, body), OPSET);
}

/** Nodes parseModel reads: the graph's and its subgraphs'. */
function irNodes(g: IrGraph): number {
  let n = g.nodes.length;
  for (const node of g.nodes) {
    for (const a of Object.values(node.attributes)) {
      if (typeof a === "object" && a !== null && "nodes" in a) n += irNodes(a as IrGraph);
    }
  }
  return n;
}

/** Runs `fn` and returns how much the resident set grew meanwhile, in bytes. */
function rssGrowth(fn: () => void): number {
  const before = process.memoryUsage().rss;
  fn();
  return process.memoryUsage().rss - before;
}

const MiB = 1 << 20;

/** `If` nodes nested `depth` levels deep in their branches. */
function nestedIfs(depth: number): Uint8Array {
  const b = new OnnxBuilder("nest");
  const x = b.input("x", "float32", [1]);
  const c = b.constant(ConstTensor.fromNumbers("bool", [], [1]));
  const branch = (d: number): ReturnType<OnnxBuilder["subgraph"]> =>
    b.subgraph(`g${d}`, (s) => {
      const o = `o${d}`;
      const op = d === 0
        ? s.node("Relu", [x], {}, { outputs: [o] })
        : s.node("If", [c], { then_branch: branch(d - 1), else_branch: branch(d - 1) }, { outputs: [o] });
      s.output(op, "float32", [1]);
    });
  const y = b.node("If", [c], { then_branch: branch(depth), else_branch: branch(depth) }, { outputs: ["y"] });
  b.output(y, "float32", [1]);
  return b.toBytes();
}

describe("scanModel()", () => {
  test("scanModel() accepts every test model and counts the nodes parseModel reads", () => {
    const models = [
      mlpModel(),
      cnnModel(),
      transformerModel(),
      ifModel(),
      shapeChainModel(),
      miscOpsModel(),
      denseMlpModel([784, 256, 128, 10]),
      vggModel([16, 16, 32, 32], 16),
    ];
    for (const bytes of models) {
      const counts = scanModel(bytes, DEFAULT_LIMITS);
      expect(counts.nodes).toBe(irNodes(parseModel(bytes).graph));
      // Far below the cap: the largest, the transformer block, decodes into about 1,200 entries.
      expect(counts.entries).toBeLessThan(2000);
    }
    expect(scanModel(ifModel(), DEFAULT_LIMITS).graphDepth).toBe(1);
    expect(scanModel(nestedIfs(6), DEFAULT_LIMITS).graphDepth).toBe(7);
  });

  test("scanModel() counts what the decoder makes: each message with its arrays, string, 64-bit integer; bytes as 5", () => {
    // ModelProto (1 + 4 arrays) → GraphProto (1 + 7) → one empty TensorProto (1 + 8).
    expect(scanModel(encodeModel({ graph: { initializer: [{}] } }), DEFAULT_LIMITS).entries).toBe(5 + 8 + 9);
    // + name (1), dims 2 and 3 (2 Longs), raw_data (5).
    const tensor = { name: "w", dims: [2, 3], rawData: new Uint8Array(24) };
    expect(scanModel(encodeModel({ graph: { initializer: [tensor] } }), DEFAULT_LIMITS).entries).toBe(5 + 8 + 9 + 8);
    // A node (1 + 3 arrays) with 2 inputs, an output, an op type (4 strings) and an INT attribute (1 + 7 arrays,
    // its name, its value as a Long; the type is an enum: no entry).
    const node = {
      input: ["a", "b"],
      output: ["c"],
      opType: "Add",
      attribute: [{ name: "axis", type: 2, i: 1 }],
    };
    expect(scanModel(encodeModel({ graph: { node: [node] } }), DEFAULT_LIMITS).entries).toBe(5 + 8 + 4 + 4 + 8 + 2);
    // Floats and 32-bit integers are array slots, not objects: not entries, but numbers.
    const floats = { name: "f", dataType: 1, dims: [4], floatData: [1, 2, 3, 4], int32Data: [5, 6] };
    const counted = scanModel(encodeModel({ graph: { initializer: [floats] } }), DEFAULT_LIMITS);
    expect(counted.entries).toBe(5 + 8 + 9 + 2);
    expect(counted.numbers).toBe(4 + 2);
    expect(
      refused(() => scanModel(encodeModel({ graph: { initializer: [{}] } }), { ...DEFAULT_LIMITS, maxEntries: 21 }))
        .why,
    ).toBe(
      "the file decodes into more than the limit of 21 entries (maxEntries: messages, strings, bytes and 64-bit integers)",
    );
  });

  test("parseModel() refuses 20 MiB of empty initializers on the wire, before decoding them", () => {
    // Each initializer is 2 bytes (tag 5, length 0); decoded, an object with 8 arrays: this file took 5 GB.
    const bomb = graphOf([0x2a, 0x00], 20 * MiB);
    let e: OnnxCompileError | undefined;
    const grown = rssGrowth(() => (e = refused(() => parseModel(bomb))));
    expect(e!.why).toBe(
      `the file decodes into more than the limit of ${DEFAULT_LIMITS.maxEntries} entries (maxEntries: messages, ` +
        "strings, bytes and 64-bit integers)",
    );
    expect(grown).toBeLessThan(500 * MiB);
  });

  test("scanModel() counts repeated 32-bit numbers, packed or not, and refuses past maxNumbers", () => {
    // TensorProto (initializer, field 5 of the graph): float_data (4), int32_data (5), double_data (10), packed.
    const tensor = (...fields: Uint8Array[]) => bytesOf(field(7, field(5, ...fields)), OPSET);
    const packed = tensor(field(4, new Uint8Array(12)), field(5, [1, 0x80, 0x01, 3]), field(10, new Uint8Array(16)));
    expect(scanModel(packed, DEFAULT_LIMITS).numbers).toBe(3 + 3 + 2);
    // Not packed: one tag per value (int32_data as varints, wire type 0; float_data as fixed32, wire type 5).
    const loose = tensor(new Uint8Array([0x28, 7, 0x28, 9, 0x25, 0, 0, 0, 0]));
    expect(scanModel(loose, DEFAULT_LIMITS).numbers).toBe(3);
    // An attribute's floats (field 7 of AttributeProto, in a node's attribute 5).
    const attr = bytesOf(field(7, field(1, field(5, field(7, new Uint8Array(20))))), OPSET);
    expect(scanModel(attr, DEFAULT_LIMITS).numbers).toBe(5);
    expect(refused(() => scanModel(packed, { ...DEFAULT_LIMITS, maxNumbers: 7 })).why).toBe(
      "the file decodes into more than the limit of 7 numbers (maxNumbers: values of int32_data, float_data, " +
        "double_data and floats; store large tensors in raw_data)",
    );
    expect(scanModel(packed, { ...DEFAULT_LIMITS, maxNumbers: 8 }).numbers).toBe(8);
  });

  test("parseModel() refuses 64 MiB of one-byte int32_data values before decoding them", () => {
    // Decoded, each value is a slot of a growing array: 15-17 bytes, so this file would take about 1 GB.
    const values = new Uint8Array(64 * MiB);
    const bomb = bytesOf(field(7, field(5, [0x10, 6], field(5, values))), OPSET);
    let e: OnnxCompileError | undefined;
    const grown = rssGrowth(() => (e = refused(() => parseModel(bomb))));
    expect(e!.why).toBe(
      "the file decodes into more than the limit of 32000000 numbers (maxNumbers: values of int32_data, " +
        "float_data, double_data and floats; store large tensors in raw_data)",
    );
    expect(grown).toBeLessThan(200 * MiB);
  });

  test("parseModel() refuses 20 MiB of empty nodes on the wire, by the node cap or else the entry cap", () => {
    const bomb = graphOf([0x0a, 0x00], 20 * MiB); // this file took 2.8 GB
    let e: OnnxCompileError | undefined;
    let grown = rssGrowth(() => (e = refused(() => parseModel(bomb))));
    expect(e!.why).toBe(`the model has more than ${DEFAULT_LIMITS.maxNodes} nodes`);
    expect(grown).toBeLessThan(500 * MiB);
    grown = rssGrowth(() => (e = refused(() => parseModel(bomb, { ...DEFAULT_LIMITS, maxNodes: Infinity }))));
    expect(e!.why).toMatch(/^the file decodes into more than the limit of \d+ entries \(maxEntries/);
    expect(grown).toBeLessThan(500 * MiB);
  });

  test("scanModel() refuses a length past its message's end: a truncated file, a node running into the model", () => {
    const good = mlpModel();
    expect(refused(() => parseModel(good.subarray(0, good.length - 100))).why).toBe(
      "the bytes are not an ONNX protobuf (ModelProto.graph runs past the end of its message)",
    );
    // The node claims the 4 bytes of opset_import after its graph: the decoder reads them as an unknown field of the
    // node and finds a model without an opset.
    const node = field(4, [..."Relu"].map((c) => c.charCodeAt(0))); // op_type
    const graph = bytesOf([0x0a, node.length + OPSET.length], node);
    const liar = bytesOf(field(7, graph), OPSET);
    expect(refused(() => parseModel(liar)).why).toBe(
      "the bytes are not an ONNX protobuf (GraphProto.node runs past the end of its message)",
    );
    // The last value runs past the file's end.
    expect(refused(() => scanModel(new Uint8Array([0x08, 0x80]), DEFAULT_LIMITS)).why).toBe(
      "the bytes are not an ONNX protobuf (a value runs past the end of the file)",
    );
  });

  test("scanModel() refuses a known field in another wire type, a group, field 0, a packed run cut inside a value", () => {
    const why = (graph: Uint8Array) => refused(() => scanModel(bytesOf(field(7, graph), OPSET), DEFAULT_LIMITS)).why;
    // op_type (a string) as a varint: the decoder would read the varint as a length.
    expect(why(field(1, [0x20, 0x05]))).toBe("the bytes are not an ONNX protobuf (NodeProto.op_type has wire type 0)");
    // An unknown field 9 as a group (start 0x4b, end 0x4c): the decoder would skip it recursively.
    expect(why(field(1, [0x4b, 0x4c]))).toBe(
      "the bytes are not an ONNX protobuf (field 9 of NodeProto has wire type 3 (a group))",
    );
    expect(why(field(1, [0x02, 0x00]))).toBe("the bytes are not an ONNX protobuf (NodeProto has a field numbered 0)");
    // Packed dims of 2 bytes whose varint ends in the next field; packed floats of 3 bytes.
    expect(why(field(5, [0x0a, 0x02, 0x80, 0x80, 0x42, 0x01, 0x41]))).toBe(
      "the bytes are not an ONNX protobuf (TensorProto.dims ends inside a value)",
    );
    expect(why(field(5, [0x22, 0x03, 0, 0, 0]))).toBe(
      "the bytes are not an ONNX protobuf (TensorProto.float_data is 3 bytes, not a multiple of 4)",
    );
    // Unpacked dims are a repeated field's other wire form (2 Longs; the opset is 2 more: its message, its version).
    expect(scanModel(bytesOf(field(7, field(5, [0x08, 0x02, 0x08, 0x03])), OPSET), DEFAULT_LIMITS).entries).toBe(
      5 + 8 + 9 + 2 + 2,
    );
  });

  test("scanModel() refuses subgraphs nested past maxGraphDepth and a type nesting bomb, without running out of stack", () => {
    expect(refused(() => scanModel(nestedIfs(9), DEFAULT_LIMITS)).why).toBe(
      "subgraphs nest deeper than the limit of 8",
    );
    expect(refused(() => scanModel(nestedIfs(3), { ...DEFAULT_LIMITS, maxGraphDepth: 3 })).why).toBe(
      "subgraphs nest deeper than the limit of 3",
    );
    // A graph input of type sequence(sequence(… 100,000 levels)): TypeProto.sequence_type (4) → Sequence.elem_type (1).
    const levels = 100_000;
    const fields = Array.from({ length: 2 * levels }, (_, i) => (i % 2 === 0 ? 4 : 1));
    const inner = new Array<number>(fields.length + 1).fill(0); // inner[i]: bytes of levels i.. (inside out)
    for (let i = fields.length - 1; i >= 0; i--) inner[i] = 1 + varint(inner[i + 1]).length + inner[i + 1];
    const type = new Uint8Array(inner[0]);
    let at = 0;
    fields.forEach((f, i) => {
      type[at++] = (f << 3) | 2;
      for (const b of varint(inner[i + 1])) type[at++] = b;
    });
    const bomb = bytesOf(field(7, field(11, field(2, type))), OPSET); // graph.input.type
    expect(refused(() => parseModel(bomb)).why).toBe(`types nest deeper than the limit of ${MAX_TYPE_DEPTH}`);
  });

  test("scanModel() counts the nodes of functions and training graphs against maxNodes", () => {
    const relu = { opType: "Relu", input: ["x"], output: ["y"] };
    const bytes = encodeModel({
      graph: { node: [relu] },
      functions: [{ name: "f", node: [relu, relu] }],
      trainingInfo: [{ algorithm: { node: [relu] } }],
    });
    expect(scanModel(bytes, DEFAULT_LIMITS).nodes).toBe(4);
    expect(refused(() => scanModel(bytes, { ...DEFAULT_LIMITS, maxNodes: 3 })).why).toBe(
      "the model has more than 3 nodes",
    );
  });
});
