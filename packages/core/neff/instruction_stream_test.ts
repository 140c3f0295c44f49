import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import { decodeSlotHeader, instructionSlot, instructionStream } from "./instruction_stream.ts";
import { slots } from "./_testing.ts";

describe("instruction streams", () => {
  test("decodeSlotHeader() splits the little-endian u16 into word_len and opcode", () => {
    expect(decodeSlotHeader(new Uint8Array([0xcc, 0x10, 0xff]))).toEqual({ wordLen: 0x10, opcode: 0xcc });
    expect(() => decodeSlotHeader(new Uint8Array(1))).toThrow(RangeError);
  });

  test("instructionStream() counts 64-byte slots and instructionSlot() returns each", () => {
    const s = instructionStream("sg00/PE.bin", slots(1, 2, 3));
    expect(s.slotCount).toBe(3);
    expect(decodeSlotHeader(instructionSlot(s, 2)).opcode).toBe(3);
    expect(() => instructionSlot(s, 3)).toThrow(RangeError);
  });

  test("instructionStream() rejects a length that is not a whole number of slots", () => {
    expect(() => instructionStream("sg00/PE.bin", new Uint8Array(100))).toThrow(NrtError);
    expect(() => instructionStream("sg00/PE.bin", new Uint8Array(100))).toThrow("sg00/PE.bin is 100 bytes");
  });
});
