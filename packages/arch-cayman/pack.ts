/**
 * The Cayman (NC-v3) arch pack as data: its silicon spec and its error tables. `@nrt/core`'s `createKhal` builds the
 * HAL from it; the stock Pool image is the simulator ISA's stock firmware with the arch id CAYMAN_SPEC.arch in DRAM word
 * 0 (`stockPoolImage`), and nothing in the pack overrides the spec-driven behaviour.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1 (run-stall release per arch, read from
 * `spec.runStallRelease`); lifecycle-error-model §2.6 (the arch id), §4.5 (the tables).
 *
 * @module
 */
import type { ArchPack } from "@nrt/core/hal";
import { CAYMAN_ERROR_TABLES } from "./error_tables.ts";
import { CAYMAN_SPEC } from "./spec.ts";

/**
 * The Cayman pack.
 *
 * @example Build its HAL
 * ```ts
 * import { createKhal } from "@nrt/core/hal";
 * import { cayman } from "@nrt/arch-cayman";
 * const khal = createKhal(cayman);
 * console.log(khal.spec.name, khal.spec.arch); // "cayman" 3
 * ```
 */
export const cayman: ArchPack = Object.freeze({ spec: CAYMAN_SPEC, errorTables: CAYMAN_ERROR_TABLES });
