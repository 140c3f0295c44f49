/**
 * The simulated sequencer ISA: the 64-byte instruction slots the runtime assembles at load and the device executes
 * after the doorbell, the DMA descriptor, the notification-queue record and the opcode → library table. This is the
 * device contract shared by the runtime (assembler) and the simulator (executor); `docs/isa.md` is its prose.
 *
 * Seed facts: runtime-synthesis §3.2 (every TPB-sequencer instruction is a fixed 64-byte slot whose u16 header is
 * `word_len 0x10 << 8 | opcode`; LOAD_POOL_ARGUMENT 0x107A carrying embedding-table base, SBUF base,
 * one-value-read and completion-write addresses; the 0x1079/0x107C/0x1049 neighbours of the micro-program);
 * spmd-teardown §4.3 (DRAIN 0x10A2 with a paired 0x10A1, EVENT_SEMAPHORE update_mode 0x13); runtime-synthesis §3.3
 * (EXTENDED_INST 0xF0); spmd-teardown §2.1 (the opcode table: 0x118-byte entries, at most 97, 8 M2S/S2M queue
 * offsets); lifecycle-error-model §4.5 (16-byte TPB_ERROR records, error_id 0x09/0x0a in the low byte, the subtype
 * mask in the next 16 bits). Where the seeds give no encoding, the field layout is ours and documented here.
 *
 * @module
 */

/** Bytes per instruction slot. */
export const SLOT_BYTES = 64;
/** `word_len` of every slot: 16 words × 4 bytes. */
export const SLOT_WORD_LEN = 0x10;

/** Opcodes of the simulated sequencer. */
export const Opcode = {
  /** Ours: push a notification record (kind + value). */
  NOTIFY: 0x01,
  /** Ours: the MODEL_SWITCH section — make a model current and point the Q7 engine at its opcode table. */
  MODEL_SWITCH: 0x02,
  /**
   * Ours: one step of the Pool PREAMBLE's ucode-library load sequence (runtime-synthesis §2.2 places the sequence
   * there, without an encoding) — load library `lib` of the opcode table at `opcodeTable` into the Q7 cores'
   * kernel_info_table.
   */
  ULIB_LOAD: 0x03,
  /** Seed 0x1049 neighbour, used here as dma_config_size: start the configured M2S transfers. */
  DMA_CONFIG_SIZE: 0x49,
  /** Seed 0x1079: dma_config — attach descriptor rings to the custom-op queues. */
  DMA_CONFIG: 0x79,
  /** Seed 0x107A: LOAD_POOL_ARGUMENT. */
  LOAD_POOL_ARGUMENT: 0x7a,
  /** Seed 0x107C neighbour, used here as EVENT_SEMAPHORE. */
  EVENT_SEMAPHORE: 0x7c,
  /** Seed 0x10A1: the DRAIN paired with 0x10A2 (arms the join). */
  DRAIN_ARM: 0xa1,
  /** Seed 0x10A2: DRAIN — the join of all 8 Q7 cores, then the output DMA drains. */
  DRAIN: 0xa2,
  /** Seed 0xF0: EXTENDED_INST — hand the op to the Q7 cluster through the swapped opcode table. */
  EXTENDED_INST: 0xf0,
} as const;
/** One opcode. */
export type Opcode = typeof Opcode[keyof typeof Opcode];

const OPCODE_NAMES: ReadonlyMap<number, string> = new Map(Object.entries(Opcode).map(([k, v]) => [v, k]));

/** The mnemonic of an opcode, or `undefined` when the simulator does not model it. */
export function opcodeName(opcode: number): string | undefined {
  return OPCODE_NAMES.get(opcode);
}

/** EVENT_SEMAPHORE `update_mode` 0x13: increment on done (seed: spmd-teardown §4.3). */
export const EVENT_UPDATE_MODE_INCREMENT = 0x13;

/** DMA direction of a DMA_CONFIG: M2S (memory to stream, `ctl = 1`) or S2M (`ctl = 0`). */
export const DmaDirection = { S2M: 0, M2S: 1 } as const;
/** One DMA direction. */
export type DmaDirection = typeof DmaDirection[keyof typeof DmaDirection];

