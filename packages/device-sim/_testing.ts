/**
 * Test support (private to the folder): a minimal host that drives a {@linkcode DeviceSimPortal} through the same
 * BAR0 writes the runtime's HAL performs, plus helpers to stage instruction streams and tables in
 * device memory.
 *
 * @module
 */
import {
  collectCustomOpQueues,
  createKhal,
  type HalTarget,
  KBIN_DMA_RING_TYPE_CUSTOM_OP,
  type Khal,
  type NotificationQueue,
  type SiliconSpec,
  type UcodeImage,
} from "@nrt/core/hal";
import {
  DMA_DESCRIPTOR_BYTES,
  type DmaDescriptor,
  encodeDmaDescriptor,
  encodeInstruction,
  encodeRingTableEntry,
  type Instruction,
  type NotificationRecord,
  RING_TABLE_ENTRY_BYTES,
} from "@nrt/core/isa";
import type { DeviceMemory, MemoryLocation } from "@nrt/core/portal";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { type DeviceSimOptions, DeviceSimPortal } from "./device_sim_portal.ts";

/**
 * The HAL of `spec`'s generation, built as the runtime builds it (`createKhal`); the error tables report the subtype
 * mask itself, so a test reads back what the device put in a record.
 */
export function testKhal(spec: SiliconSpec = CAYMAN_SPEC): Khal {
  return createKhal({
    spec,
    errorTables: {
      dveSpuriousMask: 0,
      subtypes: [...Array(12).keys()],
      isaErrors: Array.from({ length: 12 }, (_, i) => `isa error ${i}`),
      defaultText: "isa error",
    },
    override: () => ({ errorSubtype: (record: bigint) => Number((record >> 8n) & 0xffffn) }),
  });
}

/** A host driving NeuronCore `nc` of device 0. */
export class TestHost {
  readonly portal: DeviceSimPortal;
  readonly khal: Khal;
  readonly target: HalTarget;
  readonly nc: number;
  queue: NotificationQueue | undefined;

  constructor(options: DeviceSimOptions = {}, nc = 0) {
    this.portal = new DeviceSimPortal(options);
    this.khal = testKhal(this.portal.spec);
    this.target = { portal: this.portal, device: 0 };
    this.nc = nc;
  }

  /** Allocates and fills device memory. */
  async put(bytes: Uint8Array | number, location: MemoryLocation = "hbm"): Promise<DeviceMemory> {
    const size = typeof bytes === "number" ? bytes : Math.max(1, bytes.byteLength);
    const m = await this.portal.memAlloc({ device: 0, nc: this.nc, bytes: size, location });
    if (typeof bytes !== "number" && bytes.byteLength > 0) await this.portal.memWrite(m, 0, bytes);
    return m;
  }

  /** Registers a host-DRAM NQ ring of `capacity` records. */
  async attachNq(capacity = 16): Promise<NotificationQueue> {
    const ring = await this.put(capacity * 16, "host");
    this.queue = { ring, capacity, tail: 0 };
    await this.khal.nqInit(this.target, this.nc, this.queue);
    return this.queue;
  }

  /** Stages `program` in HBM and registers it in stream slot `slot` with doorbell `doorbell`. */
  async installStream(program: Instruction[], doorbell: number, slot = 0, model = 7): Promise<DeviceMemory> {
    const bytes = new Uint8Array(program.length * 64);
    program.forEach((ins, i) => bytes.set(encodeInstruction(ins), i * 64));
    const m = await this.put(bytes);
    await this.khal.streamInstall(this.target, this.nc, slot, { pa: m.pa, slots: program.length, doorbell, model });
    return m;
  }

  /**
   * Stages one descriptor ring per Q7 core (custom-op queue of engine `engLo + core`) and returns the ring table; the
   * rings themselves go to `rings` when given.
   */
  async stageRings(perCore: DmaDescriptor[][], rings?: DeviceMemory[]): Promise<DeviceMemory> {
    const queues = collectCustomOpQueues(this.portal.spec);
    const table = new Uint8Array(perCore.length * RING_TABLE_ENTRY_BYTES);
    for (let core = 0; core < perCore.length; core++) {
      const ring = new Uint8Array(Math.max(1, perCore[core].length) * DMA_DESCRIPTOR_BYTES);
      perCore[core].forEach((d, i) => encodeDmaDescriptor(d, ring, i * DMA_DESCRIPTOR_BYTES));
      const m = await this.put(ring);
      rings?.push(m);
      encodeRingTableEntry(
        {
          engine: queues[core].engine,
          queue: queues[core].queue,
          ringType: KBIN_DMA_RING_TYPE_CUSTOM_OP,
          count: perCore[core].length,
          ringPa: m.pa,
        },
        table,
        core * RING_TABLE_ENTRY_BYTES,
      );
    }
    return await this.put(table);
  }

  /** Device PA of byte `offset` of this NeuronCore's SBUF. */
  sbufPa(offset: number): number {
    const a = this.portal.spec.addressMap;
    return a.sbufBase + this.nc * a.sbufStride + offset;
  }

  /** Rings the doorbell (one increment) and waits until the sequencer is idle. */
  async fire(doorbell: number): Promise<void> {
    await this.portal.semaphoreIncrement(0, this.nc, doorbell, 1);
    await this.portal.whenIdle(0, this.nc);
  }

  /** Reads the new records through the HAL's NQ read. */
  async read(): Promise<{ records: NotificationRecord[]; overflow: boolean }> {
    if (this.queue === undefined) throw new Error("No NQ attached");
    return await this.khal.nqRead(this.target, this.nc, this.queue);
  }

  /** Installs `image` on all 8 Q7 cores under run-stall and releases them, as init does. */
  async bootQ7(image: UcodeImage): Promise<void> {
    await this.khal.q7HoldRunStall(this.target, this.nc);
    await this.khal.q7UcodeEngInit(this.target, this.nc, image);
    await this.khal.q7ReleaseRunStall(this.target, this.nc);
  }
}

/** Reads a file next to the repository root as bytes, with Web APIs only. */
export async function readBytes(url: URL): Promise<Uint8Array> {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`Cannot read ${url}: ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

/** Float32 array as bytes. */
export function f32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(values).buffer);
}

/** Bytes as a float32 array. */
export function bytesF32(bytes: Uint8Array): number[] {
  return [...new Float32Array(bytes.slice().buffer)];
}
