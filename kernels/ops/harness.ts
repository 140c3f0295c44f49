/**
 * A test-only executor for lowered kernel calls: it runs a list of {@linkcode KernelCall}s on one shared
 * `WebAssembly.Memory` laid out as the Q7 address map (docs/kernel-abi.md: SoC slices, a control area holding the
 * argument block, the SBUF window at 0x200000), instantiating each op library on 8 cores with the ABI's `env`
 * imports and running the participating cores one after another in-process. No Workers and no simulator: this is
 * how the op library's tests and the ONNX compiler's tests check the numbers of a lowered graph.
 *
 * Ours: the per-call placement. Each call's inputs and outputs are copied into the SBUF window, 64-byte aligned,
 * with a 64-byte red zone after each that must survive the call; outputs that are not also inputs are filled with
 * 0xFF bytes first (NaN for floats), so an element a kernel forgets to write cannot pass a test by luck.
 *
 * @example Run Relu on four values
 * ```ts
 * import { OpHarness } from "./harness.ts";
 * const harness = await OpHarness.create();
 * const x = { name: "x", dtype: "float32", shape: [4] } as const;
 * const y = { name: "y", dtype: "float32", shape: [4] } as const;
 * const out = await harness.runNode(
 *   { name: "relu", domain: "", opType: "Relu", attributes: {}, inputs: [x], outputs: [y] },
 *   { x: new Float32Array([-1, 2, -3, 4]) },
 * );
 * console.log(new Float32Array(out.get("y")!.buffer)); // Float32Array [0, 2, 0, 4]
 * ```
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { readFile } from "node:fs/promises";
import { lowerNode } from "./lowering.ts";
import type { KernelCall, OpNode, OpValue } from "./op_node.ts";
import { encodeTensorDescriptor, MAX_TENSOR_RANK, TENSOR_DESC_BYTES } from "@nrt/core/isa";
import { DTYPE_CODE, ELEMENT_BYTES } from "./_lower_util.ts";

// The Q7 address map (docs/kernel-abi.md); the control-area offsets mirror the simulator's q7/_abi.ts.
const PAGE_BYTES = 0x10000;
const LOCAL_DRAM_BASE = 0x80000;
const SOC_SLICE_FIRST_INDEX = 9;
const CONTROL_BASE = 0x180000;
const SBUF_BASE = 0x200000;
const ARGS = CONTROL_BASE + 0x2000;
const ARG_INPUTS = ARGS + 0x100;
const ARG_OUTPUTS = ARG_INPUTS + 0x400;
const ARG_INTS = ARG_OUTPUTS + 0x400;
const DESC_BYTES = TENSOR_DESC_BYTES;
const MAX_TENSORS = 32;
const MAX_INTS = 64;
const MAX_RANK = MAX_TENSOR_RANK;
const Q7_CORES = 8;
const ALIGN = 64;
const RED_ZONE = 64;
const RED_ZONE_BYTE = 0xa5;

/** The SBUF of the smallest NeuronCore generation: 24 MiB. */
export const DEFAULT_SBUF_BYTES: number = 24 << 20;

/** Byte size of a value. */
export function valueBytes(value: Pick<OpValue, "dtype" | "shape">): number {
  return value.shape.reduce((a, b) => a * b, 1) * ELEMENT_BYTES[value.dtype];
}

/**
 * The descriptor dims of a shape: as is up to rank 4; a larger rank is described as rank 4 with its leading
 * dimensions folded into the first (the op kernels read shapes from their scalar arguments, not descriptors).
 */
export function descriptorDims(shape: readonly number[]): number[] {
  if (shape.length <= MAX_RANK) return [...shape];
  const lead = shape.slice(0, shape.length - MAX_RANK + 1).reduce((a, b) => a * b, 1);
  return [lead, ...shape.slice(shape.length - MAX_RANK + 1)];
}

/** Options of {@linkcode OpHarness.create}. */
export interface OpHarnessOptions {
  /** SBUF window size in bytes; default {@linkcode DEFAULT_SBUF_BYTES}. */
  readonly sbufBytes?: number;
  /** Reads a library's binary; default: `kernels/ops/wasm/<name>.wasm` beside this file. */
  readonly readLibrary?: (name: string) => Promise<Uint8Array>;
  /** Poison outputs, guard red zones and check inputs stay unchanged (default true; off for benchmarks). */
  readonly checks?: boolean;
}

/** The time one call took, per participating core (in-process, one core after another). */
export interface CallTiming {
  /** The call. */
  readonly call: KernelCall;
  /** Milliseconds each core spent in the kernel, by rank. */
  readonly coreMs: readonly number[];
}

/** Per-core ABI state: the argument cursors reset at every dispatch. */
interface CoreState {
  cpu: number;
  totalCpus: number;
  inCursor: number;
  outCursor: number;
  intCursor: number;
  committed: boolean;
}

/** One library instantiated on the 8 cores. */
interface Library {
  readonly cores: readonly WebAssembly.Instance[];
}

