/**
 * The load generator of bench/http.ts, run in a Worker so that the client's JavaScript does not share the server's
 * thread: `connections` concurrent request loops against one URL on the loopback interface, bounded by a request
 * count and a time budget. The requests take turns over a few bodies with different inputs, and each answer is
 * compared with the one the same body got when sent alone: an answer that went to the wrong request (instances mixed
 * up under load) or came out wrong counts as wrong.
 *
 * @module
 */

/** What the bench asks the worker to do. */
export interface LoadJob {
  /** Target URL (loopback only). */
  readonly url: string;
  /** The POST bodies, sent in turn. */
  readonly bodies: readonly string[];
  /** The answer expected for each body (its whole text); none: answers are not checked. */
  readonly answers?: readonly string[];
  /** Concurrent request loops (each keeps one connection busy). */
  readonly connections: number;
  /** Requests to send at most. */
  readonly requests: number;
  /** Seconds to run at most. */
  readonly seconds: number;
}

/** What the worker reports. */
export interface LoadResult {
  /** Completed requests. */
  readonly completed: number;
  /** Responses other than 200, and failed fetches. */
  readonly errors: number;
  /** 200 responses whose text differs from the body's expected answer (counted only when the job gives answers). */
  readonly wrong?: number;
  /** Wall time in ms. */
  readonly elapsedMs: number;
  /** Median latency in ms. */
  readonly p50Ms: number;
  /** 99th percentile latency in ms. */
  readonly p99Ms: number;
  /** Every request's latency in ms, in completion order (bench/http.ts merges them over its rounds). */
  readonly latenciesMs?: Float64Array;
}

async function run(job: LoadJob): Promise<LoadResult> {
  const host = new URL(job.url).hostname;
  if (host !== "127.0.0.1" && host !== "localhost" && host !== "[::1]") {
    throw new Error(`Refusing to load ${host}: loopback only`);
  }
  const deadline = performance.now() + job.seconds * 1000;
  const latencies: number[] = [];
  let started = 0, errors = 0, wrong = 0;
  const { bodies, answers } = job;
  const t0 = performance.now();
  const loop = async (): Promise<void> => {
    while (started < job.requests && performance.now() < deadline) {
      const k = started++ % bodies.length;
      const t = performance.now();
      try {
        const res = await fetch(job.url, {
          method: "POST",
          body: bodies[k],
          headers: { "content-type": "application/json" },
        });
        if (answers === undefined) await res.arrayBuffer();
        else if ((await res.text()) !== answers[k] && res.status === 200) wrong++;
        if (res.status !== 200) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: job.connections }, loop));
  const elapsedMs = performance.now() - t0;
  const latenciesMs = Float64Array.from(latencies);
  const sorted = latenciesMs.slice().sort();
  return {
    completed: latencies.length,
    errors,
    ...(answers === undefined ? {} : { wrong }),
    elapsedMs,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    latenciesMs,
  };
}

/** The `p` quantile of ascending `sorted` (0 when it is empty). */
export function quantile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<LoadJob>) => void) | null;
  postMessage(v: unknown, transfer?: Transferable[]): void;
};
scope.onmessage = (e) => {
  run(e.data).then(
    (r) => scope.postMessage({ ok: r }, [r.latenciesMs!.buffer]),
    (err) => scope.postMessage({ error: String(err) }),
  );
};
