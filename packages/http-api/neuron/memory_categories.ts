/**
 * Our dmem usage categories (`DmaMemUsageType`, seed: runtime-synthesis §4.3) mapped onto the categories
 * neuron-monitor reports in `memory_used` (Neuron Monitor User Guide, "memory_used"):
 * - device memory, per NeuronCore (`usage_breakdown.neuroncore_memory_usage`): `constants`, `model_code`,
 *   `model_shared_scratchpad`, `runtime_memory`, `tensors`;
 * - host memory (`usage_breakdown.host`): `application_memory`, `constants`, `dma_buffers`, `tensors`;
 * - a loaded model's device memory (`loaded_models[].subgraphs.*.memory_used_bytes.usage_breakdown.neuron_device`):
 *   `constants`, `model_code`, `runtime_memory`, `tensors`.
 *
 * Which dmem category lands where is ours ("Ours"), following the guide's definitions and the Neuron device memory
 * page ("model code ... includes a micro-code overhead"):
 *
 * | dmem category | device | host |
 * |---|---|---|
 * | CODE, INSTRUCTIONS, UCODE_LIBS, UCODE_TABLE | model_code | application_memory |
 * | CONSTANTS | constants | constants |
 * | TENSORS, IO_STAGING, HOST_INPUT, HOST_OUTPUT, SCRATCHPAD | tensors | tensors |
 * | SHARED_SCRATCHPAD | model_shared_scratchpad | application_memory |
 * | DMA_RINGS, DMA_DESCRIPTORS, NOTIFICATIONS, POOL_STDIO | runtime_memory | dma_buffers |
 * | ARG_TABLES, COLLECTIVES, PROFILER, DEBUG, RUNTIME, MISC, UNCATEGORIZED | runtime_memory | application_memory |
 *
 * A per-model scratchpad holds a model's intermediate tensors, hence `tensors`. A loaded model's breakdown has no
 * shared-scratchpad category (the scratchpad is shared between models), so a model's SHARED_SCRATCHPAD bytes are
 * counted as its `runtime_memory` (Ours).
 *
 * One definition for every reader: `nrt monitor`'s reports (`@nrt/cli`) and the exporter's metric names on
 * `/metrics` (`metrics.ts`).
 *
 * @module
 */
import { DMA_MEM_USAGE_TOTAL, DmaMemUsageType } from "@nrt/core";

/**
 * One row of the device-memory ledger (`memory_usage_nc[nc]`), indexed by `DmaMemUsageType`. A row of 23 slots as
 * `DmemLedger.usage()` returns it is accepted; the total at index 22 is ignored.
 */
export type DmemUsageRow = ArrayLike<number>;

/** A category of `usage_breakdown.neuroncore_memory_usage`. */
export type DeviceMemoryCategory =
  | "constants"
  | "model_code"
  | "model_shared_scratchpad"
  | "runtime_memory"
  | "tensors";

/** A category of `usage_breakdown.host`. */
export type HostMemoryCategory = "application_memory" | "constants" | "dma_buffers" | "tensors";

/** A category of a loaded model's `usage_breakdown.neuron_device`. */
export type ModelMemoryCategory = "constants" | "model_code" | "runtime_memory" | "tensors";

/** The device categories in the order neuron-monitor documents them. */
export const DEVICE_MEMORY_CATEGORIES: readonly DeviceMemoryCategory[] = Object.freeze([
  "constants",
  "model_code",
  "model_shared_scratchpad",
  "runtime_memory",
  "tensors",
]);

/** The host categories in the order neuron-monitor documents them. */
export const HOST_MEMORY_CATEGORIES: readonly HostMemoryCategory[] = Object.freeze([
  "application_memory",
  "constants",
  "dma_buffers",
  "tensors",
]);

/** The model categories in the order neuron-monitor documents them. */
export const MODEL_MEMORY_CATEGORIES: readonly ModelMemoryCategory[] = Object.freeze([
  "constants",
  "model_code",
  "runtime_memory",
  "tensors",
]);

const T = DmaMemUsageType;

const DEVICE_TABLE = {
  [T.CODE]: "model_code",
  [T.TENSORS]: "tensors",
  [T.CONSTANTS]: "constants",
  [T.SCRATCHPAD]: "tensors",
  [T.SHARED_SCRATCHPAD]: "model_shared_scratchpad",
  [T.DMA_RINGS]: "runtime_memory",
  [T.INSTRUCTIONS]: "model_code",
  [T.NOTIFICATIONS]: "runtime_memory",
  [T.POOL_STDIO]: "runtime_memory",
  [T.UCODE_LIBS]: "model_code",
  [T.UCODE_TABLE]: "model_code",
  [T.IO_STAGING]: "tensors",
  [T.ARG_TABLES]: "runtime_memory",
  [T.COLLECTIVES]: "runtime_memory",
  [T.PROFILER]: "runtime_memory",
  [T.DEBUG]: "runtime_memory",
  [T.HOST_INPUT]: "tensors",
  [T.HOST_OUTPUT]: "tensors",
  [T.RUNTIME]: "runtime_memory",
  [T.DMA_DESCRIPTORS]: "runtime_memory",
  [T.MISC]: "runtime_memory",
  [T.UNCATEGORIZED]: "runtime_memory",
} satisfies Record<DmaMemUsageType, DeviceMemoryCategory>;

