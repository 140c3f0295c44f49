/**
 * Private: the models the suites and bench/onnx.ts compile, built in code with seeded weights (nothing is
 * downloaded): an MLP classifier, a small CNN, a transformer block, dynamic-batch variants, a dense MLP and a
 * VGG-style CNN of any size, a decomposed LayerNorm over given axes, an `If` on a constant, a Shape-chain reshape and
 * a model with an unsupported op. Ours.
 *
 * @module
 */
import { prng } from "../core/_testing.ts";
import { float, OnnxBuilder } from "./onnx_builder.ts";
import { ConstTensor } from "./tensor.ts";

/** A float32 tensor of `shape` with values uniform in [-scale, scale), from a seeded generator. */
export function randomTensor(rng: () => number, shape: readonly number[], scale = 1): ConstTensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return ConstTensor.fromNumbers("float32", shape, Float32Array.from({ length: n }, () => (rng() * 2 - 1) * scale));
}

/** Random float32 data for an input. */
export function randomInput(seed: number, shape: readonly number[], scale = 1): Float32Array {
  const rng = prng(seed);
  return Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (rng() * 2 - 1) * scale);
}

/** A dense layer's weights: `[fanIn, fanOut]` (or `[fanOut, fanIn]` for Gemm transB) scaled by 1/√fanIn. */
function dense(b: OnnxBuilder, rng: () => number, name: string, shape: readonly number[], fanIn: number): string {
  return b.initializer(name, randomTensor(rng, shape, 1 / Math.sqrt(fanIn)));
}

/**
 * MLP classifier: x [batch, 16] → MatMul+Add+Relu → MatMul+Add+Relu → Gemm(transB) → Softmax → [batch, 10].
 *
 * @param batch A fixed batch size, or a symbolic name for a dynamic batch.
 */
export function mlpModel(batch: number | string = "N", seed = 1): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("mlp");
  const x = b.input("x", "float32", [batch, 16]);
  let h = b.node("MatMul", [x, dense(b, rng, "w1", [16, 32], 16)]);
  h = b.node("Add", [h, dense(b, rng, "b1", [32], 16)]);
  h = b.node("Relu", [h]);
  h = b.node("MatMul", [h, dense(b, rng, "w2", [32, 32], 32)]);
  h = b.node("Add", [dense(b, rng, "b2", [32], 32), h]);
  h = b.node("Relu", [h]);
  h = b.node("Gemm", [h, dense(b, rng, "w3", [10, 32], 32), dense(b, rng, "b3", [10], 32)], { transB: 1 });
  b.output(b.node("Softmax", [h], { axis: -1 }, { outputs: ["probs"] }), "float32", [batch, 10]);
  return b.toBytes();
}

/**
 * Small CNN: x [batch, 3, 16, 16] → Conv/Relu/MaxPool → Conv/Relu → GlobalAveragePool → Flatten → Gemm →
 * [batch, 10].
 */
export function cnnModel(batch: number | string = "N", seed = 2): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("cnn");
  const x = b.input("x", "float32", [batch, 3, 16, 16]);
  let h = b.node("Conv", [x, dense(b, rng, "c1w", [8, 3, 3, 3], 27), dense(b, rng, "c1b", [8], 27)], {
    kernel_shape: [3, 3],
    pads: [1, 1, 1, 1],
  });
  h = b.node("Relu", [h]);
  h = b.node("MaxPool", [h], { kernel_shape: [2, 2], strides: [2, 2] });
  h = b.node("Conv", [h, dense(b, rng, "c2w", [16, 8, 3, 3], 72), dense(b, rng, "c2b", [16], 72)], {
    kernel_shape: [3, 3],
    strides: [1, 1],
    auto_pad: "SAME_UPPER",
  });
  h = b.node("Relu", [h]);
  h = b.node("GlobalAveragePool", [h]);
  h = b.node("Flatten", [h], { axis: 1 });
  h = b.node("Gemm", [h, dense(b, rng, "fcw", [16, 10], 16), dense(b, rng, "fcb", [10], 16)], {}, {
    outputs: ["logits"],
  });
  b.output(h, "float32", [batch, 10]);
  return b.toBytes();
}

/**
 * A dense classifier of any widths: x [batch, dims[0]] → (Gemm + Relu) per hidden layer → Gemm → Softmax →
 * [batch, dims.at(-1)], e.g. the MNIST MLP `[784, 256, 128, 10]`.
 */
