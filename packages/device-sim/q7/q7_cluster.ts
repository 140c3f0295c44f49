/**
 * The 8 Q7 (GPSIMD) cores of one simulated NeuronCore: one WebAssembly image run SPMD over one shared memory, the
 * Q7 view of the NeuronCore (docs/kernel-abi.md has the address map and the kernel ABI).
 *
 * The 8 simulated cores are multiplexed onto W Workers, W = {@linkcode Q7ClusterOptions.workers} (1 to 8; default
 * {@linkcode defaultQ7Workers}: `NRT_SIM_Q7_WORKERS` if set, else min(8, `navigator.hardwareConcurrency`)). Worker
 * k runs cores k, k + W, … one after the other, each with its own instance of every image (its own globals), and
 * `get_cpu_id()` / `get_cpu_count()` still answer the simulated core 0..7 and 8, so a kernel sees the same SPMD
 * partition, and faults, stdio and status records are still per core, whatever W is. Ours: the cores have no
 * barrier between them (the only join is the host's DRAIN), so running several in turn on one thread is a legal
 * schedule; with more Workers than CPUs every op paid for waking and switching between 8 threads (on 2 CPUs a
 * no-op execute cost 2–3× waking 8 bare Workers, and 8 cores ran a 1 MiB vector_add no faster than 1).
 *
 * A dispatch never posts a message: the host writes the argument block and the mailbox into the control area,
 * rings the participating Workers' doorbell words (`Atomics.notify`) and awaits the last core's report with
 * `Atomics.waitAsync` — the simulated EXTENDED_INST 0xF0 hand-off and DRAIN join (seed: spmd-teardown §4.3).
 *
 * Ours: the prepared libraries are bounded, {@linkcode Q7ClusterOptions.maxLibraries} per cluster (default
 * {@linkcode DEFAULT_Q7_MAX_LIBRARIES}, the firmware's slot 0 not counted), least recently used out first. A dispatch
 * or a {@linkcode Q7Cluster.touch} (a prepare of a key already prepared too) marks a library used; preparing a new one
 * at the cap first drops the least recently used one from every Worker (its instances and cached exports) and frees
 * its slot for reuse, so a server whose clients load ever new libraries keeps its Workers' memory bounded. The library
 * of the dispatch in flight is never the one evicted (a prepare cannot even start while a dispatch is on the cores:
 * the cluster is busy). Whoever keeps its own record of prepared keys learns the evicted ones from
 * {@linkcode Q7Cluster.prepare}'s result, and prepares them again on their next use.
 *
 * @example Run a kernel on all 8 cores
 * ```ts ignore
 * const cluster = await Q7Cluster.create({ sbufBytes: 28 << 20 });
 * await cluster.boot({ iram: stockPoolWasm, dram: new Uint8Array(4) });
 * await cluster.prepare("relu", reluWasm);
 * const result = await cluster.dispatch({
 *   key: "relu", fn: "relu", totalCpus: 8,
 *   args: { inputs: [{ addr: SBUF_BASE, bytes: 4096, dtype: Dtype.float32, dims: [1024] }],
 *           outputs: [{ addr: SBUF_BASE + 4096, bytes: 4096, dtype: Dtype.float32, dims: [1024] }] },
 * });
 * cluster.terminate();
 * ```
 *
 * @module
 */
import { encodeTensorDescriptor } from "@nrt/core/isa";
import { createQ7Cores, type Q7Cores } from "./q7_cores.js";
import {
  ARG_INPUTS,
  ARG_INTS,
  ARG_OUTPUTS,
  ARGS,
  CMD_EXIT,
  CMD_LOCAL,
  CMD_RUN,
  CMD_YIELD,
  CORE_STATUS,
  CORE_STATUS_BYTES,
  CS,
  DESC_BYTES,
  doorbellWord,
  Dtype,
  FN_NAME,
  FN_NAME_MAX,
  IMAGE_BASE,
  IMAGE_BYTES,
  KILL_FLAG_ADDR,
  MAILBOX,
  MAX_INTS,
  MAX_RANK,
  MAX_TENSORS,
  MB_CMD,
  MB_COMPLETE,
  MB_DONE,
  MB_FN,
  MB_FN_NAME_LEN,
  MB_KILL,
  MB_LIB,
  MB_POSTED,
  MB_SEQ,
  MB_STDIO_READ,
  MB_STDIO_WRITE,
  MB_TOTAL_CPUS,
  MB_USERS,
  PAGE_BYTES,
  Q7_CORES,
  SBUF_BASE,
  Status,
  STATUS_NAMES,
  STDIO_ENTRIES,
  STDIO_ENTRY_BYTES,
  STDIO_HEADER,
  STDIO_HEADER_BYTES,
  STDIO_RING,
  WORKER_LAYOUT,
} from "./_abi.ts";
import { guardLoops } from "./_loop_guard.ts";
import { type SpawnedWorker, spawnHere, type WorkerSpawner } from "../worker_spawn.ts";

/** A tensor as a kernel sees it through `customop_next_tensor` / `customop_return_tensor`. */
export interface TensorDesc {
  /** Q7 address of the data, inside the SBUF window. */
  addr: number;
  /** Byte size. */
  bytes: number;
  /** Dtype code ({@linkcode Dtype}). */
  dtype: number;
  /** Up to 4 dimensions; the rank is their count. */
  dims: readonly number[];
}

/** The arguments of one op, in the order the kernel consumes them. */
export interface ArgBlock {
  /** Input tensors (at most 32). */
  inputs: readonly TensorDesc[];
  /** Output tensors (at most 32). */
  outputs: readonly TensorDesc[];
  /** Scalar arguments for `customop_next_int` (at most 64). */
  ints?: readonly bigint[];
}

/** One op for {@linkcode Q7Cluster.dispatch}. */
export interface DispatchOp {
  /** The library key given to {@linkcode Q7Cluster.prepare}, or `""` for the firmware. */
  key: string;
  /** The exported kernel function, `(): void`. */
  fn: string;
  /** The op's fan-out (seed: spmd-teardown §1.1): 1 runs core 0 only, 8 runs all cores. */
  totalCpus: 1 | 8;
  /** The argument block. */
  args: ArgBlock;
  /**
   * When the op must be stopped, in ms of the device clock the cluster's {@linkcode Q7ClusterOptions.watchdog} reads
   * (ours). Only an op with a deadline may run on the calling thread; absent, it runs on the Workers.
   */
  deadlineMs?: number;
}

/** How one core's part of an op ended. */
export type CoreStatus = "ok" | "trap" | "oob" | "abort" | "missing-function";

/** One core's report. */
export interface CoreResult {
  /** The core (PRID). */
  cpu: number;
  /** Whether the core took part (cpu < totalCpus); a core that did not reports status "ok". */
  ran: boolean;
  /** How the kernel ended: "trap" (wasm trap), "oob" (out-of-bounds access or DRAM-window fault), "abort". */
  status: CoreStatus;
  /** The error text for a status other than "ok". */
  message?: string;
  /** Whether the kernel reached `customop_cleanup` (its commit fence, seed: spmd-teardown §4.2). */
  committed: boolean;
  /** Time the core spent in the kernel. */
  elapsedNs?: number;
  /** When the core entered the kernel, ms of the clock every thread shares (`performance.timeOrigin + now()`). */
  startMs?: number;
}

