/**
 * The default {@linkcode Q7ClusterFactory}: the Worker-based `Q7Cluster` of `q7/`, its 8 simulated cores multiplexed
 * onto W Workers, W = min(8, CPUs) (or `NRT_SIM_Q7_WORKERS`, see `defaultQ7Workers`), with the default bound on
 * prepared libraries (`DEFAULT_Q7_MAX_LIBRARIES`, ours). Starting Workers is slow, so the simulator creates a cluster
 * once per NeuronCore and keeps it: when a stream is installed on cores already released, else on the NeuronCore's
 * first EXTENDED_INST (seed: runtime-synthesis §3.3).
 *
 * @module
 */
import { defaultLocalOpBytes, Q7Cluster, type Q7LocalWatchdog } from "./q7/q7_cluster.ts";
import type { Q7ClusterFactory, Q7ClusterPort } from "./q7_complex.ts";
import type { WorkerSpawner } from "./worker_spawn.ts";

/** Creates a `Q7Cluster` with the NeuronCore's SBUF size, on the memory its previous cluster left, if any. */
export const defaultQ7Factory: Q7ClusterFactory = async (options): Promise<Q7ClusterPort> =>
  await Q7Cluster.create({ sbufBytes: options.sbufBytes, memorySlot: options.memorySlot });

/**
 * The device agent's factory: `Q7Cluster`s that run quick ops (`localLearnNs` of kernel time) of at most
 * `localOpBytes` bytes of tensors on the agent's own thread (default `defaultLocalOpBytes()`: no bound, or
 * `NRT_SIM_LOCAL_OP_BYTES`), stopped by `watchdog` when they overrun their deadline (ours, see local_watchdog.ts).
 * Their Workers are started with `spawn` (default: on this thread; the agent in a Worker has the host start them, see
 * worker_spawn.ts).
 */
export function localOpsQ7Factory(
  watchdog: { forCore(nc: number): Q7LocalWatchdog },
  localOpBytes?: number,
  spawn?: WorkerSpawner,
): Q7ClusterFactory {
  // One record of quick ops for all the agent's clusters: a cluster booted after a Q7 reset or a reload runs the ops
  // already seen quick on the agent's thread from their first dispatch.
  const quick = new Set<string>();
  return async (options): Promise<Q7ClusterPort> =>
    await Q7Cluster.create({
      sbufBytes: options.sbufBytes,
      memorySlot: options.memorySlot,
      localOpBytes: localOpBytes ?? defaultLocalOpBytes(), // read per cluster: a bad value refuses the cluster
      watchdog: watchdog.forCore(options.nc),
      quick,
      spawn,
    });
}