/** Notification kinds (byte 5 of a record). */
export const NotificationKind = {
  /** A TPB_ERROR record: byte 0 error_id, bytes 1–2 subtype mask. */
  TPB_ERROR: 0x00,
  /** EVENT_SEMAPHORE posted (value = semaphore value after the update). */
  EVENT_SEMAPHORE: 0x01,
  /** The postamble's end-of-execution record (value = execution sequence number of the stream). */
  EXEC_DONE: 0x02,
  /** A hardware-block error (HBM, DMA, NC memory, collectives, network proxy): value = cause, aux = metadata. */
  HW_ERROR: 0x03,
} as const;
/** One notification kind. */
export type NotificationKind = typeof NotificationKind[keyof typeof NotificationKind];

/** TPB_ERROR error ids the sequencer raises (seed: lifecycle-error-model §4.5: 0x09 NONFATAL, 0x0a FATAL). */
export const TpbErrorId = { NONFATAL: 0x09, FATAL: 0x0a } as const;

/** One decoded 16-byte notification-queue record. */
export interface NotificationRecord {
  /** TPB_ERROR error_id (0..11), 0 for other kinds. */
  readonly code: number;
  /** TPB_ERROR subtype mask (the 16 bits after the error id). */
  readonly mask: number;
  /** `al_hal_tpb_eng_type` of the engine that produced the record. */
  readonly engine: number;
  /** Q7 core 0..7, or 0xff when not a Q7 record. */
  readonly q7: number;
  /** {@linkcode NotificationKind}. */
  readonly kind: number;
  /** Device-side model id of the stream. */
  readonly model: number;
  /** Kind-specific value. */
  readonly value: number;
  /** Kind-specific auxiliary word (instruction pointer, metadata). */
  readonly aux: number;
}

/** Bytes per notification record. */
export const NOTIFICATION_BYTES = 16;

/**
 * Encodes a notification record into `out` at `offset`. Byte stores, no DataView: the records are encoded and decoded
 * on every execute, and a DataView over a small array makes JavaScriptCore give the array an ArrayBuffer of its own
 * (ours; measured at several µs per execute).
 */
export function encodeNotification(r: NotificationRecord, out: Uint8Array, offset = 0): void {
  if (offset < 0 || offset + NOTIFICATION_BYTES > out.length) {
    throw new RangeError(`Cannot encode a notification at byte ${offset} of ${out.length}`);
  }
  out[offset] = r.code;
  out[offset + 1] = r.mask;
  out[offset + 2] = r.mask >>> 8;
  out[offset + 3] = r.engine;
  out[offset + 4] = r.q7;
  out[offset + 5] = r.kind;
  out[offset + 6] = r.model;
  out[offset + 7] = r.model >>> 8;
  setU32(out, offset + 8, r.value);
  setU32(out, offset + 12, r.aux);
}

/** Decodes the notification record at `offset`. */
export function decodeNotification(bytes: Uint8Array, offset = 0): NotificationRecord {
  if (offset < 0 || offset + NOTIFICATION_BYTES > bytes.length) {
    throw new RangeError(`Cannot decode a notification at byte ${offset} of ${bytes.length}`);
  }
  return {
    code: bytes[offset],
    mask: bytes[offset + 1] | (bytes[offset + 2] << 8),
    engine: bytes[offset + 3],
    q7: bytes[offset + 4],
    kind: bytes[offset + 5],
    model: bytes[offset + 6] | (bytes[offset + 7] << 8),
    value: getU32(bytes, offset + 8),
    aux: getU32(bytes, offset + 12),
  };
}

/** The little-endian u32 at `offset` of `bytes` (ours: a DataView-free read for small arrays on hot paths). */
export function getU32(bytes: Uint8Array, offset: number): number {
  return (bytes[offset] | (bytes[offset + 1] << 8) | (bytes[offset + 2] << 16) | (bytes[offset + 3] << 24)) >>> 0;
}

/** Stores `value` as a little-endian u32 at `offset` of `bytes` (ours, like {@linkcode getU32}). */
export function setU32(bytes: Uint8Array, offset: number, value: number): void {
  bytes[offset] = value;
  bytes[offset + 1] = value >>> 8;
  bytes[offset + 2] = value >>> 16;
  bytes[offset + 3] = value >>> 24;
}

/** The low 64 bits of a record as the seed's decoder reads them: `error_id = rec & 0xff`, `mask = rec >> 8`. */
export function notificationWord(r: NotificationRecord): bigint {
  const b = new Uint8Array(NOTIFICATION_BYTES);
  encodeNotification(r, b);
  return new DataView(b.buffer).getBigUint64(0, true);
}

