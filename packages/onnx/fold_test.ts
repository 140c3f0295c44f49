import { describe, expect, test } from "bun:test";
import * as ort from "onnxruntime-web";
import { ortSession } from "../../kernels/ops/_onnx_model.ts";
import { fakeLowering } from "./_fake_lowering.ts";
import { ifModel, shapeChainModel, transformerModel } from "./_test_models.ts";
import { compileOnnx } from "./compile.ts";
import { OnnxCompileError } from "./error.ts";
import { type FoldedGraph, foldGraph } from "./fold.ts";
import { OnnxBuilder } from "./onnx_builder.ts";
import { DEFAULT_LIMITS, parseModel } from "./parse.ts";
import { ConstTensor } from "./tensor.ts";

ort.env.wasm.numThreads = 1;

function fold(bytes: Uint8Array, inputShapes: Record<string, number[]> = {}, maxFoldBytes = 1 << 26): FoldedGraph {
  return foldGraph(parseModel(bytes), { inputShapes, limits: DEFAULT_LIMITS, supportedOps: ["Relu"], maxFoldBytes });
}

const ops = (g: FoldedGraph) => g.nodes.map((n) => n.opType);

describe("foldGraph()", () => {
  test("foldGraph() folds a Shape chain into Reshape's shape input", () => {
    const g = fold(shapeChainModel(), { x: [5, 3, 4] });
    expect(ops(g)).toEqual(["Relu", "Reshape", "Sigmoid"]);
    const reshape = g.nodes[1];
    expect(g.values.get(reshape.inputs[1]!)!.constant!.bigints()).toEqual([5n, 12n]);
    expect(g.values.get("y")!.shape).toEqual([5, 12]);
    expect(g.stats.folded).toBe(3); // Shape, Slice, Concat
  });

  test("foldGraph() folds the transformer's Shape chains and constant scalars, leaving only runtime ops", () => {
    const g = fold(transformerModel(), { x: [2, 8, 32] });
    expect(ops(g).filter((op) => ["Shape", "Slice", "Concat", "Gather", "Constant"].includes(op))).toEqual([]);
    expect(g.stats.folded).toBe(12);
  });

  test("foldGraph() inlines the taken branch of an If with a constant condition", () => {
    const then = fold(ifModel(4));
    expect(ops(then)).toEqual(["Relu", "Mul", "Identity"]);
    expect(then.stats.inlinedIfs).toBe(1);
    const otherwise = fold(ifModel(5));
    expect(ops(otherwise)).toEqual(["Neg", "Identity"]);
    expect(otherwise.values.get("y")!.shape).toEqual([2, 5]);
  });

  test("foldGraph() inlines nested Ifs whose inner branches read the outer branch's values", () => {
    const b = new OnnxBuilder("nested_if");
    const x = b.input("x", "float32", [3]);
    const yes = b.constant(ConstTensor.fromNumbers("bool", [], [1]), "yes");
    const no = b.constant(ConstTensor.fromNumbers("bool", [], [0]), "no");
    const outer = b.subgraph("outer", (s) => {
      const h = s.node("Relu", [x], {}, { outputs: ["h"] });
      const inner = s.subgraph(
        "inner_else",
        (t) => t.output(t.node("Neg", [h], {}, { outputs: ["hn"] }), "float32", [3]),
      );
      const unused = s.subgraph(
        "inner_then",
        (t) => t.output(t.node("Sigmoid", [h], {}, { outputs: ["hs"] }), "float32", [3]),
      );
      s.output(s.node("If", [no], { then_branch: unused, else_branch: inner }, { outputs: ["o"] }), "float32", [3]);
    });
    const other = b.subgraph("other", (s) => s.output(s.node("Tanh", [x], {}, { outputs: ["ot"] }), "float32", [3]));
    b.output(b.node("If", [yes], { then_branch: outer, else_branch: other }, { outputs: ["y"] }), "float32", [3]);
    const g = fold(b.toBytes());
    expect(ops(g)).toEqual(["Relu", "Neg", "Identity", "Identity"]);
    expect(g.stats.inlinedIfs).toBe(2);
  });

  test("foldGraph() inlines a branch of 25k nodes (renaming searched the names taken for every name: quadratic)", () => {
    const b = new OnnxBuilder("big_if");
    const x = b.input("x", "float32", [1]);
    const yes = b.constant(ConstTensor.fromNumbers("bool", [], [1]), "yes");
    const branch = (name: string, size: number) =>
      b.subgraph(name, (s) => {
        let last = "";
        for (let i = 0; i < size; i++) last = s.constant(ConstTensor.fromNumbers("float32", [1], [i]));
        s.output(s.node("Add", [x, last]), "float32", [1]);
      });
    b.output(
      b.node("If", [yes], { then_branch: branch("t", 25_000), else_branch: branch("e", 1) }, { outputs: ["y"] }),
      "float32",
      [1],
    );
    const g = fold(b.toBytes());
    expect(ops(g)).toEqual(["Add", "Identity"]);
    expect(g.stats.folded).toBe(25_001); // the branch's Constants and the condition
  });

  test("foldGraph() refuses an If on a runtime condition", () => {
    const b = new OnnxBuilder("if_runtime");
    const c = b.input("c", "bool", []);
    const x = b.input("x", "float32", [2]);
    const br = (name: string, op: string) =>
      b.subgraph(name, (s) => s.output(s.node(op, [x], {}, { outputs: [`${name}_y`] }), "float32", [2]));
    b.output(
      b.node("If", [c], { then_branch: br("t", "Relu"), else_branch: br("e", "Neg") }, {
        outputs: ["y"],
        name: "choose",
      }),
      "float32",
      [2],
    );
    expect(() => fold(b.toBytes())).toThrow(
      'Cannot compile node "choose" (If): If is supported only when its condition is known at compile time; ' +
        "supported ops: Relu",
    );
  });

  test("foldGraph() evaluates every reduction of a constant as onnxruntime does, noop_with_empty_axes too", async () => {
    // ReduceLogSum and ReduceLogSumExp of constants were folded as a plain sum, and noop_with_empty_axes
    // returned the input where ReduceL1 gives |x| (the reduction's function of each element).
    const values = [0.25, 1.5, 0.75, 2, 0.5, 1.25];
    for (const op of ["ReduceLogSum", "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceMean"]) {
      for (const [axes, noop] of [[[1], 0], [[], 0], [[], 1]] as const) {
        const b = new OnnxBuilder(op, 18);
        const k = b.weight("k", [2, 3], op === "ReduceL1" ? values.map((v, i) => (i % 2 ? -v : v)) : values);
        const r = b.node(op, axes.length ? [k, b.ints("axes", [...axes])] : [k], { noop_with_empty_axes: noop });
        b.output(b.node("Add", [b.input("x", "float32", []), r], {}, { outputs: ["y"] }), "float32");
        const bytes = b.toBytes();
        expect(ops(fold(bytes))).toEqual(["Add"]);
        const g = fold(bytes);
        const ours = g.values.get(g.nodes[0].inputs[1]!)!.constant!.numbers();
        const session = await ortSession(bytes);
        const ref = await session.run({ x: new ort.Tensor("float32", new Float32Array(1), []) });
        const want = [...(ref.y.data as Float32Array)];
        expect({ op, axes, noop, n: ours.length }).toEqual({ op, axes, noop, n: want.length });
        ours.forEach((v, i) => expect(v).toBeCloseTo(want[i], 5));
      }
    }
  });

  test("foldGraph() evaluates Gelu of a constant with its approximate attribute, as onnxruntime does", async () => {
    // approximate = "tanh" was ignored: Gelu(-2.5) folded to the erf form's -0.015524 instead of -0.015084.
    for (const approximate of ["none", "tanh"]) {
      const b = new OnnxBuilder("gelu", 20);
      const k = b.weight("k", [6], [-2.5, -1, -0.5, 0.25, 1, 3]);
      b.output(
        b.node("Add", [b.input("x", "float32", []), b.node("Gelu", [k], { approximate })], {}, {
          outputs: ["y"],
        }),
        "float32",
      );
      const bytes = b.toBytes();
      const g = fold(bytes);
      expect(ops(g)).toEqual(["Add"]);
      const ours = g.values.get(g.nodes[0].inputs[1]!)!.constant!.numbers();
      const ref = await (await ortSession(bytes)).run({ x: new ort.Tensor("float32", new Float32Array(1), []) });
      const want = [...(ref.y.data as Float32Array)];
      ours.forEach((v, i) =>
        expect({ approximate, i, v: Math.abs(v - want[i]) < 1e-6 }).toEqual({ approximate, i, v: true })
      );
    }
  });

  test("foldGraph() evaluates Constant, Cast of constants and all-constant nodes as onnxruntime does", async () => {
    const b = new OnnxBuilder("consts");
    const x = b.input("x", "float32", [2, 3]);
    const r = b.node("Range", [
      b.constant(ConstTensor.fromNumbers("int64", [], [0])),
      b.ints("lim", [6], []),
      b.ints("d", [1], []),
    ]);
    const m = b.node("Reshape", [b.node("Cast", [r], { to: 1 }), b.ints("s23", [2, 3])]);
    const t = b.node("Transpose", [m], { perm: [1, 0] });
    const e = b.node("Erf", [b.node("Div", [b.node("Sqrt", [t]), b.weight("four", [], [4])])]);
    const w = b.node("Where", [b.node("Greater", [t, b.weight("two", [], [2])]), e, b.node("Neg", [t])]);
    const g = b.node("Gather", [w, b.ints("idx", [2, 0])], { axis: 0 });
    const s = b.node("Slice", [g, b.ints("st", [-1]), b.ints("en", [-3]), b.ints("ax", [1]), b.ints("sp", [-1])]);
    const red = b.node("ReduceSum", [
      b.node("Concat", [s, b.node("Expand", [b.weight("k", [1, 1], [0.25]), b.ints("sh", [2, 1])])], { axis: 1 }),
      b.ints("ra", [1]),
    ], { keepdims: 1 });
    const folded = b.node("Pow", [b.node("Mul", [red, b.weight("three", [], [3])]), b.weight("sq", [], [2])], {}, {
      outputs: ["c"],
    });
    b.output(b.node("Add", [x, b.node("Tile", [folded, b.ints("rep", [1, 3])])], {}, { outputs: ["y"] }), "float32", [
      2,
      3,
    ]);
    b.output(folded, "float32", [2, 1]);
    const bytes = b.toBytes();
    const g2 = fold(bytes);
    expect(ops(g2)).toEqual(["Add"]);
    const session = await ortSession(bytes);
    const ref = await session.run({ x: new ort.Tensor("float32", new Float32Array(6), [2, 3]) });
    const ours = g2.values.get("c")!.constant!;
    expect(ours.shape).toEqual([...ref.c.dims]);
    const want = ref.c.data as Float32Array;
    expect(want.every(Number.isFinite)).toBe(true);
    [...ours.numbers()].forEach((v, i) => expect(Math.abs(v - want[i])).toBeLessThanOrEqual(1e-6 * Math.abs(want[i])));
  });

  test("foldGraph() keeps int64 exact through data movement", () => {
    const b = new OnnxBuilder("i64");
    const x = b.input("x", "float32", [1]);
    const big = ConstTensor.fromBigints("int64", [3], [9007199254740993n, -5n, 1n]);
    const t = b.node("Gather", [b.initializer("big", big), b.ints("i", [0, 0, 2])]);
    b.output(
      b.node("Concat", [t, b.node("Slice", [b.initializer("big2", big), b.ints("s", [0]), b.ints("e", [1])])], {
        axis: 0,
      }, { outputs: ["c"] }),
      "int64",
      [4],
    );
    b.output(b.node("Relu", [x], {}, { outputs: ["y"] }), "float32", [1]);
    expect(fold(b.toBytes()).values.get("c")!.constant!.bigints()).toEqual([
      9007199254740993n,
      9007199254740993n,
      1n,
      9007199254740993n,
    ]);
  });

  test("foldGraph() reduces, multiplies and clips integers exactly, past 2^53 too", () => {
    // Through float64 each came out wrong: 2^60 + 1 rounded to 2^60 before the sum, the int32 product's low bits were
    // lost, two int64 values a unit apart compared equal, a 63-bit product rounded, INT64_MAX became INT64_MIN.
    const b = new OnnxBuilder("int_reduce");
    const i64 = (name: string, shape: number[], v: bigint[]) =>
      b.initializer(name, ConstTensor.fromBigints("int64", shape, v));
    const out = (name: string, op: string, ins: string[], dtype: "int64" | "int32", attrs = {}) =>
      b.output(b.node(op, ins, attrs, { outputs: [name] }), dtype);
    out("sum", "ReduceSum", [i64("s", [2], [2n ** 60n + 1n, 1n])], "int64", { keepdims: 0 });
    out(
      "prod",
      "ReduceProd",
      [b.initializer("p", ConstTensor.fromNumbers("int32", [2], [2147483647, 2147483647]))],
      "int32",
      { keepdims: 0 },
    );
    out("max", "ReduceMax", [i64("m", [2], [9007199254740993n, 9007199254740992n])], "int64", { keepdims: 0 });
    out("min", "ReduceMin", [i64("n", [2], [-9007199254740993n, -9007199254740992n])], "int64", { keepdims: 0 });
    out("mm", "MatMul", [i64("a", [1, 1], [2n ** 31n + 1n]), i64("b", [1, 1], [2n ** 31n + 1n])], "int64");
    const top = 9223372036854775807n;
    out("clip", "Clip", [i64("x", [3], [top, -5n, 2n]), i64("lo", [], [0n]), i64("hi", [], [top])], "int64");
    const g = fold(b.toBytes());
    const got = (name: string) => g.values.get(name)!.constant!;
    expect(ops(g)).toEqual([]);
    expect(got("sum").bigints()).toEqual([2n ** 60n + 2n]);
    expect([...got("prod").numbers()]).toEqual([1]); // (2^31 - 1)^2 wrapped to 32 bits
    expect(got("max").bigints()).toEqual([9007199254740993n]);
    expect(got("min").bigints()).toEqual([-9007199254740993n]);
    expect(got("mm").bigints()).toEqual([4611686022722355201n]);
    expect(got("clip").bigints()).toEqual([top, 0n, 2n]);
  });

  test("foldGraph() fills ConstantOfShape with its value's exact bytes: INT64_MAX stays INT64_MAX", () => {
    const b = new OnnxBuilder("fill");
    const x = b.input("x", "float32", [1]);
    const fill = (name: string, value?: ConstTensor) =>
      b.output(
        b.node("ConstantOfShape", [b.ints(`${name}_shape`, [3])], value === undefined ? {} : { value }, {
          outputs: [name],
        }),
        value?.dtype ?? "float32",
        [3],
      );
    fill("max", ConstTensor.fromBigints("int64", [1], [9223372036854775807n]));
    fill("odd", ConstTensor.fromBigints("int64", [1], [-9007199254740993n]));
    fill("i32", ConstTensor.fromNumbers("int32", [1], [-7]));
    fill("f32", ConstTensor.fromNumbers("float32", [1], [1.5]));
    fill("zeros");
    b.output(b.node("Relu", [x], {}, { outputs: ["y"] }), "float32", [1]);
    const g = fold(b.toBytes());
    const got = (name: string) => g.values.get(name)!.constant!;
    // Through a number, INT64_MAX rounded to 2^63 and wrapped to INT64_MIN: a Slice's "to the end" became "to the start".
    expect(got("max").bigints()).toEqual([9223372036854775807n, 9223372036854775807n, 9223372036854775807n]);
    expect(got("odd").bigints()).toEqual([-9007199254740993n, -9007199254740993n, -9007199254740993n]);
    expect([got("i32").dtype, ...got("i32").numbers()]).toEqual(["int32", -7, -7, -7]);
    expect([got("f32").dtype, ...got("f32").numbers()]).toEqual(["float32", 1.5, 1.5, 1.5]);
    expect([got("zeros").dtype, ...got("zeros").numbers()]).toEqual(["float32", 0, 0, 0]);
  });

  test("foldGraph() computes integers exactly and wraps them as the kernels do, past 2^53 too", () => {
    // Through float64 each of these came out wrong: the sum and the negation rounded, the int32 product lost its
    // low bits, the cast to int32 read a rounded value, and the cast to float32 rounded twice.
    const b = new OnnxBuilder("ints");
    const i64 = (name: string, v: bigint[]) => b.initializer(name, ConstTensor.fromBigints("int64", [v.length], v));
    const i32 = (name: string, v: number[]) => b.initializer(name, ConstTensor.fromNumbers("int32", [v.length], v));
    const big = i64("big", [9007199254740993n, -9223372036854775807n]);
    const out = (
      name: string,
      op: string,
      ins: string[],
      dtype: "int64" | "int32" | "uint8" | "bool" | "float32",
      attrs = {},
    ) => b.output(b.node(op, ins, attrs, { outputs: [name] }), dtype);
    out("add", "Add", [big, i64("two", [2n])], "int64");
    out("neg", "Neg", [big], "int64");
    out("abs", "Abs", [big], "int64");
    out("max", "Max", [big, i64("near", [9007199254740992n])], "int64");
    out("eq", "Equal", [big, i64("near2", [9007199254740992n])], "bool");
    out("mul", "Mul", [i32("m", [2147483647, -2147483648, 46341]), i32("n", [2147483647, 3, 46341])], "int32");
    out("div", "Div", [i64("dd", [-9223372036854775807n, 7n]), i64("dv", [10n, -2n])], "int64");
    out("fmod", "Mod", [i64("fa", [-6638934287094571441n, 7n]), i64("fb", [-2n, -2n])], "int64", { fmod: 1 });
    out("mod", "Mod", [i64("ma", [-6638934287094571441n, 7n]), i64("mb", [-2n, -2n])], "int64");
    const wide = i64("wide", [2n ** 60n + 300n, 2n ** 60n + 2n ** 36n + 1n, -(2n ** 63n)]);
    out("to_i32", "Cast", [wide], "int32", { to: 6 });
    out("to_u8", "Cast", [wide], "uint8", { to: 2 });
    out("to_f32", "Cast", [wide], "float32", { to: 1 });
    const g = fold(b.toBytes());
    const got = (name: string) => g.values.get(name)!.constant!;
    expect(ops(g)).toEqual([]);
    expect(got("add").bigints()).toEqual([9007199254740995n, -9223372036854775805n]);
    expect(got("neg").bigints()).toEqual([-9007199254740993n, 9223372036854775807n]);
    expect(got("abs").bigints()).toEqual([9007199254740993n, 9223372036854775807n]);
    expect(got("max").bigints()).toEqual([9007199254740993n, 9007199254740992n]);
    expect([...got("eq").numbers()]).toEqual([0, 0]);
    expect([...got("mul").numbers()]).toEqual([1, -2147483648, -2147479015]);
    expect(got("div").bigints()).toEqual([-922337203685477580n, -3n]);
    // fmod = 1 takes the dividend's sign (np.fmod), fmod = 0 the divisor's. onnxruntime's fmod goes through float64
    // and answers 0 for the first: the spec, not onnxruntime, is followed.
    expect(got("fmod").bigints()).toEqual([-1n, 1n]);
    expect(got("mod").bigints()).toEqual([-1n, -1n]);
    expect([...got("to_i32").numbers()]).toEqual([300, 1, 0]);
    expect([...got("to_u8").numbers()]).toEqual([44, 1, 0]);
    expect([...got("to_f32").numbers()]).toEqual([2 ** 60, 2 ** 60 + 2 ** 37, -(2 ** 63)]);
  });

  test("foldGraph() makes a zero-size part of a Split an empty constant and leaves the node the other parts", () => {
    // The spec allows split [0, 3, 1]; the node was refused ("a" is empty) before.
    const b = new OnnxBuilder("split0", 13);
    const x = b.input("x", "float32", [2, 4]);
    const parts = b.nodeN("Split", [x, b.ints("split", [0, 3, 1])], { axis: 1 }, { outputs: ["a", "b", "c"] });
    for (const p of parts) b.output(p, "float32");
    const g = fold(b.toBytes());
    expect(g.nodes.map((n) => [n.opType, n.outputs])).toEqual([["Split", ["b", "c"]]]);
    expect(g.values.get("a")!.constant!.shape).toEqual([2, 0]);
    expect(g.values.get("a")!.constant!.bytes.byteLength).toBe(0);
    expect([g.values.get("b")!.shape, g.values.get("c")!.shape]).toEqual([[2, 3], [2, 1]]);
  });

  test("foldGraph() leaves a constant computation past maxFoldBytes or MAX_FOLD_MACS to the runtime", () => {
    const b = new OnnxBuilder("big");
    const x = b.input("x", "float32", [256, 256]);
    const e = b.node("Expand", [b.weight("one", [1], [1]), b.ints("sh", [256, 256])]);
    b.output(b.node("Add", [x, e], {}, { outputs: ["y"] }), "float32", [256, 256]);
    expect(ops(fold(b.toBytes(), {}, 1024))).toEqual(["Expand", "Add"]);
    expect(ops(fold(b.toBytes()))).toEqual(["Add"]);
    const m = new OnnxBuilder("big_matmul");
    const y = m.input("y", "float32", [512, 512]);
    const w = m.weight("w", [512, 512], new Float32Array(512 * 512).fill(0.5));
    m.output(m.node("Add", [y, m.node("MatMul", [w, w])], {}, { outputs: ["z"] }), "float32", [512, 512]);
    expect(ops(fold(m.toBytes()))).toEqual(["MatMul", "Add"]); // 2^27 multiply-adds: past MAX_FOLD_MACS
  });

  test("foldGraph() refuses 16 ConstantOfShape nodes of 64 MiB each at the total budget, before the 5th result", () => {
    // Each result is within maxFoldBytes, and every one was kept: this file took 4 GB and 15 s.
    const b = new OnnxBuilder("zeros");
    const shape = b.ints("shape", [16 << 20]);
    const x = b.input("x", "float32", [2]);
    for (let i = 0; i < 16; i++) b.node("ConstantOfShape", [shape], {}, { name: `zeros_${i}` });
    b.output(b.node("Relu", [x], {}, { outputs: ["y"] }), "float32", [2]);
    let error: unknown;
    try {
      fold(b.toBytes());
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OnnxCompileError);
    const e = error as OnnxCompileError;
    expect(e.node).toBe("zeros_4");
    expect(e.why).toBe(
      `folding it would keep ${5 * (64 << 20)} bytes of folded constants in all, more than the limit of ` +
        `${DEFAULT_LIMITS.maxFoldedBytes} (maxFoldedBytes)`,
    );
  });

  test("foldGraph() counts the new storage folded results keep: a Reshape of a folded constant adds none", () => {
    const b = new OnnxBuilder("budget");
    const x = b.input("x", "float32", [10, 10]);
    const c = b.node("ConstantOfShape", [b.ints("shape", [100])], {}, { name: "zeros" }); // 400 bytes
    const r = b.node("Reshape", [c, b.ints("square", [10, 10])], {}, { name: "square" }); // a view: 0
    const twice = b.node("Add", [r, r], {}, { name: "twice" }); // 400 more
    const sq = b.node("Mul", [twice, twice], {}, { name: "sq" }); // 400 more
    b.output(b.node("Add", [x, sq], {}, { outputs: ["y"] }), "float32", [10, 10]);
    const at = (maxFoldedBytes: number) =>
      foldGraph(parseModel(b.toBytes()), {
        inputShapes: {},
        limits: { ...DEFAULT_LIMITS, maxFoldedBytes },
        supportedOps: ["Add"],
        maxFoldBytes: 1 << 26,
      });
    expect(at(1200).stats.folded).toBe(4);
    expect(() => at(1199)).toThrow(
      'Cannot compile node "sq" (Mul): folding it would keep 1200 bytes of folded constants in all, more than the ' +
        "limit of 1199 (maxFoldedBytes)",
    );
    // The Reshape is checked at its size before it runs (400 + 400 > 799), though it then keeps nothing new.
    expect(() => at(799)).toThrow('Cannot compile node "square" (Reshape)');
  });

  test("foldGraph() folds empty results and drops empty pieces of a Concat (kernels refuse empty tensors)", () => {
    const b = new OnnxBuilder("empty");
    const x = b.input("x", "float32", [2, 3]);
    const e = b.node("Relu", [b.node("Slice", [x, b.ints("s", [1]), b.ints("e", [1]), b.ints("a", [1])])]);
    b.output(b.node("Sigmoid", [b.node("Concat", [e, x], { axis: 1 })], {}, { outputs: ["y"] }), "float32", [2, 3]);
    const g = fold(b.toBytes());
    expect(ops(g)).toEqual(["Concat", "Sigmoid"]);
    expect(g.nodes[0].inputs).toEqual(["x"]);
    expect(g.stats.folded).toBe(2); // the empty Slice and Relu
  });

  test("foldGraph() drops nodes no output depends on", () => {
    const b = new OnnxBuilder("dead");
    const x = b.input("x", "float32", [2]);
    b.node("Neg", [b.node("Relu", [x])]);
    b.output(b.node("Sigmoid", [x], {}, { outputs: ["y"] }), "float32", [2]);
    const g = fold(b.toBytes());
    expect(ops(g)).toEqual(["Sigmoid"]);
    expect(g.stats.dead).toBe(2);
  });

  test("foldGraph() refuses an unresolved dynamic dim, naming the input, the dim and the flag", () => {
    expect(() => fold(shapeChainModel())).toThrow(
      'Cannot compile ONNX model: input "x" has a dynamic dim 0 ("N"): give its size with --input-shape x=N,3,4',
    );
    const b = new OnnxBuilder("unknown_dim");
    b.output(b.node("Relu", [b.input("x", "float32", [2, null])], {}, { outputs: ["y"] }), "float32", [2, null]);
    expect(() => fold(b.toBytes())).toThrow('input "x" has a dynamic dim 1: give its size with --input-shape x=2,N');
  });

  test("foldGraph() reads --input-shape by own name only: inputs called constructor or __proto__", () => {
    for (const name of ["constructor", "__proto__"]) {
      const b = new OnnxBuilder("proto_input");
      b.output(b.node("Relu", [b.input(name, "float32", ["N", 2])], {}, { outputs: ["y"] }), "float32", ["N", 2]);
      expect(() => fold(b.toBytes())).toThrow(
        `input "${name}" has a dynamic dim 0 ("N"): give its size with --input-shape ${name}=N,2`,
      );
      expect(fold(b.toBytes(), Object.fromEntries([[name, [3, 2]]])).values.get("y")!.shape).toEqual([3, 2]);
    }
  });

  test("foldGraph() checks the given input shapes against the model", () => {
    expect(() => fold(shapeChainModel(), { x: [2, 3] })).toThrow(
      'input "x" has rank 3, but the given shape [2,3] has rank 2',
    );
    expect(() => fold(shapeChainModel(), { x: [2, 5, 4] })).toThrow(
      'input "x" has dim 1 fixed at 3, but the given shape says 5',
    );
    expect(() => fold(shapeChainModel(), { x: [0, 3, 4] })).toThrow(
      'the shape given for input "x" must be positive integers, got [0,3,4]',
    );
    expect(() => fold(shapeChainModel(), { x: [2, 3, 4], z: [1] })).toThrow(
      '--input-shape names "z", which is not an input (inputs: x)',
    );
  });

  test("foldGraph() refuses graphs with a cycle or an undefined input", () => {
    const b = new OnnxBuilder("cycle");
    const x = b.input("x", "float32", [2]);
    b.node("Add", [x, "b"], {}, { outputs: ["a"], name: "first" });
    b.node("Relu", ["a"], {}, { outputs: ["b"], name: "second" });
    b.output("b", "float32", [2]);
    expect(() => fold(b.toBytes())).toThrow("the graph has a cycle");
    const u = new OnnxBuilder("undefined");
    u.output(u.node("Relu", ["ghost"], {}, { outputs: ["y"], name: "r" }), "float32", [2]);
    expect(() => fold(u.toBytes())).toThrow(
      'Cannot compile node "r" (Relu): input 0 "ghost" is not produced by any node, initializer or input',
    );
  });

  test("compileOnnx() copies a graph output that folds to a constant from a weight", () => {
    const b = new OnnxBuilder("const_out");
    const x = b.input("x", "float32", [2]);
    b.output(b.node("Relu", [x], {}, { outputs: ["y"] }), "float32", [2]);
    b.output(b.node("Shape", [x], {}, { outputs: ["shape"] }), "int64", [1]);
    const c = compileOnnx(b.toBytes(), { lowering: fakeLowering() });
    expect(c.calls.map((k) => [k.opType, k.inputs, k.outputs])).toEqual([["Relu", ["x"], ["y"]], ["Identity", [
      "shape/value",
    ], ["shape"]]]);
    expect(c.weights.map((w) => [w.name, [...w.bytes]])).toEqual([["shape/value", [2, 0, 0, 0, 0, 0, 0, 0]]]);
  });
});
