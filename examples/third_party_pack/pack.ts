/**
 * The "maverick-sim" arch pack: a fourth NeuronCore generation as data — its spec and its error tables — with no
 * edit to `@nrt/core`. `createKhal` builds its HAL like the shipped packs'; its run-stall release follows from its
 * spec (`runStallRelease: "host-csr"`, CSR 0x3000), its stock Pool image is the simulator firmware with arch id 5.
 *
 * The tables are the example's own: the seeds read out only Sunda's (lifecycle-error-model §4.5).
 *
 * @module
 */
import type { ArchPack } from "@nrt/core/hal";
import { MAVERICK_SPEC } from "./spec.ts";

/** The maverick-sim pack. */
export const maverick: ArchPack = Object.freeze({
  spec: MAVERICK_SPEC,
  errorTables: Object.freeze({
    dveSpuriousMask: 0,
    subtypes: Object.freeze([0, 1, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12]),
    isaErrors: Object.freeze(Array.from({ length: 12 }, (_, id) => `maverick-sim ISA error ${id}`)),
    defaultText: "maverick-sim: unknown ISA error",
  }),
});
