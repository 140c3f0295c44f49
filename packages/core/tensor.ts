/**
 * Tensors and tensor sets (`nrt_tensor_*`, `nrt_*tensor_set*`): DEVICE tensors live in device memory allocated
 * through the portal, HOST tensors in host memory, VIRTUAL tensors have no backing until a buffer is attached.
 *
 * Seed: runtime-synthesis §2.3 (tensor-set ordinal i == var_id i == mem_ref[i]; the name is the lookup key),
 * lifecycle-error-model §5.1 (execute clones the tensor sets to device memory), §1.1 (every entry checks the runtime's
 * state first: 13 before init, 14 after close; then its arguments: `NRT_INVALID`).
 *
 * Bytes in and out (ours): `write`, `readInto` and `attachBuffer` take any `ArrayBuffer` or `ArrayBufferView` (a
 * typed array of any element type, a `DataView`, a Node `Buffer`) and move its bytes, as the C calls' `void*` does:
 * `write(new Float32Array([1.5]))` writes the four bytes of 1.5. Anything else is refused with `NRT_INVALID`.
 *
 * @module
 */
import { DmaMemUsageType, type Dmem, type DmemLedger } from "./dmem/dmem.ts";
import { NrtError } from "./error.ts";
import { NrtStatus } from "./status.ts";
import { type Portal, portalReadInto } from "./portal.ts";

/** `nrt_tensor_placement_t` (the C values, for the `nrt_*` facade). */
export const TensorPlacement = {
  NRT_TENSOR_PLACEMENT_DEVICE: 0,
  NRT_TENSOR_PLACEMENT_HOST: 1,
  NRT_TENSOR_PLACEMENT_VIRTUAL: 2,
} as const;
/** One `nrt_tensor_placement_t` value. */
export type TensorPlacement = typeof TensorPlacement[keyof typeof TensorPlacement];

/** Where a tensor's bytes live: device memory of its logical core, host memory, or a buffer the caller attaches. */
export type TensorLocation = "device" | "host" | "virtual";

/** The {@linkcode TensorLocation} of an `nrt_tensor_placement_t`, or `undefined` for a value libnrt does not define. */
export function tensorLocationOf(placement: number): TensorLocation | undefined {
  return placement === 0 ? "device" : placement === 1 ? "host" : placement === 2 ? "virtual" : undefined;
}

/** The `nrt_tensor_placement_t` of a {@linkcode TensorLocation}. */
export function tensorPlacementOf(location: TensorLocation): TensorPlacement {
  return location === "device" ? 0 : location === "host" ? 1 : 2;
}

interface Backing {
  readonly kind: "device" | "host" | "virtual";
  dmem?: Dmem;
  host?: Uint8Array;
  refs: number;
}

/** The runtime services a tensor needs. */
export interface TensorContext {
  /** The portal. */
  readonly portal: Portal;
  /** The ledger that books device tensors. */
  readonly ledger: DmemLedger;
  /** Throws 13/14 when the runtime is not initialised. */
  guard(): void;
  /** The runtime the tensors belong to (executing with another runtime's tensor is refused). */
  readonly owner?: object;
}

/**
 * A value as an error message shows it (ours): strings quoted as JSON, so the string `"8"` and the number `8` read
 * differently; objects by their kind (`null`, `an array of 3`, `a Float32Array`).
 *
 * @internal
 */
export function describeValue(v: unknown): string {
  switch (typeof v) {
    case "string":
      return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);
    case "number":
    case "boolean":
      return String(v);
    case "bigint":
      return `${v}n`;
    case "undefined":
      return "undefined";
    case "symbol":
      return v.toString();
    case "function":
      return "a function";
  }
  if (v === null) return "null";
  if (Array.isArray(v)) return `an array of ${v.length}`;
  const name = (Object.getPrototypeOf(v) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  if (typeof name !== "string" || name === "" || name === "Object") return "an object";
  return `${/^[AEIOU]/.test(name) ? "an" : "a"} ${name}`;
}

/**
 * The bytes of `data` as a `Uint8Array` over the same memory (no copy): a `Uint8Array` itself, the byte range of any
 * other `ArrayBufferView`, or a whole `ArrayBuffer` / `SharedArrayBuffer`; `undefined` for anything else (ours).
 *
 * @internal
 */
