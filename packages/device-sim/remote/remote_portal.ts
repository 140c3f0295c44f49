/**
 * `RemotePortal`: the `remote` Portal backend — every operation is a request to a {@linkcode DeviceDaemon} over an
 * injected byte link (Unix socket or loopback TCP in a composition root, memory in tests), in the binary protocol
 * of `protocol.ts`. Requests are pipelined: each carries an id and the caller may issue the next before the
 * previous answered; the daemon starts them in order.
 *
 * Writes to a NeuronCore this client holds (`acquireCores`, as `nrt_init` does) and into its own allocations are
 * posted: sent without waiting for an answer, in order with everything else, the daemon answering only a failure,
 * which the client's next call reports. A write it cannot vouch for waits for the daemon's answer (ours: the
 * driver ABI's BAR writes are posted on PCIe; a refusal must still name the process that holds a core at once).
 *
 * Reads after a wake are served from the wake's snapshot (ours). The daemon answers a `notificationWait` with what
 * the host reads next on that NeuronCore, read at the moment of the wake (`WakeSnapshot`: the NQ head and cause
 * registers, the ring records from the host's tail to that head, the stdio rings' write indices), and the
 * `barRead32` / `memRead` calls it covers resolve from it without a round trip, as if they had been answered at the
 * wake — what a device that produced nothing more since would have answered. Each word and range answers one read:
 * a second read of the same thing is a fresh look at the device (as teardown's halt acknowledgement, a read of the NQ
 * head, must be). One execute step after its doorbell then costs one round trip, the wait's (`nqRead` and
 * `poolStdioBlockDrain` read only what the snapshot holds, once each).
 *
 * Consistency rule: a read never returns bytes older than a request the client sent before it. A NeuronCore's
 * snapshot therefore stops serving reads at
 * - any request about that NeuronCore: a BAR access in its block, a semaphore, an allocation on it, a core grant or
 *   release, the next `notificationWait`, a read the snapshot does not cover (once the host has read the device
 *   afresh it must not read an older instant again) — except a write of a register the snapshot names inert, the NQ
 *   tail, which the device only stores (it reads it when it next produces a record);
 * - any write, free or uncovered read of an allocation it holds bytes of, whatever that allocation's NeuronCore;
 * - any BAR access outside the NeuronCore blocks (every snapshot stops);
 * - the connection ending, or `close()`;
 * and a snapshot is refused on arrival when the client sent such a request after the last request the daemon had
 * started when it took it (so it cannot reflect that request; the doorbell sent just after the wait does not count
 * when the daemon had started it first). Another NeuronCore's requests leave it serving. A served read reports an
 * earlier posted write's failure if that failure has arrived; otherwise the next call after it does.
 *
 * Failure model (the daemon stopping must never hang the host):
 * - when the connection ends, every pending request fails at once with `NrtError(NRT_HW_ERROR)` "device portal
 *   disconnected", and every pending {@linkcode RemotePortal.notificationWait} resolves, so the host's poll re-reads
 *   the queue — which throws the same error — instead of waiting out its timeout on a dead device;
 * - every later call throws that error (a new `RemotePortal`, after `nrt_close`, reconnects to a restarted daemon);
 * - a request the daemon leaves unanswered for `requestTimeoutMs` fails with `NRT_TIMEOUT` and drops the
 *   connection (a stopped or wedged daemon), which fails the rest as above.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the `ndl_*` ABI: "completion is POLL-driven", the portal never calls back
 * into the runtime), §3.5 (the host blocks on its completion eventfd → a cancellable long-poll request here).
 *
 * @module
 */
import { NrtError, NrtStatus, type Portal } from "@nrt/core";
import type { TpbArchType } from "@nrt/core/hal";
import type { DeviceMemory, MemAllocRequest, PortalDeviceInfo } from "@nrt/core/portal";
import type { Dialer, Link } from "./link.ts";
import {
  BodyReader,
  decodeWakeSnapshot,
  encodeText,
  ErrorKind,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  LOCATION_CODE,
  MAX_TRANSFER_BYTES,
  Op,
  POSTED,
  PROTOCOL_VERSION,
  RESPONSE,
} from "./protocol.ts";

/** How a client identifies itself to the daemon (shown in the ownership error of another process). */
export interface RemoteIdentity {
  /** Process id. */
  readonly pid: number;
  /** A name for operators, e.g. `"nrt serve :8000"`. */
  readonly name: string;
}