/** One decoded instruction. */
export type Instruction =
  | { op: typeof Opcode.NOTIFY; kind: number; value: number }
  | { op: typeof Opcode.MODEL_SWITCH; model: number; opcodeTable: number }
  | { op: typeof Opcode.ULIB_LOAD; lib: number; libs: number; opcodeTable: number }
  | { op: typeof Opcode.DMA_CONFIG; direction: DmaDirection; queues: number; ringTable: number }
  | { op: typeof Opcode.DMA_CONFIG_SIZE; m2sBytes: number; s2mBytes: number }
  | {
    op: typeof Opcode.LOAD_POOL_ARGUMENT;
    embeddingTableBase: number;
    sbufBase: number;
    oneValueReadAddr: number;
    completionWriteAddr: number;
  }
  | { op: typeof Opcode.EXTENDED_INST; opcode: number; call: number }
  | { op: typeof Opcode.DRAIN_ARM }
  | { op: typeof Opcode.DRAIN }
  | { op: typeof Opcode.EVENT_SEMAPHORE; updateMode: number; semaphore: number; value: number };

function setU64(v: DataView, at: number, x: number): void {
  v.setUint32(at, x >>> 0, true);
  v.setUint32(at + 4, Math.floor(x / 0x1_0000_0000) >>> 0, true);
}

function getU64(v: DataView, at: number): number {
  return v.getUint32(at, true) + v.getUint32(at + 4, true) * 0x1_0000_0000;
}

/** The slot header word: `0x10 << 8 | opcode`, little-endian at byte 0. */
export function slotHeader(opcode: number): number {
  return (SLOT_WORD_LEN << 8) | (opcode & 0xff);
}

/** Encodes one instruction into a fresh 64-byte slot. */
export function encodeInstruction(ins: Instruction): Uint8Array {
  const slot = new Uint8Array(SLOT_BYTES);
  const v = new DataView(slot.buffer);
  v.setUint16(0, slotHeader(ins.op), true);
  switch (ins.op) {
    case Opcode.NOTIFY:
      v.setUint8(4, ins.kind);
      v.setUint32(8, ins.value >>> 0, true);
      break;
    case Opcode.MODEL_SWITCH:
      v.setUint32(4, ins.model >>> 0, true);
      setU64(v, 8, ins.opcodeTable);
      break;
    case Opcode.ULIB_LOAD:
      v.setUint8(4, ins.lib);
      v.setUint8(5, ins.libs);
      setU64(v, 8, ins.opcodeTable);
      break;
    case Opcode.DMA_CONFIG:
      v.setUint8(4, ins.direction);
      v.setUint8(5, ins.queues);
      setU64(v, 8, ins.ringTable);
      break;
    case Opcode.DMA_CONFIG_SIZE:
      v.setUint32(4, ins.m2sBytes >>> 0, true);
      v.setUint32(8, ins.s2mBytes >>> 0, true);
      break;
    case Opcode.LOAD_POOL_ARGUMENT:
      setU64(v, 4, ins.embeddingTableBase);
      setU64(v, 12, ins.sbufBase);
      v.setUint32(20, ins.oneValueReadAddr >>> 0, true);
      v.setUint32(24, ins.completionWriteAddr >>> 0, true);
      break;
    case Opcode.EXTENDED_INST:
      v.setUint16(4, ins.opcode, true);
      v.setUint32(8, ins.call >>> 0, true);
      break;
    case Opcode.DRAIN_ARM:
    case Opcode.DRAIN:
      break;
    case Opcode.EVENT_SEMAPHORE:
      v.setUint8(4, ins.updateMode);
      v.setUint16(6, ins.semaphore, true);
      v.setUint32(8, ins.value >>> 0, true);
      break;
  }
  return slot;
}

/** Reads a slot header: `{ wordLen, opcode }`. */
export function decodeSlotHeaderWord(slot: Uint8Array, offset = 0): { wordLen: number; opcode: number } {
  const h = slot[offset] | (slot[offset + 1] << 8);
  return { wordLen: h >> 8, opcode: h & 0xff };
}

