/**
 * The `Khal` contract — the `kaena_khal` dispatch table — and the one implementation every NeuronCore generation
 * shares, built from the generation's {@linkcode ArchPack} (its spec, error tables and stock image; an override only
 * where behaviour really differs). Register offsets, sizes, run-stall release, error-subtype tables and texts come
 * from the pack and nowhere else.
 *
 * Seed: runtime-synthesis §1.2 layer 3b ("ONE dispatch substrate: global struct kaena_khal whose per-arch
 * fn-pointers are filled at init; every aws_hal_q7_* asserts arch in {Sunda,Cayman,Mariana} then tail-jumps through
 * the slot"), §2.1 (`aws_hal_q7_ucode_eng_init`: size gate "ucode too big!", DRAM then IRAM, broadcast to all 8 Q7
 * cores over BAR0 PIO; run-stall release per arch), §3.1/§3.2 (`aws_hal_q7_swap_table`,
 * `tdrv_arch_get_sem_inc_addr`, `tdrv_arch_get_evt_accel_addr`), lifecycle-error-model §4.5 (the subtype decoder and
 * the 12-entry ISA error text table), §5.3 (`aws_hal_notific_nq_read`).
 *
 * @module
 */
import { NrtError } from "./error.ts";
import { decodeInferErrorSubtype, type ErrorTables, isaErrorTextFrom } from "./notification/error_subtype.ts";
import {
  decodeNotification,
  encodeStreamEntry,
  NOTIFICATION_BYTES,
  type NotificationRecord,
  NQ_CAUSE_OVERFLOW,
  NQ_REGISTER_BYTES,
  NqRegister,
  STREAM_ENTRY_BYTES,
  type StreamEntryFields,
} from "./isa.ts";
import type { DeviceMemory, Portal } from "./portal.ts";
import { ncBlock, type SiliconSpec, ucodeCoreAddr, UcodeCoreCommand } from "./silicon_spec.ts";
import { NrtStatus } from "./status.ts";

/** A Pool-engine ucode image pair (`nrt_ucode_info`: `{iram, dram}{bin, size}`). */
export interface UcodeImage {
  /** Code image (the simulator's Q7 ISA is WebAssembly: a wasm module). */
  readonly iram: Uint8Array;
  /** Data image, copied to the Q7's address 0. */
  readonly dram: Uint8Array;
}

/**
 * The image a caller registers with `nrt_set_pool_eng_ucode`: either half, or both. Each half present replaces the
 * stock half on its own; a missing half keeps the stock one (seed: runtime-synthesis §2.1,
 * `if (pool_eng_iram_bin) cfg.iram = …; if (pool_eng_dram_bin) cfg.dram = …`).
 */
export interface PoolUcodeOverride {
  /** Code image replacing the stock IRAM half (absent: the stock IRAM stays). */
  readonly iram?: Uint8Array;
  /** Data image replacing the stock DRAM half (absent: the stock DRAM stays). */
  readonly dram?: Uint8Array;
}

/**
 * `tpb_eng_init_hals_v2`'s override step: the stock image, then each registered half on its own (seed:
 * runtime-synthesis §2.1: no signature check, no warning log).
 */
export function overridePoolUcode(stock: UcodeImage, custom: PoolUcodeOverride | undefined): UcodeImage {
  let image = stock;
  if (custom?.iram !== undefined) image = { iram: custom.iram, dram: image.dram };
  if (custom?.dram !== undefined) image = { iram: image.iram, dram: custom.dram };
  return image;
}

/**
 * Checks a registered Pool image: each half, if present, is a `Uint8Array`, and at least one half is present
 * (ours: registering nothing is refused; the seed does not say what a call with two null halves does).
 *
 * @returns the error text, or `undefined` when the image is acceptable.
 */
