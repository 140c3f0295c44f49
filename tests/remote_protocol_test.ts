/**
 * The device daemon's protocol, session and ownership logic, in one process over an in-memory link: framing,
 * raw bulk payloads, pipelining, the cancellable long-poll, per-session reclamation, exclusive cores, and the
 * failure model of the client (disconnect → NRT_HW_ERROR, unanswered request → NRT_TIMEOUT).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { NrtError, NrtStatus } from "@nrt/core";
import { ncBlock } from "@nrt/core/hal";
import { DeviceSimPortal } from "@nrt/device-sim";
import {
  BodyReader,
  DeviceDaemon,
  type Dialer,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  HEADER_BYTES,
  type Link,
  type LinkEvents,
  linkPair,
  Op,
  POSTED,
  PROTOCOL_VERSION,
  RemotePortal,
  RESPONSE,
} from "../packages/device-sim/remote/mod.ts";

const sims: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const s of sims.splice(0)) await s.close(); // no Q7 Worker outlives the file
});

/** A simulator, a daemon and a dialer that records every frame the client sends. */
function rig() {
  const sim = new DeviceSimPortal();
  sims.push(sim);
  const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc) });
  const sent: Frame[] = [];
  const links: Link[] = [];
  const inner = linkPair((l) => daemon.accept(l));
  const dial: Dialer = async (events) => {
    const link = await inner(events);
    const dec = new FrameDecoder();
    const spy: Link = {
      send: (b) => (sent.push(...dec.push(b).map((f) => ({ ...f, body: f.body.slice() }))), link.send(b)),
      close: () => link.close(),
    };
    links.push(spy);
    return spy;
  };
  const connect = (name: string, pid = 1000 + links.length, requestTimeoutMs?: number) =>
    RemotePortal.connect(dial, { pid, name, requestTimeoutMs });
  return { sim, daemon, sent, links, connect };
}

async function statusOf(p: Promise<unknown>): Promise<NrtError> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(NrtError);
  return e as NrtError;
}

describe("FrameDecoder()", () => {
  test("FrameDecoder() reassembles frames cut at every byte boundary and merged in one chunk", () => {
    const frames = [
      new FrameBuilder(1, Op.DEVICES, 0).finish(),
      new FrameBuilder(2, Op.BAR_WRITE, 12, 5).u32(0).u32(0).u32(0x40).finish(new Uint8Array([9, 8, 7, 6, 5])),
      new FrameBuilder(0xffff_fffe, Op.MEM_READ | RESPONSE, 0, 3).finish(new Uint8Array([1, 2, 3])),
    ];
    const all = Uint8Array.from(frames.flatMap((f) => [...f]));
    for (let cut = 0; cut <= all.byteLength; cut++) {
      const d = new FrameDecoder();
      const got = [...d.push(all.subarray(0, cut)), ...d.push(all.subarray(cut))];
      expect(got.map((f) => [f.id, f.op, Array.from(f.body)])).toEqual([
        [1, Op.DEVICES, []],
        [2, Op.BAR_WRITE, [0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 9, 8, 7, 6, 5]],
        [0xffff_fffe, Op.MEM_READ | RESPONSE, [1, 2, 3]],
      ]);
      expect(d.pending).toBe(0);
    }
  });

  test("FrameDecoder() keeps a frame whole when the chunk that completes it also starts the next one", () => {
    // Three chunks cut anywhere: the second may complete a frame held in the decoder's buffer and leave the start of
    // the next one, which moves to the buffer's front. Before, it overwrote the completed frame's body first (a Deno
    // client's 1 MiB MEM_WRITE reached the daemon with the next write's memory id).
    const frames = [
      new FrameBuilder(1, Op.MEM_WRITE, 12, 24).u32(2).f64(0).finish(new Uint8Array(24).fill(0xaa)),
      new FrameBuilder(2, Op.MEM_WRITE, 12, 40).u32(1).f64(0).finish(new Uint8Array(40).fill(0xbb)),
      new FrameBuilder(3, Op.DEVICES, 0).finish(),
    ];
    const all = Uint8Array.from(frames.flatMap((f) => [...f]));
    const want = frames.map((f) => Array.from(f.subarray(12)));
    for (let i = 0; i <= all.byteLength; i++) {
      for (let j = i; j <= all.byteLength; j++) {
        const d = new FrameDecoder();
        const got = [...d.push(all.subarray(0, i)), ...d.push(all.subarray(i, j)), ...d.push(all.subarray(j))];
        expect(got.map((f) => Array.from(f.body))).toEqual(want);
      }
    }
  });

  test("FrameDecoder() rejects a length prefix shorter than a header", () => {
    expect(() => new FrameDecoder().push(new Uint8Array([3, 0, 0, 0, 0, 0, 0, 0]))).toThrow(RangeError);
  });
});

