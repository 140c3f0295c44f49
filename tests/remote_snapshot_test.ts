/**
 * The wake snapshot of the remote portal (protocol 3): a `notificationWait` answer carries what the host reads next
 * on that NeuronCore, and the client serves those reads without a round trip — but never returns bytes older than a
 * request it sent before the read. Counts the frames one execute sends, and checks each invalidation rule of the
 * consistency rule in `remote_portal.ts`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { cayman } from "@nrt/arch-cayman";
import { MemoryLogger, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { ncBlock } from "@nrt/core/hal";
import { NqRegister } from "@nrt/core/isa";
import { DeviceSimPortal } from "@nrt/device-sim";
import { ArchPackToken, nrtPlugins, PortalToken } from "@nrt/cli";
import { container } from "tsyringe";
import {
  decodeWakeSnapshot,
  DeviceDaemon,
  type Dialer,
  encodeWakeSnapshot,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  type LinkEvents,
  linkPair,
  Op,
  POSTED,
  PROTOCOL_VERSION,
  RemotePortal,
  RESPONSE,
} from "../packages/device-sim/remote/mod.ts";
import { oneOpNeff } from "./_kernels.ts";

const sims: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const s of sims.splice(0)) await s.close();
});

/** A simulator, its daemon, and a client whose every sent frame is recorded. */
async function rig() {
  const sim = new DeviceSimPortal();
  sims.push(sim);
  const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc) });
  const sent: Frame[] = [];
  const inner = linkPair((l) => daemon.accept(l));
  const dial: Dialer = async (events) => {
    const link = await inner(events);
    const dec = new FrameDecoder();
    return {
      send: (b) => (sent.push(...dec.push(b).map((f) => ({ ...f, body: f.body.slice() }))), link.send(b)),
      close: () => link.close(),
    };
  };
  const portal = await RemotePortal.connect(dial, { pid: 4242, name: "snapshot test" });
  return { sim, daemon, portal, sent };
}

/** Frames the client sent from index `from` on that wait for an answer (not posted writes, not cancels). */
function answered(sent: Frame[], from: number): string[] {
  const name = (op: number) => Object.entries(Op).find(([, v]) => v === op)?.[0] ?? String(op);
  return sent.slice(from).filter((f) => f.status !== POSTED && f.op !== Op.CANCEL).map((f) => name(f.op));
}

const NQ = ncBlock(CAYMAN_SPEC, 0) + CAYMAN_SPEC.csr.notificationQueue;

/** Core 0 with an 8-record NQ ring of the client's own, record `i` holding byte `i + 1`. */
async function withQueue() {
  const r = await rig();
  const { sim, portal } = r;
  await portal.acquireCores(0, [0]);
  const ring = await portal.memAlloc({ device: 0, nc: 0, bytes: 8 * 16 });
  const regs = new Uint8Array(24);
  const v = new DataView(regs.buffer);
  v.setUint32(NqRegister.BASE_LO, ring.pa >>> 0, true);
  v.setUint32(NqRegister.BASE_HI, Math.floor(ring.pa / 2 ** 32), true);
  v.setUint32(NqRegister.CAPACITY, 8, true);
  await portal.barWrite(0, 0, NQ, regs);
  await portal.memWrite(ring, 0, Uint8Array.from({ length: 8 * 16 }, (_, i) => (i >> 4) + 1));
  const nqRegs = sim.mappedRegisters(0, 0);
  /** The device publishes `n` more records: the NQ head moves and the host's wait wakes. */
  const produce = (n: number) => {
    nqRegs.publishNqHead(nqRegs.nqRegister(NqRegister.HEAD) + n);
  };
  /** Waits from `tail`, with the device producing `n` records once the wait is on the wire. */
  const wake = async (tail: number, n: number) => {
    const woken = portal.notificationWait(0, 0, tail);
    await portal.semaphoreRead(0, 0, 0); // the daemon has taken the wait
    produce(n);
    await woken;
  };
  return { ...r, ring, wake };
}

