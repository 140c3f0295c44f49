/**
 * Test helpers for the REST server: a runtime on the simulated device, a repository of small test models, the
 * app, and a teardown that closes everything (so no Q7 Worker outlives a test file).
 */
import { type CustomOpTensorSpec, MemoryLogger, Runtime, type RuntimeInitOptions } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import {
  createInferenceApp,
  filesFromMap,
  type InferenceApp,
  type InferenceLimits,
  InferenceMetrics,
  ModelRepository,
  type RepositoryFiles,
} from "@nrt/http-api";
import type { DeviceSimPortal, FaultSpec } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";

const t = (name: string, dtype: string, shape: number[]): CustomOpTensorSpec => ({ name, dtype, shape });

/**
 * The test models: `relu` (x FP32 [8]), `add` (a, b FP32 [16] → out), `cpu_map` (x FP32 [16] → y INT32 [16], each
 * element the id of the core that wrote it), `mixed` (a no-op kernel over every datatype family, for the
 * datatype plumbing) and `trap` (faults.wasm `trap`: executing it fails and poisons the model; its `trap.json` turns
 * the warm-up off).
 */
export function testModels(): Record<string, Uint8Array> {
  return {
    "relu.neff": oneOpNeff("relu", "relu", [t("x", "float32", [8])], [t("y", "float32", [8])]),
    "add.neff": oneOpNeff("vector_add", "vector_add", [t("a", "float32", [16]), t("b", "float32", [16])], [
      t("out", "float32", [16]),
    ]),
    "cpu_map.neff": oneOpNeff("cpu_map", "cpu_map", [t("x", "float32", [16])], [t("y", "int32", [16])]),
    "mixed.neff": oneOpNeff(
      "noop",
      "noop",
      [
        t("h", "float16", [4]),
        t("bf", "bfloat16", [2, 2]),
        t("i", "int32", [2, 3]),
        t("flag", "bool", [3]),
        t("u8", "uint8", [5]),
        t("l", "int64", [2]),
      ],
      [t("oh", "float16", [4]), t("oi", "int64", [3]), t("od", "float64", [2])],
      1,
    ),
    "trap.neff": oneOpNeff("faults", "trap", [t("x", "float32", [4])], [t("y", "float32", [4])]),
    // Every execution of trap faults, so it is served without a warm-up (which would poison it before it serves).
    "trap.json": new TextEncoder().encode(JSON.stringify({ warmup: false })),
  };
}

/** A server over the test models. */
export interface HttpFixture {
  /** The app. */
  readonly app: InferenceApp;
  /** The runtime. */
  readonly runtime: Runtime;
  /** The repository. */
  readonly repository: ModelRepository;
  /** The repository's files (mutable: tests add and remove models). */
  readonly files: Record<string, Uint8Array>;
  /** The counters the app writes. */
  readonly metrics: InferenceMetrics;
  /** The runtime's log. */
  readonly logger: MemoryLogger;
  /** The simulated device (fault injection). */
  readonly sim: DeviceSimPortal;
  /** Unloads everything, closes the runtime and the portal. */
  close(): Promise<void>;
}

/** Starts a runtime, scans and loads the repository, builds the app. */
export async function httpFixture(options: {
  limits?: InferenceLimits;
  files?: Record<string, Uint8Array>;
  maxQueue?: number;
  runtime?: Partial<RuntimeInitOptions>;
  wrapFiles?: (files: RepositoryFiles) => RepositoryFiles;
  /** Model control (default explicit, with {@linkcode ADMIN_TOKEN}). */
  modelControl?: "none" | "explicit";
} = {}): Promise<HttpFixture> {
  const container = createNrtContainer();
  const logger = new MemoryLogger();
  const runtime = await Runtime.init({ logger, ...options.runtime, ...nrtPlugins(container) });
  const files = options.files ?? testModels();
  const repoFiles = filesFromMap(files);
  const repository = new ModelRepository({
    runtime,
    files: options.wrapFiles?.(repoFiles) ?? repoFiles,
    maxQueue: options.maxQueue,
  });
  await repository.scan();
  await repository.loadAll();
  const metrics = new InferenceMetrics();
  const modelControl = options.modelControl ?? "explicit";
  const app = createInferenceApp({
    runtime,
    repository,
    limits: options.limits,
    metrics,
    modelControl,
    adminToken: ADMIN_TOKEN,
  });
  return {
    app,
    runtime,
    repository,
    files,
    metrics,
    logger,
    sim: container.resolve(PortalToken) as DeviceSimPortal,
    close: async () => {
      try {
        await repository.close();
        await runtime.close();
      } finally {
        await container.resolve(PortalToken).close();
      }
    },
  };
}