/** The reports of all 8 cores, indexed by cpu. */
export interface DispatchResult {
  /** One report per core. */
  cores: CoreResult[];
}

/** One q7_write chunk drained from the stdio ring. */
export interface StdioEntry {
  /** The writing core. */
  cpu: number;
  /** 1 = stdout, 2 = stderr. */
  stream: number;
  /** The text (UTF-8 sequences split across entries are joined). */
  text: string;
}

/** What the firmware image says about itself, from its optional exports. */
export interface FirmwareInfo {
  /** `ucode_api_level()`, if exported. */
  apiLevel?: number;
  /** `ucode_arch()` as u32, if exported. */
  arch?: number;
}

/** Options for {@linkcode Q7Cluster.create}. */
export interface Q7ClusterOptions {
  /** Size of the SBUF window at 0x200000: a positive multiple of 64 KiB (28 MiB on Cayman). */
  sbufBytes: number;
  /** Number of cores: always 8 (seed: spmd-teardown §1). */
  cores?: 8;
  /**
   * Workers the 8 cores run on, an integer from 1 to 8 (default {@linkcode defaultQ7Workers}). Worker k runs cores
   * k, k + workers, …; what the kernels and the host observe does not depend on it.
   */
  workers?: number;
  /**
   * Custom-op libraries kept prepared at once, an integer ≥ 1 (default {@linkcode DEFAULT_Q7_MAX_LIBRARIES}; ours):
   * preparing one more evicts the least recently used. The firmware is not counted.
   */
  maxLibraries?: number;
  /**
   * Ops whose tensors (inputs and outputs together) hold at most this many bytes, and that have a deadline ({@linkcode
   * DispatchOp.deadlineMs}), run on the calling thread, on its own instances of the 8 cores, instead of waking the
   * Workers (default 0: every op runs on the Workers; ours), once an op of the same function, tensor bytes and fan-out
   * has returned ok within {@linkcode localLearnNs} of kernel time. Such a dispatch only writes the mailbox; the op
   * runs at the caller's next {@linkcode Q7Cluster.runPending}. Waking the Workers and being woken back costs more than
   * a short kernel: the device agent runs short ops itself and keeps the Workers for the ones that gain from running in
   * parallel. A kernel that spins on the calling thread can only be stopped by another thread setting the kill flag
   * ({@linkcode Q7Cluster.killFlag}), so only a thread that has such a watchdog should set it.
   */
  localOpBytes?: number;
  /**
   * The watchdog that can stop an op running on the calling thread (required for {@linkcode
   * Q7ClusterOptions.localOpBytes} to take effect: without one every op runs on the Workers).
   */
  watchdog?: Q7LocalWatchdog;
  /**
   * Where the cluster records the ops (library function, tensor bytes, fan-out) it has seen return quickly (ours): give
   * the clusters of one owner the same set, and an op learned quick in one runs on the calling thread in the next from
   * its first dispatch. It keeps at most {@linkcode MAX_QUICK_OPS} entries, dropping the oldest.
   */
  quick?: Set<string>;
  /**
   * How the cluster starts its Workers (default: on the calling thread). A device agent in a Worker gives one that asks
   * the host to start them (worker_spawn.ts, ours).
   */
  spawn?: WorkerSpawner;
  /**
   * Where the clusters of one NeuronCore, one after the other, keep their memory (ours): a cluster takes over the
   * memory of the one before once that one is terminated and all its threads have left it. Everything below the SBUF
   * window is zeroed as in a new memory; the SBUF keeps what it held, as hardware keeps its SBUF across a Q7 reset.
   */
  memorySlot?: Q7MemorySlot;
}

/**
 * The memory the clusters of one NeuronCore hand on from one to the next (ours; {@linkcode Q7ClusterOptions.memorySlot}).
 * Hardware keeps its SBUF across a Q7 reset; the simulator booted every cluster on a new 28 MiB `WebAssembly.Memory`,
 * and a shared one is freed only when every thread that received it collects its last reference. V8 does not count
 * such memory towards its collections: 200 hung-kernel recoveries on Deno swung the RSS up to 1.07 GB (2.4 GB after
 * 600), and a bare probe that only creates, hands to 2 Workers and drops such a memory 150 times reached 1.3 GB.
 */
export interface Q7MemorySlot {
  /** The memory of the NeuronCore's last cluster, set by {@linkcode Q7Cluster.create}. */
  memory?: WebAssembly.Memory;
}

/**
 * How long {@linkcode Q7Cluster.create} waits for the threads of the slot's previous cluster to leave its memory before
 * it takes a new one (ours). Measured on a hang's recovery: they had left, or left within 1–11 ms (the Workers at the
 * terminate's ring, the watchdog at its next message). A thread stopped from outside before it counted itself out
 * keeps the count up for good, so a new memory is taken then.
 */
const REUSE_WAIT_MS = 50;

/**
 * How long a terminated cluster leaves its Workers to leave by themselves before it stops them (ours): a Worker stopped
 * from outside first never counts itself out of the memory's users (Bun stopped them within the ring's microseconds,
 * and the next cluster never got the memory).
 */
const EXIT_GRACE_MS = 1000;

/**
 * Stops the `Worker` objects of the terminated cluster whose threads are still leaving a memory (ours): at most one per
 * memory, as the next cluster takes the memory only once they all left. Called by {@linkcode takeMemory} when it takes
 * the memory, else once the terminated cluster sees the count at 0 (or after its grace).
 */
const leaving = new WeakMap<WebAssembly.Memory, () => void>();

/**
 * Resolves when Int32 word `word` of `i32` reads 0 or `done()` holds (checked at every wake), or after `ms`; whether
 * either happened.
 */
async function waitForZero(i32: Int32Array, word: number, ms: number, done = () => false): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (let v = Atomics.load(i32, word); v !== 0 && !done(); v = Atomics.load(i32, word)) {
    const left = deadline - performance.now();
    if (left <= 0) return false;
    const wait = Atomics.waitAsync(i32, word, v, left);
    if (wait.async) await wait.value;
  }
  return true;
}

/**
 * Takes the memory of `slot` for a cluster of `users` threads when it has `bytes` and its previous cluster's threads
 * have left it (waiting up to {@linkcode REUSE_WAIT_MS}): zeroes what lies below the SBUF window and counts the users
 * in, in one synchronous step.
 */
async function takeMemory(
  slot: Q7MemorySlot | undefined,
  bytes: number,
  users: number,
): Promise<WebAssembly.Memory | undefined> {
  const memory = slot?.memory;
  if (memory === undefined || memory.buffer.byteLength !== bytes) return undefined;
  const i32 = new Int32Array(memory.buffer, MAILBOX, MB_USERS + 1);
  const left = await waitForZero(i32, MB_USERS, REUSE_WAIT_MS);
  // Another cluster may have taken it meanwhile (the count is then up again, or the slot holds another memory).
  if (!left || slot!.memory !== memory || Atomics.load(i32, MB_USERS) !== 0) return undefined;
  // The previous cluster's Workers have all left: their Worker objects are stopped now. Its own wait for the count to
  // read 0 may not have run yet, and once the users are counted in again it would only end at its grace.
  leaving.get(memory)?.();
  new Uint8Array(memory.buffer, 0, SBUF_BASE).fill(0);
  Atomics.store(i32, MB_USERS, users);
  return memory;
}

/**
 * Another thread that stops an op the cluster runs on the calling thread (ours; the device agent's is
 * `local_watchdog.ts`): it sets the cluster's kill flag when the op's deadline passes.
 */
