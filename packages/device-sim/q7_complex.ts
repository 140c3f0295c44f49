/**
 * The 8 Q7 (GPSIMD pool) cores of one NeuronCore as the device sees them: run-stall state, the image installed over
 * BAR0, and the lazily started {@linkcode Q7ClusterPort} that runs it. The cluster's Workers are created on the
 * first EXTENDED_INST of the NeuronCore, kept for the NeuronCore's life, and terminated by a Q7 reset, a re-install
 * or the portal's close.
 *
 * Seed: runtime-synthesis §2.1 (the image is broadcast to all 8 cores, DRAM then IRAM; Cayman/Mariana leave
 * run-stall by the host CSR 0xFF → 0x00, Sunda under SEQ/SP through the EVT_SEM fabric), spmd-teardown §1 (all 8
 * cores run the same image SPMD; the rank is the PRID), §2.2 (one opcode table, broadcast).
 *
 * Ours: the libraries prepared in a cluster are bounded by the cluster (`Q7ClusterOptions.maxLibraries`, 32 by
 * default, least recently used out first). {@linkcode ClusterHandle.ensureLibrary} marks a library it finds prepared
 * as used ({@linkcode Q7ClusterPort.touch}) and forgets the keys a prepare evicted, so a later ULIB_LOAD or
 * EXTENDED_INST of an evicted library prepares it again. An eviction cannot take a library between a run's ULIB_LOAD
 * and its EXTENDED_INST: the sequencer runs one run (or one library staging) at a time per NeuronCore, so the only
 * prepares in between are that run's own, and its libraries are the most recently used — with at most the cap of them
 * none is evicted; a run that loads more than the cap has its EXTENDED_INST prepare its library again before the op
 * starts. And the library of the op on the cores is never evicted.
 *
 * @module
 */
import type { TensorDescriptor } from "@nrt/core/isa";
import { type NcRegisters, NcStatus, Q7State } from "./nc_registers.ts";
import type { SbufStore } from "./sbuf.ts";
import type { Q7AbortSignal } from "./q7/q7_cluster.ts";

export type { Q7AbortSignal };

/** The arguments of one dispatch, as the Q7 kernel ABI consumes them. */
export interface Q7DispatchArgs {
  /** Input tensors (Q7-local addresses inside the SBUF window). */
  readonly inputs: readonly TensorDescriptor[];
  /** Output tensors. */
  readonly outputs: readonly TensorDescriptor[];
  /** Scalar arguments. */
  readonly ints: readonly bigint[];
}

/** One op handed to the cluster. */
export interface Q7DispatchOp {
  /** Prepared library key, or `""` for the firmware image. */
  readonly key: string;
  /** Function name from the opcode table. */
  readonly fn: string;
  /** Fan-out. */
  readonly totalCpus: 1 | 8;
  /** The argument table of the last LOAD_POOL_ARGUMENT. */
  readonly args: Q7DispatchArgs;
  /**
   * When the device's watchdog drops the op's run, in ms of the device clock (ours). A cluster that runs small ops on
   * the calling thread does so only for an op with a deadline, which its own watchdog then enforces.
   */
  readonly deadlineMs?: number;
}

/** How one core finished a dispatch. */
export interface Q7CoreResult {
  /** Core (PRID). */
  readonly cpu: number;
  /** Whether the core took part. */
  readonly ran: boolean;
  /** Outcome. */
  readonly status: "ok" | "trap" | "oob" | "abort" | "missing-function";
  /** Detail of a failure. */
  readonly message?: string;
  /** Whether the core passed its commit fence (`customop_cleanup`'s memw). */
  readonly committed: boolean;
  /** When the core entered the kernel, ms of the clock every thread shares (`performance.timeOrigin + now()`). */
  readonly startMs?: number;
  /** Time the core spent in the kernel. */
  readonly elapsedNs?: number;
}

