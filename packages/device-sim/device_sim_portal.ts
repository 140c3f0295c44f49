/**
 * `DeviceSimPortal`: the embedded simulated Neuron device behind the {@linkcode Portal} contract. The device is an
 * agent of its own (`device_agent.ts`), by default in a Worker per device: the sequencer, the DMA queues, the
 * notification writer, the file-IO manager, the fault ports and the Q7 clusters run there, off the host's event
 * loop. This portal is the host's side of the driver: the allocator, and memory-mapped I/O on the registers and the
 * device memory, which live in `SharedArrayBuffer`s both sides map.
 *
 * - `barRead32` / `memRead` / `memWrite` touch the shared bytes directly; a BAR write the device reacts to
 *   (run-stall, swap table, stream table) resolves once the device has taken it;
 * - the doorbell is a store into the semaphore, a ring entry and `Atomics.notify`: posted, no message;
 * - `notificationWait` sleeps on the notification queue's head with `Atomics.waitAsync`; the device's store of a
 *   new head wakes it.
 *
 * Simulator-only methods (fault injection, Q7 reset, idle wait, observability) sit beside the contract for tests and
 * the composition root.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the driver ABI; completion is poll-driven, the portal never calls back),
 * §3.3 (`ndl_nc_semaphore_increment` is the doorbell), §3.5 (the host blocks on `comp_efd` →
 * {@linkcode DeviceSimPortal.notificationWait}).
 *
 * @module
 */
import { NrtError, NrtStatus, type Portal } from "@nrt/core";
import type { SiliconSpec } from "@nrt/core/hal";
import type { NotificationRecord } from "@nrt/core/isa";
import type { DeviceMemory, MemAllocRequest, PortalDeviceInfo } from "@nrt/core/portal";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { AgentLink } from "./agent_link.ts";
import { CompletionReaper } from "./completion_reaper.ts";
import { Bar0 } from "./bar0.ts";
import { type AgentInit, DOORBELL_RING_BYTES } from "./device_agent.ts";
import {
  DeviceLogReader,
  FIRED_ENTRIES,
  LOG_BUFFER_BYTES,
  logBufferBytes,
  sharedClockMs,
  TIMELINE_BUFFER_BYTES,
} from "./device_log.ts";
import { DeviceTrace, type NcTimelineEvent, type Q7CoreActivity } from "./device_trace.ts";
import { type QueueBytes, queueBytesOf } from "./dma_engine.ts";
import { type DeviceStdioQueue, FileIoManager } from "./file_io_manager.ts";
import { FaultInjector, type FiredFault } from "./fault_injector.ts";
import { DeviceMemoryMap, type MappedAllocation } from "./memory.ts";
import { NcCounter, NcRegisters, NcStatus } from "./nc_registers.ts";
import type { Q7BootEvent, Q7ClusterFactory } from "./q7_complex.ts";
import { defaultLocalOpBytes, defaultQ7Workers } from "./q7/q7_cluster.ts";

const GiB = 1024 ** 3;

/**
 * The one settled promise the posted and synchronous writes return (ours): a method that completes at once returns it
 * instead of a closure run through a helper and a new promise, three allocations less per register or memory access
 * (an execute makes about ten).
 */
const RESOLVED: Promise<void> = Promise.resolve();

/**
 * Where the device runs: one agent Worker per device (`"device"`, the default), one per NeuronCore (`"core"`), or on
 * the calling thread (`"inline"`: the only mode that takes a custom {@linkcode DeviceSimOptions.q7Factory}; without
 * one, small ops run on that thread under a watchdog Worker, as in an agent Worker; `nrt device-sim`'s default).
 */
export type DeviceAgentMode = "device" | "core" | "inline";

/** Options of {@linkcode DeviceSimPortal}. */
export interface DeviceSimOptions {
  /** The generation to simulate (default: Cayman). */
  readonly spec?: SiliconSpec;
  /** Number of devices (default 1). */
  readonly devices?: number;
  /** HBM bytes per device, overriding the spec (small values make OOM tests cheap). */
  readonly hbmBytes?: number;
  /** Pinned host DRAM bytes per device (default 64 GiB; accounted, backed only where written). */
  readonly hostBytes?: number;
  /** Where the device runs (default `"device"`; a `q7Factory` implies `"inline"`). */
  readonly agents?: DeviceAgentMode;
  /** Creates the Q7 clusters of an inline device (default: the Worker-based `Q7Cluster`). */
  readonly q7Factory?: Q7ClusterFactory;
  /**
   * The device's hang budget in ms (ours; default {@linkcode DEFAULT_WATCHDOG_MS}, 0 turns it off): a run still in
   * progress this long after its doorbell was taken is dropped by the device itself and the Q7 Workers busy with it
   * are terminated. The host never halts a faulted stream (lifecycle-error-model §5.5); this is how a hung kernel is
   * contained. Set it to the runtime's `NEURON_RT_EXEC_TIMEOUT` when that differs from the default.
   */
  readonly watchdogMs?: number;
}