describe("RemotePortal() wire format", () => {
  test("RemotePortal() sends bulk BAR and memory payloads as raw little-endian bytes, never JSON", async () => {
    const { connect, sent } = rig();
    const portal = await connect("wire");
    try {
      const data = Uint8Array.from({ length: 4096 }, (_, i) => (i * 31 + 7) & 0xff);
      const dram = ncBlock(CAYMAN_SPEC, 0) + CAYMAN_SPEC.csr.q7Dram;
      await portal.barWrite(0, 0, dram, data);
      const bw = sent.find((f) => f.op === Op.BAR_WRITE)!;
      expect(bw.body.byteLength).toBe(12 + data.byteLength); // u32 device, u32 bar, u32 offset, then the bytes
      const r = new BodyReader(bw.body);
      expect([r.u32(), r.u32(), r.u32()]).toEqual([0, 0, dram]);
      expect(r.rest()).toEqual(data);
      const m = await portal.memAlloc({ device: 0, nc: 0, bytes: 1 << 20 });
      const big = Uint8Array.from({ length: 1 << 20 }, (_, i) => i & 0xff);
      await portal.memWrite(m, 0, big);
      const mw = sent.find((f) => f.op === Op.MEM_WRITE)!;
      expect(mw.body.byteLength).toBe(4 + 8 + big.byteLength);
      expect(mw.body.subarray(12)).toEqual(big);
      expect(await portal.memRead(m, 0, big.byteLength)).toEqual(big);
      // The whole 1 MiB write cost 12 bytes of header and 12 of fields.
      expect(mw.body.byteLength + HEADER_BYTES - big.byteLength).toBe(24);
      await portal.memFree(m);
    } finally {
      await portal.close();
    }
  });

  test("RemotePortal() pipelines: requests issued without awaiting take effect in order and answer by id", async () => {
    const { connect, sim } = rig();
    const portal = await connect("pipeline");
    try {
      const ops: Promise<unknown>[] = [];
      for (let i = 0; i < 50; i++) ops.push(portal.semaphoreIncrement(0, 1, 4, 1));
      ops.push(portal.semaphoreSet(0, 1, 4, 1000));
      for (let i = 0; i < 5; i++) ops.push(portal.semaphoreIncrement(0, 1, 4, 2));
      const read = portal.semaphoreRead(0, 1, 4);
      await Promise.all(ops);
      expect(await read).toBe(1010);
      expect(await sim.semaphoreRead(0, 1, 4)).toBe(1010);
    } finally {
      await portal.close();
    }
  });

  test("notificationWait() abort sends a cancel frame and leaves no waiter in the client or the daemon", async () => {
    const { connect, sent, daemon } = rig();
    const portal = await connect("cancel");
    try {
      const spec = (await portal.devices())[0];
      expect(spec.ncCount).toBe(8);
      const ac = new AbortController();
      const waiting = portal.notificationWait(0, 2, 0, ac.signal);
      expect(portal.pendingWaits(0, 2)).toBe(1);
      await portal.memUsage(0); // a round trip: the daemon has registered the wait
      expect(daemon.sessions()[0].waits).toBe(1);
      ac.abort();
      await waiting;
      expect(portal.pendingWaits()).toBe(0);
      const wait = sent.find((f) => f.op === Op.NOTIFICATION_WAIT)!;
      const cancel = sent.find((f) => f.op === Op.CANCEL)!;
      expect(new BodyReader(cancel.body).u32()).toBe(wait.id);
      await portal.memUsage(0);
      expect(daemon.sessions()[0].waits).toBe(0);
      expect((await portal.stats()).waiters).toBe(0);
    } finally {
      await portal.close();
    }
  });
});

