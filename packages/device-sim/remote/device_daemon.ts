/**
 * `DeviceDaemon`: the server side of the device daemon. It serves one {@linkcode Portal} (the simulator) to many
 * client connections, one session each, over the binary protocol of `protocol.ts`; it owns what the Neuron driver
 * owns for a process — the NeuronCores granted to it, its device-memory allocations, its pending completion waits —
 * and reclaims all of it when the connection ends, however it ends (orderly BYE, socket closed, process killed).
 *
 * Requests of a session are started in arrival order, so pipelined writes take effect in the order the client
 * issued them; each answer carries the request's id, and a NOTIFICATION_WAIT answers whenever the head moves (or
 * is cancelled) while later requests proceed.
 *
 * When a NOTIFICATION_WAIT's head moves, the answer carries a snapshot of what the host reads next on that
 * NeuronCore ({@linkcode WakeSnapshot}, ours): the NQ head and cause, the ring records from the host's tail (the wait's
 * `head`) to the new head, and each stdio ring's write index (the rings the Q7 file-IO table points at). Where those
 * live (the core's layout) is read once and kept until a host write may change it. It is read with no request of the session started in between — a snapshot torn by one is not sent —
 * and names the last request started before it, so the client can tell which of its writes it reflects.
 *
 * The daemon hands request bodies to the portal as views of the received bytes; the portal must consume them
 * before returning (the simulator copies synchronously).
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the ABI served), §3.5 (the completion wait), and the note on cross-process
 * arbitration (each process owns a disjoint slice of physical cores; "the driver/scheduler partitions physical
 * cores … below libnrt's visibility").
 *
 * @module
 */
import { NrtError, NrtStatus, type Portal } from "@nrt/core";
import { ncBlock, type SiliconSpec } from "@nrt/core/hal";
import {
  NOTIFICATION_BYTES,
  NqRegister,
  POOL_STDIO_DESCRIPTOR_BYTES,
  POOL_STDIO_INFO_TABLE_BYTES,
  POOL_STDIO_MAGIC,
  POOL_STDIO_SLOTS,
  PoolStdioDescriptor,
} from "@nrt/core/isa";
import type { DeviceMemory } from "@nrt/core/portal";
import { type CoreGrant, CoreOwnership, describeOwner } from "./core_ownership.ts";
import type { Link, LinkEvents } from "./link.ts";
import {
  BodyReader,
  encodeText,
  encodeWakeSnapshot,
  ErrorKind,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  MAX_NAME_BYTES,
  MAX_REQUEST_BYTES,
  MAX_TRANSFER_BYTES,
  Op,
  POSTED,
  PROTOCOL_VERSION,
  RESPONSE,
  type WakeSnapshot,
} from "./protocol.ts";

/** Options of {@linkcode DeviceDaemon}. */
export interface DeviceDaemonOptions {
  /** The device served (a `DeviceSimPortal`). The daemon does not close it. */
  readonly portal: Portal;
  /** Its generation: the BAR0 layout used to attribute register writes to NeuronCores and to reset a core. */
  readonly spec: SiliconSpec;
  /** Brings a reclaimed NeuronCore's execution units back to idle (the simulator: `resetQ7`). */
  readonly resetCore?: (device: number, nc: number) => Promise<void>;
  /** Log lines (connect, disconnect, reclaim). */
  readonly log?: (line: string) => void;
}

/** What the daemon knows of one connected client. */
export interface DaemonSessionInfo {
  /** Session id. */
  readonly id: number;
  /** Client process id (0 before HELLO). */
  readonly pid: number;
  /** Client name. */
  readonly name: string;
  /** Live allocations. */
  readonly allocations: number;
  /** Pending notification waits. */
  readonly waits: number;
  /** Granted NeuronCores. */
  readonly cores: ReadonlyArray<{ device: number; nc: number }>;
}

interface Session {
  readonly id: number;
  readonly link: Link;
  pid: number;
  name: string;
  hello: boolean;
  closed: boolean;
  readonly allocations: Map<number, DeviceMemory>;
  /** The same allocations by physical address (what device registers and descriptors name). */
  readonly byPa: Map<number, DeviceMemory>;
  /** The id of the last request started (dispatched). */
  started: number;
  /** Per `device:nc`, where the NQ ring and the stdio write indices live (what a wake snapshot reads). */
  readonly layouts: Map<string, { readonly read: Promise<CoreLayout>; value?: CoreLayout }>;
  /** Pending notification waits by request id, with the NeuronCore each waits on. */
  readonly waits: Map<number, { readonly ac: AbortController; readonly device: number; readonly nc: number }>;
  /** Bytes of MEM_READ answers started and not yet handed to the link. */
  reading: number;
  /** The connection's frame decoder. */
  readonly decoder: FrameDecoder;
  reclaimed?: Promise<void>;
}