/**
 * Where each dmem category's device bytes are reported, keyed by `DmaMemUsageType` (Ours; the table in the module
 * doc). The table is checked to cover every category.
 */
export const DEVICE_CATEGORY_OF: Readonly<Record<number, DeviceMemoryCategory>> = Object.freeze(DEVICE_TABLE);

const HOST_TABLE = {
  [T.CODE]: "application_memory",
  [T.TENSORS]: "tensors",
  [T.CONSTANTS]: "constants",
  [T.SCRATCHPAD]: "tensors",
  [T.SHARED_SCRATCHPAD]: "application_memory",
  [T.DMA_RINGS]: "dma_buffers",
  [T.INSTRUCTIONS]: "application_memory",
  [T.NOTIFICATIONS]: "dma_buffers",
  [T.POOL_STDIO]: "dma_buffers",
  [T.UCODE_LIBS]: "application_memory",
  [T.UCODE_TABLE]: "application_memory",
  [T.IO_STAGING]: "tensors",
  [T.ARG_TABLES]: "application_memory",
  [T.COLLECTIVES]: "application_memory",
  [T.PROFILER]: "application_memory",
  [T.DEBUG]: "application_memory",
  [T.HOST_INPUT]: "tensors",
  [T.HOST_OUTPUT]: "tensors",
  [T.RUNTIME]: "application_memory",
  [T.DMA_DESCRIPTORS]: "dma_buffers",
  [T.MISC]: "application_memory",
  [T.UNCATEGORIZED]: "application_memory",
} satisfies Record<DmaMemUsageType, HostMemoryCategory>;

/**
 * Where each dmem category's host bytes are reported, keyed by `DmaMemUsageType` (Ours; the table in the module
 * doc). The table is checked to cover every category.
 */
export const HOST_CATEGORY_OF: Readonly<Record<number, HostMemoryCategory>> = Object.freeze(HOST_TABLE);

function checkedBytes(row: DmemUsageRow, slot: number): number {
  const v = slot < row.length ? row[slot] : 0;
  if (!Number.isFinite(v) || v < 0) {
    throw new RangeError(`Cannot map dmem usage: slot ${slot} holds ${v}, expected a non-negative byte count`);
  }
  return v;
}

function fold<C extends string>(
  row: DmemUsageRow,
  categories: readonly C[],
  categoryOf: (slot: number) => C,
): Record<C, number> {
  const out = Object.fromEntries(categories.map((c) => [c, 0])) as Record<C, number>;
  // Index DMA_MEM_USAGE_TOTAL (22) is the ledger's own total: never a category.
  for (let slot = 0; slot < DMA_MEM_USAGE_TOTAL; slot++) {
    out[categoryOf(slot)] += checkedBytes(row, slot);
  }
  return out;
}

/**
 * Folds one core's device-memory row into neuron-monitor's per-NeuronCore breakdown.
 *
 * @param row Bytes by dmem category (the ledger's total slot, if present, is ignored).
 * @returns The five documented categories, each a byte count.
 * @throws {RangeError} When a slot holds a negative or non-finite count.
 *
 * @example Fold a ledger row
 * ```ts ignore
 * deviceMemoryBreakdown(ledger.usage(0, 0)); // { constants: ..., model_code: ..., ... }
 * ```
 */
export function deviceMemoryBreakdown(row: DmemUsageRow): Record<DeviceMemoryCategory, number> {
  return fold(row, DEVICE_MEMORY_CATEGORIES, (slot) => DEVICE_CATEGORY_OF[slot]);
}

/**
 * Folds a process's host-memory row into neuron-monitor's host breakdown.
 *
 * @param row Host bytes by dmem category.
 * @param applicationBytes Other host memory of the process, added to `application_memory`.
 * @returns The four documented categories, each a byte count.
 */
export function hostMemoryBreakdown(row: DmemUsageRow, applicationBytes = 0): Record<HostMemoryCategory, number> {
  const out = fold(row, HOST_MEMORY_CATEGORIES, (slot) => HOST_CATEGORY_OF[slot]);
  out.application_memory += applicationBytes;
  return out;
}

/**
 * Folds a loaded model's device-memory row into the model breakdown, which has no shared-scratchpad category: those
 * bytes count as `runtime_memory` (Ours).
 *
 * @param row Device bytes booked for the model, by dmem category.
 * @returns The four documented categories, each a byte count.
 */
export function modelMemoryBreakdown(row: DmemUsageRow): Record<ModelMemoryCategory, number> {
  return fold(row, MODEL_MEMORY_CATEGORIES, (slot) => {
    const c = DEVICE_CATEGORY_OF[slot];
    return c === "model_shared_scratchpad" ? "runtime_memory" : c;
  });
}
