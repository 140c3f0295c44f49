/**
 * The formats the runtime and a device share, each with one definition in isa.ts: round trips, and the exact bytes
 * written out by hand (so a wrong constant cannot agree with itself on both sides).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import {
  decodeStreamEntry,
  decodeTensorDescriptor,
  encodeStreamEntry,
  encodeTensorDescriptor,
  KernelDtype,
  NQ_CAUSE_OVERFLOW,
  NQ_REGISTER_BYTES,
  NqRegister,
  STREAM_ENTRY_BYTES,
  TENSOR_DESC_BYTES,
  TensorDescField,
} from "./isa.ts";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");

describe("the stream-table entry", () => {
  test("encodes as u64 pa, u32 slot count, u32 valid|model|doorbell, and decodes back", () => {
    const e = { pa: 0x1_2345_6780, slots: 9, model: 0x1abc, doorbell: 0x0102 };
    const bytes = encodeStreamEntry(e);
    expect(bytes.byteLength).toBe(16);
    expect(STREAM_ENTRY_BYTES).toBe(16);
    expect(hex(bytes)).toBe("80 67 45 23 01 00 00 00 09 00 00 00 02 01 bc 9a");
    expect(decodeStreamEntry(bytes)).toEqual(e);
  });

  test("a clear valid bit is no stream; the model id keeps 15 bits", () => {
    expect(decodeStreamEntry(new Uint8Array(16))).toBeUndefined();
    expect(decodeStreamEntry(encodeStreamEntry({ pa: 0, slots: 1, model: 0x8001, doorbell: 3 }))?.model).toBe(1);
  });
});

describe("the notification-queue register block", () => {
  test("base lo/hi, capacity, head, tail, cause at 0, 4, 8, 12, 16, 20 of a 24-byte block; overflow is cause bit 0", () => {
    expect(NqRegister).toEqual({ BASE_LO: 0, BASE_HI: 4, CAPACITY: 8, HEAD: 12, TAIL: 16, CAUSE: 20 });
    expect(NQ_REGISTER_BYTES).toBe(24);
    expect(NQ_CAUSE_OVERFLOW).toBe(1);
  });
});

describe("the 32-byte tensor descriptor", () => {
  test("addr, bytes, dtype, rank, 4 dims as little-endian u32s, and back", () => {
    const v = new DataView(new ArrayBuffer(32));
    const d = { addr: 0x20_0040, bytes: 96, dtype: KernelDtype.bfloat16, dims: [2, 3, 8] };
    encodeTensorDescriptor(d, v, 0);
    expect(hex(new Uint8Array(v.buffer))).toBe(
      "40 00 20 00 60 00 00 00 02 00 00 00 03 00 00 00 02 00 00 00 03 00 00 00 08 00 00 00 00 00 00 00",
    );
    expect(decodeTensorDescriptor(v, 0)).toEqual(d);
    expect(TENSOR_DESC_BYTES).toBe(32);
    expect(() => encodeTensorDescriptor({ ...d, dims: [1, 1, 1, 1, 1] }, v, 0)).toThrow(RangeError);
  });

  test("the dtype codes are docs/kernel-abi.md's: float32 0 … bool 12", () => {
    expect(KernelDtype).toEqual({
      float32: 0,
      float16: 1,
      bfloat16: 2,
      int8: 3,
      uint8: 4,
      int16: 5,
      uint16: 6,
      int32: 7,
      uint32: 8,
      int64: 9,
      uint64: 10,
      float64: 11,
      bool: 12,
    });
  });

  test("the AssemblyScript kernels' field offsets (kernels/src/_abi.ts) equal the runtime's", () => {
    const src = readFileSync(new URL("../../kernels/src/_abi.ts", import.meta.url), "utf8");
    const field = (name: string) => Number(new RegExp(`export const DESC_FIELD_${name}: i32 = (\\d+);`).exec(src)?.[1]);
    expect([field("ADDR"), field("BYTES"), field("DTYPE"), field("RANK"), field("DIMS")]).toEqual([0, 4, 8, 12, 16]);
    expect(TensorDescField).toEqual({ ADDR: 0, BYTES: 4, DTYPE: 8, RANK: 12, DIMS: 16 });
  });
});
