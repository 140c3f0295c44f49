/**
 * `TracingPortal`: a Portal decorator that records every device effect — BAR writes (single CSR and bulk),
 * memory copies, allocations and semaphore operations — in order, then forwards to the wrapped backend. Tests use
 * it to pin the seeds' traces (one doorbell per execute, DRAM before IRAM ×8, the run-stall release, one swap-table
 * call per NeuronCore).
 *
 * Seed: ARCHITECTURE §2 layer 4 ("anything that reaches the silicon goes through one of the two write primitives,
 * so a tracing portal sees every device effect").
 *
 * @module
 */
import {
  type DeviceMemory,
  type MemAllocRequest,
  type Portal,
  type PortalDeviceInfo,
  portalReadInto,
} from "./portal.ts";

/** One recorded portal operation. */
export interface TraceEntry {
  /** Operation name (the Portal method). */
  readonly op: string;
  /** Device index. */
  readonly device: number;
  /** BAR offset, semaphore index or allocation id, depending on `op`. */
  readonly target: number;
  /** Value written (CSR), byte length (bulk/memory) or semaphore delta. */
  readonly value: number;
  /** NeuronCore, where the operation names one. */
  readonly nc?: number;
}

/** Records every operation of `inner`. */
export class TracingPortal implements Portal {
  readonly #inner: Portal;
  /** The recorded operations, oldest first. */
  readonly entries: TraceEntry[] = [];
  /** Backend name. */
  readonly name: string;

  /** Wraps `inner`. */
  constructor(inner: Portal) {
    this.#inner = inner;
    this.name = `trace(${inner.name})`;
  }

  /** Forgets what was recorded. */
  clear(): void {
    this.entries.length = 0;
  }

  devices(): Promise<PortalDeviceInfo[]> {
    return this.#inner.devices();
  }
  barRead32(device: number, bar: number, offset: number): Promise<number> {
    return this.#inner.barRead32(device, bar, offset);
  }
  barWrite32(device: number, bar: number, offset: number, value: number): Promise<void> {
    this.entries.push({ op: "barWrite32", device, target: offset, value });
    return this.#inner.barWrite32(device, bar, offset, value);
  }
  barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    this.entries.push({ op: "barWrite", device, target: offset, value: data.byteLength });
    return this.#inner.barWrite(device, bar, offset, data);
  }
  async memAlloc(request: MemAllocRequest): Promise<DeviceMemory> {
    const m = await this.#inner.memAlloc(request);
    this.entries.push({ op: "memAlloc", device: request.device, target: m.id, value: m.bytes, nc: request.nc });
    return m;
  }
  memFree(memory: DeviceMemory): Promise<void> {
    this.entries.push({ op: "memFree", device: memory.device, target: memory.id, value: memory.bytes, nc: memory.nc });
    return this.#inner.memFree(memory);
  }
  memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    this.entries.push({
      op: "memWrite",
      device: memory.device,
      target: memory.id,
      value: data.byteLength,
      nc: memory.nc,
    });
    return this.#inner.memWrite(memory, offset, data);
  }
  memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array> {
    this.entries.push({ op: "memRead", device: memory.device, target: memory.id, value: length, nc: memory.nc });
    return this.#inner.memRead(memory, offset, length);
  }
  memReadInto(memory: DeviceMemory, offset: number, into: Uint8Array): Promise<void> {
    this.entries.push({
      op: "memRead",
      device: memory.device,
      target: memory.id,
      value: into.byteLength,
      nc: memory.nc,
    });
    return portalReadInto(this.#inner, memory, offset, into);
  }
  semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    this.entries.push({ op: "semaphoreIncrement", device, target: semaphore, value, nc });
    return this.#inner.semaphoreIncrement(device, nc, semaphore, value);
  }
  semaphoreRead(device: number, nc: number, semaphore: number): Promise<number> {
    return this.#inner.semaphoreRead(device, nc, semaphore);
  }
  semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    this.entries.push({ op: "semaphoreSet", device, target: semaphore, value, nc });
    return this.#inner.semaphoreSet(device, nc, semaphore, value);
  }
  notificationWait(device: number, nc: number, head: number, signal?: AbortSignal): Promise<void> {
    return this.#inner.notificationWait(device, nc, head, signal);
  }
  memUsage(device: number): Promise<{ hbm: number; host: number; allocations: number }> {
    return this.#inner.memUsage(device);
  }
  async acquireCores(device: number, cores: readonly number[]): Promise<void> {
    this.entries.push({ op: "acquireCores", device, target: cores.length, value: cores[0] ?? -1 });
    await this.#inner.acquireCores?.(device, cores);
  }
  async releaseCores(device: number, cores: readonly number[]): Promise<void> {
    this.entries.push({ op: "releaseCores", device, target: cores.length, value: cores[0] ?? -1 });
    await this.#inner.releaseCores?.(device, cores);
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}
