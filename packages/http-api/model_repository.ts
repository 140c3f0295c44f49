/**
 * The model repository: the models of a directory, each a NEFF with an optional config (`{"vnc": 0, "instances": 2,
 * "maxQueue": 64, "warmup": true}`), read through injected functions so that this package never touches a platform's
 * file API. Loads and unloads of one model are serialized; of different models they are independent, so loading one
 * never blocks inference on another. Concurrent loads of one model share one load. A load of a model that is being
 * served, or an upload, replaces it atomically: the new instances are loaded and warmed up while the old ones serve,
 * then requests go to the new ones and the old ones unload once their requests are done. The server is ready when
 * every model it was asked to load is.
 *
 * Spec: Triton's model repository extension (`POST v2/repository/index`, `…/models/<m>/load` with the `config` and
 * `file:<version>/<name>` parameters, `…/unload`; index entries `{name, version, state, reason}`). The config format,
 * instance groups and readiness rule are ours (docs/rest-api.md, "Model repository").
 *
 * @module
 */
import { type Logger, type NeffTensor, NrtInitState, type Runtime } from "@nrt/core";
import { HttpError } from "./http_error.ts";
import { CoreLoad, ServedModel } from "./served_model.ts";

/** The model file of an upload (Triton's `file:<version>/<name>` parameter): a NEFF, or an ONNX model to compile. */
export type ModelFileName = "model.neff" | "model.onnx";

/** A model file sent by a client to be stored in the repository and loaded (Triton's load with file override). */
export interface ModelUpload {
  /** The version folder it was sent for (`file:1/model.neff` → `"1"`): digits, no leading zero. */
  readonly version: string;
  /** Which file it is. */
  readonly file: ModelFileName;
  /** The file's bytes (decoded from base64, within the repository's file cap). */
  readonly bytes: Uint8Array;
  /** The model's config as JSON text (Triton's `config` parameter), if one was sent. */
  readonly config?: Uint8Array;
}

/** How the repository reads (and optionally writes) its directory. */
export interface RepositoryFiles {
  /** Names (not paths) of the files in the repository directory: `<model>.neff`, `<model>.json`, others ignored. */
  list(): Promise<string[]>;
  /** The bytes of one file by name, or `undefined` when it does not exist. */
  read(name: string): Promise<Uint8Array | undefined>;
  /**
   * The version a model's files are served as, read at each load (Triton's layout: the highest numeric version
   * folder); absent or `undefined`: `"1"`.
   */
  version?(model: string): Promise<string | undefined>;
  /**
   * Where a file the repository names lives, relative to the repository, for messages: a Triton-style model's
   * `relu.json` is `relu/config.json`. Absent or `undefined`: the name itself. Ours.
   */
  pathOf?(name: string): Promise<string | undefined>;
  /**
   * Stores an upload so that later scans and loads find it, each file replaced atomically, never outside the
   * repository. Absent: uploads are refused (403).
   */
  write?(model: string, upload: ModelUpload): Promise<void>;
  /**
   * The NEFF an uploaded `model.onnx` compiles to, and its config as the repository reads it. Absent: ONNX uploads
   * are refused (400).
   */
  compile?(
    model: string,
    onnx: Uint8Array,
    config: Uint8Array | undefined,
  ): Promise<{ neff: Uint8Array; config: Uint8Array | undefined }>;
}

/** The per-model config file `<name>.json`. */
export interface ModelConfig {
  /** Logical NeuronCore of the first instance (default: models are spread round-robin at scan). */
  readonly vnc?: number;
  /**
   * Instances: a count from 1 to 64, on consecutive logical cores from `vnc` (wrapping around the visible ones), or
   * `"per-core"` for one on each visible logical core (default 1).
   */
  readonly instances?: number | "per-core";
  /** Requests that may wait for a free instance (default: the repository's `maxQueue`). */
  readonly maxQueue?: number;
  /** Run each instance once on zeroed inputs before the model is ready (default: the repository's `warmup`). */
  readonly warmup?: boolean;
}

/** A model's state in the repository index. */
export type ModelState = "UNAVAILABLE" | "LOADING" | "READY" | "UNLOADING";

