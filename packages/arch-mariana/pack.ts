/**
 * The Mariana (NC-v4) arch pack as data: its silicon spec and its error tables. `@nrt/core`'s `createKhal` builds the
 * HAL from it; the stock Pool image is the simulator ISA's stock firmware with the arch id MARIANA_SPEC.arch in DRAM word
 * 0 (`stockPoolImage`), and nothing in the pack overrides the spec-driven behaviour.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1 (run-stall release per arch, read from
 * `spec.runStallRelease`); lifecycle-error-model §2.6 (the arch id), §4.5 (the tables).
 *
 * @module
 */
import type { ArchPack } from "@nrt/core/hal";
import { MARIANA_ERROR_TABLES } from "./error_tables.ts";
import { MARIANA_SPEC } from "./spec.ts";

/**
 * The Mariana pack.
 *
 * @example Build its HAL
 * ```ts
 * import { createKhal } from "@nrt/core/hal";
 * import { mariana } from "@nrt/arch-mariana";
 * const khal = createKhal(mariana);
 * console.log(khal.spec.name, khal.spec.arch); // "mariana" 4
 * ```
 */
export const mariana: ArchPack = Object.freeze({ spec: MARIANA_SPEC, errorTables: MARIANA_ERROR_TABLES });
