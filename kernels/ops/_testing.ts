/**
 * Test helpers of the op library (private): one ONNX op (or the graph a fused op replaces) run by onnxruntime-web
 * as the oracle and lowered and run by {@linkcode OpHarness}, and the comparison: |ours - ort| <= rtol · |ort| +
 * atol elementwise (rtol 1e-5; atol 1e-6 unless a case sets another floor), integers and booleans exactly. Ours.
 *
 * @module
 */
import { expect } from "bun:test";
import type * as ort from "onnxruntime-web";
import { prng } from "../../packages/core/_testing.ts";
import type { OpHarness } from "./harness.ts";
import type { OpDtype, OpNode } from "./op_node.ts";
import {
  type Attr,
  BY_ORT_TYPE,
  decoded,
  makeData,
  type OnnxNode,
  opValue,
  runOrt,
  type TensorSpec,
  TYPED,
} from "./_onnx_model.ts";

export { type Attr, attr, type TensorSpec } from "./_onnx_model.ts";

/** Tolerances of a comparison. */
export interface Tolerance {
  /** Relative tolerance (default 1e-5). */
  readonly rtol?: number;
  /** Absolute floor near zero (default 1e-6). */
  readonly atol?: number;
}

/** A single ONNX op checked against onnxruntime. */
export interface OpCase extends Tolerance {
  readonly opType: string;
  readonly attributes?: Readonly<Record<string, Attr>>;
  /** Inputs in ONNX order; null for an omitted optional input. */
  readonly inputs: ReadonlyArray<TensorSpec | null>;
  /** Output names (their dtypes and shapes come from onnxruntime's results). */
  readonly outputs: readonly string[];
  /** The ai.onnx opset of the model (default 21). */
  readonly opset?: number;
  /** PRNG seed of the random inputs (default 1). */
  readonly seed?: number;
}

/** Compares our bytes with onnxruntime's tensor. */
export function expectClose(
  label: string,
  dtype: OpDtype,
  got: Uint8Array,
  ref: ort.Tensor,
  tol: Tolerance = {},
): void {
  const rtol = tol.rtol ?? 1e-5, atol = tol.atol ?? 1e-6;
  const want = ref.data as ArrayLike<number | bigint>;
  const ours = new TYPED[dtype](
    got.byteLength / (TYPED[dtype] as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT,
  );
  new Uint8Array(ours.buffer).set(got);
  expect({ label, length: ours.length }).toEqual({ label, length: want.length });
  let worst = { i: -1, excess: 0, got: 0 as number | bigint, want: 0 as number | bigint };
  for (let i = 0; i < want.length; i++) {
    const g = ours[i], w = want[i];
    if (typeof w === "bigint" || dtype !== "float32" && dtype !== "float64") {
      if (BigInt(g) !== BigInt(w) && worst.i < 0) worst = { i, excess: 1, got: g, want: w };
      continue;
    }
    const gn = Number(g), wn = Number(w);
    if (Number.isNaN(wn) && Number.isNaN(gn)) continue;
    if (gn === wn) continue;
    const excess = Math.abs(gn - wn) - (rtol * Math.abs(wn) + atol);
    if (!(excess <= 0) && (worst.i < 0 || excess > worst.excess || Number.isNaN(excess))) {
      worst = { i, excess, got: g, want: w };
    }
  }
  expect({ label, mismatch: worst.i < 0 ? null : `element ${worst.i}: ours ${worst.got}, ort ${worst.want}` })
    .toEqual({ label, mismatch: null });
}

/** Runs one ONNX op in onnxruntime and through lowerNode + the harness, and compares every output. */
export async function checkOp(harness: OpHarness, c: OpCase): Promise<void> {
  const random = prng(c.seed ?? 1);
  const inputs = c.inputs.map((spec) => (spec ? { spec, data: makeData(spec, random) } : null));
  const present = inputs.filter((i): i is NonNullable<typeof i> => i !== null);
  const ref = await runOrt(
    [{ opType: c.opType, inputs: inputs.map((i) => i?.spec.name ?? ""), outputs: c.outputs, attributes: c.attributes }],
    present,
    c.outputs,
    c.opset,
  );
  const node: OpNode = {
    name: `${c.opType}_case`,
    domain: "",
    opType: c.opType,
    attributes: Object.fromEntries(Object.entries(c.attributes ?? {}).map(([k, v]) => [k, decoded(v)])),
    inputs: inputs.map((i) => (i ? opValue(i.spec, i.data) : undefined)),
    outputs: c.outputs.map((name) => ({ name, dtype: BY_ORT_TYPE[ref[name].type], shape: ref[name].dims.map(Number) })),
    ...(c.opset !== undefined ? { opset: c.opset } : {}),
  };
  const feeds = Object.fromEntries(present.filter((i) => !i.spec.constant).map((i) => [i.spec.name, i.data]));
  const got = await harness.runNode(node, feeds);
  for (const o of node.outputs) expectClose(`${c.opType} ${o.name}`, o.dtype, got.get(o.name)!, ref[o.name], c);
}

/** A fused node checked against the ONNX graph it replaces. */
export interface FusedCase extends Tolerance {
  /** The fused node's op type (domain "nrt"). */
  readonly opType: string;
  readonly attributes?: Readonly<Record<string, Attr>>;
  readonly inputs: ReadonlyArray<TensorSpec | null>;
  /** The fused node's single output name; the reference graph must produce it too. */
  readonly output: string;
  /** The reference graph. */
  readonly reference: readonly OnnxNode[];
  /** Constants only the reference graph reads. */
  readonly referenceInputs?: readonly TensorSpec[];
  readonly seed?: number;
}

/** Runs a fused node through the harness and its decomposed reference graph in onnxruntime; compares. */
export async function checkFused(harness: OpHarness, c: FusedCase): Promise<void> {
  const random = prng(c.seed ?? 1);
  const inputs = c.inputs.map((spec) => (spec ? { spec, data: makeData(spec, random) } : null));
  const present = inputs.filter((i): i is NonNullable<typeof i> => i !== null);
  const extra = (c.referenceInputs ?? []).map((spec) => ({ spec, data: makeData(spec, random) }));
  const ref = await runOrt(c.reference, [...present, ...extra], [c.output]);
  const node: OpNode = {
    name: `${c.opType}_case`,
    domain: "nrt",
    opType: c.opType,
    attributes: Object.fromEntries(Object.entries(c.attributes ?? {}).map(([k, v]) => [k, decoded(v)])),
    inputs: inputs.map((i) => (i ? opValue(i.spec, i.data) : undefined)),
    outputs: [{ name: c.output, dtype: "float32", shape: ref[c.output].dims.map(Number) }],
  };
  const feeds = Object.fromEntries(present.filter((i) => !i.spec.constant).map((i) => [i.spec.name, i.data]));
  const got = await harness.runNode(node, feeds);
  expectClose(`nrt.${c.opType}`, "float32", got.get(c.output)!, ref[c.output], c);
}
