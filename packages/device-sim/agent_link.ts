/**
 * The host's end of a device agent: ordered control messages with replies, and the doorbell ring. Two backings with
 * one behaviour: the agent in a Worker of its own (the default — the device then runs beside the host's event loop,
 * not on it), or inline on the host's thread (for a custom Q7 cluster factory, and for measuring what the Worker
 * buys). Ours.
 *
 * @module
 */
import { NrtError, NrtStatus } from "@nrt/core";
import { type AgentInit, type AgentMessage, type AgentReply, DeviceAgent, DoorbellRing } from "./device_agent.ts";
import { addClockSkew, killLocalOps, LocalWatchdog, resetLocalOps } from "./local_watchdog.ts";
import { localOpsQ7Factory } from "./q7_factory.ts";
import type { Q7ClusterFactory } from "./q7_complex.ts";
import { HostedWorkers, type SpawnRequest } from "./worker_spawn.ts";

/** A control message before it is numbered. */
export type AgentRequest = AgentMessage extends infer M ? M extends { seq: number } ? Omit<M, "seq"> : never : never;

/** The host's end of one agent. */
export class AgentLink {
  readonly #ring: Int32Array;
  readonly #send: (msg: AgentMessage) => void;
  readonly #pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  readonly #stop: () => void;
  #sent = 0;
  #written = 0;
  #failure: Error | undefined;

  private constructor(ring: Int32Array, send: (link: AgentLink) => (msg: AgentMessage) => void, stop: () => void) {
    this.#ring = ring;
    this.#send = send(this);
    this.#stop = stop;
  }

  /** An agent in a Worker of its own. */
  static worker(init: AgentInit): AgentLink {
    const worker = new Worker(new URL("./device_agent_worker.ts", import.meta.url), { type: "module" });
    // The agent's own Workers (Q7 cores, watchdog), started here for it (worker_spawn.ts).
    const hosted = new HostedWorkers((error) => worker.postMessage(error));
    const link = new AgentLink(
      new Int32Array(init.doorbells),
      () => (msg) => worker.postMessage(msg),
      () => {
        worker.terminate();
        hosted.close();
      },
    );
    worker.onmessage = (e: MessageEvent<AgentReply | SpawnRequest>) => {
      if ("spawn" in e.data) hosted.handle(e.data);
      else link.#reply(e.data);
    };
    worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      link.#fail(new Error(`the device agent failed: ${e.message}`));
    };
    worker.postMessage(init);
    return link;
  }

  /**
   * An agent on this thread, with the given Q7 cluster factory. Without one it runs small ops on this thread under a
   * watchdog Worker, as the agent in a Worker does (`device_agent_worker.ts`), and the rest on its Q7 Workers.
   */
  static inline(init: AgentInit, q7Factory?: Q7ClusterFactory): AgentLink {
    const watchdog = q7Factory === undefined ? new LocalWatchdog(init.doorbells) : undefined;
    const agent = new DeviceAgent(init, q7Factory ?? localOpsQ7Factory(watchdog!));
    // The agent and the host sleep in `Atomics.waitAsync` on words this same thread notifies. Deno (2.9.6) settles
    // such a wait only while its event loop has something pending, so an inline device holds a timer until closed.
    const keepAlive = setInterval(() => {}, 0x3fff_ffff);
    return new AgentLink(
      new Int32Array(init.doorbells),
      (link) => (msg) => queueMicrotask(() => agent.handle(msg, (r) => link.#reply(r))),
      () => {
        clearInterval(keepAlive);
        watchdog?.stop();
      },
    );
  }

  /** Control messages sent so far (a doorbell is not played before the agent has taken them). */
  get sent(): number {
    return this.#sent;
  }

  /** Doorbells rung so far. */
  get doorbells(): number {
    return this.#written;
  }

  /** Sends a control message and resolves with its reply's value once it has taken effect on the device. */
  request(request: AgentRequest): Promise<unknown> {
    if (this.#failure !== undefined) return Promise.reject(this.#hwError());
    // The agent may be inside a small op it runs itself: its watchdog reads the device clock's skew from the ring.
    if (request.t === "elapse") addClockSkew(this.#ring.buffer as SharedArrayBuffer, request.ms);
    if (request.t === "reset-q7") resetLocalOps(this.#ring.buffer as SharedArrayBuffer, request.nc);
    const msg = { ...request, seq: ++this.#sent, rung: this.#written } as AgentMessage;
    return new Promise((resolve, reject) => {
      this.#pending.set(msg.seq, { resolve, reject });
      this.#send(msg);
    });
  }

  /** Sends a control message without waiting for it (a posted write). */
  post(request: AgentRequest): void {
    if (this.#failure !== undefined) throw this.#hwError();
    this.#send({ ...request, seq: ++this.#sent, rung: this.#written } as AgentMessage);
  }

  /**
   * Rings a doorbell: one ring entry (NeuronCore, semaphore, count, control messages sent so far) and a notify. Posted:
   * it returns at once, unless the ring is full, when it waits for room.
   */
  doorbell(nc: number, semaphore: number, by: number): Promise<void> | void {
    if (this.#failure !== undefined) throw this.#hwError();
    const ring = this.#ring;
    if (this.#written - Atomics.load(ring, DoorbellRing.HANDLED) >= DoorbellRing.ENTRIES) {
      return this.#room().then(() => this.doorbell(nc, semaphore, by));
    }
    const at = DoorbellRing.HEADER_WORDS + (this.#written % DoorbellRing.ENTRIES) * DoorbellRing.ENTRY_WORDS;
    ring[at] = nc;
    ring[at + 1] = semaphore;
    ring[at + 2] = by;
    ring[at + 3] = this.#sent;
    Atomics.store(ring, DoorbellRing.WRITTEN, ++this.#written);
    if (Atomics.load(ring, DoorbellRing.SLEEPING) !== 0) Atomics.notify(ring, DoorbellRing.WRITTEN);
  }

  async #room(): Promise<void> {
    for (;;) {
      const handled = Atomics.load(this.#ring, DoorbellRing.HANDLED);
      if (this.#written - handled < DoorbellRing.ENTRIES) return;
      const w = Atomics.waitAsync(this.#ring, DoorbellRing.HANDLED, handled);
      if (w.async) await w.value;
    }
  }

  /** Closes the agent: it stops its sequencers and Q7 Workers, then the Worker goes. */
  async close(): Promise<void> {
    // A small op spinning on the agent's own thread would hold the close message back: its watchdog stops it now.
    killLocalOps(this.#ring.buffer as SharedArrayBuffer);
    if (this.#failure === undefined) await this.request({ t: "close" }).catch(() => {});
    this.#stop();
    this.#fail(new Error("the device agent is closed"));
  }

  #reply(r: AgentReply): void {
    const p = this.#pending.get(r.re);
    if (p === undefined) return;
    this.#pending.delete(r.re);
    if (r.error !== undefined) p.reject(new NrtError(NrtStatus.NRT_HW_ERROR, `Device agent: ${r.error}`));
    else p.resolve(r.value);
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    for (const p of this.#pending.values()) p.reject(this.#hwError());
    this.#pending.clear();
  }

  #hwError(): NrtError {
    return new NrtError(
      NrtStatus.NRT_HW_ERROR,
      `Cannot reach the simulated device: ${this.#failure?.message ?? "unknown"}`,
    );
  }
}