export function bytesOf(data: unknown): Uint8Array | undefined {
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  // By tag, not instanceof: a buffer made in another realm (a Worker, a vm context) is still a buffer.
  const tag = Object.prototype.toString.call(data);
  if (tag === "[object ArrayBuffer]" || tag === "[object SharedArrayBuffer]") {
    return new Uint8Array(data as ArrayBufferLike);
  }
  return undefined;
}

/** `NRT_INVALID` unless `v` is a non-negative safe integer. */
function checkCount(action: string, what: string, v: unknown): asserts v is number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new NrtError(NrtStatus.NRT_INVALID, `${action}: ${what} ${describeValue(v)} is not a non-negative integer`);
  }
}

/** Device backings not yet freed, per runtime: `nrt_close` frees what the application left (`releaseTensors`). */
const liveDeviceBackings = new WeakMap<TensorContext, Set<Backing>>();

/** Frees a tensor without the state guard (set in the class's static block; the runtime's own teardown uses it). */
let freeUnguarded: (t: Tensor) => Promise<void>;
/** A tensor's backing, and its context (set in the class's static block; executions hold backings with them). */
let backingOf: (t: Tensor) => Backing;
let contextOf: (t: Tensor) => TensorContext;

/**
 * Drops one reference of a backing; the last one gives device memory back. `undefined` when nothing is freed, so a
 * caller that drops many references awaits only the frees.
 */
function dropRef(ctx: TensorContext, b: Backing): Promise<void> | undefined {
  if (--b.refs !== 0 || b.dmem === undefined) return undefined;
  const d = b.dmem;
  b.dmem = undefined;
  liveDeviceBackings.get(ctx)?.delete(b);
  return ctx.ledger.free(d);
}

/**
 * An `nrt_tensor`. Every method checks the runtime's state first (13 before init, 14 after close), then that the
 * tensor was not freed (`NRT_INVALID_HANDLE`), then its arguments (`NRT_INVALID`).
 */
export class Tensor {
  readonly #ctx: TensorContext;
  readonly #backing: Backing;
  readonly #offset: number;
  #freed = false;
  /** Name. */
  readonly name: string;
  /** Bytes. */
  readonly size: number;
  /** Where the bytes live. */
  readonly location: TensorLocation;
  /** Physical NeuronCore whose memory holds the tensor (device tensors). */
  readonly nc: number;
  /** Device index (device tensors). */
  readonly device: number;
  /** Logical NeuronCore the tensor was allocated for. */
  readonly vnc: number;

  static {
    freeUnguarded = (t) => t.#release();
    backingOf = (t) => t.#backing;
    contextOf = (t) => t.#ctx;
  }

  /** @internal Use {@linkcode allocateTensor}. */
  constructor(
    ctx: TensorContext,
    backing: Backing,
    offset: number,
    size: number,
    location: TensorLocation,
    name: string,
    device: number,
    nc: number,
    vnc: number = 0,
  ) {
    this.#ctx = ctx;
    this.#backing = backing;
    this.#offset = offset;
    this.size = size;
    this.location = location;
    this.name = name;
    this.device = device;
    this.nc = nc;
    this.vnc = vnc;
    backing.refs++;
  }

  /** @internal The runtime that allocated the tensor (`undefined` for a context without one). */
  get owner(): object | undefined {
    return this.#ctx.owner;
  }

  /** Whether {@linkcode Tensor.free} was called on this tensor (or view). */
  get freed(): boolean {
    return this.#freed;
  }

  /** Device physical address of the first byte, or `undefined` unless the tensor is in device memory. */
  get devicePa(): number | undefined {
    return this.#backing.dmem === undefined ? undefined : this.#backing.dmem.memory.pa + this.#offset;
  }

  /** @internal The device allocation and offset, for DMA. */
  get deviceMemory(): { dmem: Dmem; offset: number } | undefined {
    return this.#backing.dmem === undefined ? undefined : { dmem: this.#backing.dmem, offset: this.#offset };
  }

  /** The state guard, then the handle: 13/14, then `NRT_INVALID_HANDLE` for a freed tensor. */
  #usable(action: string): void {
    this.#ctx.guard();
    if (this.#freed) throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `${action}: it was freed`);
  }