/** Decodes the slot at `offset`, or returns `undefined` for a word_len other than 0x10 or an unmodelled opcode. */
export function decodeInstruction(bytes: Uint8Array, offset = 0): Instruction | undefined {
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, SLOT_BYTES);
  const { wordLen, opcode } = decodeSlotHeaderWord(bytes, offset);
  if (wordLen !== SLOT_WORD_LEN) return undefined;
  switch (opcode) {
    case Opcode.NOTIFY:
      return { op: opcode, kind: v.getUint8(4), value: v.getUint32(8, true) };
    case Opcode.MODEL_SWITCH:
      return { op: opcode, model: v.getUint32(4, true), opcodeTable: getU64(v, 8) };
    case Opcode.ULIB_LOAD:
      return { op: opcode, lib: v.getUint8(4), libs: v.getUint8(5), opcodeTable: getU64(v, 8) };
    case Opcode.DMA_CONFIG:
      return { op: opcode, direction: v.getUint8(4) === 1 ? 1 : 0, queues: v.getUint8(5), ringTable: getU64(v, 8) };
    case Opcode.DMA_CONFIG_SIZE:
      return { op: opcode, m2sBytes: v.getUint32(4, true), s2mBytes: v.getUint32(8, true) };
    case Opcode.LOAD_POOL_ARGUMENT:
      return {
        op: opcode,
        embeddingTableBase: getU64(v, 4),
        sbufBase: getU64(v, 12),
        oneValueReadAddr: v.getUint32(20, true),
        completionWriteAddr: v.getUint32(24, true),
      };
    case Opcode.EXTENDED_INST:
      return { op: opcode, opcode: v.getUint16(4, true), call: v.getUint32(8, true) };
    case Opcode.DRAIN_ARM:
    case Opcode.DRAIN:
      return { op: opcode };
    case Opcode.EVENT_SEMAPHORE:
      return { op: opcode, updateMode: v.getUint8(4), semaphore: v.getUint16(6, true), value: v.getUint32(8, true) };
    default:
      return undefined;
  }
}

// ---- DMA rings -------------------------------------------------------------------------------------------------

/** Bytes per DMA descriptor: `{ u64 src, u64 dst, u32 bytes, u32 flags, u64 reserved }`. */
export const DMA_DESCRIPTOR_BYTES = 32;
/** Bytes per ring-table entry of a DMA_CONFIG: `{ u8 engine, u8 queue, u16 ringType, u32 count, u64 ringPa }`. */
export const RING_TABLE_ENTRY_BYTES = 16;

/** One DMA descriptor. */
export interface DmaDescriptor {
  /** Source device address. */
  readonly src: number;
  /** Destination device address. */
  readonly dst: number;
  /** Bytes to move. */
  readonly bytes: number;
  /**
   * The `flags` word: 0 (a plain copy), or a compute-DMA descriptor made by {@linkcode dmaCceFlags} that folds the
   * source into the destination element-wise (collectives, `docs/collectives.md`).
   */
  readonly flags?: number;
}

/**
 * Compute-DMA (CCE) operations of a descriptor's `flags` (low byte). spmd-teardown §4.4 names the compute-DMA path
 * (`add_dma_packet_cce`, `SDMA_CCETYPE ADD/MIN/MAX/FMA`) as where cross-core reductions fold; the encoding is ours.
 */
export const DmaCceOp = {
  /** A plain copy. */
  COPY: 0,
  /** `dst[i] = dst[i] + src[i]`. */
  ADD: 1,
  /** `dst[i] = max(dst[i], src[i])`. */
  MAX: 2,
} as const;
/** One compute-DMA operation. */
export type DmaCceOp = typeof DmaCceOp[keyof typeof DmaCceOp];

/** Element types of a compute-DMA descriptor (`flags` bits 8..15; ours). */
export const DmaCceDtype = {
  /** IEEE float32. */
  FLOAT32: 0,
  /** bfloat16: each element is computed in float32 and rounded to nearest, ties to even. */
  BFLOAT16: 1,
} as const;
/** One compute-DMA element type. */
export type DmaCceDtype = typeof DmaCceDtype[keyof typeof DmaCceDtype];

/** The `flags` word of a compute-DMA descriptor (ours: op in bits 0..7, dtype in bits 8..15). */
export function dmaCceFlags(op: DmaCceOp, dtype: DmaCceDtype): number {
  return (op & 0xff) | ((dtype & 0xff) << 8);
}

/** Writes a DMA descriptor at `offset`. */
export function encodeDmaDescriptor(d: DmaDescriptor, out: Uint8Array, offset: number): void {
  const v = new DataView(out.buffer, out.byteOffset + offset, DMA_DESCRIPTOR_BYTES);
  setU64(v, 0, d.src);
  setU64(v, 8, d.dst);
  v.setUint32(16, d.bytes >>> 0, true);
  v.setUint32(20, (d.flags ?? 0) >>> 0, true);
}

