import { describe, expect, test } from "bun:test";
import { TpbEngType } from "@nrt/core/hal";
import { NotificationKind, Opcode, TpbErrorId } from "@nrt/core/isa";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { FAULT_IP_MARKER, TpbFaultMask } from "./sequencer.ts";
import { TestHost } from "./_testing.ts";

const DOORBELL = 3, DONE_SEM = 40;

const program = [
  { op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0x1234 },
  { op: Opcode.EVENT_SEMAPHORE, updateMode: 0x13, semaphore: DONE_SEM, value: 0 },
  { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
] as const;

describe("Sequencer", () => {
  test("Sequencer runs a doorbelled stream into the NQ ring and consumes the doorbell count", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    await h.installStream([...program], DOORBELL);
    await h.fire(DOORBELL);
    const { records, overflow } = await h.read();
    expect(overflow).toBe(false);
    expect(records.map((r) => [r.kind, r.value])).toEqual([
      [NotificationKind.HW_ERROR, 0x1234],
      [NotificationKind.EVENT_SEMAPHORE, 1],
      [NotificationKind.EXEC_DONE, 1],
    ]);
    expect(records[2].model).toBe(7);
    expect(await h.portal.semaphoreRead(0, 0, DOORBELL)).toBe(0);
    expect(await h.portal.semaphoreRead(0, 0, DONE_SEM)).toBe(1);
    await h.fire(DOORBELL);
    const second = await h.read();
    expect(second.records.map((r) => r.value)).toEqual([0x1234, 2, 2]);
    expect(await h.khal.nqHead(h.target, 0)).toBe(6);
    await h.portal.close();
  });

  test("a doorbell plays the stream its slot holds now: another stream written into the slot, and none once removed", async () => {
    for (const agents of ["inline", "device"] as const) {
      const h = new TestHost({ hbmBytes: 1 << 24, agents });
      try {
        await h.attachNq(16);
        await h.installStream([...program], DOORBELL);
        await h.fire(DOORBELL);
        expect((await h.read()).records.map((r) => r.value)).toEqual([0x1234, 1, 1]);
        // The same slot and doorbell, another stream (a model unloaded and another loaded in its place).
        await h.installStream([{ op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0x5678 }], DOORBELL);
        await h.fire(DOORBELL);
        expect((await h.read()).records.map((r) => r.value)).toEqual([0x5678]);
        // Removed: the doorbell releases no run (its count stays on the semaphore).
        await h.khal.streamRemove(h.target, 0, 0);
        await h.fire(DOORBELL);
        expect((await h.read()).records).toEqual([]);
        expect(await h.portal.semaphoreRead(0, 0, DOORBELL)).toBe(1);
      } finally {
        await h.portal.close();
      }
    }
  });

  test("a doorbell two streams share plays the lower slot's, whichever was installed last", async () => {
    // The install looks the doorbell up as the first doorbell would: the lowest slot with it wins (ours).
    const h = new TestHost({ hbmBytes: 1 << 24 });
    try {
      await h.attachNq(16);
      await h.installStream([{ op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0x1111 }], DOORBELL, 0, 7);
      await h.installStream([{ op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0x2222 }], DOORBELL, 1, 9);
      await h.fire(DOORBELL);
      expect((await h.read()).records.map((r) => [r.value, r.model])).toEqual([[0x1111, 7]]);
      // The lower slot removed, the doorbell finds the other stream.
      await h.khal.streamRemove(h.target, 0, 0);
      await h.fire(DOORBELL);
      expect((await h.read()).records.map((r) => [r.value, r.model])).toEqual([[0x2222, 9]]);
    } finally {
      await h.portal.close();
    }
  });

  test("Sequencer wakes a notificationWait caller when the head moves", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    await h.installStream([...program], DOORBELL);
    const woke = h.portal.notificationWait(0, 0, 0);
    expect(h.portal.notificationWaiters(0, 0)).toBe(1);
    await h.portal.semaphoreIncrement(0, 0, DOORBELL, 1);
    await woke;
    expect(await h.khal.nqHead(h.target, 0)).toBeGreaterThan(0);
    expect(h.portal.notificationWaiters(0, 0)).toBe(0);
    await h.portal.whenIdle();
    await h.portal.close();
  });

  test("Sequencer notificationWait resolves on abort and leaves no waiter behind", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    const ac = new AbortController();
    const w = h.portal.notificationWait(0, 0, 0, ac.signal);
    ac.abort();
    await w;
    expect(h.portal.notificationWaiters(0, 0)).toBe(0);
    await h.portal.notificationWait(0, 0, 5); // head differs: immediate
    await h.portal.close();
  });

  test("Sequencer serialises two doorbells FIFO", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(16);
    await h.installStream([{ op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 }], 1, 0, 1);
    await h.installStream([{ op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 }], 2, 1, 2);
    await h.portal.semaphoreIncrement(0, 0, 1, 1);
    await h.portal.semaphoreIncrement(0, 0, 2, 1);
    await h.portal.semaphoreIncrement(0, 0, 1, 1);
    await h.portal.whenIdle();
    const { records } = await h.read();
    expect(records.map((r) => [r.model, r.value])).toEqual([[1, 1], [2, 1], [1, 2]]);
    await h.portal.close();
  });

  test("Sequencer halts on an undecodable slot with a fatal POOL TPB_ERROR and no completion", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    const m = await h.installStream([...program], DOORBELL);
    await h.portal.memWrite(m, 64, new Uint8Array([0x33, 0x10])); // slot 1: opcode 0x33
    await h.fire(DOORBELL);
    const { records } = await h.read();
    expect(records).toHaveLength(2);
    expect(records[1]).toMatchObject({
      kind: NotificationKind.TPB_ERROR,
      code: TpbErrorId.FATAL,
      engine: TpbEngType.POOL,
      mask: TpbFaultMask.BAD_INSTRUCTION,
      value: 1,
    });
    expect(h.khal.errorSubtype(BigInt(records[1].code) | (BigInt(records[1].mask) << 8n))).toBe(
      TpbFaultMask.BAD_INSTRUCTION,
    );
    expect((await h.khal.readEngineIps(h.target, 0))[TpbEngType.POOL]).toBe((FAULT_IP_MARKER | 1) >>> 0);
    await h.portal.close();
  });

  test("Sequencer refuses an EVENT_SEMAPHORE whose update mode is not 0x13", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    await h.installStream([{ op: Opcode.EVENT_SEMAPHORE, updateMode: 0x12, semaphore: 1, value: 0 }], DOORBELL);
    await h.fire(DOORBELL);
    const { records } = await h.read();
    expect(records.map((r) => r.mask)).toEqual([TpbFaultMask.EVENT]);
    await h.portal.close();
  });

  test("Sequencer sets the sticky overflow cause when the device laps the host; nqRead acknowledges it", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(2);
    await h.installStream([...program], DOORBELL);
    await h.fire(DOORBELL);
    const cause = CAYMAN_SPEC.csr.notificationQueue + 20;
    expect(await h.portal.barRead32(0, 0, cause)).toBe(1);
    const { records, overflow } = await h.read();
    expect(overflow).toBe(true);
    expect(records.map((r) => r.kind)).toEqual([NotificationKind.EVENT_SEMAPHORE, NotificationKind.EXEC_DONE]);
    // The HAL's nqRead acknowledges the cause (writes 0) once it has reported it.
    expect(await h.portal.barRead32(0, 0, cause)).toBe(0);
    await h.portal.close();
  });
});
