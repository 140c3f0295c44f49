/**
 * The Portal conformance suite: one set of `describe`/`test` cases that every {@linkcode Portal} backend (the
 * embedded simulator, a decorator around it, a remote or real driver) runs, so "implements Portal" means the same
 * thing everywhere. A backend that cannot honour a case declares it in `skips` as data, `{test, reason}`.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the driver ABI `ndl_*`: BAR read/write — one 32-bit CSR and bulk
 * programmed-IO — device memory alloc/free/copy, semaphore increment/read/set; "completion is POLL-driven"), §3.3 (the
 * doorbell is one semaphore increment), §3.5 (the host blocks on its completion eventfd →
 * {@linkcode Portal.notificationWait}). The register layout used by the BAR cases is the subject's
 * {@linkcode SiliconSpec}; the stream the notification case runs is the ISA of `isa.ts`.
 *
 * The cases are declared with the test API the caller passes (`describe`, `test`, `expect`).
 *
 * @example Run the suite for the simulator (in a `*_test.ts` file)
 * ```ts ignore
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * import { describe, expect, test } from "bun:test";
 * import { portalContract } from "@nrt/core/testing";
 * portalContract({ describe, test, expect }, "DeviceSimPortal", async () => {
 *   const sim = new DeviceSimPortal();
 *   return { portal: sim, spec: sim.spec, close: () => sim.close(), notificationWaiters: (d, nc) => sim.notificationWaiters(d, nc) };
 * });
 * ```
 *
 * @module
 */
import { expect, type TestApi, useTestApi } from "./test_api.ts";
import { NrtError } from "./error.ts";
import {
  decodeNotification,
  encodeInstruction,
  NOTIFICATION_BYTES,
  NotificationKind,
  Opcode,
  SLOT_BYTES,
} from "./isa.ts";
import type { DeviceMemory, Portal } from "./portal.ts";
import { ncBlock, type SiliconSpec } from "./silicon_spec.ts";
import { NrtStatus } from "./status.ts";

/** A case a backend does not run, and why. */
export interface ContractSkip {
  /** The case's name, exactly as the suite declares it. */
  readonly test: string;
  /** Why the backend cannot honour it. */
  readonly reason: string;
}

/** What a portal suite runs against: a fresh backend per case. */
export interface PortalContractSubject {
  /** The backend under test. */
  readonly portal: Portal;
  /** Releases the backend (and anything it started). */
  close(): Promise<void>;
  /** The generation the backend drives: the BAR0 layout of the register cases. Without it those cases fail. */
  readonly spec?: SiliconSpec;
  /** Pending `notificationWait` callers of a NeuronCore, where the backend can count them (the leak check). */
  notificationWaiters?(device: number, nc: number): number;
}

/** The names of the cases {@linkcode portalContract} declares, in order. */
export const PORTAL_CONTRACT_CASES: readonly string[] = Object.freeze([
  "devices() enumerates devices with their arch, NeuronCores and HBM",
  "barWrite32() and barRead32() round-trip a CSR in every NeuronCore block",
  "barWrite() writes consecutive 32-bit words that barRead32() reads back",
  "the BAR0 semaphore windows and the semaphore operations see one value",
  "semaphoreIncrement(), semaphoreRead() and semaphoreSet() act on one semaphore of one NeuronCore",
  "memAlloc() returns aligned, disjoint HBM and host allocations of the requested size",
  "memWrite() and memRead() round-trip bytes at an offset",
  "memWrite() and memRead() outside the allocation reject",
  "memFree() of a freed allocation throws NrtError NRT_INVALID",
  "memAlloc() beyond the device's HBM throws NrtError NRT_RESOURCE",
  "memUsage() counts HBM and host allocations and returns to zero after every free",
  "notificationWait() resolves at once when the head already differs",
  "notificationWait() resolves when the device pushes a record after a doorbell",
  "notificationWait() resolves on abort and leaves no waiter behind",
  "acquireCores() and releaseCores() come as a pair and let the same process take its cores again",
  "memReadInto() fills the caller's buffer from an offset and refuses a range outside without writing it",
]);