async function defaultReadLibrary(name: string): Promise<Uint8Array> {
  return new Uint8Array(await readFile(new URL(`./wasm/${name}.wasm`, import.meta.url)));
}

const alignUp = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

/** The executor; one per test file is plenty (it compiles each library once). */
export class OpHarness {
  /** The shared memory: the Q7 address map followed by the SBUF window. */
  readonly memory: WebAssembly.Memory;
  /** SBUF window size in bytes. */
  readonly sbufBytes: number;
  /** Timings of the calls of the last {@linkcode OpHarness.run}. */
  timings: CallTiming[] = [];
  readonly #readLibrary: (name: string) => Promise<Uint8Array>;
  readonly #checks: boolean;
  readonly #libraries = new Map<string, Promise<Library>>();
  readonly #cores: CoreState[];
  #counts = { inputs: 0, outputs: 0, ints: 0 };

  private constructor(options: OpHarnessOptions) {
    this.sbufBytes = options.sbufBytes ?? DEFAULT_SBUF_BYTES;
    if (!(this.sbufBytes > 0) || this.sbufBytes % PAGE_BYTES !== 0) {
      throw new RangeError(`Cannot create the harness: sbufBytes ${this.sbufBytes} is not a positive page multiple`);
    }
    this.#readLibrary = options.readLibrary ?? defaultReadLibrary;
    this.#checks = options.checks ?? true;
    // One page of slack past the SBUF holds the red zones of a call that fills the SBUF exactly.
    const pages = (SBUF_BASE + this.sbufBytes) / PAGE_BYTES + 1;
    this.memory = new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true });
    this.#cores = Array.from({ length: Q7_CORES }, (_, cpu) => ({
      cpu,
      totalCpus: 1,
      inCursor: 0,
      outCursor: 0,
      intCursor: 0,
      committed: false,
    }));
  }

  /** Creates a harness with its memory; libraries are compiled on first use. */
  static create(options: OpHarnessOptions = {}): Promise<OpHarness> {
    return Promise.resolve(new OpHarness(options));
  }

  /**
   * Lowers `node` with {@linkcode lowerNode} and runs the calls. `inputs` holds the bytes of the node's
   * non-constant inputs by name (typed arrays are taken as their bytes).
   *
   * @returns every value's bytes after the run, by name (node outputs included)
   */
  runNode(node: OpNode, inputs: Readonly<Record<string, ArrayBufferView>>): Promise<Map<string, Uint8Array>> {
    const values = [...node.inputs.filter((v): v is OpValue => v !== undefined), ...node.outputs];
    return this.run(lowerNode(node), values, inputs);
  }

  /**
   * Runs `calls` in order. `values` declares every value the calls name except their scratch values (constants
   * carry their bytes); `inputs` gives the bytes of the others that are read before being written.
   *
   * @returns every value's bytes after the run, by name
   */
  async run(
    calls: readonly KernelCall[],
    values: readonly OpValue[],
    inputs: Readonly<Record<string, ArrayBufferView>> = {},
  ): Promise<Map<string, Uint8Array>> {
    const declared = new Map<string, OpValue>();
    for (const v of values) declared.set(v.name, v);
    for (const call of calls) for (const v of call.scratch ?? []) declared.set(v.name, v);
    const store = new Map<string, Uint8Array>();
    for (const v of declared.values()) {
      const size = valueBytes(v);
      const given = inputs[v.name];
      const bytes = v.constant ?? (given && new Uint8Array(given.buffer, given.byteOffset, given.byteLength));
      if (bytes && bytes.byteLength !== size) {
        throw new RangeError(`Cannot run: value "${v.name}" has ${bytes.byteLength} bytes, its shape needs ${size}`);
      }
      store.set(v.name, bytes ? bytes.slice() : new Uint8Array(size));
    }
    this.timings = [];
    for (const call of calls) {
      const library = await this.#library(call.library);
      this.timings.push({ call, coreMs: this.#dispatch(call, library, declared, store) });
    }
    return store;
  }

  #library(name: string): Promise<Library> {
    let lib = this.#libraries.get(name);
    if (!lib) {
      lib = this.#instantiate(name);
      this.#libraries.set(name, lib);
    }
    return lib;
  }

  async #instantiate(name: string): Promise<Library> {
    const module = await WebAssembly.compile(await this.#readLibrary(name) as Uint8Array<ArrayBuffer>);
    const view = new DataView(this.memory.buffer);
    const cores = this.#cores.map((core) => {
      const env: Record<string, unknown> = {
        memory: this.memory,
        get_cpu_id: () => core.cpu,
        get_cpu_count: () => Q7_CORES,
        customop_total_cpus: () => core.totalCpus,
        customop_next_tensor: () => core.inCursor < this.#counts.inputs ? ARG_INPUTS + DESC_BYTES * core.inCursor++ : 0,
        customop_return_tensor: () =>
          core.outCursor < this.#counts.outputs ? ARG_OUTPUTS + DESC_BYTES * core.outCursor++ : 0,
        customop_next_int: () =>
          core.intCursor < this.#counts.ints ? view.getBigInt64(ARG_INTS + 8 * core.intCursor++, true) : 0n,
        customop_cleanup: () => {
          core.committed = true;
        },
        dram_addr_to_soc_addr: (addr: number) => {
          if ((addr & 0xffff0000) !== LOCAL_DRAM_BASE) {
            throw new RangeError(`dram_addr_to_soc_addr(0x${(addr >>> 0).toString(16)}): outside the DRAM window`);
          }
          return ((SOC_SLICE_FIRST_INDEX + 2 * core.cpu) << 16) + (addr & 0xffff);
        },
        q7_write: () => {},
      };
      return new WebAssembly.Instance(module, { env } as WebAssembly.Imports);
    });
    return { cores };
  }

  /** Places the call's values, writes the argument block, runs the cores and copies the outputs back. */
  #dispatch(call: KernelCall, library: Library, declared: Map<string, OpValue>, store: Map<string, Uint8Array>) {
    const where = `Cannot run ${call.library}.${call.fn}`;
    if (call.inputs.length > MAX_TENSORS || call.outputs.length > MAX_TENSORS || call.ints.length > MAX_INTS) {
      throw new RangeError(`${where}: more than ${MAX_TENSORS} inputs or outputs, or more than ${MAX_INTS} ints`);
    }
    const u8 = new Uint8Array(this.memory.buffer);
    const view = new DataView(this.memory.buffer);
    // Placement: each distinct value once, 64-byte aligned, followed by a red zone.
    const placed = new Map<string, number>();
    let top = SBUF_BASE;
    let used = 0;
    for (const name of [...call.inputs, ...call.outputs]) {
      if (placed.has(name)) continue;
      const value = declared.get(name);
      if (!value) throw new RangeError(`${where}: value "${name}" is not declared`);
      placed.set(name, top);
      top = alignUp(top + valueBytes(value) + RED_ZONE);
      used += alignUp(valueBytes(value));
    }
    if (used > this.sbufBytes) {
      throw new RangeError(`${where}: its values need ${used} bytes, more than the ${this.sbufBytes}-byte SBUF`);
    }
    const inputs = new Set(call.inputs);
    const checks = this.#checks;
    for (const [name, addr] of placed) {
      const bytes = store.get(name)!;
      if (inputs.has(name)) u8.set(bytes, addr);
      else if (checks) u8.fill(0xff, addr, addr + bytes.byteLength);
      if (checks) u8.fill(RED_ZONE_BYTE, addr + bytes.byteLength, addr + bytes.byteLength + RED_ZONE);
    }
    const describe = (base: number, names: readonly string[]) => {
      names.forEach((name, i) => {
        const value = declared.get(name)!;
        const d = base + DESC_BYTES * i;
        encodeTensorDescriptor(
          {
            addr: placed.get(name)!,
            bytes: valueBytes(value),
            dtype: DTYPE_CODE[value.dtype],
            dims: descriptorDims(value.shape),
          },
          view,
          d,
        );
      });
    };
    describe(ARG_INPUTS, call.inputs);
    describe(ARG_OUTPUTS, call.outputs);
    call.ints.forEach((v, i) => view.setBigInt64(ARG_INTS + 8 * i, BigInt.asIntN(64, v), true));
    view.setInt32(ARGS, call.inputs.length, true);
    view.setInt32(ARGS + 4, call.outputs.length, true);
    view.setInt32(ARGS + 8, call.ints.length, true);
    this.#counts = { inputs: call.inputs.length, outputs: call.outputs.length, ints: call.ints.length };

    const coreMs: number[] = [];
    for (let cpu = 0; cpu < call.totalCpus; cpu++) {
      const core = this.#cores[cpu];
      Object.assign(core, { totalCpus: call.totalCpus, inCursor: 0, outCursor: 0, intCursor: 0, committed: false });
      const fn = library.cores[cpu].exports[call.fn];
      if (typeof fn !== "function") throw new RangeError(`${where}: the library exports no such function`);
      const t0 = performance.now();
      try {
        fn();
      } catch (e) {
        throw new Error(`${where} on core ${cpu}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
      coreMs.push(performance.now() - t0);
      if (!core.committed) throw new Error(`${where} on core ${cpu}: the kernel returned without customop_cleanup`);
    }

    for (const [name, addr] of placed) {
      const bytes = store.get(name)!;
      for (let i = addr + bytes.byteLength; checks && i < addr + bytes.byteLength + RED_ZONE; i++) {
        if (u8[i] !== RED_ZONE_BYTE) throw new Error(`${where}: a core wrote past the end of "${name}"`);
      }
      if (inputs.has(name) && !call.outputs.includes(name)) {
        if (checks && Buffer.compare(u8.subarray(addr, addr + bytes.byteLength), bytes) !== 0) {
          throw new Error(`${where}: a core wrote into its input "${name}"`);
        }
      } else {
        store.set(name, u8.slice(addr, addr + bytes.byteLength));
      }
    }
    return coreMs;
  }
}
