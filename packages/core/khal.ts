/**
 * The `Khal` contract — the `kaena_khal` dispatch table: one interface, one implementation per NeuronCore
 * generation in the arch packs. Register offsets, sizes, run-stall release, error-subtype tables and texts live
 * behind it and nowhere else.
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
import type { InjectionToken } from "tsyringe";
import { NrtError } from "./error.ts";
import { decodeNotification, NOTIFICATION_BYTES, type NotificationRecord } from "./isa.ts";
import type { DeviceMemory, Portal } from "./portal.ts";
import { ncBlock, type SiliconSpec } from "./silicon_spec.ts";
import { NrtStatus } from "./status.ts";
import { TpbArchType } from "./state.ts";

/** A Pool-engine ucode image pair (`nrt_ucode_info`: `{iram, dram}{bin, size}`). */
export interface UcodeImage {
  /** Code image (the simulator's Q7 ISA is WebAssembly: a wasm module). */
  readonly iram: Uint8Array;
  /** Data image, copied to the Q7's address 0. */
  readonly dram: Uint8Array;
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

/** An instruction stream registered with a NeuronCore's sequencer. */
export interface StreamBinding {
  /** Device address of the first slot. */
  readonly pa: number;
  /** Number of 64-byte slots. */
  readonly slots: number;
  /** The doorbell semaphore that releases one run of the stream. */
  readonly doorbell: number;
  /** Device-side model id the stream reports in its notifications. */
  readonly model: number;
}

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
  /** `aws_hal_q7_swap_file_io_table`: points the Q7 file-IO table at the stdio block. */
  q7SwapFileIoTable(t: HalTarget, nc: number, blockPa: number): Promise<void>;
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
  nqRead(t: HalTarget, nc: number, queue: NotificationQueue): Promise<{ records: NotificationRecord[]; overflow: boolean }>;
  /** The five engines' instruction pointers, in `al_hal_tpb_eng_type` order (the fault post-mortem). */
  readEngineIps(t: HalTarget, nc: number): Promise<number[]>;
  /** `v2_error_get_infer_error_subtype`. */
  errorSubtype(record: bigint): number;
  /** `v2_infer_error_get_isa_error_text`. */
  isaErrorText(errorId: number): string;
  /** The stock, signed Pool ucode this generation ships (`ucode_set_q7_ucode_bins`). */
  stockPoolUcode(): UcodeImage;
}

/** DI token of the {@linkcode Khal}: every registered arch pack is one registration under it. */
export const Khal: InjectionToken<Khal> = "Khal";

/** Error from the HAL size gate (seed: runtime-synthesis §2.1, `aws_hal_q7_ucode_eng_init` → -1). */
export const UCODE_TOO_BIG = "ucode too big!";

/**
 * The spec-driven part of every generation's HAL; an arch pack extends it and overrides the few per-arch
 * behaviours (run-stall release, subtype decode, text tables). Every call asserts the architecture is one of the
 * known `al_hal_tpb_arch_type` values, as the seed's dispatch does.
 */
export abstract class KhalBase implements Khal {
  /** The generation's silicon spec. */
  abstract readonly spec: SiliconSpec;

  /** Asserts the spec's arch is known (or registered by a third party) before dispatching. */
  protected assertArch(): void {
    const known: number[] = [TpbArchType.AL_HAL_TPB_ARCH_TYPE_SUNDA, TpbArchType.AL_HAL_TPB_ARCH_TYPE_CAYMAN, TpbArchType.AL_HAL_TPB_ARCH_TYPE_MARIANA];
    if (!known.includes(this.spec.arch) && !this.thirdParty) {
      throw new NrtError(NrtStatus.NRT_HW_ERROR, `Cannot dispatch HAL call: unknown architecture ${this.spec.arch}`);
    }
  }

  /** Set by third-party packs whose arch is not one of the three seed generations. */
  protected readonly thirdParty: boolean = false;

  /** Per-arch: how the Q7 cores leave run-stall. */
  abstract q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void>;
  /** Per-arch: `v2_error_get_infer_error_subtype`. */
  abstract errorSubtype(record: bigint): number;
  /** Per-arch: ISA error text table. */
  abstract isaErrorText(errorId: number): string;
  /** Per-arch: the stock image. */
  abstract stockPoolUcode(): UcodeImage;