export function checkPoolUcodeOverride(info: unknown): string | undefined {
  if (typeof info !== "object" || info === null) return "the image is not an object with iram and/or dram";
  const { iram, dram } = info as { iram?: unknown; dram?: unknown };
  for (const [name, half] of [["iram", iram], ["dram", dram]] as const) {
    if (half !== undefined && half !== null && !(half instanceof Uint8Array)) return `${name} is not a Uint8Array`;
  }
  if ((iram === undefined || iram === null) && (dram === undefined || dram === null)) {
    return "neither iram nor dram is given";
  }
  return undefined;
}

/** Where a HAL call acts: a portal and a device index. */
export interface HalTarget {
  /** The driver portal. */
  readonly portal: Portal;
  /** Device index. */
  readonly device: number;
}

/** The notification queue of one NeuronCore as the host tracks it. */
export interface NotificationQueue {
  /** Host DRAM ring of 16-byte records. */
  readonly ring: DeviceMemory;
  /** Capacity in records (power of two). */
  readonly capacity: number;
  /** Records consumed so far (monotonic). */
  tail: number;
}

/** An instruction stream registered with a NeuronCore's sequencer (the fields of its stream-table entry). */
export type StreamBinding = StreamEntryFields;

/** The per-generation HAL (`kaena_khal`). */
export interface Khal {
  /** The generation's silicon spec. */
  readonly spec: SiliconSpec;
  /** `aws_hal_q7_ucode_eng_init`: size gate, then per Q7 core DRAM before IRAM, all 8 cores, over BAR0 PIO. */
  q7UcodeEngInit(t: HalTarget, nc: number, image: UcodeImage): Promise<void>;
  /** Holds all 8 Q7 cores in run-stall before an install (no-op where run-stall is not a host CSR). */
  q7HoldRunStall(t: HalTarget, nc: number): Promise<void>;
  /** `aws_hal_*_release_run_stall`: a bring-up primitive only, never issued on a fault path. */
  q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void>;
  /** `aws_hal_q7_swap_table`: one call points the NeuronCore's Q7 engine (all 8 cores) at an opcode table. */
  q7SwapTable(t: HalTarget, nc: number, tablePa: number): Promise<void>;
  /** `aws_hal_q7_swap_file_io_table`: points the Q7 file-IO table at the stdio block (0 detaches it). */
  q7SwapFileIoTable(t: HalTarget, nc: number, blockPa: number): Promise<void>;
  /**
   * `ucode_core_print_logs` (seed: spmd-teardown §6.2): the device moves the core's pending kernel output into the
   * pool_stdio rings; resolves once it is there, for the host to drain. Ours: a `UcodeCoreCommand.PRINT_LOGS` write
   * to the core's `csr.ucodeCore` word.
   */
  ucodeCorePrintLogs(t: HalTarget, nc: number, kind: "nx" | "q7", index: number): Promise<void>;
  /**
   * `ucode_core_destroy` → `ucode_lib_core_destroy` (seed: spmd-teardown §6.3, "device-side: stop image, free
   * IRAM/DRAM"). Ours: a `UcodeCoreCommand.DESTROY` write to the core's `csr.ucodeCore` word.
   */
  ucodeCoreDestroy(t: HalTarget, nc: number, kind: "nx" | "q7", index: number): Promise<void>;
  /** `tdrv_arch_get_sem_inc_addr`: BAR0 offset of a semaphore's increment window. */
  semIncAddr(nc: number, semaphore: number): number;
  /** BAR0 offset of a semaphore's read window. */
  semReadAddr(nc: number, semaphore: number): number;
  /** `tdrv_arch_get_evt_accel_addr`: BAR0 offset of an event (the LOAD_POOL_ARGUMENT one-value-read source). */
  evtAccelAddr(nc: number, event: number): number;
  /** `get_dma_queue_offset(engine_pa, queue, ctl)`: the M2S (`ctl = 1`) or S2M (`ctl = 0`) doorbell offset. */
  dmaQueueOffset(nc: number, engine: number, queue: number, ctl: 0 | 1): number;
  /** Registers an instruction stream in sequencer slot `slot`. */
  streamInstall(t: HalTarget, nc: number, slot: number, binding: StreamBinding): Promise<void>;
  /** Clears sequencer slot `slot`. */
  streamRemove(t: HalTarget, nc: number, slot: number): Promise<void>;
  /** Points the NeuronCore's notification queue at a host ring. */
  nqInit(t: HalTarget, nc: number, queue: NotificationQueue): Promise<void>;
  /** Detaches the notification queue. */
  nqDestroy(t: HalTarget, nc: number): Promise<void>;
  /** The device's NQ head (records produced so far). */
  nqHead(t: HalTarget, nc: number): Promise<number>;
  /** `aws_hal_notific_nq_read`: reads the records between the host tail and the device head, publishes the tail. */
  nqRead(
    t: HalTarget,
    nc: number,
    queue: NotificationQueue,
  ): Promise<{ records: NotificationRecord[]; overflow: boolean }>;
  /** The five engines' instruction pointers, in `al_hal_tpb_eng_type` order (the fault post-mortem). */
  readEngineIps(t: HalTarget, nc: number): Promise<number[]>;
  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number;
  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string;
  /** The stock, signed Pool ucode this generation ships (`ucode_set_q7_ucode_bins`). */
  stockPoolUcode(): UcodeImage;
}