export interface Q7LocalWatchdog {
  /**
   * Watches a cluster's memory, whose kill flag is Int32 word `killWord`; returns the cluster's id. The cluster counts
   * the watchdog among the memory's users (Int32 word `usersWord`, `MB_USERS`): the watchdog subtracts 1 from it once it
   * has forgotten the cluster (ours).
   */
  adopt(memory: WebAssembly.Memory, killWord: number, usersWord: number): number;
  /** Whether the watchdog can stop cluster `id`'s ops yet (it has taken the memory). */
  ready(id: number): boolean;
  /** Stops watching cluster `id`, then counts itself out of its memory's users. */
  forget(id: number): void;
  /** An op of cluster `id` starts on the calling thread, to be stopped at `deadlineMs`; returns its generation. */
  arm(id: number, deadlineMs: number): number;
  /**
   * The op `gen` ended; returns `undefined` if it ended by itself, `"deadline"` if the watchdog stopped it at its
   * deadline, `"stopped"` if it stopped it for another reason (a reset or close the cluster's owner will act on).
   */
  disarm(gen: number): "deadline" | "stopped" | undefined;
}

/**
 * The default {@linkcode Q7ClusterOptions.maxLibraries} (ours): 32 libraries per NeuronCore besides the firmware —
 * a NEFF brings a few (the base ext-ISA library and its custom-op libraries), so a cluster holds the libraries of many
 * models at once, while a client that loads ever new ones cannot grow the Workers' memory without bound.
 */
export const DEFAULT_Q7_MAX_LIBRARIES = 32;

/** The environment variable that sets the default {@linkcode Q7ClusterOptions.workers}: an integer from 1 to 8. */
export const Q7_WORKERS_ENV = "NRT_SIM_Q7_WORKERS";

/**
 * The default number of Workers of a Q7 cluster: {@linkcode Q7_WORKERS_ENV} if it is set (a value that is not an
 * integer from 1 to 8 throws), else min(8, `navigator.hardwareConcurrency`), 8 where that is unknown. Ours: the
 * simulator reads this one variable itself because clusters are created inside the device agent, far from any
 * composition root; under Deno it reads it only with env permission and never prompts.
 *
 * @param env the environment to read (default: the process environment)
 * @returns the number of Workers
 */
export function defaultQ7Workers(env?: Record<string, string | undefined>): number {
  const text = env !== undefined ? env[Q7_WORKERS_ENV] : processEnv(Q7_WORKERS_ENV);
  if (text !== undefined && text !== "") {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1 || n > Q7_CORES) {
      throw new RangeError(`${Q7_WORKERS_ENV} is "${text}", expected an integer from 1 to ${Q7_CORES}`);
    }
    return n;
  }
  return Math.min(Q7_CORES, hostCpus());
}

/** The host's CPUs as the platform reports them (`navigator.hardwareConcurrency`), 8 where that is unknown. */
function hostCpus(): number {
  const cpus = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  return typeof cpus === "number" && cpus >= 1 ? Math.floor(cpus) : Q7_CORES;
}

/**
 * The environment variable that sets the default {@linkcode Q7ClusterOptions.localOpBytes} of the device agent's
 * clusters (ours): an integer ≥ 0, 0 runs every op on the Workers.
 */
export const Q7_LOCAL_OP_BYTES_ENV = "NRT_SIM_LOCAL_OP_BYTES";

/**
 * The default {@linkcode Q7ClusterOptions.localOpBytes} of the device agent's clusters (ours): no bound. Where an op
 * runs is decided by its kernel time ({@linkcode localLearnNs}), not by its bytes: a 1 MiB vector_add (3 MiB of
 * tensors, about 0.2 ms of kernel time) ran in 281–299 µs on the agent's thread against 364–474 µs on 2 Workers
 * (Bun; Deno 452–487 against 545–623), while the layers of a convolution network that take a millisecond gain from the
 * Workers (docs/architecture.md §5). It was 64 KiB.
 */
export const DEFAULT_LOCAL_OP_BYTES = Number.MAX_SAFE_INTEGER;

/**
 * The device agent's {@linkcode Q7ClusterOptions.localOpBytes}: {@linkcode Q7_LOCAL_OP_BYTES_ENV} if it is set (a
 * value that is not an integer ≥ 0 throws), else {@linkcode DEFAULT_LOCAL_OP_BYTES}.
 *
 * @param env the environment to read (default: the process environment)
 * @returns the byte threshold
 */
export function defaultLocalOpBytes(env?: Record<string, string | undefined>): number {
  const text = env !== undefined ? env[Q7_LOCAL_OP_BYTES_ENV] : processEnv(Q7_LOCAL_OP_BYTES_ENV);
  if (text === undefined || text === "") return DEFAULT_LOCAL_OP_BYTES;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new RangeError(`${Q7_LOCAL_OP_BYTES_ENV} is "${text}", expected an integer ≥ 0`);
  }
  return n;
}

/** One variable of the process environment, or undefined where it cannot be read (never prompts under Deno). */
function processEnv(name: string): string | undefined {
  const g = globalThis as {
    Deno?: {
      env: { get(name: string): string | undefined };
      permissions?: { querySync?(d: { name: "env"; variable: string }): { state: string } };
    };
    process?: { env?: Record<string, string | undefined> };
  };
  try {
    if (g.Deno !== undefined) {
      const state = g.Deno.permissions?.querySync?.({ name: "env", variable: name }).state;
      return state === "granted" ? g.Deno.env.get(name) : undefined;
    }
    return g.process?.env?.[name];
  } catch {
    return undefined;
  }
}

interface Reply {
  type: string;
  slot?: number;
  error?: string;
  info?: FirmwareInfo;
}

interface FnEntry {
  id: number;
  name: Uint8Array;
  /** The function's name in the quick set: `key\0fn` (`\0fn` for the firmware's). */
  learn: string;
  /**
   * The names its ops are learned quick under, by {@linkcode opShape}: `key\0fn\0bytes/totalCpus`, built once per shape
   * (not per dispatch).
   */
  shapes: Map<number, string>;
}

/** The 8 Q7 cores of one NeuronCore, multiplexed onto Workers over one shared memory. */
export class Q7Cluster {
  /** The Q7 view of the NeuronCore's memory; SBUF data lives at [0x200000, 0x200000 + sbufBytes). */
  readonly memory: WebAssembly.Memory;
  /** Size of the SBUF window. */
  readonly sbufBytes: number;
  /** The number of Workers the 8 cores run on (Worker k runs cores k, k + workers, …). */
  readonly workers: number;
  /** The most custom-op libraries kept prepared at once ({@linkcode Q7ClusterOptions.maxLibraries}). */
  readonly maxLibraries: number;

