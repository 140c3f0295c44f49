/**
 * The BAR0 register file of one simulated device as the host reaches it: one block per NeuronCore at
 * `ncBlockBase + nc * ncBlockStride`, decoded with the generation's {@linkcode CsrLayout}. The registers live in
 * shared memory ({@linkcode NcRegisters}); a write lands there, and a write the device must react to (a doorbell, the
 * run-stall CSR, the swap table, the stream table) is also told to the device agent through the
 * {@linkcode Bar0Listener}. Offsets outside every modelled register are refused with `NrtError(NRT_INVALID)`
 * naming the offset, so a HAL bug surfaces as an error instead of a silent no-op.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the two physical write primitives: bulk `ndl_bar_write` for the Q7 image
 * install and the single CSR write), §2.1 (Q7 IRAM/DRAM install DRAM-then-IRAM ×8, run-stall CSR 0x3000 0xFF →
 * 0x00), §3.1 (`aws_hal_q7_swap_table`), §3.3 (the doorbell semaphore increment), lifecycle-error-model §5.3 (the NQ
 * head/tail/overflow registers), spmd-teardown §6.2/§6.3 (`ucode_core_print_logs` + `ucode_core_destroy` per core:
 * the per-core ucode words, whose offsets and values are ours).
 *
 * @module
 */
import { NrtError, NrtStatus } from "@nrt/core";
import type { SiliconSpec } from "@nrt/core/hal";
import { getU32, NQ_REGISTER_BYTES, setU32 } from "@nrt/core/isa";
import { ENGINE_IP_BYTES, type NcRegisters, NqRegister, STREAM_ENTRY_BYTES } from "./nc_registers.ts";

export {
  ENGINE_IP_BYTES,
  NcRegisters,
  NQ_CAUSE_OVERFLOW,
  NqRegister,
  STREAM_ENTRY_BYTES,
  type StreamEntry,
} from "./nc_registers.ts";

/** The register a BAR0 offset decodes to; `byte` is the offset inside the register or window. */
export type Bar0Register =
  | { kind: "semaphore"; nc: number; op: "read" | "set" | "increment" | "decrement"; byte: number }
  | {
    kind:
      | "event"
      | "run-stall"
      | "swap-table"
      | "swap-file-io"
      | "ucode-core"
      | "stream-table"
      | "nq"
      | "engine-ip"
      | "dma";
    nc: number;
    byte: number;
  }
  | { kind: "q7-iram" | "q7-dram"; nc: number; core: number; byte: number };

/** The register windows of one generation's NeuronCore block, in decode order (made once per spec). */
interface Bar0Windows {
  readonly semBytes: number;
  readonly semaphores: ReadonlyArray<
    { readonly op: "read" | "set" | "increment" | "decrement"; readonly start: number }
  >;
  readonly flat: ReadonlyArray<{
    readonly kind: Exclude<Bar0Register["kind"], "semaphore" | "q7-iram" | "q7-dram">;
    readonly start: number;
    readonly size: number;
  }>;
}

const WINDOWS = new WeakMap<SiliconSpec, Bar0Windows>();

function windowsOf(spec: SiliconSpec): Bar0Windows {
  let w = WINDOWS.get(spec);
  if (w !== undefined) return w;
  const c = spec.csr;
  const flat: Array<[Bar0Windows["flat"][number]["kind"], number | null, number]> = [
    ["event", c.event, 4 * spec.eventsPerCore],
    ["run-stall", c.runStall, 4],
    ["swap-table", c.swapTable, 8],
    ["swap-file-io", c.swapFileIoTable, 8],
    ["ucode-core", c.ucodeCore, 4 * (spec.nxCoresPerNc + spec.q7CoresPerNc)],
    ["stream-table", c.streamTable, STREAM_ENTRY_BYTES * c.streamSlots],
    ["nq", c.notificationQueue, NQ_REGISTER_BYTES],
    ["engine-ip", c.engineIp, ENGINE_IP_BYTES],
    ["dma", c.dma, spec.dmaEngines * c.dmaEngineStride],
  ];
  w = {
    semBytes: 4 * spec.semaphoresPerCore,
    semaphores: [
      { op: "read", start: c.semaphoreRead },
      { op: "set", start: c.semaphoreSet },
      { op: "increment", start: c.semaphoreIncrement },
      { op: "decrement", start: c.semaphoreDecrement },
    ],
    flat: flat.flatMap(([kind, start, size]) => start === null ? [] : [{ kind, start, size }]),
  };
  WINDOWS.set(spec, w);
  return w;
}