  /** The byte range `[offset, offset + length)` must lie in the tensor, whose bytes must exist. */
  #range(action: string, offset: unknown, length: unknown): asserts offset is number {
    checkCount(action, "offset", offset);
    checkCount(action, "length", length);
    if (offset + length > this.size) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `${action}: range [${offset}, ${offset + length}) is outside its ${this.size} bytes`,
      );
    }
    if (this.#backing.kind === "virtual" && this.#backing.host === undefined) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: a virtual tensor has no buffer attached`);
    }
  }

  /** `NRT_INVALID` unless `data` is a byte source; its bytes. */
  #bytes(action: string, what: string, data: unknown): Uint8Array {
    const bytes = bytesOf(data);
    if (bytes === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `${action}: ${what} must be an ArrayBuffer or an ArrayBufferView (such as a Uint8Array), got ${
          describeValue(data)
        }`,
      );
    }
    return bytes;
  }

  /** The messages' openings of a write and a read, made at the first of each (not per call). */
  #writeAction: string | undefined;
  #readAction: string | undefined;

  // write and read are not coroutines: a refusal is a rejected promise as an async function's would be, and a device
  // tensor's promise is the portal's own (ours: two coroutines less per write and one per read, on every request).
  /**
   * `nrt_tensor_write`: the bytes of `data` (any `ArrayBuffer` or `ArrayBufferView`: a `Float32Array` writes the
   * bytes of its floats) at `offset`.
   */
  write(data: ArrayBufferLike | ArrayBufferView, offset = 0): Promise<void> {
    try {
      const action = this.#writeAction ??= `Cannot write tensor "${this.name}"`;
      this.#usable(action);
      const bytes = this.#bytes(action, "data", data);
      this.#range(action, offset, bytes.byteLength);
      return this.#put(bytes, offset);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Writes checked bytes: the portal's promise for a device tensor; a host tensor's copy is done on return. */
  #put(bytes: Uint8Array, offset: number): Promise<void> {
    const b = this.#backing;
    if (b.dmem !== undefined) return this.#ctx.portal.memWrite(b.dmem.memory, this.#offset + offset, bytes);
    b.host!.set(bytes, this.#offset + offset);
    return Promise.resolve();
  }

  /** `nrt_tensor_read`: `length` bytes at `offset` (default: to the end), in a new buffer. */
  read(offset = 0, length?: number): Promise<Uint8Array> {
    try {
      const action = this.#readAction ??= `Cannot read tensor "${this.name}"`;
      this.#usable(action);
      checkCount(action, "offset", offset);
      const n = length === undefined ? Math.max(0, this.size - offset) : length;
      this.#range(action, offset, n);
      const b = this.#backing;
      if (b.dmem !== undefined) return this.#ctx.portal.memRead(b.dmem.memory, this.#offset + offset, n);
      return Promise.resolve(b.host!.slice(this.#offset + offset, this.#offset + offset + n));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * `nrt_tensor_read` as the C call has it: `into.byteLength` bytes at `offset` into the caller's buffer, any
   * `ArrayBuffer` or `ArrayBufferView` (a `Float32Array` receives the bytes, not converted values). Reading into a
   * buffer the caller keeps costs one copy and no allocation ({@linkcode Tensor.read} makes a new buffer per call: a
   * fresh 1 MiB costs 4–20× the copy itself, docs/architecture.md §7).
   */
  async readInto(into: ArrayBufferLike | ArrayBufferView, offset = 0): Promise<void> {
    const action = `Cannot read tensor "${this.name}"`;
    this.#usable(action);
    const bytes = this.#bytes(action, "the destination", into);
    this.#range(action, offset, bytes.byteLength);
    const b = this.#backing;
    if (b.dmem === undefined) {
      bytes.set(b.host!.subarray(this.#offset + offset, this.#offset + offset + bytes.byteLength));
      return;
    }
    await portalReadInto(this.#ctx.portal, b.dmem.memory, this.#offset + offset, bytes);
  }

  /** `nrt_tensor_memset`: `length` bytes at `offset` (default: to the end) set to `value & 0xff`. */
  async memset(value: number, offset = 0, length?: number): Promise<void> {
    const action = `Cannot memset tensor "${this.name}"`;
    this.#usable(action);
    if (typeof value !== "number" || !Number.isInteger(value)) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: value ${describeValue(value)} is not an integer`);
    }
    checkCount(action, "offset", offset);
    const n = length === undefined ? Math.max(0, this.size - offset) : length;
    this.#range(action, offset, n);
    await this.#put(new Uint8Array(n).fill(value & 0xff), offset);
  }

  /**
   * `nrt_tensor_copy`: copies `length` bytes (default: the rest of `src`) from `src` at `srcOffset` into this tensor
   * at `dstOffset`.
   */
  async copyFrom(src: Tensor, srcOffset = 0, dstOffset = 0, length?: number): Promise<void> {
    const action = `Cannot copy into tensor "${this.name}"`;
    this.#usable(action);
    if (!(src instanceof Tensor)) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: the source must be a Tensor, got ${describeValue(src)}`);
    }
    checkCount(action, "source offset", srcOffset);
    const n = length === undefined ? Math.max(0, src.size - srcOffset) : length;
    this.#range(action, dstOffset, n);
    await this.#put(await src.read(srcOffset, n), dstOffset);
  }

  /**
   * `nrt_tensor_attach_buffer`: gives a VIRTUAL tensor its host buffer — any `ArrayBuffer` or `ArrayBufferView` of at
   * least `size` bytes. The tensor then reads and writes the buffer's bytes in place (the caller keeps it alive and
   * sees every write).
   */
  attachBuffer(buffer: ArrayBufferLike | ArrayBufferView): void {
    const action = `Cannot attach a buffer to tensor "${this.name}"`;
    this.#usable(action);
    if (this.#backing.kind !== "virtual") throw new NrtError(NrtStatus.NRT_INVALID, `${action}: it is not virtual`);
    const bytes = this.#bytes(action, "the buffer", buffer);
    if (bytes.byteLength < this.size + this.#offset) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `${action}: ${bytes.byteLength} bytes is smaller than ${this.size + this.#offset}`,
      );
    }
    this.#backing.host = bytes;
  }

  /** `nrt_tensor_allocate_slice`: a view of `[offset, offset + size)` sharing this tensor's memory. */
  slice(offset: number, size: number, name?: string): Tensor {
    const action = `Cannot slice tensor "${this.name}"`;
    this.#usable(action);
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size <= 0) {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: size ${describeValue(size)} is not a positive integer`);
    }
    this.#range(action, offset, size);
    if (name !== undefined && typeof name !== "string") {
      throw new NrtError(NrtStatus.NRT_INVALID, `${action}: name ${describeValue(name)} is not a string`);
    }
    return new Tensor(
      this.#ctx,
      this.#backing,
      this.#offset + offset,
      size,
      this.location,
      name ?? `${this.name}[${offset}:${offset + size}]`,
      this.device,
      this.nc,
      this.vnc,
    );
  }

  /**
   * `nrt_tensor_free`: the memory goes back when the last view of it is freed; freeing twice does nothing. After the
   * runtime closed it is 14 (`close` already freed the memory).
   */
  async free(): Promise<void> {
    this.#ctx.guard();
    await this.#release();
  }

  async #release(): Promise<void> {
    if (this.#freed) return;
    this.#freed = true;
    await dropRef(this.#ctx, this.#backing);
  }

  /** `await using`: frees the tensor; nothing once the runtime closed (`close` freed its memory). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.#ctx.guard();
    } catch {
      return;
    }
    await this.#release();
  }
}

/**
 * @internal An execution's hold on the memory of the tensors it binds (ours): from the request's acceptance to its end,
 * a tensor freed meanwhile keeps its memory, so the device never reads or writes memory handed to another tensor.
 * The tensor itself is freed at once (its handle refuses every use with `NRT_INVALID_HANDLE`); the last hold out gives
 * the memory back. Entries may repeat (one tensor bound twice holds twice) or be `undefined`.
 */
export function holdTensors(tensors: ReadonlyArray<Tensor | undefined>): void {
  for (const t of tensors) if (t !== undefined) backingOf(t).refs++;
}

/**
 * @internal Ends the holds {@linkcode holdTensors} took on the same array. `undefined` when no memory was freed (the
 * usual case: no promise on the execute path); otherwise resolves once the memory of tensors freed meanwhile is back.
 * Every hold is dropped; the first failure to free is thrown after.
 */
export function releaseHolds(tensors: ReadonlyArray<Tensor | undefined>): Promise<void> | undefined {
  let frees: Promise<void>[] | undefined;
  for (const t of tensors) {
    if (t === undefined) continue;
    const freeing = dropRef(contextOf(t), backingOf(t));
    if (freeing !== undefined) (frees ??= []).push(freeing);
  }
  if (frees === undefined) return undefined;
  return Promise.allSettled(frees).then((results) => {
    const failed = results.find((r) => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  });
}

/** @internal Frees a tensor without the state guard: the runtime's own unload and close use it. */
export function releaseTensor(t: Tensor): Promise<void> {
  return freeUnguarded(t);
}

/**
 * @internal `nrt_close`'s last word on tensors (ours): frees the device memory of every tensor of `ctx` the
 * application did not free, whether or not the runtime owns the portal (a shared portal outlives the runtime).
 * Resolves with the count and bytes freed; the first failure is thrown after every other backing was tried.
 */
export async function releaseTensors(ctx: TensorContext): Promise<{ count: number; bytes: number }> {
  const live = liveDeviceBackings.get(ctx);
  let count = 0, bytes = 0, first: unknown;
  for (const b of [...(live ?? [])]) {
    live!.delete(b);
    const d = b.dmem;
    if (d === undefined) continue;
    b.dmem = undefined;
    count++;
    bytes += d.memory.bytes;
    await ctx.ledger.free(d).catch((e: unknown) => (first ??= e));
  }
  if (first !== undefined) throw first;
  return { count, bytes };
}

/**
 * `nrt_tensor_allocate`.
 *
 * @throws {NrtError} 13/14 by state; `NRT_INVALID` for a bad size, name or placement; `NRT_RESOURCE` when the device
 * is full; `NRT_FAIL_HOST_MEM_ALLOC` when host memory for a HOST tensor cannot be had.
 */
export async function allocateTensor(
  ctx: TensorContext,
  location: TensorLocation,
  device: number,
  nc: number,
  size: number,
  name: string,
  vnc: number = 0,
): Promise<Tensor> {
  ctx.guard();
  if (typeof name !== "string") {
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot allocate tensor: name ${describeValue(name)} is not a string`);
  }
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size <= 0) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot allocate tensor "${name}": size ${describeValue(size)} is not a positive integer`,
    );
  }
  if (location === "device") {
    const dmem = await ctx.ledger.alloc(device, nc, size, DmaMemUsageType.TENSORS);
    try {
      // A close that ran while the device allocated owns the memory now: give it back instead of leaking it.
      ctx.guard();
    } catch (e) {
      await ctx.ledger.free(dmem).catch(() => {});
      throw e;
    }
    const backing: Backing = { kind: "device", dmem, refs: 0 };
    let live = liveDeviceBackings.get(ctx);
    if (live === undefined) liveDeviceBackings.set(ctx, live = new Set());
    live.add(backing);
    return new Tensor(ctx, backing, 0, size, location, name, device, nc, vnc);
  }
  if (location === "host") {
    let host: Uint8Array;
    try {
      host = new Uint8Array(size);
    } catch (e) {
      // The engine refuses the ArrayBuffer (RangeError): libnrt's malloc failure.
      throw new NrtError(
        NrtStatus.NRT_FAIL_HOST_MEM_ALLOC,
        `Cannot allocate tensor "${name}": ${size} bytes of host memory are not available`,
        { cause: e },
      );
    }
    return new Tensor(ctx, { kind: "host", host, refs: 0 }, 0, size, location, name, device, nc, vnc);
  }
  if (location === "virtual") {
    return new Tensor(ctx, { kind: "virtual", refs: 0 }, 0, size, location, name, device, nc, vnc);
  }
  throw new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot allocate tensor "${name}": unknown placement ${describeValue(location)}`,
  );
}

/** An `nrt_tensor_set`: tensors by name. Names are non-empty strings; values are {@linkcode Tensor}s. */
export class TensorSet {
  readonly #tensors = new Map<string, Tensor>();

  /** `nrt_add_tensor_to_tensor_set` (a name already present is rebound). */
  add(name: string, tensor: Tensor): void {
    checkName("Cannot add to tensor set", name);
    if (!(tensor instanceof Tensor)) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot add to tensor set: the value for "${name}" is ${describeValue(tensor)}, not a Tensor`,
      );
    }
    this.#tensors.set(name, tensor);
  }

  /** `nrt_get_tensor_from_tensor_set`; `NRT_INVALID` when absent. */
  get(name: string): Tensor {
    const t = this.#tensors.get(name);
    if (t === undefined) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Tensor set has no tensor named ${describeValue(name)}`);
    }
    return t;
  }

  /** Whether a name is present (`NRT_INVALID` for a name that is not a string). */
  has(name: string): boolean {
    if (typeof name !== "string") checkName("Cannot look up tensor set", name);
    return this.#tensors.has(name);
  }

  /** Names in insertion order. */
  names(): string[] {
    return [...this.#tensors.keys()];
  }
}

function checkName(action: string, name: unknown): asserts name is string {
  if (typeof name !== "string" || name === "") {
    throw new NrtError(NrtStatus.NRT_INVALID, `${action}: name ${describeValue(name)} is not a non-empty string`);
  }
}
