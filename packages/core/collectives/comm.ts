/**
 * The collective-communication checks of `nrt_load_collectives`: the global comm before the load and the replica
 * groups after it.
 *
 * Seed: lifecycle-error-model §2.1 (`nrt_load_collectives` wraps the same `nrt_load_util` with
 * `enc_validate_global_comm` before, and `kmgr_trace_set_cc_global_id` + `kmgr_validate_replica_groups` — "the
 * replica-group ↔ comm-channel count check" — after), §4.1 (`NRT_INVALID` 2 is "invalid argument / malformed
 * input"). The seed names the checks, not their rules; the rules below are ours (`docs/collectives.md`): one device,
 * so `g_device_count` must be 1 and `g_device_id` 0; the comm channels are the logical cores the process sees; the
 * replica groups partition them into groups of one size.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

/** What `nrt_load_collectives` records on a model (`kmgr_trace_set_cc_global_id` and the checked groups). */
export interface CollectivesComm {
  /** `g_device_id`: this device's rank among the devices of the job. */
  readonly globalDeviceId: number;
  /** `g_device_count`: devices in the job. */
  readonly globalDeviceCount: number;
  /** The replica groups: ranks (logical cores) that reduce together, each group in rank order. */
  readonly replicaGroups: readonly (readonly number[])[];
}

const invalid = (why: string): never => {
  throw new NrtError(NrtStatus.NRT_INVALID, `Cannot load collectives: ${why}`);
};

/**
 * `enc_validate_global_comm`: `g_device_id` and `g_device_count` are integers with `0 ≤ id < count`; ours: collectives
 * span one device (the simulator has no EFA fabric), so the count must be 1.
 *
 * @throws {NrtError} `NRT_INVALID`.
 */
export function encValidateGlobalComm(globalDeviceId: number, globalDeviceCount: number): void {
  if (!Number.isSafeInteger(globalDeviceCount) || globalDeviceCount < 1) {
    invalid(`g_device_count ${globalDeviceCount} is not a positive integer`);
  }
  if (!Number.isSafeInteger(globalDeviceId) || globalDeviceId < 0 || globalDeviceId >= globalDeviceCount) {
    invalid(`g_device_id ${globalDeviceId} is outside [0, ${globalDeviceCount})`);
  }
  if (globalDeviceCount !== 1) {
    invalid(`g_device_count ${globalDeviceCount}: collectives span one device here (no network proxy)`);
  }
}

/**
 * `kmgr_validate_replica_groups`: every group is a non-empty list of distinct comm channels (logical cores
 * `0..channels-1`), the groups are disjoint and of one size, and together they hold exactly `channels` ranks (the
 * replica-group ↔ comm-channel count check). Omitted groups mean one group of every channel in order (ours).
 *
 * @returns The groups, copied and frozen.
 * @throws {NrtError} `NRT_INVALID`.
 */
export function kmgrValidateReplicaGroups(groups: unknown, channels: number): readonly (readonly number[])[] {
  if (groups === undefined) return Object.freeze([Object.freeze([...Array(channels).keys()])]);
  if (!Array.isArray(groups) || groups.length === 0) {
    return invalid("the replica groups must be a non-empty array of rank lists");
  }
  const seen = new Set<number>();
  const out: number[][] = [];
  for (const [i, g] of groups.entries()) {
    if (!Array.isArray(g) || g.length === 0) return invalid(`replica group ${i} must be a non-empty array of ranks`);
    for (const r of g) {
      if (!Number.isSafeInteger(r) || r < 0 || r >= channels) {
        invalid(
          `replica group ${i} names rank ${String(r)}; the comm has ${channels} channels (ranks 0..${channels - 1})`,
        );
      }
      if (seen.has(r)) invalid(`rank ${r} is in more than one place of the replica groups`);
      seen.add(r);
    }
    if (g.length !== groups[0].length) {
      invalid(
        `replica group ${i} has ${g.length} ranks, group 0 has ${groups[0].length}; the groups must be of one size`,
      );
    }
    out.push([...g]);
  }
  if (seen.size !== channels) invalid(`the replica groups hold ${seen.size} ranks, the comm has ${channels} channels`);
  return Object.freeze(out.map((g) => Object.freeze(g)));
}
