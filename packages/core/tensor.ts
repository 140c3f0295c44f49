/**
 * Tensors and tensor sets (`nrt_tensor_*`, `nrt_*tensor_set*`): DEVICE tensors live in device memory allocated
 * through the portal, HOST tensors in host memory, VIRTUAL tensors have no backing until a buffer is attached.
 *
 * Seed: runtime-synthesis §2.3 (tensor-set ordinal i == var_id i == mem_ref[i]; the name is the lookup key),
 * lifecycle-error-model §5.1 (execute clones the tensor sets to device memory).
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

/** An `nrt_tensor`. */
export class Tensor {
  readonly #ctx: TensorContext;
  readonly #backing: Backing;
  readonly #offset: number;
  #freed = false;
  /** Name. */
  readonly name: string;
  /** Bytes. */
  readonly size: number;
  /** Placement. */
  /** Where the bytes live. */
  readonly location: TensorLocation;
  /** Physical NeuronCore whose memory holds the tensor (device tensors). */
  readonly nc: number;
  /** Device index (device tensors). */
  readonly device: number;
  /** Logical NeuronCore the tensor was allocated for. */
  readonly vnc: number;

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

  #check(offset: number, length: number): void {
    this.#ctx.guard();
    if (this.#freed) throw new NrtError(NrtStatus.NRT_INVALID_HANDLE, `Cannot use tensor "${this.name}": it was freed`);
    if (
      !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 ||
      offset + length > this.size
    ) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot access tensor "${this.name}": range [${offset}, ${offset}+${length}) is outside its ${this.size} bytes`,
      );
    }
    if (this.#backing.kind === "virtual" && this.#backing.host === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot access tensor "${this.name}": a virtual tensor has no buffer attached`,
      );
    }
  }

  /** `nrt_tensor_write`. */
  async write(data: Uint8Array, offset = 0): Promise<void> {
    this.#check(offset, data.byteLength);
    const b = this.#backing;
    if (b.dmem !== undefined) await this.#ctx.portal.memWrite(b.dmem.memory, this.#offset + offset, data);
    else b.host!.set(data, this.#offset + offset);
  }

  /** `nrt_tensor_read`. */
  async read(offset = 0, length: number = this.size - offset): Promise<Uint8Array> {
    this.#check(offset, length);
    const b = this.#backing;
    if (b.dmem !== undefined) return await this.#ctx.portal.memRead(b.dmem.memory, this.#offset + offset, length);
    return b.host!.slice(this.#offset + offset, this.#offset + offset + length);
  }

  /**
   * `nrt_tensor_read` as the C call has it: `into.byteLength` bytes at `offset` into the caller's buffer. Reading
   * into a buffer the caller keeps costs one copy and no allocation ({@linkcode Tensor.read} makes a new buffer per
   * call: a fresh 1 MiB costs 4–20× the copy itself, docs/architecture.md §7).
   */
  async readInto(into: Uint8Array, offset = 0): Promise<void> {
    this.#check(offset, into.byteLength);
    const b = this.#backing;
    if (b.dmem === undefined) {
      into.set(b.host!.subarray(this.#offset + offset, this.#offset + offset + into.byteLength));
      return;
    }
    await portalReadInto(this.#ctx.portal, b.dmem.memory, this.#offset + offset, into);
  }

  /** `nrt_tensor_memset`. */
  async memset(value: number, offset = 0, length: number = this.size - offset): Promise<void> {
    this.#check(offset, length);
    await this.write(new Uint8Array(length).fill(value & 0xff), offset);
  }

  /** `nrt_tensor_copy`: copies `length` bytes from `src` at `srcOffset` into this tensor at `dstOffset`. */
  async copyFrom(src: Tensor, srcOffset = 0, dstOffset = 0, length: number = src.size - srcOffset): Promise<void> {
    this.#check(dstOffset, length);
    await this.write(await src.read(srcOffset, length), dstOffset);
  }

  /** `nrt_tensor_attach_buffer`: gives a VIRTUAL tensor its host buffer (it must be at least `size` bytes). */
  attachBuffer(buffer: Uint8Array): void {
    if (this.#backing.kind !== "virtual") {
      throw new NrtError(NrtStatus.NRT_INVALID, `Cannot attach a buffer to tensor "${this.name}": it is not virtual`);
    }
    if (buffer.byteLength < this.size + this.#offset) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot attach a buffer to tensor "${this.name}": ${buffer.byteLength} bytes is smaller than ${this.size}`,
      );
    }
    this.#backing.host = buffer;
  }

  /** `nrt_tensor_allocate_slice`: a view of `[offset, offset + size)` sharing this tensor's memory. */
  slice(offset: number, size: number, name = `${this.name}[${offset}:${offset + size}]`): Tensor {
    this.#check(offset, 0);
    if (!Number.isSafeInteger(size) || size <= 0 || offset + size > this.size) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot slice tensor "${this.name}": [${offset}, ${offset + size}) is outside its ${this.size} bytes`,
      );
    }
    return new Tensor(
      this.#ctx,
      this.#backing,
      this.#offset + offset,
      size,
      this.location,
      name,
      this.device,
      this.nc,
      this.vnc,
    );
  }

  /** `nrt_tensor_free`: the memory goes back when the last view of it is freed. */
  async free(): Promise<void> {
    if (this.#freed) return;
    this.#freed = true;
    const b = this.#backing;
    if (--b.refs === 0 && b.dmem !== undefined) {
      const d = b.dmem;
      b.dmem = undefined;
      await this.#ctx.ledger.free(d);
    }
  }

  /** `using`-style disposal. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.free();
  }
}

/**
 * `nrt_tensor_allocate`.
 *
 * @throws {NrtError} `NRT_INVALID` for a bad size or placement, `NRT_RESOURCE` when the device is full,
 * `NRT_FAIL_HOST_MEM_ALLOC` when host memory for a HOST tensor cannot be had.
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
  if (!Number.isSafeInteger(size) || size <= 0) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot allocate tensor "${name}": size ${size} is not a positive integer`,
    );
  }
  if (location === "device") {
    const dmem = await ctx.ledger.alloc(device, nc, size, DmaMemUsageType.TENSORS);
    return new Tensor(ctx, { kind: "device", dmem, refs: 0 }, 0, size, location, name, device, nc, vnc);
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
    `Cannot allocate tensor "${name}": unknown placement ${JSON.stringify(location)}`,
  );
}

/** An `nrt_tensor_set`: tensors by name. */
export class TensorSet {
  readonly #tensors = new Map<string, Tensor>();

  /** `nrt_add_tensor_to_tensor_set`. */
  add(name: string, tensor: Tensor): void {
    this.#tensors.set(name, tensor);
  }

  /** `nrt_get_tensor_from_tensor_set`; `NRT_INVALID` when absent. */
  get(name: string): Tensor {
    const t = this.#tensors.get(name);
    if (t === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Tensor set has no tensor named "${name}"`);
    return t;
  }

  /** Whether a name is present. */
  has(name: string): boolean {
    return this.#tensors.has(name);
  }

  /** Names in insertion order. */
  names(): string[] {
    return [...this.#tensors.keys()];
  }
}
