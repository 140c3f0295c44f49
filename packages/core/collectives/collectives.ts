/**
 * Collectives on one device: `nrt_load_collectives`'s comm bookkeeping, and all-reduce, all-gather and
 * reduce-scatter across the logical cores of the device, prepared once (`nrta_cc_prepare`) and run on the
 * COLLECTIVES execution unit (`nrta_cc_schedule`). Every byte moves through the simulated device's custom-op DMA
 * queues: each rank's NeuronCore runs a small sequencer stream per phase (`DMA_CONFIG` of 8 rings, `DMA_CONFIG_SIZE`,
 * `NOTIFY EXEC_DONE`) whose descriptors copy, or fold with compute-DMA, between the ranks' HBM buffers.
 *
 * Seed: lifecycle-error-model §2.1 (`nrt_load_collectives` = `enc_validate_global_comm` → `nrt_load_util` →
 * `kmgr_trace_set_cc_global_id` + `kmgr_validate_replica_groups`), §1.3 (`EXEC_STATE_WAIT_BARRIER_PROXY`: an
 * execution waits for the collectives barrier before its cores; ours: that role is the host's barrier between the
 * phases of an all-reduce), §4.1 (`NRT_COLL_PENDING` 1100 "collectives still pending (async barrier)"; 1200 and 1206 are Band C,
 * the fail-stop band), §4.3 (the device fault → status funnel every phase's wait goes through), §5.4 (the "Suspected
 * hang" lines of a collectives hang), runtime-synthesis §6 (`nrta_cc_prepare` → `nrta_cc_schedule` on the NRT_3.0.0
 * async pool). Ours (`docs/collectives.md`): the argument lists of `nrta_cc_prepare` / `nrta_cc_schedule` /
 * `nrta_cc_release`, ranks = logical cores named by the tensors, the data path (`plan.ts`), `NRT_COLL_PENDING` for a
 * release while a run is pending, and a Band-C verdict poisoning the prepared collective until it is released.
 *
 * @module
 */
import type { Clock } from "../clock.ts";
import { DmaMemUsageType, type DmemLedger, ModelAllocator } from "../dmem/dmem.ts";
import { NrtError } from "../error.ts";
import {
  DMA_DESCRIPTOR_BYTES,
  DmaDirection,
  encodeDmaDescriptor,
  encodeInstruction,
  encodeRingTableEntry,
  type Instruction,
  NotificationKind,
  Opcode,
  RING_TABLE_ENTRY_BYTES,
  SLOT_BYTES,
} from "../isa.ts";
import type { HalTarget, Khal } from "../khal.ts";
import type { ExecWaits } from "../kmgr/exec_waits.ts";
import { kmgrSyncExec } from "../kmgr/kmgr_exec.ts";
import type { Logger } from "../log.ts";
import type { Nrta, NrtaRequest, NrtaScheduleOptions } from "../nrta/nrta.ts";
import { KBIN_DMA_RING_TYPE_CUSTOM_OP } from "../silicon_spec.ts";
import { NrtStatus, worseStatus } from "../status.ts";
import { CoreQueue } from "../tdrv/core_queue.ts";
import { collectCustomOpQueues, type InstalledModel } from "../tdrv/kbl_model_add.ts";
import { takeId, type Tpb } from "../tdrv/tpb.ts";
import { Tensor } from "../tensor.ts";
import type { CollectivesComm } from "./comm.ts";
import {
  CC_QUEUES,
  ccElementBytes,
  ccPlan,
  ccSizes,
  NrtaCcDtype,
  NrtaCcOp,
  NrtaCcRedOp,
  type RankAddresses,
  splitOverQueues,
} from "./plan.ts";

export { type CollectivesComm, encValidateGlobalComm, kmgrValidateReplicaGroups } from "./comm.ts";
export { ccSizes, NrtaCcDtype, NrtaCcOp, NrtaCcRedOp } from "./plan.ts";
export { ccReference, fromBfloat16, toBfloat16 } from "./reference.ts";