describe("wake snapshot", () => {
  test(
    "one noop execute sends no request but its notification waits: the reads after each wake are served",
    async () => {
      const { portal, sent } = await rig();
      const c = container.createChildContainer();
      c.register(ArchPackToken, { useValue: cayman });
      c.register(PortalToken, { useValue: portal });
      await portal.acquireCores(0, [0, 1]);
      const rt = await Runtime.init({
        ...nrtPlugins(c),
        ownsPortal: false,
        visibleCores: [0, 1],
        logger: new MemoryLogger(),
      });
      try {
        const f32 = (name: string) => ({ name, dtype: "float32", shape: [16] });
        const model = await rt.load(oneOpNeff("noop", "noop", [f32("a")], [f32("out")]));
        const ins = new TensorSet(), outs = new TensorSet();
        ins.add("a", await rt.allocateTensor({ size: 64, name: "a" }));
        outs.add("out", await rt.allocateTensor({ size: 64, name: "out" }));
        await model.execute(ins, outs); // the first one reads the core's layout
        for (let i = 0; i < 5; i++) {
          const from = sent.length, served = portal.servedFromSnapshot;
          await model.execute(ins, outs);
          const requests = answered(sent, from);
          expect(requests.length).toBeGreaterThanOrEqual(1);
          expect(new Set(requests)).toEqual(new Set(["NOTIFICATION_WAIT"]));
          // Per wake: the NQ head, its records, the cause, and the stdio write indices.
          expect(portal.servedFromSnapshot - served).toBeGreaterThanOrEqual(4 * requests.length);
        }
        await model.unload();
      } finally {
        await rt.close();
        await portal.close();
      }
    },
    30_000,
  );

  test("a printing kernel over the daemon: every line arrives once and in order, execute after execute", async () => {
    const { sim, portal } = await rig();
    const c = container.createChildContainer();
    c.register(ArchPackToken, { useValue: cayman });
    c.register(PortalToken, { useValue: portal });
    await portal.acquireCores(0, [0, 1]);
    const log = new MemoryLogger();
    const rt = await Runtime.init({ ...nrtPlugins(c), ownsPortal: false, visibleCores: [0, 1], logger: log });
    try {
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [64] });
      const model = await rt.load(oneOpNeff("faults", "printf", [f32("x")], [f32("y")], 1, [5]));
      const ins = new TensorSet(), outs = new TensorSet();
      ins.add("x", await rt.allocateTensor({ size: 256, name: "x" }));
      outs.add("y", await rt.allocateTensor({ size: 256, name: "y" }));
      for (let i = 1; i <= 3; i++) {
        await model.execute(ins, outs);
        const lines = log.entries.filter((e) => e.fields?.tag === 3).map((e) => e.message);
        expect(lines).toEqual(Array.from({ length: 5 * i }, (_, k) => `line ${k % 5} from core 0`));
      }
      expect(sim.stdioQueues(0, 0).stdout).toMatchObject({ writeIndex: 15, readIndex: 15, overruns: 0 });
      await model.unload();
    } finally {
      await rt.close();
      await portal.close();
    }
  }, 30_000);

  test("reads after a wake come from the snapshot, once each: the head, the cause, the records from the host's tail", async () => {
    const { portal, sent, ring, wake } = await withQueue();
    await wake(0, 3);
    const from = sent.length;
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(3);
    expect(await portal.barRead32(0, 0, NQ + NqRegister.CAUSE)).toBe(0);
    expect(await portal.memRead(ring, 16, 32)).toEqual(Uint8Array.from({ length: 32 }, (_, i) => (i >> 4) + 2));
    expect(sent.length).toBe(from);
    // A second read of the head is a fresh look at the device (teardown's halt acknowledgement is one).
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(3);
    expect(answered(sent, from)).toEqual(["BAR_READ32"]);
    await portal.close();
  });

  test("a read the snapshot does not cover goes to the daemon, and ends the snapshot", async () => {
    const { portal, sent, ring, wake } = await withQueue();
    await wake(0, 3);
    const from = sent.length;
    expect([...await portal.memRead(ring, 48, 16)]).toEqual(new Array(16).fill(4));
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(3);
    expect(answered(sent, from)).toEqual(["MEM_READ", "BAR_READ32"]);
    await portal.close();
  });

  test("a host write after the wake, then a read: the written bytes, not the snapshot's", async () => {
    const { portal, sent, ring, wake } = await withQueue();
    await wake(0, 2); // the snapshot holds records 0 and 1: bytes of 1 and 2
    await portal.memWrite(ring, 0, new Uint8Array([9, 9, 9, 9])); // posted: no answer awaited
    const from = sent.length;
    expect([...await portal.memRead(ring, 0, 4)]).toEqual([9, 9, 9, 9]);
    expect(answered(sent, from)).toEqual(["MEM_READ"]);
    // A register write with a side effect: re-pointing the ring restarts it, head 0 — not the snapshot's 3.
    await wake(2, 1);
    const regs = new Uint8Array(12);
    new DataView(regs.buffer).setUint32(NqRegister.CAPACITY, 4, true);
    await portal.barWrite(0, 0, NQ, regs);
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(0);
    await portal.close();
  });

  test("the NQ tail write leaves the snapshot valid; a doorbell, a semaphore read or the next wait drop it", async () => {
    const { portal, sent, wake } = await withQueue();
    await wake(0, 1);
    let from = sent.length;
    await portal.barWrite32(0, 0, NQ + NqRegister.TAIL, 1); // what nqRead writes between the records and the cause
    expect(await portal.barRead32(0, 0, NQ + NqRegister.CAUSE)).toBe(0);
    expect(answered(sent, from)).toEqual([]);
    for (
      const drop of [
        () => portal.semaphoreIncrement(0, 0, 5, 1),
        () => portal.semaphoreRead(0, 0, 5),
        () => portal.barWrite32(0, 0, ncBlock(CAYMAN_SPEC, 0) + CAYMAN_SPEC.csr.event, 0),
      ]
    ) {
      await portal.notificationWait(0, 0, 0); // the head is already past 0: answered at once, with a snapshot
      await drop();
      from = sent.length;
      expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(1);
      expect(answered(sent, from)).toEqual(["BAR_READ32"]);
    }
    // The next wait on the core drops it too, even before it is answered.
    await portal.notificationWait(0, 0, 0);
    const next = portal.notificationWait(0, 0, 1, AbortSignal.timeout(50));
    from = sent.length;
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(1);
    expect(answered(sent, from)).toEqual(["BAR_READ32"]);
    await next;
    await portal.close();
  });

  test("another NeuronCore's requests leave a core's snapshot valid", async () => {
    const { portal, sent, wake } = await withQueue();
    await portal.acquireCores(0, [1]);
    await wake(0, 1);
    await portal.semaphoreIncrement(0, 1, 5, 1);
    await portal.barRead32(0, 0, ncBlock(CAYMAN_SPEC, 1) + CAYMAN_SPEC.csr.notificationQueue + NqRegister.HEAD);
    const from = sent.length;
    expect(await portal.barRead32(0, 0, NQ + NqRegister.HEAD)).toBe(1);
    expect(answered(sent, from)).toEqual([]);
    await portal.close();
  });
  test("after a disconnect nothing is served: a read throws NRT_HW_ERROR instead of answering from the snapshot", async () => {
    const { portal, daemon, ring, wake } = await withQueue();
    await wake(0, 1);
    await daemon.close();
    for (const read of [() => portal.barRead32(0, 0, NQ + NqRegister.HEAD), () => portal.memRead(ring, 0, 16)]) {
      const e = await read().then(() => undefined, (x: unknown) => x);
      expect(e).toBeInstanceOf(NrtError);
      expect((e as NrtError).status).toBe(NrtStatus.NRT_HW_ERROR);
    }
    await portal.close();
  });
});