/** Reads the DMA descriptor at `offset`. */
export function decodeDmaDescriptor(bytes: Uint8Array, offset: number): DmaDescriptor {
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, DMA_DESCRIPTOR_BYTES);
  const flags = v.getUint32(20, true);
  const d = { src: getU64(v, 0), dst: getU64(v, 8), bytes: v.getUint32(16, true) };
  return flags === 0 ? d : { ...d, flags };
}

/** One ring-table entry: the ring of descriptors a DMA_CONFIG attaches to queue `queue` of engine `engine`. */
export interface RingTableEntry {
  /** DMA engine. */
  readonly engine: number;
  /** Queue of that engine. */
  readonly queue: number;
  /** Ring type (16 = custom op). */
  readonly ringType: number;
  /** Descriptors in the ring. */
  readonly count: number;
  /** Device address of the first descriptor. */
  readonly ringPa: number;
}

/** Writes a ring-table entry at `offset`. */
export function encodeRingTableEntry(e: RingTableEntry, out: Uint8Array, offset: number): void {
  const v = new DataView(out.buffer, out.byteOffset + offset, RING_TABLE_ENTRY_BYTES);
  v.setUint8(0, e.engine);
  v.setUint8(1, e.queue);
  v.setUint16(2, e.ringType, true);
  v.setUint32(4, e.count >>> 0, true);
  setU64(v, 8, e.ringPa);
}

/** Reads the ring-table entry at `offset`. */
export function decodeRingTableEntry(bytes: Uint8Array, offset: number): RingTableEntry {
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, RING_TABLE_ENTRY_BYTES);
  return {
    engine: v.getUint8(0),
    queue: v.getUint8(1),
    ringType: v.getUint16(2, true),
    count: v.getUint32(4, true),
    ringPa: getU64(v, 8),
  };
}

// ---- The argument table ("embedding table") of LOAD_POOL_ARGUMENT ---------------------------------------------

/** Bytes of the argument-table header `{ u32 inputs, u32 outputs, u32 ints, u32 reserved }`. */
export const ARG_HEADER_BYTES = 16;
/** Bytes per tensor descriptor (the kernel ABI's layout, `docs/kernel-abi.md`). */
export const TENSOR_DESC_BYTES = 32;
/** Field offsets of a tensor descriptor (u32, little-endian): data address, byte size, dtype code, rank, 4 dims. */
export const TensorDescField = { ADDR: 0, BYTES: 4, DTYPE: 8, RANK: 12, DIMS: 16 } as const;
/** The largest rank a descriptor holds. */
export const MAX_TENSOR_RANK = 4;
/** The kernel ABI dtype codes (docs/kernel-abi.md; ours). */
export const KernelDtype = {
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
} as const;
/** One kernel ABI dtype code. */
export type KernelDtype = typeof KernelDtype[keyof typeof KernelDtype];

/** Writes the 32-byte descriptor of `d` at byte `at` of `v` (unused dims are 0). */
export function encodeTensorDescriptor(d: TensorDescriptor, v: DataView, at: number): void {
  if (d.dims.length > MAX_TENSOR_RANK) throw new RangeError(`Tensor rank ${d.dims.length} exceeds ${MAX_TENSOR_RANK}`);
  v.setUint32(at + TensorDescField.ADDR, d.addr >>> 0, true);
  v.setUint32(at + TensorDescField.BYTES, d.bytes >>> 0, true);
  v.setUint32(at + TensorDescField.DTYPE, d.dtype, true);
  v.setUint32(at + TensorDescField.RANK, d.dims.length, true);
  for (let k = 0; k < MAX_TENSOR_RANK; k++) {
    v.setUint32(at + TensorDescField.DIMS + 4 * k, (d.dims[k] ?? 0) >>> 0, true);
  }
}

/** Reads the descriptor at byte `at` of `v` (a rank above 4 reads as 4). */
export function decodeTensorDescriptor(v: DataView, at: number): TensorDescriptor {
  const rank = Math.min(MAX_TENSOR_RANK, v.getUint32(at + TensorDescField.RANK, true));
  const dims: number[] = [];
  for (let k = 0; k < rank; k++) dims.push(v.getUint32(at + TensorDescField.DIMS + 4 * k, true));
  return {
    addr: v.getUint32(at + TensorDescField.ADDR, true),
    bytes: v.getUint32(at + TensorDescField.BYTES, true),
    dtype: v.getUint32(at + TensorDescField.DTYPE, true),
    dims,
  };
}