export function denseMlpModel(dims: readonly number[], batch: number | string = "N", seed = 4): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("dense_mlp");
  let h = b.input("x", "float32", [batch, dims[0]]);
  for (let i = 1; i < dims.length; i++) {
    h = b.node("Gemm", [
      h,
      dense(b, rng, `w${i}`, [dims[i - 1], dims[i]], dims[i - 1]),
      b.initializer(`b${i}`, randomTensor(rng, [dims[i]], 0.1)),
    ]);
    if (i < dims.length - 1) h = b.node("Relu", [h]);
  }
  b.output(b.node("Softmax", [h], { axis: -1 }, { outputs: ["probs"] }), "float32", [batch, dims[dims.length - 1]]);
  return b.toBytes();
}

/**
 * A VGG-style CNN for `size`×`size` RGB images: per entry of `channels` a 3×3 Conv (pad 1) + Relu, a 2×2 MaxPool
 * after every second one, then GlobalAveragePool → Flatten → Gemm → [batch, 10] (e.g. CIFAR-10 with
 * `[32, 32, 64, 64]`).
 */
export function vggModel(
  channels: readonly number[],
  size: number,
  batch: number | string = "N",
  seed = 6,
): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("vgg");
  let h = b.input("x", "float32", [batch, 3, size, size]), c = 3;
  channels.forEach((m, i) => {
    h = b.node("Conv", [
      h,
      dense(b, rng, `conv${i}.w`, [m, c, 3, 3], 9 * c),
      b.initializer(`conv${i}.b`, randomTensor(rng, [m], 0.1)),
    ], {
      kernel_shape: [3, 3],
      pads: [1, 1, 1, 1],
    });
    h = b.node("Relu", [h]);
    c = m;
    if (i % 2 === 1) h = b.node("MaxPool", [h], { kernel_shape: [2, 2], strides: [2, 2] });
  });
  h = b.node("Flatten", [b.node("GlobalAveragePool", [h])], { axis: 1 });
  h = b.node("Gemm", [h, dense(b, rng, "fc.w", [c, 10], c), b.initializer("fc.b", randomTensor(rng, [10], 0.1))], {}, {
    outputs: ["logits"],
  });
  b.output(h, "float32", [batch, 10]);
  return b.toBytes();
}

/** `Reshape(x, Concat(Shape(ref)[from:to], tail))`: the shape-chain reshape exporters write. */
function shapeChainReshape(
  b: OnnxBuilder,
  x: string,
  ref: string,
  from: number,
  to: number,
  tail: readonly number[],
): string {
  const shape = b.node("Shape", [ref]);
  const head = b.node("Slice", [
    shape,
    b.ints(b.fresh("starts"), [from]),
    b.ints(b.fresh("ends"), [to]),
    b.ints(b.fresh("axes"), [0]),
  ]);
  const spec = b.node("Concat", [head, b.ints(b.fresh("tail"), [...tail])], { axis: 0 });
  return b.node("Reshape", [x, spec]);
}

/** The decomposed LayerNorm over the last axis, as PyTorch exports it. */
function decomposedLayerNorm(b: OnnxBuilder, rng: () => number, x: string, d: number, prefix: string): string {
  const mean = b.node("ReduceMean", [x], { axes: [-1], keepdims: 1 });
  const diff = b.node("Sub", [x, mean]);
  const sq = b.node("Pow", [diff, b.weight(`${prefix}_two`, [], [2])]);
  const v = b.node("ReduceMean", [sq], { axes: [-1], keepdims: 1 });
  const ve = b.node("Add", [v, b.weight(`${prefix}_eps`, [], [1e-5])]);
  const norm = b.node("Div", [diff, b.node("Sqrt", [ve])]);
  const gamma = b.initializer(
    `${prefix}_gamma`,
    ConstTensor.fromNumbers("float32", [d], Array.from({ length: d }, () => 1 + (rng() - 0.5) * 0.2)),
  );
  const beta = b.initializer(`${prefix}_beta`, randomTensor(rng, [d], 0.1));
  return b.node("Add", [b.node("Mul", [norm, gamma]), beta]);
}

/**
 * The decomposed LayerNorm of `x` over `axes` (ReduceMean, Sub, Pow 2, ReduceMean, Add ε, Sqrt, Div), times the
 * value `gamma` and plus the value `beta` when given.
 */
