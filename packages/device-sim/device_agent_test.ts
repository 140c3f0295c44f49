import { describe, expect, test } from "bun:test";
import { encodeInstruction, NotificationKind, Opcode } from "@nrt/core/isa";
import { NcStatus, NqRegister } from "./nc_registers.ts";
import { DoorbellRing } from "./device_agent.ts";
import { TestHost } from "./_testing.ts";
import type { DeviceAgentMode } from "./device_sim_portal.ts";
import { threadPacer } from "./collection_pacer.ts";

const DOORBELL = 5;
const program = [
  { op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0x77 },
  { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
] as const;

/** The NQ head word of NeuronCore 0, read straight from the registers the host maps (as MMIO: synchronously). */
function headWord(h: TestHost): Int32Array {
  return h.portal.mappedRegisters(0, 0).nqWords;
}

describe("the device agent", () => {
  test("in its own Worker, the device runs a stream to completion while the host thread is blocked", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24, agents: "device" });
    try {
      await h.attachNq(8);
      await h.installStream([...program], DOORBELL);
      const head = headWord(h);
      const before = Atomics.load(head, NqRegister.HEAD >> 2);
      await h.portal.semaphoreIncrement(0, 0, DOORBELL, 1);
      // The host's thread never yields here: only an agent on another thread can move the head meanwhile.
      const deadline = performance.now() + 10_000;
      let seen = before;
      while (seen - before < 2 && performance.now() < deadline) seen = Atomics.load(head, NqRegister.HEAD >> 2);
      expect(seen - before).toBe(2);
      expect((await h.read()).records.map((r) => [r.kind, r.value])).toEqual([[NotificationKind.HW_ERROR, 0x77], [
        NotificationKind.EXEC_DONE,
        1,
      ]]);
    } finally {
      await h.portal.close();
    }
  }, 30_000);

  for (const agents of ["device", "core", "inline"] as const satisfies readonly DeviceAgentMode[]) {
    test(
      `(${agents}) a doorbell rung right after mapping and installing a stream, without waiting for the device, runs it from the new memory`,
      async () => {
        const h = new TestHost({ hbmBytes: 1 << 24, agents }, 1);
        try {
          await h.attachNq(8);
          // The allocation's map and the stream-table write are control messages; the doorbell carries how many were
          // sent, so the agent plays it only after both, even though the host does not wait for them here.
          const bytes = new Uint8Array(program.length * 64);
          program.forEach((ins, i) => bytes.set(encodeInstruction(ins), i * 64));
          const m = await h.put(bytes);
          const installing = h.khal.streamInstall(h.target, 1, 0, {
            pa: m.pa,
            slots: program.length,
            doorbell: DOORBELL,
            model: 9,
          });
          const ringing = h.portal.semaphoreIncrement(0, 1, DOORBELL, 1);
          await Promise.all([installing, ringing]);
          await h.portal.whenIdle(0, 1);
          expect((await h.read()).records.map((r) => [r.kind, r.model])).toEqual([[NotificationKind.HW_ERROR, 9], [
            NotificationKind.EXEC_DONE,
            9,
          ]]);
          expect(await h.portal.semaphoreRead(0, 1, DOORBELL)).toBe(0);
        } finally {
          await h.portal.close();
        }
      },
      30_000,
    );
  }

  test("an inline device's doorbell arms its thread's collection pacer on Bun, and nothing elsewhere", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24, agents: "inline" });
    const pacer = threadPacer();
    pacer.stop();
    try {
      await h.attachNq(8);
      await h.installStream([...program], DOORBELL);
      expect(pacer.active).toBe(false);
      await h.portal.semaphoreIncrement(0, 0, DOORBELL, 1);
      await h.portal.whenIdle(0);
      expect(pacer.active).toBe(typeof (globalThis as { Bun?: { gc?: unknown } }).Bun?.gc === "function");
    } finally {
      pacer.stop();
      await h.portal.close();
    }
  }, 30_000);

  for (const agents of ["device", "core", "inline"] as const satisfies readonly DeviceAgentMode[]) {
    test(
      `(${agents}) a control message sent right after a doorbell takes effect after it: an elapse drops the run just rung`,
      async () => {
        // The run hangs at its start; the host rings and, without waiting for the device, moves the device's clock past
        // the watchdog budget. The doorbell was rung first, so its run must have started when the watchdog looks.
        const h = new TestHost({ hbmBytes: 1 << 24, agents });
        try {
          await h.attachNq(8);
          await h.installStream([...program], DOORBELL);
          h.portal.faults.inject({ kind: "hang", nc: 0, atExecution: 1 });
          await h.portal.semaphoreIncrement(0, 0, DOORBELL, 1);
          await h.portal.elapse(0, 30_000);
          let timer: ReturnType<typeof setTimeout> | undefined;
          const idle = await Promise.race([
            h.portal.whenIdle(0, 0).then(() => "idle"),
            new Promise<string>((r) => (timer = setTimeout(() => r("still running"), 5_000))),
          ]);
          clearTimeout(timer);
          expect(idle).toBe("idle");
          expect(h.portal.sequencerFaults(0, 0).at(-1)?.message).toMatch(/^watchdog: run 1 of stream slot 0/);
          expect((await h.read()).records).toEqual([]); // dropped: no completion
        } finally {
          await h.portal.close();
        }
      },
      30_000,
    );
  }

  test("a host that is not asleep on the head is not notified; one that is, is woken", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    try {
      await h.attachNq(8);
      await h.installStream([...program], DOORBELL);
      const regs = h.portal.mappedRegisters(0, 0);
      expect(Atomics.load(regs.status, NcStatus.HOST_WAITERS)).toBe(0);
      const waiting = h.portal.notificationWait(0, 0, 0);
      expect(Atomics.load(regs.status, NcStatus.HOST_WAITERS)).toBe(1);
      expect(h.portal.notificationWaiters(0, 0)).toBe(1);
      await h.portal.semaphoreIncrement(0, 0, DOORBELL, 1);
      await waiting;
      expect(h.portal.notificationWaiters(0, 0)).toBe(0);
      expect(Atomics.load(regs.status, NcStatus.HOST_WAITERS)).toBe(0);
    } finally {
      await h.portal.close();
    }
  }, 30_000);

  test("the doorbell ring's header words keep their places (WRITTEN 0, HANDLED 1, STOP 2, SLEEPING 3, the watchdog's 4–16; 24 header words, 4 per entry)", () => {
    expect([DoorbellRing.WRITTEN, DoorbellRing.HANDLED, DoorbellRing.STOP, DoorbellRing.SLEEPING]).toEqual([
      0,
      1,
      2,
      3,
    ]);
    // The local-op watchdog's words (q7_watchdog.js reads them by these indices): skew as BigInt64 #2 (words 4–5),
    // deadline as Float64 #6 (words 12–13), the rest single words; none overlaps another or the entries.
    expect([
      DoorbellRing.SKEW_US_I64,
      DoorbellRing.KILL_ALL,
      DoorbellRing.WD_BELL,
      DoorbellRing.WD_SLEEPING,
      DoorbellRing.LOCAL_GEN,
      DoorbellRing.LOCAL_CLUSTER,
      DoorbellRing.LOCAL_NC,
      DoorbellRing.LOCAL_DEADLINE_F64,
      DoorbellRing.WD_POSTED,
      DoorbellRing.RESET_MASK,
      DoorbellRing.LOCAL_CAUSE,
    ]).toEqual([2, 6, 7, 8, 9, 10, 11, 6, 14, 15, 16]);
    expect([DoorbellRing.HEADER_WORDS, DoorbellRing.ENTRY_WORDS]).toEqual([24, 4]);
  });
});