/** A tensor as the Q7 kernel sees it. */
export interface TensorDescriptor {
  /** Q7-local address of the data (inside the SBUF window). */
  readonly addr: number;
  /** Byte size. */
  readonly bytes: number;
  /** Kernel ABI dtype code. */
  readonly dtype: number;
  /** Dimensions (rank ≤ 4). */
  readonly dims: readonly number[];
}

/** The argument table a LOAD_POOL_ARGUMENT loads into the Q7 cluster. */
export interface ArgTable {
  /** Input tensors, in call order. */
  readonly inputs: readonly TensorDescriptor[];
  /** Output tensors, in call order. */
  readonly outputs: readonly TensorDescriptor[];
  /** Scalar arguments. */
  readonly ints: readonly bigint[];
}

/** Byte size of an encoded argument table. */
export function argTableBytes(t: ArgTable): number {
  return ARG_HEADER_BYTES + (t.inputs.length + t.outputs.length) * TENSOR_DESC_BYTES + t.ints.length * 8;
}

/** Encodes an argument table. */
export function encodeArgTable(t: ArgTable): Uint8Array {
  const out = new Uint8Array(argTableBytes(t));
  const v = new DataView(out.buffer);
  v.setUint32(0, t.inputs.length, true);
  v.setUint32(4, t.outputs.length, true);
  v.setUint32(8, t.ints.length, true);
  let at = ARG_HEADER_BYTES;
  for (const d of [...t.inputs, ...t.outputs]) {
    encodeTensorDescriptor(d, v, at);
    at += TENSOR_DESC_BYTES;
  }
  for (const x of t.ints) {
    v.setBigInt64(at, x, true);
    at += 8;
  }
  return out;
}

/** Decodes an argument table; throws `RangeError` when the counts do not fit the bytes. */
export function decodeArgTable(bytes: Uint8Array): ArgTable {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const ni = v.getUint32(0, true), no = v.getUint32(4, true), nk = v.getUint32(8, true);
  const need = ARG_HEADER_BYTES + (ni + no) * TENSOR_DESC_BYTES + nk * 8;
  if (ni + no > 1024 || nk > 1024 || need > bytes.byteLength) throw new RangeError("Argument table is truncated");
  const descs: TensorDescriptor[] = [];
  let at = ARG_HEADER_BYTES;
  for (let i = 0; i < ni + no; i++) {
    descs.push(decodeTensorDescriptor(v, at));
    at += TENSOR_DESC_BYTES;
  }
  const ints: bigint[] = [];
  for (let k = 0; k < nk; k++, at += 8) ints.push(v.getBigInt64(at, true));
  return { inputs: descs.slice(0, ni), outputs: descs.slice(ni), ints };
}

// ---- The opcode → library table (ucode_stage_libs_table) --------------------------------------------------------

/** Bytes of the table header: `{ u32 magic, u32 entries, u64 m2s[8], u64 s2m[8] }` padded to 0x100. */
export const OPCODE_TABLE_HEADER_BYTES = 0x100;
/** Bytes per entry (seed: spmd-teardown §2.1, 0x118-byte stride). */
export const OPCODE_TABLE_ENTRY_BYTES = 0x118;
/** Maximum entries (seed: spmd-teardown §2.1, `SUNDA_UCODE_LIB_INFO` table[97]). */
export const OPCODE_TABLE_MAX_ENTRIES = 97;
/** Magic of the table header ("Q7OT"). */
export const OPCODE_TABLE_MAGIC = 0x544f3751;

/** One opcode → library entry. */
export interface OpcodeTableEntry {
  /** Custom opcode of EXTENDED_INST. */
  readonly opcode: number;
  /** `cpu_id_flag`: the library's cpu_id field equals 1 (always 0 for libraries that pass validation). */
  readonly cpuIdFlag: boolean;
  /** Fan-out: 1 or 8. */
  readonly totalCpus: number;
  /** Device address of the staged library image (0 = resolve in the Pool firmware image). */
  readonly libAddr: number;
  /** Size of the staged library image. */
  readonly libBytes: number;
  /**
   * Content tag of the image ({@linkcode libraryTag}; ours, in the entry's reserved u32 at +20). The device keys the
   * libraries it has prepared by tag and size, not by address. Default 0.
   */
  readonly libTag?: number;
  /** Function name (≤ 255 bytes). */
  readonly name: string;
}

