import { describe, expect, test } from "bun:test";
import { DmaMemUsageType, DmemLedger } from "../dmem/dmem.ts";
import { NrtError } from "../error.ts";
import { type Instruction, NotificationKind, Opcode } from "../isa.ts";
import type { HalTarget, Khal, NotificationQueue } from "../khal.ts";
import { MemoryLogger } from "../log.ts";
import { NullPortal } from "../null_portal.ts";
import type { SiliconSpec } from "../silicon_spec.ts";
import { NrtStatus } from "../status.ts";
import { CoreQueue } from "./core_queue.ts";
import {
  NQ_HEADROOM,
  NQ_MAX_CAPACITY,
  nqCapacityFor,
  nqRelease,
  nqReserve,
  type NqServices,
  runRecords,
} from "./nq_ring.ts";
import { NQ_CAPACITY, type Tpb } from "./tpb.ts";

describe("nqCapacityFor", () => {
  test("the bring-up ring while a run's records fit it with the headroom to spare, else the next power of two", () => {
    expect(NQ_CAPACITY).toBe(1024);
    expect(NQ_HEADROOM).toBe(512);
    expect(nqCapacityFor(0)).toBe(1024);
    expect(nqCapacityFor(2)).toBe(1024);
    expect(nqCapacityFor(512)).toBe(1024);
    expect(nqCapacityFor(513)).toBe(2048);
    expect(nqCapacityFor(40_001)).toBe(65_536); // the 40,000-call chain
    expect(nqCapacityFor(99_001)).toBe(131_072);
    expect(nqCapacityFor(NQ_MAX_CAPACITY - NQ_HEADROOM)).toBe(NQ_MAX_CAPACITY);
  });

  test("refuses what is not a count and what needs a ring over the largest", () => {
    for (const bad of [-1, 1.5, Number.NaN, Infinity]) expect(() => nqCapacityFor(bad)).toThrow(RangeError);
    expect(() => nqCapacityFor(NQ_MAX_CAPACITY)).toThrow(/need a ring over 67108864 records/);
  });
});

