/**
 * The size of a NeuronCore's notification-queue ring: large enough for every record one clean run of any model
 * installed on the core produces, so that a valid model never overflows it because the host was slow to drain.
 *
 * Seed: runtime-synthesis §3.2 (every custom-op call ends in an EVENT_SEMAPHORE) and §3.6 ("EVENT_SEMAPHORE:
 * completion_write_addr CSR += 1 → 16-B NQ record pushed"), so a run of N calls pushes N + 1 records (the calls'
 * EVENT_SEMAPHOREs and the EXEC_DONE); §3.5 (a libnrt reap thread drains the ring while the device runs and signals
 * the caller's `comp_efd`); lifecycle-error-model §5.3 (a full ring is `EXEC_FATAL_STATUS_SW_NQ_OVERFLOW` →
 * `NRT_EXEC_SW_NQ_OVERFLOW` 1204, read from the interrupt cause register).
 *
 * Ours (the seeds give no ring size): the ring holds {@linkcode NQ_CAPACITY} records at bring-up, and a load whose
 * stream pushes more than `NQ_CAPACITY − NQ_HEADROOM` records per clean run grows it to the smallest power of two
 * that holds those records plus {@linkcode NQ_HEADROOM}; the unload of the last model that needed it (or the unwind
 * of a failed load) shrinks it back. The host still drains the ring on every wake, as the seed's reap thread does;
 * the size only takes the host's pace out of a valid run's verdict. Without it, a 40,000-call NEFF pushed 40,001
 * records into a 1,024-record ring at about 45 records per millisecond, so any pause of the host's thread over about
 * 23 ms (a garbage collection, a load's synchronous parse, the scheduler on a shared machine) lost records and failed
 * the execution with 1204, more often the more instances were warmed up. A real overflow is reported as before: a
 * burst the ring cannot hold (the `nq-overflow` fault), or error records the host does not drain in time.
 *
 * The ring is re-pointed in the core's turn (`CoreQueue`), between executions: the device restarts it at head 0
 * (the 24-byte NQ register block's rule), and the host's tail starts at 0 with it. On hardware the runtime also
 * chooses the ring's size: the driver's NQ ioctls take it, one of them re-initialises a ring with a reallocation
 * (`NEURON_IOCTL_NOTIFICATIONS_INIT_WITH_REALLOC_V2`, docs/portal-ndl.md).
 *
 * @module
 */
import { DmaMemUsageType, type DmemLedger } from "../dmem/dmem.ts";
import { NrtError } from "../error.ts";
import { type Instruction, NOTIFICATION_BYTES, Opcode } from "../isa.ts";
import type { HalTarget, Khal } from "../khal.ts";
import type { Logger } from "../log.ts";
import { NrtStatus } from "../status.ts";
import { type EventSink, NQ_CAPACITY, type Tpb } from "./tpb.ts";

/**
 * Records a ring keeps free beyond one clean run's (ours): room for what else a run may report — the per-core error
 * records of a join, non-fatal records — while the host catches up. Models of up to 512 records per run (511 calls)
 * keep the bring-up ring.
 */
export const NQ_HEADROOM = 512;

/** The largest ring (records): 2^26 × 16 bytes = 1 GiB of host memory, far past any NEFF the size cap admits. */
export const NQ_MAX_CAPACITY = 1 << 26;

/** What resizing a ring needs. */
export interface NqServices {
  /** HAL. */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Ledger. */
  readonly ledger: DmemLedger;
  /** Event sink. */
  readonly event: EventSink;
  /** Where a failed shrink is reported. */
  readonly log?: Logger;
}

/** The records one clean run of `program` pushes: one per NOTIFY and one per EVENT_SEMAPHORE. */
export function runRecords(program: readonly Instruction[]): number {
  let n = 0;
  for (const ins of program) if (ins.op === Opcode.NOTIFY || ins.op === Opcode.EVENT_SEMAPHORE) n++;
  return n;
}

/**
 * The ring a core needs for runs of at most `records` records: {@linkcode NQ_CAPACITY}, or the smallest power of two
 * that holds `records + NQ_HEADROOM` (a power of two, so `head % capacity` stays continuous when the u32 head wraps).
 *
 * @throws {RangeError} `records` is not a count, or needs more than {@linkcode NQ_MAX_CAPACITY}.
 */
