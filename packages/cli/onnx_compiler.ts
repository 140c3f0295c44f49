/**
 * `OnnxCompiler`: compiles ONNX models off the server's thread, for `nrt serve` (onnx_source.ts). Ours.
 *
 * - Each compile runs in a Worker of its own (compile_worker.ts), terminated once it answered. The compiler runs for
 *   seconds without yielding (a chain of 99,000 Relu nodes: about 36 s); on the server's thread it stalled every
 *   REST and gRPC request meanwhile. The server's thread now copies the ONNX bytes once and takes the NEFF's buffer
 *   back (transferred, not copied).
 * - One compile at a time: the next one starts once the previous Worker has exited, so uploads cannot add up the
 *   compiler's memory. Concurrent compiles of the same model are shared before they get here (onnx_source.ts).
 * - A compile that runs past the time limit (`timeoutMs`, 10 minutes by default, counted from its Worker's start) is
 *   stopped: `NRT_TIMEOUT`. One whose `signal` aborts (the server shuts down) is stopped, or never started if it was
 *   waiting: `NRT_CLOSED`.
 * - A model the compiler refuses: `NRT_INVALID` with the compiler's message (an upload answers 400). Any other
 *   failure (an error thrown by the compiler, a Worker that fails or exits): `NRT_FAILURE`, or the `NrtError`'s own
 *   status, with what went wrong.
 *
 * - A compile that uses more than `maxMemoryBytes` (4 GiB by default) is stopped: `NRT_FAIL_HOST_MEM_ALLOC`. The
 *   guard is the process's resident memory, sampled every 100 ms while the compile runs: it may not grow by more than
 *   the cap over the lowest it was since the compile started (memory the server frees meanwhile does not hide the
 *   compile's growth; memory it takes counts against the compile). Behind it, the Worker's `resourceLimits` caps its
 *   JavaScript heap at 1.5 times the cap, so the sampler stops a compile first: without a heap limit, a compile that
 *   exhausted Deno's default heap aborted the whole process, and a Worker that reached its heap limit in a long Deno
 *   test run was stopped without Deno ever delivering its `error` or `exit` event (its compile waited for ever, and
 *   the compiles after it). Bun ignores `resourceLimits` (a Worker limited to a 64 MB heap made 30 million objects).
 * - A Worker counts as gone once its `exit` came, or 5 s after it was terminated, whichever is first, so a lost
 *   `exit` cannot hold up the next compile.
 *
 * Measured (Bun 1.4.5, Deno 2.9.6): the Workers are `node:worker_threads` ones because a web `Worker`'s `terminate()`
 * does not stop a Worker running JavaScript on Deno (a compile stopped after 2 s ran on to its end at 13 s, its
 * thread at 100% of a CPU, and kept the process alive); `node:worker_threads`' `terminate()` stops it on both
 * (its `exit` within 0.3 s). Starting a Worker and loading the compiler in it costs about 0.2–0.5 s per compile; a
 * NEFF found in the cache starts none.
 *
 * @module
 */
import { NrtError, NrtStatus } from "@nrt/core";
import process from "node:process";
import { Worker } from "node:worker_threads";
import type { CompileTarget } from "./compile_args.ts";
import type { CompileReply, CompileRequest } from "./compile_worker.ts";

/** How long one compile may run by default, in ms: 10 minutes. */
export const DEFAULT_COMPILE_TIMEOUT_MS = 600_000;

/**
 * The most memory one compile may take by default: 4 GiB, four times the largest model file the compiler reads
 * (`maxModelBytes`), and past what the compiler's caps let a file cost decoded (about 0.7 GB for `maxEntries`,
 * 0.55 GB for `maxNumbers`, 256 MiB folded).
 */
export const DEFAULT_COMPILE_MAX_MEMORY_BYTES = 4 * 2 ** 30;

/** How often the process's resident memory is sampled while a compile runs, in ms. */
const MEMORY_SAMPLE_MS = 100;

/** The Worker's heap limit over the memory cap: a backstop the resident-memory sampler stops a compile before. */
const HEAP_LIMIT_OVER_CAP = 1.5;

/** How long a terminated Worker may take to report its `exit` before it counts as gone, in ms. */
const EXIT_GRACE_MS = 5_000;

