/**
 * `notification_consume_error_block`: decodes the error records one progress step drained from a NeuronCore's
 * notification queue — TPB_ERROR records through the arch pack's subtype and ISA-text tables, HW_ERROR records by
 * cause — and sets the one verdict this stage owns: an uncorrectable NeuronCore memory error is
 * `NRT_EXEC_HW_ERR_NC_UE` (1202), logged with its metadata word.
 *
 * Seed: lifecycle-error-model §4.5 (per 16-byte record: `v2_error_get_infer_error_subtype`,
 * `v2_infer_error_get_isa_error_text`, `_sequencer_error_text` for the FATAL sequencer subtype, `ring_buffer_enqueue`
 * into the exec error ring; the NC-UE record → ".rodata 0x815750 … metadata: 0x%x … → NRT_EXEC_HW_ERR_NC_UE"), §4.3
 * CORRECTION (0x4b2 is a consume-stage verdict, not a classify-stage one), §5.5 (the NC-UE operator text).
 *
 * `v2_infer_error_get_sequencer_error_text` renders the SEQ-specific text of a FATAL (error_id 0x0a) record; the
 * seed gives neither its table nor its index. Ours: {@linkcode sequencerErrorText} names the sequencer-detected
 * cause bits of the record's subtype mask (`TpbErrorMask` 0x10..0x200, the faults the SP/SEQ itself raises).
 *
 * @module
 */
import { NotificationKind, type NotificationRecord, notificationWord, TpbErrorId } from "../isa.ts";
import type { Khal } from "../khal.ts";
import type { Logger } from "../log.ts";
import { NrtStatus } from "../status.ts";
import { HwErrorCause, TpbErrorMask } from "./error_record.ts";

/** One decoded entry of the exec error ring. */
export interface ExecErrorEntry {
  /** The raw record. */
  readonly record: NotificationRecord;
  /** `TPB_ERROR` or `HW_ERROR`. */
  readonly source: "tpb" | "hw";
  /** Whether the record halts the execution (TPB_ERROR `error_id` 0x0a, or any HW_ERROR). */
  readonly fatal: boolean;
  /** `v2_error_get_infer_error_subtype` of a TPB_ERROR record (0 for HW_ERROR). */
  readonly subtype: number;
  /** `v2_infer_error_get_isa_error_text` of a TPB_ERROR record, or the hardware block's name. */
  readonly text: string;
  /**
   * `v2_infer_error_get_sequencer_error_text` of a FATAL (0x0a) TPB_ERROR record whose mask carries sequencer-
   * detected causes; `undefined` otherwise.
   */
  readonly sequencerText?: string;
}

/** The sequencer-detected causes of a TPB_ERROR mask, in bit order (ours: the simulator's encoding). */
const SEQUENCER_CAUSES: ReadonlyArray<[number, string]> = [
  [TpbErrorMask.BAD_INSTRUCTION, "undecodable instruction slot"],
  [TpbErrorMask.DMA, "DMA configuration or descriptor fault"],
  [TpbErrorMask.OPCODE, "opcode missing from the opcode table"],
  [TpbErrorMask.Q7_BOOT, "Q7 cores not running"],
  [TpbErrorMask.EVENT, "bad EVENT_SEMAPHORE"],
  [TpbErrorMask.ARGUMENT, "bad LOAD_POOL_ARGUMENT table"],
];

/**
 * `v2_infer_error_get_sequencer_error_text` (seed: lifecycle-error-model §4.5, "the SEQ-specific text for the FATAL
 * (0x0a) sequencer subtype"): for a FATAL record, the sequencer-detected causes its mask names, joined with "; ";
 * `undefined` for a NONFATAL (0x09) record or a mask without such a cause (ours: the seed does not give the table).
 */
export function sequencerErrorText(errorId: number, mask: number): string | undefined {
  if (errorId !== TpbErrorId.FATAL) return undefined;
  const causes = SEQUENCER_CAUSES.filter(([bit]) => (mask & bit) !== 0).map(([, text]) => text);
  return causes.length === 0 ? undefined : `sequencer fatal error: ${causes.join("; ")}`;
}

/** What the consume stage hands the classifier. */
export interface ConsumedErrors {
  /** The exec error ring, in record order. */
  readonly entries: readonly ExecErrorEntry[];
  /** `NRT_EXEC_HW_ERR_NC_UE` when an NC-UE record was seen, else `NRT_SUCCESS`. */
  readonly status: number;
}

/** Where the records came from, for the log lines. */
export interface ErrorOrigin {
  /** Device index (`ND`). */
  readonly device: number;
  /** Physical NeuronCore (`NC`). */
  readonly nc: number;
}

/** Whether a record belongs to the error block (TPB_ERROR or HW_ERROR). */
export function isErrorRecord(r: NotificationRecord): boolean {
  return r.kind === NotificationKind.TPB_ERROR || r.kind === NotificationKind.HW_ERROR;
}

const HW_BLOCK_NAMES: Readonly<Record<number, string>> = {
  [HwErrorCause.HBM_UE]: "HBM uncorrectable error",
  [HwErrorCause.NC_UE]: "NeuronCore memory uncorrectable error",
  [HwErrorCause.COLLECTIVES]: "collectives proxy",
  [HwErrorCause.NETWORK_PROXY]: "network proxy",
};

/**
 * `notification_consume_error_block`.
 *
 * @param khal The arch pack: its `errorSubtype` / `isaErrorText` decode TPB_ERROR records.
 * @param records The records of one drain; non-error records are skipped.
 * @param origin Device and NeuronCore, for the NC-UE log line.
 * @param log Receives the NC-UE line.
 * @returns The decoded entries and the consume-stage verdict.
 */
export function notificationConsumeErrorBlock(
  khal: Pick<Khal, "errorSubtype" | "isaErrorText">,
  records: readonly NotificationRecord[],
  origin: ErrorOrigin,
  log: Logger,
): ConsumedErrors {
  const entries: ExecErrorEntry[] = [];
  let status: number = NrtStatus.NRT_SUCCESS;
  for (const r of records) {
    if (r.kind === NotificationKind.TPB_ERROR) {
      // seed §4.5: the decoder reads the low 64 bits — error_id = rec & 0xff, mask = rec >> 8.
      const word = notificationWord(r);
      const sequencerText = sequencerErrorText(r.code, r.mask);
      entries.push({
        record: r,
        source: "tpb",
        fatal: r.code === TpbErrorId.FATAL,
        subtype: khal.errorSubtype(word),
        text: khal.isaErrorText(r.code),
        ...(sequencerText === undefined ? {} : { sequencerText }),
      });
    } else if (r.kind === NotificationKind.HW_ERROR) {
      entries.push({
        record: r,
        source: "hw",
        fatal: true,
        subtype: 0,
        text: HW_BLOCK_NAMES[r.value] ?? `hardware error cause ${r.value}`,
      });
      if (r.value === HwErrorCause.NC_UE) {
        status = NrtStatus.NRT_EXEC_HW_ERR_NC_UE;
        log.error(
          `(FATAL-RT-UNDEFINED-STATE) [ND ${origin.device}][NC ${origin.nc}] Uncorrectable memory error is detected, ` +
            `metadata: 0x${
              (r.aux >>> 0).toString(16)
            }. Execution results may be invalid. Please terminate or stop/start this instance.`,
          { nc: origin.nc, metadata: r.aux >>> 0 },
        );
      }
    }
  }
  return { entries, status };
}