  #workers: SpawnedWorker[];
  #replies: Array<Array<{ resolve(r: Reply): void; reject(e: Error): void }>>;
  #i32: Int32Array; // mailbox words
  #u8: Uint8Array;
  #view: DataView;
  /** Prepared libraries → slot. */
  #slots = new Map<string, number>();
  /**
   * Prepared libraries → the use clock's value at their last use (ours). A use overwrites the key's value in place:
   * moving the key to the map's end (a delete and a set per dispatch) made JavaScriptCore rebuild the map's storage
   * every few dispatches, and each dropped storage points to the next, so an eden collection kept every one of them
   * (the device agent's heap grew by about 300 bytes per execute until a full collection).
   */
  #used = new Map<string, number>();
  #useClock = 0;
  /** Slots of evicted libraries, reused before a new slot number is taken (slots stay within 1..maxLibraries). */
  #freeSlots: number[] = [];
  /** The library key of the dispatch on the cores, never evicted. */
  #inFlight: string | undefined;
  #booted = false;
  /** Function entries by slot, then name (no key string built per dispatch). */
  #fns = new Map<number, Map<string, FnEntry>>();
  #nextFnId = 1;
  #seq = 0;
  #busy = false;
  #terminated = false;
  #stdioRead = 0;
  #stdioDropped = 0;
  #decoders = new Map<number, TextDecoder>();
  #failure: Error | undefined;
  /** All 8 cores on this thread, for ops of at most `localOpBytes` bytes (undefined when it is 0). */
  #local: Q7Cores | undefined;
  readonly #localOpBytes: number;
  /** Kernel time under which an op is learned quick ({@linkcode localLearnNs}, ns): on one core, on all 8. */
  readonly #learnNs: readonly [one: number, all: number];
  #watchdog: { readonly dog: Q7LocalWatchdog; readonly id: number } | undefined;
  #watchdogFired = false;
  /**
   * Library ops (`key\0fn\0bytes/totalCpus`) whose last run returned ok in little time: they may run on the calling
   * thread. Shared with the other clusters of the same owner when {@linkcode Q7ClusterOptions.quick} is given (library
   * keys name the content, so an op learned quick stays quick in the next cluster).
   */
  readonly #quick: Set<string>;
  /** The same for the firmware's ops (`\0fn\0…`), which belong to this cluster's boot only. */
  readonly #quickFirmware = new Set<string>();
  /** The op handed to this thread's cores, run by {@linkcode Q7Cluster.runPending}. */
  #pending: PendingLocalOp | undefined;
  /** The join of the op {@linkcode Q7Cluster.runPending} last ran to its end, until taken. */
  #localJoin: DispatchResult | undefined;