/** Options of {@linkcode RemotePortal.connect}. */
export interface RemotePortalOptions extends RemoteIdentity {
  /**
   * Longest wait for the answer to any request but `notificationWait`, in ms (default 30 000); past it the
   * request fails with `NRT_TIMEOUT` and the connection is dropped.
   */
  readonly requestTimeoutMs?: number;
}

/** The daemon's view, from {@linkcode RemotePortal.stats}. */
export interface DaemonStats {
  /** Connected sessions. */
  readonly sessions: number;
  /** Pending notification waits across sessions. */
  readonly waiters: number;
  /** Granted NeuronCores and their owners. */
  readonly grants: ReadonlyArray<{ device: number; nc: number; pid: number; session: number; name: string }>;
}

interface Pending {
  readonly what: string;
  readonly resolve: (body: Uint8Array) => void;
  readonly reject: (e: unknown) => void;
  /** Set on a notification wait: which NeuronCore it watches. */
  readonly wait?: { readonly device: number; readonly nc: number };
  timer?: ReturnType<typeof setTimeout>;
}

const DISCONNECTED = "device portal disconnected";

/** A wake snapshot the client may serve reads from (`device:nc` of the wait). */
interface LiveSnapshot {
  readonly device: number;
  /** BAR0 words not read yet (each answers one read). */
  readonly words: Map<number, number>;
  readonly inert: ReadonlySet<number>;
  /** Allocation bytes not read yet (each range answers one read). */
  readonly ranges: Array<{ readonly memory: number; readonly offset: number; readonly bytes: Uint8Array }>;
}

/** Whether request id `a` was sent after request id `b` (u32 ids, serial-number order). */
function after(a: number, b: number): boolean {
  return (((a >>> 0) - (b >>> 0)) | 0) > 0;
}

/**
 * A Portal whose device lives in a daemon process.
 *
 * @example Connect, allocate, write, read back
 * ```ts ignore
 * import { RemotePortal } from "./remote_portal.ts";
 * const portal = await RemotePortal.connect(dial, { pid: 4242, name: "demo" });
 * const m = await portal.memAlloc({ device: 0, nc: 0, bytes: 4 });
 * await portal.memWrite(m, 0, new Uint8Array([1, 2, 3, 4]));
 * console.log(await portal.memRead(m, 0, 4));
 * await portal.close();
 * ```
 */
export class RemotePortal implements Portal {
  /** Backend name. */
  readonly name: string = "remote";
  /** The daemon's session id for this connection. */
  session = 0;
  readonly #pending = new Map<number, Pending>();
  /** NeuronCores this client acquired (`device:nc`): writes to them are posted. */
  readonly #held = new Set<string>();
  /** This session's allocations (id → bytes): writes inside them are posted. */
  readonly #mine = new Map<number, number>();
  /** The daemon's BAR0 geometry (HELLO). */
  #bar: { base: number; stride: number } | undefined;
  /** A posted write the daemon refused (and its request id), reported by the next call sent after it. */
  #postedFailure: { readonly id: number; readonly error: NrtError } | undefined;
  readonly #timeoutMs: number;
  #link!: Link;
  #nextId = 1;
  #state: "open" | "disconnected" | "closed" = "open";
  #why = "";
  #devices?: PortalDeviceInfo[];
  /** Live wake snapshots by `device:nc`. */
  readonly #snapshots = new Map<string, LiveSnapshot>();
  /** The id of the last request sent that concerns a NeuronCore (`device:nc`), an allocation, or no NeuronCore. */
  readonly #lastCore = new Map<string, number>();
  readonly #lastMemory = new Map<number, number>();
  #lastGlobal: number | undefined;
  /** Reads served from wake snapshots so far (tests, statistics). */
  servedFromSnapshot = 0;

