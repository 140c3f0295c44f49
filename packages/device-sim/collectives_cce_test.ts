import { describe, expect, test } from "bun:test";
import { DmaCceDtype, dmaCceFlags, DmaCceOp } from "@nrt/core/isa";
import { bf16ToF32, cceFold, f32ToBf16 } from "./collectives_cce.ts";

const f32 = (...xs: number[]) => new Uint8Array(Float32Array.from(xs).buffer);
const bf16 = (...hs: number[]) => new Uint8Array(Uint16Array.from(hs).buffer);

describe("the compute-DMA fold (ours: docs/collectives.md)", () => {
  test("bfloat16 rounding: nearest, ties to even, NaN stays NaN", () => {
    const bits = (u: number) => new Float32Array(new Uint32Array([u]).buffer)[0];
    expect(f32ToBf16(bits(0x3f80_8000))).toBe(0x3f80); // tie, even below
    expect(f32ToBf16(bits(0x3f81_8000))).toBe(0x3f82); // tie, even above
    expect(f32ToBf16(bits(0x3f80_8001))).toBe(0x3f81); // above the tie
    expect(f32ToBf16(bits(0x3f80_7fff))).toBe(0x3f80); // below the tie
    expect(f32ToBf16(bits(0x7f7f_ffff))).toBe(0x7f80); // rounds to +infinity
    expect(Number.isNaN(bf16ToF32(f32ToBf16(NaN)))).toBe(true);
    expect(bf16ToF32(0xc040)).toBe(-3);
  });

  test("add and max over float32 and bfloat16, folding into the destination", () => {
    const d = f32(1, -2, 0.1);
    expect(cceFold(dmaCceFlags(DmaCceOp.ADD, DmaCceDtype.FLOAT32), d, f32(2, 5, 0.2))).toBeUndefined();
    expect(Array.from(new Float32Array(d.buffer))).toEqual([3, 3, Math.fround(Math.fround(0.1) + Math.fround(0.2))]);
    const m = f32(1, NaN, -7);
    expect(cceFold(dmaCceFlags(DmaCceOp.MAX, DmaCceDtype.FLOAT32), m, f32(0, 1, -8))).toBeUndefined();
    expect(Array.from(new Float32Array(m.buffer))).toEqual([1, NaN, -7]);
    // bfloat16 1 + 2^-8: 1.00390625 is not representable (8 bits of mantissa) and ties to even, 1.0.
    const b = bf16(0x3f80);
    expect(cceFold(dmaCceFlags(DmaCceOp.ADD, DmaCceDtype.BFLOAT16), b, bf16(0x3b80))).toBeUndefined();
    expect(Array.from(new Uint16Array(b.buffer))).toEqual([0x3f80]);
    const c = bf16(0x3f80);
    expect(cceFold(dmaCceFlags(DmaCceOp.MAX, DmaCceDtype.BFLOAT16), c, bf16(0x4000))).toBeUndefined();
    expect(Array.from(new Uint16Array(c.buffer))).toEqual([0x4000]);
  });

  test("what the engine refuses", () => {
    expect(cceFold(dmaCceFlags(DmaCceOp.ADD, 7 as 0), f32(1), f32(1))).toBe(
      "compute-DMA element type 7 is not modelled",
    );
    expect(cceFold(9, f32(1), f32(1))).toBe("compute-DMA operation 9 is not modelled");
    expect(cceFold(dmaCceFlags(DmaCceOp.ADD, DmaCceDtype.FLOAT32), new Uint8Array(6), new Uint8Array(6))).toBe(
      "6 B is not a whole number of 4-byte elements",
    );
  });
});