  private constructor(
    memory: WebAssembly.Memory,
    sbufBytes: number,
    workers: number,
    maxLibraries: number,
    localOpBytes: number,
    quick: Set<string> | undefined,
    spawn: WorkerSpawner,
  ) {
    this.#quick = quick ?? new Set();
    this.memory = memory;
    this.sbufBytes = sbufBytes;
    this.workers = workers;
    this.maxLibraries = maxLibraries;
    this.#localOpBytes = localOpBytes;
    this.#learnNs = [localLearnNs(workers, undefined, 1), localLearnNs(workers, undefined, Q7_CORES)];
    if (localOpBytes > 0) {
      this.#local = createQ7Cores({
        layout: WORKER_LAYOUT,
        memory,
        cores: Array.from({ length: Q7_CORES }, (_, c) => c),
      });
    }
    const buffer = memory.buffer;
    this.#i32 = new Int32Array(buffer, MAILBOX, (buffer.byteLength - MAILBOX) >> 2);
    this.#u8 = new Uint8Array(buffer);
    this.#view = new DataView(buffer);
    this.#replies = Array.from({ length: workers }, () => []);
    this.#workers = Array.from({ length: workers }, (_, w) => {
      const worker = spawn("q7-cores");
      worker.onmessage = (e: MessageEvent<Reply>) => this.#replies[w].shift()?.resolve(e.data);
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        const cores = this.#cores(w);
        this.#failure = new Error(`Q7 core${cores.length > 1 ? "s" : ""} ${cores.join(", ")} failed: ${e.message}`);
        for (const pending of this.#replies[w].splice(0)) pending.reject(this.#failure);
      };
      return worker;
    });
  }

  /** The cores Worker `w` runs: w, w + workers, … */
  #cores(w: number): number[] {
    const cores: number[] = [];
    for (let cpu = w; cpu < Q7_CORES; cpu += this.workers) cores.push(cpu);
    return cores;
  }

  /**
   * Allocates the shared memory (0x200000 + sbufBytes, fixed size), or takes over the memory of the slot's previous
   * cluster ({@linkcode Q7ClusterOptions.memorySlot}), starts the Workers and waits until all are parked. Start a
   * cluster once per NeuronCore, not per execution: Workers are slow to start.
   *
   * @param opts the SBUF size and the number of Workers
   * @returns the running cluster
   */
  static async create(opts: Q7ClusterOptions): Promise<Q7Cluster> {
    const { sbufBytes } = opts;
    if (opts.cores !== undefined && opts.cores !== Q7_CORES) {
      throw new RangeError(`Cannot create Q7 cluster: cores is ${opts.cores}, expected ${Q7_CORES}`);
    }
    const workers = opts.workers ?? defaultQ7Workers();
    if (!Number.isInteger(workers) || workers < 1 || workers > Q7_CORES) {
      throw new RangeError(
        `Cannot create Q7 cluster: workers is ${workers}, expected an integer from 1 to ${Q7_CORES}`,
      );
    }
    const maxLibraries = opts.maxLibraries ?? DEFAULT_Q7_MAX_LIBRARIES;
    if (!Number.isInteger(maxLibraries) || maxLibraries < 1) {
      throw new RangeError(`Cannot create Q7 cluster: maxLibraries is ${maxLibraries}, expected an integer ≥ 1`);
    }
    const localOpBytes = opts.localOpBytes ?? 0;
    if (!Number.isSafeInteger(localOpBytes) || localOpBytes < 0) {
      throw new RangeError(`Cannot create Q7 cluster: localOpBytes is ${localOpBytes}, expected an integer ≥ 0`);
    }
    const pages = (SBUF_BASE + sbufBytes) / PAGE_BYTES;
    if (!Number.isInteger(pages) || sbufBytes <= 0 || pages > 65536) {
      throw new RangeError(
        `Cannot create Q7 cluster: sbufBytes is ${sbufBytes}, expected a positive multiple of 65536 below 4 GiB`,
      );
    }
    // Its Workers and, when it runs ops on this thread, the watchdog use the memory (MB_USERS).
    const users = workers + (opts.watchdog !== undefined && localOpBytes > 0 ? 1 : 0);
    const slot = opts.memorySlot;
    let memory = await takeMemory(slot, pages * PAGE_BYTES, users);
    if (memory === undefined) {
      memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
      Atomics.store(new Int32Array(memory.buffer, MAILBOX, MB_USERS + 1), MB_USERS, users);
    }
    if (slot !== undefined) slot.memory = memory;
    const cluster = new Q7Cluster(
      memory,
      sbufBytes,
      workers,
      maxLibraries,
      opts.watchdog ? localOpBytes : 0,
      opts.quick,
      opts.spawn ?? spawnHere,
    );
    // Handed to the watchdog first: its Worker (started by the owner's first cluster) boots beside the cores' Workers.
    if (cluster.#local !== undefined && opts.watchdog !== undefined) {
      cluster.#watchdog = {
        dog: opts.watchdog,
        id: opts.watchdog.adopt(memory, KILL_FLAG_ADDR >> 2, (MAILBOX >> 2) + MB_USERS),
      };
    }
    try {
      await Promise.all(
        cluster.#workers.map((_, w) =>
          cluster.#request(w, { type: "init", memory, worker: w, cores: cluster.#cores(w), layout: WORKER_LAYOUT })
        ),
      );
    } catch (e) {
      cluster.terminate();
      throw e;
    }
    return cluster;
  }

  /**
   * Boots the firmware: copies `dram` to address 0 (the rest of the image region is zeroed), compiles `iram`
   * and instantiates it on all 8 cores as library slot 0 (dispatch key `""`).
   *
   * @param firmware the IRAM image (a wasm module) and the DRAM image (at most 512 KiB)
   * @returns what the image reports through `ucode_api_level` / `ucode_arch`
   */
  async boot(firmware: { iram: Uint8Array; dram: Uint8Array }): Promise<FirmwareInfo> {
    if (firmware.dram.length > IMAGE_BYTES) {
      throw new RangeError(
        `Cannot boot Q7 firmware: DRAM image is ${firmware.dram.length} bytes, at most ${IMAGE_BYTES}`,
      );
    }
    this.#enter("boot Q7 firmware");
    try {
      this.#u8.fill(0, IMAGE_BASE, IMAGE_BASE + IMAGE_BYTES);
      this.#u8.set(firmware.dram, IMAGE_BASE);
      const context = "Cannot boot Q7 firmware";
      const replies = await this.#loadAll(0, await this.#compile(firmware.iram, context), context);
      this.#forgetFunctions(0);
      this.#booted = true;
      return replies[0].info ?? {};
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Compiles a custom-op library and instantiates it on all 8 cores, once per key (a key already prepared is
   * left as it is, and marked used). At {@linkcode Q7Cluster.maxLibraries} the least recently used library (never the
   * one of a dispatch in flight) is evicted first: every Worker drops its instances and its slot is reused.
   *
   * @param key the name dispatches use for this library
   * @param wasm the library's wasm binary
   * @returns the keys evicted to make room (none when `key` was prepared already or there was room)
   */
  async prepare(key: string, wasm: Uint8Array): Promise<string[]> {
    if (key === "") throw new TypeError('Cannot prepare Q7 library: key "" names the firmware');
    if (this.touch(key)) return [];
    this.#enter(`prepare Q7 library "${key}"`);
    try {
      const context = `Cannot prepare Q7 library "${key}"`;
      const module = await this.#compile(wasm, context);
      const evicted: string[] = [];
      while (this.#slots.size >= this.maxLibraries) {
        const victim = this.libraries.find((k) => k !== this.#inFlight);
        if (victim === undefined) break;
        await this.#evict(victim);
        evicted.push(victim);
      }
      const slot = this.#freeSlots.pop() ?? this.#slots.size + 1;
      try {
        await this.#loadAll(slot, module, context);
      } catch (e) {
        this.#freeSlots.push(slot);
        throw e;
      }
      this.#slots.set(key, slot);
      this.#used.set(key, ++this.#useClock);
      return evicted;
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Marks a prepared library used (it becomes the last to be evicted): what a caller that keeps its own record of
   * prepared keys does when it finds `key` there.
   *
   * @param key the library key
   * @returns whether `key` is prepared
   */
  touch(key: string): boolean {
    if (!this.#slots.has(key)) return false;
    this.#used.set(key, ++this.#useClock);
    return true;
  }

  /** The number of custom-op libraries prepared now (the firmware not counted), at most `maxLibraries`. */
  get libraryCount(): number {
    return this.#slots.size;
  }

  /** The prepared library keys, least recently used first. */
  get libraries(): string[] {
    return [...this.#slots.keys()].sort((a, b) => this.#used.get(a)! - this.#used.get(b)!);
  }

  /**
   * Runs one op on the participating cores (core 0 for totalCpus 1, all 8 for totalCpus 8) and resolves when all
   * of them reported. A kernel that never returns never resolves: pass `signal` to give up (the promise rejects
   * with the signal's reason, the cluster stays busy) and then {@linkcode Q7Cluster.terminate}.
   *
   * @param op the library, function, fan-out and arguments
   * @param signal aborts the wait
   * @returns each core's report
   */
  dispatch(op: DispatchOp, signal?: Q7AbortSignal): Promise<DispatchResult> {
    try {
      signal?.throwIfAborted();
      const slot = op.key === "" ? (this.#booted ? 0 : undefined) : this.#slots.get(op.key);
      if (slot !== undefined && op.key !== "") this.touch(op.key);
      if (slot === undefined) {
        throw new Error(
          `Cannot dispatch "${op.fn}": ${op.key === "" ? "no firmware booted" : `library "${op.key}" is not prepared`}`,
        );
      }
      if (op.totalCpus !== 1 && op.totalCpus !== Q7_CORES) {
        throw new RangeError(`Cannot dispatch "${op.fn}": totalCpus is ${op.totalCpus}, expected 1 or 8`);
      }
      const fn = this.#fnEntry(slot, op.fn, op.key);
      this.#enter(`dispatch "${op.fn}"`);
      try {
        this.#writeArgs(op.fn, op.args);
      } catch (e) {
        this.#busy = false;
        throw e;
      }
      this.#inFlight = op.key;
      const bytes = argBytes(op.args);
      const learn = this.#local === undefined ? undefined : opLearnName(fn, bytes, op.totalCpus);
      if (
        learn !== undefined && this.#watchdog !== undefined && op.deadlineMs !== undefined &&
        this.#quickSet(learn).has(learn) && bytes <= this.#localOpBytes && this.#watchdog.dog.ready(this.#watchdog.id)
      ) {
        return this.#deferLocal(slot, fn, op.totalCpus, op.deadlineMs, signal, learn);
      }
      return this.#run(slot, fn, op.totalCpus, signal, learn);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Takes the entries the cores appended to the stdio ring since the last call, oldest first. If the cores wrote
   * more than the ring holds in between, the oldest are lost and counted in {@linkcode Q7Cluster.stdioDropped}.
   *
   * @returns the drained entries
   */
  drainStdio(): StdioEntry[] {
    const i32 = this.#i32;
    const write = Atomics.load(i32, MB_STDIO_WRITE);
    let read = this.#stdioRead;
    if (write - read > STDIO_ENTRIES) {
      this.#stdioDropped += write - read - STDIO_ENTRIES;
      read = write - STDIO_ENTRIES;
    }
    const out: StdioEntry[] = [];
    for (; read < write; read++) {
      const entry = STDIO_RING + (read % STDIO_ENTRIES) * STDIO_ENTRY_BYTES;
      const sequence = Atomics.load(i32, (entry - MAILBOX) >> 2);
      if (sequence < read + 1) break; // reserved but not written yet
      if (sequence > read + 1) { // overwritten by a newer entry
        this.#stdioDropped++;
        continue;
      }
      const cpu = this.#u8[entry + STDIO_HEADER.cpu];
      const stream = this.#u8[entry + STDIO_HEADER.stream];
      const length = this.#view.getUint16(entry + STDIO_HEADER.length, true);
      const key = cpu * 256 + stream;
      let decoder = this.#decoders.get(key);
      if (!decoder) this.#decoders.set(key, decoder = new TextDecoder());
      const start = entry + STDIO_HEADER_BYTES;
      out.push({ cpu, stream, text: decoder.decode(this.#u8.slice(start, start + length), { stream: true }) });
    }
    this.#stdioRead = read;
    // seed: spmd-teardown §5.5 — the host publishes its read index back to the cores.
    Atomics.store(i32, MB_STDIO_READ, read);
    return out;
  }

  /** Stdio entries lost to ring overruns so far. */
  get stdioDropped(): number {
    return this.#stdioDropped;
  }

  /**
   * Stops the 8 cores and their Workers, including cores spinning in a kernel (every loop polls the kill flag, see
   * _loop_guard.ts), and rejects a pending dispatch. The cluster is unusable afterwards. The Workers close themselves
   * at once; their `Worker` objects are terminated once every user has left the memory, or after a second (ours).
   */
  terminate(): void {
    if (this.#terminated) return;
    this.#terminated = true;
    if (this.#watchdog !== undefined) this.#watchdog.dog.forget(this.#watchdog.id);
    const i32 = this.#i32;
    Atomics.store(i32, MB_KILL, 1);
    Atomics.store(i32, MB_CMD, CMD_EXIT);
    this.#ring(Q7_CORES);
    // Each Worker leaves at the ring (a spinning one at its next guard poll), counting itself out of MB_USERS; stopping
    // them from outside first would keep the memory from the NeuronCore's next cluster (ours). Stopped once all users
    // left, or after the grace.
    // The next cluster of the NeuronCore may take the memory (and count its own users in) before this thread sees the
    // count at 0: it then stops them itself (`leaving`), which also ends this wait at once.
    const workers = this.#workers;
    const memory = this.memory;
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      if (leaving.get(memory) === stop) leaving.delete(memory);
      for (const worker of workers) worker.terminate();
    };
    leaving.set(memory, stop);
    void waitForZero(i32, MB_USERS, EXIT_GRACE_MS, () => stopped).then(stop);
    const error = new Error("Q7 cluster was terminated");
    for (const queue of this.#replies) for (const pending of queue.splice(0)) pending.reject(error);
    this.#pending?.reject(new Error("Cannot complete dispatch: the Q7 cluster was terminated"));
    this.#pending = undefined;
    Atomics.notify(i32, MB_COMPLETE); // releases a pending dispatch's waitAsync
  }

  /** Same as {@linkcode Q7Cluster.terminate}. */
  [Symbol.dispose](): void {
    this.terminate();
  }

  /** Rings Worker 0's doorbell word and, for more than one core, the other Workers' shared word (`doorbellWord`). */
  #ring(cores: number): void {
    const i32 = this.#i32;
    if (cores > 1) {
      Atomics.add(i32, doorbellWord(1), 1);
      Atomics.notify(i32, doorbellWord(1));
    }
    Atomics.add(i32, doorbellWord(0), 1);
    Atomics.notify(i32, doorbellWord(0));
  }

  #enter(what: string): void {
    if (this.#terminated) throw new Error(`Cannot ${what}: the Q7 cluster was terminated`);
    if (this.#failure) throw new Error(`Cannot ${what}: ${this.#failure.message}`, { cause: this.#failure });
    if (this.#busy) throw new Error(`Cannot ${what}: the Q7 cluster is busy with another request`);
    this.#busy = true;
  }

  #request(worker: number, message: unknown): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      if (this.#failure) return reject(this.#failure);
      this.#replies[worker].push({ resolve, reject });
      Atomics.add(this.#i32, MB_POSTED + worker, 1);
      this.#workers[worker].postMessage(message);
    });
  }

  /** Compiles `wasm` with its loops guarded. */
  async #compile(wasm: Uint8Array, context: string): Promise<WebAssembly.Module> {
    try {
      return await WebAssembly.compile(guardLoops(wasm, KILL_FLAG_ADDR) as Uint8Array<ArrayBuffer>);
    } catch (e) {
      throw new Error(`${context}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  /** Instantiates `module` as `slot` on every core (Worker 0's reply first). */
  async #loadAll(slot: number, module: WebAssembly.Module, context: string): Promise<Reply[]> {
    const replies = await this.#postAll({ type: "load", slot, module });
    const failed = replies.find((r) => r.error !== undefined);
    if (failed) throw new Error(`${context}: ${failed.error}`);
    if (this.#local !== undefined) {
      try {
        this.#local.load(slot, module);
      } catch (e) { // the set's load leaves the slot empty
        throw new Error(`${context}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`, { cause: e });
      }
    }
    return replies;
  }

  /** Evicts a prepared library: every Worker drops its instances and cached exports, and its slot is freed. */
  async #evict(key: string): Promise<void> {
    const slot = this.#slots.get(key)!;
    await this.#postAll({ type: "unload", slot });
    this.#local?.unload(slot);
    this.#slots.delete(key);
    this.#used.delete(key);
    this.#forgetFunctions(slot);
    this.#freeSlots.push(slot);
  }

  /** Posts `message` to every Worker and waits for all replies (Worker 0's first). */
  #postAll(message: { type: string; slot: number; module?: WebAssembly.Module }): Promise<Reply[]> {
    const pending = this.#workers.map((_, w) => this.#request(w, message));
    // Parked Workers only see messages after returning to their event loop: ring CMD_YIELD.
    Atomics.store(this.#i32, MB_CMD, CMD_YIELD);
    this.#ring(Q7_CORES);
    return Promise.all(pending);
  }

  /** Drops the function ids of `slot` (the slot is booted again or reused by another library). */
  #forgetFunctions(slot: number): void {
    this.#fns.delete(slot);
    if (slot === 0) this.#quickFirmware.clear();
  }

  /** The entry of function `fn` of the library `library` prepared in `slot` (`""`: the firmware, slot 0). */
  #fnEntry(slot: number, fn: string, library: string): FnEntry {
    let bySlot = this.#fns.get(slot);
    if (bySlot === undefined) this.#fns.set(slot, bySlot = new Map());
    let entry = bySlot.get(fn);
    if (!entry) {
      const name = new TextEncoder().encode(fn);
      if (name.length === 0 || name.length > FN_NAME_MAX) {
        throw new RangeError(`Cannot dispatch "${fn}": a function name has 1 to ${FN_NAME_MAX} bytes`);
      }
      entry = { id: this.#nextFnId++, name, learn: `${library}\0${fn}`, shapes: new Map() };
      bySlot.set(fn, entry);
    }
    return entry;
  }

  #writeArgs(fn: string, args: ArgBlock): void {
    const ints = args.ints ?? [];
    if (args.inputs.length > MAX_TENSORS || args.outputs.length > MAX_TENSORS || ints.length > MAX_INTS) {
      throw new RangeError(
        `Cannot dispatch "${fn}": at most ${MAX_TENSORS} inputs, ${MAX_TENSORS} outputs and ${MAX_INTS} ints`,
      );
    }
    const view = this.#view;
    this.#putTensors(fn, ARG_INPUTS, args.inputs, "input");
    this.#putTensors(fn, ARG_OUTPUTS, args.outputs, "output");
    for (let i = 0; i < ints.length; i++) view.setBigInt64(ARG_INTS + 8 * i, BigInt.asIntN(64, ints[i]), true);
    view.setInt32(ARGS, args.inputs.length, true);
    view.setInt32(ARGS + 4, args.outputs.length, true);
    view.setInt32(ARGS + 8, ints.length, true);
  }

  /** Checks and writes the descriptors of `list` (the op's inputs or outputs) at `base` of the mailbox. */
  #putTensors(fn: string, base: number, list: readonly TensorDesc[], what: string): void {
    const end = SBUF_BASE + this.sbufBytes;
    for (let i = 0; i < list.length; i++) {
      const t = list[i];
      if (
        !Number.isInteger(t.addr) || !Number.isInteger(t.bytes) || t.addr < SBUF_BASE || t.bytes < 0 ||
        t.addr + t.bytes > end
      ) {
        throw new RangeError(
          `Cannot dispatch "${fn}": ${what} ${i} [0x${t.addr.toString(16)}, +${t.bytes}) is outside the SBUF window`,
        );
      }
      if (t.dims.length > MAX_RANK || !(t.dtype >= Dtype.float32 && t.dtype <= Dtype.bool)) {
        throw new RangeError(`Cannot dispatch "${fn}": ${what} ${i} has rank ${t.dims.length} or dtype ${t.dtype}`);
      }
      encodeTensorDescriptor(t, this.#view, base + i * DESC_BYTES);
    }
  }

  /** The set a function's `learn` name is learned in (the firmware's own, or the libraries'). */
  #quickSet(learn: string): Set<string> {
    return learn.startsWith("\0") ? this.#quickFirmware : this.#quick;
  }

  /**
   * Writes the op's mailbox words and clears the participants' status records; returns the op's sequence number. The
   * command reads CMD_LOCAL while the words are written, the sequence number is stored after them and the command
   * last: CMD_RUN for the Workers, CMD_LOCAL for an op this thread's own cores run. A Worker takes an op only if the
   * sequence number it read first is still there after it saw CMD_RUN (q7_worker.js), so it never runs a half-written
   * op nor one meant for this thread (ours).
   */
  #post(slot: number, fn: FnEntry, totalCpus: number, local = false): number {
    const i32 = this.#i32;
    const seq = ++this.#seq;
    Atomics.store(i32, MB_CMD, CMD_LOCAL);
    this.#u8.set(fn.name, FN_NAME);
    i32[MB_FN_NAME_LEN] = fn.name.length;
    i32[MB_LIB] = slot;
    i32[MB_FN] = fn.id;
    i32[MB_TOTAL_CPUS] = totalCpus;
    for (let cpu = 0; cpu < totalCpus; cpu++) this.#view.setInt32(CORE_STATUS + cpu * CORE_STATUS_BYTES, 0, true);
    Atomics.store(i32, MB_DONE, 0);
    Atomics.store(i32, MB_SEQ, seq);
    Atomics.store(i32, MB_CMD, local ? CMD_LOCAL : CMD_RUN);
    return seq;
  }

  /**
   * Hands the op to this thread's own instances of the 8 cores: the mailbox is written now, and the op runs when
   * {@linkcode Q7Cluster.runPending} is called (the device's DRAIN, once the records of the instructions before it are
   * out), the cores in turn. No Worker is rung; the mailbox, the status records and the stdio ring are the same as for
   * an op the Workers run.
   */
  #deferLocal(
    slot: number,
    fn: FnEntry,
    totalCpus: number,
    deadlineMs: number,
    signal: Q7AbortSignal | undefined,
    learn: string,
  ): Promise<DispatchResult> {
    const seq = this.#post(slot, fn, totalCpus, true);
    return new Promise<DispatchResult>((resolve, reject) => {
      this.#pending = { seq, totalCpus, deadlineMs, signal, learn, resolve, reject };
    });
  }

  /**
   * Runs the op {@linkcode Q7Cluster.dispatch} handed to this thread's cores, if one waits (ours; see
   * {@linkcode Q7ClusterOptions.localOpBytes}): its dispatch promise settles before this returns, unless a reset or
   * close stops it.
   *
   * @returns `true` when an op ran and its dispatch has settled.
   */
  runPending(): boolean {
    const p = this.#pending;
    this.#pending = undefined;
    this.#localJoin = undefined;
    return p !== undefined && this.#runLocal(p);
  }

  /**
   * Runs a deferred op on this thread's cores under the local watchdog; `true` when its dispatch has settled (it ran to
   * its end, or its deadline stopped it), `false` when a reset or close stopped it (it never joins).
   */
  #runLocal(p: PendingLocalOp): boolean {
    const { dog, id } = this.#watchdog!;
    const gen = dog.arm(id, p.deadlineMs);
    let stopped: "deadline" | "stopped" | undefined;
    try {
      this.#local!.runOp(p.seq);
    } finally {
      stopped = dog.disarm(gen);
    }
    if (stopped === undefined) {
      const joined = this.#complete(p.totalCpus, p.learn);
      this.#localJoin = joined;
      p.resolve(joined);
      return true;
    }
    this.#quickSet(p.learn).delete(p.learn); // stopped: not quick any more
    // The kill flag is set (or about to be): every core of this cluster is unusable from now on.
    this.terminate();
    if (stopped === "deadline") {
      this.#watchdogFired = true;
      p.reject(new Error("Cannot complete dispatch: the watchdog stopped the op at its deadline"));
      return true;
    }
    // Stopped for a reset or a close: like an op spinning on the Workers, it never joins; `signal` gives up on it.
    const signal = p.signal;
    if (signal?.aborted) p.reject(signal.reason);
    signal?.addEventListener("abort", () => p.reject(signal.reason), { once: true });
    return false;
  }

  /**
   * Whether the cluster can run ops on the calling thread now: it has a {@linkcode Q7ClusterOptions.localOpBytes} and
   * a watchdog that has taken its memory (the watchdog's Worker starts with the first cluster).
   */
  get localReady(): boolean {
    return this.#watchdog !== undefined && this.#watchdog.dog.ready(this.#watchdog.id);
  }

  /**
   * Takes the join of the op {@linkcode Q7Cluster.runPending} last ran to its end (the value its dispatch resolved
   * with), once: the device's DRAIN reads it without awaiting the dispatch (ours). `undefined` when none is left.
   *
   * @returns the join, or `undefined`
   */
  takeLocalJoin(): DispatchResult | undefined {
    const joined = this.#localJoin;
    this.#localJoin = undefined;
    return joined;
  }

  /** Whether an op waits for {@linkcode Q7Cluster.runPending}. */
  get hasPending(): boolean {
    return this.#pending !== undefined;
  }

  /**
   * Whether the {@linkcode Q7ClusterOptions.watchdog} stopped an op this cluster ran on the calling thread (the
   * cluster is terminated then, and that dispatch rejected). Read it right after {@linkcode Q7Cluster.runPending}.
   */
  get watchdogFired(): boolean {
    return this.#watchdogFired;
  }

  #run(
    slot: number,
    fn: FnEntry,
    totalCpus: number,
    signal: Q7AbortSignal | undefined,
    learn: string | undefined,
  ): Promise<DispatchResult> {
    const i32 = this.#i32;
    const seq = this.#post(slot, fn, totalCpus);
    // The doorbell: wake exactly the participating cores (seed: spmd-teardown §1.1 — total_cpus is the fan-out).
    this.#ring(totalCpus);
    // The join: the last participant stores this op's sequence number in MB_COMPLETE and notifies. A wake-up is
    // only a hint — the previous op's last core may notify after the host already saw its store (and moved on to
    // this op), so completion is the stored value equal to `seq`, re-checked after every wake.
    if (Atomics.load(i32, MB_COMPLETE) === seq) return Promise.resolve(this.#complete(totalCpus, learn));
    return new Promise<DispatchResult>((resolve, reject) => {
      const onAbort = () => reject(signal!.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const waitForJoin = (): void => {
        const current = Atomics.load(i32, MB_COMPLETE);
        if (this.#terminated) {
          signal?.removeEventListener("abort", onAbort);
          reject(new Error(`Cannot complete dispatch: the Q7 cluster was terminated`));
        } else if (current === seq) {
          signal?.removeEventListener("abort", onAbort);
          resolve(this.#complete(totalCpus, learn));
        } else {
          const wait = Atomics.waitAsync(i32, MB_COMPLETE, current);
          if (wait.async) wait.value.then(waitForJoin);
          else queueMicrotask(waitForJoin);
        }
      };
      waitForJoin();
    });
  }

  /**
   * Reads the op's status records. `learn` is the op's name in the quick set: if every core returned `ok` within
   * {@linkcode localLearnNs} of kernel time all told, ops of its shape may run on the calling thread next time; past
   * {@linkcode LOCAL_UNLEARN_NS} they go back to the Workers (one slow run of a cold or preempted kernel between the
   * two changes nothing: on a loaded machine a run here is preempted for milliseconds).
   */
  #complete(totalCpus: number, learn?: string): DispatchResult {
    this.#busy = false;
    this.#inFlight = undefined;
    const view = this.#view;
    const cores: CoreResult[] = [];
    if (learn !== undefined && this.#local !== undefined) {
      let ns = 0, ok = true;
      for (let cpu = 0; cpu < totalCpus; cpu++) {
        const rec = CORE_STATUS + cpu * CORE_STATUS_BYTES;
        ok &&= view.getInt32(rec + CS.status, true) === Status.ok;
        ns += view.getFloat64(rec + CS.elapsedNs, true);
      }
      const quick = this.#quickSet(learn);
      if (ok && ns <= this.#learnNs[totalCpus === 1 ? 0 : 1]) {
        if (!quick.has(learn)) {
          // Bounded: the oldest entry goes (a Set iterates in insertion order). Only a newly learned op adds one.
          if (quick.size >= MAX_QUICK_OPS) quick.delete(quick.values().next().value!);
          quick.add(learn);
        }
      } else if (ns > LOCAL_UNLEARN_NS) quick.delete(learn);
    }
    for (let cpu = 0; cpu < Q7_CORES; cpu++) {
      if (cpu >= totalCpus) {
        cores.push({ cpu, ran: false, status: "ok", committed: false });
        continue;
      }
      const rec = CORE_STATUS + cpu * CORE_STATUS_BYTES;
      const code = view.getInt32(rec + CS.status, true);
      const result: CoreResult = {
        cpu,
        ran: true,
        status: (code === Status.none ? "abort" : STATUS_NAMES[code]) as CoreStatus,
        committed: view.getInt32(rec + CS.committed, true) !== 0,
        elapsedNs: view.getFloat64(rec + CS.elapsedNs, true),
        startMs: view.getFloat64(rec + CS.startMs, true),
      };
      if (code !== Status.ok) {
        const length = view.getInt32(rec + CS.messageLength, true);
        result.message = new TextDecoder().decode(this.#u8.slice(rec + CS.message, rec + CS.message + length));
      }
      cores.push(result);
    }
    return { cores };
  }
}

/**
 * What a dispatch watches to give up on its join: an `AbortSignal`, or any object with its flag, its reason and its
 * "abort" listeners (the simulated device's runs use one of their own: an `AbortController` per run cost about
 * 0.5 µs on Bun; ours).
 */
export interface Q7AbortSignal {
  /** Whether it aborted. */
  readonly aborted: boolean;
  /** Why, once aborted. */
  readonly reason: unknown;
  /** Throws the reason once aborted. */
  throwIfAborted(): void;
  /** Calls `listener` once when it aborts. */
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  /** Forgets a listener. */
  removeEventListener(type: "abort", listener: () => void): void;
}

/** An op handed to the calling thread's cores, waiting for {@linkcode Q7Cluster.runPending}. */
interface PendingLocalOp {
  readonly seq: number;
  readonly totalCpus: number;
  readonly deadlineMs: number;
  readonly signal: Q7AbortSignal | undefined;
  readonly learn: string;
  resolve(r: DispatchResult): void;
  reject(e: unknown): void;
}

/**
 * The most kernel time (ns, all cores together) under which an op may be learned quick, whatever the Workers (ours):
 * 1 ms. An op runs on the calling thread only once it has returned, quickly, on the Workers, so a kernel that spins or
 * runs long stays on the Workers, where the device's messages (a Q7 reset, an unload) reach it at once.
 */
export const LOCAL_LEARN_MAX_NS = 1_000_000;

/**
 * What running an op on the Workers costs beyond its kernel time (ns, ours): waking them and being woken back, two
 * thread hops of 35–60 µs each on the 2-vCPU machines measured (docs/architecture.md §5).
 */
export const WORKER_HOPS_NS = 100_000;

/** Kernel time (ns, all cores together) past which an op learned quick goes back to the Workers (ours): 10 ms. */
export const LOCAL_UNLEARN_NS = 10_000_000;

/**
 * The kernel time (ns, all cores together) under which an op runs faster on the calling thread than on `workers`
 * Workers (ours): on p = min(workers, CPUs, fan-out) of them the op takes about {@linkcode WORKER_HOPS_NS} + K / p
 * against K here, so K ≤ hops × p / (p − 1): for an op on all 8 cores 200 µs on 2 CPUs, 133 µs on 4, 114 µs on 8;
 * {@linkcode LOCAL_LEARN_MAX_NS} at most, and that with one Worker or for an op on one core, which gain nothing from
 * parallelism.
 *
 * @param workers the cluster's Workers
 * @param cpus the CPUs they share (default `navigator.hardwareConcurrency`, 8 where that is unknown)
 * @param fanOut the op's `totalCpus` (default 8)
 * @returns the threshold in ns
 */
export function localLearnNs(workers: number, cpus?: number, fanOut: 1 | 8 = Q7_CORES): number {
  const p = Math.min(workers, fanOut, cpus ?? hostCpus());
  return p <= 1 ? LOCAL_LEARN_MAX_NS : Math.min(LOCAL_LEARN_MAX_NS, Math.round((WORKER_HOPS_NS * p) / (p - 1)));
}

/** Entries a quick set keeps (ours): one per op shape seen quick; past it the oldest goes. */
export const MAX_QUICK_OPS = 4096;

/** Learn names a function entry caches (ours); past it the cache starts again. */
const MAX_SHAPES_PER_FN = 256;

/**
 * An op's shape for learning (ours): one function serves ops of very different sizes (a convolution on every layer of
 * a network), so what is learned is the function at given tensor bytes and fan-out.
 */
function opShape(bytes: number, totalCpus: number): number {
  return bytes * 2 + (totalCpus === Q7_CORES ? 1 : 0);
}

/** The name an op of `fn` with these tensor bytes and fan-out is learned quick under (built once per shape). */
function opLearnName(fn: FnEntry, bytes: number, totalCpus: number): string {
  const shape = opShape(bytes, totalCpus);
  let name = fn.shapes.get(shape);
  if (name === undefined) {
    if (fn.shapes.size >= MAX_SHAPES_PER_FN) fn.shapes.clear(); // bounded; a name is only a cache of its string
    fn.shapes.set(shape, name = `${fn.learn}\0${bytes}/${totalCpus}`);
  }
  return name;
}

/** The bytes an op's tensors hold, inputs and outputs together. */
function argBytes(args: ArgBlock): number {
  let n = 0;
  for (const t of args.inputs) n += t.bytes;
  for (const t of args.outputs) n += t.bytes;
  return n;
}