describe("wake snapshot on the wire", () => {
  test("encodeWakeSnapshot and decodeWakeSnapshot round-trip; an empty answer carries none", () => {
    const snap = {
      started: 41,
      words: [[0x500c, 7], [0x5014, 1]] as const,
      inert: [0x5010],
      ranges: [{ memory: 3, offset: 32, bytes: new Uint8Array([1, 2, 3]) }],
    };
    const frame = encodeWakeSnapshot(40, snap);
    const [f] = new FrameDecoder().push(frame);
    expect(f.op).toBe(Op.NOTIFICATION_WAIT | RESPONSE);
    const back = decodeWakeSnapshot(f.body)!;
    expect({ ...back, ranges: back.ranges.map((r) => ({ ...r, bytes: [...r.bytes] })) }).toEqual({
      started: 41,
      words: [[0x500c, 7], [0x5014, 1]],
      inert: [0x5010],
      ranges: [{ memory: 3, offset: 32, bytes: [1, 2, 3] }],
    });
    expect(decodeWakeSnapshot(new Uint8Array(0))).toBeUndefined();
    expect(() => decodeWakeSnapshot(f.body.subarray(0, f.body.byteLength - 1))).toThrow(RangeError);
  });

  test("a snapshot taken before a write the client sent after its wait is refused", async () => {
    // A daemon played by hand: it answers the wait with a snapshot that says it started only the wait, although the
    // client had sent a write to the ring after it.
    let events!: LinkEvents;
    const got: Frame[] = [];
    const dec = new FrameDecoder();
    const reply = (b: Uint8Array) => queueMicrotask(() => events.data(b));
    const dial: Dialer = (e) => {
      events = e;
      return Promise.resolve({
        send: (b: Uint8Array) => {
          for (const f of dec.push(b)) {
            got.push({ ...f, body: f.body.slice() });
            const ok = (fixed: number) => new FrameBuilder(f.id, f.op | RESPONSE, fixed);
            if (f.op === Op.HELLO) reply(ok(24).u32(PROTOCOL_VERSION).u32(1).f64(0).f64(0x400_0000).finish());
            else if (f.op === Op.MEM_ALLOC) {
              reply(ok(29).u32(7).u32(0).u32(0).f64(0x1000).f64(64).u8(0).finish());
            } else if (f.op === Op.MEM_READ) reply(ok(0).finish()); // "fresh": no bytes
            else if (f.op === Op.ACQUIRE_CORES || f.op === Op.BYE) reply(ok(0).finish());
          }
        },
        close: () => queueMicrotask(() => events.closed()),
      });
    };
    const portal = await RemotePortal.connect(dial, { pid: 1, name: "refused" });
    await portal.acquireCores(0, [0]);
    const ring = await portal.memAlloc({ device: 0, nc: 0, bytes: 64 });
    const woken = portal.notificationWait(0, 0, 0);
    const wait = got.at(-1)!;
    await portal.memWrite(ring, 0, new Uint8Array([5])); // sent after the wait
    const stale = {
      started: wait.id,
      words: [[0x500c, 1]] as const,
      inert: [],
      ranges: [{ memory: 7, offset: 0, bytes: new Uint8Array(16) }],
    };
    reply(encodeWakeSnapshot(wait.id, stale));
    await woken;
    const before = got.length;
    expect(await portal.memRead(ring, 0, 1)).toEqual(new Uint8Array(0)); // from the "daemon", not the snapshot
    expect(got.slice(before).map((f) => f.op)).toEqual([Op.MEM_READ]);
    // The same snapshot naming the write as started is kept.
    const again = portal.notificationWait(0, 0, 0);
    const second = got.at(-1)!;
    reply(encodeWakeSnapshot(second.id, { ...stale, started: second.id }));
    await again;
    const n = got.length;
    expect(await portal.memRead(ring, 0, 16)).toEqual(new Uint8Array(16));
    expect(got.length).toBe(n);
    await portal.close().catch(() => {});
  });
  test("a client of protocol 2 is refused at HELLO, naming both versions", async () => {
    const sim = new DeviceSimPortal();
    sims.push(sim);
    const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec });
    const answers: Frame[] = [];
    const dec = new FrameDecoder();
    const events = daemon.accept({ send: (b) => answers.push(...dec.push(b.slice())), close: () => {} });
    const name = new TextEncoder().encode("old client");
    events.data(new FrameBuilder(1, Op.HELLO, 8, name.byteLength).u32(2).u32(7).finish(name));
    await new Promise((r) => setTimeout(r, 0));
    expect(PROTOCOL_VERSION).toBe(3);
    expect(answers.length).toBe(1);
    expect(answers[0].status).toBe(1);
    expect(new TextDecoder().decode(answers[0].body.subarray(5))).toBe(
      "Cannot start a session: the client speaks protocol 2, this daemon speaks 3",
    );
    await daemon.close();
  });
});