export function layerNormOver(
  b: OnnxBuilder,
  x: string,
  axes: readonly number[],
  gamma: string,
  beta?: string,
): string {
  const mean = (v: string) => b.node("ReduceMean", [v], { axes: [...axes], keepdims: 1 });
  const diff = b.node("Sub", [x, mean(x)]);
  const v = mean(b.node("Pow", [diff, b.weight(b.fresh("two"), [], [2])]));
  const norm = b.node("Div", [diff, b.node("Sqrt", [b.node("Add", [v, b.weight(b.fresh("eps"), [], [1e-5])])])]);
  const scaled = b.node("Mul", [norm, gamma]);
  return beta === undefined ? scaled : b.node("Add", [scaled, beta]);
}

/**
 * x `[shape]` → the decomposed LayerNorm over `axes` → y, with γ "g" and β "b" (when `beta` is given) seeded
 * initializers of the given shapes, or graph inputs when `asInputs` says so.
 */
export function layerNormModel(
  shape: readonly number[],
  axes: readonly number[],
  gamma: readonly number[],
  beta?: readonly number[],
  asInputs: { gamma?: boolean; beta?: boolean } = {},
  seed = 6,
): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("layer_norm");
  const x = b.input("x", "float32", shape);
  const affine = (name: string, dims: readonly number[], input?: boolean) =>
    input ? b.input(name, "float32", dims) : b.initializer(name, randomTensor(rng, dims));
  const g = affine("g", gamma, asInputs.gamma), bb = beta && affine("b", beta, asInputs.beta);
  b.output(b.node("Identity", [layerNormOver(b, x, axes, g, bb)], {}, { outputs: ["y"] }), "float32", shape);
  return b.toBytes();
}

/** The decomposed GELU `x · 0.5 · (1 + erf(x / √2))`. */
function decomposedGelu(b: OnnxBuilder, x: string): string {
  const e = b.node("Erf", [b.node("Div", [x, b.weight(b.fresh("sqrt2"), [], [Math.SQRT2])])]);
  const s = b.node("Add", [e, b.weight(b.fresh("one"), [], [1])]);
  return b.node("Mul", [b.node("Mul", [x, s]), b.weight(b.fresh("half"), [], [0.5])]);
}

/**
 * A pre-LN transformer block: x [batch, 8, 32] → LN (decomposed) → 4-head attention (MatMul, Softmax, Shape-chain
 * reshapes, Transposes) → residual Add → LayerNormalization → FFN with decomposed GELU → residual Add.
 */
export function transformerModel(batch: number | string = "N", seed = 3): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("transformer_block");
  const S = 8, D = 32, H = 4, Dh = D / H, F = 64;
  const x = b.input("x", "float32", [batch, S, D]);
  const h = decomposedLayerNorm(b, rng, x, D, "ln1");
  const proj = (name: string) =>
    b.node("Add", [b.node("MatMul", [h, dense(b, rng, `w${name}`, [D, D], D)]), dense(b, rng, `b${name}`, [D], D)]);
  const heads = (v: string, perm: number[]) =>
    b.node("Transpose", [shapeChainReshape(b, v, x, 0, 2, [H, Dh])], { perm });
  const q = heads(proj("q"), [0, 2, 1, 3]), k = heads(proj("k"), [0, 2, 3, 1]), v = heads(proj("v"), [0, 2, 1, 3]);
  const scores = b.node("Div", [b.node("MatMul", [q, k]), b.weight("scale", [], [Math.sqrt(Dh)])]);
  const attn = b.node("MatMul", [b.node("Softmax", [scores], { axis: -1 }), v]);
  const merged = shapeChainReshape(b, b.node("Transpose", [attn], { perm: [0, 2, 1, 3] }), x, 0, 2, [D]);
  const out = b.node("Add", [b.node("MatMul", [merged, dense(b, rng, "wo", [D, D], D)]), dense(b, rng, "bo", [D], D)]);
  const r1 = b.node("Add", [x, out]);
  const ln2 = b.node("LayerNormalization", [
    r1,
    b.initializer("ln2_gamma", randomTensor(rng, [D], 0.1)),
    b.initializer("ln2_beta", randomTensor(rng, [D], 0.1)),
  ], {
    axis: -1,
    epsilon: float(1e-5),
  });
  const f1 = b.node("Add", [b.node("MatMul", [ln2, dense(b, rng, "wf1", [D, F], D)]), dense(b, rng, "bf1", [F], D)]);
  const f2 = b.node("Add", [
    b.node("MatMul", [decomposedGelu(b, f1), dense(b, rng, "wf2", [F, D], F)]),
    dense(b, rng, "bf2", [D], F),
  ]);
  b.output(b.node("Add", [r1, f2], {}, { outputs: ["y"] }), "float32", [batch, S, D]);
  return b.toBytes();
}