/**
 * Arms `fault` on the NeuronCore of `model`'s first instance, for the next run there. A Band-C fault (e.g. `nc-ue`,
 * status 1202) poisons the model until it is loaded again (seed lifecycle-error-model §4.1, §5.5); a kernel trap (6)
 * does not.
 */
export function injectOnModel(fx: HttpFixture, model: string, fault: Omit<FaultSpec, "nc" | "atExecution">): void {
  const instance = fx.repository.get(model)?.served?.instances[0];
  if (instance === undefined) throw new Error(`Model ${model} is not served`);
  const nc = fx.runtime.cores()[instance.vnc].ncs[0];
  fx.sim.faults.inject({ ...fault, nc, atExecution: 1 } as FaultSpec);
}

/** The admin token of the test servers. */
export const ADMIN_TOKEN = "test-admin-token-0123456789";

/** A repository or operator action: a JSON POST with the admin token. */
export function control(body: unknown = {}, token: string = ADMIN_TOKEN): RequestInit {
  return post(body, { authorization: `Bearer ${token}` });
}

/** A JSON POST. */
export function post(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    headers: { "content-type": "application/json", ...headers },
  };
}

/** A binary-extension request body: the JSON header, then the binary sections. */
export function binaryBody(
  header: unknown,
  ...sections: Uint8Array[]
): { body: Uint8Array<ArrayBuffer>; headers: Record<string, string> } {
  const head = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(head.length + sections.reduce((a, s) => a + s.length, 0));
  body.set(head);
  let o = head.length;
  for (const s of sections) {
    body.set(s, o);
    o += s.length;
  }
  return {
    body,
    headers: { "inference-header-content-length": String(head.length), "content-type": "application/octet-stream" },
  };
}

/** Splits a binary-extension response into its JSON header and binary part. */
export async function readBinaryResponse(
  res: Response,
): Promise<{ json: Record<string, unknown>; binary: Uint8Array }> {
  const bytes = new Uint8Array(await res.arrayBuffer());
  const n = Number(res.headers.get("inference-header-content-length"));
  return { json: JSON.parse(new TextDecoder().decode(bytes.subarray(0, n))), binary: bytes.slice(n) };
}

/**
 * The completion waits the host has on the simulated device, its NeuronCores together: an execution counts one from
 * just before its doorbell (its `NEURON_RT_EXEC_TIMEOUT` budget armed) until the device completes it or the budget
 * ends it. What a test waits for before it moves the clock past a hanging execution's budget.
 */
export function hostWaits(sim: DeviceSimPortal): number {
  let n = 0;
  for (let nc = 0; nc < sim.spec.ncPerDevice; nc++) n += sim.notificationWaiters(0, nc);
  return n;
}

/**
 * What the simulated device shows per NeuronCore, for a test's failure message: the Q7 state, host waiters on the
 * NQ, the last sequencer fault and the last three records (kind/model/value).
 */
export function deviceState(sim: DeviceSimPortal): unknown[] {
  return Array.from({ length: sim.spec.ncPerDevice }, (_, nc) => ({
    nc,
    q7Busy: sim.q7Busy(0, nc),
    q7Started: sim.q7Started(0, nc),
    waiters: sim.notificationWaiters(0, nc),
    fault: sim.sequencerFaults(0, nc).at(-1)?.message,
    records: sim.records(0, nc).slice(-3).map((r) => `${r.kind}/${r.model}/${r.value}`),
  }));
}
