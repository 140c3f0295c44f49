/**
 * The compute-DMA (CCE) fold of the simulated DMA engine: a descriptor whose `flags` name an operation reads its
 * destination, combines it element-wise with its source and writes the result back — the data path of the
 * collectives' reductions (`docs/collectives.md`).
 *
 * Seed: spmd-teardown §4.4 says a reduction across cores is data-movement-driven, naming the compute-DMA path
 * (`add_dma_packet_cce`, `SDMA_CCETYPE ADD/MIN/MAX/FMA`) [MED × INFERRED]. Everything else here is ours: the flags
 * encoding (`@nrt/core/isa`'s `dmaCceFlags`), the element types (float32 and bfloat16, little-endian), bfloat16
 * computed in float32 and rounded to nearest-even on every fold, NaN propagating through both operations.
 *
 * @module
 */
import { DmaCceDtype, DmaCceOp } from "@nrt/core/isa";

/** Bytes per element of a compute-DMA element type, or `undefined` for a code the engine does not know. */
export function cceElementBytes(dtype: number): number | undefined {
  return dtype === DmaCceDtype.FLOAT32 ? 4 : dtype === DmaCceDtype.BFLOAT16 ? 2 : undefined;
}

/** float32 → bfloat16 bits, round to nearest, ties to even; a NaN stays a (quiet) NaN. */
export function f32ToBf16(x: number): number {
  F32[0] = x;
  const u = U32[0];
  if ((u & 0x7f80_0000) === 0x7f80_0000 && (u & 0x007f_ffff) !== 0) return ((u >>> 16) | 0x0040) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bfloat16 bits → float32 value. */
export function bf16ToF32(h: number): number {
  U32[0] = (h & 0xffff) << 16;
  return F32[0];
}

/** max with NaN propagating (ours). */
function combineMax(a: number, b: number): number {
  return a !== a || b !== b ? NaN : a > b ? a : b;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/**
 * Folds `src` into `dst` in place: `dst[i] = op(dst[i], src[i])`.
 *
 * @returns `undefined`, or why the fold is impossible (unknown op or type, a length that is not whole elements).
 */
export function cceFold(flags: number, dst: Uint8Array, src: Uint8Array): string | undefined {
  const op = flags & 0xff, dtype = (flags >>> 8) & 0xff;
  const size = cceElementBytes(dtype);
  if (size === undefined) return `compute-DMA element type ${dtype} is not modelled`;
  if (op !== DmaCceOp.ADD && op !== DmaCceOp.MAX) return `compute-DMA operation ${op} is not modelled`;
  if (src.byteLength % size !== 0 || dst.byteLength !== src.byteLength) {
    return `${src.byteLength} B is not a whole number of ${size}-byte elements`;
  }
  if (LITTLE_ENDIAN && dtype === DmaCceDtype.FLOAT32 && dst.byteOffset % 4 === 0 && src.byteOffset % 4 === 0) {
    // The fast path: aligned float32 in the host's (little-endian) order; a Float32Array store rounds to float32.
    const a = new Float32Array(dst.buffer, dst.byteOffset, dst.byteLength / 4),
      b = new Float32Array(src.buffer, src.byteOffset, src.byteLength / 4);
    if (op === DmaCceOp.ADD) { for (let i = 0; i < a.length; i++) a[i] += b[i]; }
    else for (let i = 0; i < a.length; i++) a[i] = combineMax(a[i], b[i]);
    return undefined;
  }
  const d = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
  const s = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const combine = op === DmaCceOp.ADD ? (a: number, b: number) => a + b : combineMax;
  if (dtype === DmaCceDtype.FLOAT32) {
    for (let at = 0; at < src.byteLength; at += 4) {
      d.setFloat32(at, combine(d.getFloat32(at, true), s.getFloat32(at, true)), true);
    }
  } else {
    for (let at = 0; at < src.byteLength; at += 2) {
      d.setUint16(
        at,
        f32ToBf16(Math.fround(combine(bf16ToF32(d.getUint16(at, true)), bf16ToF32(s.getUint16(at, true))))),
        true,
      );
    }
  }
  return undefined;
}