function requireSpec(s: PortalContractSubject): SiliconSpec {
  if (s.spec === undefined) {
    throw new TypeError("This case needs the subject's SiliconSpec (the BAR0 layout); pass `spec` or skip it");
  }
  return s.spec;
}

async function rejectsWith(p: Promise<unknown>, status: NrtStatus): Promise<void> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(NrtError);
  expect((e as NrtError).status).toBe(status);
}

async function rejects(p: Promise<unknown>): Promise<void> {
  const settled = await p.then(() => "resolved", () => "rejected");
  expect(settled).toBe("rejected");
}

/** Attaches a 16-record NQ ring and a one-slot stream `[ins]` on NeuronCore 0 with doorbell `doorbell`. */
async function stageNotifyStream(
  portal: Portal,
  spec: SiliconSpec,
  doorbell: number,
): Promise<{ ring: DeviceMemory; stream: DeviceMemory; release(): Promise<void> }> {
  const base = ncBlock(spec, 0);
  const capacity = 16;
  const ring = await portal.memAlloc({ device: 0, nc: 0, bytes: capacity * NOTIFICATION_BYTES, location: "host" });
  const nq = new Uint8Array(24);
  const v = new DataView(nq.buffer);
  v.setUint32(0, ring.pa >>> 0, true);
  v.setUint32(4, Math.floor(ring.pa / 0x1_0000_0000), true);
  v.setUint32(8, capacity, true);
  await portal.barWrite(0, 0, base + spec.csr.notificationQueue, nq);
  const stream = await portal.memAlloc({ device: 0, nc: 0, bytes: SLOT_BYTES });
  await portal.memWrite(
    stream,
    0,
    encodeInstruction({ op: Opcode.NOTIFY, kind: NotificationKind.EVENT_SEMAPHORE, value: 0x5eed }),
  );
  // The stream-table entry: u32 pa lo, u32 pa hi, u32 slots, u32 (valid << 31 | model << 16 | doorbell).
  const e = new Uint8Array(16);
  const w = new DataView(e.buffer);
  w.setUint32(0, stream.pa >>> 0, true);
  w.setUint32(4, Math.floor(stream.pa / 0x1_0000_0000), true);
  w.setUint32(8, 1, true);
  w.setUint32(12, (0x8000_0000 | (1 << 16) | doorbell) >>> 0, true);
  await portal.barWrite(0, 0, base + spec.csr.streamTable, e);
  return {
    ring,
    stream,
    async release() {
      await portal.barWrite(0, 0, base + spec.csr.streamTable, new Uint8Array(16));
      await portal.barWrite(0, 0, base + spec.csr.notificationQueue, new Uint8Array(24));
      await portal.memFree(stream);
      await portal.memFree(ring);
    },
  };
}

type Body = (s: PortalContractSubject) => Promise<void>;

