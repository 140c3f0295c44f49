/**
 * The per-NeuronCore context (`tpb_t`) and its bring-up and teardown.
 *
 * Seed: runtime-synthesis §2.1 (`tpb_eng_init_hals_v2`, per NeuronCore: 5 NX cores + 8 Q7 pool cores created; the
 * stock signed Pool ucode loaded, then SILENTLY overridden by a registered `{iram, dram}` pair with no signature
 * check; `aws_hal_q7_ucode_eng_init` writes DRAM before IRAM to all 8 Q7 cores; `pool_stdio_block_init`; run-stall
 * released the per-arch way), spmd-teardown §5.2 (the 0x440-byte stdio HBM block, stdout/stderr queues wired in
 * slot [0]), §6.2 (`tdrv_destroy` per TPB: halt exec queue → 5 NX destroys → loadable-library destroys → 8 Q7
 * destroys, always all 8 → notification_destroy → pool_stdio_block_destroy → ucode_free_lib_set → model db), §6.3
 * (`ucode_core_destroy`: "device-side: stop image, free IRAM/DRAM").
 *
 * The teardown's device effects ({@linkcode tpbDestroy}): each of the 13 cores' `ucode_core_print_logs` has the
 * device move the core's pending kernel output into the pool_stdio rings, which the host drains to its logger right
 * away, before the core's `ucode_core_destroy` stops its image and returns its IRAM/DRAM; `pool_stdio_block_destroy`
 * runs only when the halt request succeeded (`if (!halt_error)`) and detaches the Q7 file-IO table before its frees.
 * Ours (the seeds leave them open): the halt request is acknowledged by the device answering a read of its NQ head
 * after the core's exec queue drained, and a failure of that read is the halt error; with a halt error the stdio block
 * and its rings stay allocated and the file-IO table keeps pointing at them (the device may still write there), and
 * the runtime logs it; NX cores run no kernel code in the simulator, so their print moves nothing.
 *
 * @module
 */
import { CoreQueue } from "./core_queue.ts";
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES } from "../config.ts";
import { DmaMemUsageType, type Dmem, type DmemLedger } from "../dmem/dmem.ts";
import { NOTIFICATION_BYTES } from "../isa.ts";
import {
  type HalTarget,
  type Khal,
  type NotificationQueue,
  overridePoolUcode,
  type PoolUcodeOverride,
} from "../khal.ts";
import type { Logger } from "../log.ts";
import {
  type PoolStdioBlock,
  poolStdioBlockDestroy,
  poolStdioBlockDrain,
  poolStdioBlockInit,
} from "../stdio/pool_stdio.ts";

export { POOL_STDIO_BLOCK_BYTES } from "../stdio/pool_stdio.ts";

/** The 5 NX engine cores, in creation order ("TENSOR/SCALAR/GPSIMD/VECTOR/SYNC"). */
export const NX_CORE_NAMES: readonly string[] = ["PE", "ACT", "POOL", "DVE", "SP"];

/** A host-side `nrtucode` core handle. */
export interface UcodeCore {
  /** `nx` engine core or `q7` pool core. */
  readonly kind: "nx" | "q7";
  /** Index within its kind. */
  readonly index: number;
  /** Display name. */
  readonly name: string;
}

/** A staged library image shared by every model of a core (`ulib_set_info_extisa_only`). */
export interface StagedLibrary {
  /** Device memory of the image. */
  readonly dmem: Dmem;
  /** Models using it. */
  users: number;
  /** The model install that staged it (its unwind frees only its own staging, never a cached one). */
  readonly stagedBy?: unknown;
}

/** One NeuronCore of the process context tree (`tpb_t`). */
export interface Tpb {
  /** Device index. */
  readonly device: number;
  /** Physical NeuronCore index on the device. */
  readonly nc: number;
  /** The 5 NX cores (`tpb+0x9918`). */
  nx: UcodeCore[];
  /** The 8 Q7 pool cores (`tpb+0x9940`). */
  q7: UcodeCore[];
  /** Notification queue (re-pointed at a larger or smaller ring by `nq_ring.ts`, in the core's turn). */
  nq?: NotificationQueue & { dmem: Dmem };
  /** Records one clean run pushes, per device model id of the models installed here that registered (`nq_ring.ts`). */
  readonly nqRecords: Map<number, number>;
  /** `pool_stdio_block_t`: the 0x440-byte stdio HBM block and its stdout/stderr rings (seed: spmd-teardown §5). */
  stdio?: PoolStdioBlock;
  /** Single ext-ISA library sets, staged once per core and shared (keyed by the image's digest). */
  readonly extIsaLibs: Map<string, StagedLibrary>;
  /** Sequencer stream slots in use. */
  readonly streamSlots: Set<number>;
  /** Semaphores in use (0 is never handed out). */
  readonly semaphores: Set<number>;
  /** Device model ids (15 bits, the stream-table field) of the models installed on this core (0 is never used). */
  readonly modelIds: Set<number>;
  /** The core's FIFO: executions and opcode-table swaps take turns on it (`h_running_model` serialisation). */
  readonly queue: CoreQueue;
  /** `ulib_staging_lock`: the shared-library stagings in flight on this core, by library digest. */
  readonly stagingInFlight: Map<string, Promise<StagedLibrary>>;
  /** Device model id of the model that ran last. */
  runningModel: number;
  /** Set when the exec queue is halted for teardown. */
  halted: boolean;
}