/** One entry of `POST /v2/repository/index`. */
export interface RepositoryIndexEntry {
  /** Model name. */
  readonly name: string;
  /** Version. */
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
  /** The version served (or last served): `"1"` unless the repository's layout has version folders. */
  readonly version: string;
  /** State. */
  readonly state: ModelState;
  /** The loaded model when `state` is `READY`. */
  readonly served: ServedModel | undefined;
  /** The signature of the last successful load, kept across unloads for metadata. */
  readonly signature: { readonly inputs: readonly NeffTensor[]; readonly outputs: readonly NeffTensor[] } | undefined;
  /** Why it is not ready, or `""` when it is. */
  readonly reason: string;
  /** Whether the server was asked to serve it (loaded at start, loaded or uploaded since, not unloaded since). */
  readonly wanted: boolean;
}

/** Whether the server is ready, and why not. */
export type Readiness = { readonly ready: true } | { readonly ready: false; readonly reason: string };

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
  /** Warm each instance up with one execution before the model is ready (default true; a model config may say otherwise). */
  readonly warmup?: boolean;
  /**
   * Largest input or output tensor a served model may have, in bytes (default 64 MiB, the REST body limit: no request
   * could carry a larger input, and a larger output would be held whole in the server's memory at every request).
   * Ours.
   */
  readonly maxTensorBytes?: number;
}

/** The default {@linkcode ModelRepositoryOptions.maxTensorBytes}: 64 MiB, the REST body limit. */
export const DEFAULT_MAX_TENSOR_BYTES: number = 64 * 1024 * 1024;

/** The version of a model without version folders. */
export const MODEL_VERSION = "1";

/** Most instances one model may ask for by count. */
export const MAX_INSTANCES = 64;

/**
 * Unloaded handles whose model the repository still names ({@linkcode ModelRepository.modelOfHandle}): as many as the
 * runtime keeps listing in `executionStats` after their unload.
 */
const FORGOTTEN_AFTER = 256;

/** The model and version a handle was loaded for, and how many of the repository's instances hold it now. */
interface HandleRecord {
  readonly model: string;
  readonly version: string;
  live: number;
}

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const VERSION = /^[1-9][0-9]{0,8}$/;
const CONFIG_KEYS = new Set(["vnc", "instances", "maxQueue", "warmup"]);

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

/**
 * Whether `version` may name a model version: a positive integer in decimal, without a leading zero, at most 9
 * digits (Triton's numeric version folders) — so never a path.
 *
 * @param version A candidate version.
 * @returns Whether it is valid.
 *
 * @example
 * ```ts
 * import { isValidModelVersion } from "@nrt/http-api";
 * console.log(isValidModelVersion("3"), isValidModelVersion("03"), isValidModelVersion("..")); // true false false
 * ```
 */
export function isValidModelVersion(version: string): boolean {
  return VERSION.test(version);
}

/**
 * Reads a model config (`<name>.json`, or an upload's `config` parameter).
 *
 * @param name The model, for messages.
 * @param bytes The JSON text.
 * @param source Where it came from, for messages (`relu.json`).
 * @param visibleVncs The runtime's visible logical cores: a `"vnc"` past them is refused (default: not checked).
 *   `"instances"` needs no such check: instances wrap around the visible cores from `"vnc"`.
 * @returns The config.
 * @throws {HttpError} 400 for anything but an object of the known keys with valid values.
 *
 * @example
 * ```ts
 * import { parseModelConfig } from "@nrt/http-api";
 * const c = parseModelConfig("relu", new TextEncoder().encode('{"instances": "per-core"}'), "relu.json");
 * console.log(c.instances); // "per-core"
 * ```
 */
