/**
 * Engine instruction streams: every engine `.bin` in a subgraph is a sequence of 64-byte instruction slots whose
 * first two bytes, read as a little-endian u16, are `word_len << 8 | opcode`, with `word_len` 0x10 (16 words of
 * 4 bytes) in every slot of the real NEFFs (`../shared/fixtures/README.md`).
 *
 * @module
 */
import { invalid } from "./_json.ts";

/** Bytes per instruction slot. */
export const INSTRUCTION_SLOT_BYTES = 64;
/** The `word_len` of a 64-byte slot (16 × 4-byte words). */
export const INSTRUCTION_WORD_LEN = 0x10;

/** The decoded first two bytes of a slot. */
export interface SlotHeader {
  /** Slot length in 4-byte words (0x10 for a 64-byte slot). */
  wordLen: number;
  /** The engine opcode. */
  opcode: number;
}

/**
 * Decodes a slot's header: the first two bytes as a little-endian u16 are `word_len << 8 | opcode`.
 *
 * @param slot One instruction slot (at least two bytes).
 * @returns `{ wordLen, opcode }`.
 * @throws {RangeError} When `slot` is shorter than two bytes.
 *
 * @example Decode a PE slot
 * ```ts
 * import { decodeSlotHeader } from "./instruction_stream.ts";
 * console.log(decodeSlotHeader(new Uint8Array([0xb1, 0x10]))); // { wordLen: 16, opcode: 177 }
 * ```
 */
export function decodeSlotHeader(slot: Uint8Array): SlotHeader {
  if (slot.length < 2) throw new RangeError(`An instruction slot needs at least 2 bytes, got ${slot.length}`);
  return { wordLen: slot[1], opcode: slot[0] };
}

/** One engine's instruction stream. */
export interface InstructionStream {
  /** The member holding it, e.g. `"sg00/PE.bin"`. */
  member: string;
  /** The raw bytes (a whole number of slots). */
  bytes: Uint8Array;
  /** Number of 64-byte slots. */
  slotCount: number;
}

/**
 * Wraps an engine `.bin` member as an instruction stream, checking it is a whole number of 64-byte slots.
 *
 * @throws {NrtError} `NRT_INVALID` when the length is not a multiple of 64.
 */
export function instructionStream(member: string, bytes: Uint8Array): InstructionStream {
  if (bytes.length % INSTRUCTION_SLOT_BYTES !== 0) {
    throw invalid(
      `instruction stream ${member} is ${bytes.length} bytes, not a multiple of the ${INSTRUCTION_SLOT_BYTES}-byte slot`,
    );
  }
  return { member, bytes, slotCount: bytes.length / INSTRUCTION_SLOT_BYTES };
}

/**
 * The `index`-th 64-byte slot of a stream (a view, not a copy).
 *
 * @example Walk the opcodes of a stream
 * ```ts
 * import { decodeSlotHeader, instructionSlot, instructionStream } from "./instruction_stream.ts";
 * const slot = new Uint8Array(64);
 * slot[0] = 0xf0; slot[1] = 0x10; // word_len 0x10, opcode 0xF0
 * const stream = instructionStream("sg00/Pool.bin", slot);
 * for (let i = 0; i < stream.slotCount; i++) console.log(decodeSlotHeader(instructionSlot(stream, i)).opcode);
 * ```
 */
export function instructionSlot(stream: InstructionStream, index: number): Uint8Array {
  if (!Number.isInteger(index) || index < 0 || index >= stream.slotCount) {
    throw new RangeError(`Slot ${index} is outside ${stream.member} (${stream.slotCount} slots)`);
  }
  return stream.bytes.subarray(index * INSTRUCTION_SLOT_BYTES, (index + 1) * INSTRUCTION_SLOT_BYTES);
}

/** Every slot of a stream, in order (views, not copies). */
export function* instructionSlots(stream: InstructionStream): Generator<Uint8Array, void, undefined> {
  for (let i = 0; i < stream.slotCount; i++) yield instructionSlot(stream, i);
}