/** Error from the HAL size gate (seed: runtime-synthesis §2.1, `aws_hal_q7_ucode_eng_init` → -1). */
export const UCODE_TOO_BIG = "ucode too big!";

/**
 * One NeuronCore generation as data: its silicon spec, its error tables, its stock Pool image, and — only where a
 * generation really behaves differently from what the spec describes — an override of some HAL calls. Core builds
 * the HAL from it ({@linkcode createKhal}); a new generation needs a pack, not an edit to core. Ours (the seed's
 * `kaena_khal` fills its per-arch slots at init; we fill them from data).
 */
export interface ArchPack {
  /** The generation's silicon spec (its `name` and `instances` are the names NEFF targets and `NRT_ARCH` may use). */
  readonly spec: SiliconSpec;
  /** The generation's error-decode tables (lifecycle-error-model §4.5). */
  readonly errorTables: ErrorTables;
  /** The stock Pool image it ships (`ucode_set_q7_ucode_bins`); default {@linkcode stockPoolImage} of `spec.arch`. */
  readonly stockPoolUcode?: UcodeImage;
  /** HAL calls that differ from the spec-driven ones, given the spec-driven HAL. */
  readonly override?: (base: Khal) => Partial<Khal>;
}

/**
 * The stock Pool image of the simulator's Q7 ISA for architecture `arch`: the firmware module every shipped
 * generation uses (built from `kernels/src/stock_pool.ts`; `tests/arch_packs_test.ts` keeps it byte-identical to
 * `kernels/wasm/stock_pool.wasm`) and a 16-byte data image whose first u32 is `arch`, which the firmware reports
 * through `ucode_arch` (seed: lifecycle-error-model §2.6, the arch id check at load). A fresh copy on every call.
 */
export function stockPoolImage(arch: number): UcodeImage {
  const s = atob(STOCK_FIRMWARE_BASE64);
  const iram = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) iram[i] = s.charCodeAt(i);
  const dram = new Uint8Array(16);
  new DataView(dram.buffer).setUint32(0, arch >>> 0, true);
  return { iram, dram };
}

const STOCK_FIRMWARE_BASE64 =
  "AGFzbQEAAAABCAJgAAF/YAAAAikCA2VudhBjdXN0b21vcF9jbGVhbnVwAAEDZW52Bm1lbW9yeQIDAICABAMEAwAAAQcwBA91Y29kZV9hcGlfbGV2ZWwAAgp1Y29kZV9hcmNoAAEEbm9vcAADBm1lbW9yeQIAChMDBwBBACgCAAsEAEEDCwQAEAAL";

/**
 * Builds a generation's HAL from its pack. The architecture is checked once, here, as the seed's dispatch checks it
 * on every call (runtime-synthesis §1.2): a pack whose spec does not describe a usable NeuronCore is refused.
 *
 * @throws {NrtError} `NRT_INVALID` naming what is wrong with the pack.
 */
