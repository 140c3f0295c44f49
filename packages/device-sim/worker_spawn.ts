/**
 * How the device side starts its own Workers (the Q7 cores' and the local-op watchdog's): a {@linkcode WorkerSpawner}
 * gives a Worker-shaped {@linkcode SpawnedWorker}. Ours.
 *
 * On the host's thread (an inline device, a cluster made directly) a spawner starts a Worker there. A device agent in
 * a Worker of its own asks the host to start them instead ({@linkcode HostSpawner}), and talks to each over a
 * `MessageChannel` of its own; the Workers' shared memory, doorbells and kill flags are the agent's as before. The
 * reason is measured: on Deno (2.9.6) a Worker started by a Worker begins 500 ms late and takes its first message
 * 500 ms late, so its first round trip took 1,015–1,042 ms against 19–31 ms for a Worker the main thread starts and
 * hands a port to the agent (the same probe on Bun: 5–8 ms either way). A Q7 cluster booted by the agent took about
 * 1 s on Deno, at every load on a new core and at every recovery after a hang.
 *
 * @module
 */

/** The device scripts a spawner starts: the Q7 cores' Worker and the local-op watchdog's. */
export type DeviceWorkerScript = "q7-cores" | "q7-watchdog";

/** The URL of each {@linkcode DeviceWorkerScript}; any other value names the watchdog's, never a URL of its own. */
export function deviceWorkerUrl(script: DeviceWorkerScript): URL {
  return script === "q7-cores"
    ? new URL("./q7/q7_worker.js", import.meta.url)
    : new URL("./q7/q7_watchdog.js", import.meta.url);
}

/** The part of a `Worker` the device side uses. */
export interface SpawnedWorker {
  /** Posts a message to the Worker (transferring `transfer`). */
  postMessage(message: unknown, transfer?: Transferable[]): void;
  /** Called with each message the Worker posts. */
  onmessage: ((e: MessageEvent) => void) | null;
  /** Called when the Worker's script throws (`preventDefault` keeps it from the thread's own error handler). */
  onerror: ((e: ErrorEvent) => void) | null;
  /** Stops the Worker. */
  terminate(): void;
}

/** Starts a device Worker. */
export type WorkerSpawner = (script: DeviceWorkerScript) => SpawnedWorker;

/** Starts the Worker on this thread. */
export const spawnHere: WorkerSpawner = (script) =>
  new Worker(deviceWorkerUrl(script), { type: "module" }) as unknown as SpawnedWorker;

/** What a device agent asks its host to do with a Worker it spawns for it. */
export type SpawnRequest =
  | { readonly spawn: "start"; readonly id: number; readonly script: DeviceWorkerScript; readonly port: MessagePort }
  | { readonly spawn: "terminate"; readonly id: number };

/** What the host tells the agent about a Worker it spawned: its script threw. */
export interface SpawnError {
  readonly spawnError: number;
  readonly message: string;
}

/** The first message a host-spawned device Worker gets: the port it talks to the agent over. */
export interface SpawnConnect {
  readonly connect: MessagePort;
}

/**
 * The agent's spawner when the agent runs in a Worker: each Worker is started by the host, which hands it one end of
 * a `MessageChannel` whose other end the agent keeps.
 */
export class HostSpawner {
  readonly #post: (request: SpawnRequest, transfer: Transferable[]) => void;
  readonly #live = new Map<number, SpawnedWorker>();
  #next = 1;

  /** A spawner that sends its requests to the host with `post`. */
  constructor(post: (request: SpawnRequest, transfer: Transferable[]) => void) {
    this.#post = post;
  }

  /** Starts a Worker through the host. */
  readonly spawn: WorkerSpawner = (script) => {
    const id = this.#next++;
    const { port1, port2 } = new MessageChannel();
    const live = this.#live;
    const post = this.#post;
    const worker: SpawnedWorker = {
      postMessage: (message, transfer) => port1.postMessage(message, transfer ?? []),
      onmessage: null,
      onerror: null,
      terminate: () => {
        if (!live.delete(id)) return;
        port1.close();
        post({ spawn: "terminate", id }, []);
      },
    };
    port1.onmessage = (e) => worker.onmessage?.(e);
    live.set(id, worker);
    post({ spawn: "start", id, script, port: port2 }, [port2]);
    return worker;
  };

  /** The host says Worker `id`'s script threw. */
  failed(error: SpawnError): void {
    const w = this.#live.get(error.spawnError);
    w?.onerror?.({ message: error.message, preventDefault() {} } as ErrorEvent);
  }
}

/**
 * The host's side: starts the Workers an agent asks for and stops them when it asks, or when {@linkcode
 * HostedWorkers.close} is called (the agent is gone). Each one's errors go back to the agent with `notify`.
 */
export class HostedWorkers {
  readonly #workers = new Map<number, Worker>();
  readonly #notify: (error: SpawnError) => void;

  /** Workers whose errors are reported with `notify`. */
  constructor(notify: (error: SpawnError) => void) {
    this.#notify = notify;
  }

  /** How many are running. */
  get size(): number {
    return this.#workers.size;
  }

  /** Takes one request from the agent. */
  handle(request: SpawnRequest): void {
    if (request.spawn === "terminate") {
      this.#workers.get(request.id)?.terminate();
      this.#workers.delete(request.id);
      return;
    }
    // Only the device's own scripts: the request names one, it does not carry a URL.
    const w = new Worker(deviceWorkerUrl(request.script), { type: "module" });
    w.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      this.#notify({ spawnError: request.id, message: e.message });
    };
    w.postMessage({ connect: request.port } satisfies SpawnConnect, [request.port]);
    this.#workers.set(request.id, w);
  }

  /** Stops every Worker. */
  close(): void {
    for (const w of this.#workers.values()) w.terminate();
    this.#workers.clear();
  }
}