export function parseModelConfig(
  name: string,
  bytes: Uint8Array,
  source: string,
  visibleVncs?: number,
): ModelConfig {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new HttpError(400, `Cannot load model "${name}": ${source} is not JSON`, { cause: err });
  }
  const bad = (why: string): HttpError => new HttpError(400, `Cannot load model "${name}": ${source} ${why}`);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad("is not an object");
  const c = v as Record<string, unknown>;
  for (const k of Object.keys(c)) if (!CONFIG_KEYS.has(k)) throw bad(`has an unknown key "${k.slice(0, 64)}"`);
  if (c.vnc !== undefined && (!Number.isSafeInteger(c.vnc) || (c.vnc as number) < 0)) {
    throw bad(`"vnc" must be a non-negative integer`);
  }
  // A core that does not exist is the config's mistake (400 naming the key), not a lack of cores (nrt_load's
  // NRT_LOAD_NOT_ENOUGH_NC, 503). Ours.
  if (visibleVncs !== undefined && c.vnc !== undefined && (c.vnc as number) >= visibleVncs) {
    throw bad(
      visibleVncs === 1
        ? `"vnc" must be 0: the runtime has 1 visible logical core`
        : `"vnc" must be from 0 to ${visibleVncs - 1}: the runtime has ${visibleVncs} visible logical cores`,
    );
  }
  if (c.instances !== undefined && c.instances !== "per-core") {
    if (!Number.isSafeInteger(c.instances) || (c.instances as number) < 1 || (c.instances as number) > MAX_INSTANCES) {
      throw bad(`"instances" must be an integer from 1 to ${MAX_INSTANCES} or "per-core"`);
    }
  }
  if (c.instances === "per-core" && c.vnc !== undefined) {
    throw bad(`"vnc" cannot be given with "instances": "per-core"`);
  }
  if (c.maxQueue !== undefined && (!Number.isSafeInteger(c.maxQueue) || (c.maxQueue as number) < 0)) {
    throw bad(`"maxQueue" must be a non-negative integer`);
  }
  if (c.warmup !== undefined && typeof c.warmup !== "boolean") throw bad(`"warmup" must be true or false`);
  return c as ModelConfig;
}

/**
 * The error of a request for a model that cannot take it: 503 with the repository's reason.
 *
 * @param m The model.
 * @returns The error to throw.
 */
export function notReadyError(m: RepositoryModel): HttpError {
  return new HttpError(503, `Model "${m.name}" is not ready: ${m.reason || m.state.toLowerCase()}`);
}

class Entry implements RepositoryModel {
  state: ModelState = "UNAVAILABLE";
  version: string = MODEL_VERSION;
  served: ServedModel | undefined;
  signature: RepositoryModel["signature"];
  failure = "";
  wanted = false;
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

/** Where a load takes its model from: the repository's files, or an upload. */
interface LoadSource {
  readonly neff: Uint8Array;
  readonly config: ModelConfig;
  readonly version: string;
  /** Runs once the new instances are up, before they serve: stores the upload. */
  readonly commit?: () => Promise<void>;
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
  readonly #warmup: boolean;
  readonly #maxTensorBytes: number;
  readonly #coreLoad = new CoreLoad();
  readonly #entries = new Map<string, Entry>();
  /** The handles this repository loaded, by `H_MODEL`: the live ones and the last unloaded ones. */
  readonly #handles = new Map<number, HandleRecord>();
  /** Unloaded handles, oldest first, forgotten past {@linkcode FORGOTTEN_AFTER}. */
  readonly #unloaded: number[] = [];
  #nextVnc = 0;
  #closed = false;

  /** Creates an empty repository; call {@linkcode ModelRepository.scan} to read the directory. */
  constructor(options: ModelRepositoryOptions) {
    this.#rt = options.runtime;
    this.#files = options.files;
    this.#log = options.logger ?? options.runtime.log;
    this.#maxQueue = options.maxQueue ?? 256;
    this.#warmup = options.warmup ?? true;
    this.#maxTensorBytes = options.maxTensorBytes ?? DEFAULT_MAX_TENSOR_BYTES;
  }

  /** Whether models can be uploaded: the files can be written. */
  get writable(): boolean {
    return this.#files.write !== undefined;
  }

  #add(name: string): Entry {
    let e = this.#entries.get(name);
    if (e === undefined) {
      e = new Entry(name, this.#nextVnc++ % this.#visibleVncs);
      this.#entries.set(name, e);
    }
    return e;
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
      this.#add(name);
    }
    for (const [name, e] of this.#entries) {
      if (!names.has(name) && e.state === "UNAVAILABLE" && e.pending === 0) this.#entries.delete(name);
    }
    return [...this.#entries.keys()].sort();
  }

