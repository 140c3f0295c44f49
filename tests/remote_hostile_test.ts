/**
 * The device daemon against clients that break the protocol's rules, in one process: raw frames over an in-memory
 * link (or a link the test holds, for a client that never takes its answers). What a session starts never outlives
 * it, a core is never granted to a session that has ended, the answers and waits a client can make the daemon hold
 * are bounded, another session's NeuronCores cannot be read, and every refusal is an answer, not a dead connection.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { NrtStatus } from "@nrt/core";
import type { DeviceSimPortal } from "@nrt/device-sim";
import {
  BodyReader,
  type Dialer,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  type Link,
  Op,
  RemotePortal,
  RESPONSE,
} from "../packages/device-sim/remote/mod.ts";
import { closeDaemonRigs, daemonRig as rig, error, frames, rawClient, until } from "./_raw_daemon.ts";

afterAll(closeDaemonRigs);

const waitersOn = (sim: DeviceSimPortal) =>
  Array.from({ length: sim.spec.ncPerDevice }, (_, nc) => sim.notificationWaiters(0, nc)).reduce((a, b) => a + b);

describe("the device daemon against hostile clients", () => {
  test("a core is never granted to a session that ended: ACQUIRE and BYE in one write leave the core free", async () => {
    const { daemon, dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    const acquire = c.frame(Op.ACQUIRE_CORES, 8, 4).u32(0).u32(1).finish(Uint8Array.of(0, 0, 0, 0));
    c.send(acquire, c.frame(Op.BYE, 0).finish());
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(daemon.ownership.grants()).toEqual([]);
    expect(daemon.sessions()).toEqual([]);
    // Before, the grant landed after the reclaim, for good: the next process could not take nc0.
    const next = await RemotePortal.connect(dial, { pid: 7, name: "next" });
    try {
      await next.acquireCores(0, [0]);
    } finally {
      await next.close();
    }
  });

  test("BYE is answered before the connection closes, and nothing sent behind it starts", async () => {
    const { sim, daemon, dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    const bye = c.frame(Op.BYE, 0).finish();
    const wait = c.frame(Op.NOTIFICATION_WAIT, 12).u32(0).u32(3).u32(0).finish();
    c.send(bye, wait);
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(c.answers.map((f) => [f.op, f.status])).toEqual([[Op.HELLO | RESPONSE, 0], [Op.BYE | RESPONSE, 0]]);
    expect(waitersOn(sim)).toBe(0);
  });

  test("a request id already waiting cannot wait again, so the reclaim finds every wait", async () => {
    const { sim, daemon, dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    const wait = (id: number) => new FrameBuilder(id, Op.NOTIFICATION_WAIT, 12).u32(0).u32(2).u32(0).finish();
    c.send(wait(100), wait(100), wait(100));
    await until(() => c.answers.length === 3, "the two refusals");
    expect(c.answers.slice(1).map(error)).toEqual([1, 2].map(() => ({
      status: NrtStatus.NRT_INVALID,
      message: "Cannot wait for a notification: request 100 already waits",
    })));
    expect(waitersOn(sim)).toBe(1);
    c.close();
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(waitersOn(sim)).toBe(0); // before: the overwritten waits stayed on the device for good
  });

  test("a session may have 1024 waits pending; the next is refused with NRT_RESOURCE", async () => {
    const { sim, daemon, dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    c.send(...Array.from({ length: 1025 }, () => c.frame(Op.NOTIFICATION_WAIT, 12).u32(0).u32(5).u32(0).finish()));
    await until(() => c.answers.length === 2, "the refusal");
    expect(error(c.answers[1])).toEqual({
      status: NrtStatus.NRT_RESOURCE,
      message: "Cannot wait for a notification: 1024 waits of this session are pending",
    });
    expect(daemon.sessions()[0].waits).toBe(1024);
    c.close();
    await until(() => c.closed, "the connection to close");
    await daemon.reclaimed();
    expect(waitersOn(sim)).toBe(0);
  });

  test("a CANCEL too short to name a request is answered with an error and the session goes on", async () => {
    const { dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello());
    await until(() => c.answers.length === 1, "HELLO's answer");
    const cancel = c.frame(Op.CANCEL, 0).finish();
    const devices = c.frame(Op.DEVICES, 0).finish();
    c.send(cancel, devices);
    await until(() => c.answers.length === 3, "two answers");
    expect(c.answers[1].op).toBe(Op.CANCEL | RESPONSE);
    expect(error(c.answers[1])).toEqual({
      status: NrtStatus.NRT_FAILURE,
      message: "Cannot decode frame body: field at 0 needs 4 bytes, the body has 0",
    });
    expect([c.answers[2].op, c.answers[2].status]).toEqual([Op.DEVICES | RESPONSE, 0]);
    expect(c.closed).toBe(false);
    c.close();
  });

  test("HELLO refuses a name over 1024 bytes; MEM_ALLOC refuses a location that is neither HBM nor host", async () => {
    const { dial } = rig();
    const c = await rawClient(dial);
    c.send(c.hello("x".repeat(1025)));
    await until(() => c.answers.length === 1, "HELLO's answer");
    expect(error(c.answers[0])).toEqual({
      status: NrtStatus.NRT_INVALID,
      message: "Cannot start a session: the client's name is 1025 bytes, over 1024",
    });
    c.send(c.hello("x".repeat(1024)));
    await until(() => c.answers.length === 2, "the second HELLO's answer");
    expect(c.answers[1].status).toBe(0);
    const alloc = c.frame(Op.MEM_ALLOC, 25).u32(0).u32(0).f64(4096).f64(0).u8(7).finish();
    c.send(alloc);
    await until(() => c.answers.length === 3, "MEM_ALLOC's answer");
    expect(error(c.answers[2])).toEqual({
      status: NrtStatus.NRT_INVALID,
      message: "Cannot allocate device memory: location 7 is neither 0 (HBM) nor 1 (host)",
    });
    c.close();
  });

  test("another session's NeuronCore cannot be read: BAR_READ32, SEM_READ and NOTIFICATION_WAIT are refused", async () => {
    const { sim, dial } = rig();
    const owner = await RemotePortal.connect(dial, { pid: 11, name: "owner" });
    const c = await rawClient(dial);
    try {
      await owner.acquireCores(0, [0]);
      c.send(c.hello());
      await until(() => c.answers.length === 1, "HELLO's answer");
      const nq = sim.spec.csr.ncBlockBase + sim.spec.csr.notificationQueue;
      c.send(
        c.frame(Op.BAR_READ32, 12).u32(0).u32(0).u32(nq).finish(),
        c.frame(Op.SEM_READ, 12).u32(0).u32(0).u32(1).finish(),
        c.frame(Op.NOTIFICATION_WAIT, 12).u32(0).u32(0).u32(0).finish(),
      );
      await until(() => c.answers.length === 4, "three refusals");
      expect(c.answers.slice(1).map(error)).toEqual(
        ["read a CSR", "read a semaphore", "wait for a notification"].map((what) => ({
          status: NrtStatus.NRT_RESOURCE,
          message: `Cannot ${what} on NeuronCore nc0 of device 0: it is in use by process 11 ("owner")`,
        })),
      );
      // A core nobody holds is anyone's to read, as before.
      c.send(c.frame(Op.SEM_READ, 12).u32(0).u32(1).u32(1).finish());
      await until(() => c.answers.length === 5, "the read of nc1");
      expect(c.answers[4].status).toBe(0);
    } finally {
      c.close();
      await owner.close();
    }
  });

  test("one MEM_READ or MEM_WRITE moves at most 64 MiB; RemotePortal splits a larger copy", async () => {
    const { dial } = rig();
    const sent: Frame[] = [];
    const spyDial: Dialer = async (events) => {
      const link = await dial(events);
      const dec = new FrameDecoder();
      return {
        send: (b) => (sent.push(...dec.push(b).map((f) => ({ ...f, body: new Uint8Array(0) }))), link.send(b)),
        close: () => link.close(),
      };
    };
    const portal = await RemotePortal.connect(spyDial, { pid: 12, name: "big" });
    const c = await rawClient(dial);
    try {
      const bytes = 64 * 1024 * 1024 + 5;
      const m = await portal.memAlloc({ device: 0, nc: 1, bytes });
      const data = new Uint8Array(bytes);
      for (let i = 0; i < bytes; i += 4093) data[i] = i % 251;
      data[bytes - 1] = 77;
      await portal.memWrite(m, 0, data);
      expect(sent.filter((f) => f.op === Op.MEM_WRITE).length).toBe(2);
      const back = await portal.memRead(m, 0, bytes);
      expect(sent.filter((f) => f.op === Op.MEM_READ).length).toBe(2);
      expect(back.byteLength).toBe(bytes);
      expect(back[bytes - 1]).toBe(77);
      expect(back.every((v, i) => v === data[i])).toBe(true);
      // The daemon refuses one read of more, with an answer (before, its reply frame passed the 1 GiB frame limit).
      c.send(c.hello());
      await until(() => c.answers.length === 1, "HELLO's answer");
      const mine = c.frame(Op.MEM_ALLOC, 25).u32(0).u32(2).f64(bytes).f64(0).u8(0).finish();
      c.send(mine);
      await until(() => c.answers.length === 2, "the allocation");
      const id = new BodyReader(c.answers[1].body).u32();
      c.send(c.frame(Op.MEM_READ, 20).u32(id).f64(0).f64(bytes).finish());
      await until(() => c.answers.length === 3, "the refusal");
      expect(error(c.answers[2])).toEqual({
        status: NrtStatus.NRT_INVALID,
        message: `Cannot read device memory: ${bytes} bytes in one request, over 67108864 (split the copy)`,
      });
      await portal.memFree(m);
    } finally {
      c.close();
      await portal.close();
    }
  });

  test("a client that does not take its answers is disconnected past 256 MiB of them, and reclaimed", async () => {
    const { sim, daemon } = rig();
    let queued = 0, closed = false;
    const answers: Frame[] = [];
    const dec = new FrameDecoder();
    const held: Link = {
      // A peer that never reads: everything the daemon sends stays queued (the test decodes it to see the ids).
      send: (b) => {
        queued += b.byteLength;
        if (b.byteLength < 4096) answers.push(...dec.push(b).map((x) => ({ ...x, body: x.body.slice() })));
      },
      close: () => (closed = true),
      queued: () => queued,
    };
    const events = daemon.accept(held);
    const { frame: f, hello } = frames();
    events.data(hello("sink", 99));
    events.data(f(Op.MEM_ALLOC, 25).u32(0).u32(3).f64(64 * 1024 * 1024).f64(0).u8(0).finish());
    await until(() => answers.length === 2, "the allocation");
    const memory = new BodyReader(answers[1].body).u32();
    let reads = 0;
    while (!closed && reads < 8) {
      events.data(f(Op.MEM_READ, 20).u32(memory).f64(0).f64(64 * 1024 * 1024).finish());
      reads++;
      await new Promise<void>((r) => setTimeout(r, 0));
    }
    expect([closed, reads]).toEqual([true, 5]); // four 64 MiB answers are held; the fifth would pass 256 MiB
    events.closed();
    await daemon.reclaimed();
    expect(daemon.sessions()).toEqual([]);
    expect((await sim.memUsage(0)).allocations).toBe(0);
    expect(queued).toBeLessThanOrEqual(4 * 64 * 1024 * 1024 + 4096);
  });
});