/** What the collectives need from the runtime. */
export interface CollectivesHost {
  /** The state guard (13 before init, 14 after close). */
  guard(): void;
  /** The runtime's tensors are the ones a collective may bind. */
  readonly owner: object;
  /** The first physical core of a visible logical core (throws `NRT_INVALID` for one that is not visible). */
  tpbOf(vnc: number): Tpb;
  /**
   * HAL, portal target, ledger, clock, logger, `NEURON_RT_EXEC_TIMEOUT` in ms, and the runtime's execution budgets
   * (`kmgr/exec_waits.ts`).
   */
  services(): {
    khal: Khal;
    target: HalTarget;
    ledger: DmemLedger;
    clock: Clock;
    log: Logger;
    timeoutMs: number;
    waits?: ExecWaits;
  };
  /** The `nrta_*` scheduler (the COLLECTIVES unit). */
  readonly nrta: Nrta;
  /** Whether a model is still loaded. */
  isLoaded(model: object): boolean;
}

/** Options of {@linkcode Collectives.prepare}: the idiomatic `nrta_cc_prepare`. */
export interface CollectiveOptions {
  /** The operation. */
  readonly op: "all-reduce" | "all-gather" | "reduce-scatter";
  /** The reduction (ignored by all-gather; default `"sum"`). */
  readonly reduce?: "sum" | "max";
  /** Element type (default `"float32"`). */
  readonly dtype?: "float32" | "bfloat16";
  /**
   * Elements per rank: of the input for all-reduce and all-gather, of the output for reduce-scatter (whose input
   * holds `ranks × count`).
   */
  readonly count: number;
  /** Rank i's input: a device tensor on the logical core of rank i. The ranks are one replica group. */
  readonly inputs: readonly Tensor[];
  /** Rank i's output, on the same logical core as its input. */
  readonly outputs: readonly Tensor[];
}

const OPS = {
  "all-reduce": NrtaCcOp.ALL_REDUCE,
  "all-gather": NrtaCcOp.ALL_GATHER,
  "reduce-scatter": NrtaCcOp.REDUCE_SCATTER,
} as const;
const REDS = { sum: NrtaCcRedOp.SUM, max: NrtaCcRedOp.MAX } as const;
const DTYPES = { float32: NrtaCcDtype.FLOAT32, bfloat16: NrtaCcDtype.BFLOAT16 } as const;

/** Device model ids per core (the 15-bit stream-table field, as `kbl_model_add` takes them). */
const DEVICE_MODEL_IDS = 0x8000;

/** One rank's program of one phase, installed on its NeuronCore (the shape `kmgrSyncExec` polls). */
type PhaseProgram = InstalledModel;

/** One rank of a prepared collective. */
interface Rank {
  readonly vnc: number;
  readonly tpb: Tpb;
  readonly allocator: ModelAllocator;
  readonly phases: PhaseProgram[];
}

const invalid = (why: string): never => {
  throw new NrtError(NrtStatus.NRT_INVALID, `Cannot prepare collective: ${why}`);
};

/**
 * A prepared collective (`nrta_cc_prepare`'s handle): its device programs stay installed until
 * {@linkcode Collective.release}.
 */
export class Collective {
  readonly #owner: Collectives;
  readonly #ranks: Rank[];
  #pending = 0;
  #poisoned: number | undefined;
  #released = false;
  /** The operation. */
  readonly op: CollectiveOptions["op"];
  /** The reduction. */
  readonly reduce: "sum" | "max";
  /** Element type. */
  readonly dtype: "float32" | "bfloat16";
  /** Elements per rank (see {@linkcode CollectiveOptions.count}). */
  readonly count: number;
  /** The logical core of each rank, in rank order. */
  readonly ranks: readonly number[];
  /** Phases (2 for all-reduce, 1 otherwise); a barrier separates them. */
  readonly phaseCount: number;
  /** Bytes the DMA queues of all ranks move per run (copies and compute-DMA folds). */
  readonly bytesPerRun: number;

  /** @internal */
  constructor(owner: Collectives, o: Required<CollectiveOptions>, ranks: Rank[], bytesPerRun: number) {
    this.#owner = owner;
    this.#ranks = ranks;
    this.op = o.op;
    this.reduce = o.reduce;
    this.dtype = o.dtype;
    this.count = o.count;
    this.ranks = Object.freeze(ranks.map((r) => r.vnc));
    this.phaseCount = ranks[0].phases.length;
    this.bytesPerRun = bytesPerRun;
  }

  /** Runs scheduled or started and not yet finished. */
  get pending(): number {
    return this.#pending;
  }

  /** The Band-C status a run latched (ours: the collective refuses to run again until released), if any. */
  get poisoned(): number | undefined {
    return this.#poisoned;
  }

