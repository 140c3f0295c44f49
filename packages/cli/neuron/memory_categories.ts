/**
 * How our dmem categories land in neuron-monitor's `memory_used` categories: defined once in `@nrt/http-api`
 * (`neuron/memory_categories.ts`, which `/metrics` uses too) and re-exported here for the report builders.
 *
 * @module
 */
export {
  DEVICE_CATEGORY_OF,
  DEVICE_MEMORY_CATEGORIES,
  deviceMemoryBreakdown,
  type DeviceMemoryCategory,
  HOST_CATEGORY_OF,
  HOST_MEMORY_CATEGORIES,
  hostMemoryBreakdown,
  type HostMemoryCategory,
  MODEL_MEMORY_CATEGORIES,
  modelMemoryBreakdown,
  type ModelMemoryCategory,
} from "@nrt/http-api";
