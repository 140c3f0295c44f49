/**
 * Logical NeuronCores (`vtpb` / vNC / LNC): how the visible physical cores are grouped, which logical core a load
 * reserves (`nrt_vnc_usage_inc` / `nrt_vnc_usage_dec`), and the core counts `nrt_get_*_count` report.
 *
 * Seed: runtime-synthesis §4.5 (a `virtual_core_t` groups 1–2 physical cores; `NEURON_RT_VIRTUAL_CORE_SIZE`, default
 * 2, power of two, `nc_per_device % size == 0`, Sunda forces 1; `owned_vcores[]` is the process's slice),
 * lifecycle-error-model §2.2 (`nrt_vnc_usage_inc` reserves the slot first; "Insufficient number of pncs, required:
 * %u, available: %u" → `NRT_LOAD_NOT_ENOUGH_NC`; every later failure releases the slot), §3.1 (`nrt_vnc_usage_dec`
 * is the last step of unload).
 *
 * Our reading of `NEURON_RT_VISIBLE_CORES` / `NEURON_RT_NUM_CORES`: they name PHYSICAL cores, and the visible range
 * must start on, and cover, whole logical cores (`[0, 1]` with size 2 is one vNC; `[1, 2]` is refused).
 *
 * @module
 */
import { NrtError } from "../error.ts";
import type { SiliconSpec } from "../silicon_spec.ts";
import { NrtStatus } from "../status.ts";

/** Where `load` may put a model: a logical core index, or `"auto"` for the least loaded one. */
export type VncChoice = number | "auto";

/** How busy a logical core is, for {@linkcode VncTable.reserve}`("auto")`. */
export interface VncLoad {
  /** Models resident on it. */
  readonly models: number;
  /** Device-memory bytes booked on its physical cores. */
  readonly bytes: number;
}

/**
 * The virtual core size the runtime uses: the requested one (default: the arch's), unless the arch forces one
 * (Sunda: 1). It must be a power of two dividing the device's NeuronCore count.
 */
export function resolveVirtualCoreSize(spec: SiliconSpec, requested: number | undefined, ncPerDevice: number): number {
  let size = requested ?? spec.defaultVirtualCoreSize;
  if (spec.forcedVirtualCoreSize !== null) size = spec.forcedVirtualCoreSize;
  if (!Number.isInteger(size) || size < 1 || (size & (size - 1)) !== 0 || ncPerDevice % size !== 0) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Invalid NEURON_RT_VIRTUAL_CORE_SIZE ${size}: it must be a power of two dividing the ${ncPerDevice} NeuronCores of a ${spec.name} device`,
    );
  }
  return size;
}

/** The seed's admission error (lifecycle-error-model §2.2). */
export function insufficientPncs(required: number, available: number): NrtError {
  return new NrtError(
    NrtStatus.NRT_LOAD_NOT_ENOUGH_NC,
    `Insufficient number of pncs, required: ${required}, available: ${available}`,
  );
}

/** The process's logical cores over its visible physical cores, with the per-vNC usage counts. */
export class VncTable {
  /** Physical cores per logical core. */
  readonly size: number;
  /** NeuronCores of the device (`nrt_get_total_nc_count`). */
  readonly totalNc: number;
  /** Visible physical cores, ascending and contiguous. */
  readonly physical: readonly number[];
  readonly #usage: number[];

  /**
   * Groups `physical` into logical cores of `size`.
   *
   * @throws {NrtError} `NRT_INVALID` when a visible core does not exist or the range splits a logical core.
   */
  constructor(physical: readonly number[], size: number, totalNc: number) {
    for (const k of physical) {
      if (k >= totalNc) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Invalid NEURON_RT_VISIBLE_CORES: core ${k} does not exist (the device has ${totalNc})`,
        );
      }
    }
    if (physical.length === 0 || physical[0] % size !== 0 || physical.length % size !== 0) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Invalid NEURON_RT_VISIBLE_CORES ${
          physical.join(",") || "(none)"
        }: with NEURON_RT_VIRTUAL_CORE_SIZE ${size} the visible cores must cover whole logical cores`,
      );
    }
    this.size = size;
    this.totalNc = totalNc;
    this.physical = Object.freeze([...physical]);
    this.#usage = new Array(physical.length / size).fill(0);
  }

  /** Logical cores visible to the process (`nrt_get_visible_vnc_count`). */
  get visibleCount(): number {
    return this.#usage.length;
  }

  /** Logical cores of the device (`nrt_get_total_vnc_count`). */
  get totalCount(): number {
    return this.totalNc / this.size;
  }

  /** Models holding a reservation on `vnc`. */
  usage(vnc: number): number {
    return this.#usage[vnc] ?? 0;
  }

  /** Indices into the visible physical cores (`Runtime` tpb slots) of logical core `vnc`. */
  slots(vnc: number): number[] {
    return Array.from({ length: this.size }, (_, k) => vnc * this.size + k);
  }

  /**
   * The stage-time check (`dlr_kelf_stage`: `num_tpbs < nkbin`): a model spanning `span` physical cores needs a
   * logical core at least that wide.
   *
   * @throws {NrtError} `NRT_LOAD_NOT_ENOUGH_NC`, R = `span` (the NEFF's `lnc_size`), A = the virtual core size.
   */
  checkSpan(span: number): void {
    if (span > this.size) throw insufficientPncs(span, this.size);
  }

  /** Whether `vnc` names a visible logical core. */
  has(vnc: number): boolean {
    return Number.isInteger(vnc) && vnc >= 0 && vnc < this.#usage.length;
  }

  /**
   * `nrt_vnc_usage_inc`: reserves a slot on `choice` and returns the logical core. `"auto"` picks the least loaded
   * (fewest models, then fewest bytes, then the lowest index).
   *
   * @throws {NrtError} `NRT_LOAD_NOT_ENOUGH_NC` — "Insufficient number of pncs, required: R, available: A" — for a
   * logical core past the visible ones: R = the physical cores up to and including it, A = the visible ones.
   */
  reserve(choice: VncChoice, load?: (vnc: number) => VncLoad): number {
    let vnc: number;
    if (choice === "auto") {
      vnc = 0;
      let best: VncLoad | undefined;
      for (let v = 0; v < this.#usage.length; v++) {
        const l = load?.(v) ?? { models: this.#usage[v], bytes: 0 };
        if (best === undefined || l.models < best.models || (l.models === best.models && l.bytes < best.bytes)) {
          best = l;
          vnc = v;
        }
      }
    } else {
      if (!Number.isInteger(choice) || choice < 0) {
        throw new RangeError(`Logical core ${String(choice)} is not a non-negative integer`);
      }
      if (choice >= this.#usage.length) throw insufficientPncs((choice + 1) * this.size, this.physical.length);
      vnc = choice;
    }
    this.#usage[vnc]++;
    return vnc;
  }

  /** `nrt_vnc_usage_dec`: releases one reservation. */
  release(vnc: number): void {
    if (!(this.#usage[vnc] > 0)) throw new RangeError(`Logical core ${vnc} has no reservation to release`);
    this.#usage[vnc]--;
  }
}