const BODIES: Readonly<Record<string, Body>> = {
  [PORTAL_CONTRACT_CASES[0]]: async (s) => {
    const devices = await s.portal.devices();
    expect(devices.length).toBeGreaterThan(0);
    devices.forEach((d, i) => {
      expect(d.index).toBe(i);
      expect(Number.isInteger(d.arch)).toBe(true);
      expect(Number.isInteger(d.ncCount) && d.ncCount > 0).toBe(true);
      expect(d.hbmBytes).toBeGreaterThan(0);
    });
    if (s.spec !== undefined) {
      expect(devices[0].arch).toBe(s.spec.arch);
      expect(devices[0].ncCount).toBe(s.spec.ncPerDevice);
    }
  },
  [PORTAL_CONTRACT_CASES[1]]: async (s) => {
    const spec = requireSpec(s);
    const { ncCount } = (await s.portal.devices())[0];
    const at = (nc: number) => ncBlock(spec, nc) + spec.csr.event + 4 * 7;
    for (let nc = 0; nc < ncCount; nc++) await s.portal.barWrite32(0, 0, at(nc), (0x1234_0000 + nc) >>> 0);
    for (let nc = 0; nc < ncCount; nc++) expect(await s.portal.barRead32(0, 0, at(nc))).toBe(0x1234_0000 + nc);
    await s.portal.barWrite32(0, 0, at(0), 0xffff_ffff);
    expect(await s.portal.barRead32(0, 0, at(0))).toBe(0xffff_ffff);
  },
  [PORTAL_CONTRACT_CASES[2]]: async (s) => {
    const spec = requireSpec(s);
    const words = new Uint8Array(12);
    const v = new DataView(words.buffer);
    [0xa1, 0xb2c3, 0xd4e5f607].forEach((x, i) => v.setUint32(4 * i, x, true));
    const events = ncBlock(spec, 0) + spec.csr.event + 4 * 10;
    await s.portal.barWrite(0, 0, events, words);
    expect([
      await s.portal.barRead32(0, 0, events),
      await s.portal.barRead32(0, 0, events + 4),
      await s.portal.barRead32(0, 0, events + 8),
    ])
      .toEqual([0xa1, 0xb2c3, 0xd4e5f607]);
    const io = ncBlock(spec, 0) + spec.csr.swapFileIoTable;
    const u64 = new Uint8Array(8);
    new DataView(u64.buffer).setUint32(0, 0x89ab_cdef, true);
    new DataView(u64.buffer).setUint32(4, 0x0123, true);
    await s.portal.barWrite(0, 0, io, u64);
    expect([await s.portal.barRead32(0, 0, io), await s.portal.barRead32(0, 0, io + 4)]).toEqual([0x89ab_cdef, 0x0123]);
  },
  [PORTAL_CONTRACT_CASES[3]]: async (s) => {
    const spec = requireSpec(s);
    const sem = 5;
    const at = (window: number) => ncBlock(spec, 0) + window + 4 * sem;
    await s.portal.semaphoreSet(0, 0, sem, 41);
    expect(await s.portal.barRead32(0, 0, at(spec.csr.semaphoreRead))).toBe(41);
    await s.portal.barWrite32(0, 0, at(spec.csr.semaphoreSet), 7);
    expect(await s.portal.semaphoreRead(0, 0, sem)).toBe(7);
    await s.portal.barWrite32(0, 0, at(spec.csr.semaphoreIncrement), 3);
    expect(await s.portal.semaphoreRead(0, 0, sem)).toBe(10);
    await s.portal.barWrite32(0, 0, at(spec.csr.semaphoreDecrement), 4);
    expect(await s.portal.barRead32(0, 0, at(spec.csr.semaphoreRead))).toBe(6);
  },
  [PORTAL_CONTRACT_CASES[4]]: async (s) => {
    const { ncCount } = (await s.portal.devices())[0];
    await s.portal.semaphoreSet(0, 0, 9, 0);
    await s.portal.semaphoreIncrement(0, 0, 9, 3);
    await s.portal.semaphoreIncrement(0, 0, 9, 4);
    expect(await s.portal.semaphoreRead(0, 0, 9)).toBe(7);
    expect(await s.portal.semaphoreRead(0, 0, 8)).toBe(0);
    if (ncCount > 1) expect(await s.portal.semaphoreRead(0, 1, 9)).toBe(0);
    await s.portal.semaphoreSet(0, 0, 9, 2);
    expect(await s.portal.semaphoreRead(0, 0, 9)).toBe(2);
    await rejects(s.portal.semaphoreRead(0, 0, 1 << 20));
    await rejects(s.portal.semaphoreIncrement(0, ncCount, 9, 1));
  },
  [PORTAL_CONTRACT_CASES[5]]: async (s) => {
    const a = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 1000, align: 4096 });
    const b = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 3000, align: 4096 });
    const h = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 100, location: "host" });
    try {
      expect(new Set([a.id, b.id, h.id]).size).toBe(3);
      expect([a.location, b.location, h.location]).toEqual(["hbm", "hbm", "host"]);
      expect([a.bytes, b.bytes, h.bytes]).toEqual([1000, 3000, 100]);
      expect(a.pa % 4096).toBe(0);
      expect(b.pa % 4096).toBe(0);
      expect(a.pa + a.bytes <= b.pa || b.pa + b.bytes <= a.pa).toBe(true);
      expect(h.pa + h.bytes <= a.pa || a.pa + a.bytes <= h.pa).toBe(true);
    } finally {
      for (const m of [a, b, h]) await s.portal.memFree(m);
    }
  },
  [PORTAL_CONTRACT_CASES[6]]: async (s) => {
    for (const location of ["hbm", "host"] as const) {
      const m = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 256, location });
      const data = Uint8Array.from({ length: 64 }, (_, i) => (i * 7 + 1) & 0xff);
      await s.portal.memWrite(m, 100, data);
      expect(Array.from(await s.portal.memRead(m, 100, 64))).toEqual(Array.from(data));
      expect(Array.from(await s.portal.memRead(m, 110, 4))).toEqual(Array.from(data.subarray(10, 14)));
      await s.portal.memFree(m);
    }
  },
  [PORTAL_CONTRACT_CASES[7]]: async (s) => {
    const m = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 64 });
    try {
      await rejects(s.portal.memWrite(m, 62, new Uint8Array(4)));
      await rejects(s.portal.memWrite(m, -1, new Uint8Array(1)));
      await rejects(s.portal.memRead(m, 0, 65));
      await rejects(s.portal.memRead(m, 64, 1));
      // The allocation is intact after the refusals.
      await s.portal.memWrite(m, 60, new Uint8Array([1, 2, 3, 4]));
      expect(Array.from(await s.portal.memRead(m, 60, 4))).toEqual([1, 2, 3, 4]);
    } finally {
      await s.portal.memFree(m);
    }
  },
  [PORTAL_CONTRACT_CASES[8]]: async (s) => {
    const m = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 128 });
    await s.portal.memFree(m);
    await rejectsWith(s.portal.memFree(m), NrtStatus.NRT_INVALID);
    expect((await s.portal.memUsage(0)).allocations).toBe(0);
  },
  [PORTAL_CONTRACT_CASES[9]]: async (s) => {
    const { hbmBytes } = (await s.portal.devices())[0];
    await rejectsWith(s.portal.memAlloc({ device: 0, nc: 0, bytes: hbmBytes + 4096 }), NrtStatus.NRT_RESOURCE);
    expect((await s.portal.memUsage(0)).allocations).toBe(0);
  },
  [PORTAL_CONTRACT_CASES[10]]: async (s) => {
    expect(await s.portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
    const a = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 1000 });
    const h = await s.portal.memAlloc({ device: 0, nc: 0, bytes: 500, location: "host" });
    const u = await s.portal.memUsage(0);
    expect(u.allocations).toBe(2);
    expect(u.hbm).toBeGreaterThanOrEqual(1000);
    expect(u.host).toBeGreaterThanOrEqual(500);
    await s.portal.memFree(a);
    expect((await s.portal.memUsage(0)).hbm).toBe(0);
    await s.portal.memFree(h);
    expect(await s.portal.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  },
  [PORTAL_CONTRACT_CASES[11]]: async (s) => {
    let resolved = false;
    await s.portal.notificationWait(0, 0, 12345).then(() => (resolved = true));
    expect(resolved).toBe(true);
  },
  [PORTAL_CONTRACT_CASES[12]]: async (s) => {
    const spec = requireSpec(s);
    const doorbell = 3;
    const staged = await stageNotifyStream(s.portal, spec, doorbell);
    try {
      const headAt = ncBlock(spec, 0) + spec.csr.notificationQueue + 12;
      expect(await s.portal.barRead32(0, 0, headAt)).toBe(0);
      const woke = s.portal.notificationWait(0, 0, 0);
      await s.portal.semaphoreIncrement(0, 0, doorbell, 1);
      await woke;
      expect(await s.portal.barRead32(0, 0, headAt)).toBe(1);
      const rec = decodeNotification(await s.portal.memRead(staged.ring, 0, NOTIFICATION_BYTES));
      expect(rec.kind).toBe(NotificationKind.EVENT_SEMAPHORE);
      expect(rec.value).toBe(0x5eed);
      expect(rec.model).toBe(1);
      // The doorbell count was consumed by the run.
      expect(await s.portal.semaphoreRead(0, 0, doorbell)).toBe(0);
    } finally {
      await staged.release();
    }
    expect((await s.portal.memUsage(0)).allocations).toBe(0);
  },
  [PORTAL_CONTRACT_CASES[13]]: async (s) => {
    const spec = requireSpec(s);
    const head = await s.portal.barRead32(0, 0, ncBlock(spec, 0) + spec.csr.notificationQueue + 12);
    const ac = new AbortController();
    let resolved = false;
    const waiting = s.portal.notificationWait(0, 0, head, ac.signal).then(() => (resolved = true));
    if (s.notificationWaiters) expect(s.notificationWaiters(0, 0)).toBe(1);
    expect(resolved).toBe(false);
    ac.abort();
    await waiting;
    expect(resolved).toBe(true);
    if (s.notificationWaiters) expect(s.notificationWaiters(0, 0)).toBe(0);
    // An already-aborted signal resolves without registering a waiter.
    await s.portal.notificationWait(0, 0, head, AbortSignal.abort());
    if (s.notificationWaiters) expect(s.notificationWaiters(0, 0)).toBe(0);
  },
  [PORTAL_CONTRACT_CASES[14]]: async (s) => {
    const p = s.portal;
    // Both optional (a single-process backend has nothing to arbitrate), but never one without the other.
    expect(typeof p.acquireCores).toBe(typeof p.releaseCores);
    if (p.acquireCores === undefined || p.releaseCores === undefined) return;
    const { ncCount } = (await p.devices())[0];
    const cores = [...Array(ncCount).keys()];
    await p.acquireCores(0, cores);
    await p.releaseCores(0, cores);
    await p.acquireCores(0, [0]);
    await p.releaseCores(0, [0]);
    expect((await p.memUsage(0)).allocations).toBe(0);
  },
  [PORTAL_CONTRACT_CASES[15]]: async (s) => {
    const p = s.portal;
    // Optional (the runtime falls back on memRead); a backend that has it honours the same bounds as memRead.
    if (p.memReadInto === undefined) return;
    for (const location of ["hbm", "host"] as const) {
      const m = await p.memAlloc({ device: 0, nc: 0, bytes: 256, location });
      try {
        const data = Uint8Array.from({ length: 64 }, (_, i) => (i * 5 + 3) & 0xff);
        await p.memWrite(m, 100, data);
        const into = new Uint8Array(80).fill(0xee);
        await p.memReadInto(m, 110, into.subarray(8, 40));
        expect(Array.from(into.subarray(8, 40))).toEqual(Array.from(data.subarray(10, 42)));
        expect(into[7]).toBe(0xee);
        expect(into[40]).toBe(0xee);
        const untouched = new Uint8Array(8).fill(0x5a);
        await rejectsWith(p.memReadInto(m, 250, untouched), NrtStatus.NRT_INVALID);
        await rejectsWith(p.memReadInto(m, -1, untouched), NrtStatus.NRT_INVALID);
        expect(Array.from(untouched)).toEqual(new Array(8).fill(0x5a));
      } finally {
        await p.memFree(m);
      }
    }
  },
};