/** The per-NeuronCore opcode table plus the 8 custom-op queue doorbell offsets. */
export interface OpcodeTable {
  /** M2S doorbell offsets of the 8 custom-op queues (one per Q7 core). */
  readonly m2s: readonly number[];
  /** S2M doorbell offsets of the 8 custom-op queues. */
  readonly s2m: readonly number[];
  /** Entries. */
  readonly entries: readonly OpcodeTableEntry[];
}

/** Encodes an opcode table. */
export function encodeOpcodeTable(t: OpcodeTable): Uint8Array {
  if (t.entries.length > OPCODE_TABLE_MAX_ENTRIES) {
    throw new RangeError(`Opcode table has ${t.entries.length} entries, at most ${OPCODE_TABLE_MAX_ENTRIES} fit`);
  }
  const out = new Uint8Array(OPCODE_TABLE_HEADER_BYTES + t.entries.length * OPCODE_TABLE_ENTRY_BYTES);
  const v = new DataView(out.buffer);
  v.setUint32(0, OPCODE_TABLE_MAGIC, true);
  v.setUint32(4, t.entries.length, true);
  for (let i = 0; i < 8; i++) {
    setU64(v, 8 + 8 * i, t.m2s[i] ?? 0);
    setU64(v, 72 + 8 * i, t.s2m[i] ?? 0);
  }
  const enc = new TextEncoder();
  t.entries.forEach((e, i) => {
    const at = OPCODE_TABLE_HEADER_BYTES + i * OPCODE_TABLE_ENTRY_BYTES;
    v.setUint8(at, 1);
    v.setUint8(at + 1, e.cpuIdFlag ? 1 : 0);
    v.setUint8(at + 2, e.totalCpus);
    v.setUint16(at + 4, e.opcode, true);
    setU64(v, at + 8, e.libAddr);
    v.setUint32(at + 16, e.libBytes >>> 0, true);
    v.setUint32(at + 20, (e.libTag ?? 0) >>> 0, true);
    const name = enc.encode(e.name).subarray(0, 255);
    out.set(name, at + 24);
  });
  return out;
}

/**
 * The staged libraries an opcode table names, in the order of their first entry: library `lib` of a ULIB_LOAD is
 * element `lib` of this list (ours). Entries resolved in the Pool firmware image (size 0) name none.
 */
export function opcodeTableLibraries(t: OpcodeTable): Array<{ addr: number; bytes: number; tag: number }> {
  const seen = new Set<string>();
  const out: Array<{ addr: number; bytes: number; tag: number }> = [];
  for (const e of t.entries) {
    const key = `${e.libAddr}:${e.libBytes}`;
    if (e.libBytes === 0 || seen.has(key)) continue;
    seen.add(key);
    out.push({ addr: e.libAddr, bytes: e.libBytes, tag: e.libTag ?? 0 });
  }
  return out;
}

/**
 * The content tag of a library image (ours): FNV-1a over its bytes, 32 bits. The host writes it into the opcode
 * table; the device keys the libraries its Q7 cores have prepared by `(tag, size)` and checks the tag against the
 * bytes when it prepares one. So a NEFF loaded again, whose libraries are staged at new addresses, finds them
 * prepared, and a different image staged where an old one was is never taken for it.
 */
export function libraryTag(image: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < image.byteLength; i++) h = Math.imul(h ^ image[i], 0x01000193);
  return h >>> 0;
}

/** The key the device prepares a library under: its content tag and size (ours). */
export function libraryKey(tag: number, bytes: number): string {
  return `${(tag >>> 0).toString(16)}:${bytes}`;
}

/** Decodes an opcode table; throws `RangeError` on a bad magic or a truncated table. */
export function decodeOpcodeTable(bytes: Uint8Array): OpcodeTable {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < OPCODE_TABLE_HEADER_BYTES || v.getUint32(0, true) !== OPCODE_TABLE_MAGIC) {
    throw new RangeError("Opcode table has a bad magic");
  }
  const n = v.getUint32(4, true);
  if (n > OPCODE_TABLE_MAX_ENTRIES || bytes.byteLength < OPCODE_TABLE_HEADER_BYTES + n * OPCODE_TABLE_ENTRY_BYTES) {
    throw new RangeError("Opcode table is truncated");
  }
  const m2s: number[] = [], s2m: number[] = [];
  for (let i = 0; i < 8; i++) {
    m2s.push(getU64(v, 8 + 8 * i));
    s2m.push(getU64(v, 72 + 8 * i));
  }
  const dec = new TextDecoder();
  const entries: OpcodeTableEntry[] = [];
  for (let i = 0; i < n; i++) {
    const at = OPCODE_TABLE_HEADER_BYTES + i * OPCODE_TABLE_ENTRY_BYTES;
    if (v.getUint8(at) !== 1) continue;
    const raw = bytes.subarray(at + 24, at + 24 + 256);
    const nul = raw.indexOf(0);
    entries.push({
      opcode: v.getUint16(at + 4, true),
      cpuIdFlag: v.getUint8(at + 1) === 1,
      totalCpus: v.getUint8(at + 2),
      libAddr: getU64(v, at + 8),
      libBytes: v.getUint32(at + 16, true),
      libTag: v.getUint32(at + 20, true),
      name: dec.decode(nul < 0 ? raw : raw.subarray(0, nul)),
    });
  }
  return { m2s, s2m, entries };
}