  /**
   * Loads every model of the last scan; a model that fails stays `UNAVAILABLE` with the error as its reason (and
   * keeps the server from being ready).
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
        // The repository's own errors already say which model they are about; the runtime's (nrt_load) do not.
        const why = e instanceof Error ? e.message : String(e), about = `Cannot load model "${name}": `;
        this.#log.error(why.startsWith(about) ? why : about + why);
      }
    }
    return failed;
  }

  /**
   * The model and version a runtime handle (`H_MODEL`) was loaded for by this repository: from the moment `nrt_load`
   * returned it, before its warm-up, until {@linkcode FORGOTTEN_AFTER} handles were unloaded after it. Ours: what
   * `/metrics` labels the runtime's per-handle execution statistics with.
   *
   * @param handle The handle.
   * @returns The model's name and version, or `undefined` for a handle this repository did not load (or forgot).
   */
  modelOfHandle(handle: number): { readonly model: string; readonly version: string } | undefined {
    const r = this.#handles.get(handle);
    return r === undefined ? undefined : { model: r.model, version: r.version };
  }

  /** Records a handle loaded for `model` at `version` (a shared, interned handle is held once more). */
  #holdHandle(handle: number, model: string, version: string): void {
    const r = this.#handles.get(handle);
    this.#handles.set(handle, { model, version, live: (r?.live ?? 0) + 1 });
  }

  /** Records that one instance of a handle was unloaded; the last one keeps it named for a while. */
  #releaseHandles(handles: Iterable<number>): void {
    for (const h of handles) {
      const r = this.#handles.get(h);
      if (r === undefined || r.live === 0) continue;
      if (--r.live === 0) this.#unloaded.push(h);
    }
    while (this.#unloaded.length > FORGOTTEN_AFTER) {
      const h = this.#unloaded.shift()!;
      if (this.#handles.get(h)?.live === 0) this.#handles.delete(h);
    }
  }

  /** The model called `name`, or `undefined` when the repository has none. */
  get(name: string): RepositoryModel | undefined {
    return this.#entries.get(name);
  }

  /**
   * The model a request names, as both protocols look it up.
   *
   * @param name The model name.
   * @param version The version asked for; `undefined` or `""` for the one served.
   * @returns The model.
   * @throws {HttpError} 400 for a name that could be a path; 404 for an unknown model or version.
   */
  lookup(name: string, version?: string): RepositoryModel {
    if (!isValidModelName(name)) {
      throw new HttpError(
        400,
        `Invalid model name ${
          JSON.stringify(name.slice(0, 128))
        }: use 1 to 128 of A-Z a-z 0-9 _ . - and no leading dot`,
      );
    }
    const m = this.#entries.get(name);
    if (m === undefined) throw new HttpError(404, `Cannot find model "${name}": it is not in the repository`);
    if (version !== undefined && version !== "" && version !== m.version) {
      throw new HttpError(
        404,
        `Cannot find version ${
          JSON.stringify(version.slice(0, 32))
        } of model "${name}": it has only version ${m.version}`,
      );
    }
    return m;
  }

