/**
 * `DeviceSimPortal`: the embedded simulated Neuron device behind the {@linkcode Portal} contract. Every driver op
 * (`ndl_*`) acts on a {@linkcode SimDevice}; a few simulator-only methods (Q7 reset, idle wait, observability) sit
 * beside the contract for tests and the composition root.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the driver ABI; completion is poll-driven, the portal never calls back),
 * §3.3 (`ndl_nc_semaphore_increment` is the doorbell), §3.5 (the host blocks on `comp_efd` →
 * {@linkcode DeviceSimPortal.notificationWait}).
 *
 * @module
 */
import {
  type DeviceMemory,
  type MemAllocRequest,
  type NotificationRecord,
  NrtError,
  NrtStatus,
  type Portal,
  type PortalDeviceInfo,
  type SiliconSpec,
} from "@nrt/core";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import type { QueueBytes } from "./dma_engine.ts";
import type { Q7BootEvent, Q7ClusterFactory } from "./q7_complex.ts";
import type { DeviceStdioQueue } from "./file_io_manager.ts";
import { FaultInjector } from "./fault_injector.ts";
import { defaultQ7Factory } from "./q7_factory.ts";
import { SimDevice } from "./sim_device.ts";

const GiB = 1024 ** 3;

/** Options of {@linkcode DeviceSimPortal}. */
export interface DeviceSimOptions {
  /** The generation to simulate (default: Cayman). */
  readonly spec?: SiliconSpec;
  /** Number of devices (default 1). */
  readonly devices?: number;
  /** HBM bytes per device, overriding the spec (small values make OOM tests cheap). */
  readonly hbmBytes?: number;
  /** Pinned host DRAM bytes per device (default 64 GiB; accounted, lazily backed). */
  readonly hostBytes?: number;
  /** Creates the Q7 clusters (default: the Worker-based `Q7Cluster`). */
  readonly q7Factory?: Q7ClusterFactory;
}

/**
 * A simulated device behind the Portal contract.
 *
 * @example Allocate, write and read back device memory
 * ```ts
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * const portal = new DeviceSimPortal();
 * const m = await portal.memAlloc({ device: 0, nc: 0, bytes: 4 });
 * await portal.memWrite(m, 0, new Uint8Array([1, 2, 3, 4]));
 * console.log(await portal.memRead(m, 0, 4));
 * await portal.close();
 * ```
 */
export class DeviceSimPortal implements Portal {
  /** Backend name. */
  readonly name: string = "device-sim";
  /** The simulated generation. */
  readonly spec: SiliconSpec;
  /** Fault injection (`docs/faults.md`): `portal.faults.inject({ kind: "hbm-ue", nc: 1, atExecution: 3 })`. */
  readonly faults: FaultInjector;
  readonly #devices: SimDevice[];
  readonly #q7Events: Q7BootEvent[] = [];
  readonly #hbmBytes: number;
  #closed = false;