/** Records the lifecycle steps a test or an operator may want to see, in order. */
export type EventSink = (event: string) => void;

/** What bring-up needs. */
export interface TpbServices {
  /** HAL. */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Ledger. */
  readonly ledger: DmemLedger;
  /** Logger. */
  readonly log: Logger;
  /** Event sink. */
  readonly event: EventSink;
  /**
   * `NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES` (`RuntimeConfig.gpsimdStdoutQueueSizeBytes`): the stdout ring per
   * NeuronCore, 0 = off; defaults to {@linkcode DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES}.
   */
  readonly gpsimdStdoutQueueSizeBytes?: number;
}

/**
 * Notification-queue capacity in records at bring-up (power of two; ours, the seeds give none). A load whose runs push
 * more records than this ring holds with room to spare grows it (`nq_ring.ts`).
 */
export const NQ_CAPACITY = 1024;

/**
 * `tpb_eng_init_hals_v2` for one NeuronCore. `custom` is the image registered by `nrt_set_pool_eng_ucode`, if any.
 * On failure everything created so far is destroyed before the error propagates.
 */
export async function tpbInit(s: TpbServices, nc: number, custom: PoolUcodeOverride | undefined): Promise<Tpb> {
  const tpb: Tpb = {
    device: s.target.device,
    nc,
    nx: [],
    q7: [],
    extIsaLibs: new Map(),
    streamSlots: new Set(),
    semaphores: new Set([0]),
    modelIds: new Set([0]),
    nqRecords: new Map(),
    queue: new CoreQueue(),
    stagingInFlight: new Map(),
    runningModel: -1,
    halted: false,
  };
  try {
    for (let i = 0; i < s.khal.spec.nxCoresPerNc; i++) {
      tpb.nx.push({ kind: "nx", index: i, name: NX_CORE_NAMES[i] ?? `NX${i}` });
      s.event(`ucode_nx_core_create nc=${nc} ${NX_CORE_NAMES[i]}`);
    }
    for (let i = 0; i < s.khal.spec.q7CoresPerNc; i++) {
      tpb.q7.push({ kind: "q7", index: i, name: `Q7_${i}` });
      s.event(`ucode_pooling_q7_core_create nc=${nc} ${i}`);
    }
    // seed: runtime-synthesis §2.1 — the stock image first, then the UNCONDITIONAL override of each registered half
    // on its own (`if (pool_eng_iram_bin) cfg.iram = …; if (pool_eng_dram_bin) cfg.dram = …`): no signature check,
    // no warning log; a missing half keeps the stock one.
    const image = overridePoolUcode(s.khal.stockPoolUcode(), custom);
    await s.khal.q7HoldRunStall(s.target, nc);
    await s.khal.q7UcodeEngInit(s.target, nc, image);
    // Notification queue (host DRAM ring of 16-byte records).
    const nqMem = await s.ledger.alloc(
      tpb.device,
      nc,
      NQ_CAPACITY * NOTIFICATION_BYTES,
      DmaMemUsageType.NOTIFICATIONS,
      "host",
    );
    tpb.nq = { ring: nqMem.memory, dmem: nqMem, capacity: NQ_CAPACITY, tail: 0 };
    await s.khal.nqInit(s.target, nc, tpb.nq);
    s.event(`notification_init nc=${nc}`);
    // pool_stdio_block_init: the HBM block the Q7 file-IO table points at, stdout/stderr wired in slot [0].
    tpb.stdio = await poolStdioBlockInit(s, nc, s.gpsimdStdoutQueueSizeBytes ?? DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES);
    s.event(`pool_stdio_block_init nc=${nc}`);
    await s.khal.q7ReleaseRunStall(s.target, nc);
    s.event(`release_run_stall nc=${nc}`);
    return tpb;
  } catch (e) {
    await tpbDestroy(s, tpb).catch(() => {});
    throw e;
  }
}

/**
 * `hw_exec_queue_add_halt_request` (seed: spmd-teardown §6.2, "gates the core destroys"): the core takes no new work,
 * its exec queue drains, and the device acknowledges. Ours: the acknowledgement is the device answering a read of its
 * NQ head; the failure of that read is the `halt_error` that skips `pool_stdio_block_destroy`.
 *
 * @returns The halt error, or `undefined` when the halt succeeded.
 */
async function hwExecQueueAddHaltRequest(s: TpbServices, tpb: Tpb): Promise<unknown> {
  tpb.halted = true;
  await tpb.queue.idle();
  try {
    await s.khal.nqHead(s.target, tpb.nc);
    return undefined;
  } catch (e) {
    return e ?? new Error("halt request failed");
  }
}

