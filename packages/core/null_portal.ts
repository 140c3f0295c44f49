/**
 * `NullPortal`: a `Portal` with no device behind it — one device of a given generation whose BAR0 registers,
 * semaphores and memory are plain storage. Writes land, reads return what was written (or zero), nothing executes:
 * a notification wait only ends by its abort signal. For unit tests of code that talks to a portal (a HAL, a
 * decorator) without a simulator. Ours.
 *
 * @module
 */
import { NrtError } from "./error.ts";
import type { DeviceMemory, MemAllocRequest, Portal, PortalDeviceInfo } from "./portal.ts";
import type { SiliconSpec } from "./silicon_spec.ts";
import { NrtStatus } from "./status.ts";

/**
 * A portal that stores and returns, and does nothing else.
 *
 * @example A HAL's register writes, read back
 * ```ts ignore
 * import { NullPortal } from "@nrt/core/testing";
 * const portal = new NullPortal(spec);
 * await portal.barWrite32(0, 0, 0x3000, 0xff);
 * console.log(await portal.barRead32(0, 0, 0x3000)); // 255
 * ```
 */
export class NullPortal implements Portal {
  readonly name: string = "null";
  readonly #spec: SiliconSpec;
  readonly #hbmBytes: number;
  readonly #bar = new Map<number, number>();
  readonly #sems = new Map<string, number>();
  readonly #mem = new Map<number, { m: DeviceMemory; bytes: Uint8Array }>();
  #nextId = 1;
  #nextPa = 0x1_0000_0000;
  #closed = false;

  /** One device of `spec`'s generation with `hbmBytes` of memory (default 1 GiB). */
  constructor(spec: SiliconSpec, hbmBytes: number = 1 << 30) {
    this.#spec = spec;
    this.#hbmBytes = hbmBytes;
  }

  #open(what: string): void {
    if (this.#closed) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: the null portal is closed`);
  }

  devices(): Promise<PortalDeviceInfo[]> {
    this.#open("enumerate devices");
    return Promise.resolve([{
      index: 0,
      arch: this.#spec.arch,
      ncCount: this.#spec.ncPerDevice,
      hbmBytes: this.#hbmBytes,
    }]);
  }

  barRead32(_device: number, _bar: number, offset: number): Promise<number> {
    this.#open("read BAR0");
    return Promise.resolve(this.#bar.get(offset) ?? 0);
  }

  barWrite32(_device: number, _bar: number, offset: number, value: number): Promise<void> {
    this.#open("write BAR0");
    this.#bar.set(offset, value >>> 0);
    return Promise.resolve();
  }

  barWrite(_device: number, _bar: number, offset: number, data: Uint8Array): Promise<void> {
    this.#open("write BAR0");
    const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
    for (let i = 0; i + 4 <= data.byteLength; i += 4) this.#bar.set(offset + i, v.getUint32(i, true));
    return Promise.resolve();
  }

  memAlloc(r: MemAllocRequest): Promise<DeviceMemory> {
    this.#open("allocate");
    if (!Number.isSafeInteger(r.bytes) || r.bytes <= 0) {
      return Promise.reject(new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate ${r.bytes} bytes`));
    }
    const m: DeviceMemory = {
      id: this.#nextId++,
      device: r.device,
      nc: r.nc,
      pa: this.#nextPa,
      bytes: r.bytes,
      location: r.location ?? "hbm",
    };
    this.#nextPa += Math.ceil(r.bytes / 4096) * 4096;
    this.#mem.set(m.id, { m, bytes: new Uint8Array(r.bytes) });
    return Promise.resolve(m);
  }

  memFree(memory: DeviceMemory): Promise<void> {
    this.#open("free");
    if (!this.#mem.delete(memory.id)) {
      return Promise.reject(new NrtError(NrtStatus.NRT_INVALID, `Cannot free allocation ${memory.id}: it is not live`));
    }
    return Promise.resolve();
  }

  #live(memory: DeviceMemory, offset: number, length: number): Uint8Array {
    const a = this.#mem.get(memory.id);
    if (a === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Allocation ${memory.id} is not live`);
    if (offset < 0 || offset + length > a.bytes.byteLength) {
      throw new NrtError(NrtStatus.NRT_INVALID, `[${offset}, +${length}) is outside allocation ${memory.id}`);
    }
    return a.bytes;
  }

  memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    try {
      this.#live(memory, offset, data.byteLength).set(data, offset);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array> {
    try {
      return Promise.resolve(this.#live(memory, offset, length).slice(offset, offset + length));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  memReadInto(memory: DeviceMemory, offset: number, into: Uint8Array): Promise<void> {
    try {
      into.set(this.#live(memory, offset, into.byteLength).subarray(offset, offset + into.byteLength));
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    const k = `${device}:${nc}:${semaphore}`;
    this.#sems.set(k, ((this.#sems.get(k) ?? 0) + value) >>> 0);
    return Promise.resolve();
  }

  semaphoreRead(device: number, nc: number, semaphore: number): Promise<number> {
    return Promise.resolve(this.#sems.get(`${device}:${nc}:${semaphore}`) ?? 0);
  }

  semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    this.#sems.set(`${device}:${nc}:${semaphore}`, value >>> 0);
    return Promise.resolve();
  }

  /** Nothing ever completes: the wait ends only when `signal` aborts (or at once without one). */
  notificationWait(_device: number, _nc: number, _head: number, signal?: AbortSignal): Promise<void> {
    if (signal === undefined || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  }

  memUsage(_device: number): Promise<{ hbm: number; host: number; allocations: number }> {
    let hbm = 0, host = 0;
    for (const { m } of this.#mem.values()) m.location === "host" ? (host += m.bytes) : (hbm += m.bytes);
    return Promise.resolve({ hbm, host, allocations: this.#mem.size });
  }

  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }
}