// ---- Q7 local address map (docs/kernel-abi.md) -----------------------------------------------------------------

/** The Q7 view of one NeuronCore's shared memory (seed: spmd-teardown §3 for the DRAM window and SoC slices). */
export const Q7Map = {
  /** The firmware DRAM image is copied here at boot. */
  IMAGE_BASE: 0x000000,
  /** Per-core local DRAM window `[0x80000, 0x90000)`. */
  LOCAL_DRAM_BASE: 0x080000,
  /** Size of the local DRAM window. */
  LOCAL_DRAM_BYTES: 0x10000,
  /** Control area reserved to the simulator. */
  CONTROL_BASE: 0x180000,
  /** First Q7-local address of the SBUF window. */
  SBUF_BASE: 0x200000,
} as const;

/** `dram_addr_to_soc_addr` (seed: spmd-teardown §3): the SoC slice index of core `cpu` is `9 + 2·cpu`. */
export function socSliceBase(cpu: number): number {
  return (9 + 2 * cpu) << 16;
}

/**
 * The notification-queue register block of a NeuronCore (byte offsets from `csr.notificationQueue`): the host owns
 * the ring base and capacity, the device the head, the host the tail; the cause register's bit 0 is the sticky
 * overflow (lifecycle-error-model §5.3, `aws_hal_intc_read_cause`). The layout is ours; the host HAL and the
 * simulator both use this one definition.
 */
export const NqRegister = { BASE_LO: 0, BASE_HI: 4, CAPACITY: 8, HEAD: 12, TAIL: 16, CAUSE: 20 } as const;
/** Bytes of the notification-queue register block. */
export const NQ_REGISTER_BYTES = 24;
/** The overflow bit of the NQ cause register. */
export const NQ_CAUSE_OVERFLOW = 1;

/** Bytes of one sequencer stream-table entry. */
export const STREAM_ENTRY_BYTES = 16;

/** The fields of a stream-table entry: where a stream is, its length, its doorbell and its device model id. */
export interface StreamEntryFields {
  /** Device address of the first slot. */
  readonly pa: number;
  /** Number of 64-byte slots. */
  readonly slots: number;
  /** The doorbell semaphore that releases one run of the stream. */
  readonly doorbell: number;
  /** Device-side model id (15 bits) the stream reports in its notifications. */
  readonly model: number;
}

/**
 * Encodes a stream-table entry (ours): u64 pa, u32 slot count, u32 `valid << 31 | model(15) << 16 | doorbell(16)`.
 *
 * @returns 16 bytes.
 */
export function encodeStreamEntry(e: StreamEntryFields): Uint8Array {
  const out = new Uint8Array(STREAM_ENTRY_BYTES);
  const v = new DataView(out.buffer);
  v.setUint32(0, e.pa >>> 0, true);
  v.setUint32(4, Math.floor(e.pa / 0x1_0000_0000), true);
  v.setUint32(8, e.slots >>> 0, true);
  v.setUint32(12, (0x8000_0000 | ((e.model & 0x7fff) << 16) | (e.doorbell & 0xffff)) >>> 0, true);
  return out;
}

/** Decodes a stream-table entry at `offset`, or `undefined` when its valid bit is clear (no stream). */
export function decodeStreamEntry(bytes: Uint8Array, offset = 0): StreamEntryFields | undefined {
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, STREAM_ENTRY_BYTES);
  const w3 = v.getUint32(12, true);
  if ((w3 & 0x8000_0000) === 0) return undefined;
  return {
    pa: v.getUint32(0, true) + v.getUint32(4, true) * 0x1_0000_0000,
    slots: v.getUint32(8, true),
    model: (w3 >>> 16) & 0x7fff,
    doorbell: w3 & 0xffff,
  };
}