describe("runRecords", () => {
  test("one record per NOTIFY and per EVENT_SEMAPHORE of the stream", () => {
    const call: Instruction[] = [
      { op: Opcode.EXTENDED_INST, opcode: 1, call: 0 },
      { op: Opcode.DRAIN_ARM },
      { op: Opcode.DRAIN },
      { op: Opcode.EVENT_SEMAPHORE, updateMode: 0x13, semaphore: 2, value: 1 },
    ];
    const program: Instruction[] = [
      { op: Opcode.MODEL_SWITCH, model: 1, opcodeTable: 0 },
      ...call,
      ...call,
      ...call,
      { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
    ];
    expect(runRecords(program)).toBe(4);
    expect(runRecords([])).toBe(0);
  });
});

/** A core with a bring-up ring on a null portal, and a HAL that only records the rings it registers. */
async function core(nqInit?: (q: NotificationQueue) => Promise<void>) {
  const portal = new NullPortal({ arch: 3, ncPerDevice: 2 } as SiliconSpec);
  const ledger = new DmemLedger(portal, new MemoryLogger(), 1 << 30);
  const registered: number[] = [];
  const events: string[] = [];
  const khal = {
    nqInit: async (_t: HalTarget, _nc: number, q: NotificationQueue) => {
      await nqInit?.(q);
      registered.push(q.capacity);
    },
  } as unknown as Khal;
  const log = new MemoryLogger();
  const s: NqServices = { khal, target: { portal, device: 0 }, ledger, event: (e) => events.push(e), log };
  const dmem = await ledger.alloc(0, 1, NQ_CAPACITY * 16, DmaMemUsageType.NOTIFICATIONS, "host");
  const tpb: Tpb = {
    device: 0,
    nc: 1,
    nx: [],
    q7: [],
    nq: { ring: dmem.memory, dmem, capacity: NQ_CAPACITY, tail: 7 },
    extIsaLibs: new Map(),
    streamSlots: new Set(),
    semaphores: new Set([0]),
    modelIds: new Set([0]),
    nqRecords: new Map(),
    queue: new CoreQueue(),
    stagingInFlight: new Map(),
    runningModel: -1,
    halted: false,
  };
  const ringBytes = () => ledger.usageAt(0, 1, "host")[DmaMemUsageType.NOTIFICATIONS];
  return { s, tpb, registered, events, ringBytes, log };
}

/** Lets pending promise chains run: one macrotask (never a time). */
const tick = () => new Promise<void>((r) => setTimeout(r, 0));

describe("nqReserve / nqRelease", () => {
  test("a model that fits takes no turn and leaves the ring as it is", async () => {
    const c = await core();
    using _held = c.tpb.queue.acquire(); // an execution in flight: a fitting load does not wait for it
    await nqReserve(c.s, c.tpb, 5, 512, "small");
    expect(c.registered).toEqual([]);
    expect(c.events).toEqual([]);
    expect(c.tpb.nq!.tail).toBe(7);
    await nqRelease(c.s, c.tpb, 5);
    expect(c.tpb.nqRecords.size).toBe(0);
  });

  test("a growth waits for the core's turn, re-points the ring at head 0 and frees the old one; the release shrinks it", async () => {
    const c = await core();
    const held = c.tpb.queue.acquire();
    let grown = false;
    const reserving = nqReserve(c.s, c.tpb, 5, 1600, "long").then(() => (grown = true));
    for (let i = 0; i < 5; i++) await tick();
    expect(grown).toBe(false);
    expect(c.registered).toEqual([]);
    held[Symbol.dispose]();
    await reserving;
    expect(c.registered).toEqual([4096]);
    expect(c.events).toEqual(["notification_resize nc=1 capacity=4096"]);
    expect(c.tpb.nq!.capacity).toBe(4096);
    expect(c.tpb.nq!.tail).toBe(0);
    expect(c.ringBytes()).toBe(4096 * 16);
    // A second model that fits the grown ring changes nothing; the largest one left sizes the ring.
    await nqReserve(c.s, c.tpb, 6, 900, "mid");
    expect(c.registered).toEqual([4096]);
    await nqRelease(c.s, c.tpb, 5);
    expect(c.registered).toEqual([4096, 2048]);
    await nqRelease(c.s, c.tpb, 6);
    await nqRelease(c.s, c.tpb, 6); // withdrawn already: nothing
    expect(c.registered).toEqual([4096, 2048, 1024]);
    expect(c.ringBytes()).toBe(1024 * 16);
  });

  test("a ring that cannot be registered fails the load with NRT_RESOURCE and keeps the old ring and bytes", async () => {
    const c = await core(() => Promise.reject(new Error("BAR write failed")));
    const old = c.tpb.nq;
    const e = await nqReserve(c.s, c.tpb, 5, 5000, "long").then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(NrtStatus.NRT_RESOURCE);
    expect((e as NrtError).message).toBe(
      'Cannot load NEFF "long": its 5000 notification records per execution need a notification queue of 8192 ' +
        "records on NeuronCore 1: BAR write failed",
    );
    expect(c.tpb.nq).toBe(old);
    expect(c.tpb.nqRecords.size).toBe(0);
    expect(c.ringBytes()).toBe(1024 * 16);
    expect(c.events).toEqual([]);
  });

  test("a count past the largest ring is refused before anything is registered", async () => {
    const c = await core();
    const e = await nqReserve(c.s, c.tpb, 5, NQ_MAX_CAPACITY, "huge").then(() => undefined, (x: unknown) => x);
    expect((e as NrtError).status).toBe(NrtStatus.NRT_RESOURCE);
    expect((e as NrtError).message).toMatch(/^Cannot load NEFF "huge": 67108864 notification records per run/);
    expect(c.tpb.nqRecords.size).toBe(0);
  });

  test("a core halted for teardown, or whose ring is gone, is not resized", async () => {
    const c = await core();
    c.tpb.halted = true;
    await nqReserve(c.s, c.tpb, 5, 1600, "long");
    expect(c.registered).toEqual([]);
    c.tpb.halted = false;
    c.tpb.nq = undefined;
    await nqRelease(c.s, c.tpb, 5);
    expect(c.registered).toEqual([]);
  });
});
