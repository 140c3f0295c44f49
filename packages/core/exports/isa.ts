/**
 * `@nrt/core/isa`: the device contract the runtime and a device (the simulator, or another backend) share — the
 * sequencer's 64-byte instruction slots and their opcodes, notification records and error-record fields, the DMA
 * descriptor and ring table, the argument and opcode tables, the register formats (notification-queue block,
 * stream-table entry) and the pool_stdio block layout. One definition each: both sides encode and decode with these.
 *
 * Seed: runtime-synthesis §3.2/§3.3, spmd-teardown §2.1/§4.3/§5, lifecycle-error-model §4.5/§5.3 (each constant's
 * doc comment says which fact it carries, or that the encoding is ours).
 *
 * @example Encode and decode one instruction
 * ```ts
 * import { decodeInstruction, encodeInstruction, Opcode } from "@nrt/core/isa";
 * const slot = encodeInstruction({ op: Opcode.DRAIN });
 * console.log(slot.length, decodeInstruction(slot)?.op === Opcode.DRAIN); // 64 true
 * ```
 *
 * @module
 */
export * from "../isa.ts";
export * from "../notification/error_record.ts";
export {
  POOL_STDIO_BLOCK_ALIGN,
  POOL_STDIO_BLOCK_BYTES,
  POOL_STDIO_DESCRIPTOR_BYTES,
  POOL_STDIO_ENTRY_BYTES,
  POOL_STDIO_ENTRY_HEADER_BYTES,
  POOL_STDIO_INFO_TABLE_BYTES,
  POOL_STDIO_MAGIC,
  POOL_STDIO_MAX_QUEUE_ALLOC,
  POOL_STDIO_QUEUE_ALIGN,
  POOL_STDIO_RECORD_BYTES,
  POOL_STDIO_SLOTS,
  POOL_STDIO_STDERR_BASE,
  POOL_STDIO_STDERR_QUEUE_BYTES,
  POOL_STDIO_STDOUT_BASE,
  PoolStdioDescriptor,
  PoolStdioStreamTag,
} from "../stdio/pool_stdio.ts";