/** The Q7 cluster the device drives (the shape of `q7/q7_cluster.ts`'s `Q7Cluster`). */
export interface Q7ClusterPort {
  /** The shared memory of the 8 cores (the Q7 view; SBUF window at 0x200000). */
  readonly memory: WebAssembly.Memory;
  /** Loads the firmware image into all 8 cores. */
  boot(fw: { iram: Uint8Array; dram: Uint8Array }): Promise<unknown>;
  /**
   * Compiles and installs a library image under `key` (marks it used when it is there already); resolves with the
   * keys evicted to make room, if the cluster bounds its libraries.
   */
  prepare(key: string, wasm: Uint8Array): Promise<void | readonly string[]>;
  /** Marks a prepared library used, so that it is the last to be evicted (clusters that bound their libraries). */
  touch?(key: string): unknown;
  /** Runs one op on 1 or 8 cores and resolves with every core's outcome (the join). */
  dispatch(op: Q7DispatchOp, signal?: Q7AbortSignal): Promise<{ cores: Q7CoreResult[] }>;
  /** Takes the stdio the kernels wrote since the last drain. */
  drainStdio(): Array<{ cpu: number; stream: number; text: string }>;
  /** Stops every Worker. */
  terminate(): void;
  /**
   * Whether the cluster's own watchdog stopped an op it ran on the calling thread at its deadline (the cluster is
   * terminated then, and that dispatch rejected). Read right after `runPending` returns.
   */
  readonly watchdogFired?: boolean;
  /**
   * Runs the op `dispatch` left for the calling thread, if one waits (a cluster that runs small ops there; its
   * dispatch only wrote the mailbox). The device calls it at the op's DRAIN. Returns `true` when the op's dispatch
   * has settled by then, so the DRAIN reads the join without racing it against a drop; anything else keeps the race.
   */
  runPending?(): boolean | void;
  /**
   * Takes the join of the op `runPending` last ran to its end (what its dispatch resolved with), once; `undefined`
   * when none is left. A cluster that has it lets the DRAIN read the join at once instead of awaiting the dispatch.
   */
  takeLocalJoin?(): { cores: Q7CoreResult[] } | undefined;
  /** Whether an op waits for `runPending`. */
  readonly hasPending?: boolean;
}

/**
 * Creates a cluster (injected so tests and hosts can substitute one, or wrap the default to observe its dispatches).
 * `nc` names the NeuronCore the cluster serves; `memorySlot` is where the NeuronCore's clusters hand their memory on
 * from one to the next (`Q7ClusterOptions.memorySlot`, ours).
 */
export type Q7ClusterFactory = (
  options: { sbufBytes: number; nc: number; memorySlot?: { memory?: WebAssembly.Memory } },
) => Promise<Q7ClusterPort>;

/** One observable Q7 lifecycle event. */
export interface Q7BootEvent {
  /** NeuronCore. */
  readonly nc: number;
  /** What happened. */
  readonly kind: "released" | "boot-failed" | "cluster-started" | "cluster-terminated";
  /** How the cores left run-stall (for `released`). */
  readonly via?: "host-csr" | "evt-sem";
  /** Detail (failure reason, termination cause). */
  readonly detail?: string;
}

/** Observers of the ops a cluster runs (the device's trace buffer). */
export interface Q7Observer {
  /** An op was handed to the cores. */
  dispatched(op: Q7DispatchOp): void;
  /** An op joined: every core's outcome, or the failure of the whole dispatch. */
  joined(result: { cores: Q7CoreResult[] } | Error): void;
}

/** The Q7 cores of one NeuronCore. */
export class Q7Complex {
  readonly #nc: number;
  readonly #regs: NcRegisters;
  readonly #sbuf: SbufStore;
  readonly #factory: Q7ClusterFactory;
  readonly #event: (e: Q7BootEvent) => void;
  readonly #observer: Q7Observer | undefined;
  #state: "stalled" | "running" | "failed" = "stalled";
  #image: { iram: Uint8Array; dram: Uint8Array } | undefined;
  #cluster: Promise<Q7ClusterPort> | undefined;
  /** Moves on when a cluster starts booting and when one stops: a boot that finds it moved was stopped meanwhile. */
  #generation = 0;
  /** The started cluster (set once `#cluster` resolved, cleared when it stops). */
  #ready: ClusterHandle | undefined;
  #prepared = new Set<string>();
  /**
   * The NeuronCore's Q7 memory, handed from each cluster to the next (ours): a Q7 reset or a hang's recovery boots the
   * next cluster on it instead of a new 28 MiB memory, which Deno freed only when every thread that had it collected.
   */
  readonly #memorySlot: { memory?: WebAssembly.Memory } = {};

  /**
   * Creates the (stalled) Q7 cores of NeuronCore `nc`; lifecycle events go to `event`, ops to `observer`. The state
   * is mirrored in the registers' status words, which the host reads.
   */
  constructor(
    nc: number,
    regs: NcRegisters,
    sbuf: SbufStore,
    factory: Q7ClusterFactory,
    event: (e: Q7BootEvent) => void,
    observer?: Q7Observer,
  ) {
    this.#nc = nc;
    this.#regs = regs;
    this.#sbuf = sbuf;
    this.#factory = factory;
    this.#event = event;
    this.#observer = observer;
  }

