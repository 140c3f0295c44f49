/**
 * The device daemon against a client that breaks the protocol's rules, over raw frames: what it can make the daemon
 * read, buffer and hold stays bounded, bytes behind a malformed frame start nothing, an allocation in flight when the
 * session ends is freed once, and a wait never outlives its right to look at the core.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import { ncBlock } from "@nrt/core/hal";
import { NOTIFICATION_BYTES, NqRegister } from "@nrt/core/isa";
import {
  BodyReader,
  decodeWakeSnapshot,
  type DeviceDaemon,
  type Frame,
  type Link,
  MAX_HELD_BYTES,
  MAX_REQUEST_BYTES,
  MAX_SESSIONS,
  MAX_TRANSFER_BYTES,
  MAX_UNREAD_BYTES,
  Op,
  RemotePortal,
  RESPONSE,
} from "./mod.ts";
import { closeDaemonRigs, daemonRig as rig, error, frames, rawClient, until } from "../../../tests/_raw_daemon.ts";

afterAll(closeDaemonRigs);

describe("the device daemon's bounds against a hostile client", () => {
  test("a wake snapshot's NQ records are bounded as a MEM_READ is, and count towards the untaken answers", async () => {
    const { sim, daemon } = rig();
    // A client that never reads: everything sent stays queued. Each send is one frame; large bodies are not kept.
    let queued = 0;
    const answers: Frame[] = [];
    const events = daemon.accept(
      {
        send: (b) => {
          queued += b.byteLength;
          const body = b.byteLength < 4096 ? b.slice(12) : new Uint8Array(0);
          answers.push({ id: new DataView(b.buffer, b.byteOffset).getUint32(4, true), op: b[8], status: b[9], body });
        },
        close: () => {},
        queued: () => queued,
      } satisfies Link,
    );
    const { frame: f, hello } = frames();
    events.data(hello());
    const ring = async (nc: number, bytes: number) => {
      events.data(f(Op.MEM_ALLOC, 25).u32(0).u32(nc).f64(bytes).f64(0).u8(0).finish());
      const at = answers.length;
      await until(() => answers.length > at, "the allocation");
      const r = new BodyReader(answers[at].body);
      r.u32(), r.u32(), r.u32();
      const pa = r.f64();
      // The NQ points at the allocation, with as many records as it holds.
      const nq = ncBlock(sim.spec, nc) + sim.spec.csr.notificationQueue;
      for (const [reg, v] of [[NqRegister.BASE_LO, pa % 2 ** 32], [NqRegister.BASE_HI, Math.floor(pa / 2 ** 32)]]) {
        events.data(f(Op.BAR_WRITE32, 16).u32(0).u32(0).u32(nq + reg).u32(v).finish());
      }
      const capacity = bytes / NOTIFICATION_BYTES;
      events.data(f(Op.BAR_WRITE32, 16).u32(0).u32(0).u32(nq + NqRegister.CAPACITY).u32(capacity).finish());
    };
    await until(() => answers.length === 1, "HELLO's answer");
    // A wait whose head is not the device's (0) wakes at once; from a host tail of 1 the whole ring is pending.
    const wait = (nc: number) => f(Op.NOTIFICATION_WAIT, 12).u32(0).u32(nc).u32(1).finish();
    const wakes = () => answers.filter((a) => a.op === (Op.NOTIFICATION_WAIT | RESPONSE));
    await ring(0, 2 * MAX_TRANSFER_BYTES);
    events.data(wait(0));
    await until(() => wakes().length === 1, "the wait's answer");
    // 128 MiB of records were one answer before. Now the head and cause come without them: the client reads them.
    const snap = decodeWakeSnapshot(wakes()[0].body);
    expect(snap?.words.length).toBe(2);
    expect(snap?.ranges).toEqual([]);
    expect(queued).toBeLessThan(1 << 20);
    // Six waits on a 64 MiB ring: before, 384 MiB of answers to a client that takes none (1024 waits: 64 GiB).
    await ring(1, MAX_TRANSFER_BYTES);
    events.data(Uint8Array.from(Array.from({ length: 6 }, () => [...wait(1)]).flat()));
    await until(() => wakes().length === 7, "six more answers");
    expect(wakes().map((a) => a.status)).toEqual([0, 0, 0, 0, 0, 0, 0]);
    expect(queued).toBeLessThanOrEqual(MAX_UNREAD_BYTES);
    events.closed();
    await daemon.reclaimed();
    expect((await sim.memUsage(0)).allocations).toBe(0);
  });

  test("a length prefix over MAX_REQUEST_BYTES closes the connection before its body is buffered", async () => {
    const { daemon, dial, logs } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    // Only the header of a 1 GiB MEM_WRITE: before, the daemon waited for (and would have buffered) all of it.
    const header = new Uint8Array(12);
    new DataView(header.buffer).setUint32(0, MAX_REQUEST_BYTES - 3, true);
    header[8] = Op.MEM_WRITE;
    c.send(header);
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(daemon.sessions()).toEqual([]);
    expect(logs.some((l) => l.includes(`length ${MAX_REQUEST_BYTES - 3} is out of range`))).toBe(true);
  });

  test("RemotePortal refuses a BAR write or unsplittable memory write over the limit itself", async () => {
    const { dial } = rig();
    const portal = await RemotePortal.connect(dial, { pid: 5, name: "big" });
    try {
      const big = new Uint8Array(MAX_TRANSFER_BYTES + 1);
      const m = await portal.memAlloc({ device: 0, nc: 0, bytes: 4096 });
      let e = await portal.barWrite(0, 0, 0, big).catch((x) => x);
      expect([e.status, e.message]).toEqual([
        NrtStatus.NRT_INVALID,
        `Cannot write BAR words: ${big.byteLength} bytes in one write, over ${MAX_TRANSFER_BYTES} ` +
        "(no BAR0 register window is as large)",
      ]);
      e = await portal.memWrite(m, NaN, big).catch((x) => x);
      expect([e.status, e.message]).toEqual([
        NrtStatus.NRT_INVALID,
        `Cannot write device memory: ${big.byteLength} bytes at offset NaN in one request, over ${MAX_TRANSFER_BYTES}`,
      ]);
      await portal.memWrite(m, 0, Uint8Array.of(1, 2, 3));
      expect([...await portal.memRead(m, 0, 3)]).toEqual([1, 2, 3]);
    } finally {
      await portal.close();
    }
  });

  test("bytes that follow a malformed length prefix start nothing", async () => {
    const { sim, daemon, dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    c.send(Uint8Array.of(3, 0, 0, 0, 0, 0, 0, 0)); // shorter than a header
    c.send(c.frame(Op.SEM_SET, 16).u32(0).u32(1).u32(0).u32(7).finish()); // arrives before the close is seen
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(await sim.semaphoreRead(0, 1, 0)).toBe(0); // before: 7, set by a session already closing
  });

  test("an allocation in flight when its session ends is freed once; the reclaim reports no problem", async () => {
    const { sim, daemon, logs } = rig();
    const events = daemon.accept({ send() {}, close() {} });
    const { frame: f, hello } = frames();
    events.data(hello());
    events.data(f(Op.ACQUIRE_CORES, 12).u32(0).u32(1).u32(0).finish()); // the reclaim then resets nc0 first
    await until(() => daemon.sessions()[0]?.cores.length === 1, "the grant");
    events.data(f(Op.MEM_ALLOC, 25).u32(0).u32(0).f64(4096).f64(0).u8(0).finish());
    events.closed();
    await daemon.reclaimed();
    await until(() => logs.some((l) => l.includes("disconnected")), "the reclaim's line");
    expect(logs.filter((l) => l.includes("problems"))).toEqual([]); // before: "free allocation 1: … not a live …"
    expect((await sim.memUsage(0)).allocations).toBe(0);
  });

  test("a wait on a NeuronCore another session then acquires is answered, and the next look is refused", async () => {
    const { dial, daemon } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    c.send(c.frame(Op.NOTIFICATION_WAIT, 12).u32(0).u32(2).u32(0).finish()); // the head is 0: it waits
    await until(() => daemon.sessions()[0]?.waits === 1, "the wait");
    const owner = await RemotePortal.connect(dial, { pid: 11, name: "owner" });
    try {
      await owner.acquireCores(0, [2]);
      // Before, it went on waiting, and its answer would have carried the new owner's NQ head and cause.
      await until(() => c.answers.length === 2, "the wait's answer");
      expect([c.answers[1].op, c.answers[1].status, c.answers[1].body.byteLength]).toEqual([
        Op.NOTIFICATION_WAIT | RESPONSE,
        0,
        0,
      ]);
      c.send(c.frame(Op.NOTIFICATION_WAIT, 12).u32(0).u32(2).u32(0).finish());
      await until(() => c.answers.length === 3, "the refusal");
      expect(error(c.answers[2])).toEqual({
        status: NrtStatus.NRT_RESOURCE,
        message: 'Cannot wait for a notification on NeuronCore nc2 of device 0: it is in use by process 11 ("owner")',
      });
    } finally {
      c.close();
      await owner.close();
    }
  });
  test("the sessions together hold at most MAX_HELD_BYTES: the one holding the most is closed first", async () => {
    const { daemon, logs } = rig();
    const MiB = 1 << 20;
    // Clients that never read, each under its own 257 MiB bound: what each has left untaken is set by the test.
    const client = (queued: number) => {
      const c = {
        queued,
        closed: false,
        answers: [] as Uint8Array[],
        events: {} as ReturnType<DeviceDaemon["accept"]>,
      };
      c.events = daemon.accept({
        send: (b) => void c.answers.push(b.byteLength < 4096 ? b.slice(12) : new Uint8Array(0)),
        close: () => void (c.closed = true),
        queued: () => c.queued,
      });
      c.events.data(frames().hello());
      return c;
    };
    const [a, b, c, d] = [client(250 * MiB), client(240 * MiB), client(200 * MiB), client(200 * MiB)];
    await until(() => [a, b, c, d].every((x) => x.answers.length === 1), "HELLO's answers");
    expect([a, b, c, d].map((x) => x.closed)).toEqual([false, false, false, false]); // 890 MiB together
    // A fifth, past 1 GiB together: the one holding the most goes, whoever sent the bytes.
    const e = client(150 * MiB);
    await until(() => a.closed, "the largest holder's close");
    expect([a, b, c, d, e].map((x) => x.closed)).toEqual([true, false, false, false, false]);
    expect(logs.some((l) => l.includes(`over ${MAX_HELD_BYTES}; closing the connection`))).toBe(true);
    await daemon.reclaimed();
    expect(daemon.sessions().length).toBe(4);
    // 240 + 255 + 254 + 10 + 250 MiB: 1,009 MiB, under the bound, so the sixth stays and so does everyone.
    [c.queued, d.queued, e.queued] = [255 * MiB, 254 * MiB, 10 * MiB];
    const f = client(250 * MiB);
    await until(() => f.answers.length === 1, "the sixth's HELLO answer");
    expect([b, c, d, e, f].map((x) => x.closed)).toEqual([false, false, false, false, false]);
    // A 64 MiB read would take them to 1,073 MiB: the largest holder (c) goes, not the reader, and the read is answered.
    const { frame } = frames();
    e.events.data(frame(Op.MEM_ALLOC, 25).u32(0).u32(0).f64(MAX_TRANSFER_BYTES).f64(0).u8(0).finish());
    await until(() => e.answers.length === 2, "the allocation");
    const id = new BodyReader(e.answers[1]).u32();
    e.events.data(frame(Op.MEM_READ, 20).u32(id).f64(0).f64(MAX_TRANSFER_BYTES).finish());
    await until(() => e.answers.length === 3, "the read");
    expect([b, c, d, e, f].map((x) => x.closed)).toEqual([false, true, false, false, false]);
    for (const x of [b, c, d, e, f]) x.events.closed();
    await daemon.reclaimed();
    expect(daemon.sessions()).toEqual([]);
  });

  test("a connection past MAX_SESSIONS has its HELLO refused with NRT_RESOURCE and is closed", async () => {
    const { daemon, dial } = rig();
    const open = Array.from({ length: MAX_SESSIONS }, () => daemon.accept({ send: () => {}, close: () => {} }));
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.closed, "the refused connection's close");
    expect(error(c.answers[0])?.status).toBe(NrtStatus.NRT_RESOURCE);
    expect(error(c.answers[0])?.message).toContain(`at most ${MAX_SESSIONS} sessions`);
    expect(daemon.sessions().length).toBe(MAX_SESSIONS);
    // One leaves: the next is served.
    open[0].closed();
    await daemon.reclaimed();
    const next = await RemotePortal.connect(dial, { pid: 1, name: "next" });
    expect(next.connected).toBe(true);
    await next.close();
    for (const x of open.slice(1)) x.closed();
    await daemon.reclaimed();
  });

  test("a refused connection that sends no whole HELLO is closed after 5 s", async () => {
    const { daemon, dial } = rig();
    const open = Array.from({ length: MAX_SESSIONS }, () => daemon.accept({ send: () => {}, close: () => {} }));
    const c = await rawClient(dial);
    c.send(c.hello().subarray(0, 6)); // half a header, then nothing
    await new Promise((r) => setTimeout(r, 4_000));
    expect(c.closed).toBe(false);
    await until(() => c.closed, "the refused connection's close");
    expect(c.answers).toEqual([]);
    for (const x of open) x.closed();
    await daemon.reclaimed();
  }, 15_000);
});