  async q7UcodeEngInit(t: HalTarget, nc: number, image: UcodeImage): Promise<void> {
    this.assertArch();
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
    this.assertArch();
    if (this.spec.csr.runStall === null) return;
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.runStall, 0xff);
  }

  async q7SwapTable(t: HalTarget, nc: number, tablePa: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.swapTable, u64Bytes(tablePa));
  }

  async q7SwapFileIoTable(t: HalTarget, nc: number, blockPa: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.swapFileIoTable, u64Bytes(blockPa));
  }

  semIncAddr(nc: number, semaphore: number): number {
    this.assertArch();
    return ncBlock(this.spec, nc) + this.spec.csr.semaphoreIncrement + 4 * this.checkSem(semaphore);
  }

  semReadAddr(nc: number, semaphore: number): number {
    this.assertArch();
    return ncBlock(this.spec, nc) + this.spec.csr.semaphoreRead + 4 * this.checkSem(semaphore);
  }

  evtAccelAddr(nc: number, event: number): number {
    this.assertArch();
    if (!Number.isInteger(event) || event < 0 || event >= this.spec.eventsPerCore) {
      throw new RangeError(`Event ${event} is outside 0..${this.spec.eventsPerCore - 1}`);
    }
    return ncBlock(this.spec, nc) + this.spec.csr.event + 4 * event;
  }

  dmaQueueOffset(nc: number, engine: number, queue: number, ctl: 0 | 1): number {
    this.assertArch();
    const c = this.spec.csr;
    return ncBlock(this.spec, nc) + c.dma + engine * c.dmaEngineStride + queue * c.dmaQueueStride + (ctl === 1 ? 0 : 0x20);
  }

  async streamInstall(t: HalTarget, nc: number, slot: number, b: StreamBinding): Promise<void> {
    this.assertArch();
    const e = new Uint8Array(16);
    const v = new DataView(e.buffer);
    v.setUint32(0, b.pa >>> 0, true);
    v.setUint32(4, Math.floor(b.pa / 0x1_0000_0000), true);
    v.setUint32(8, b.slots, true);
    v.setUint32(12, (0x8000_0000 | ((b.model & 0x7fff) << 16) | (b.doorbell & 0xffff)) >>> 0, true);
    await t.portal.barWrite(t.device, 0, this.streamSlotAddr(nc, slot), e);
  }

  async streamRemove(t: HalTarget, nc: number, slot: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite(t.device, 0, this.streamSlotAddr(nc, slot), new Uint8Array(16));
  }

  async nqInit(t: HalTarget, nc: number, q: NotificationQueue): Promise<void> {
    this.assertArch();
    const base = ncBlock(this.spec, nc) + this.spec.csr.notificationQueue;
    const b = new Uint8Array(24);
    const v = new DataView(b.buffer);
    v.setUint32(0, q.ring.pa >>> 0, true);
    v.setUint32(4, Math.floor(q.ring.pa / 0x1_0000_0000), true);
    v.setUint32(8, q.capacity, true);
    await t.portal.barWrite(t.device, 0, base, b);
  }

  async nqDestroy(t: HalTarget, nc: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.notificationQueue, new Uint8Array(24));
  }

  async nqHead(t: HalTarget, nc: number): Promise<number> {
    this.assertArch();
    return await t.portal.barRead32(t.device, 0, ncBlock(this.spec, nc) + this.spec.csr.notificationQueue + 12);
  }

  async nqRead(t: HalTarget, nc: number, q: NotificationQueue): Promise<{ records: NotificationRecord[]; overflow: boolean }> {
    this.assertArch();
    const base = ncBlock(this.spec, nc) + this.spec.csr.notificationQueue;
    const head = await t.portal.barRead32(t.device, 0, base + 12);
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
    const reads = [t.portal.memRead(q.ring, start * NOTIFICATION_BYTES, first * NOTIFICATION_BYTES)];
    if (first < pending) reads.push(t.portal.memRead(q.ring, 0, (pending - first) * NOTIFICATION_BYTES));
    q.tail = (q.tail + pending) >>> 0;
    const tail = t.portal.barWrite32(t.device, 0, base + 16, q.tail);
    const causeRead = t.portal.barRead32(t.device, 0, base + 20);
    const [chunks, , cause] = await Promise.all([Promise.all(reads), tail, causeRead]);
    for (const chunk of chunks) for (let i = 0; i < chunk.byteLength / NOTIFICATION_BYTES; i++) records.push(decodeNotification(chunk, i * NOTIFICATION_BYTES));
    // aws_hal_intc_read_cause, then acknowledge: the overflow bit is sticky until the host writes 0.
    if ((cause & 1) === 1) await t.portal.barWrite32(t.device, 0, base + 20, 0);
    return { records, overflow: overflow || (cause & 1) === 1 };
  }

  async readEngineIps(t: HalTarget, nc: number): Promise<number[]> {
    this.assertArch();
    const base = ncBlock(this.spec, nc) + this.spec.csr.engineIp;
    const ips: number[] = [];
    for (let e = 0; e < 5; e++) ips.push(await t.portal.barRead32(t.device, 0, base + 4 * e));
    return ips;
  }

  private streamSlotAddr(nc: number, slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.spec.csr.streamSlots) {
      throw new RangeError(`Stream slot ${slot} is outside 0..${this.spec.csr.streamSlots - 1}`);
    }
    return ncBlock(this.spec, nc) + this.spec.csr.streamTable + 16 * slot;
  }

  private checkSem(semaphore: number): number {
    if (!Number.isInteger(semaphore) || semaphore < 0 || semaphore >= this.spec.semaphoresPerCore) {
      throw new RangeError(`Semaphore ${semaphore} is outside 0..${this.spec.semaphoresPerCore - 1}`);
    }
    return semaphore;
  }
}

function u64Bytes(x: number): Uint8Array {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  v.setUint32(0, x >>> 0, true);
  v.setUint32(4, Math.floor(x / 0x1_0000_0000), true);
  return b;
}