/** The default device watchdog: 30 s, libnrt's default `NEURON_RT_EXEC_TIMEOUT` (ours). */
export const DEFAULT_WATCHDOG_MS = 30_000;

/**
 * Reads the simulator's own variables (`NRT_SIM_Q7_WORKERS`, `NRT_SIM_LOCAL_OP_BYTES`, docs/configuration.md) before
 * any agent starts. Ours: the Q7 clusters read them again inside the agent, where a bad value would only show as a
 * sequencer fault at the first custom op.
 *
 * @throws {NrtError} `NRT_INVALID` naming the variable, its value and the values it accepts.
 */
function checkSimulatorEnv(): void {
  try {
    defaultQ7Workers();
    defaultLocalOpBytes();
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new NrtError(NrtStatus.NRT_INVALID, `Cannot start the simulated device: ${e.message}`, { cause: e });
  }
}

/** The host's side of one device. */
class HostDevice {
  readonly memory: DeviceMemoryMap;
  readonly regs: NcRegisters[];
  /** The host's completion waits on the device's NeuronCores. */
  readonly reaper: CompletionReaper;
  readonly bar0: Bar0;
  readonly links: AgentLink[] = [];
  readonly #linkOfNc: AgentLink[] = [];
  readonly trace: DeviceTrace;
  readonly fileIo: FileIoManager[];

  constructor(spec: SiliconSpec, index: number, o: {
    hbmBytes: number;
    hostBytes: number;
    nextId: () => number;
    mode: DeviceAgentMode;
    q7Factory: Q7ClusterFactory | undefined;
    q7Events: Q7BootEvent[];
    faultKinds: Map<number, FiredFault["kind"]>;
    watchdogMs: number;
  }) {
    const post = (request: Parameters<AgentLink["post"]>[0]): void => {
      for (const l of this.links) l.post(request);
    };
    this.memory = new DeviceMemoryMap({
      device: index,
      hbm: { base: spec.addressMap.hbmBase, capacity: o.hbmBytes },
      host: { base: spec.addressMap.hostDramBase, capacity: o.hostBytes },
      nextId: o.nextId,
      onMap: (m: MappedAllocation) => post({ t: "map", m }),
      onUnmap: (id) => post({ t: "unmap", id }),
    });
    this.regs = NcRegisters.forDevice(spec);
    this.reaper = new CompletionReaper(this.regs[0].reap);
    this.fileIo = this.regs.map((r) => new FileIoManager(r, this.memory));
    this.bar0 = new Bar0(spec, this.regs, {
      semaphoreIncremented: (nc, semaphore, by) => void this.linkOf(nc).doorbell(nc, semaphore, by),
      runStallWritten: (nc, previous, value) => this.#request(nc, { t: "run-stall", nc, previous, value }),
      swapTableWritten: (nc) => this.#request(nc, { t: "swap-table", nc }),
      streamTableWritten: (nc, slot) => this.#request(nc, { t: "stream-table", nc, slot }),
      ucodeCoreWritten: (nc, word, command) => this.#request(nc, { t: "ucode-core", nc, word, command }),
    });
    const groups = o.mode === "core" ? this.regs.map((_, nc) => [nc]) : [this.regs.map((_, nc) => nc)];
    const readers: DeviceLogReader[] = [];
    const timelines: DeviceLogReader[] = [];
    for (const ncs of groups) {
      const log = new SharedArrayBuffer(LOG_BUFFER_BYTES);
      const fired = new SharedArrayBuffer(logBufferBytes(FIRED_ENTRIES));
      const timeline = new SharedArrayBuffer(TIMELINE_BUFFER_BYTES);
      const init: AgentInit = {
        spec,
        device: index,
        ncs,
        regs: this.regs.map((r) => r.buffers),
        doorbells: new SharedArrayBuffer(DOORBELL_RING_BYTES),
        log,
        fired,
        timeline,
        mapped: [],
        watchdogMs: o.watchdogMs,
      };
      const link = o.mode === "inline" ? AgentLink.inline(init, o.q7Factory) : AgentLink.worker(init);
      this.links.push(link);
      for (const nc of ncs) this.#linkOfNc[nc] = link;
      readers.push(new DeviceLogReader(log), new DeviceLogReader(fired));
      timelines.push(new DeviceLogReader(timeline));
    }
    this.trace = new DeviceTrace(index, spec.ncPerDevice, readers, o.q7Events, o.faultKinds, timelines);
  }

