/**
 * The BAR0 register file of one simulated device: one block per NeuronCore at `ncBlockBase + nc * ncBlockStride`,
 * decoded with the generation's {@linkcode CsrLayout}. Offsets outside every modelled register are refused with
 * `NrtError(NRT_INVALID)` naming the offset, so a HAL bug surfaces as an error instead of a silent no-op.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the two physical write primitives: bulk `ndl_bar_write` for the Q7 image
 * install and the single CSR write), §2.1 (Q7 IRAM/DRAM install DRAM-then-IRAM ×8, run-stall CSR 0x3000 0xFF →
 * 0x00), §3.1 (`aws_hal_q7_swap_table`), §3.3 (the doorbell semaphore increment), lifecycle-error-model §5.3 (the NQ
 * head/tail/overflow registers).
 *
 * @module
 */
import { NrtError, NrtStatus, type SiliconSpec } from "@nrt/core";

/** The register a BAR0 offset decodes to; `byte` is the offset inside the register or window. */
export type Bar0Register =
  | { kind: "semaphore"; nc: number; op: "read" | "set" | "increment" | "decrement"; byte: number }
  | { kind: "event" | "run-stall" | "swap-table" | "swap-file-io" | "stream-table" | "nq" | "engine-ip" | "dma"; nc: number; byte: number }
  | { kind: "q7-iram" | "q7-dram"; nc: number; core: number; byte: number };

/** Byte layout of the notification-queue block (6 × u32; seed: lifecycle-error-model §5.3). */
export const NqRegister = { BASE_LO: 0, BASE_HI: 4, CAPACITY: 8, HEAD: 12, TAIL: 16, CAUSE: 20 } as const;
/** Bit 0 of the NQ cause register: the device lapped the host (sticky until the host writes 0). */
export const NQ_CAUSE_OVERFLOW = 1;
/** Bytes of one stream-table entry: u32 pa lo, u32 pa hi, u32 slots, u32 valid | model | doorbell. */
export const STREAM_ENTRY_BYTES = 16;
/** Bytes of the engine instruction-pointer block (5 engines × u32). */
export const ENGINE_IP_BYTES = 20;