function refuseBar0(offset: number, length: number, why: string): never {
  throw new NrtError(NrtStatus.NRT_INVALID, `Cannot access BAR0 offset 0x${offset.toString(16)} (${length} B): ${why}`);
}

/**
 * Decodes one BAR0 access of `length` bytes, or throws `NrtError(NRT_INVALID)` naming the offset in hex. The windows
 * are laid out once per generation: a decode allocates only its result (every execute makes three).
 */
export function decodeBar0(spec: SiliconSpec, ncCount: number, offset: number, length: number): Bar0Register {
  const c = spec.csr;
  if (!Number.isSafeInteger(offset) || offset < c.ncBlockBase || length <= 0) {
    return refuseBar0(offset, length, "not a register");
  }
  const nc = Math.floor((offset - c.ncBlockBase) / c.ncBlockStride);
  if (nc >= ncCount) return refuseBar0(offset, length, `NeuronCore ${nc} does not exist (the device has ${ncCount})`);
  const rel = offset - c.ncBlockBase - nc * c.ncBlockStride;
  const end = rel + length;
  const w = windowsOf(spec);
  for (let i = 0; i < w.semaphores.length; i++) {
    const { op, start } = w.semaphores[i];
    if (rel >= start && end <= start + w.semBytes) return { kind: "semaphore", nc, op, byte: rel - start };
  }
  for (let i = 0; i < w.flat.length; i++) {
    const { kind, start, size } = w.flat[i];
    if (rel >= start && end <= start + size) return { kind, nc, byte: rel - start };
  }
  for (let core = 0; core < spec.q7CoresPerNc; core++) {
    const iram = c.q7Iram + core * c.q7IramStride;
    if (rel >= iram && end <= iram + spec.q7IramBytes) return { kind: "q7-iram", nc, core, byte: rel - iram };
    const dram = c.q7Dram + core * c.q7DramStride;
    if (rel >= dram && end <= dram + spec.q7DramBytes) return { kind: "q7-dram", nc, core, byte: rel - dram };
  }
  return refuseBar0(offset, length, `no register of NeuronCore ${nc} spans block offset 0x${rel.toString(16)}`);
}

/**
 * The writes the device reacts to. A doorbell is posted (the host does not wait for the device); the others
 * return once the device has taken them, as a non-posted write.
 */
export interface Bar0Listener {
  /** A host write to a semaphore's increment window (the doorbell path); the semaphore already holds the sum. */
  semaphoreIncremented(nc: number, semaphore: number, by: number): void;
  /** The run-stall CSR changed from `previous` to `value`. */
  runStallWritten(nc: number, previous: number, value: number): Promise<void> | void;
  /** The swap-table register was written (opcode-table caches are stale). */
  swapTableWritten(nc: number): Promise<void> | void;
  /** A stream-table entry was written (its run count restarts; a stream installed or removed). */
  streamTableWritten(nc: number, slot: number): Promise<void> | void;
  /**
   * A command was written to a ucode core word (`UcodeCoreCommand`: print logs, destroy; word `i` < 5 is NX core `i`,
   * then the Q7 cores). Resolves once the device has carried it out.
   */
  ucodeCoreWritten(nc: number, word: number, command: number): Promise<void> | void;
}

/** The little-endian u32 at `at` of a register's bytes; bytes past its end read 0. */
function word(bytes: Uint8Array | undefined, at: number): number {
  if (bytes === undefined || at >= bytes.byteLength) return 0;
  const w = new Uint8Array(4);
  w.set(bytes.subarray(at, at + 4));
  return getU32(w, 0);
}

const NQ_HOST_OWNED = [NqRegister.BASE_LO, NqRegister.BASE_HI, NqRegister.CAPACITY] as const;