export function createKhal(pack: ArchPack): Khal {
  const s = pack.spec;
  const bad = (why: string): never => {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot use arch pack "${s?.name ?? "?"}": ${why}`);
  };
  if (s === undefined || typeof s.name !== "string" || s.name === "") bad("its spec has no name");
  if (!Number.isInteger(s.arch) || s.arch <= 0) bad(`its al_hal_tpb_arch_type ${s.arch} is not a positive integer`);
  if (!Number.isInteger(s.ncPerDevice) || s.ncPerDevice < 1) bad(`it has ${s.ncPerDevice} NeuronCores per device`);
  if (s.runStallRelease === "host-csr" && s.csr.runStall === null) {
    bad("it releases run-stall by a host CSR but has none");
  }
  const t = pack.errorTables;
  if (t === undefined || t.subtypes.length !== 12 || t.isaErrors.length !== 12) {
    bad("its error tables do not have 12 entries");
  }
  const base = new SpecKhal(pack);
  if (pack.override === undefined) return base;
  return Object.freeze({ ...bindAll(base), ...pack.override(base) });
}

/** The HAL's methods bound to `k`, as a plain object (for an override to spread over). */
function bindAll(k: SpecKhal): Khal {
  const out: Record<string, unknown> = { spec: k.spec };
  for (const name of Object.getOwnPropertyNames(SpecKhal.prototype)) {
    const f = (k as unknown as Record<string, unknown>)[name];
    if (name !== "constructor" && typeof f === "function") out[name] = (f as (...a: unknown[]) => unknown).bind(k);
  }
  return out as unknown as Khal;
}

/** The spec-driven HAL of every generation: offsets, sizes, release mode and tables all come from the pack. */
class SpecKhal implements Khal {
  readonly spec: SiliconSpec;
  readonly #tables: ErrorTables;
  readonly #stock: UcodeImage | undefined;

  constructor(pack: ArchPack) {
    this.spec = pack.spec;
    this.#tables = pack.errorTables;
    this.#stock = pack.stockPoolUcode;
  }

  /**
   * `aws_hal_*_release_run_stall` (seed: runtime-synthesis §2.1): where run-stall is a host CSR (Cayman, Mariana),
   * 0xFF → 0x00 releases all 8 Q7 cores at once; where it is not (Sunda, `evt-sem`), the cores come online under
   * SEQ/SP on the first run and the host writes nothing.
   */
  async q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void> {
    if (this.spec.runStallRelease !== "host-csr") return;
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.runStall!, 0x00);
  }

  /** `v2_error_get_infer_error_subtype` over the pack's tables. */
  errorSubtype(record: bigint): number {
    return decodeInferErrorSubtype(record, this.#tables);
  }

  /** `v2_infer_error_get_isa_error_text` over the pack's tables. */
  isaErrorText(errorId: number): string {
    return isaErrorTextFrom(errorId, this.#tables);
  }

  /** The stock image (a fresh copy). */
  stockPoolUcode(): UcodeImage {
    const s = this.#stock;
    return s === undefined ? stockPoolImage(this.spec.arch) : { iram: s.iram.slice(), dram: s.dram.slice() };
  }

  async q7UcodeEngInit(t: HalTarget, nc: number, image: UcodeImage): Promise<void> {
    const s = this.spec;
    if (image.iram.byteLength > s.q7IramBytes || image.dram.byteLength > s.q7DramBytes) {
      throw new NrtError(
        NrtStatus.NRT_FAILURE,
        `${UCODE_TOO_BIG} Cannot install the Pool ucode: image is iram ${image.iram.byteLength} B / dram ${image.dram.byteLength} B, ` +
          `the Q7 holds iram ${s.q7IramBytes} B / dram ${s.q7DramBytes} B`,
      );
    }
    const base = ncBlock(s, nc);
    for (let core = 0; core < s.q7CoresPerNc; core++) {
      // seed: runtime-synthesis §2.1 — write_padded(DRAM) THEN write_padded(IRAM), per core, broadcast ×8.
      // write_padded word-blasts the image; the portal's bulk write carries the exact length, so no padding is added.
      await t.portal.barWrite(t.device, 0, base + s.csr.q7Dram + core * s.csr.q7DramStride, image.dram);
      await t.portal.barWrite(t.device, 0, base + s.csr.q7Iram + core * s.csr.q7IramStride, image.iram);
    }
  }

  async q7HoldRunStall(t: HalTarget, nc: number): Promise<void> {
    if (this.spec.csr.runStall === null) return;
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.runStall, 0xff);
  }

  async q7SwapTable(t: HalTarget, nc: number, tablePa: number): Promise<void> {
    await t.portal.barWrite(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.swapTable, u64Bytes(tablePa));
  }

  async q7SwapFileIoTable(t: HalTarget, nc: number, blockPa: number): Promise<void> {
    await t.portal.barWrite(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.swapFileIoTable, u64Bytes(blockPa));
  }

  async ucodeCorePrintLogs(t: HalTarget, nc: number, kind: "nx" | "q7", index: number): Promise<void> {
    await t.portal.barWrite32(t.device, 0, ucodeCoreAddr(this.spec, nc, kind, index), UcodeCoreCommand.PRINT_LOGS);
  }

  async ucodeCoreDestroy(t: HalTarget, nc: number, kind: "nx" | "q7", index: number): Promise<void> {
    await t.portal.barWrite32(t.device, 0, ucodeCoreAddr(this.spec, nc, kind, index), UcodeCoreCommand.DESTROY);
  }

  semIncAddr(nc: number, semaphore: number): number {
    return ncBlock(this.spec, nc) + this.spec.csr.semaphoreIncrement + 4 * this.#checkSem(semaphore);
  }

  semReadAddr(nc: number, semaphore: number): number {
    return ncBlock(this.spec, nc) + this.spec.csr.semaphoreRead + 4 * this.#checkSem(semaphore);
  }

  evtAccelAddr(nc: number, event: number): number {
    if (!Number.isInteger(event) || event < 0 || event >= this.spec.eventsPerCore) {
      throw new RangeError(`Event ${event} is outside 0..${this.spec.eventsPerCore - 1}`);
    }
    return ncBlock(this.spec, nc) + this.spec.csr.event + 4 * event;
  }

  dmaQueueOffset(nc: number, engine: number, queue: number, ctl: 0 | 1): number {
    const c = this.spec.csr;
    return ncBlock(this.spec, nc) + c.dma + engine * c.dmaEngineStride + queue * c.dmaQueueStride +
      (ctl === 1 ? 0 : 0x20);
  }

  async streamInstall(t: HalTarget, nc: number, slot: number, b: StreamBinding): Promise<void> {
    await t.portal.barWrite(t.device, 0, this.#streamSlotAddr(nc, slot), encodeStreamEntry(b));
  }

  async streamRemove(t: HalTarget, nc: number, slot: number): Promise<void> {
    await t.portal.barWrite(t.device, 0, this.#streamSlotAddr(nc, slot), new Uint8Array(STREAM_ENTRY_BYTES));
  }

  async nqInit(t: HalTarget, nc: number, q: NotificationQueue): Promise<void> {
    const base = ncBlock(this.spec, nc) + this.spec.csr.notificationQueue;
    const b = new Uint8Array(NQ_REGISTER_BYTES);
    const v = new DataView(b.buffer);
    v.setUint32(NqRegister.BASE_LO, q.ring.pa >>> 0, true);
    v.setUint32(NqRegister.BASE_HI, Math.floor(q.ring.pa / 0x1_0000_0000), true);
    v.setUint32(NqRegister.CAPACITY, q.capacity, true);
    await t.portal.barWrite(t.device, 0, base, b);
  }

  async nqDestroy(t: HalTarget, nc: number): Promise<void> {
    await t.portal.barWrite(
      t.device,
      0,
      ncBlock(this.spec, nc) + this.spec.csr.notificationQueue,
      new Uint8Array(NQ_REGISTER_BYTES),
    );
  }

  async nqHead(t: HalTarget, nc: number): Promise<number> {
    return await t.portal.barRead32(
      t.device,
      0,
      ncBlock(this.spec, nc) + this.spec.csr.notificationQueue + NqRegister.HEAD,
    );
  }

  async nqRead(
    t: HalTarget,
    nc: number,
    q: NotificationQueue,
  ): Promise<{ records: NotificationRecord[]; overflow: boolean }> {
    const base = ncBlock(this.spec, nc) + this.spec.csr.notificationQueue;
    const head = await t.portal.barRead32(t.device, 0, base + NqRegister.HEAD);
    let pending = (head - q.tail) >>> 0;
    let overflow = false;
    if (pending > q.capacity) {
      // The device lapped the host: the oldest records are gone (seed: lifecycle-error-model §5.3, NQ overflow).
      overflow = true;
      q.tail = (head - q.capacity) >>> 0;
      pending = q.capacity;
    }
    const records: NotificationRecord[] = [];
    if (pending === 0) return { records, overflow };
    const start = q.tail % q.capacity;
    const first = Math.min(pending, q.capacity - start);
    // Issued back to back and awaited together (a remote portal pipelines them), in the order their effects must
    // have: the records are read before the new tail frees their slots, and the cause after.
    const wraps = first < pending;
    const read1 = t.portal.memRead(q.ring, start * NOTIFICATION_BYTES, first * NOTIFICATION_BYTES);
    const read2 = wraps ? t.portal.memRead(q.ring, 0, (pending - first) * NOTIFICATION_BYTES) : undefined;
    q.tail = (q.tail + pending) >>> 0;
    const tail = t.portal.barWrite32(t.device, 0, base + NqRegister.TAIL, q.tail);
    const causeRead = t.portal.barRead32(t.device, 0, base + NqRegister.CAUSE);
    // One join of every access in flight (no rejection is left without a handler while another is awaited).
    const done = await Promise.all(read2 === undefined ? [read1, tail, causeRead] : [read1, tail, causeRead, read2]);
    const cause = done[2] as number;
    decodeRecords(done[0] as Uint8Array, records);
    if (read2 !== undefined) decodeRecords(done[3] as Uint8Array, records);
    // aws_hal_intc_read_cause, then acknowledge: the overflow bit is sticky until the host writes 0.
    if ((cause & NQ_CAUSE_OVERFLOW) !== 0) await t.portal.barWrite32(t.device, 0, base + NqRegister.CAUSE, 0);
    return { records, overflow: overflow || (cause & NQ_CAUSE_OVERFLOW) !== 0 };
  }

  async readEngineIps(t: HalTarget, nc: number): Promise<number[]> {
    const base = ncBlock(this.spec, nc) + this.spec.csr.engineIp;
    const ips: number[] = [];
    for (let e = 0; e < 5; e++) ips.push(await t.portal.barRead32(t.device, 0, base + 4 * e));
    return ips;
  }

  #streamSlotAddr(nc: number, slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.spec.csr.streamSlots) {
      throw new RangeError(`Stream slot ${slot} is outside 0..${this.spec.csr.streamSlots - 1}`);
    }
    return ncBlock(this.spec, nc) + this.spec.csr.streamTable + 16 * slot;
  }

  #checkSem(semaphore: number): number {
    if (!Number.isInteger(semaphore) || semaphore < 0 || semaphore >= this.spec.semaphoresPerCore) {
      throw new RangeError(`Semaphore ${semaphore} is outside 0..${this.spec.semaphoresPerCore - 1}`);
    }
    return semaphore;
  }
}

/** Decodes the 16-byte NQ records of `chunk` onto `into`. */
function decodeRecords(chunk: Uint8Array, into: NotificationRecord[]): void {
  for (let i = 0; i < chunk.byteLength / NOTIFICATION_BYTES; i++) {
    into.push(decodeNotification(chunk, i * NOTIFICATION_BYTES));
  }
}

function u64Bytes(x: number): Uint8Array {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  v.setUint32(0, x >>> 0, true);
  v.setUint32(4, Math.floor(x / 0x1_0000_0000), true);
  return b;
}