/** An `If` whose condition folds (`Shape(x)[1] == 4`): then Relu(x)·2, else Neg(x); x is [2, cols]. */
export function ifModel(cols = 4): Uint8Array {
  const b = new OnnxBuilder("if_const");
  const x = b.input("x", "float32", [2, cols]);
  const dim = b.node("Gather", [b.node("Shape", [x]), b.ints("one", [1], [])], { axis: 0 });
  const cond = b.node("Equal", [dim, b.ints("four", [4], [])]);
  const thenB = b.subgraph("then", (s) => {
    s.output(s.node("Mul", [s.node("Relu", [x]), b.weight("two", [], [2])], {}, { outputs: ["then_out"] }), "float32", [
      2,
      cols,
    ]);
  });
  const elseB = b.subgraph(
    "else",
    (s) => s.output(s.node("Neg", [x], {}, { outputs: ["else_out"] }), "float32", [2, cols]),
  );
  b.output(b.node("If", [cond], { then_branch: thenB, else_branch: elseB }, { outputs: ["y"] }), "float32", [2, cols]);
  return b.toBytes();
}

/** Relu(x) reshaped by a Shape chain to [batch, 12] and then Relu again; x is [batch, 3, 4]. */
export function shapeChainModel(batch: number | string = "N"): Uint8Array {
  const b = new OnnxBuilder("shape_chain");
  const x = b.input("x", "float32", [batch, 3, 4]);
  const r = shapeChainReshape(b, b.node("Relu", [x]), x, 0, 1, [12]);
  b.output(b.node("Sigmoid", [r], {}, { outputs: ["y"] }), "float32", [batch, 12]);
  return b.toBytes();
}

/**
 * Data movement and elementwise ops around an embedding: ids (int64 [batch, 6]) → Gather → Add x → Split →
 * Transpose/Slice/ReduceMean and Greater/Where/Mul/Pad → Concat with an Expand → Softmax; y is [batch, 9, 6].
 */
export function miscOpsModel(seed = 5): Uint8Array {
  const rng = prng(seed), b = new OnnxBuilder("misc_ops");
  const ids = b.input("ids", "int64", ["N", 6]);
  const x = b.input("x", "float32", ["N", 6, 8]);
  const h = b.node("Add", [b.node("Gather", [b.initializer("E", randomTensor(rng, [20, 8])), ids], { axis: 0 }), x]);
  const [p1, p2] = b.nodeN("Split", [h, b.ints("sp", [3, 5])], { axis: 2 }, { outputs: 2 });
  const t = b.node("Transpose", [p2], { perm: [0, 2, 1] });
  const s = b.node("Slice", [t, b.ints("st", [1]), b.ints("en", [4]), b.ints("ax", [1])]);
  const r = b.node("ReduceMean", [s], { axes: [2], keepdims: 1 });
  const pos = b.node("Greater", [p1, b.weight("zero", [], [0])]);
  const w = b.node("Where", [pos, p1, b.node("Mul", [p1, b.weight("leak", [], [0.1])])]);
  const pad = b.node("Pad", [w, b.ints("pads", [0, 0, 1, 0, 0, 2])]);
  const expanded = b.node("Expand", [r, b.ints("es", [1, 3, 6])]);
  const c = b.node("Concat", [b.node("Transpose", [pad], { perm: [0, 2, 1] }), expanded], { axis: 1 });
  b.output(b.node("Softmax", [c], { axis: 1 }, { outputs: ["y"] }), "float32", ["N", 9, 6]);
  return b.toBytes();
}

/** A model with an op no lowering supports (`Einsum`) between two supported ones. */
export function unsupportedOpModel(): Uint8Array {
  const b = new OnnxBuilder("unsupported");
  const x = b.input("x", "float32", [2, 3]);
  const e = b.node("Einsum", [b.node("Relu", [x])], { equation: "ij->ji" }, { name: "transpose_by_einsum" });
  b.output(b.node("Relu", [e], {}, { outputs: ["y"] }), "float32", [3, 2]);
  return b.toBytes();
}
