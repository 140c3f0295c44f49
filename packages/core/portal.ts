/**
 * The `Portal` contract: the driver ABI (`ndl_*`) as a TypeScript interface. Every device effect of the runtime goes
 * through it, so a tracing decorator sees all of them and a backend (the embedded simulator, a remote daemon, a
 * real driver) plugs in by DI token.
 *
 * Seed: runtime-synthesis §1.2 layer 4 ("the raw IOCTL/mmap ABI to /dev/neuron. NO msi/msix/irq symbol →
 * completion is POLL-driven. All physical device writes land here") and the two physical write primitives: bulk
 * image write (`ndl_bar_write` word-blasted, used for the Q7 IRAM/DRAM install) and single-CSR write.
 *
 * @module
 */
import type { TpbArchType } from "./state.ts";

/** What the portal reports about one device (`ndl` device info). */
export interface PortalDeviceInfo {
  /** Device index. */
  readonly index: number;
  /** `al_hal_tpb_arch_type` of the device; the kernel resolves the arch pack from it. */
  readonly arch: TpbArchType;
  /** Physical NeuronCores on the device. */
  readonly ncCount: number;
  /** HBM bytes. */
  readonly hbmBytes: number;
}

/** Where a device allocation lives (`TONGA_DRAM` = HBM, `HOST_DRAM` = pinned host memory). */
export type MemoryLocation = "hbm" | "host";

/** A device memory allocation handed out by {@linkcode Portal.memAlloc}. */
export interface DeviceMemory {
  /** Portal-unique allocation id. */
  readonly id: number;
  /** Device index. */
  readonly device: number;
  /** NeuronCore the allocation is close to (HBM channel affinity). */
  readonly nc: number;
  /** Device physical address of the first byte. */
  readonly pa: number;
  /** Size in bytes. */
  readonly bytes: number;
  /** HBM or host DRAM. */
  readonly location: MemoryLocation;
}

/** An allocation request. */
export interface MemAllocRequest {
  /** Device index. */
  readonly device: number;
  /** NeuronCore affinity. */
  readonly nc: number;
  /** Bytes (> 0). */
  readonly bytes: number;
  /** Alignment in bytes (power of two, default 64). */
  readonly align?: number;
  /** HBM (default) or host DRAM. */
  readonly location?: MemoryLocation;
}

/**
 * The driver ABI. All operations are asynchronous so that a backend may live in another process; completion is
 * poll-driven — the portal never calls back into the runtime. {@linkcode Portal.notificationWait} is the one
 * blocking primitive: the host's wait on its completion eventfd (`comp_efd`, seed: runtime-synthesis §3.5).
 */
export interface Portal {
  /** Backend name, e.g. `"device-sim"`. */
  readonly name: string;
  /** Enumerates the devices (`ndl_available_devices` + device info). */
  devices(): Promise<PortalDeviceInfo[]>;
  /** Reads one 32-bit CSR from BAR `bar` (`ndl_bar_read`). */
  barRead32(device: number, bar: number, offset: number): Promise<number>;
  /** Writes one 32-bit CSR (`al_reg_write32 → csr_write → ndl_bar_write`). */
  barWrite32(device: number, bar: number, offset: number, value: number): Promise<void>;
  /** Bulk programmed-IO write (`al_mem_write_buf → axi_write → ndl_bar_write`), used for image installs. */
  barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void>;
  /** Allocates device memory (`ndl_memory_alloc`); throws `NrtError(NRT_RESOURCE)` when the device is full. */
  memAlloc(request: MemAllocRequest): Promise<DeviceMemory>;
  /** Frees device memory (`ndl_memory_free`). Freeing twice throws `NrtError(NRT_INVALID)`. */
  memFree(memory: DeviceMemory): Promise<void>;
  /** Copies host bytes into device memory (`ndl_memory_copy` to device). */
  memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void>;
  /** Copies device memory out to the host (`ndl_memory_copy` from device). */
  memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array>;
  /**
   * Copies `into.byteLength` bytes of device memory at `offset` into the caller's buffer (`ndl_memory_copy` from
   * device, as `nrt_tensor_read` calls it with the caller's `buf`). Optional: without it the runtime reads with
   * {@linkcode Portal.memRead} and copies, which costs a fresh buffer the size of the read.
   *
   * @throws {NrtError} `NRT_INVALID` for a range outside the allocation (nothing is written to `into` then).
   */
  memReadInto?(memory: DeviceMemory, offset: number, into: Uint8Array): Promise<void>;
  /** Adds `value` to a NeuronCore semaphore (`ndl_nc_semaphore_increment`): the execute doorbell. */
  semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void>;
  /** Reads a NeuronCore semaphore (`ndl_nc_semaphore_read`). */
  semaphoreRead(device: number, nc: number, semaphore: number): Promise<number>;
  /** Sets a NeuronCore semaphore (`ndl_nc_semaphore_write`). */
  semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void>;
  /**
   * Waits until NeuronCore `nc`'s notification-queue head differs from `head`, or `signal` aborts (then it resolves
   * too). The caller re-reads the queue after it returns.
   */
  notificationWait(device: number, nc: number, head: number, signal?: AbortSignal): Promise<void>;
  /** Bytes currently allocated on a device, by location (leak checks, `nrt_get_vnc_memory_stats`). */
  memUsage(device: number): Promise<{ hbm: number; host: number; allocations: number }>;
  /**
   * Acquires NeuronCores of `device` for this process, exclusively and all-or-none, as the driver's core range mark
   * does (`NEURON_IOCTL_CRWL_NC_RANGE_MARK`). `nrt_init` calls it with the visible physical cores before bringing
   * them up. Optional: a backend that serves a single process (the embedded simulator) has nothing to arbitrate.
   * The caller's identity (pid, name) is the backend's business (the remote backend sends it when it connects).
   *
   * @throws {NrtError} `NRT_RESOURCE`, naming the owning process, when a core is in use by another process.
   */
  acquireCores?(device: number, cores: readonly number[]): Promise<void>;
  /**
   * Releases NeuronCores taken with {@linkcode Portal.acquireCores} (`NEURON_IOCTL_CRWL_NC_RANGE_UNMARK`); `nrt_close`
   * calls it after the teardown. A backend also releases them when the process goes away.
   */
  releaseCores?(device: number, cores: readonly number[]): Promise<void>;
  /** Releases the backend. */
  close(): Promise<void>;
}

/**
 * Copies `into.byteLength` bytes of device memory at `offset` into `into` through `portal`: with its `memReadInto`
 * when it has one, else with `memRead` and a copy (the fallback the optional method promises). Ours.
 */
export async function portalReadInto(
  portal: Portal,
  memory: DeviceMemory,
  offset: number,
  into: Uint8Array,
): Promise<void> {
  if (portal.memReadInto !== undefined) return await portal.memReadInto(memory, offset, into);
  into.set(await portal.memRead(memory, offset, into.byteLength));
}