/** Options of {@linkcode OnnxCompiler}. */
export interface OnnxCompilerOptions {
  /** How long one compile may run, in ms, from its Worker's start (default {@linkcode DEFAULT_COMPILE_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /**
   * The most memory one compile may take, in bytes (default {@linkcode DEFAULT_COMPILE_MAX_MEMORY_BYTES}): the most
   * the process's resident memory may grow while it runs (the Worker's heap limit is 1.5 times it).
   */
  readonly maxMemoryBytes?: number;
}

/** One compile. */
export interface OnnxCompileJob {
  /** The model's file, for messages (`mlp.onnx`). */
  readonly file: string;
  /** The `.onnx` bytes; copied, never detached. */
  readonly onnx: Uint8Array;
  /** The generation the NEFF targets. */
  readonly target: CompileTarget;
  /** Shapes of inputs with dynamic dims. */
  readonly inputShapes: Record<string, number[]>;
  /** The NEFF header name. */
  readonly name: string;
  /** The op library binaries, by name. */
  readonly libraries: ReadonlyMap<string, Uint8Array>;
}

/** What a compile gives. */
export interface OnnxCompileResult {
  /** The NEFF. */
  readonly neff: Uint8Array;
  /** Its kernel calls. */
  readonly calls: number;
}

/**
 * Tests only, for every compile Worker started while set (compile_worker.ts): `hold` makes it set its word 1 to 1
 * once the compiler is loaded, then block its thread until word 0 is not 0; `fail` makes it fail instead of
 * compiling.
 */
export const compileTestHooks: { hold?: Int32Array; fail?: CompileRequest["fail"] } = {};

let liveWorkers = 0;

/** The compile Workers of this process that were started and have not exited yet. */
export function liveCompileWorkers(): number {
  return liveWorkers;
}

const WORKER_URL = new URL("./compile_worker.ts", import.meta.url);

/** Compiles ONNX models in Workers, one at a time, each within a time limit. */
export class OnnxCompiler {
  readonly #timeoutMs: number;
  readonly #maxMemoryBytes: number;
  /** Settles once the Worker of the last compile queued has exited. */
  #tail: Promise<void> = Promise.resolve();

  /**
   * A compiler.
   *
   * @param options The time and memory limits.
   * @throws {RangeError} For a time limit that is not a positive number of ms, a memory limit under 16 MiB.
   */
  constructor(options: OnnxCompilerOptions = {}) {
    const ms = options.timeoutMs ?? DEFAULT_COMPILE_TIMEOUT_MS;
    if (!(ms > 0 && ms <= 2 ** 31 - 1)) {
      throw new RangeError(`Cannot make an ONNX compiler: a time limit of ${ms} ms is not from 1 ms to 24.8 days`);
    }
    this.#timeoutMs = ms;
    const bytes = options.maxMemoryBytes ?? DEFAULT_COMPILE_MAX_MEMORY_BYTES;
    if (!(bytes >= 16 * 2 ** 20 && bytes <= Number.MAX_SAFE_INTEGER)) {
      throw new RangeError(`Cannot make an ONNX compiler: a memory limit of ${bytes} bytes is under 16 MiB`);
    }
    this.#maxMemoryBytes = bytes;
  }

  /**
   * Compiles once the compiles asked for before it are done.
   *
   * @param job The model and how to compile it.
   * @param signal Stops the compile (or drops it before it starts) when it aborts; a string reason is the message.
   * @returns The NEFF.
   * @throws {NrtError} `NRT_INVALID` for a model the compiler refuses (its message), `NRT_TIMEOUT` past the time
   *   limit, `NRT_FAIL_HOST_MEM_ALLOC` past the memory limit, `NRT_CLOSED` once `signal` aborted, `NRT_FAILURE` (or
   *   the status thrown) for any other failure.
   */
  compile(job: OnnxCompileJob, signal?: AbortSignal): Promise<OnnxCompileResult> {
    return new Promise((resolve, reject) => {
      this.#tail = this.#tail.then(() => this.#run(job, signal, resolve, reject));
    });
  }

  /** Settles once every compile asked for so far has ended and its Worker has exited. */
  idle(): Promise<void> {
    return this.#tail;
  }

