/**
 * The Sunda (NC-v2) arch pack as data: its silicon spec and its error tables. `@nrt/core`'s `createKhal` builds the
 * HAL from it; the stock Pool image is the simulator ISA's stock firmware with the arch id SUNDA_SPEC.arch in DRAM word
 * 0 (`stockPoolImage`), and nothing in the pack overrides the spec-driven behaviour.
 *
 * Seed: runtime-synthesis §1.2 (layer 3b, the per-arch HAL), §2.1 (run-stall release per arch, read from
 * `spec.runStallRelease`); lifecycle-error-model §2.6 (the arch id), §4.5 (the tables).
 *
 * @module
 */
import type { ArchPack } from "@nrt/core/hal";
import { SUNDA_ERROR_TABLES } from "./error_tables.ts";
import { SUNDA_SPEC } from "./spec.ts";

/**
 * The Sunda pack.
 *
 * @example Build its HAL
 * ```ts
 * import { createKhal } from "@nrt/core/hal";
 * import { sunda } from "@nrt/arch-sunda";
 * const khal = createKhal(sunda);
 * console.log(khal.spec.name, khal.spec.arch); // "sunda" 2
 * ```
 */
export const sunda: ArchPack = Object.freeze({ spec: SUNDA_SPEC, errorTables: SUNDA_ERROR_TABLES });