  /** Creates the devices in their reset state; nothing is backed and no Worker runs until used. */
  constructor(options: DeviceSimOptions = {}) {
    const spec = options.spec ?? CAYMAN_SPEC;
    const count = options.devices ?? 1;
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`Device count ${count} is not a positive integer`);
    this.spec = spec;
    this.#hbmBytes = options.hbmBytes ?? spec.hbmBytes;
    let id = 0;
    this.faults = new FaultInjector(count, spec.ncPerDevice, { q7Cores: spec.q7CoresPerNc, dmaEngines: spec.dmaEngines });
    this.#devices = Array.from({ length: count }, (_, index) =>
      new SimDevice({
        spec,
        index,
        hbmBytes: this.#hbmBytes,
        hostBytes: options.hostBytes ?? 64 * GiB,
        nextId: () => ++id,
        q7Factory: options.q7Factory ?? defaultQ7Factory,
        q7Events: this.#q7Events,
        faults: this.faults,
      }));
  }

  /** Enumerates the devices. */
  devices(): Promise<PortalDeviceInfo[]> {
    this.#open("enumerate devices");
    return Promise.resolve(this.#devices.map((_, index) => ({ index, arch: this.spec.arch, ncCount: this.spec.ncPerDevice, hbmBytes: this.#hbmBytes })));
  }

  /** Reads one 32-bit CSR of BAR0. */
  barRead32(device: number, bar: number, offset: number): Promise<number> {
    return this.#sync(() => this.#bar0(device, bar, "read").read32(offset));
  }

  /** Writes one 32-bit CSR of BAR0. */
  barWrite32(device: number, bar: number, offset: number, value: number): Promise<void> {
    return this.#sync(() => this.#bar0(device, bar, "write").write32(offset, value));
  }

  /** Bulk programmed-IO write to BAR0. */
  barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    return this.#sync(() => this.#bar0(device, bar, "write").write(offset, data.slice()));
  }

  /** Allocates device memory. */
  memAlloc(request: MemAllocRequest): Promise<DeviceMemory> {
    return this.#sync(() => {
      const d = this.#device(request.device, "allocate");
      if (!Number.isInteger(request.nc) || request.nc < 0 || request.nc >= this.spec.ncPerDevice) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate device memory: NeuronCore ${request.nc} does not exist`);
      }
      return d.memory.alloc(request);
    });
  }

  /** Frees device memory. */
  memFree(memory: DeviceMemory): Promise<void> {
    return this.#sync(() => this.#device(memory.device, "free").memory.free(memory));
  }

  /** Copies host bytes into device memory. */
  memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    return this.#sync(() => this.#device(memory.device, "write").memory.write(memory, offset, data));
  }

  /** Copies device memory out. */
  memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array> {
    return this.#sync(() => this.#device(memory.device, "read").memory.read(memory, offset, length));
  }

  /** The doorbell: adds to a semaphore exactly as a write to its BAR0 increment window does. */
  semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    return this.#sync(() => this.#device(device, "increment a semaphore").bar0.incrementSemaphore(nc, semaphore, value));
  }

  /** Reads a semaphore. */
  semaphoreRead(device: number, nc: number, semaphore: number): Promise<number> {
    return this.#sync(() => this.#device(device, "read a semaphore").bar0.readSemaphore(nc, semaphore));
  }

  /** Sets a semaphore. */
  semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    return this.#sync(() => this.#device(device, "set a semaphore").bar0.setSemaphore(nc, semaphore, value));
  }

  /** Resolves when the NeuronCore's NQ head differs from `head`, or `signal` aborts. */
  notificationWait(device: number, nc: number, head: number, signal?: AbortSignal): Promise<void> {
    try {
      return this.#nc(device, nc, "wait for a notification").nq.wait(head, signal);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Bytes and allocations in use on a device. */
  memUsage(device: number): Promise<{ hbm: number; host: number; allocations: number }> {
    return this.#sync(() => this.#device(device, "read memory usage").memory.usage());
  }

  /** Stops every Q7 Worker, drops running streams and releases notification waiters. Idempotent. */
  close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      for (const d of this.#devices) d.close();
    }
    return Promise.resolve();
  }

  // ---- Simulator-only methods (not part of Portal) -------------------------------------------------------------

  /**
   * Recovers a hung NeuronCore: terminates its Q7 Workers and drops the stream blocked on them without a completion
   * (the host has already timed out). The released image stays installed, so the next EXTENDED_INST boots a fresh
   * cluster.
   */
  resetQ7(device: number, nc: number): Promise<void> {
    return this.#sync(() => {
      this.#nc(device, nc, "reset the Q7 cores");
      this.#devices[device].resetQ7(nc);
    });
  }

  /** Resolves when every sequencer of `device` (or of one NeuronCore) has no run queued or in progress. */
  async whenIdle(device = 0, nc?: number): Promise<void> {
    const d = this.#device(device, "wait for idle");
    const units = nc === undefined ? d.ncs : [this.#nc(device, nc, "wait for idle")];
    for (const u of units) await u.sequencer.whenIdle();
  }

  /** Bytes each custom-op queue (index = Q7 core) has moved, by direction. */
  queueBytes(device: number, nc: number): QueueBytes {
    return this.#nc(device, nc, "read queue statistics").dma.queueBytes();
  }

  /** Stdio the NeuronCore's Q7 kernels wrote since the last call (seam for the host pool_stdio rings). */
  stdioEntries(device: number, nc: number): Promise<Array<{ cpu: number; stream: number; text: string }>> {
    return this.#nc(device, nc, "drain stdio").sequencer.stdioEntries();
  }

  /** Every record the NeuronCore has produced, in order (whether or not an NQ ring was attached). */
  records(device: number, nc: number): readonly NotificationRecord[] {
    return this.#nc(device, nc, "read records").nq.log;
  }

  /** The sequencer faults of a NeuronCore with their reasons (raised and injected). */
  sequencerFaults(device: number, nc: number): ReadonlyArray<{ slot: number; mask: number; message: string }> {
    return this.#nc(device, nc, "read faults").sequencer.faults;
  }

  /**
   * The device's view of a NeuronCore's pool_stdio rings: capacity, write index, the read index the host published,
   * overruns (`undefined` for a ring the host did not describe).
   */
  stdioQueues(device: number, nc: number): { stdout?: DeviceStdioQueue; stderr?: DeviceStdioQueue } {
    const io = this.#nc(device, nc, "read stdio queues").fileIo;
    return { stdout: io.queue(1), stderr: io.queue(2) };
  }

  /** Whether a NeuronCore's Q7 cores are busy with the op of the run in progress (e.g. a kernel in an endless loop). */
  q7Busy(device: number, nc: number): boolean {
    return this.#nc(device, nc, "read Q7 state").sequencer.q7Busy;
  }

  /** Whether a NeuronCore's Q7 Workers exist: none after the host halted a run stuck in a kernel. */
  q7Started(device: number, nc: number): boolean {
    return this.#nc(device, nc, "read Q7 state").q7.started;
  }

  /** Q7 lifecycle events of every device (release, boot failure, cluster start and termination). */
  q7Events(): readonly Q7BootEvent[] {
    return this.#q7Events;
  }

  /** Bytes of device memory that have real backing (the lazy-backing invariant). */
  backedBytes(device: number): number {
    return this.#device(device, "read backing").memory.backedBytes;
  }

  /** Pending `notificationWait` callers of a NeuronCore (leak checks). */
  notificationWaiters(device: number, nc: number): number {
    return this.#nc(device, nc, "count waiters").nq.waiters;
  }

  #sync<T>(f: () => T): Promise<T> {
    try {
      return Promise.resolve(f());
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #open(what: string): void {
    if (this.#closed) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: the device-sim portal is closed`);
  }

  #device(device: number, what: string): SimDevice {
    this.#open(what);
    const d = this.#devices[device];
    if (d === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: device ${device} does not exist (${this.#devices.length} simulated)`);
    return d;
  }

  #nc(device: number, nc: number, what: string): SimDevice["ncs"][number] {
    const unit = this.#device(device, what).ncs[nc];
    if (unit === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: NeuronCore ${nc} does not exist`);
    return unit;
  }

  #bar0(device: number, bar: number, what: string): SimDevice["bar0"] {
    const d = this.#device(device, `${what} BAR${bar}`);
    if (bar !== 0) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what} BAR${bar}: the simulator models BAR0 only`);
    return d.bar0;
  }
}
