// @ts-self-types="./bun_env.d.mts"
/**
 * The environment the `nrt` command's Bun process starts with (ours): the shim (`npx nrt`, `npm start`) and the
 * container's `nrt` script set it, and a value the user set is kept.
 *
 * `MIMALLOC_PURGE_DELAY=-1`: Bun's allocator (mimalloc) then keeps the pages it frees instead of returning them to
 * the operating system. The simulated device's shared memory (NeuronCore images, Q7 memories, device allocations:
 * 58 MB on the HTTP thread of `nrt serve --demo`, 300 MB with `--agents inline`) counts towards JavaScriptCore's heap,
 * and JavaScriptCore sizes its young generation from the heap: a bytes-allowed budget of 200 MB between collections
 * where a bare Hono route has 8 MB. Each collection freed those blocks, the allocator returned their pages, and the
 * next requests faulted them back in: 1.1–1.9 page faults per request, and JavaScriptCore's block warm-up thread
 * (`JSCWarmUp`) took 13–18% of a CPU. With the pages kept, page faults fell tenfold and `nrt serve --demo` answered
 * 1.16–1.69× the requests per second (alternating 5 s `wrk` rounds, docs/architecture.md §5), for about 140 MB more
 * resident memory, bounded by the largest young generation the collector lets grow. That bound holds because the
 * device's thread asks for a collection every 250 ms while it works (packages/device-sim/collection_pacer.ts):
 * without it a load after an idle half-minute left 680–850 MB resident. A smaller young generation
 * (`BUN_JSC_heapGrowthMaxIncrease=0.05`) also ended the faults, but its extra collections cost more (0.87×).
 *
 * The other side: the process keeps for reuse whatever it frees, so its resident memory stays near its peak (a probe
 * that allocated 1.7 GB and dropped it kept 1.7 GB resident, against 40 MB without the setting). A server that once
 * held large request bodies or compiled a large ONNX model keeps that memory. `MIMALLOC_PURGE_DELAY=10` (mimalloc's
 * own default) returns it, at the cost above; shorter delays than -1 (1000, 10000 ms) kept the page faults.
 *
 * @module
 */

/** The variables set, and their values. */
export const BUN_ENV_DEFAULTS = Object.freeze({ MIMALLOC_PURGE_DELAY: "-1" });

/**
 * `env` with {@link BUN_ENV_DEFAULTS} added where it has no value of its own.
 *
 * @param {Record<string, string | undefined>} env The environment to start Bun with (usually `process.env`).
 * @returns {Record<string, string | undefined>} A new object; `env` is not changed.
 */
export function bunEnv(env) {
  const out = { ...env };
  for (const [k, v] of Object.entries(BUN_ENV_DEFAULTS)) if (out[k] === undefined || out[k] === "") out[k] = v;
  return out;
}
