/**
 * The host reference of the collectives: what each rank's output must hold, computed on the host from the inputs,
 * independently of the device's data path (its own bfloat16 rounding code; the same fold order). Ours
 * (`docs/collectives.md`): reductions fold in rank order, rank 0 first; float32 folds round to float32; bfloat16 folds
 * are computed in float32 and rounded to bfloat16 (nearest, ties to even) after every fold; max propagates NaN.
 *
 * @module
 */
import { ccSizes, NrtaCcDtype, NrtaCcOp, NrtaCcRedOp } from "./plan.ts";

/** bfloat16 bits of a float32 value, nearest-even (a NaN becomes the quiet NaN 0x7fc0). */
export function toBfloat16(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  const b = new DataView(new ArrayBuffer(4));
  b.setFloat32(0, x);
  const hi = b.getUint16(0), lo = b.getUint16(2);
  // Round the dropped half: above 0x8000 up, below down, exactly half to the even `hi`.
  const up = lo > 0x8000 || (lo === 0x8000 && (hi & 1) === 1);
  return (hi + (up ? 1 : 0)) & 0xffff;
}

/** The float32 value of bfloat16 bits. */
export function fromBfloat16(h: number): number {
  const b = new DataView(new ArrayBuffer(4));
  b.setUint16(0, h & 0xffff);
  return b.getFloat32(0);
}

function read(bytes: Uint8Array, dtype: NrtaCcDtype, i: number): number {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return dtype === NrtaCcDtype.BFLOAT16 ? fromBfloat16(v.getUint16(2 * i, true)) : v.getFloat32(4 * i, true);
}

function write(bytes: Uint8Array, dtype: NrtaCcDtype, i: number, x: number): void {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === NrtaCcDtype.BFLOAT16) v.setUint16(2 * i, toBfloat16(x), true);
  else v.setFloat32(4 * i, x, true);
}

/** The reduction of element `i` of every input, folded in rank order with the rounding of `dtype`. */
function reduceAt(inputs: readonly Uint8Array[], red: NrtaCcRedOp, dtype: NrtaCcDtype, i: number): number {
  let acc = read(inputs[0], dtype, i);
  for (let k = 1; k < inputs.length; k++) {
    const x = read(inputs[k], dtype, i);
    const f = red === NrtaCcRedOp.MAX
      ? (Number.isNaN(acc) || Number.isNaN(x) ? NaN : Math.max(acc, x))
      : Math.fround(acc + x);
    acc = dtype === NrtaCcDtype.BFLOAT16 ? fromBfloat16(toBfloat16(f)) : Math.fround(f);
  }
  return acc;
}

/**
 * Each rank's expected output of a collective over `inputs` (one per rank, `count` elements as
 * {@linkcode ccSizes} counts them).
 */
export function ccReference(
  op: NrtaCcOp,
  red: NrtaCcRedOp,
  dtype: NrtaCcDtype,
  count: number,
  inputs: readonly Uint8Array[],
): Uint8Array[] {
  const R = inputs.length;
  const { output } = ccSizes(op, dtype, count, R);
  const outs = inputs.map(() => new Uint8Array(output));
  if (op === NrtaCcOp.ALL_GATHER) {
    const e = output / R;
    for (const o of outs) inputs.forEach((x, k) => o.set(x.subarray(0, e), k * e));
    return outs;
  }
  if (op === NrtaCcOp.REDUCE_SCATTER) {
    outs.forEach((o, r) => {
      for (let i = 0; i < count; i++) write(o, dtype, i, reduceAt(inputs, red, dtype, r * count + i));
    });
    return outs;
  }
  const full = new Uint8Array(output);
  for (let i = 0; i < count; i++) write(full, dtype, i, reduceAt(inputs, red, dtype, i));
  for (const o of outs) o.set(full);
  return outs;
}
