/**
 * The default {@linkcode Q7ClusterFactory}: the Worker-based `Q7Cluster` of `q7/`. Creating one starts 8 Workers,
 * so the simulator calls it lazily, on a NeuronCore's first EXTENDED_INST (seed: runtime-synthesis §3.3).
 *
 * @module
 */
import { Q7Cluster } from "./q7/q7_cluster.ts";
import type { Q7ClusterFactory, Q7ClusterPort } from "./q7_complex.ts";

/** Creates a `Q7Cluster` with the NeuronCore's SBUF size. */
export const defaultQ7Factory: Q7ClusterFactory = async (options: { sbufBytes: number }): Promise<Q7ClusterPort> =>
  await Q7Cluster.create({ sbufBytes: options.sbufBytes });
