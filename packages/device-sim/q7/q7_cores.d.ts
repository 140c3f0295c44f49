/**
 * Types of q7_cores.js: the simulated Q7 cores of one thread.
 *
 * @module
 */

/** The cores of one thread over the cluster's memory. */
export interface Q7Cores {
  /** Runs the op the mailbox describes on each participating core of the set, in turn; how many cores' kernels threw. */
  runOp(seq: number): number;
  /** Drops the instances of `slot`. */
  unload(slot: number): void;
  /** Instantiates `module` as `slot` on every core of the set; the firmware's report for slot 0 on core 0. */
  load(slot: number, module: WebAssembly.Module): { apiLevel?: number; arch?: number } | undefined;
}

/** Creates the cores `cores` (ascending) over `memory`, whose control area is laid out as `layout` says. */
export function createQ7Cores(options: { layout: unknown; memory: WebAssembly.Memory; cores: number[] }): Q7Cores;