describe("RemotePortal() posted writes", () => {
  test("writes to a held NeuronCore and into an own allocation are posted: no answer, in order; others wait for theirs", async () => {
    const { connect, sent } = rig();
    const a = await connect("poster", 601);
    try {
      await a.acquireCores(0, [0]);
      const m = await a.memAlloc({ device: 0, nc: 0, bytes: 64 });
      sent.length = 0;
      await a.semaphoreIncrement(0, 0, 3, 2); // held: posted
      await a.memWrite(m, 0, new Uint8Array([1, 2, 3, 4])); // own allocation: posted
      await a.barWrite32(0, 0, ncBlock(CAYMAN_SPEC, 0) + CAYMAN_SPEC.csr.semaphoreSet + 4 * 5, 9); // held core's block: posted
      await a.semaphoreIncrement(0, 1, 3, 1); // not held: answered
      expect(sent.map((f) => [f.op, f.status])).toEqual([
        [Op.SEM_INCREMENT, POSTED],
        [Op.MEM_WRITE, POSTED],
        [Op.BAR_WRITE32, POSTED],
        [Op.SEM_INCREMENT, 0],
      ]);
      // The posted effects happened, in order, before the answered read that follows them.
      expect(await a.semaphoreRead(0, 0, 3)).toBe(2);
      expect(await a.semaphoreRead(0, 0, 5)).toBe(9);
      expect([...await a.memRead(m, 0, 4)]).toEqual([1, 2, 3, 4]);
      await a.memFree(m);
    } finally {
      await a.close();
    }
  });

  test("a posted write the daemon refuses is reported by the client's next call, once", async () => {
    const { connect } = rig();
    const a = await connect("poster", 602);
    try {
      await a.acquireCores(0, [0]);
      await a.semaphoreIncrement(0, 0, 1 << 20, 1); // no such semaphore: refused by the daemon, answered with an error
      const e = await statusOf(a.semaphoreRead(0, 0, 1));
      expect(e.status).toBe(NrtStatus.NRT_INVALID);
      expect(e.message).toMatch(/^An earlier posted write failed: /);
      expect(await a.semaphoreRead(0, 0, 1)).toBe(0); // reported once
    } finally {
      await a.close();
    }
  });
});