/**
 * Declares the Portal conformance cases for one backend.
 *
 * @param name The backend's name, shown in the `describe` title.
 * @param make Creates a fresh subject for each case; the suite closes it when the case ends.
 * @param skips Cases this backend does not run, each with its reason (names from {@linkcode PORTAL_CONTRACT_CASES}).
 * @throws {TypeError} When a skip names a case the suite does not declare (a typo would silently run it).
 */
export function portalContract(
  api: TestApi,
  name: string,
  make: () => Promise<PortalContractSubject>,
  skips: readonly ContractSkip[] = [],
): void {
  for (const s of skips) {
    if (!PORTAL_CONTRACT_CASES.includes(s.test)) {
      throw new TypeError(`portalContract(${name}): skip names no case: "${s.test}"`);
    }
  }
  const { describe, test } = useTestApi(api);
  describe(`portalContract(${name})`, () => {
    for (const c of PORTAL_CONTRACT_CASES) {
      const skip = skips.find((s) => s.test === c);
      if (skip !== undefined) {
        test.skip(`${c} (skipped: ${skip.reason})`, () => {});
        continue;
      }
      test(c, async () => {
        const subject = await make();
        try {
          await BODIES[c](subject);
        } finally {
          await subject.close();
        }
      }, 30_000);
    }
  });
}