/** Notification waits one session may have pending (ours; a runtime has a few per NeuronCore it runs). */
export const MAX_WAITS_PER_SESSION = 1024;

/**
 * Answer bytes a session may leave untaken, queued on its link or being read, before the daemon closes its
 * connection (ours: four of the largest transfers, and 1 MiB for their headers and the small answers around them).
 */
export const MAX_UNREAD_BYTES: number = 4 * MAX_TRANSFER_BYTES + (1 << 20);

/**
 * Bytes the daemon holds for all its sessions together (ours, 1 GiB): the answers they leave untaken, the reads under
 * way for them and what their decoders buffer of incomplete frames. Each session's own bounds (`MAX_UNREAD_BYTES`,
 * `MAX_REQUEST_BYTES`) hold per connection; this one holds whatever the number of connections. Past it the daemon
 * closes the connection of the session holding the most, and reclaims it, until the total fits.
 */
export const MAX_HELD_BYTES: number = 1 << 30;

/**
 * Sessions served at once (ours): a runtime process is one. A connection past them has its `HELLO` answered
 * `NRT_RESOURCE` and is closed.
 */
export const MAX_SESSIONS = 256;

/**
 * Below this, an answer or what a session holds is not weighed against {@linkcode MAX_HELD_BYTES} (ours, 64 KiB): the
 * execute path's small reads and wake snapshots look at no other session. Small answers that pile up still count once
 * their session holds more.
 */
const SMALL_BYTES = 1 << 16;

/** How long a refused connection (past {@linkcode MAX_SESSIONS}) may take to send its `HELLO` (ours). */
const REFUSAL_WAIT_MS = 5_000;

/** The largest frame a refused connection's decoder takes: a `HELLO` with the longest name, and its header. */
const HELLO_MAX_BYTES = MAX_NAME_BYTES + 64;

/** What one session makes the daemon hold, in bytes: see {@linkcode MAX_HELD_BYTES}. */
function heldBy(s: Session): number {
  return s.decoder.held + s.reading + (s.link.queued?.() ?? 0);
}

/**
 * Where a NeuronCore's NQ ring and stdio write indices live in a session's allocations, as the NQ base and capacity
 * registers, the file-IO table register and the stdio block's descriptors name them. Only host writes change those,
 * and every one passes through the daemon, which drops the layouts it may change ({@linkcode DeviceDaemon}).
 */
interface CoreLayout {
  /** BAR0 offset of the NQ register block. */
  readonly nq: number;
  /** The ring allocation, when the NQ base names one of the session's allocations. */
  readonly ring?: DeviceMemory;
  /** Records the ring holds. */
  readonly capacity: number;
  /** Each stdio ring's write index: the ring allocation and the offset of the u32 in it. */
  readonly writeIndices: ReadonlyArray<{ readonly memory: DeviceMemory; readonly offset: number }>;
  /** The stdio block (a write to its descriptor table changes the layout). */
  readonly block?: DeviceMemory;
}

const EMPTY = new Uint8Array(0);