  /** Runs one compile; settles once its Worker has exited (never rejects). */
  #run(
    job: OnnxCompileJob,
    signal: AbortSignal | undefined,
    resolve: (r: OnnxCompileResult) => void,
    reject: (e: Error) => void,
  ): Promise<void> {
    const failed = (status: NrtStatus, why: string) => new NrtError(status, `Cannot compile ${job.file}: ${why}`);
    const stopped = () =>
      failed(NrtStatus.NRT_CLOSED, typeof signal?.reason === "string" ? signal.reason : "the compile was stopped");
    if (signal?.aborted) {
      reject(stopped());
      return Promise.resolve();
    }
    let worker: Worker;
    try {
      worker = new Worker(WORKER_URL, {
        resourceLimits: {
          maxOldGenerationSizeMb: Math.max(16, Math.floor(this.#maxMemoryBytes * HEAP_LIMIT_OVER_CAP / 2 ** 20)),
        },
      });
    } catch (e) {
      reject(
        failed(NrtStatus.NRT_FAILURE, `cannot start the compiler's Worker: ${e instanceof Error ? e.message : e}`),
      );
      return Promise.resolve();
    }
    liveWorkers++;
    let counted = false, grace: ReturnType<typeof setTimeout> | undefined, left = () => {};
    const exited = new Promise<void>((r) => left = r);
    const gone = () => {
      if (counted) return;
      counted = true;
      clearTimeout(grace);
      liveWorkers--;
      left();
    };
    worker.once("exit", gone);
    let settled = false;
    const finish = (e: Error | undefined, result?: OnnxCompileResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(sampler);
      signal?.removeEventListener("abort", abort);
      worker.terminate().catch(() => {});
      if (!counted) grace = setTimeout(gone, EXIT_GRACE_MS);
      if (e === undefined) resolve(result!);
      else reject(e);
    };
    const abort = () => finish(stopped());
    signal?.addEventListener("abort", abort, { once: true });
    const timer = setTimeout(() => {
      const s = this.#timeoutMs / 1000;
      finish(failed(NrtStatus.NRT_TIMEOUT, `the compiler ran past its time limit (${s} s) and was stopped`));
    }, this.#timeoutMs);
    const tooBig = () => {
      const mib = Math.round(this.#maxMemoryBytes / 2 ** 20);
      return failed(NrtStatus.NRT_FAIL_HOST_MEM_ALLOC, `the compiler used more than its memory limit (${mib} MiB)`);
    };
    let lowest = process.memoryUsage().rss;
    const sampler = setInterval(() => {
      const rss = process.memoryUsage().rss;
      if (rss < lowest) lowest = rss;
      else if (rss - lowest > this.#maxMemoryBytes) finish(tooBig());
    }, MEMORY_SAMPLE_MS);
    worker.on("message", (r: CompileReply) => {
      if (r.ok) finish(undefined, { neff: r.neff, calls: r.calls });
      else if ("refused" in r) finish(new NrtError(NrtStatus.NRT_INVALID, r.refused));
      else if (r.error.status !== undefined) finish(failed(r.error.status as NrtStatus, r.error.message));
      else finish(failed(NrtStatus.NRT_FAILURE, `${r.error.name}: ${r.error.message}`));
    });
    worker.on(
      "error",
      (e: Error) =>
        finish(
          (e as { code?: unknown }).code === "ERR_WORKER_OUT_OF_MEMORY"
            ? tooBig()
            : failed(NrtStatus.NRT_FAILURE, `the compiler's Worker failed: ${e.message}`),
        ),
    );
    worker.on("messageerror", (e: Error) => {
      finish(failed(NrtStatus.NRT_FAILURE, `the compiler's answer could not be read: ${e.message}`));
    });
    worker.once("exit", (code: number) => {
      finish(failed(NrtStatus.NRT_FAILURE, `the compiler's Worker exited (code ${code}) before it answered`));
    });
    // A copy of exactly the file's bytes, whose buffer is then transferred: the caller's may be a view into a larger
    // buffer (a Buffer from the pool, a request body) and stays usable. Not `slice()`: a Buffer's is a view.
    const onnx = new Uint8Array(job.onnx);
    const request: CompileRequest = {
      onnx,
      target: job.target,
      inputShapes: job.inputShapes,
      name: job.name,
      libraries: job.libraries,
      ...compileTestHooks,
    };
    worker.postMessage(request, [onnx.buffer]);
    return exited;
  }
}