export function nqCapacityFor(records: number): number {
  if (!Number.isSafeInteger(records) || records < 0) throw new RangeError(`${records} is not a record count`);
  let capacity = NQ_CAPACITY;
  while (capacity < records + NQ_HEADROOM) {
    if (capacity >= NQ_MAX_CAPACITY) {
      throw new RangeError(
        `${records} notification records per run need a ring over ${NQ_MAX_CAPACITY} records (${
          NQ_MAX_CAPACITY * NOTIFICATION_BYTES
        } bytes)`,
      );
    }
    capacity *= 2;
  }
  return capacity;
}

/** The ring `tpb` needs for the runs of the models registered on it. */
function wanted(tpb: Tpb): number {
  let most = 0;
  for (const r of tpb.nqRecords.values()) if (r > most) most = r;
  return nqCapacityFor(most);
}

/**
 * Registers that runs of the model with device model id `model` push `records` records, and grows the core's ring
 * if they do not fit it with {@linkcode NQ_HEADROOM} to spare. Models that fit leave the ring as it is and take no
 * turn on the core.
 *
 * @throws {NrtError} `NRT_RESOURCE` when the ring cannot be made that large (the registration is withdrawn).
 */
export async function nqReserve(s: NqServices, tpb: Tpb, model: number, records: number, name: string): Promise<void> {
  try {
    nqCapacityFor(records);
  } catch (e) {
    throw new NrtError(NrtStatus.NRT_RESOURCE, `Cannot load NEFF "${name}": ${(e as Error).message}`);
  }
  tpb.nqRecords.set(model, records);
  try {
    await nqFit(s, tpb);
  } catch (e) {
    tpb.nqRecords.delete(model);
    const why = e instanceof Error ? e.message : String(e);
    throw new NrtError(
      NrtStatus.NRT_RESOURCE,
      `Cannot load NEFF "${name}": its ${records} notification records per execution need a notification queue of ${
        nqCapacityFor(records)
      } records on NeuronCore ${tpb.nc}: ${why}`,
      { cause: e },
    );
  }
}

/**
 * Withdraws the registration of device model id `model` (at once, before the first await: the id may be taken again
 * right after) and shrinks the core's ring if no model left needs it that large. Never rejects: a failed shrink keeps
 * the larger ring and is logged (the unload itself succeeded).
 */
export async function nqRelease(s: NqServices, tpb: Tpb, model: number): Promise<void> {
  if (!tpb.nqRecords.delete(model)) return;
  try {
    await nqFit(s, tpb);
  } catch (e) {
    s.log?.warn(
      `[ND ${tpb.device}][NC ${tpb.nc}] notification queue kept at ${tpb.nq?.capacity} records: ${
        e instanceof Error ? e.message : String(e)
      }`,
    );
  }
}

/**
 * Re-points the core's ring at one of the size its registered models need, in the core's turn, when it differs from
 * the current one: the new ring is allocated and registered (the device restarts it at head 0), then the old one is
 * freed. Nothing happens while the core is halted for teardown or after its ring is destroyed.
 */
async function nqFit(s: NqServices, tpb: Tpb): Promise<void> {
  if (tpb.nq === undefined || tpb.halted || wanted(tpb) === tpb.nq.capacity) return;
  using turn = tpb.queue.acquire();
  await turn.ready;
  const old = tpb.nq;
  // Looked at again in the turn: a resize queued before this one may have done it already.
  if (old === undefined || tpb.halted) return;
  const capacity = wanted(tpb);
  if (capacity === old.capacity) return;
  const dmem = await s.ledger.alloc(
    tpb.device,
    tpb.nc,
    capacity * NOTIFICATION_BYTES,
    DmaMemUsageType.NOTIFICATIONS,
    "host",
  );
  const ring = { ring: dmem.memory, dmem, capacity, tail: 0 };
  try {
    await s.khal.nqInit(s.target, tpb.nc, ring);
  } catch (e) {
    await s.ledger.free(dmem).catch(() => {});
    throw e;
  }
  tpb.nq = ring;
  s.event(`notification_resize nc=${tpb.nc} capacity=${capacity}`);
  // The device no longer writes the old ring: failing to free it costs its bytes, not the load or unload.
  await s.ledger.free(old.dmem).catch((e: unknown) =>
    s.log?.warn(
      `[ND ${tpb.device}][NC ${tpb.nc}] the previous notification queue was not freed: ${
        e instanceof Error ? e.message : String(e)
      }`,
    )
  );
}