/**
 * `ucode_core_print_logs` then `ucode_core_destroy` of one core (seed: spmd-teardown §6.2, §6.3): the device moves
 * the core's pending kernel output into the stdio rings, the host drains them to its logger, then the device stops
 * the core's image and frees its IRAM/DRAM.
 */
async function ucodeCorePrintAndDestroy(
  s: TpbServices,
  tpb: Tpb,
  core: UcodeCore,
  step: (f: () => Promise<void>) => Promise<void>,
): Promise<void> {
  await step(async () => {
    await s.khal.ucodeCorePrintLogs(s.target, tpb.nc, core.kind, core.index);
    await poolStdioBlockDrain(s, tpb.stdio);
  });
  await step(() => s.khal.ucodeCoreDestroy(s.target, tpb.nc, core.kind, core.index));
}

/**
 * `tdrv_destroy`'s per-TPB spine, in the seed's order (spmd-teardown §6.2, §6.7): halt the exec queue; print and
 * destroy the 5 NX cores; destroy the loadable libraries; print and destroy the 8 Q7 cores — always all 8, whatever
 * `total_cpus` the loaded libraries declared (§6.2 GOTCHA); notification_destroy; `if (!halt_error)`
 * pool_stdio_block_destroy; ucode_free_lib_set; the model db (`unstageModels`). A failing step does not stop the
 * later ones; the first error is thrown at the end.
 */
export async function tpbDestroy(s: TpbServices, tpb: Tpb, unstageModels?: () => Promise<void>): Promise<void> {
  let first: unknown;
  const step = async (f: () => Promise<void>) => {
    try {
      await f();
    } catch (e) {
      first ??= e;
    }
  };
  const haltError = await hwExecQueueAddHaltRequest(s, tpb);
  s.event(`hw_exec_queue_add_halt_request nc=${tpb.nc}${haltError === undefined ? "" : " failed"}`);
  for (const core of tpb.nx.splice(0)) {
    await ucodeCorePrintAndDestroy(s, tpb, core, step);
    s.event(`ucode_core_destroy nc=${tpb.nc} NX ${core.name}`);
  }
  for (const [key, lib] of tpb.extIsaLibs) {
    s.event(`ucode_ll_destroy nc=${tpb.nc} ${key.slice(0, 8)} users=${lib.users}`);
  }
  for (const core of tpb.q7.splice(0)) {
    await ucodeCorePrintAndDestroy(s, tpb, core, step);
    s.event(`ucode_core_destroy nc=${tpb.nc} Q7 ${core.index}`);
  }
  if (tpb.nq !== undefined) {
    const nq = tpb.nq;
    tpb.nq = undefined;
    await step(() => s.khal.nqDestroy(s.target, tpb.nc));
    await step(() => s.ledger.free(nq.dmem));
    s.event(`notification_destroy nc=${tpb.nc}`);
  }
  if (tpb.stdio !== undefined && haltError === undefined) {
    const b = tpb.stdio;
    tpb.stdio = undefined;
    await step(() => poolStdioBlockDestroy(s, b));
    s.event(`pool_stdio_block_destroy nc=${tpb.nc}`);
  } else if (tpb.stdio !== undefined) {
    // seed §6.2: `if (!halt_error) pool_stdio_block_destroy(…)` — skipped: the block, its rings and the file-IO table
    // stay as they are (ours: logged, and left allocated, since the device may still write into them).
    const why = haltError instanceof Error ? haltError.message : String(haltError);
    s.log.warn(`[ND ${tpb.device}][NC ${tpb.nc}] exec queue halt failed (${why}): pool stdio block kept`, {
      nc: tpb.nc,
    });
    tpb.stdio = undefined;
  }
  for (const lib of tpb.extIsaLibs.values()) await step(() => s.ledger.free(lib.dmem));
  tpb.extIsaLibs.clear();
  s.event(`ucode_free_lib_set nc=${tpb.nc}`);
  if (unstageModels !== undefined) await step(unstageModels);
  s.event(`model_db_destroy nc=${tpb.nc}`);
  if (first !== undefined) throw first;
}

/**
 * Takes the lowest free id in `[1, limit)` from `used`.
 *
 * @param context What is being installed, the start of the error's message (`Cannot load NEFF "x" on NeuronCore 0`).
 * @throws {NrtError} `NRT_RESOURCE` when all are in use: an install that runs out of a device resource (seed:
 *   lifecycle-error-model §2.7, `kbl_model_add` fails with NRT_RESOURCE).
 */
export function takeId(used: Set<number>, limit: number, what: string, context: string): number {
  for (let i = 1; i < limit; i++) {
    if (!used.has(i)) {
      used.add(i);
      return i;
    }
  }
  throw new NrtError(NrtStatus.NRT_RESOURCE, `${context}: no free ${what} (all ${limit - 1} in use)`);
}