/** The BAR0 register file of one device, host side. */
export class Bar0 {
  readonly #spec: SiliconSpec;
  readonly #listener: Bar0Listener;
  readonly #ncs: readonly NcRegisters[];

  /** Maps the register files of a device's NeuronCores. */
  constructor(spec: SiliconSpec, ncs: readonly NcRegisters[], listener: Bar0Listener) {
    this.#spec = spec;
    this.#listener = listener;
    this.#ncs = ncs;
  }

  /** The registers of NeuronCore `nc`. */
  nc(nc: number): NcRegisters {
    const r = this.#ncs[nc];
    if (r === undefined) {
      throw new NrtError(NrtStatus.NRT_INVALID, `NeuronCore ${nc} does not exist (the device has ${this.#ncs.length})`);
    }
    return r;
  }

  /**
   * Bulk programmed-IO write; word registers take the data as consecutive little-endian u32s. Resolves once the
   * device has taken a write it reacts to.
   */
  write(offset: number, data: Uint8Array): Promise<void> | void {
    const reg = decodeBar0(this.#spec, this.#ncs.length, offset, data.byteLength);
    const r = this.#ncs[reg.nc];
    switch (reg.kind) {
      case "semaphore":
      case "event":
      case "run-stall":
      case "ucode-core":
      case "engine-ip": {
        if (reg.byte % 4 !== 0 || data.byteLength % 4 !== 0) this.#unaligned(offset, data.byteLength);
        let pending: Array<Promise<void>> | undefined;
        for (let i = 0; i < data.byteLength; i += 4) {
          const p = this.#writeWord(reg, r, reg.byte + i, getU32(data, i));
          if (p !== undefined) (pending ??= []).push(p);
        }
        if (pending !== undefined) return Promise.all(pending).then(() => {});
        return;
      }
      case "swap-table":
        r.swapTable.set(data, reg.byte);
        return this.#listener.swapTableWritten(reg.nc);
      case "swap-file-io":
        r.swapFileIo.set(data, reg.byte);
        return;
      case "stream-table": {
        r.streamTable.set(data, reg.byte);
        const first = Math.floor(reg.byte / STREAM_ENTRY_BYTES),
          last = Math.floor((reg.byte + data.byteLength - 1) / STREAM_ENTRY_BYTES);
        const pending: Array<Promise<void> | void> = [];
        for (let s = first; s <= last; s++) pending.push(this.#listener.streamTableWritten(reg.nc, s));
        return Promise.all(pending).then(() => {});
      }
      case "nq":
        this.#writeNq(r, reg.byte, data);
        return;
      case "dma":
        r.dma.set(data, reg.byte);
        return;
      case "q7-iram":
      case "q7-dram":
        // seed: runtime-synthesis §2.1 — the install writes the image at the window base; keep its exact length.
        r.writeImage(reg.kind === "q7-iram" ? "iram" : "dram", reg.core, reg.byte, data);
        return;
    }
  }

  /** Single 32-bit CSR write. */
  write32(offset: number, value: number): Promise<void> | void {
    const b = new Uint8Array(4);
    setU32(b, 0, value);
    return this.write(offset, b);
  }

  /** Single 32-bit CSR read. */
  read32(offset: number): number {
    const reg = decodeBar0(this.#spec, this.#ncs.length, offset, 4);
    const r = this.#ncs[reg.nc];
    switch (reg.kind) {
      case "semaphore":
        return Atomics.load(r.semaphores, reg.byte >> 2);
      case "event":
        return Atomics.load(r.events, reg.byte >> 2);
      case "run-stall":
        return r.runStall;
      case "engine-ip":
        return Atomics.load(r.engineIp, reg.byte >> 2);
      case "swap-table":
        return word(r.swapTable, reg.byte);
      case "swap-file-io":
        return word(r.swapFileIo, reg.byte);
      case "ucode-core":
        return reg.byte % 4 === 0 ? r.ucodeCoreState(reg.byte >> 2) >>> 0 : 0;
      case "stream-table":
        return word(r.streamTable, reg.byte);
      case "nq":
        return reg.byte % 4 === 0 ? r.nqRegister(reg.byte) : word(r.nq, reg.byte);
      case "dma":
        return word(r.dma, reg.byte);
      case "q7-iram":
        return word(r.image("iram", reg.core), reg.byte);
      case "q7-dram":
        return word(r.image("dram", reg.core), reg.byte);
    }
  }

  /** Adds `by` to a semaphore and rings the doorbell path: the increment window and the portal op share this. */
  incrementSemaphore(nc: number, semaphore: number, by: number): void {
    const r = this.nc(nc);
    this.#checkSemaphore(semaphore);
    Atomics.add(r.semaphores, semaphore, by >>> 0);
    this.#listener.semaphoreIncremented(nc, semaphore, by >>> 0);
  }

  /** Sets a semaphore (no doorbell). */
  setSemaphore(nc: number, semaphore: number, value: number): void {
    this.#checkSemaphore(semaphore);
    Atomics.store(this.nc(nc).semaphores, semaphore, value >>> 0);
  }

  /** Reads a semaphore. */
  readSemaphore(nc: number, semaphore: number): number {
    this.#checkSemaphore(semaphore);
    return Atomics.load(this.nc(nc).semaphores, semaphore);
  }

  #writeWord(reg: Bar0Register, r: NcRegisters, byte: number, value: number): Promise<void> | undefined {
    const i = byte >> 2;
    switch (reg.kind) {
      case "semaphore":
        if (reg.op === "increment") this.incrementSemaphore(reg.nc, i, value);
        else if (reg.op === "decrement") Atomics.sub(r.semaphores, i, value >>> 0);
        else if (reg.op === "set") Atomics.store(r.semaphores, i, value >>> 0);
        // A write to the read window is ignored, as on the driver's read-only mirror.
        return;
      case "event":
        Atomics.store(r.events, i, value >>> 0);
        return;
      case "run-stall": {
        const previous = r.runStall;
        r.runStall = value & 0xff;
        const p = this.#listener.runStallWritten(reg.nc, previous, r.runStall);
        return p instanceof Promise ? p : undefined;
      }
      case "engine-ip":
        Atomics.store(r.engineIp, i, value >>> 0);
        return;
      case "ucode-core": {
        // The word reads the core's state, which only the device sets: a write is a command for it.
        const p = this.#listener.ucodeCoreWritten(reg.nc, i, value >>> 0);
        return p instanceof Promise ? p : undefined;
      }
    }
    return;
  }

  #writeNq(r: NcRegisters, byte: number, data: Uint8Array): void {
    const incoming = r.nq.slice();
    incoming.set(data, byte);
    const repointed = byte < NqRegister.HEAD && (getU32(incoming, 0) !== r.nqRegister(0) ||
      getU32(incoming, 4) !== r.nqRegister(4) || getU32(incoming, 8) !== r.nqRegister(8));
    // Base and capacity are host-owned. Re-pointing the ring restarts it: head, tail and cause go back to 0.
    for (const at of NQ_HOST_OWNED) {
      r.setNqRegister(at, getU32(incoming, at));
    }
    if (repointed) {
      r.setNqRegister(NqRegister.HEAD, 0);
      r.setNqRegister(NqRegister.TAIL, 0);
      r.setNqRegister(NqRegister.CAUSE, 0);
      return;
    }
    // The head is device-owned (host writes are dropped); the tail is the host's; the cause clears on a write of 0.
    const touches = (at: number): boolean => byte <= at && byte + data.byteLength >= at + 4;
    if (touches(NqRegister.TAIL)) r.setNqRegister(NqRegister.TAIL, getU32(incoming, NqRegister.TAIL));
    if (touches(NqRegister.CAUSE) && getU32(incoming, NqRegister.CAUSE) === 0) r.setNqRegister(NqRegister.CAUSE, 0);
  }

  #checkSemaphore(semaphore: number): void {
    if (!Number.isInteger(semaphore) || semaphore < 0 || semaphore >= this.#spec.semaphoresPerCore) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Semaphore ${semaphore} is outside 0..${this.#spec.semaphoresPerCore - 1}`,
      );
    }
  }

  #unaligned(offset: number, length: number): never {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot write BAR0 offset 0x${offset.toString(16)} (${length} B): word registers take whole aligned u32s`,
    );
  }
}
