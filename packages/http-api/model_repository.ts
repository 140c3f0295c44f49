/**
 * The model repository: a directory of `<name>.neff` files, each with an optional `<name>.json` config
 * (`{"vnc": 0, "instances": 2, "maxQueue": 64}`), read through injected functions so that this package never touches a
 * platform's file API. Loads and unloads of one model are serialized; of different models they are independent,
 * so loading one never blocks inference on another. Concurrent loads of one model share one load.
 *
 * Spec: Triton's model repository extension (`POST v2/repository/index`, `…/models/<m>/load`, `…/unload`; index
 * entries `{name, version, state, reason}`).
 *
 * @module
 */
import type { Logger, NeffTensor, Runtime } from "@nrt/core";
import { HttpError } from "./http_error.ts";
import { ServedModel } from "./served_model.ts";

/** How the repository reads its directory. */
export interface RepositoryFiles {
  /** Names (not paths) of the files in the repository directory. */
  list(): Promise<string[]>;
  /** The bytes of one file by name, or `undefined` when it does not exist. */
  read(name: string): Promise<Uint8Array | undefined>;
}

/** The per-model config file `<name>.json`. */
export interface ModelConfig {
  /** Logical NeuronCore of the first instance (default: models are spread round-robin at scan). */
  readonly vnc?: number;
  /** Instances, on consecutive logical cores from `vnc` (default 1). */
  readonly instances?: number;
  /** Requests that may wait for a free instance (default: the repository's `maxQueue`). */
  readonly maxQueue?: number;
}

/** A model's state in the repository index. */
export type ModelState = "UNAVAILABLE" | "LOADING" | "READY" | "UNLOADING";

/** One entry of `POST /v2/repository/index`. */
export interface RepositoryIndexEntry {
  /** Model name. */
  readonly name: string;
  /** Version (the repository serves version "1" of every model). */
  readonly version: string;
  /** State. */
  readonly state: ModelState;
  /** Why it is not ready, or `""`. */
  readonly reason: string;
}

/** What the server reads about one model. */
export interface RepositoryModel {
  /** Name. */
  readonly name: string;
  /** State. */
  readonly state: ModelState;
  /** The loaded model when `state` is `READY`. */
  readonly served: ServedModel | undefined;
  /** The signature of the last successful load, kept across unloads for metadata. */
  readonly signature: { readonly inputs: readonly NeffTensor[]; readonly outputs: readonly NeffTensor[] } | undefined;
  /** Why it is not ready, or `""` when it is. */
  readonly reason: string;
}

/** Options of {@linkcode ModelRepository}. */
export interface ModelRepositoryOptions {
  /** The runtime models load into. */
  readonly runtime: Runtime;
  /** The directory. */
  readonly files: RepositoryFiles;
  /** Logger (default: the runtime's). */
  readonly logger?: Logger;
  /** Requests that may wait for a busy model (default 256). */
  readonly maxQueue?: number;
}

/** The only version each model has. */
export const MODEL_VERSION = "1";

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * Whether `name` may name a model: 1 to 128 of `A-Z a-z 0-9 _ . -`, not starting with a dot — so never a path.
 *
 * @param name A candidate name.
 * @returns Whether it is valid.
 *
 * @example Refuse a path
 * ```ts
 * import { isValidModelName } from "@nrt/http-api";
 * console.log(isValidModelName("relu"), isValidModelName("../etc")); // true false
 * ```
 */
export function isValidModelName(name: string): boolean {
  return NAME.test(name);
}

class Entry implements RepositoryModel {
  state: ModelState = "UNAVAILABLE";
  served: ServedModel | undefined;
  signature: RepositoryModel["signature"];
  failure = "";
  /** The serialized load/unload chain of this model. */
  op: Promise<void> = Promise.resolve();
  pending = 0;
  loading: Promise<void> | undefined;
  constructor(readonly name: string, readonly defaultVnc: number) {}

  get reason(): string {
    if (this.state === "READY") return this.served?.notReadyReason ?? "";
    if (this.state === "UNAVAILABLE") return this.failure || "not loaded";
    return this.state === "LOADING" ? "loading" : "unloading";
  }
}

