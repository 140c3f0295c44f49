/**
 * The device side of one NeuronCore's notification queue: 16-byte records written into the host DRAM ring the host
 * registered in the NQ register block, the device-owned head, the sticky overflow cause, and the waiters of
 * `Portal.notificationWait` (the host's completion eventfd).
 *
 * Seed: runtime-synthesis §3.5 ("the device pushes a 16-byte NEURON_ISA notification record into the ENS
 * Notification-Queue ring"; completion is poll-driven, the caller blocks on `comp_efd`), lifecycle-error-model §5.3
 * (NQ overflow → `NRT_EXEC_SW_NQ_OVERFLOW`).
 *
 * @module
 */
import { encodeNotification, NOTIFICATION_BYTES, type NotificationRecord } from "@nrt/core";
import { NQ_CAUSE_OVERFLOW, type NcRegisters, NqRegister } from "./bar0.ts";
import type { DeviceMemoryMap } from "./memory.ts";

interface Waiter {
  readonly head: number;
  readonly resolve: () => void;
}

/** What happened to one pushed record. */
export type NotificationOutcome = "written" | "overflowed" | "no-queue";

/** The producer side of one NeuronCore's NQ. */
export class NotificationProducer {
  readonly #regs: NcRegisters;
  readonly #memory: DeviceMemoryMap;
  readonly #waiters = new Set<Waiter>();
  /** Every record pushed, in order (observability; the ring is the host's copy). */
  readonly log: NotificationRecord[] = [];

  /** Creates the producer over a NeuronCore's registers and the device memory holding the ring. */
  constructor(regs: NcRegisters, memory: DeviceMemoryMap) {
    this.#regs = regs;
    this.#memory = memory;
  }

  /** The device head: records produced since the ring was (re)pointed. */
  get head(): number {
    return this.#regs.nqRegister(NqRegister.HEAD);
  }

  /** Number of pending `notificationWait` callers (leak checks). */
  get waiters(): number {
    return this.#waiters.size;
  }

  /**
   * Writes `record` at `(head % capacity) * 16` of the registered ring and advances the head. A full ring is still
   * written (the oldest record is lost) and the cause register's overflow bit is set.
   */
  push(record: NotificationRecord): NotificationOutcome {
    this.log.push(record);
    const r = this.#regs;
    const capacity = r.nqRegister(NqRegister.CAPACITY);
    const base = r.nqRegister(NqRegister.BASE_LO) + r.nqRegister(NqRegister.BASE_HI) * 0x1_0000_0000;
    if (capacity === 0) return "no-queue";
    const head = this.head;
    const bytes = new Uint8Array(NOTIFICATION_BYTES);
    encodeNotification(record, bytes);
    if (!this.#memory.writePa(base + (head % capacity) * NOTIFICATION_BYTES, bytes)) return "no-queue";
    const next = (head + 1) >>> 0;
    const overflow = ((next - r.nqRegister(NqRegister.TAIL)) >>> 0) > capacity;
    if (overflow) r.setNqRegister(NqRegister.CAUSE, r.nqRegister(NqRegister.CAUSE) | NQ_CAUSE_OVERFLOW);
    r.setNqRegister(NqRegister.HEAD, next);
    for (const w of this.#waiters) {
      if (w.head !== next) w.resolve();
    }
    return overflow ? "overflowed" : "written";
  }

  /** Resolves once the head differs from `head` (immediately if it already does) or `signal` aborts. */
  wait(head: number, signal?: AbortSignal): Promise<void> {
    if (this.head !== head >>> 0 || signal?.aborted === true) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const onAbort = (): void => waiter.resolve();
      const waiter: Waiter = {
        head: head >>> 0,
        resolve: () => {
          this.#waiters.delete(waiter);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      this.#waiters.add(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Releases every waiter (portal close). */
  releaseAll(): void {
    for (const w of [...this.#waiters]) w.resolve();
  }
}