/** Decodes one BAR0 access of `length` bytes, or throws `NrtError(NRT_INVALID)` naming the offset in hex. */
export function decodeBar0(spec: SiliconSpec, ncCount: number, offset: number, length: number): Bar0Register {
  const c = spec.csr;
  const refuse = (why: string): never => {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot access BAR0 offset 0x${offset.toString(16)} (${length} B): ${why}`);
  };
  if (!Number.isSafeInteger(offset) || offset < c.ncBlockBase || length <= 0) return refuse("not a register");
  const nc = Math.floor((offset - c.ncBlockBase) / c.ncBlockStride);
  if (nc >= ncCount) return refuse(`NeuronCore ${nc} does not exist (the device has ${ncCount})`);
  const rel = offset - c.ncBlockBase - nc * c.ncBlockStride;
  const inside = (start: number, size: number): boolean => rel >= start && rel + length <= start + size;
  const semBytes = 4 * spec.semaphoresPerCore;
  const windows = [["read", c.semaphoreRead], ["set", c.semaphoreSet], ["increment", c.semaphoreIncrement], [
    "decrement",
    c.semaphoreDecrement,
  ]] as const;
  for (const [op, start] of windows) {
    if (inside(start, semBytes)) return { kind: "semaphore", nc, op, byte: rel - start };
  }
  const flat: Array<[Exclude<Bar0Register["kind"], "semaphore" | "q7-iram" | "q7-dram">, number | null, number]> = [
    ["event", c.event, 4 * spec.eventsPerCore],
    ["run-stall", c.runStall, 4],
    ["swap-table", c.swapTable, 8],
    ["swap-file-io", c.swapFileIoTable, 8],
    ["stream-table", c.streamTable, STREAM_ENTRY_BYTES * c.streamSlots],
    ["nq", c.notificationQueue, 24],
    ["engine-ip", c.engineIp, ENGINE_IP_BYTES],
    ["dma", c.dma, spec.dmaEngines * c.dmaEngineStride],
  ];
  for (const [kind, start, size] of flat) {
    if (start !== null && inside(start, size)) return { kind, nc, byte: rel - start };
  }
  for (let core = 0; core < spec.q7CoresPerNc; core++) {
    const iram = c.q7Iram + core * c.q7IramStride;
    if (inside(iram, spec.q7IramBytes)) return { kind: "q7-iram", nc, core, byte: rel - iram };
    const dram = c.q7Dram + core * c.q7DramStride;
    if (inside(dram, spec.q7DramBytes)) return { kind: "q7-dram", nc, core, byte: rel - dram };
  }
  return refuse(`no register of NeuronCore ${nc} spans block offset 0x${rel.toString(16)}`);
}

/** One decoded stream-table entry (the layout `KhalBase.streamInstall` writes). */
export interface StreamEntry {
  /** Table slot. */
  readonly slot: number;
  /** Device PA of instruction slot 0. */
  readonly pa: number;
  /** Number of 64-byte instruction slots. */
  readonly slots: number;
  /** Device-side model id (bits 16..30 of word 3). */
  readonly model: number;
  /** Doorbell semaphore (bits 0..15 of word 3). */
  readonly doorbell: number;
}

/** Effects of BAR0 writes that the rest of the device reacts to. */
export interface Bar0Listener {
  /** A host write to a semaphore's increment window (the doorbell path). */
  semaphoreIncremented(nc: number, semaphore: number, by: number): void;
  /** The run-stall CSR changed from `previous` to `value`. */
  runStallWritten(nc: number, previous: number, value: number): void;
  /** The swap-table register was written (opcode-table caches are stale). */
  swapTableWritten(nc: number): void;
  /** A stream-table entry was written (its run count restarts). */
  streamTableWritten(nc: number, slot: number): void;
}

/** The registers of one NeuronCore block. */
export class NcRegisters {
  /** Semaphore values (u32). */
  readonly semaphores: Uint32Array;
  /** Event values (u32). */
  readonly events: Uint32Array;
  /** Run-stall CSR: one bit per Q7 core; out of reset all 8 are stalled. */
  runStall = 0xff;
  /** Swap-table register bytes (u64 LE opcode-table PA). */
  readonly swapTable: Uint8Array = new Uint8Array(8);
  /** Swap file-IO table register bytes (u64 LE). */
  readonly swapFileIo: Uint8Array = new Uint8Array(8);
  /** Stream table bytes. */
  readonly streamTable: Uint8Array;
  /** Notification-queue block bytes. */
  readonly nq: Uint8Array = new Uint8Array(24);
  /** Engine instruction pointers, `al_hal_tpb_eng_type` order. */
  readonly engineIp: Uint32Array = new Uint32Array(5);
  /** DMA engine/queue register bytes (plain storage: the simulated DMA runs from the staged rings). */
  dma: Uint8Array | undefined;
  /** The exact bytes installed in each Q7 core's IRAM window. */
  readonly iram: Array<Uint8Array | undefined>;
  /** The exact bytes installed in each Q7 core's DRAM window. */
  readonly dram: Array<Uint8Array | undefined>;

  /** Creates the reset state of one NeuronCore block. */
  constructor(spec: SiliconSpec) {
    this.semaphores = new Uint32Array(spec.semaphoresPerCore);
    this.events = new Uint32Array(spec.eventsPerCore);
    this.streamTable = new Uint8Array(STREAM_ENTRY_BYTES * spec.csr.streamSlots);
    this.iram = new Array(spec.q7CoresPerNc).fill(undefined);
    this.dram = new Array(spec.q7CoresPerNc).fill(undefined);
  }

  /** The opcode-table PA in the swap-table register. */
  get swapTablePa(): number {
    return u64(this.swapTable, 0);
  }

  /** The valid stream-table entry whose doorbell is `semaphore`, if any (lowest slot first). */
  streamForDoorbell(semaphore: number): StreamEntry | undefined {
    for (let slot = 0; slot < this.streamTable.byteLength / STREAM_ENTRY_BYTES; slot++) {
      const e = this.streamEntry(slot);
      if (e !== undefined && e.doorbell === semaphore) return e;
    }
    return undefined;
  }

  /** The stream-table entry of `slot`, or `undefined` when its valid bit is clear. */
  streamEntry(slot: number): StreamEntry | undefined {
    const v = new DataView(this.streamTable.buffer, slot * STREAM_ENTRY_BYTES, STREAM_ENTRY_BYTES);
    const w3 = v.getUint32(12, true);
    if ((w3 & 0x8000_0000) === 0) return undefined;
    return { slot, pa: u64(this.streamTable, slot * STREAM_ENTRY_BYTES), slots: v.getUint32(8, true), model: (w3 >>> 16) & 0x7fff, doorbell: w3 & 0xffff };
  }

  /** An NQ register (u32). */
  nqRegister(at: number): number {
    return new DataView(this.nq.buffer).getUint32(at, true);
  }

  /** Sets an NQ register (device side: head and cause). */
  setNqRegister(at: number, value: number): void {
    new DataView(this.nq.buffer).setUint32(at, value >>> 0, true);
  }
}

/** The BAR0 register file of one device. */
export class Bar0 {
  readonly #spec: SiliconSpec;
  readonly #listener: Bar0Listener;
  readonly #ncs: NcRegisters[];

  /** Creates the reset register file of a device with `ncCount` NeuronCores. */
  constructor(spec: SiliconSpec, ncCount: number, listener: Bar0Listener) {
    this.#spec = spec;
    this.#listener = listener;
    this.#ncs = Array.from({ length: ncCount }, () => new NcRegisters(spec));
  }

  /** The registers of NeuronCore `nc`. */
  nc(nc: number): NcRegisters {
    const r = this.#ncs[nc];
    if (r === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `NeuronCore ${nc} does not exist (the device has ${this.#ncs.length})`);
    return r;
  }

  /** Bulk programmed-IO write; word registers take the data as consecutive little-endian u32s. */
  write(offset: number, data: Uint8Array): void {
    const reg = decodeBar0(this.#spec, this.#ncs.length, offset, data.byteLength);
    const r = this.#ncs[reg.nc];
    switch (reg.kind) {
      case "semaphore":
      case "event":
      case "run-stall":
      case "engine-ip": {
        if (reg.byte % 4 !== 0 || data.byteLength % 4 !== 0) this.#unaligned(offset, data.byteLength);
        const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
        for (let i = 0; i < data.byteLength; i += 4) this.#writeWord(reg, r, reg.byte + i, v.getUint32(i, true));
        return;
      }
      case "swap-table":
        r.swapTable.set(data, reg.byte);
        this.#listener.swapTableWritten(reg.nc);
        return;
      case "swap-file-io":
        r.swapFileIo.set(data, reg.byte);
        return;
      case "stream-table": {
        r.streamTable.set(data, reg.byte);
        const first = Math.floor(reg.byte / STREAM_ENTRY_BYTES), last = Math.floor((reg.byte + data.byteLength - 1) / STREAM_ENTRY_BYTES);
        for (let s = first; s <= last; s++) this.#listener.streamTableWritten(reg.nc, s);
        return;
      }
      case "nq":
        this.#writeNq(r, reg.byte, data);
        return;
      case "dma":
        (r.dma ??= new Uint8Array(this.#spec.dmaEngines * this.#spec.csr.dmaEngineStride)).set(data, reg.byte);
        return;
      case "q7-iram":
      case "q7-dram": {
        // seed: runtime-synthesis §2.1 — the install writes the image at the window base; keep its exact length.
        const images = reg.kind === "q7-iram" ? r.iram : r.dram;
        images[reg.core] = patch(reg.byte === 0 ? undefined : images[reg.core], reg.byte, data);
        return;
      }
    }
  }

  /** Single 32-bit CSR write. */
  write32(offset: number, value: number): void {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, value >>> 0, true);
    this.write(offset, b);
  }

  /** Single 32-bit CSR read. */
  read32(offset: number): number {
    const reg = decodeBar0(this.#spec, this.#ncs.length, offset, 4);
    const r = this.#ncs[reg.nc];
    const word = (bytes: Uint8Array | undefined, at: number): number => {
      if (bytes === undefined || at >= bytes.byteLength) return 0;
      const w = new Uint8Array(4);
      w.set(bytes.subarray(at, at + 4));
      return new DataView(w.buffer).getUint32(0, true);
    };
    switch (reg.kind) {
      case "semaphore":
        return r.semaphores[reg.byte >> 2];
      case "event":
        return r.events[reg.byte >> 2];
      case "run-stall":
        return r.runStall;
      case "engine-ip":
        return r.engineIp[reg.byte >> 2];
      case "swap-table":
        return word(r.swapTable, reg.byte);
      case "swap-file-io":
        return word(r.swapFileIo, reg.byte);
      case "stream-table":
        return word(r.streamTable, reg.byte);
      case "nq":
        return word(r.nq, reg.byte);
      case "dma":
        return word(r.dma, reg.byte);
      case "q7-iram":
        return word(r.iram[reg.core], reg.byte);
      case "q7-dram":
        return word(r.dram[reg.core], reg.byte);
    }
  }

  /** Adds `by` to a semaphore and signals the doorbell path: the increment window and the portal op share this. */
  incrementSemaphore(nc: number, semaphore: number, by: number): void {
    const r = this.nc(nc);
    this.#checkSemaphore(semaphore);
    r.semaphores[semaphore] = (r.semaphores[semaphore] + by) >>> 0;
    this.#listener.semaphoreIncremented(nc, semaphore, by >>> 0);
  }

  /** Sets a semaphore (no doorbell). */
  setSemaphore(nc: number, semaphore: number, value: number): void {
    this.#checkSemaphore(semaphore);
    this.nc(nc).semaphores[semaphore] = value >>> 0;
  }

  /** Reads a semaphore. */
  readSemaphore(nc: number, semaphore: number): number {
    this.#checkSemaphore(semaphore);
    return this.nc(nc).semaphores[semaphore];
  }

  #writeWord(reg: Bar0Register, r: NcRegisters, byte: number, value: number): void {
    const i = byte >> 2;
    switch (reg.kind) {
      case "semaphore":
        if (reg.op === "increment") this.incrementSemaphore(reg.nc, i, value);
        else if (reg.op === "decrement") r.semaphores[i] = (r.semaphores[i] - value) >>> 0;
        else if (reg.op === "set") r.semaphores[i] = value;
        // A write to the read window is ignored, as on the driver's read-only mirror.
        return;
      case "event":
        r.events[i] = value;
        return;
      case "run-stall": {
        const previous = r.runStall;
        r.runStall = value & 0xff;
        this.#listener.runStallWritten(reg.nc, previous, r.runStall);
        return;
      }
      case "engine-ip":
        r.engineIp[i] = value;
        return;
    }
  }

  #writeNq(r: NcRegisters, byte: number, data: Uint8Array): void {
    const incoming = r.nq.slice();
    incoming.set(data, byte);
    const v = new DataView(incoming.buffer);
    const repointed = byte < NqRegister.HEAD && (v.getUint32(0, true) !== r.nqRegister(0) ||
      v.getUint32(4, true) !== r.nqRegister(4) || v.getUint32(8, true) !== r.nqRegister(8));
    // Base and capacity are host-owned. Re-pointing the ring restarts it: head, tail and cause go back to 0.
    for (const at of [NqRegister.BASE_LO, NqRegister.BASE_HI, NqRegister.CAPACITY]) r.setNqRegister(at, v.getUint32(at, true));
    if (repointed) {
      r.setNqRegister(NqRegister.HEAD, 0);
      r.setNqRegister(NqRegister.TAIL, 0);
      r.setNqRegister(NqRegister.CAUSE, 0);
      return;
    }
    // The head is device-owned (host writes are dropped); the tail is the host's; the cause clears on a write of 0.
    const touches = (at: number): boolean => byte <= at && byte + data.byteLength >= at + 4;
    if (touches(NqRegister.TAIL)) r.setNqRegister(NqRegister.TAIL, v.getUint32(NqRegister.TAIL, true));
    if (touches(NqRegister.CAUSE) && v.getUint32(NqRegister.CAUSE, true) === 0) r.setNqRegister(NqRegister.CAUSE, 0);
  }

  #checkSemaphore(semaphore: number): void {
    if (!Number.isInteger(semaphore) || semaphore < 0 || semaphore >= this.#spec.semaphoresPerCore) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Semaphore ${semaphore} is outside 0..${this.#spec.semaphoresPerCore - 1}`);
    }
  }

  #unaligned(offset: number, length: number): never {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot write BAR0 offset 0x${offset.toString(16)} (${length} B): word registers take whole aligned u32s`);
  }
}

function patch(image: Uint8Array | undefined, at: number, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.max(image?.byteLength ?? 0, at + data.byteLength));
  if (image !== undefined) out.set(image);
  out.set(data, at);
  return out;
}

function u64(bytes: Uint8Array, at: number): number {
  const v = new DataView(bytes.buffer, bytes.byteOffset + at, 8);
  return v.getUint32(0, true) + v.getUint32(4, true) * 0x1_0000_0000;
}