/**
 * The models of one repository directory and their load state.
 *
 * @example Serve two in-memory NEFFs
 * ```ts ignore
 * const repo = new ModelRepository({ runtime: rt, files: filesFromMap({ "relu.neff": reluNeff }) });
 * await repo.scan();
 * await repo.loadAll();
 * ```
 */
export class ModelRepository {
  readonly #rt: Runtime;
  readonly #files: RepositoryFiles;
  readonly #log: Logger;
  readonly #maxQueue: number;
  readonly #entries = new Map<string, Entry>();
  #nextVnc = 0;
  #closed = false;

  /** Creates an empty repository; call {@linkcode ModelRepository.scan} to read the directory. */
  constructor(options: ModelRepositoryOptions) {
    this.#rt = options.runtime;
    this.#files = options.files;
    this.#log = options.logger ?? options.runtime.log;
    this.#maxQueue = options.maxQueue ?? 256;
  }

  /**
   * Reads the directory: adds every `<name>.neff` with a valid name, drops unloaded models whose file is gone.
   *
   * @returns The model names, sorted.
   */
  async scan(): Promise<string[]> {
    const files = (await this.#files.list()).filter((f) => f.endsWith(".neff")).sort();
    const names = new Set<string>();
    for (const f of files) {
      const name = f.slice(0, -".neff".length);
      if (!isValidModelName(name)) {
        this.#log.warn(`Skipping "${f}" in the model repository: "${name}" is not a valid model name`);
        continue;
      }
      names.add(name);
      if (!this.#entries.has(name)) this.#entries.set(name, new Entry(name, this.#nextVnc++ % Math.max(1, this.#rt.visibleVncCount)));
    }
    for (const [name, e] of this.#entries) {
      if (!names.has(name) && e.state === "UNAVAILABLE" && e.pending === 0) this.#entries.delete(name);
    }
    return [...this.#entries.keys()].sort();
  }

  /**
   * Loads every model of the last scan; a model that fails stays `UNAVAILABLE` with the error as its reason.
   *
   * @returns The failures, by model name.
   */
  async loadAll(): Promise<Map<string, Error>> {
    const failed = new Map<string, Error>();
    for (const name of [...this.#entries.keys()].sort()) {
      try {
        await this.load(name);
      } catch (e) {
        failed.set(name, e instanceof Error ? e : new Error(String(e)));
        this.#log.error(`Cannot load model "${name}": ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    return failed;
  }

  /** The model called `name`, or `undefined` when the repository has none. */
  get(name: string): RepositoryModel | undefined {
    return this.#entries.get(name);
  }

  /** Every model, sorted by name. */
  models(): RepositoryModel[] {
    return [...this.#entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** The repository index (Triton's `POST v2/repository/index`). */
  index(): RepositoryIndexEntry[] {
    return this.models().map((m) => ({ name: m.name, version: MODEL_VERSION, state: m.state, reason: m.reason }));
  }

  #entry(name: string): Entry {
    const e = this.#entries.get(name);
    if (e === undefined) throw new HttpError(404, `Cannot find model "${name}": it is not in the repository`);
    if (this.#closed) throw new HttpError(503, `Cannot change model "${name}": the server is shutting down`);
    return e;
  }

  #chain(e: Entry, op: () => Promise<void>): Promise<void> {
    e.pending++;
    const p = e.op.then(op).finally(() => e.pending--);
    e.op = p.catch(() => {});
    return p;
  }

  /**
   * Loads a model. A load while one is in progress joins it; a load of a ready model does nothing; a load of a
   * poisoned model unloads it and loads it again.
   *
   * @param name Model name.
   * @throws {HttpError} 404 for an unknown model, 400 for a bad config.
   * @throws {NrtError} What `nrt_load` reported.
   */
  load(name: string): Promise<void> {
    let e: Entry;
    try {
      e = this.#entry(name);
    } catch (err) {
      return Promise.reject(err);
    }
    if (e.loading !== undefined) return e.loading;
    if (e.pending === 0 && e.state === "READY" && e.served?.notReadyReason === undefined) return Promise.resolve();
    const p = this.#chain(e, () => this.#load(e));
    e.loading = p;
    const clear = (): void => {
      if (e.loading === p) e.loading = undefined;
    };
    p.then(clear, clear);
    return p;
  }

  async #load(e: Entry): Promise<void> {
    if (e.state === "READY") await this.#unload(e);
    e.state = "LOADING";
    try {
      const config = await this.#config(e.name);
      const neff = await this.#files.read(`${e.name}.neff`);
      if (neff === undefined) throw new HttpError(404, `Cannot load model "${e.name}": ${e.name}.neff is no longer in the repository`);
      const first = config.vnc ?? e.defaultVnc;
      const count = Math.max(1, this.#rt.visibleVncCount);
      // Instances wrap around the visible cores; a first core past them is passed on for nrt_load to refuse.
      const vncs = Array.from({ length: config.instances ?? 1 }, (_, k) => (first < count ? (first + k) % count : first));
      e.served = await ServedModel.load(this.#rt, e.name, neff, vncs, config.maxQueue ?? this.#maxQueue);
      e.signature = { inputs: e.served.inputs, outputs: e.served.outputs };
      e.state = "READY";
      e.failure = "";
      this.#log.info(`Loaded model "${e.name}" on logical core(s) ${vncs.join(", ")}`);
    } catch (err) {
      e.state = "UNAVAILABLE";
      e.failure = `load failed: ${err instanceof Error ? err.message : String(err)}`;
      throw err;
    }
  }

  async #config(name: string): Promise<ModelConfig> {
    const bytes = await this.#files.read(`${name}.json`);
    if (bytes === undefined) return {};
    let v: unknown;
    try {
      v = JSON.parse(new TextDecoder().decode(bytes));
    } catch (err) {
      throw new HttpError(400, `Cannot load model "${name}": ${name}.json is not JSON`, { cause: err });
    }
    const bad = (why: string): HttpError => new HttpError(400, `Cannot load model "${name}": ${name}.json ${why}`);
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad("is not an object");
    const c = v as Record<string, unknown>;
    for (const k of Object.keys(c)) if (k !== "vnc" && k !== "instances" && k !== "maxQueue") throw bad(`has an unknown key "${k}"`);
    if (c.vnc !== undefined && (!Number.isSafeInteger(c.vnc) || (c.vnc as number) < 0)) throw bad(`"vnc" must be a non-negative integer`);
    if (c.instances !== undefined && (!Number.isSafeInteger(c.instances) || (c.instances as number) < 1 || (c.instances as number) > 64)) {
      throw bad(`"instances" must be an integer from 1 to 64`);
    }
    if (c.maxQueue !== undefined && (!Number.isSafeInteger(c.maxQueue) || (c.maxQueue as number) < 0)) throw bad(`"maxQueue" must be a non-negative integer`);
    return c as ModelConfig;
  }

  /**
   * Unloads a model after its running and queued requests finish; unloading an unloaded model does nothing.
   *
   * @param name Model name.
   * @throws {HttpError} 404 for an unknown model.
   */
  unload(name: string): Promise<void> {
    let e: Entry;
    try {
      e = this.#entry(name);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#chain(e, () => this.#unload(e));
  }

  async #unload(e: Entry): Promise<void> {
    if (e.state !== "READY" || e.served === undefined) return;
    e.state = "UNLOADING";
    const served = e.served;
    try {
      await served.close();
    } finally {
      e.served = undefined;
      e.state = "UNAVAILABLE";
      e.failure = "";
    }
    this.#log.info(`Unloaded model "${e.name}"`);
  }

  /** Refuses further loads and unloads every model (after their requests finish). */
  async close(): Promise<void> {
    const entries = [...this.#entries.values()];
    const done = entries.map((e) => this.#chain(e, () => this.#unload(e)));
    this.#closed = true;
    const results = await Promise.allSettled(done);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }
}

/**
 * Repository files held in memory (tests, embedded models).
 *
 * @param files File bytes by name.
 * @returns A {@linkcode RepositoryFiles} over the map; later changes to the map are seen.
 *
 * @example An in-memory repository
 * ```ts
 * import { filesFromMap } from "@nrt/http-api";
 * const files = filesFromMap({ "a.json": new TextEncoder().encode("{}") });
 * console.log(await files.list()); // ["a.json"]
 * ```
 */
export function filesFromMap(files: Record<string, Uint8Array>): RepositoryFiles {
  return {
    list: () => Promise.resolve(Object.keys(files)),
    read: (name) => Promise.resolve(Object.hasOwn(files, name) ? files[name] : undefined),
  };
}