  linkOf(nc: number): AgentLink {
    const l = this.#linkOfNc[nc];
    if (l === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `NeuronCore ${nc} does not exist`);
    return l;
  }

  async #request(nc: number, request: Parameters<AgentLink["request"]>[0]): Promise<void> {
    await this.linkOf(nc).request(request);
  }
}

/**
 * A simulated device behind the Portal contract.
 *
 * @example Allocate, write and read back device memory
 * ```ts
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * const portal = new DeviceSimPortal();
 * const m = await portal.memAlloc({ device: 0, nc: 0, bytes: 4 });
 * await portal.memWrite(m, 0, new Uint8Array([1, 2, 3, 4]));
 * console.log(await portal.memRead(m, 0, 4));
 * await portal.close();
 * ```
 */
export class DeviceSimPortal implements Portal {
  /** Backend name. */
  readonly name: string = "device-sim";
  /** The simulated generation. */
  readonly spec: SiliconSpec;
  /** Where the device runs. */
  readonly agents: DeviceAgentMode;
  /** Fault injection (`docs/faults.md`): `portal.faults.inject({ kind: "hbm-ue", nc: 1, atExecution: 3 })`. */
  readonly faults: FaultInjector;
  readonly #devices: HostDevice[];

  /** Number of simulated devices. */
  get deviceCount(): number {
    return this.#devices.length;
  }
  readonly #q7Events: Q7BootEvent[] = [];
  readonly #hbmBytes: number;
  #closed = false;
  #closing: Promise<void> | undefined;

