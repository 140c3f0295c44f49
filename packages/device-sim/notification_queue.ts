/**
 * The device side of one NeuronCore's notification queue: 16-byte records written into the host DRAM ring the host
 * registered in the NQ register block, the device-owned head, and the sticky overflow cause. The head is stored with
 * `Atomics.store`, then the device's reap epoch advanced and, while the host's reaper watches it, notified: the reaper
 * sleeps on that word with `Atomics.waitAsync` and signals the completion waits (`Portal.notificationWait`, their
 * `comp_efd`) whose heads moved, so a completion wakes the host with no polling and no message, and the completions of
 * several NeuronCores that land before the host looks wake it once.
 *
 * Seed: runtime-synthesis §3.5 ("the device pushes a 16-byte NEURON_ISA notification record into the ENS
 * Notification-Queue ring"; completion is poll-driven, the caller blocks on `comp_efd`), lifecycle-error-model §5.3
 * (NQ overflow → `NRT_EXEC_SW_NQ_OVERFLOW`).
 *
 * @module
 */
import { encodeNotification, NOTIFICATION_BYTES, type NotificationRecord } from "@nrt/core/isa";
import { type NcRegisters, NQ_CAUSE_OVERFLOW, NqRegister } from "./nc_registers.ts";
import type { MemorySpace } from "./memory.ts";

/** What happened to one pushed record. */
export type NotificationOutcome = "written" | "overflowed" | "no-queue";

/** The producer side of one NeuronCore's NQ. */
export class NotificationProducer {
  readonly #regs: NcRegisters;
  readonly #memory: MemorySpace;
  readonly #onPush: (record: Uint8Array) => void;
  /** The record being pushed, encoded (one buffer for every record: the ring and `onPush` take copies). */
  readonly #bytes = new Uint8Array(NOTIFICATION_BYTES);

  /**
   * Creates the producer over a NeuronCore's registers and the device memory holding the ring; `onPush` sees the
   * bytes of every record pushed (the device's trace buffer), valid only during the call.
   */
  constructor(regs: NcRegisters, memory: MemorySpace, onPush: (record: Uint8Array) => void = () => {}) {
    this.#regs = regs;
    this.#memory = memory;
    this.#onPush = onPush;
  }

  /** The device head: records produced since the ring was (re)pointed. */
  get head(): number {
    return this.#regs.nqRegister(NqRegister.HEAD);
  }

  /**
   * Writes `record` at `(head % capacity) * 16` of the registered ring and advances the head. A full ring is still
   * written (the oldest record is lost) and the cause register's overflow bit is set.
   */
  push(record: NotificationRecord): NotificationOutcome {
    return this.pushAll([record]);
  }

  /**
   * Writes a burst of records (the per-core errors of one join) and publishes the head once, after the last, so the
   * host never reads half a burst. Ours: the seed does not say how the engines order their writes; one publish per
   * burst keeps what the host logs for a fault deterministic.
   *
   * @returns The outcome of the burst (`overflowed` when any record overwrote an unread one).
   */
  pushAll(records: readonly NotificationRecord[]): NotificationOutcome {
    const r = this.#regs;
    const capacity = r.nqRegister(NqRegister.CAPACITY);
    const base = r.nqRegister(NqRegister.BASE_LO) + r.nqRegister(NqRegister.BASE_HI) * 0x1_0000_0000;
    let head = this.head;
    let outcome: NotificationOutcome = "written";
    const bytes = this.#bytes;
    for (const record of records) {
      encodeNotification(record, bytes);
      this.#onPush(bytes);
      if (capacity === 0 || !this.#memory.writePa(base + (head % capacity) * NOTIFICATION_BYTES, bytes)) {
        outcome = "no-queue";
        break;
      }
      head = (head + 1) >>> 0;
      if (((head - r.nqRegister(NqRegister.TAIL)) >>> 0) > capacity) {
        r.setNqRegister(NqRegister.CAUSE, r.nqRegister(NqRegister.CAUSE) | NQ_CAUSE_OVERFLOW);
        outcome = "overflowed";
      }
    }
    if (head !== this.head) {
      r.publishNqHead(head);
    }
    return outcome;
  }
}