describe("DeviceDaemon() sessions and ownership", () => {
  test("acquireCores() is exclusive per process and the error names the owner with NRT_RESOURCE", async () => {
    const { connect } = rig();
    const a = await connect("server-a", 4241), b = await connect("server-b", 4242);
    try {
      await a.acquireCores(0, [0, 1]);
      await a.acquireCores(0, [0, 1]); // the same process again: no-op
      const e = await statusOf(b.acquireCores(0, [1, 2]));
      expect(e.status).toBe(NrtStatus.NRT_RESOURCE);
      expect(e.message).toBe(
        'Cannot acquire NeuronCore(s) nc1,nc2 of device 0 for process 4242 ("server-b"): nc1 is in use by process 4241 ("server-a")',
      );
      await b.acquireCores(0, [2, 3]); // all-or-none: nc2 was not taken by the failed request
      expect((await a.stats()).grants.map((g) => [g.nc, g.pid, g.name])).toEqual([
        [0, 4241, "server-a"],
        [1, 4241, "server-a"],
        [2, 4242, "server-b"],
        [3, 4242, "server-b"],
      ]);
      // Writes to another process's core are refused; its own and free cores work.
      expect((await statusOf(b.semaphoreIncrement(0, 0, 3, 1))).message).toContain(
        'in use by process 4241 ("server-a")',
      );
      expect((await statusOf(b.barWrite32(0, 0, ncBlock(CAYMAN_SPEC, 1) + 0x100, 1))).status).toBe(
        NrtStatus.NRT_RESOURCE,
      );
      await b.semaphoreIncrement(0, 2, 3, 1);
      await b.semaphoreIncrement(0, 5, 3, 1);
      await a.releaseCores(0, [1]);
      await b.acquireCores(0, [1]);
      expect((await statusOf(a.acquireCores(0, [1]))).message).toContain('in use by process 4242 ("server-b")');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a client that disconnects without closing loses its cores, memory, waits and streams", async () => {
    const { connect, links, daemon, sim } = rig();
    const a = await connect("crashing", 501);
    const b = await connect("survivor", 502);
    try {
      await a.acquireCores(0, [0]);
      const m1 = await a.memAlloc({ device: 0, nc: 0, bytes: 1 << 16 });
      await a.memAlloc({ device: 0, nc: 0, bytes: 100, location: "host" });
      await a.semaphoreSet(0, 0, 7, 99);
      const kept = await b.memAlloc({ device: 0, nc: 4, bytes: 64 });
      void a.notificationWait(0, 0, 0);
      await a.memUsage(0);
      expect((await b.memUsage(0)).allocations).toBe(3);
      expect(sim.notificationWaiters(0, 0)).toBe(1);
      links[0].close(); // the process died: its socket closed without BYE
      const e = await statusOf(a.memRead(m1, 0, 4));
      expect(e.status).toBe(NrtStatus.NRT_HW_ERROR);
      expect(e.message).toContain("device portal disconnected");
      // The daemon reclaims on the close event (the device takes its resets asynchronously).
      await daemon.reclaimed();
      expect(daemon.sessions().map((s) => s.name)).toEqual(["survivor"]);
      expect(await b.memUsage(0)).toEqual({ hbm: 64, host: 0, allocations: 1 });
      expect(sim.notificationWaiters(0, 0)).toBe(0);
      expect(await b.semaphoreRead(0, 0, 7)).toBe(0);
      await b.acquireCores(0, [0]);
      await b.memFree(kept);
    } finally {
      await b.close();
    }
  });

  test("memFree() of another session's allocation is refused as not live (NRT_INVALID)", async () => {
    const { connect } = rig();
    const a = await connect("a"), b = await connect("b");
    try {
      const m = await a.memAlloc({ device: 0, nc: 0, bytes: 64 });
      expect((await statusOf(b.memFree(m))).status).toBe(NrtStatus.NRT_INVALID);
      await a.memFree(m);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe("RemotePortal() failure model", () => {
  test("a lost connection fails pending requests with NRT_HW_ERROR, resolves pending waits, and fails later calls", async () => {
    const { connect, links } = rig();
    const portal = await connect("doomed");
    const wait = portal.notificationWait(0, 0, 0);
    const read = portal.barRead32(0, 0, 0x100);
    links[0].close();
    await wait; // resolves: the host's poll re-reads and sees the error
    expect((await statusOf(read)).status).toBe(NrtStatus.NRT_HW_ERROR);
    const later = await statusOf(portal.semaphoreRead(0, 0, 1));
    expect(later.status).toBe(NrtStatus.NRT_HW_ERROR);
    expect(later.message).toMatch(/^Cannot read a semaphore: device portal disconnected/);
    expect(portal.connected).toBe(false);
    await portal.close(); // still fine
  });

  test("a request the daemon never answers fails with NRT_TIMEOUT and drops the connection", async () => {
    // A daemon that swallows everything after HELLO (a wedged process).
    let hello = true;
    const dial: Dialer = (events: LinkEvents) => {
      const dec = new FrameDecoder();
      let open = true;
      return Promise.resolve({
        send: (b: Uint8Array) => {
          for (const f of dec.push(b)) {
            if (hello && f.op === Op.HELLO) {
              hello = false;
              const reply = new FrameBuilder(f.id, Op.HELLO | RESPONSE, 24).u32(PROTOCOL_VERSION).u32(1).f64(0x10_0000)
                .f64(0x10_0000).finish();
              queueMicrotask(() => events.data(reply));
            }
          }
        },
        close: () => {
          if (open) queueMicrotask(() => events.closed());
          open = false;
        },
      });
    };
    const portal = await RemotePortal.connect(dial, { pid: 1, name: "impatient", requestTimeoutMs: 50 });
    const t0 = performance.now();
    const e = await statusOf(portal.barRead32(0, 0, 0));
    expect(e.status).toBe(NrtStatus.NRT_TIMEOUT);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect((await statusOf(portal.devices())).status).toBe(NrtStatus.NRT_HW_ERROR);
  });
});