  /** Whether {@linkcode Collective.release} ran. */
  get released(): boolean {
    return this.#released;
  }

  #check(): void {
    this.#owner.host.guard();
    if (this.#released) throw new NrtError(NrtStatus.NRT_INVALID, `Collective ${this.op} was released`);
  }

  /**
   * Runs the collective now, in the FIFO of every rank's NeuronCore; resolves when every rank's output is written.
   *
   * @throws {NrtError} The device's verdict (e.g. 1200, 1206, 5) — the worst over the ranks of the phase that failed.
   */
  async run(): Promise<void> {
    this.#check();
    this.#pending++;
    const running = this.#run();
    this.#owner.running(running);
    try {
      await running;
    } finally {
      this.#pending--;
    }
  }

  /**
   * `nrta_cc_schedule`: queues one run on the COLLECTIVES execution unit of rank 0's logical core and returns its
   * sequence id and completion at once; `nrta_is_completed` and error trackers see it like any `nrta_*` request.
   */
  schedule(options: NrtaScheduleOptions = {}): NrtaRequest {
    this.#check();
    this.#pending++;
    let req: NrtaRequest;
    try {
      req = this.#owner.host.nrta.ccSchedule(this.ranks[0], () => this.#run(), options);
    } catch (e) {
      this.#pending--;
      throw e;
    }
    req.done.then(() => this.#pending--, () => this.#pending--);
    return req;
  }

  async #run(): Promise<void> {
    if (this.#released) throw new NrtError(NrtStatus.NRT_INVALID, `Collective ${this.op} was released`);
    if (this.#poisoned !== undefined) {
      throw new NrtError(
        this.#poisoned as NrtStatus,
        `Cannot run collective ${this.op}: a previous run faulted (${this.#poisoned}); release and prepare it again`,
      );
    }
    const host = this.#owner.host;
    const s = host.services();
    const exec = { khal: s.khal, target: s.target, clock: s.clock, log: s.log, timeoutMs: s.timeoutMs, waits: s.waits };
    // One turn on every rank's core at once, taken synchronously (no lock order to get wrong): model executions on
    // these cores wait for the whole collective, and it for them.
    using turn = CoreQueue.acquire(this.#ranks.map((r) => r.tpb.queue));
    await turn.ready;
    if (this.#ranks.some((r) => r.tpb.halted)) throw new NrtError(NrtStatus.NRT_CLOSED, "Runtime is closed");
    const name = `collective ${this.op}`;
    for (let p = 0; p < this.phaseCount; p++) {
      // The phases' barrier (EXEC_STATE_WAIT_BARRIER_PROXY): phase p + 1 starts once every rank finished phase p.
      const reqs = await Promise.all(this.#ranks.map((r) => kmgrSyncExec(exec, r.phases[p], name)));
      let status: number = NrtStatus.NRT_SUCCESS;
      for (const q of reqs) status = worseStatus(status, q.status);
      const faulted = this.#ranks.filter((_, i) => reqs[i].fatal);
      if (faulted.length > 0) {
        // The host only logs and reports (seed §5.5): a rank's run the device may still be stuck in is the device's
        // to contain (its watchdog), or is dropped when the release removes the streams.
        if (status >= NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES && status <= NrtStatus.NRT_NETWORK_PROXY_FAILURE) {
          this.#poisoned = status;
        }
        if (status === NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES) {
          // The host is the barrier proxy here, so it knows which operation (phase) hung (seed §5.4's second string;
          // which string, ours).
          for (const r of faulted) {
            s.log.error(
              `(FATAL-RT-UNDEFINED-STATE) [ND ${s.target.device}][NC ${r.tpb.nc}] Suspected hang in collectives operation ${
                p + 1
              } out of ${this.phaseCount}`,
            );
          }
        }
      }
      if (status !== NrtStatus.NRT_SUCCESS) {
        throw new NrtError(
          status as NrtStatus,
          `Collective ${this.op} failed in phase ${p + 1} of ${this.phaseCount} with status ${status}`,
        );
      }
    }
  }

  /**
   * `nrta_cc_release` (ours): removes the device programs and frees their memory.
   *
   * @throws {NrtError} `NRT_COLL_PENDING` (1100) while a run is scheduled or running.
   */
  async release(): Promise<void> {
    this.#owner.host.guard();
    if (this.#released) return;
    if (this.#pending > 0) {
      throw new NrtError(NrtStatus.NRT_COLL_PENDING, `Collective ${this.op} has ${this.#pending} run(s) pending`);
    }
    await this.#free();
  }

  /** @internal Frees without the state guard (close). */
  async free(): Promise<void> {
    if (!this.#released) await this.#free();
  }

  async #free(): Promise<void> {
    this.#released = true;
    this.#owner.forget(this);
    const s = this.#owner.host.services();
    let first: unknown;
    for (const r of this.#ranks) await releaseRank(s, r).catch((e) => (first ??= e));
    if (first !== undefined) throw first;
  }

  /** `await using cc = await rt.collectives.prepare(…)`: releases unless released (waiting for pending runs first). */
  async [Symbol.asyncDispose](): Promise<void> {
    while (this.#pending > 0) await this.#owner.host.nrta.drain();
    if (!this.#released) await this.#free();
  }
}

/** Slots of a phase stream: `[DMA_CONFIG][DMA_CONFIG_SIZE][NOTIFY EXEC_DONE]`. */
const STREAM_SLOTS = 3;

async function releaseRank(s: { khal: Khal; target: HalTarget }, r: Rank): Promise<void> {
  let first: unknown;
  for (const ph of r.phases) {
    await s.khal.streamRemove(s.target, r.tpb.nc, ph.streamSlot).catch((e) => (first ??= e));
    r.tpb.streamSlots.delete(ph.streamSlot);
    r.tpb.semaphores.delete(ph.doorbell);
    r.tpb.modelIds.delete(ph.deviceModel);
  }
  await r.allocator.destroy().catch((e) => (first ??= e));
  if (first !== undefined) throw first;
}

/** The collectives of one runtime (`rt.collectives`). */
export class Collectives {
  /** @internal */
  readonly host: CollectivesHost;
  readonly #comms = new Map<object, CollectivesComm>();
  readonly #live = new Set<Collective>();
  readonly #running = new Set<Promise<void>>();

  /** @internal Collectives over `host` (the runtime builds its own). */
  constructor(host: CollectivesHost) {
    this.host = host;
  }

  /** @internal `kmgr_trace_set_cc_global_id`: records the comm of a model loaded with `nrt_load_collectives`. */
  register(model: object, comm: CollectivesComm): void {
    for (const [m, c] of this.#comms) {
      if (!this.host.isLoaded(m)) this.#comms.delete(m);
      else if (JSON.stringify(c.replicaGroups) !== JSON.stringify(comm.replicaGroups)) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot load collectives: replica groups ${JSON.stringify(comm.replicaGroups)} differ from ${
            JSON.stringify(c.replicaGroups)
          } of a model already loaded`,
        );
      }
    }
    this.#comms.set(model, comm);
  }

  /** The comm `nrt_load_collectives` recorded for a model, or `undefined` for a model loaded with `nrt_load`. */
  commOf(model: object): CollectivesComm | undefined {
    return this.host.isLoaded(model) ? this.#comms.get(model) : undefined;
  }

  /** Prepared collectives not yet released. */
  get live(): number {
    return this.#live.size;
  }

  /** @internal A direct run in progress: close waits for it before it frees anything. */
  running(p: Promise<void>): void {
    const settled = p.catch(() => {});
    this.#running.add(settled);
    void settled.then(() => this.#running.delete(settled));
  }

  /** @internal */
  forget(cc: Collective): void {
    this.#live.delete(cc);
  }

  /**
   * `nrta_cc_prepare`: checks the ranks and buffers, and installs each rank's per-phase programs on its NeuronCore.
   *
   * @throws {NrtError} `NRT_INVALID` for a bad operation, count or tensor, ranks that are not one replica group of
   * models loaded with `nrt_load_collectives`; `NRT_RESOURCE` when a core is out of streams or semaphores.
   */
  async prepare(options: CollectiveOptions): Promise<Collective> {
    this.host.guard();
    const o = options as Partial<CollectiveOptions> | undefined;
    if (typeof o !== "object" || o === null) return invalid("the options must be an object");
    const op = OPS[o.op as keyof typeof OPS];
    if (op === undefined) invalid(`operation ${JSON.stringify(o.op)} is not all-reduce, all-gather or reduce-scatter`);
    const reduceName = o.reduce ?? "sum", dtypeName = o.dtype ?? "float32";
    const red = REDS[reduceName as keyof typeof REDS], dtype = DTYPES[dtypeName as keyof typeof DTYPES];
    if (red === undefined) invalid(`reduction ${JSON.stringify(o.reduce)} is not sum or max`);
    if (dtype === undefined) invalid(`element type ${JSON.stringify(o.dtype)} is not float32 or bfloat16`);
    const count = o.count as number;
    if (!Number.isSafeInteger(count) || count < 1) invalid(`count ${String(o.count)} is not a positive integer`);
    const inputs = o.inputs ?? [], outputs = o.outputs ?? [];
    if (!Array.isArray(inputs) || !Array.isArray(outputs) || inputs.length === 0 || inputs.length !== outputs.length) {
      invalid("inputs and outputs must be non-empty arrays of the same length (one tensor each per rank)");
    }
    const R = inputs.length;
    const sizes = ccSizes(op, dtype, count, R);
    const vncs: number[] = [];
    for (let i = 0; i < R; i++) {
      for (
        const [t, what, need] of [[inputs[i], "input", sizes.input], [outputs[i], "output", sizes.output]] as const
      ) {
        if (!(t instanceof Tensor) || t.owner !== this.host.owner) {
          invalid(`rank ${i}'s ${what} is not a tensor of this runtime`);
        }
        if (t.freed) invalid(`rank ${i}'s ${what} "${t.name}" was freed`);
        if (t.location !== "device" || t.devicePa === undefined) {
          invalid(`rank ${i}'s ${what} "${t.name}" is not in device memory`);
        }
        if (t.size < need) invalid(`rank ${i}'s ${what} "${t.name}" is ${t.size} bytes, ${need} needed`);
      }
      if (inputs[i].vnc !== outputs[i].vnc) {
        invalid(`rank ${i}'s input is on logical core ${inputs[i].vnc}, its output on ${outputs[i].vnc}`);
      }
      if (vncs.includes(inputs[i].vnc)) invalid(`logical core ${inputs[i].vnc} holds two ranks`);
      vncs.push(inputs[i].vnc);
    }
    // The ranks must be one replica group of models loaded with nrt_load_collectives.
    const comms = [...this.#comms].filter(([m]) => this.host.isLoaded(m));
    for (const v of vncs) {
      if (!comms.some(([m]) => (m as { vnc?: number }).vnc === v)) {
        invalid(`logical core ${v} has no model loaded with nrt_load_collectives`);
      }
    }
    const groups = comms[0][1].replicaGroups;
    const group = groups.find((g) => g.length === R && g.every((v) => vncs.includes(v)));
    if (group === undefined) {
      invalid(`logical cores [${vncs.join(", ")}] are not one replica group of ${JSON.stringify(groups)}`);
    }
    if (op !== NrtaCcOp.ALL_REDUCE) {
      // One pass reads inputs while writing outputs: no output may overlap any input (all-reduce has its barrier).
      for (const a of outputs) {
        for (const b of inputs) {
          const pa = a.devicePa!, pb = b.devicePa!;
          if (pa < pb + sizes.input && pb < pa + sizes.output) invalid(`output "${a.name}" overlaps input "${b.name}"`);
        }
      }
    }
    const s = this.host.services();
    const ranks: Rank[] = [];
    let bytesPerRun = 0;
    try {
      for (const v of vncs) {
        const tpb = this.host.tpbOf(v);
        ranks.push({ vnc: v, tpb, allocator: new ModelAllocator(s.ledger, tpb.device, tpb.nc), phases: [] });
      }
      const addrs: RankAddresses[] = [];
      for (const [i, r] of ranks.entries()) {
        const scratch = sizes.scratch > 0
          ? (await r.allocator.alloc(sizes.scratch, DmaMemUsageType.COLLECTIVES)).memory.pa
          : undefined;
        addrs.push({ input: inputs[i].devicePa!, output: outputs[i].devicePa!, scratch });
      }
      const plan = ccPlan(op, red, dtype, count, addrs);
      for (const phase of plan) {
        for (const [i, r] of ranks.entries()) {
          const queues = splitOverQueues(phase[i], ccElementBytes(dtype));
          bytesPerRun += phase[i].reduce((a, d) => a + d.bytes, 0);
          r.phases.push(await installPhase(s, r, queues));
        }
      }
    } catch (e) {
      for (const r of ranks) await releaseRank(s, r).catch(() => {});
      if (e instanceof RangeError) {
        throw new NrtError(NrtStatus.NRT_RESOURCE, `Cannot prepare collective: ${e.message}`, { cause: e });
      }
      throw e;
    }
    const cc = new Collective(
      this,
      { op: o.op!, reduce: reduceName, dtype: dtypeName, count, inputs, outputs },
      ranks,
      bytesPerRun,
    );
    this.#live.add(cc);
    return cc;
  }

  /** @internal `nrt_close`: releases every prepared collective (after the `nrta_*` queues drained). */
  async close(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
    let first: unknown;
    for (const cc of [...this.#live]) await cc.free().catch((e) => (first ??= e));
    this.#comms.clear();
    if (first !== undefined) throw first;
  }
}

/**
 * Installs one rank's program of one phase: `[stream][ring table][rings]` in one COLLECTIVES allocation, a doorbell
 * semaphore, a device model id and a stream slot.
 */
async function installPhase(
  s: { khal: Khal; target: HalTarget },
  r: Rank,
  queues: ReturnType<typeof splitOverQueues>,
): Promise<PhaseProgram> {
  const { khal, target } = s;
  const tpb = r.tpb;
  const bundle = collectCustomOpQueues(khal);
  const streamBytes = STREAM_SLOTS * SLOT_BYTES, tableBytes = CC_QUEUES * RING_TABLE_ENTRY_BYTES;
  const ringCount = queues.reduce((a, q) => a + q.length, 0);
  const bytes = new Uint8Array(streamBytes + tableBytes + Math.max(1, ringCount) * DMA_DESCRIPTOR_BYTES);
  const mem = await r.allocator.alloc(bytes.byteLength, DmaMemUsageType.COLLECTIVES);
  const pa = mem.memory.pa;
  let at = streamBytes + tableBytes;
  let total = 0;
  for (let q = 0; q < CC_QUEUES; q++) {
    encodeRingTableEntry(
      {
        engine: bundle[q].engine,
        queue: bundle[q].queue,
        ringType: KBIN_DMA_RING_TYPE_CUSTOM_OP,
        count: queues[q].length,
        ringPa: pa + at,
      },
      bytes,
      streamBytes + q * RING_TABLE_ENTRY_BYTES,
    );
    for (const d of queues[q]) {
      encodeDmaDescriptor(d, bytes, at);
      at += DMA_DESCRIPTOR_BYTES;
      total += d.bytes;
    }
  }
  const program: Instruction[] = [
    { op: Opcode.DMA_CONFIG, direction: DmaDirection.M2S, queues: CC_QUEUES, ringTable: pa + streamBytes },
    { op: Opcode.DMA_CONFIG_SIZE, m2sBytes: total, s2mBytes: 0 },
    { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
  ];
  program.forEach((ins, i) => bytes.set(encodeInstruction(ins), i * SLOT_BYTES));
  await target.portal.memWrite(mem.memory, 0, bytes);
  const spec = khal.spec;
  const installing = `Cannot install a collective's program on NeuronCore ${tpb.nc}`;
  const deviceModel = takeId(tpb.modelIds, DEVICE_MODEL_IDS, "device model id", installing);
  let doorbell: number | undefined, slot: number | undefined;
  try {
    doorbell = takeId(tpb.semaphores, spec.semaphoresPerCore, "semaphore", installing);
    slot = takeId(tpb.streamSlots, spec.csr.streamSlots, "stream slot", installing);
    await khal.streamInstall(target, tpb.nc, slot, { pa, slots: STREAM_SLOTS, doorbell, model: deviceModel });
  } catch (e) {
    tpb.modelIds.delete(deviceModel);
    if (doorbell !== undefined) tpb.semaphores.delete(doorbell);
    if (slot !== undefined) tpb.streamSlots.delete(slot);
    throw e;
  }
  // The program has no completion semaphore of its own (its end is the EXEC_DONE record): `completion` names the doorbell.
  return {
    tpb,
    deviceModel,
    allocator: r.allocator,
    doorbell,
    completion: doorbell,
    streamSlot: slot,
    rings: mem,
    plans: [],
    boundPa: [],
    bufferPa: [],
    hasCustomOps: false,
    // A phase stream has no library to load and no MODEL_SWITCH: [DMA_CONFIG][DMA_CONFIG_SIZE] then the postamble.
    layout: { preamble: 0, modelSwitch: 0, main: STREAM_SLOTS - 1, postamble: 1, functions: 0 },
    runs: 0,
  };
}
