/** Shared by the benchmarks: run counts and the median timing loop (warm-up first, then `runs` timed calls). */

/** Timed runs per measurement (`RUNS` in the environment overrides). */
export const RUNS: number = Number(
  (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.RUNS ?? 300,
);

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

/**
 * Medians of `a` and `b` timed in alternation, `RUNS` each after as many warm-up pairs: a change of the machine's load
 * during the run moves both alike, so their ratio holds (timed in separate blocks, the execute table and the SPMD
 * table once read 805 and 1,442 µs for the same 8-core execute in one run).
 */
export async function alternatingUs(a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  for (let i = 0; i < RUNS; i++) {
    await a();
    await b();
  }
  const xa: number[] = [], xb: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t = performance.now();
    await a();
    xa.push((performance.now() - t) * 1000);
    t = performance.now();
    await b();
    xb.push((performance.now() - t) * 1000);
  }
  return [median(xa), median(xb)];
}

/**
 * Medians of each of `fns` timed in alternating blocks of `block` back-to-back runs (the first run of each block not
 * counted), `RUNS` counted runs each after `warmup` runs (default: as many as {@linkcode timeUs} makes), in blocks
 * too: each side is timed in its own steady state (one run right after another of its own, as a loop of it runs)
 * while a change of the machine's load moves all alike.
 * Alternating run by run instead puts the other side's run before every run, which changes what is measured: an
 * in-process execute after a remote one found the device agent asleep and read 148–221 µs against 81–142 back to back.
 */
export async function alternatingBlocksUs(
  fns: ReadonlyArray<() => Promise<unknown>>,
  block = 20,
  warmup = Math.min(300, RUNS),
): Promise<number[]> {
  const times = fns.map((): number[] => []);
  const run = async (fn: () => Promise<unknown>, into: number[] | undefined) => {
    await fn();
    for (let i = 1; i < block; i++) {
      const t = performance.now();
      await fn();
      into?.push((performance.now() - t) * 1000);
    }
  };
  // Warm-up: `warmup` runs of each (the JIT settles), in blocks too.
  for (let i = 0; i < warmup; i += block) for (const fn of fns) await run(fn, undefined);
  while (times[0].length < RUNS) for (let k = 0; k < fns.length; k++) await run(fns[k], times[k]);
  return times.map(median);
}

/** `bun` or `deno`. */
export const RUNTIME: string = (globalThis as { Bun?: unknown }).Bun !== undefined ? "bun" : "deno";

/** Whether the benchmark was asked for machine-readable output (`--json`, as `nrt bench --json` passes). */
export const JSON_OUTPUT: boolean = ((globalThis as { process?: { argv: string[] } }).process?.argv ?? []).includes(
  "--json",
);

/**
 * Prints one table of a benchmark: a title and `console.table` rows, or with `--json` one JSON line
 * `{"bench", "runtime", "title", "rows"}` that `nrt bench --json` collects. `runtime` is the one that measured the
 * rows (default: this one; a bench that ran itself under the other runtime prints that child's rows too).
 */
export function emit(
  bench: string,
  title: string,
  rows: ReadonlyArray<Record<string, unknown>>,
  runtime: string = RUNTIME,
): void {
  if (JSON_OUTPUT) console.log(JSON.stringify({ bench, runtime, title, rows }));
  else {
    console.log(`${title} (${runtime})`);
    console.table(rows);
  }
}

/**
 * Runs `count` targets in `rounds` rounds, one after another, each round starting at the next target so that none
 * always runs first and a drift of the machine's speed hits them alike.
 *
 * @param rounds How many rounds.
 * @param count How many targets.
 * @param run Measures target `k` once.
 * @returns Per target, its results round by round.
 */
export async function inRounds<T>(rounds: number, count: number, run: (k: number) => Promise<T>): Promise<T[][]> {
  const results: T[][] = Array.from({ length: count }, () => []);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < count; j++) {
      const k = (r + j) % count;
      results[k].push(await run(k));
    }
  }
  return results;
}