  /** Every model, sorted by name. */
  models(): RepositoryModel[] {
    return [...this.#entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** The repository index (Triton's `POST v2/repository/index`). */
  index(): RepositoryIndexEntry[] {
    return this.models().map((m) => ({ name: m.name, version: m.version, state: m.state, reason: m.reason }));
  }

  /**
   * Whether the server is ready: the runtime is up and every model it was asked to serve (at start, or by a load or
   * an upload since, and not unloaded since) is loaded, warmed up and not poisoned.
   *
   * @returns Ready, or not with the reason (one sentence naming each model that is not ready).
   */
  readiness(): Readiness {
    if (this.#rt.state !== NrtInitState.NRT_STATE_INIT) return { ready: false, reason: "the runtime is not running" };
    const waiting = this.models().filter((m) => m.wanted && (m.state !== "READY" || m.reason !== ""));
    if (waiting.length === 0) return { ready: true };
    const why = waiting.map((m) =>
      `model "${m.name}" ${m.state === "LOADING" ? "is loading" : `is not ready (${m.reason})`}`
    );
    return { ready: false, reason: why.join("; ") };
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
   * Loads a model, from the repository's files. A load while one is in progress joins it; a load of a ready model
   * does nothing; a load of a model with a poisoned instance loads it again and replaces it.
   *
   * @param name Model name.
   * @throws {HttpError} 404 for an unknown model, 400 for a bad config.
   * @throws {NrtError} What `nrt_load` or the warm-up reported.
   */
  load(name: string): Promise<void> {
    let e: Entry;
    try {
      e = this.#entry(name);
    } catch (err) {
      return Promise.reject(err);
    }
    e.wanted = true;
    if (e.loading !== undefined) return e.loading;
    if (e.pending === 0 && e.state === "READY" && e.served !== undefined && e.served.poisonedInstances === 0) {
      return Promise.resolve();
    }
    const p = this.#chain(e, () => this.#load(e));
    e.loading = p;
    const clear = (): void => {
      if (e.loading === p) e.loading = undefined;
    };
    p.then(clear, clear);
    return p;
  }

  /**
   * Stores an uploaded model file in the repository and serves it: the new instances are loaded and warmed up from
   * the upload first (a model already served keeps serving meanwhile), the files are written only once that
   * worked, then requests go to the new instances and the old ones unload after their requests finish. A bad file
   * changes nothing.
   *
   * @param name Model name (a new one adds the model).
   * @param upload The file, its version and the config.
   * @throws {HttpError} 400 for an invalid name, version, config or file; 403 when the repository cannot be written;
   *   503 while the server shuts down.
   * @throws {NrtError} What `nrt_load` or the warm-up reported.
   */
  async upload(name: string, upload: ModelUpload): Promise<void> {
    if (!isValidModelName(name)) {
      throw new HttpError(
        400,
        `Invalid model name ${
          JSON.stringify(name.slice(0, 128))
        }: use 1 to 128 of A-Z a-z 0-9 _ . - and no leading dot`,
      );
    }
    if (this.#closed) throw new HttpError(503, `Cannot change model "${name}": the server is shutting down`);
    const write = this.#files.write;
    if (write === undefined) {
      throw new HttpError(403, `Cannot store model "${name}": this repository cannot be written`);
    }
    if (!isValidModelVersion(upload.version)) {
      throw new HttpError(
        400,
        `Cannot load model "${name}": version ${JSON.stringify(upload.version.slice(0, 32))} is not a positive integer`,
      );
    }
    let neff = upload.bytes, config = upload.config;
    if (upload.file === "model.onnx") {
      if (this.#files.compile === undefined) {
        throw new HttpError(400, `Cannot load model "${name}": this server does not compile ONNX models`);
      }
      ({ neff, config } = await this.#files.compile(name, upload.bytes, upload.config));
    }
    const parsed = config === undefined
      ? {}
      : parseModelConfig(name, config, "the config parameter", this.#visibleVncs);
    const created = !this.#entries.has(name);
    const e = this.#add(name);
    try {
      await this.#chain(
        e,
        () =>
          this.#load(e, {
            neff,
            config: parsed,
            version: upload.version,
            commit: () => write.call(this.#files, name, upload),
          }),
      );
      e.wanted = true;
    } catch (err) {
      // A model that only this upload brought in leaves no trace.
      if (created && e.pending === 0 && e.state === "UNAVAILABLE") this.#entries.delete(name);
      throw err;
    }
  }

  async #load(e: Entry, source?: LoadSource): Promise<void> {
    const old = e.state === "READY" ? e.served : undefined;
    if (old === undefined) e.state = "LOADING";
    let served: ServedModel | undefined;
    /** The handles this load loaded, in order. */
    const loaded: number[] = [];
    try {
      const config = source?.config ?? await this.#config(e.name);
      const version = source?.version ?? (await this.#files.version?.(e.name)) ?? MODEL_VERSION;
      const neff = source?.neff ?? await this.#files.read(`${e.name}.neff`);
      if (neff === undefined) {
        throw new HttpError(404, `Cannot load model "${e.name}": ${e.name}.neff is no longer in the repository`);
      }
      const vncs = this.#vncsOf(e, config);
      // Each instance's handle is recorded as soon as it is loaded, before its warm-up runs (modelOfHandle).
      served = await ServedModel.load(this.#rt, e.name, neff, vncs, {
        maxQueue: config.maxQueue ?? this.#maxQueue,
        warmup: config.warmup ?? this.#warmup,
        coreLoad: this.#coreLoad,
        maxTensorBytes: this.#maxTensorBytes,
        onLoaded: (m) => {
          this.#holdHandle(m.handle, e.name, version);
          loaded.push(m.handle);
        },
      });
      await source?.commit?.();
      // The swap: requests from here on go to the new instances; the old ones finish theirs, then unload.
      e.served = served;
      e.signature = { inputs: served.inputs, outputs: served.outputs };
      e.version = version;
      e.state = "READY";
      e.failure = "";
      this.#log.info(
        `Loaded model "${e.name}" version ${version} on logical core(s) ${vncs.join(", ")}${
          old === undefined ? "" : " (replacing the one served)"
        }`,
      );
    } catch (err) {
      if (served !== undefined && e.served !== served) await served.close().catch(() => {});
      // ServedModel.load unloads what it loaded when it fails; a model loaded whole was closed just above.
      if (e.served !== served || served === undefined) this.#releaseHandles(loaded);
      // A failed replacement of a healthy model leaves it serving; a poisoned or absent one becomes UNAVAILABLE.
      if (old === undefined || old.notReadyReason !== undefined) {
        if (old !== undefined) await this.#unload(e).catch(() => {});
        e.state = "UNAVAILABLE";
        e.failure = `load failed: ${err instanceof Error ? err.message : String(err)}`;
      }
      throw err;
    }
    if (old !== undefined) await this.#close(old);
  }

  /** Unloads a served model (after its requests) and records its handles unloaded. */
  async #close(served: ServedModel): Promise<void> {
    const handles = served.instances.map((i) => i.handle);
    try {
      await served.close();
    } finally {
      this.#releaseHandles(handles);
    }
  }

  /** The runtime's visible logical cores (at least 1), which a config's `"vnc"` must name one of. */
  get #visibleVncs(): number {
    return Math.max(1, this.#rt.visibleVncCount);
  }

  /** The logical cores of a model's instances. */
  #vncsOf(e: Entry, config: ModelConfig): number[] {
    const count = this.#visibleVncs;
    if (config.instances === "per-core") return Array.from({ length: count }, (_, k) => k);
    // Instances wrap around the visible cores from the first, which the config check kept among them.
    const first = config.vnc ?? e.defaultVnc;
    return Array.from({ length: config.instances ?? 1 }, (_, k) => (first + k) % count);
  }

  async #config(name: string): Promise<ModelConfig> {
    const file = `${name}.json`;
    const bytes = await this.#files.read(file);
    if (bytes === undefined) return {};
    return parseModelConfig(name, bytes, (await this.#files.pathOf?.(file)) ?? file, this.#visibleVncs);
  }

  /**
   * Unloads a model after its running and queued requests finish; unloading an unloaded model does nothing. The
   * model no longer counts for the server's readiness.
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
    e.wanted = false;
    return this.#chain(e, () => this.#unload(e));
  }

  async #unload(e: Entry): Promise<void> {
    if (e.state !== "READY" || e.served === undefined) return;
    e.state = "UNLOADING";
    const served = e.served;
    try {
      await this.#close(served);
    } finally {
      e.served = undefined;
      e.state = "UNAVAILABLE";
      e.failure = "";
    }
    this.#log.info(`Unloaded model "${e.name}"`);
  }

  /**
   * Refuses the requests waiting in every model's queue (503); running requests go on. For a shutdown whose
   * deadline passed.
   *
   * @param reason Why, for the refused requests' message.
   * @returns How many requests were refused.
   */
  refuseQueued(reason: string): number {
    let n = 0;
    for (const e of this.#entries.values()) n += e.served?.refuseQueued(reason) ?? 0;
    return n;
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
 * Repository files held in memory (tests, embedded models), one version of each model. An upload is stored as
 * `<name>.neff` (a compiled ONNX upload needs a `compile` of the caller's) with its config as `<name>.json`.
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
    write: (model, upload) => {
      if (upload.version !== MODEL_VERSION) {
        return Promise.reject(
          new HttpError(
            400,
            `Cannot store version ${upload.version} of model "${model}": this repository holds version ${MODEL_VERSION} only`,
          ),
        );
      }
      if (upload.file !== "model.neff") {
        return Promise.reject(
          new HttpError(400, `Cannot store model "${model}": this repository holds NEFF files only`),
        );
      }
      files[`${model}.neff`] = upload.bytes;
      if (upload.config !== undefined) files[`${model}.json`] = upload.config;
      return Promise.resolve();
    },
  };
}