  /** `"stalled"` (held or never released), `"running"`, or `"failed"` (boot refused). */
  get state(): "stalled" | "running" | "failed" {
    return this.#state;
  }

  #setState(state: "stalled" | "running" | "failed"): void {
    this.#state = state;
    Atomics.store(
      this.#regs.status,
      NcStatus.Q7_STATE,
      state === "running" ? Q7State.RUNNING : state === "failed" ? Q7State.FAILED : Q7State.STALLED,
    );
  }

  /** Whether the Workers exist. */
  get started(): boolean {
    return this.#cluster !== undefined;
  }

  /**
   * The cores leave run-stall: snapshot the image of core 0 after checking all 8 cores hold the same one. Returns
   * the failure reason when they do not (the cores then stay `failed` until the next release).
   */
  release(via: "host-csr" | "evt-sem"): string | undefined {
    this.#stopCluster("re-released");
    const cores = Q7_CORES;
    const iram = this.#regs.image("iram", 0), dram = this.#regs.image("dram", 0);
    let reason: string | undefined;
    if (iram === undefined || dram === undefined) reason = "no image is installed in Q7 core 0";
    for (let c = 1; c < cores && reason === undefined; c++) {
      if (!sameBytes(iram, this.#regs.image("iram", c)) || !sameBytes(dram, this.#regs.image("dram", c))) {
        reason = `Q7 core ${c} holds a different image than core 0 (the install broadcasts one image to all ${cores})`;
      }
    }
    if (reason !== undefined) {
      this.#setState("failed");
      this.#image = undefined;
      this.#event({ nc: this.#nc, kind: "boot-failed", via, detail: reason });
      return reason;
    }
    this.#setState("running");
    this.#image = { iram: iram!.slice(), dram: dram!.slice() };
    this.#event({ nc: this.#nc, kind: "released", via });
    return undefined;
  }

  /** The cores go back into run-stall (the host wrote a non-zero run-stall value). */
  stall(): void {
    if (this.#state === "running") this.#setState("stalled");
  }

  /** The started cluster, when there is one: the execute path's synchronous fast path. */
  get ready(): ClusterHandle | undefined {
    return this.#ready;
  }

  /** The running cluster, booting it with the released image on first use. */
  cluster(): Promise<ClusterHandle> {
    if (this.#state !== "running" || this.#image === undefined) {
      return Promise.reject(new Error(`Q7 cores of NeuronCore ${this.#nc} are ${this.#state}`));
    }
    if (this.#cluster === undefined) {
      const image = this.#image;
      const generation = ++this.#generation;
      const starting = (async () => {
        const c = await this.#factory({ sbufBytes: this.#sbuf.bytes, nc: this.#nc, memorySlot: this.#memorySlot });
        try {
          await c.boot(image);
        } catch (e) {
          c.terminate();
          throw e;
        }
        // Stopped while it booted (a reset, an unload, a close, or a fresh release): it must not take the SBUF or
        // report itself started; the cluster that replaced it, if any, does.
        if (this.#generation !== generation) {
          c.terminate();
          throw new Error(`Q7 cores of NeuronCore ${this.#nc} were stopped while they booted`);
        }
        this.#sbuf.attach(c.memory);
        this.#event({ nc: this.#nc, kind: "cluster-started" });
        Atomics.store(this.#regs.status, NcStatus.Q7_STARTED, 1);
        return c;
      })();
      this.#cluster = starting;
      const prepared = this.#prepared;
      starting.then((c) => {
        if (this.#cluster === starting) this.#ready = new ClusterHandle(c, prepared, this.#observer);
      }, () => {});
      starting.catch(() => {
        if (this.#cluster === starting) this.#cluster = undefined;
      });
    }
    return this.#cluster.then((c) => new ClusterHandle(c, this.#prepared, this.#observer));
  }

  /** The stdio the kernels wrote since the last drain (empty when the cluster never started). */
  drainStdio():
    | Array<{ cpu: number; stream: number; text: string }>
    | Promise<Array<{ cpu: number; stream: number; text: string }>> {
    if (this.#ready !== undefined) return this.#ready.drainStdio();
    return this.#drainStarting();
  }

  async #drainStarting(): Promise<Array<{ cpu: number; stream: number; text: string }>> {
    if (this.#cluster === undefined) return [];
    try {
      return (await this.#cluster).drainStdio();
    } catch {
      return [];
    }
  }

  /**
   * The last of the 8 cores was destroyed (`ucode_core_destroy`, seed: spmd-teardown §6.3 "stop image, free
   * IRAM/DRAM"): the Workers stop and the released image is forgotten, so nothing runs until a new install and
   * release. The cores are back in their reset state, held.
   */
  unload(cause: string): void {
    this.#stopCluster(cause);
    this.#image = undefined;
    this.#setState("stalled");
  }

  /** Terminates the Workers (a Q7 reset or close); the next EXTENDED_INST boots a fresh cluster. */
  terminate(cause: string): void {
    this.#stopCluster(cause);
  }

  #stopCluster(cause: string): void {
    const c = this.#cluster;
    if (c === undefined) return;
    this.#generation++;
    this.#cluster = undefined;
    this.#ready = undefined;
    this.#prepared = new Set();
    this.#event({ nc: this.#nc, kind: "cluster-terminated", detail: cause });
    Atomics.store(this.#regs.status, NcStatus.Q7_STARTED, 0);
    c.then((x) => x.terminate(), () => {});
  }
}

/** A started cluster plus the set of library keys already prepared in it. */
export class ClusterHandle {
  readonly #cluster: Q7ClusterPort;
  readonly #prepared: Set<string>;
  readonly #observer: Q7Observer | undefined;

  /** Tells the observer of a join (made once, not per dispatch). */
  readonly #joined = (r: { cores: Q7CoreResult[] }): void => this.#observer!.joined(r);
  readonly #failed = (e: unknown): void => this.#observer!.joined(e instanceof Error ? e : new Error(String(e)));

  /** Wraps a started cluster. */
  constructor(cluster: Q7ClusterPort, prepared: Set<string>, observer?: Q7Observer) {
    this.#cluster = cluster;
    this.#prepared = prepared;
    this.#observer = observer;
  }

  /**
   * Prepares a library once per cluster, keyed by `key`; synchronous (`undefined`) when it is prepared already, which
   * marks it used. The keys the cluster evicted to make room are forgotten, so their next use prepares them again.
   */
  ensureLibrary(key: string, image: () => Uint8Array): Promise<void> | undefined {
    if (this.#prepared.has(key)) {
      this.#cluster.touch?.(key);
      return undefined;
    }
    return this.#cluster.prepare(key, image()).then((evicted) => {
      for (const k of evicted ?? []) this.#prepared.delete(k);
      this.#prepared.add(key);
    });
  }

  /** The cluster's staged stdio entries. */
  drainStdio(): Array<{ cpu: number; stream: number; text: string }> {
    return this.#cluster.drainStdio();
  }

  /**
   * Whether the cluster's watchdog stopped the op it ran on the calling thread
   * ({@linkcode Q7ClusterPort.watchdogFired}).
   */
  get watchdogFired(): boolean {
    return this.#cluster.watchdogFired === true;
  }

  /** Whether an op waits for {@linkcode ClusterHandle.runPending}. */
  get hasPending(): boolean {
    return this.#cluster.hasPending === true;
  }

  /**
   * Runs the op left for the calling thread ({@linkcode Q7ClusterPort.runPending}), if one waits; `true` when it ran to
   * its end (its dispatch has settled).
   */
  runPending(): boolean {
    return this.#cluster.runPending?.() === true;
  }

  /**
   * The join of the op {@linkcode ClusterHandle.runPending} ran, taken once ({@linkcode Q7ClusterPort.takeLocalJoin});
   * the observer hears it now, as the DRAIN reads it.
   */
  takeLocalJoin(): { cores: Q7CoreResult[] } | undefined {
    const joined = this.#cluster.takeLocalJoin?.();
    if (joined !== undefined) this.#observer?.joined(joined);
    return joined;
  }

  /**
   * Dispatches one op. The observer hears its join when the dispatch settles, or, for an op left for the calling
   * thread by a cluster that hands its join over, when the DRAIN takes it ({@linkcode ClusterHandle.takeLocalJoin}).
   */
  dispatch(op: Q7DispatchOp, signal?: Q7AbortSignal): Promise<{ cores: Q7CoreResult[] }> {
    const o = this.#observer;
    if (o === undefined) return this.#cluster.dispatch(op, signal);
    o.dispatched(op);
    const done = this.#cluster.dispatch(op, signal);
    if (this.#cluster.hasPending === true && this.#cluster.takeLocalJoin !== undefined) done.catch(this.#failed);
    else done.then(this.#joined, this.#failed);
    return done;
  }
}

const Q7_CORES = 8;

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === undefined || b === undefined || a.byteLength !== b.byteLength) return a === b;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
