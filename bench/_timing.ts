/** Shared by the benchmarks: run counts and the median timing loop (warm-up first, then `runs` timed calls). */

/** Timed runs per measurement (`RUNS` in the environment overrides). */
export const RUNS: number = Number((globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.RUNS ?? 300);

/** The median of `xs`. */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

/** Median wall time of `fn` in microseconds, after up to 300 warm-up calls (the JIT settles). */
export async function timeUs(fn: () => Promise<unknown>, runs: number = RUNS): Promise<number> {
  for (let i = 0; i < Math.min(300, runs); i++) await fn();
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  return median(xs) * 1000;
}