  /**
   * Creates the devices in their reset state and starts their agents; nothing is backed and no Q7 Worker runs.
   *
   * @throws {NrtError} `NRT_INVALID` when `NRT_SIM_Q7_WORKERS` or `NRT_SIM_LOCAL_OP_BYTES` is set to a value the
   * simulator does not accept (without a custom `q7Factory`), before any agent starts.
   */
  constructor(options: DeviceSimOptions = {}) {
    const spec = options.spec ?? CAYMAN_SPEC;
    const count = options.devices ?? 1;
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`Device count ${count} is not a positive integer`);
    const watchdogMs = options.watchdogMs ?? DEFAULT_WATCHDOG_MS;
    if (typeof watchdogMs !== "number" || !Number.isFinite(watchdogMs) || watchdogMs < 0) {
      throw new RangeError(`Watchdog budget ${String(options.watchdogMs)} ms is not a finite number >= 0`);
    }
    this.spec = spec;
    this.#hbmBytes = options.hbmBytes ?? spec.hbmBytes;
    this.agents = options.agents ?? (options.q7Factory !== undefined ? "inline" : "device");
    if (options.q7Factory !== undefined && this.agents !== "inline") {
      throw new TypeError(
        `Cannot use a q7Factory with agents "${this.agents}": a factory runs only with an inline device`,
      );
    }
    if (options.q7Factory === undefined) checkSimulatorEnv();
    let id = 0;
    const faultKinds = new Map<number, FiredFault["kind"]>();
    this.#devices = Array.from({ length: count }, (_, index) =>
      new HostDevice(spec, index, {
        hbmBytes: this.#hbmBytes,
        hostBytes: options.hostBytes ?? 64 * GiB,
        nextId: () => ++id,
        mode: this.agents,
        q7Factory: options.q7Factory,
        q7Events: this.#q7Events,
        faultKinds,
        watchdogMs,
      }));
    const devices = this.#devices;
    this.faults = new FaultInjector(count, spec.ncPerDevice, {
      q7Cores: spec.q7CoresPerNc,
      dmaEngines: spec.dmaEngines,
    }, {
      arm: (device, nc, fault) => {
        faultKinds.set(fault.id, fault.spec.kind);
        devices[device].linkOf(nc).post({ t: "arm", nc, fault });
      },
      disarm: (device, id) => {
        for (const l of devices[device].links) l.post({ t: "disarm", id });
      },
      firings: () => devices.flatMap((d) => d.trace.takeFirings()),
    });
  }

  /** Enumerates the devices. */
  devices(): Promise<PortalDeviceInfo[]> {
    return this.#sync(() => {
      this.#open("enumerate devices");
      return this.#devices.map((_, index) => ({
        index,
        arch: this.spec.arch,
        ncCount: this.spec.ncPerDevice,
        hbmBytes: this.#hbmBytes,
      }));
    });
  }

  /** Reads one 32-bit CSR of BAR0. */
  barRead32(device: number, bar: number, offset: number): Promise<number> {
    try {
      return Promise.resolve(this.#bar0(device, bar, "read").read32(offset));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Writes one 32-bit CSR of BAR0; resolves once the device has taken a write it reacts to. */
  barWrite32(device: number, bar: number, offset: number, value: number): Promise<void> {
    try {
      return this.#bar0(device, bar, "write").write32(offset, value) ?? RESOLVED;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Bulk programmed-IO write to BAR0. */
  async barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    await this.#bar0(device, bar, "write").write(offset, data.slice());
  }

  /** Allocates device memory. */
  memAlloc(request: MemAllocRequest): Promise<DeviceMemory> {
    return this.#sync(() => {
      const d = this.#device(request.device, "allocate");
      if (!Number.isInteger(request.nc) || request.nc < 0 || request.nc >= this.spec.ncPerDevice) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot allocate device memory: NeuronCore ${request.nc} does not exist`,
        );
      }
      return d.memory.alloc(request);
    });
  }

  /** Frees device memory. */
  memFree(memory: DeviceMemory): Promise<void> {
    return this.#sync(() => this.#device(memory.device, "free").memory.free(memory));
  }

  /** Copies host bytes into device memory. */
  memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    try {
      this.#device(memory.device, "write").memory.write(memory, offset, data);
      return RESOLVED;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Copies device memory out. */
  memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array> {
    try {
      return Promise.resolve(this.#device(memory.device, "read").memory.read(memory, offset, length));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Copies device memory into the caller's buffer: one copy, no buffer of ours. */
  memReadInto(memory: DeviceMemory, offset: number, into: Uint8Array): Promise<void> {
    try {
      this.#device(memory.device, "read").memory.readInto(memory, offset, into);
      return RESOLVED;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** The doorbell: adds to a semaphore exactly as a write to its BAR0 increment window does. Posted. */
  semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    try {
      this.#device(device, "increment a semaphore").bar0.incrementSemaphore(nc, semaphore, value);
      return RESOLVED;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Reads a semaphore. */
  semaphoreRead(device: number, nc: number, semaphore: number): Promise<number> {
    return this.#sync(() => this.#device(device, "read a semaphore").bar0.readSemaphore(nc, semaphore));
  }

  /** Sets a semaphore. */
  semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    return this.#sync(() => this.#device(device, "set a semaphore").bar0.setSemaphore(nc, semaphore, value));
  }

  /**
   * Resolves when the NeuronCore's NQ head differs from `head`, or `signal` aborts: a wait on the device's completion
   * reaper (`completion_reaper.ts`), which sleeps with `Atomics.waitAsync` on the reap epoch the device advances and
   * notifies at every head it publishes.
   */
  notificationWait(device: number, nc: number, head: number, signal?: AbortSignal): Promise<void> {
    try {
      const d = this.#device(device, "wait for a notification");
      const regs = d.regs[nc];
      if (regs === undefined) {
        throw new NrtError(NrtStatus.NRT_INVALID, `Cannot wait for a notification: NeuronCore ${nc} does not exist`);
      }
      return d.reaper.wait(regs.nqWords, regs.status, head, signal);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Bytes and allocations in use on a device. Readable after `close()` too: the device's final state (what a leak
   * check after `nrt_close` looks at).
   */
  memUsage(device: number): Promise<{ hbm: number; host: number; allocations: number }> {
    return this.#sync(() => {
      const d = this.#devices[device];
      if (d === undefined) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot read memory usage: device ${device} does not exist (${this.#devices.length} simulated)`,
        );
      }
      return d.memory.usage();
    });
  }

  /** Stops every agent (their sequencers and Q7 Workers) and releases notification waiters. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      // Releases the notification waits in progress (a wait asked after the close is refused).
      for (const d of this.#devices) d.reaper.close();
      await Promise.all(this.#devices.flatMap((d) => d.links.map((l) => l.close())));
      this.#devices.forEach((d) => d.trace.update());
    })();
    return this.#closing;
  }

  // ---- Simulator-only methods (not part of Portal) -------------------------------------------------------------

  /**
   * Recovers a hung NeuronCore: terminates its Q7 Workers and drops the stream blocked on them without a completion
   * (the host has already timed out). The released image stays installed, so the next EXTENDED_INST boots a fresh
   * cluster.
   */
  async resetQ7(device: number, nc: number): Promise<void> {
    await this.#device(device, "reset the Q7 cores").linkOf(nc).request({ t: "reset-q7", nc });
  }

  /**
   * Moves the device's clock `ms` ahead (ours): a test that runs the host on a virtual clock moves the device's time
   * with it, so the device's watchdog drops a hung run without a real wait. Resolves once the watchdog has checked.
   */
  async elapse(device: number, ms: number): Promise<void> {
    const d = this.#device(device, "move the device clock");
    await Promise.all(d.links.map((l) => l.request({ t: "elapse", ms })));
  }

  /** Resolves when every doorbell rung so far is taken and the sequencers (of `device`, or one NeuronCore) are idle. */
  async whenIdle(device = 0, nc?: number): Promise<void> {
    const d = this.#device(device, "wait for idle");
    const links = nc === undefined ? d.links : [d.linkOf(nc)];
    await Promise.all(links.map((l) => l.request({ t: "when-idle", nc, doorbells: l.doorbells })));
  }

  /** Bytes each custom-op queue (index = Q7 core) has moved, by direction. */
  queueBytes(device: number, nc: number): QueueBytes {
    return queueBytesOf(this.#regs(device, nc, "read queue statistics").queueBytes, this.spec.q7CoresPerNc);
  }

  /** Stdio the NeuronCore's Q7 kernels wrote since the last call (seam for the host pool_stdio rings). */
  async stdioEntries(device: number, nc: number): Promise<Array<{ cpu: number; stream: number; text: string }>> {
    const d = this.#device(device, "drain stdio");
    return await d.linkOf(nc).request({ t: "stdio", nc }) as Array<{ cpu: number; stream: number; text: string }>;
  }

  /**
   * The JS cells live on the heap of the thread that runs NeuronCore `nc`'s device agent, after a full collection
   * there when `collect` is `true`, after an eden (young-generation) collection when it is `"eden"` (ours, a
   * diagnostic: `bench/alloc.ts` reads it around N executes to get what one execute allocates on the device's side;
   * eden readings around N executes give what they leave in the old generation until a full collection). `undefined`
   * on an engine that does not count cells (Deno) and for an inline device, whose agent shares the host's heap.
   */
  async agentHeapCells(device: number, nc: number, collect: boolean | "eden" = false): Promise<number | undefined> {
    const d = this.#device(device, "count the agent's heap");
    if (this.agents === "inline") return undefined;
    return await d.linkOf(nc).request({ t: "heap-cells", collect }) as number | undefined;
  }

  /** The NeuronCore's last 4096 records, in order (whether or not an NQ ring was attached). */
  records(device: number, nc: number): readonly NotificationRecord[] {
    this.#regs(device, nc, "read records");
    return this.#devices[device].trace.records(nc);
  }

  /** The sequencer faults of a NeuronCore with their reasons (raised and injected; the last 4096). */
  sequencerFaults(device: number, nc: number): ReadonlyArray<{ slot: number; mask: number; message: string }> {
    this.#regs(device, nc, "read faults");
    return this.#devices[device].trace.sequencerFaults(nc);
  }

  /**
   * The device's view of a NeuronCore's pool_stdio rings: capacity, write index, the read index the host published,
   * overruns (`undefined` for a ring the host did not describe).
   */
  stdioQueues(device: number, nc: number): { stdout?: DeviceStdioQueue; stderr?: DeviceStdioQueue } {
    this.#regs(device, nc, "read stdio queues");
    const io = this.#devices[device].fileIo[nc];
    return { stdout: io.queue(1), stderr: io.queue(2) };
  }

  /**
   * A NeuronCore's register file as the host maps it: memory-mapped BAR0, read and written synchronously, shared with
   * the device's agent (tests and tools; the runtime goes through the Portal calls).
   */
  mappedRegisters(device: number, nc: number): NcRegisters {
    return this.#regs(device, nc, "map the registers");
  }

  /**
   * Asks the device to record its timeline (`device_log.ts`: runs, instructions, DMA queues, Q7 cores, records, stdio)
   * on every NeuronCore of `device`, or on `nc` only; `false` stops it. A run reads the switch when it starts. Off
   * (the default), a run records nothing. Read the events with {@linkcode DeviceSimPortal.takeTimeline}.
   */
  setTimeline(device: number, enabled: boolean, nc?: number): void {
    const d = this.#device(device, "switch the timeline");
    const ncs = nc === undefined ? d.regs.map((_, i) => i) : [nc];
    for (const i of ncs) {
      Atomics.store(this.#regs(device, i, "switch the timeline").status, NcStatus.TRACE, enabled ? 1 : 0);
    }
  }

  /**
   * The timeline events the device recorded since the last call, oldest first per agent, and how many were lost
   * because the host read them too late (the ring keeps the last 8192 entries).
   */
  takeTimeline(device: number): { events: NcTimelineEvent[]; lost: number } {
    this.#regs(device, 0, "read the timeline");
    return this.#devices[device].trace.takeTimeline();
  }

  /**
   * Milliseconds NeuronCore `nc` has been busy running streams since the device was made: finished runs, plus the
   * run in progress up to now (the device's own counters; the clock is `performance.timeOrigin + now()`).
   */
  busyMs(device: number, nc: number): number {
    const c = this.#regs(device, nc, "read busy time").counters;
    // Busy first, then the start: a run ending in between is counted late, never twice.
    const busy = c[NcCounter.BUSY_MS];
    const started = c[NcCounter.RUN_STARTED_MS];
    return busy + (started > 0 ? Math.max(0, sharedClockMs() - started) : 0);
  }

  /**
   * Whether a NeuronCore's Q7 cores are busy for the run in progress: running its op (e.g. a kernel in an endless
   * loop) or preparing a library for it.
   */
  q7Busy(device: number, nc: number): boolean {
    return Atomics.load(this.#regs(device, nc, "read Q7 state").status, NcStatus.Q7_BUSY) !== 0;
  }

  /** Whether a NeuronCore's Q7 Workers exist: none after the device dropped a run stuck in a kernel. */
  q7Started(device: number, nc: number): boolean {
    return Atomics.load(this.#regs(device, nc, "read Q7 state").status, NcStatus.Q7_STARTED) !== 0;
  }

  /** What each Q7 core of a NeuronCore is doing, as the device's trace says. */
  q7Activity(device: number, nc: number): Q7CoreActivity[] {
    return this.#devices[device].trace.q7Activity(nc, this.q7Started(device, nc));
  }

  /** The last fatal error a NeuronCore reported, until a later completion. */
  ncFault(device: number, nc: number): string | undefined {
    this.#regs(device, nc, "read faults");
    return this.#devices[device].trace.fault(nc);
  }

  /** Q7 lifecycle events of every device (release, boot failure, cluster start and termination; the last 4096). */
  q7Events(): readonly Q7BootEvent[] {
    for (const d of this.#devices) d.trace.update();
    return this.#q7Events;
  }

  /** Bytes of device memory ever written, by the host or the device (the lazy-backing invariant). */
  backedBytes(device: number): number {
    return this.#device(device, "read backing").memory.backedBytes;
  }

  /** Pending `notificationWait` callers of a NeuronCore (leak checks). */
  notificationWaiters(device: number, nc: number): number {
    return Atomics.load(this.#regs(device, nc, "count waiters").status, NcStatus.HOST_WAITERS);
  }

  #sync<T>(f: () => T): Promise<T> {
    try {
      return Promise.resolve(f());
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #open(what: string): void {
    if (this.#closed) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: the device-sim portal is closed`);
  }

  #device(device: number, what: string): HostDevice {
    this.#open(what);
    const d = this.#devices[device];
    if (d === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot ${what}: device ${device} does not exist (${this.#devices.length} simulated)`,
      );
    }
    return d;
  }

  #regs(device: number, nc: number, what: string): NcRegisters {
    const d = this.#devices[device];
    if (d === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot ${what}: device ${device} does not exist (${this.#devices.length} simulated)`,
      );
    }
    const r = d.regs[nc];
    if (r === undefined) throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: NeuronCore ${nc} does not exist`);
    return r;
  }

  #bar0(device: number, bar: number, what: string): Bar0 {
    const d = this.#device(device, `${what} BAR${bar}`);
    if (bar !== 0) {
      throw new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what} BAR${bar}: the simulator models BAR0 only`);
    }
    return d.bar0;
  }
}