  private constructor(options: RemotePortalOptions) {
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  /**
   * Opens a link with `dial`, says HELLO with the client's identity and returns the connected portal.
   *
   * @throws {NrtError} `NRT_HW_ERROR` when the daemon cannot be reached or refuses the session.
   */
  static async connect(dial: Dialer, options: RemotePortalOptions): Promise<RemotePortal> {
    const portal = new RemotePortal(options);
    const decoder = new FrameDecoder();
    try {
      portal.#link = await dial({
        data: (chunk) => {
          let frames: Frame[];
          try {
            frames = decoder.push(chunk);
          } catch (e) {
            portal.#disconnect(e instanceof Error ? e.message : String(e));
            return;
          }
          for (const f of frames) portal.#receive(f);
        },
        closed: (reason) =>
          portal.#disconnect(reason === undefined ? "the daemon closed the connection" : String(reason)),
      });
    } catch (e) {
      throw new NrtError(
        NrtStatus.NRT_HW_ERROR,
        `Cannot connect to the device daemon: ${e instanceof Error ? e.message : String(e)}`,
        { cause: e },
      );
    }
    const name = encodeText(options.name);
    try {
      const r = new BodyReader(
        await portal.#request(
          "start a session",
          new FrameBuilder(portal.#nextId++, Op.HELLO, 8, name.byteLength).u32(PROTOCOL_VERSION).u32(options.pid)
            .finish(name),
        ),
      );
      r.u32();
      portal.session = r.u32();
      portal.#bar = { base: r.f64(), stride: r.f64() };
    } catch (e) {
      portal.#link.close();
      throw e;
    }
    return portal;
  }

  /** Whether the connection is up. */
  get connected(): boolean {
    return this.#state === "open";
  }

  /** Pending `notificationWait` calls of this client on a NeuronCore (all NeuronCores without arguments). */
  pendingWaits(device?: number, nc?: number): number {
    let n = 0;
    for (const p of this.#pending.values()) {
      if (
        p.wait !== undefined && (device === undefined || p.wait.device === device) &&
        (nc === undefined || p.wait.nc === nc)
      ) n++;
    }
    return n;
  }

  /** Enumerates the daemon's devices (asked once per connection; the answer does not change). */
  async devices(): Promise<PortalDeviceInfo[]> {
    if (this.#devices === undefined) {
      const r = new BodyReader(await this.#request("enumerate devices", this.#frame(Op.DEVICES, 0).finish()));
      const n = r.u32();
      this.#devices = Array.from(
        { length: n },
        () => ({ index: r.u32(), arch: r.u32() as TpbArchType, ncCount: r.u32(), hbmBytes: r.f64() }),
      );
    }
    return this.#devices.map((d) => ({ ...d }));
  }

  /** Reads one 32-bit CSR. */
  async barRead32(device: number, bar: number, offset: number): Promise<number> {
    const nc = this.#ncOf(bar, offset);
    const snap = nc === undefined ? undefined : this.#snapshots.get(`${device}:${nc}`);
    const served = snap?.words.get(offset);
    if (served !== undefined && this.#state === "open") {
      snap!.words.delete(offset);
      const failed = this.#takePostedFailure();
      if (failed !== undefined) throw failed;
      this.servedFromSnapshot++;
      return served;
    }
    this.#use(device, nc);
    return new BodyReader(
      await this.#request("read a CSR", this.#frame(Op.BAR_READ32, 12).u32(device).u32(bar).u32(offset).finish()),
    ).u32();
  }

  /** Writes one 32-bit CSR (posted on a NeuronCore this client holds). */
  async barWrite32(device: number, bar: number, offset: number, value: number): Promise<void> {
    const nc = this.#ncOf(bar, offset);
    if (nc === undefined || this.#snapshots.get(`${device}:${nc}`)?.inert.has(offset) !== true) this.#use(device, nc);
    await this.#write(
      "write a CSR",
      this.#barNc(device, bar, offset, 4),
      this.#frame(Op.BAR_WRITE32, 16).u32(device).u32(bar).u32(offset).word(value).finish(),
    );
  }

  /** Bulk programmed-IO write; the data crosses as raw bytes (posted on a NeuronCore this client holds). */
  async barWrite(device: number, bar: number, offset: number, data: Uint8Array): Promise<void> {
    // Refused here: its frame would pass MAX_REQUEST_BYTES, and the daemon closes a connection that sends one.
    if (data.byteLength > MAX_TRANSFER_BYTES) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot write BAR words: ${data.byteLength} bytes in one write, over ${MAX_TRANSFER_BYTES} ` +
          "(no BAR0 register window is as large)",
      );
    }
    const nc = this.#ncOf(bar, offset);
    // A bulk write reaching past the first NeuronCore's block concerns every NeuronCore.
    this.#use(device, nc !== undefined && this.#ncOf(bar, offset + data.byteLength - 1) === nc ? nc : undefined);
    const frame = this.#frame(Op.BAR_WRITE, 12, data.byteLength).u32(device).u32(bar).u32(offset).finish(data);
    await this.#write("write BAR words", this.#barNc(device, bar, offset, data.byteLength), frame);
  }

  /** Allocates device memory, owned by this client's session (freed by the daemon if the client goes away). */
  async memAlloc(request: MemAllocRequest): Promise<DeviceMemory> {
    this.#use(request.device, request.nc);
    const frame = this.#frame(Op.MEM_ALLOC, 25)
      .u32(request.device).u32(request.nc).f64(request.bytes).f64(request.align ?? 0).u8(
        LOCATION_CODE[request.location ?? "hbm"] ?? 0xff,
      )
      .finish();
    const r = new BodyReader(await this.#request("allocate device memory", frame));
    const m: DeviceMemory = {
      id: r.u32(),
      device: r.u32(),
      nc: r.u32(),
      pa: r.f64(),
      bytes: r.f64(),
      location: r.u8() === 1 ? "host" : "hbm",
    };
    this.#mine.set(m.id, m.bytes);
    return m;
  }

  /** Frees device memory. */
  async memFree(memory: DeviceMemory): Promise<void> {
    this.#useMemory(memory);
    await this.#request("free device memory", this.#frame(Op.MEM_FREE, 4).u32(memory.id).finish());
    this.#mine.delete(memory.id);
  }

  /**
   * Copies host bytes into device memory (raw bytes on the wire; posted into this client's own allocation), in
   * requests of at most {@linkcode MAX_TRANSFER_BYTES}.
   */
  async memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    if (data.byteLength > MAX_TRANSFER_BYTES && !Number.isSafeInteger(offset)) {
      // Not split (no offset to add to), and not sent: one frame would pass MAX_REQUEST_BYTES (see barWrite).
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot write device memory: ${data.byteLength} bytes at offset ${offset} in one request, ` +
          `over ${MAX_TRANSFER_BYTES}`,
      );
    }
    if (data.byteLength > MAX_TRANSFER_BYTES) {
      for (let at = 0; at < data.byteLength; at += MAX_TRANSFER_BYTES) {
        await this.memWrite(memory, offset + at, data.subarray(at, at + MAX_TRANSFER_BYTES));
      }
      return;
    }
    this.#useMemory(memory);
    const frame = this.#frame(Op.MEM_WRITE, 12, data.byteLength).u32(memory.id).f64(offset).finish(data);
    // Posted only when the daemon cannot refuse it for a reason the caller must see at once: an allocation of this
    // session, and a range inside it.
    const bytes = this.#mine.get(memory.id);
    const inside = bytes !== undefined && Number.isSafeInteger(offset) && offset >= 0 &&
      offset + data.byteLength <= bytes;
    await this.#write("write device memory", inside, frame);
  }

  /** Copies device memory out (raw bytes on the wire), in requests of at most {@linkcode MAX_TRANSFER_BYTES}. */
  async memRead(memory: DeviceMemory, offset: number, length: number): Promise<Uint8Array> {
    if (length > MAX_TRANSFER_BYTES && Number.isSafeInteger(offset) && Number.isSafeInteger(length)) {
      const out = new Uint8Array(length);
      for (let at = 0; at < length; at += MAX_TRANSFER_BYTES) {
        out.set(await this.memRead(memory, offset + at, Math.min(MAX_TRANSFER_BYTES, length - at)), at);
      }
      return out;
    }
    if (this.#snapshots.size > 0 && this.#state === "open") {
      for (const snap of this.#snapshots.values()) {
        for (const [i, r] of snap.ranges.entries()) {
          if (
            snap.device === memory.device && r.memory === memory.id && Number.isSafeInteger(offset) &&
            Number.isSafeInteger(length) && length >= 0 &&
            offset >= r.offset && offset + length <= r.offset + r.bytes.byteLength
          ) {
            snap.ranges.splice(i, 1);
            const failed = this.#takePostedFailure();
            if (failed !== undefined) throw failed;
            this.servedFromSnapshot++;
            return r.bytes.slice(offset - r.offset, offset - r.offset + length);
          }
        }
      }
    }
    this.#useMemory(memory);
    return await this.#request(
      "read device memory",
      this.#frame(Op.MEM_READ, 20).u32(memory.id).f64(offset).f64(length).finish(),
    );
  }

  /** Adds to a semaphore (the doorbell; posted on a NeuronCore this client holds). */
  async semaphoreIncrement(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    this.#use(device, nc);
    await this.#write(
      "increment a semaphore",
      this.#holds(device, nc),
      this.#frame(Op.SEM_INCREMENT, 16).u32(device).u32(nc).u32(semaphore).word(value).finish(),
    );
  }

  /** Reads a semaphore. */
  async semaphoreRead(device: number, nc: number, semaphore: number): Promise<number> {
    this.#use(device, nc);
    return new BodyReader(
      await this.#request("read a semaphore", this.#frame(Op.SEM_READ, 12).u32(device).u32(nc).u32(semaphore).finish()),
    ).u32();
  }

  /** Sets a semaphore (posted on a NeuronCore this client holds). */
  async semaphoreSet(device: number, nc: number, semaphore: number, value: number): Promise<void> {
    this.#use(device, nc);
    await this.#write(
      "set a semaphore",
      this.#holds(device, nc),
      this.#frame(Op.SEM_SET, 16).u32(device).u32(nc).u32(semaphore).word(value).finish(),
    );
  }

  /**
   * A long-poll: resolves when the daemon reports the NQ head moved from `head`, when `signal` aborts (a CANCEL
   * frame tells the daemon to drop its waiter), or when the connection ends (the caller's next read then throws).
   */
  notificationWait(device: number, nc: number, head: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted || this.#state === "disconnected") return Promise.resolve();
    if (this.#state === "closed") return Promise.reject(this.#unusable("wait for a notification"));
    this.#use(device, nc);
    const frame = this.#frame(Op.NOTIFICATION_WAIT, 12).u32(device).u32(nc).u32(head >>> 0).finish();
    const id = new DataView(frame.buffer).getUint32(4, true);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        if (!this.#pending.delete(id)) return;
        if (this.#state === "open") this.#link.send(new FrameBuilder(this.#nextId++, Op.CANCEL, 4).u32(id).finish());
        resolve();
      };
      this.#pending.set(id, {
        what: "wait for a notification",
        wait: { device, nc },
        resolve: (body) => {
          signal?.removeEventListener("abort", onAbort);
          this.#keep(device, nc, body);
          resolve();
        },
        reject: (e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#link.send(frame);
    });
  }

  /** Bytes in use on a device (every client's allocations). */
  async memUsage(device: number): Promise<{ hbm: number; host: number; allocations: number }> {
    const r = new BodyReader(
      await this.#request("read memory usage", this.#frame(Op.MEM_USAGE, 4).u32(device).finish()),
    );
    return { hbm: r.f64(), host: r.f64(), allocations: r.u32() };
  }

  /**
   * Acquires NeuronCores for this process, exclusively (`NEURON_IOCTL_CRWL_NC_RANGE_MARK`); all or none.
   *
   * @throws {NrtError} `NRT_RESOURCE` naming the owning process when a core is in use by another client.
   */
  async acquireCores(device: number, cores: readonly number[]): Promise<void> {
    for (const nc of cores) this.#use(device, nc);
    await this.#request("acquire NeuronCores", this.#coreList(Op.ACQUIRE_CORES, device, cores));
    for (const nc of cores) this.#held.add(`${device}:${nc}`);
  }

  /** Releases NeuronCores this process holds (`NEURON_IOCTL_CRWL_NC_RANGE_UNMARK`). */
  async releaseCores(device: number, cores: readonly number[]): Promise<void> {
    // No longer held: later writes to these cores wait for the daemon's answer again.
    for (const nc of cores) {
      this.#held.delete(`${device}:${nc}`);
      this.#use(device, nc);
    }
    await this.#request("release NeuronCores", this.#coreList(Op.RELEASE_CORES, device, cores));
  }

  /** The daemon's sessions, pending waiters and core grants. */
  async stats(): Promise<DaemonStats> {
    const r = new BodyReader(await this.#request("read daemon statistics", this.#frame(Op.STATS, 0).finish()));
    const sessions = r.u32(), waiters = r.u32(), n = r.u32();
    const grants = Array.from({ length: n }, () => {
      const [device, nc, pid, session] = [r.u32(), r.u32(), r.u32(), r.u32()];
      return { device, nc, pid, session, name: new TextDecoder().decode(r.bytes(r.u8())) };
    });
    return { sessions, waiters, grants };
  }

  /**
   * Ends the session: the daemon reclaims what the client still holds, answers, and the link closes. After a
   * disconnect it only releases local state. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    if (this.#state === "open") {
      await this.#request("close the session", this.#frame(Op.BYE, 0).finish()).catch(() => {});
      this.#link.close();
    }
    this.#state = "closed";
    this.#snapshots.clear();
    this.#failAll(() => this.#unusable("finish"));
  }

  /**
   * Notes a request about to be sent that concerns NeuronCore `nc` of `device` (every NeuronCore when `undefined`):
   * that core's snapshot (every snapshot) no longer serves reads, and one arriving that predates the request is
   * refused.
   */
  #use(device: number, nc: number | undefined): void {
    if (nc === undefined) {
      this.#lastGlobal = this.#nextId;
      this.#snapshots.clear();
      return;
    }
    const key = `${device}:${nc}`;
    this.#lastCore.set(key, this.#nextId);
    this.#snapshots.delete(key);
  }

  /** Notes a request about to be sent that reads, writes or frees `memory`. */
  #useMemory(memory: DeviceMemory): void {
    this.#use(memory.device, memory.nc);
    // Only a snapshot still to arrive needs these: with no wait pending they can go (a server's tensors come and go).
    if (this.#lastMemory.size >= 4096 && this.pendingWaits() === 0) this.#lastMemory.clear();
    this.#lastMemory.set(memory.id, this.#nextId);
    for (const [key, snap] of this.#snapshots) {
      if (snap.ranges.some((r) => r.memory === memory.id)) this.#snapshots.delete(key);
    }
  }

  /** Keeps the snapshot a wake of NeuronCore `nc` carried, unless a request it does not reflect was sent. */
  #keep(device: number, nc: number, body: Uint8Array): void {
    let snap;
    try {
      snap = decodeWakeSnapshot(body);
    } catch {
      return; // a malformed snapshot only costs the reads it would have saved
    }
    if (snap === undefined || this.#state !== "open") return;
    const key = `${device}:${nc}`;
    const last = this.#lastCore.get(key);
    if (
      (this.#lastGlobal !== undefined && after(this.#lastGlobal, snap.started)) ||
      (last !== undefined && after(last, snap.started))
    ) return;
    for (const r of snap.ranges) {
      const m = this.#lastMemory.get(r.memory);
      if (m !== undefined && after(m, snap.started)) return;
    }
    this.#snapshots.set(key, {
      device,
      words: new Map(snap.words),
      inert: new Set(snap.inert),
      ranges: [...snap.ranges],
    });
  }

  /** The NeuronCore whose BAR0 block holds `offset` (`undefined` outside the blocks or on another BAR). */
  #ncOf(bar: number, offset: number): number | undefined {
    const g = this.#bar;
    if (g === undefined || bar !== 0 || !Number.isSafeInteger(offset) || offset < g.base) return undefined;
    return Math.floor((offset - g.base) / g.stride);
  }

  #frame(op: number, fixed: number, tail = 0): FrameBuilder {
    return new FrameBuilder(this.#nextId++, op, fixed, tail);
  }

  #coreList(op: number, device: number, cores: readonly number[]): Uint8Array {
    const b = this.#frame(op, 8 + 4 * cores.length).u32(device).u32(cores.length);
    for (const c of cores) b.u32(c);
    return b.finish();
  }

  /** Whether this client holds NeuronCore `nc` of `device`. */
  #holds(device: number, nc: number): boolean {
    return this.#held.has(`${device}:${nc}`);
  }

  /** Whether a BAR0 write of `length` bytes at `offset` stays inside one NeuronCore's block that this client holds. */
  #barNc(device: number, bar: number, offset: number, length: number): boolean {
    const g = this.#bar;
    if (g === undefined || bar !== 0 || !Number.isSafeInteger(offset) || offset < g.base || length <= 0) return false;
    const nc = Math.floor((offset - g.base) / g.stride);
    return Math.floor((offset + length - 1 - g.base) / g.stride) === nc && this.#holds(device, nc);
  }

  /**
   * A write: posted (sent with {@linkcode POSTED}, settled at once, a failure reported by the next call) when
   * `posted`, else a request answered by the daemon. Posted writes take effect in order with every other request.
   */
  #write(what: string, posted: boolean, frame: Uint8Array): Promise<unknown> {
    if (!posted) return this.#request(what, frame);
    if (this.#state !== "open") return Promise.reject(this.#unusable(what));
    const failed = this.#takePostedFailure();
    if (failed !== undefined) return Promise.reject(failed);
    frame[9] = POSTED;
    this.#link.send(frame);
    return Promise.resolve();
  }

  /** The failure of an earlier posted write, once. */
  #takePostedFailure(): NrtError | undefined {
    const e = this.#postedFailure;
    this.#postedFailure = undefined;
    return e?.error;
  }

  #request(what: string, frame: Uint8Array): Promise<Uint8Array> {
    if (this.#state !== "open") return Promise.reject(this.#unusable(what));
    const failed = this.#takePostedFailure();
    if (failed !== undefined) return Promise.reject(failed);
    const id = new DataView(frame.buffer).getUint32(4, true);
    return new Promise<Uint8Array>((resolve, reject) => {
      const p: Pending = { what, resolve, reject };
      if (this.#timeoutMs > 0) {
        p.timer = setTimeout(() => {
          if (!this.#pending.delete(id)) return;
          reject(
            new NrtError(
              NrtStatus.NRT_TIMEOUT,
              `Cannot ${what}: the device daemon did not answer within ${this.#timeoutMs} ms`,
            ),
          );
          this.#disconnect(`a request timed out after ${this.#timeoutMs} ms`);
        }, this.#timeoutMs);
      }
      this.#pending.set(id, p);
      this.#link.send(frame);
    });
  }

  #receive(f: Frame): void {
    if ((f.op & RESPONSE) === 0) return; // the daemon sends only answers
    const p = this.#pending.get(f.id);
    if (p === undefined) {
      // A cancelled wait's late answer, or the failure of a posted write: the next call reports that.
      if (f.status !== 0 && this.#postedFailure === undefined) {
        const r = new BodyReader(f.body);
        const status = r.u32() as NrtStatus;
        r.u8();
        this.#postedFailure = { id: f.id, error: new NrtError(status, `An earlier posted write failed: ${r.text()}`) };
      }
      return;
    }
    // The daemon answers in order: a posted write that failed before this request was sent is reported by it.
    const failed = this.#postedFailure;
    if (failed !== undefined && failed.id < f.id && p.wait === undefined) {
      this.#pending.delete(f.id);
      if (p.timer !== undefined) clearTimeout(p.timer);
      this.#postedFailure = undefined;
      p.reject(failed.error);
      return;
    }
    this.#pending.delete(f.id);
    if (p.timer !== undefined) clearTimeout(p.timer);
    if (f.status === 0) {
      p.resolve(f.body.slice()); // the transport may reuse the chunk the body is a view of
      return;
    }
    const r = new BodyReader(f.body);
    const status = r.u32() as NrtStatus, kind = r.u8(), message = r.text();
    p.reject(
      kind === ErrorKind.NRT
        ? new NrtError(status, message)
        : kind === ErrorKind.TYPE
        ? new TypeError(message)
        : kind === ErrorKind.RANGE
        ? new RangeError(message)
        : new NrtError(status, message),
    );
  }

  #disconnect(why: string): void {
    if (this.#state !== "open") return;
    this.#state = "disconnected";
    this.#why = why;
    this.#snapshots.clear();
    this.#link.close();
    this.#failAll((what) => this.#unusable(what));
  }

  /** Fails every pending request; waits resolve (the host's poll then reads and sees the error). */
  #failAll(error: (what: string) => NrtError): void {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of all) {
      if (p.timer !== undefined) clearTimeout(p.timer);
      if (p.wait !== undefined) p.resolve(new Uint8Array(0));
      else p.reject(error(p.what));
    }
  }

  #unusable(what: string): NrtError {
    return this.#state === "closed"
      ? new NrtError(NrtStatus.NRT_INVALID, `Cannot ${what}: the remote portal is closed`)
      : new NrtError(NrtStatus.NRT_HW_ERROR, `Cannot ${what}: ${DISCONNECTED} (${this.#why})`);
  }
}