function overTransfer(what: "read" | "write", bytes: number): NrtError {
  return new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot ${what} device memory: ${bytes} bytes in one request, over ${MAX_TRANSFER_BYTES} (split the copy)`,
  );
}

/**
 * Serves a portal to many clients with per-client ownership and reclamation.
 *
 * @example An in-process daemon and a client over an in-memory link
 * ```ts ignore
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * const sim = new DeviceSimPortal();
 * const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc) });
 * const portal = await RemotePortal.connect(linkPair((l) => daemon.accept(l)), { pid: 1, name: "me" });
 * ```
 */
export class DeviceDaemon {
  readonly #portal: Portal;
  readonly #spec: SiliconSpec;
  readonly #resetCore?: (device: number, nc: number) => Promise<void>;
  readonly #log: (line: string) => void;
  readonly #sessions = new Map<number, Session>();
  /** The core ownership table. */
  readonly ownership: CoreOwnership = new CoreOwnership();
  #nextSession = 1;

  /** Creates a daemon for `options.portal`. */
  constructor(options: DeviceDaemonOptions) {
    this.#portal = options.portal;
    this.#spec = options.spec;
    this.#resetCore = options.resetCore;
    this.#log = options.log ?? (() => {});
  }

  /**
   * Starts a session on a new connection.
   *
   * @param link The connection's sending half.
   * @returns The handlers the transport calls with the connection's bytes and its end.
   */
  accept(link: Link): LinkEvents {
    if (this.#open() >= MAX_SESSIONS) return this.#refuse(link);
    const s: Session = {
      id: this.#nextSession++,
      link,
      pid: 0,
      name: "",
      hello: false,
      closed: false,
      allocations: new Map(),
      byPa: new Map(),
      started: 0,
      layouts: new Map(),
      waits: new Map(),
      reading: 0,
      decoder: new FrameDecoder(MAX_REQUEST_BYTES),
    };
    this.#sessions.set(s.id, s);
    const decoder = s.decoder;
    return {
      data: (chunk) => {
        if (s.closed) return;
        let frames: Frame[];
        try {
          frames = decoder.push(chunk);
        } catch (e) {
          this.#log(`session ${s.id}: ${e instanceof Error ? e.message : String(e)}; closing the connection`);
          link.close();
          // Ended now, not when the transport reports the close: bytes that arrive meanwhile start nothing.
          void this.#end(s, "sent a malformed frame");
          return;
        }
        // The daemon-wide bound, weighed only once this session holds more than a little.
        if (heldBy(s) > SMALL_BYTES && !this.#fits(s, 0)) return;
        for (const f of frames) {
          if (s.closed) return; // after BYE, or a connection closed below: nothing more starts
          if ((link.queued?.() ?? 0) > MAX_UNREAD_BYTES) return this.#dropUnread(s);
          this.#dispatch(s, f);
        }
      },
      closed: () => void this.#end(s, "disconnected"),
    };
  }

  /** The connected sessions. */
  sessions(): DaemonSessionInfo[] {
    return [...this.#sessions.values()].map((s) => ({
      id: s.id,
      pid: s.pid,
      name: s.name,
      allocations: s.allocations.size,
      waits: s.waits.size,
      cores: this.ownership.held(s.id).map(({ device, nc }) => ({ device, nc })),
    }));
  }

  /** Resolves once every session that has ended so far is reclaimed (its cores, memory and waits returned). */
  async reclaimed(): Promise<void> {
    await Promise.all([...this.#sessions.values()].flatMap((s) => s.reclaimed === undefined ? [] : [s.reclaimed]));
  }

  /** Closes every connection and waits until each session is reclaimed. */
  async close(): Promise<void> {
    const all = [...this.#sessions.values()];
    for (const s of all) s.link.close();
    await Promise.all(all.map((s) => this.#end(s, "daemon stopping")));
  }

  /** What the sessions not ended hold together, in bytes. */
  #total(): number {
    let total = 0;
    for (const x of this.#sessions.values()) if (!x.closed) total += heldBy(x);
    return total;
  }

  /** Sessions not ended. */
  #open(): number {
    let n = 0;
    for (const s of this.#sessions.values()) if (!s.closed) n++;
    return n;
  }

  /**
   * A connection past {@linkcode MAX_SESSIONS}: its first frame is answered `NRT_RESOURCE`, and it closes; one that
   * sends no whole frame within {@linkcode REFUSAL_WAIT_MS} is closed then.
   */
  #refuse(link: Link): LinkEvents {
    this.#log(`a connection past ${MAX_SESSIONS} sessions refused`);
    const decoder = new FrameDecoder(HELLO_MAX_BYTES);
    let done = false;
    const end = () => {
      done = true;
      clearTimeout(timer);
      link.close();
    };
    const timer = setTimeout(end, REFUSAL_WAIT_MS);
    return {
      data: (chunk) => {
        if (done) return;
        let first: Frame | undefined;
        try {
          first = decoder.push(chunk)[0];
        } catch {
          return end();
        }
        if (first === undefined) return;
        done = true;
        clearTimeout(timer);
        const e = new NrtError(
          NrtStatus.NRT_RESOURCE,
          `Cannot start a session: the device daemon serves at most ${MAX_SESSIONS} sessions at once`,
        );
        link.send(errorFrame(first, e));
        link.close();
      },
      closed: () => {
        done = true;
        clearTimeout(timer);
      },
    };
  }

  /**
   * Whether the daemon's sessions together hold at most {@linkcode MAX_HELD_BYTES} with `extra` more for session `s`.
   * While they do not, the session holding the most is closed and reclaimed (`s` itself, when it does): `false` when
   * that was `s`.
   */
  #fits(s: Session, extra: number): boolean {
    for (;;) {
      let total = extra, top: Session | undefined, most = -1;
      for (const x of this.#sessions.values()) {
        if (x.closed) continue;
        const held = heldBy(x);
        total += held;
        if (held > most) [top, most] = [x, held];
      }
      if (total <= MAX_HELD_BYTES || top === undefined) return !s.closed;
      this.#log(
        `${describeOwner(top)}: holds ${most} of the ${total} bytes the daemon holds for its sessions, over ` +
          `${MAX_HELD_BYTES}; closing the connection`,
      );
      top.link.close();
      void this.#end(top, "held the most of the daemon's memory");
      if (top === s) return false;
    }
  }

  /** Closes the connection of a session that leaves too many answers untaken, and reclaims it. */
  #dropUnread(s: Session): void {
    this.#log(`${describeOwner(s)}: over ${MAX_UNREAD_BYTES} bytes of answers not taken; closing the connection`);
    s.link.close();
    void this.#end(s, "stopped reading its answers");
  }

  #end(s: Session, why: string): Promise<void> {
    s.closed = true;
    s.reclaimed ??= this.#reclaim(s, why);
    return s.reclaimed;
  }

  /** Returns everything the session holds to the device: waits, streams, Q7 state, NQ, semaphores, memory, cores. */
  async #reclaim(s: Session, why: string): Promise<void> {
    for (const w of s.waits.values()) w.ac.abort();
    s.waits.clear();
    const cores = this.ownership.held(s.id);
    const problems: string[] = [];
    const attempt = async (what: string, f: () => Promise<void>) => {
      try {
        await f();
      } catch (e) {
        problems.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
      }
    };
    for (const g of cores) await attempt(`reset nc${g.nc}`, () => this.#resetNc(g));
    const bytes = [...s.allocations.values()].reduce((n, m) => n + m.bytes, 0);
    const count = s.allocations.size;
    for (const m of s.allocations.values()) await attempt(`free allocation ${m.id}`, () => this.#portal.memFree(m));
    s.allocations.clear();
    s.byPa.clear();
    s.layouts.clear();
    this.ownership.releaseAll(s.id);
    this.#sessions.delete(s.id);
    if (s.hello) {
      this.#log(
        `${describeOwner(s)} ${why}: reclaimed ${cores.length} NeuronCore(s)${
          cores.length ? ` (${cores.map((g) => `nc${g.nc}`).join(",")})` : ""
        }, ` +
          `${count} allocation(s) (${bytes} bytes)` + (problems.length ? `; problems: ${problems.join("; ")}` : ""),
      );
    }
  }

  /** Stops the core's streams, recovers its Q7 cores, detaches its NQ, zeroes its semaphores and events. */
  async #resetNc(g: CoreGrant): Promise<void> {
    this.#forgetCore(g.device, g.nc);
    const base = ncBlock(this.#spec, g.nc);
    const csr = this.#spec.csr;
    await this.#portal.barWrite(g.device, 0, base + csr.streamTable, new Uint8Array(16 * csr.streamSlots));
    await this.#resetCore?.(g.device, g.nc);
    await this.#portal.barWrite(g.device, 0, base + csr.notificationQueue, new Uint8Array(24));
    await this.#portal.barWrite(g.device, 0, base + csr.semaphoreSet, new Uint8Array(4 * this.#spec.semaphoresPerCore));
    await this.#portal.barWrite(g.device, 0, base + csr.event, new Uint8Array(4 * this.#spec.eventsPerCore));
  }

  #dispatch(s: Session, f: Frame): void {
    s.started = f.id;
    try {
      this.#forget(s, f);
    } catch {
      s.layouts.clear(); // a body too short to name what it writes: the request itself reports that
    }
    if (f.op === Op.CANCEL) {
      let target: number;
      try {
        target = new BodyReader(f.body).u32();
      } catch (e) {
        s.link.send(errorFrame(f, e)); // CANCEL is otherwise never answered
        return;
      }
      s.waits.get(target)?.ac.abort();
      return;
    }
    let result: Promise<Uint8Array>;
    try {
      result = this.#handle(s, f);
    } catch (e) {
      result = Promise.reject(e);
    }
    // A posted write is answered only when it fails.
    const posted = f.status === POSTED;
    result.then(
      (frame) => !s.closed && !posted && s.link.send(frame),
      (e: unknown) => !s.closed && s.link.send(errorFrame(f, e)),
    );
  }

  /** Starts one request (synchronously up to the portal call, so order of effects = order of arrival). */
  #handle(s: Session, f: Frame): Promise<Uint8Array> {
    const r = new BodyReader(f.body);
    const p = this.#portal;
    const ok = (fixed = 0, tail = 0) => new FrameBuilder(f.id, f.op | RESPONSE, fixed, tail);
    const done = () => ok().finish();
    if (f.op === Op.HELLO) {
      const version = r.u32();
      if (version !== PROTOCOL_VERSION) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot start a session: the client speaks protocol ${version}, this daemon speaks ${PROTOCOL_VERSION}`,
        );
      }
      const pid = r.u32(), name = r.rest();
      if (name.byteLength > MAX_NAME_BYTES) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot start a session: the client's name is ${name.byteLength} bytes, over ${MAX_NAME_BYTES}`,
        );
      }
      s.pid = pid;
      s.name = new TextDecoder().decode(name);
      s.hello = true;
      this.#log(`${describeOwner(s)} connected (session ${s.id})`);
      return Promise.resolve(
        ok(24).u32(PROTOCOL_VERSION).u32(s.id).f64(this.#spec.csr.ncBlockBase).f64(this.#spec.csr.ncBlockStride)
          .finish(),
      );
    }
    if (!s.hello) throw new NrtError(NrtStatus.NRT_INVALID, "Cannot serve a request before HELLO");
    switch (f.op) {
      case Op.BYE:
        return this.#end(s, "closed its session").then(() => {
          s.link.send(done());
          s.link.close();
          return EMPTY; // already sent; `closed` suppresses the second send
        });
      case Op.DEVICES:
        return p.devices().then((ds) => {
          const b = ok(4 + 20 * ds.length).u32(ds.length);
          for (const d of ds) b.u32(d.index).u32(d.arch).u32(d.ncCount).f64(d.hbmBytes);
          return b.finish();
        });
      case Op.BAR_READ32: {
        const [device, bar, offset] = [r.u32(), r.u32(), r.u32()];
        this.#checkBar(s, device, bar, offset, "read a CSR");
        return p.barRead32(device, bar, offset).then((v) => ok(4).word(v).finish());
      }
      case Op.BAR_WRITE32: {
        const [device, bar, offset, value] = [r.u32(), r.u32(), r.u32(), r.u32()];
        this.#checkBar(s, device, bar, offset, "write a CSR");
        return p.barWrite32(device, bar, offset, value).then(done);
      }
      case Op.BAR_WRITE: {
        const [device, bar, offset] = [r.u32(), r.u32(), r.u32()];
        this.#checkBar(s, device, bar, offset, "write BAR words");
        return p.barWrite(device, bar, offset, r.rest()).then(done);
      }
      case Op.MEM_ALLOC: {
        const [device, nc, bytes, align, loc] = [r.u32(), r.u32(), r.f64(), r.f64(), r.u8()];
        if (loc > 1) {
          throw new NrtError(
            NrtStatus.NRT_INVALID,
            `Cannot allocate device memory: location ${loc} is neither 0 (HBM) nor 1 (host)`,
          );
        }
        this.#checkNc(s, device, nc, "allocate device memory");
        return p.memAlloc({
          device,
          nc,
          bytes,
          align: align === 0 ? undefined : align,
          location: loc === 1 ? "host" : "hbm",
        }).then((m) => {
          // The session ended while the allocation was in flight: freed here, and not recorded, so the reclaim (which
          // may still be running) does not free it a second time.
          if (s.closed) {
            void p.memFree(m).catch(() => {});
            return EMPTY;
          }
          s.allocations.set(m.id, m);
          s.byPa.set(m.pa, m);
          return ok(29).u32(m.id).u32(m.device).u32(m.nc).f64(m.pa).f64(m.bytes).u8(m.location === "host" ? 1 : 0)
            .finish();
        });
      }
      case Op.MEM_FREE: {
        const m = this.#allocation(s, r.u32(), "free");
        s.allocations.delete(m.id);
        if (s.byPa.get(m.pa) === m) s.byPa.delete(m.pa);
        return p.memFree(m).then(done);
      }
      case Op.MEM_WRITE: {
        const m = this.#allocation(s, r.u32(), "write");
        const offset = r.f64(), data = r.rest();
        if (data.byteLength > MAX_TRANSFER_BYTES) throw overTransfer("write", data.byteLength);
        return p.memWrite(m, offset, data).then(done);
      }
      case Op.MEM_READ: {
        const m = this.#allocation(s, r.u32(), "read");
        const offset = r.f64(), length = r.f64();
        if (length > MAX_TRANSFER_BYTES) throw overTransfer("read", length);
        const bytes = Number.isFinite(length) && length > 0 ? length : 0;
        if (s.reading + bytes + (s.link.queued?.() ?? 0) > MAX_UNREAD_BYTES) {
          this.#dropUnread(s);
          return Promise.resolve(EMPTY);
        }
        if (bytes >= SMALL_BYTES && !this.#fits(s, bytes)) return Promise.resolve(EMPTY);
        s.reading += bytes;
        return p.memRead(m, offset, length).then(
          (data) => ok(0, data.byteLength).finish(data),
        ).finally(() => (s.reading -= bytes));
      }
      case Op.MEM_USAGE:
        return p.memUsage(r.u32()).then((u) => ok(20).f64(u.hbm).f64(u.host).u32(u.allocations).finish());
      case Op.SEM_INCREMENT: {
        const [device, nc, sem, value] = [r.u32(), r.u32(), r.u32(), r.u32()];
        this.#checkNc(s, device, nc, "increment a semaphore");
        return p.semaphoreIncrement(device, nc, sem, value).then(done);
      }
      case Op.SEM_READ: {
        const [device, nc, sem] = [r.u32(), r.u32(), r.u32()];
        this.#checkNc(s, device, nc, "read a semaphore");
        return p.semaphoreRead(device, nc, sem).then((v) => ok(4).word(v).finish());
      }
      case Op.SEM_SET: {
        const [device, nc, sem, value] = [r.u32(), r.u32(), r.u32(), r.u32()];
        this.#checkNc(s, device, nc, "set a semaphore");
        return p.semaphoreSet(device, nc, sem, value).then(done);
      }
      case Op.NOTIFICATION_WAIT: {
        const [device, nc, head] = [r.u32(), r.u32(), r.u32()];
        this.#checkNc(s, device, nc, "wait for a notification");
        // Each wait is found, cancelled and reclaimed by its request id: one id, one wait.
        if (s.waits.has(f.id)) {
          throw new NrtError(NrtStatus.NRT_INVALID, `Cannot wait for a notification: request ${f.id} already waits`);
        }
        if (s.waits.size >= MAX_WAITS_PER_SESSION) {
          throw new NrtError(
            NrtStatus.NRT_RESOURCE,
            `Cannot wait for a notification: ${MAX_WAITS_PER_SESSION} waits of this session are pending`,
          );
        }
        const ac = new AbortController();
        s.waits.set(f.id, { ac, device, nc });
        return p.notificationWait(device, nc, head, ac.signal).finally(() => s.waits.delete(f.id)).then(async () => {
          if (ac.signal.aborted || s.closed) return done();
          const hold = { bytes: 0 };
          try {
            const snap = await this.#snapshot(s, device, nc, head, hold).catch(() => undefined);
            return snap === undefined || ac.signal.aborted ? done() : encodeWakeSnapshot(f.id, snap);
          } finally {
            s.reading -= hold.bytes;
          }
        });
      }
      case Op.ACQUIRE_CORES: {
        const [device, cores] = coreList(r);
        return p.devices().then((ds) => {
          const d = ds[device];
          if (d === undefined) {
            throw new NrtError(NrtStatus.NRT_INVALID, `Cannot acquire NeuronCores: device ${device} does not exist`);
          }
          const bad = cores.find((nc) => nc >= d.ncCount);
          if (bad !== undefined) {
            throw new NrtError(
              NrtStatus.NRT_INVALID,
              `Cannot acquire NeuronCore nc${bad} of device ${device}: the device has ${d.ncCount}`,
            );
          }
          // The session may have ended while the device list was read: a core is never granted to a reclaimed one.
          if (s.closed) throw new NrtError(NrtStatus.NRT_CLOSED, "Cannot acquire NeuronCores: the session has ended");
          this.ownership.acquire(device, cores, { session: s.id, pid: s.pid, name: s.name });
          // Another session's waits on these cores end (answered as cancelled): they would read a core it no longer
          // may, and its next look at the core is refused as another session's.
          for (const x of this.#sessions.values()) {
            if (x === s) continue;
            for (const w of x.waits.values()) if (w.device === device && cores.includes(w.nc)) w.ac.abort();
          }
          this.#log(`${describeOwner(s)} acquired ${cores.map((c) => `nc${c}`).join(",")} of device ${device}`);
          return done();
        });
      }
      case Op.RELEASE_CORES: {
        const [device, cores] = coreList(r);
        this.ownership.release(device, cores, s.id);
        return Promise.resolve(done());
      }
      case Op.STATS: {
        const grants = this.ownership.grants();
        const names = grants.map((g) => encodeText(g.owner.name).subarray(0, 255));
        const waiters = [...this.#sessions.values()].reduce((n, x) => n + x.waits.size, 0);
        const b = ok(12 + grants.reduce((n, _, i) => n + 17 + names[i].byteLength, 0)).u32(this.#sessions.size).u32(
          waiters,
        ).u32(grants.length);
        grants.forEach((g, i) =>
          b.u32(g.device).u32(g.nc).u32(g.owner.pid).u32(g.owner.session).u8(names[i].byteLength).bytes(names[i])
        );
        return Promise.resolve(b.finish());
      }
      default:
        throw new NrtError(NrtStatus.NRT_INVALID, `Cannot serve opcode 0x${f.op.toString(16)}: unknown operation`);
    }
  }

  /**
   * Drops the core layouts request `f` may change before it starts: any BAR write in a NeuronCore's block but its NQ
   * tail (whichever session sends it: a core nobody acquired is anyone's), any allocation or free of the session, a
   * write into a stdio block's descriptor table.
   */
  #forget(s: Session, f: Frame): void {
    switch (f.op) {
      case Op.BAR_WRITE32:
      case Op.BAR_WRITE: {
        const r = new BodyReader(f.body);
        const [device, bar, offset] = [r.u32(), r.u32(), r.u32()];
        const csr = this.#spec.csr;
        if (bar !== 0) return;
        const nc = offset < csr.ncBlockBase ? -1 : Math.floor((offset - csr.ncBlockBase) / csr.ncBlockStride);
        const tail = nc >= 0 && offset === ncBlock(this.#spec, nc) + csr.notificationQueue + NqRegister.TAIL;
        if (f.op === Op.BAR_WRITE32 && tail) return;
        this.#forgetCore(device, nc);
        return;
      }
      case Op.MEM_ALLOC:
      case Op.MEM_FREE:
        s.layouts.clear();
        return;
      case Op.MEM_WRITE: {
        const r = new BodyReader(f.body);
        const id = r.u32(), offset = r.f64();
        if (!(offset < POOL_STDIO_INFO_TABLE_BYTES)) return;
        // A layout still being read may be reading this block: it goes too.
        for (const [key, l] of s.layouts) if (l.value === undefined || l.value.block?.id === id) s.layouts.delete(key);
        return;
      }
    }
  }

  /** Drops every session's layout of NeuronCore `nc` of `device` (all of them when `nc` is negative). */
  #forgetCore(device: number, nc: number): void {
    for (const x of this.#sessions.values()) {
      if (nc < 0) x.layouts.clear();
      else x.layouts.delete(`${device}:${nc}`);
    }
  }

  /** Reads where NeuronCore `nc`'s NQ ring and stdio write indices live (see {@linkcode CoreLayout}). */
  async #layout(s: Session, device: number, nc: number): Promise<CoreLayout> {
    const p = this.#portal;
    const csr = this.#spec.csr;
    const nq = ncBlock(this.#spec, nc) + csr.notificationQueue;
    const io = ncBlock(this.#spec, nc) + csr.swapFileIoTable;
    const [lo, hi, capacity, ioLo, ioHi] = await Promise.all(
      [nq + NqRegister.BASE_LO, nq + NqRegister.BASE_HI, nq + NqRegister.CAPACITY, io, io + 4].map((offset) =>
        p.barRead32(device, 0, offset)
      ),
    );
    const ring = s.byPa.get(lo + hi * 0x1_0000_0000);
    const writeIndices: Array<{ memory: DeviceMemory; offset: number }> = [];
    const block = s.byPa.get(ioLo + ioHi * 0x1_0000_0000);
    if (block !== undefined && block.bytes >= POOL_STDIO_INFO_TABLE_BYTES) {
      const image = await p.memRead(block, 0, POOL_STDIO_INFO_TABLE_BYTES);
      const v = new DataView(image.buffer, image.byteOffset, image.byteLength);
      const u64 = (at: number) => v.getUint32(at, true) + v.getUint32(at + 4, true) * 0x1_0000_0000;
      for (let i = 0; i < 2 * POOL_STDIO_SLOTS; i++) {
        const d = i * POOL_STDIO_DESCRIPTOR_BYTES;
        if (v.getUint16(d + PoolStdioDescriptor.MAGIC, true) !== POOL_STDIO_MAGIC) continue;
        const dataPa = u64(d + PoolStdioDescriptor.DATA_PA), memory = s.byPa.get(dataPa);
        const offset = u64(d + PoolStdioDescriptor.WRITE_IDX_PA) - dataPa;
        if (memory !== undefined && offset >= 0 && offset + 4 <= memory.bytes) writeIndices.push({ memory, offset });
      }
    }
    const fits = ring !== undefined && ring.bytes >= capacity * NOTIFICATION_BYTES;
    return { nq, ring: fits ? ring : undefined, capacity: fits ? capacity : 0, writeIndices, block };
  }

  /**
   * What the host reads next on NeuronCore `nc` after a wake, read now: the NQ head and cause, the records from the
   * host's tail `tail` to the head (the newest `capacity` when it was lapped), every stdio ring's write index.
   * `undefined` when a request of the session started while it was read (a torn snapshot).
   *
   * The records are bounded as a MEM_READ is (ours): more than {@linkcode MAX_TRANSFER_BYTES} of them, or more than
   * the session may leave untaken ({@linkcode MAX_UNREAD_BYTES}, with its reads and queued answers), are left out and
   * the client reads them itself; so are they when the daemon's sessions together would pass
   * {@linkcode MAX_HELD_BYTES}. The bytes read are counted in `s.reading` and in `hold`, which the caller returns
   * once the answer is built.
   */
  async #snapshot(
    s: Session,
    device: number,
    nc: number,
    tail: number,
    hold: { bytes: number },
  ): Promise<WakeSnapshot | undefined> {
    const started = s.started;
    const p = this.#portal;
    const key = `${device}:${nc}`;
    let layout = s.layouts.get(key);
    if (layout === undefined) {
      const entry: { read: Promise<CoreLayout>; value?: CoreLayout } = { read: this.#layout(s, device, nc) };
      s.layouts.set(key, layout = entry);
      entry.read.then((v) => entry.value = v, () => s.layouts.get(key) === entry && s.layouts.delete(key));
    }
    const l = layout.value ?? await layout.read;
    const [head, cause, ...indices] = await Promise.all([
      p.barRead32(device, 0, l.nq + NqRegister.HEAD),
      p.barRead32(device, 0, l.nq + NqRegister.CAUSE),
      ...l.writeIndices.map((w) => p.memRead(w.memory, w.offset, 4)),
    ]) as [number, number, ...Uint8Array[]];
    const ranges = l.writeIndices.map((w, i) => ({ memory: w.memory.id, offset: w.offset, bytes: indices[i] }));
    // The NQ records, as `nqRead` takes them: from the host's tail, or the newest `capacity` when it was lapped.
    let pending = (head - tail) >>> 0;
    if (pending > l.capacity) [tail, pending] = [(head - l.capacity) >>> 0, l.capacity];
    const bytes = pending * NOTIFICATION_BYTES;
    const unread = s.reading + bytes + (s.link.queued?.() ?? 0);
    if (
      l.ring !== undefined && bytes > 0 && bytes <= MAX_TRANSFER_BYTES && unread <= MAX_UNREAD_BYTES &&
      (bytes < SMALL_BYTES || this.#total() + bytes <= MAX_HELD_BYTES)
    ) {
      hold.bytes += bytes;
      s.reading += bytes;
      const start = tail % l.capacity, first = Math.min(pending, l.capacity - start);
      const segments = first < pending ? [[start, first], [0, pending - first]] : [[start, first]];
      const records = await Promise.all(
        segments.map(([at, n]) => p.memRead(l.ring!, at * NOTIFICATION_BYTES, n * NOTIFICATION_BYTES)),
      );
      segments.forEach(([at], i) =>
        ranges.push({ memory: l.ring!.id, offset: at * NOTIFICATION_BYTES, bytes: records[i] })
      );
    }
    if (s.started !== started || s.closed) return undefined;
    return {
      started,
      words: [[l.nq + NqRegister.HEAD, head], [l.nq + NqRegister.CAUSE, cause]],
      inert: [l.nq + NqRegister.TAIL],
      ranges,
    };
  }

  #allocation(s: Session, id: number, what: string): DeviceMemory {
    const m = s.allocations.get(id);
    if (m === undefined) {
      throw new NrtError(
        NrtStatus.NRT_INVALID,
        `Cannot ${what} device memory: allocation ${id} is not live in this session`,
      );
    }
    return m;
  }

  /** A register write inside a NeuronCore's BAR0 block counts as a use of that core. */
  #checkBar(s: Session, device: number, bar: number, offset: number, what: string): void {
    if (bar !== 0) return;
    const csr = this.#spec.csr;
    const rel = offset - csr.ncBlockBase;
    if (rel < 0) return;
    const nc = Math.floor(rel / csr.ncBlockStride);
    if (nc < this.#spec.ncPerDevice) this.#checkNc(s, device, nc, what);
  }

  /** Refuses to act on a NeuronCore granted to another session. */
  #checkNc(s: Session, device: number, nc: number, what: string): void {
    const o = this.ownership.owner(device, nc);
    if (o !== undefined && o.session !== s.id) {
      throw new NrtError(
        NrtStatus.NRT_RESOURCE,
        `Cannot ${what} on NeuronCore nc${nc} of device ${device}: it is in use by ${describeOwner(o)}`,
      );
    }
  }
}

function coreList(r: BodyReader): [number, number[]] {
  const device = r.u32();
  const n = r.u32();
  if (n > 4096) throw new RangeError(`Cannot decode a core list of ${n} entries`);
  // A core named twice is one core: the grant, the log and the reclaim list each name it once.
  return [device, [...new Set(Array.from({ length: n }, () => r.u32()))].sort((a, b) => a - b)];
}

function errorFrame(f: Frame, e: unknown): Uint8Array {
  const kind = e instanceof NrtError
    ? ErrorKind.NRT
    : e instanceof TypeError
    ? ErrorKind.TYPE
    : e instanceof RangeError
    ? ErrorKind.RANGE
    : ErrorKind.OTHER;
  const status = e instanceof NrtError ? e.status : NrtStatus.NRT_FAILURE;
  const text = encodeText(e instanceof Error ? e.message : String(e));
  return new FrameBuilder(f.id, f.op | RESPONSE, 5, text.byteLength, 1).u32(status).u8(kind).finish(text);
}
