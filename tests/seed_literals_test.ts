/**
 * Seed literals (issue 16, "Tests that cannot agree with themselves"). The host and the simulator import the same
 * constants, so a wrong value would pass every round trip between them. Each expectation below is a literal number
 * copied from the seed text quoted next to it; no expectation is computed from the constant under test. Values the
 * seeds leave open and we chose are pinned too, each marked "ours", so a change to them is a decision and not an
 * accident. docs/seed-ledger.md lists every seed fact and the test that pins it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman, CAYMAN_SPEC } from "@nrt/arch-cayman";
import * as core from "@nrt/core";
import {
  buildCustomOpNeff,
  DlrModelState,
  DMA_MEM_USAGE_SLOTS,
  DMA_MEM_USAGE_TOTAL,
  KmgrExecMode,
  MemoryLogger,
  nrt_get_status_priority,
  NrtError,
  NrtInitState,
  NrtStatus,
  NrtStatusPriority,
  readNeff,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { AL_HAL_TPB_MAX_ENG, KBIN_DMA_RING_TYPE_CUSTOM_OP, TpbArchType, TpbEngType } from "@nrt/core/hal";
import {
  decodeArgTable,
  decodeInstruction,
  decodeOpcodeTable,
  decodeSlotHeaderWord,
  encodeInstruction,
  encodeOpcodeTable,
  EVENT_UPDATE_MODE_INCREMENT,
  type Instruction,
  NOTIFICATION_BYTES,
  Opcode,
  OPCODE_TABLE_ENTRY_BYTES,
  OPCODE_TABLE_HEADER_BYTES,
  OPCODE_TABLE_MAX_ENTRIES,
  type OpcodeTableEntry,
  POOL_STDIO_BLOCK_ALIGN,
  POOL_STDIO_BLOCK_BYTES,
  POOL_STDIO_ENTRY_BYTES,
  POOL_STDIO_ENTRY_HEADER_BYTES,
  POOL_STDIO_MAGIC,
  POOL_STDIO_MAX_QUEUE_ALLOC,
  POOL_STDIO_RECORD_BYTES,
  POOL_STDIO_SLOTS,
  POOL_STDIO_STDERR_BASE,
  POOL_STDIO_STDERR_QUEUE_BYTES,
  POOL_STDIO_STDOUT_BASE,
  PoolStdioDescriptor,
  PoolStdioStreamTag,
  SLOT_BYTES,
  SLOT_WORD_LEN,
  slotHeader,
  socSliceBase,
  TpbErrorId,
} from "@nrt/core/isa";
import { type DeviceMemory, type Portal, TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal } from "@nrt/device-sim";
import { execRequestInitState, execRequestProcessErrors } from "../packages/core/kmgr/exec_request.ts";
import { ErpStep, ExecFatalStatus, ExecState } from "../packages/core/state.ts";
import { kernel, oneOpNeff } from "./_kernels.ts";

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

// ---- lifecycle-error-model §4.1: NRT_STATUS -------------------------------------------------------------------

describe("NRT_STATUS values (seed lifecycle-error-model §4.1)", () => {
  // §4.1: "Read verbatim from DWARF. 28 enumerators, in three numeric bands. The gaps at 8 and 12 are intentional
  // (reserved)". The enum body:
  //   NRT_SUCCESS = 0, NRT_FAILURE = 1, NRT_INVALID = 2, NRT_INVALID_HANDLE = 3, NRT_RESOURCE = 4, NRT_TIMEOUT = 5,
  //   NRT_HW_ERROR = 6, NRT_QUEUE_FULL = 7, /* 8 reserved */ NRT_LOAD_NOT_ENOUGH_NC = 9,
  //   NRT_UNSUPPORTED_NEFF_VERSION = 10, NRT_FAIL_HOST_MEM_ALLOC = 11, /* 12 reserved */ NRT_UNINITIALIZED = 13,
  //   NRT_CLOSED = 14, NRT_QUEUE_EMPTY = 15, NRT_EXEC_UNIT_UNRECOVERABLE = 101, NRT_EXEC_BAD_INPUT = 1002,
  //   NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003, NRT_EXEC_COMPLETED_WITH_ERR = 1004, NRT_EXEC_NC_BUSY = 1005,
  //   NRT_EXEC_OOB = 1006, NRT_COLL_PENDING = 1100, NRT_EXEC_HW_ERR_COLLECTIVES = 1200, NRT_EXEC_HW_ERR_HBM_UE = 1201,
  //   NRT_EXEC_HW_ERR_NC_UE = 1202, NRT_EXEC_HW_ERR_DMA_ABORT = 1203, NRT_EXEC_SW_NQ_OVERFLOW = 1204,
  //   NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205, NRT_NETWORK_PROXY_FAILURE = 1206
  const SEED_STATUS: Record<string, number> = {
    NRT_SUCCESS: 0,
    NRT_FAILURE: 1,
    NRT_INVALID: 2,
    NRT_INVALID_HANDLE: 3,
    NRT_RESOURCE: 4,
    NRT_TIMEOUT: 5,
    NRT_HW_ERROR: 6,
    NRT_QUEUE_FULL: 7,
    NRT_LOAD_NOT_ENOUGH_NC: 9,
    NRT_UNSUPPORTED_NEFF_VERSION: 10,
    NRT_FAIL_HOST_MEM_ALLOC: 11,
    NRT_UNINITIALIZED: 13,
    NRT_CLOSED: 14,
    NRT_QUEUE_EMPTY: 15,
    NRT_EXEC_UNIT_UNRECOVERABLE: 101,
    NRT_EXEC_BAD_INPUT: 1002,
    NRT_EXEC_COMPLETED_WITH_NUM_ERR: 1003,
    NRT_EXEC_COMPLETED_WITH_ERR: 1004,
    NRT_EXEC_NC_BUSY: 1005,
    NRT_EXEC_OOB: 1006,
    NRT_COLL_PENDING: 1100,
    NRT_EXEC_HW_ERR_COLLECTIVES: 1200,
    NRT_EXEC_HW_ERR_HBM_UE: 1201,
    NRT_EXEC_HW_ERR_NC_UE: 1202,
    NRT_EXEC_HW_ERR_DMA_ABORT: 1203,
    NRT_EXEC_SW_NQ_OVERFLOW: 1204,
    NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE: 1205,
    NRT_NETWORK_PROXY_FAILURE: 1206,
  };

  test("NrtStatus has exactly the seed's 28 enumerators with the seed's values", () => {
    expect(Object.keys(SEED_STATUS).length).toBe(28);
    expect({ ...NrtStatus }).toEqual(SEED_STATUS);
  });

  test("8 and 12 are reserved: no enumerator carries them", () => {
    const values = new Set<number>(Object.values(NrtStatus));
    expect(values.has(8)).toBe(false);
    expect(values.has(12)).toBe(false);
  });

  test("the three bands: A is 0..15, B is 101 and 1002..1100, C is 1200..1206", () => {
    // §5.2 (runtime-synthesis): "Band A — generic (0..15) … Band B — execution result (101, 1002..1100) … Band C —
    // hardware-fault (1200..1206)".
    const codes = Object.values(NrtStatus).map(Number).sort((a, b) => a - b);
    expect(codes.filter((c) => c <= 15)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15]);
    expect(codes.filter((c) => c > 15 && c < 1200)).toEqual([101, 1002, 1003, 1004, 1005, 1006, 1100]);
    expect(codes.filter((c) => c >= 1200)).toEqual([1200, 1201, 1202, 1203, 1204, 1205, 1206]);
  });
});

// ---- lifecycle-error-model §4.2: nrt_status_priority_t and nrt_get_status_priority ------------------------------

describe("nrt_get_status_priority (seed lifecycle-error-model §4.2)", () => {
  test("nrt_status_priority_t: NONE 0, MEDIUM 1, HIGH 2, CRITICAL 3", () => {
    // §4.2: "NRT_STATUS_PRIORITY_NONE = 0, NRT_STATUS_PRIORITY_MEDIUM = 1, NRT_STATUS_PRIORITY_HIGH = 2,
    // NRT_STATUS_PRIORITY_CRITICAL = 3".
    expect({ ...NrtStatusPriority }).toEqual({
      NRT_STATUS_PRIORITY_NONE: 0,
      NRT_STATUS_PRIORITY_MEDIUM: 1,
      NRT_STATUS_PRIORITY_HIGH: 2,
      NRT_STATUS_PRIORITY_CRITICAL: 3,
    });
  });

  test("every one of the 28 codes ranks as the byte-exact reconstruction says", () => {
    // §4.2 reconstruction: 1004 → CRITICAL; s ≤ 1004: 0 → NONE, (s-5) < 2 → HIGH (5, 6), else MEDIUM; 1205 →
    // CRITICAL; s > 1205: 1206 → HIGH, else MEDIUM; 1204 → HIGH; in (1004, 1205): 1200 → HIGH, else CRITICAL.
    // CORRECTION: "only 1200/1204 → HIGH"; "HBM-UE 1201, NC-UE 1202, DMA-ABORT 1203 score CRITICAL (3)".
    const seed: Array<[number, number]> = [
      [0, 0],
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 1],
      [5, 2],
      [6, 2],
      [7, 1],
      [9, 1],
      [10, 1],
      [11, 1],
      [13, 1],
      [14, 1],
      [15, 1],
      [101, 1],
      [1002, 1],
      [1003, 1],
      [1004, 3],
      [1005, 3],
      [1006, 3],
      [1100, 3],
      [1200, 2],
      [1201, 3],
      [1202, 3],
      [1203, 3],
      [1204, 2],
      [1205, 3],
      [1206, 2],
    ];
    expect(seed.length).toBe(28);
    expect(seed.map(([s]) => [s, nrt_get_status_priority(s)])).toEqual(seed);
  });

  test("codes outside the enum follow the same branches: reserved 8 and 12 MEDIUM, 1007..1199 CRITICAL, above 1206 MEDIUM", () => {
    // The reconstruction is a function of any int: "s in [1..1004)" → MEDIUM unless 5/6; "s in (1004 .. 1205)" →
    // CRITICAL unless 1200/1204; "s > 0x4b5" and not 0x4b6 → MEDIUM.
    expect([8, 12, 16, 100, 1001].map((s) => nrt_get_status_priority(s))).toEqual([1, 1, 1, 1, 1]);
    expect([1007, 1101, 1199].map((s) => nrt_get_status_priority(s))).toEqual([3, 3, 3]);
    expect([1207, 0x7fffffff].map((s) => nrt_get_status_priority(s))).toEqual([1, 1]);
    // `jbe`/`ja` compare unsigned: a negative int is a huge code, MEDIUM.
    expect(nrt_get_status_priority(-1)).toBe(1);
  });
});

// ---- lifecycle-error-model §1.1–§1.4, §4.4, §2.6, §4.3, §5.1: the enums -----------------------------------------

describe("host state machines and hardware enums (seed lifecycle-error-model §1, §2.6, §4.3, §4.4, §5.1)", () => {
  test("NRT_INIT_STATE: START 0, INIT 1, CHILD 2, CLOSED 3, NUM 4", () => {
    // §1.1: "NRT_STATE_START = 0, NRT_STATE_INIT = 1, NRT_STATE_CHILD = 2, NRT_STATE_CLOSED = 3, NRT_STATE_NUM = 4".
    expect({ ...NrtInitState }).toEqual({
      NRT_STATE_START: 0,
      NRT_STATE_INIT: 1,
      NRT_STATE_CHILD: 2,
      NRT_STATE_CLOSED: 3,
      NRT_STATE_NUM: 4,
    });
  });

  test("DLR_MODEL_STATE: INVALID 0, STARTING 1, RUNNING 2, STOPPING 3, STOPPED 4, LAST 5", () => {
    // §1.2: "DMSTATE_INVALID = 0, DMSTATE_STARTING = 1, DMSTATE_RUNNING = 2, DMSTATE_STOPPING = 3,
    // DMSTATE_STOPPED = 4, DMSTATE_LAST = 5".
    expect({ ...DlrModelState }).toEqual({
      DMSTATE_INVALID: 0,
      DMSTATE_STARTING: 1,
      DMSTATE_RUNNING: 2,
      DMSTATE_STOPPING: 3,
      DMSTATE_STOPPED: 4,
      DMSTATE_LAST: 5,
    });
  });

  test("exec_state: INIT 0, WAIT_BARRIER_PROXY 1, WAIT_CORE 2, DONE 3", () => {
    // §1.3: "EXEC_STATE_INIT = 0, EXEC_STATE_WAIT_BARRIER_PROXY = 1, EXEC_STATE_WAIT_CORE = 2, EXEC_STATE_DONE = 3".
    expect({ ...ExecState }).toEqual({
      EXEC_STATE_INIT: 0,
      EXEC_STATE_WAIT_BARRIER_PROXY: 1,
      EXEC_STATE_WAIT_CORE: 2,
      EXEC_STATE_DONE: 3,
    });
  });

  test("ERP_STEP: DONE 0, CONTINUE 1, FATAL 2, un-namespaced", () => {
    // §1.4: "ERP_STEP_DONE = 0, ERP_STEP_CONTINUE = 1, ERP_STEP_FATAL = 2"; CORRECTION: "the enumerators are
    // un-namespaced (ERP_STEP_DONE, not ERP_STEP::…)".
    expect({ ...ErpStep }).toEqual({ ERP_STEP_DONE: 0, ERP_STEP_CONTINUE: 1, ERP_STEP_FATAL: 2 });
  });

  test("exec_fatal_status: NONE 0, OOB 1, TIMEOUT 2, SW_NQ_OVERFLOW 3, NETWORK_PROXY 4, BARRIER 5, INVALID 6, COUNT 7", () => {
    // §4.4: "EXEC_FATAL_STATUS_NONE = 0, _OOB = 1, _TIMEOUT = 2, _SW_NQ_OVERFLOW = 3, _NETWORK_PROXY = 4,
    // _BARRIER = 5, _INVALID = 6, _COUNT = 7".
    expect({ ...ExecFatalStatus }).toEqual({
      EXEC_FATAL_STATUS_NONE: 0,
      EXEC_FATAL_STATUS_OOB: 1,
      EXEC_FATAL_STATUS_TIMEOUT: 2,
      EXEC_FATAL_STATUS_SW_NQ_OVERFLOW: 3,
      EXEC_FATAL_STATUS_NETWORK_PROXY: 4,
      EXEC_FATAL_STATUS_BARRIER: 5,
      EXEC_FATAL_STATUS_INVALID: 6,
      EXEC_FATAL_STATUS_COUNT: 7,
    });
  });

  test("exec_request_state starts in EXEC_STATE_INIT with exec_rets[2] and exec_fatal_status bool[2][7]", () => {
    // §1.3: "exec_request_init_state … state = EXEC_STATE_INIT"; "NRT_STATUS exec_rets[2] (one slot per
    // NeuronCore of a dual-NC/LNC request)"; §4.4 CORRECTION: "the field at offset 112 is typed bool[2][7]".
    const req = execRequestInitState();
    expect(req.state).toBe(0);
    expect(req.execRets).toEqual([0, 0]);
    expect(req.execFatalStatus.map((row) => row.length)).toEqual([7, 7]);
    expect(req.execFatalStatus.flat().every((f) => f === false)).toBe(true);
  });

  test("al_hal_tpb_arch_type SUNDA 2, CAYMAN 3, MARIANA 4; al_hal_tpb_eng_type PE 0, ACT 1, POOL 2, DVE 3, SP 4; MAX_ENG 5", () => {
    // §2.6: "AL_HAL_TPB_ARCH_TYPE_SUNDA = 2 (NC-v2), …_CAYMAN = 3 (NC-v3), …_MARIANA = 4 (NC-v4)".
    expect({ ...TpbArchType }).toEqual({
      AL_HAL_TPB_ARCH_TYPE_SUNDA: 2,
      AL_HAL_TPB_ARCH_TYPE_CAYMAN: 3,
      AL_HAL_TPB_ARCH_TYPE_MARIANA: 4,
    });
    // §4.3: "PE=0, ACT=1, POOL=2, DVE=3, SP=4 (AL_HAL_TPB_MAX_ENG = 5)".
    expect({ ...TpbEngType }).toEqual({ PE: 0, ACT: 1, POOL: 2, DVE: 3, SP: 4 });
    expect(AL_HAL_TPB_MAX_ENG).toBe(5);
  });

  test("kmgr_exec_mode: ASYNC 0, EXPLICIT_ASYNC 1", () => {
    // §5.1: "KMGR_EXEC_MODE_ASYNC = 0, KMGR_EXEC_MODE_EXPLICIT_ASYNC = 1".
    expect({ ...KmgrExecMode }).toEqual({ KMGR_EXEC_MODE_ASYNC: 0, KMGR_EXEC_MODE_EXPLICIT_ASYNC: 1 });
  });
});

// ---- lifecycle-error-model §1.3/§1.4/§4.3/§5.4: the poller's verdicts --------------------------------------------

describe("exec_request_process_errors verdicts (seed lifecycle-error-model §1.4, §4.3, §5.4)", () => {
  const ctx = () => ({
    khal: { errorSubtype: () => 0, isaErrorText: () => "" },
    device: 0,
    modelName: "m",
    timeoutMs: 1000,
    log: new MemoryLogger(),
  });

  test("a missed completion is ERP_STEP_FATAL (2) with NRT_TIMEOUT (5) and EXEC_FATAL_STATUS_TIMEOUT (flag 2) latched", () => {
    // §5.4: "the per-NC scan sets NRT_TIMEOUT: mov $0x5,%edx" and "latches EXEC_FATAL_STATUS_TIMEOUT"; §4.3:
    // "return ERP_STEP_FATAL; // on any hardware fault".
    const req = execRequestInitState();
    const v = execRequestProcessErrors(ctx(), req, [{ nc: 0, records: [], timedOut: true }]);
    expect(v).toBe(2);
    expect(req.execRets[0]).toBe(5);
    expect(req.status).toBe(5);
    expect(req.execFatalStatus[0].map((f, i) => f ? i : -1).filter((i) => i >= 0)).toEqual([2]);
  });

  test("a full NQ ring is ERP_STEP_FATAL with 1204 and EXEC_FATAL_STATUS_SW_NQ_OVERFLOW (flag 3)", () => {
    // §5.3: "NQ ring full ⇒ EXEC_FATAL_STATUS_SW_NQ_OVERFLOW ⇒ NRT_EXEC_SW_NQ_OVERFLOW (1204)".
    const req = execRequestInitState();
    const v = execRequestProcessErrors(ctx(), req, [{ nc: 0, records: [], nqOverflow: true }]);
    expect(v).toBe(2);
    expect(req.status).toBe(1204);
    expect(req.execFatalStatus[0].map((f, i) => f ? i : -1).filter((i) => i >= 0)).toEqual([3]);
  });

  test("an aborted DMA engine is ERP_STEP_FATAL with 1203", () => {
    // §4.3: "if (check_dma_queue_on_aborted_eng(...)) s = NRT_EXEC_HW_ERR_DMA_ABORT; // $0x4b3".
    const req = execRequestInitState();
    expect(execRequestProcessErrors(ctx(), req, [{ nc: 0, records: [], abortedDmaEngines: [3] }])).toBe(2);
    expect(req.status).toBe(1203);
  });

  test("two NeuronCores: the worse of 1204 (HIGH) and 1203 (CRITICAL) wins", () => {
    // §4.2: "nrt_get_status_priority … x2 … to keep a running 'worst' status across the per-NC scan".
    const req = execRequestInitState();
    execRequestProcessErrors(ctx(), req, [{ nc: 0, records: [], nqOverflow: true }, {
      nc: 1,
      records: [],
      abortedDmaEngines: [0],
    }]);
    expect(req.execRets).toEqual([1204, 1203]);
    expect(req.status).toBe(1203);
  });
});

// ---- runtime-synthesis §3.2, spmd-teardown §4.3: opcode words ---------------------------------------------------

describe("sequencer opcode words (seed runtime-synthesis §3.2, §3.3; spmd-teardown §4.3)", () => {
  test("a slot is 64 bytes and its word_len is 0x10", () => {
    // runtime-synthesis §3.2: "opcode 0x7A (LOAD_POOL_ARGUMENT) | word_len 0x10 (16 words × 4 B = a 64-byte
    // instruction)"; "Every TPB-sequencer instruction is a fixed 64-byte / 0x40-stride slot".
    expect(SLOT_BYTES).toBe(0x40);
    expect(SLOT_WORD_LEN).toBe(0x10);
  });

  test("LOAD_POOL_ARGUMENT is the header word 0x107A, little-endian 7A 10 at byte 0", () => {
    // runtime-synthesis §3.2: "mov $0x107a,%r10d ; header word 0x107A".
    expect(slotHeader(Opcode.LOAD_POOL_ARGUMENT)).toBe(0x107a);
    const slot = encodeInstruction({
      op: Opcode.LOAD_POOL_ARGUMENT,
      embeddingTableBase: 0,
      sbufBase: 0,
      oneValueReadAddr: 0,
      completionWriteAddr: 0,
    });
    expect(slot.length).toBe(64);
    expect([slot[0], slot[1]]).toEqual([0x7a, 0x10]);
  });

  test("DRAIN is 0x10A2 and its paired word is 0x10A1", () => {
    // spmd-teardown §4.3: "add_drain @0x273e40 does mov $0x10a2,%eax; mov %ax,(%rsp)"; "(also emits a paired
    // 0x10A1)". The seed does not say what 0x10A1 means (§8: "the meaning of the paired 0x10A1 DRAIN variant" is LOW);
    // our name for it, DRAIN_ARM, is ours.
    expect(slotHeader(Opcode.DRAIN)).toBe(0x10a2);
    expect(slotHeader(Opcode.DRAIN_ARM)).toBe(0x10a1);
    const drain = encodeInstruction({ op: Opcode.DRAIN });
    expect([drain[0], drain[1]]).toEqual([0xa2, 0x10]);
  });

  test("EXTENDED_INST is opcode 0xF0, so its header word is 0x10F0", () => {
    // runtime-synthesis §7: "EXTENDED_INST(0xF0)"; the word 0x10F0 applies §3.2's word_len 0x10 to it.
    expect(Opcode.EXTENDED_INST).toBe(0xf0);
    expect(slotHeader(Opcode.EXTENDED_INST)).toBe(0x10f0);
  });

  test("dma_config is 0x1079; the 0x1049 and 0x107C neighbours are DMA_CONFIG_SIZE and EVENT_SEMAPHORE (ours)", () => {
    // runtime-synthesis §3.2: "mov $0x1079,%ecx ; adjacent dma_config-class opcode"; "mov $0x107c,%edx ; adjacent
    // POOL opcode"; NOTE: "The adjacent 0x1079 / 0x107C / 0x1049 literals … are the dma_config / DRAIN-class
    // opcodes". Which of them is DMA_CONFIG_SIZE and which EVENT_SEMAPHORE is our assignment.
    expect(slotHeader(Opcode.DMA_CONFIG)).toBe(0x1079);
    expect(slotHeader(Opcode.DMA_CONFIG_SIZE)).toBe(0x1049); // ours
    expect(slotHeader(Opcode.EVENT_SEMAPHORE)).toBe(0x107c); // ours
  });

  test("EVENT_SEMAPHORE update_mode is 0x13 (increment on done)", () => {
    // spmd-teardown §4.3: "[EVENT_SEMAPHORE] ; events.update_mode = 0x13 = increment-on-done".
    expect(EVENT_UPDATE_MODE_INCREMENT).toBe(0x13);
  });

  test("a slot whose word_len is not 0x10 does not decode", () => {
    const slot = encodeInstruction({ op: Opcode.DRAIN });
    slot[1] = 0x0f;
    expect(decodeSlotHeaderWord(slot)).toEqual({ wordLen: 0x0f, opcode: 0xa2 });
    expect(decodeInstruction(slot)).toBeUndefined();
  });
});

// ---- spmd-teardown §2.1: the opcode table -----------------------------------------------------------------------

describe("the opcode → library table (seed spmd-teardown §2.1)", () => {
  const entry = (i: number): OpcodeTableEntry => ({
    opcode: i + 1,
    cpuIdFlag: false,
    totalCpus: 8,
    libAddr: 0x1000 * i,
    libBytes: 64,
    name: `f${i}`,
  });

  test("entries are 0x118 bytes apart and at most 97 fit", () => {
    // §2.1: "one entry per custom-op function, 0x118-byte stride, up to 0x60..0x97 slots (cmp $0x60 @0x310af3 —
    // SUNDA_UCODE_LIB_INFO table[97])".
    expect(OPCODE_TABLE_ENTRY_BYTES).toBe(0x118);
    expect(OPCODE_TABLE_MAX_ENTRIES).toBe(97);
    const m2s = Array.from({ length: 8 }, (_, i) => 0x100 + i), s2m = Array.from({ length: 8 }, (_, i) => 0x200 + i);
    const full = encodeOpcodeTable({ m2s, s2m, entries: Array.from({ length: 97 }, (_, i) => entry(i)) });
    expect(full.length).toBe(OPCODE_TABLE_HEADER_BYTES + 97 * 0x118);
    // Entry 96 sits at header + 96 × 0x118: its valid byte, then the opcode 97 at +4.
    const at = OPCODE_TABLE_HEADER_BYTES + 96 * 0x118;
    expect(full[at]).toBe(1);
    expect(full[at + 4] | (full[at + 5] << 8)).toBe(97);
    expect(() => encodeOpcodeTable({ m2s, s2m, entries: Array.from({ length: 98 }, (_, i) => entry(i)) })).toThrow(
      RangeError,
    );
  });

  test("an entry carries valid = 1, cpu_id_flag = (cpu_id == 1), total_cpus, the library address, the opcode and a 256-byte name", () => {
    // §2.1: "entry->valid = 1; entry->cpu_id_flag = (uli->cpu_id(+0xc) == 1); entry->total_cpus = uli->total_cpus;
    // entry->stripped_lib_addr = uli->address; entry->opcode = func->opcode; strncpy(entry->func_name, func->name, 256)".
    const long = "x".repeat(300);
    const t = decodeOpcodeTable(
      encodeOpcodeTable({
        m2s: [],
        s2m: [],
        entries: [{ opcode: 0x1234, cpuIdFlag: true, totalCpus: 1, libAddr: 0x12345678, libBytes: 9, name: long }],
      }),
    );
    expect(t.entries.length).toBe(1);
    expect(t.entries[0]).toMatchObject({ opcode: 0x1234, cpuIdFlag: true, totalCpus: 1, libAddr: 0x12345678 });
    // The name field is 256 bytes, NUL-terminated (ours: at most 255 characters survive).
    expect(t.entries[0].name.length).toBe(255);
  });

  test("the header holds 8 M2S and 8 S2M doorbell offsets", () => {
    // §2.1: "exactly 8 M2S/S2M doorbell offset pairs == SUNDA_UCODE_LIB_INFO.dma_queue_m2s_offset[8] / _s2m_offset[8]".
    const m2s = [1, 2, 3, 4, 5, 6, 7, 8].map((x) => x * 0x100), s2m = [1, 2, 3, 4, 5, 6, 7, 8].map((x) => x * 0x1000);
    const t = decodeOpcodeTable(encodeOpcodeTable({ m2s, s2m, entries: [] }));
    expect(t.m2s).toEqual([0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800]);
    expect(t.s2m).toEqual([0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x8000]);
  });
});

// ---- spmd-teardown §3: the SoC slice ----------------------------------------------------------------------------

describe("dram_addr_to_soc_addr (seed spmd-teardown §3)", () => {
  test("core cpu owns SoC slice 9 + 2·cpu: 0→9, 1→11 … 7→23, each 0x10000 wide", () => {
    // §3: "uint32 index = 9 + 2*cpu; // 0->9 1->11 ... 7->23"; "return base + ((uint64)index << 16) +
    // (dram_addr & 0xFFFF)".
    const seed = [9, 11, 13, 15, 17, 19, 21, 23].map((i) => i * 0x10000);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((c) => socSliceBase(c))).toEqual(seed);
    // The device side is pinned through a kernel below ("each of the 8 Q7 cores rebases …").
  });
});

// ---- Fixed sizes and codes the host and the simulator share --------------------------------------------------

describe("shared record sizes and codes (seed lifecycle-error-model §4.5; runtime-synthesis §2.3, §4.3, §6)", () => {
  test("a TPB_ERROR record is 16 bytes with error_id 0x09 NONFATAL and 0x0a FATAL", () => {
    // lifecycle-error-model §4.5 NOTE: "The device packs a 16-byte NEURON_ISA TPB_ERROR record with error_id 0x09
    // (NONFATAL) / 0x0a (FATAL) plus a subtype".
    expect(NOTIFICATION_BYTES).toBe(16);
    expect({ ...TpbErrorId }).toEqual({ NONFATAL: 0x09, FATAL: 0x0a });
  });

  test("the custom-op DMA ring type is 16", () => {
    // runtime-synthesis §2.3: "a DMA descriptor on the KBIN_DMA_RING_TYPE_CUSTOM_OP (=16) queue"; §3.1: "marker==16
    // (CUSTOM_OP)".
    expect(KBIN_DMA_RING_TYPE_CUSTOM_OP).toBe(16);
  });

  test("the memory ledger has 23 dma_mem_usage_type slots, slot 22 the per-core total", () => {
    // runtime-synthesis §4.3: "one of 23 dma_mem_usage_type categories in the per-device ledger
    // (memory_usage_nc[8][23], [nc][22] = per-core total …)".
    expect(DMA_MEM_USAGE_SLOTS).toBe(23);
    expect(DMA_MEM_USAGE_TOTAL).toBe(22);
  });

  test("the NRT_2.0.0 facade exports the six nrta_* data-plane and schedule entries the seed lists", () => {
    // runtime-synthesis §6: "The 8 NRT_3.0.0 symbols … nrta_cc_prepare, nrta_cc_schedule, nrta_execute_schedule,
    // nrta_get_sequence, nrta_is_completed, nrta_tensor_copy, nrta_tensor_read, nrta_tensor_write". The two
    // nrta_cc_* entries are not in this list: docs/seed-ledger.md records them separately.
    const api = core as unknown as Record<string, unknown>;
    const names = [
      "nrta_execute_schedule",
      "nrta_get_sequence",
      "nrta_is_completed",
      "nrta_tensor_copy",
      "nrta_tensor_read",
      "nrta_tensor_write",
    ];
    expect(names.map((n) => [n, typeof api[n]])).toEqual(names.map((n) => [n, "function"]));
  });
});

// ---- spmd-teardown §5: pool_stdio ------------------------------------------------------------------------------

describe("pool_stdio literals (seed spmd-teardown §5.1–§5.6)", () => {
  test("the block: 0x440 bytes aligned 0x800, [8] stdout and [8] stderr queue slots", () => {
    // §5.2: "dmem_alloc_aligned(&sb->hbm_space_dmem, 0x440, DMA_MEM_USAGE_TYPE_POOL_STDIO, 0x800)"; §5.1:
    // "pool_stdio_queue_t stdout_queues[8]; … stderr_queues[8]; … (DW_AT_upper_bound = 7 ⇒ [8])".
    expect([POOL_STDIO_BLOCK_BYTES, POOL_STDIO_BLOCK_ALIGN, POOL_STDIO_SLOTS]).toEqual([0x440, 0x800, 8]);
  });

  test("queue bases 0x400 (stdout) and 0x420 (stderr); the stderr ring is 0x400 bytes = 4 entries", () => {
    // §5.2: "pool_stdio_queue_init(&sb->stdout_queues[0], sb, &info, entries_stdout, 0x400)"; "if (entries_stderr)
    // // 0x400 / 0x100 = 4 … pool_stdio_queue_init(&sb->stderr_queues[0], sb, &info, entries_stderr, 0x420)".
    expect([POOL_STDIO_STDOUT_BASE, POOL_STDIO_STDERR_BASE, POOL_STDIO_STDERR_QUEUE_BYTES]).toEqual([
      0x400,
      0x420,
      0x400,
    ]);
    expect(POOL_STDIO_STDERR_QUEUE_BYTES / 0x100).toBe(4);
  });

  test("a device entry is 0x100 bytes, its 0x10 header is skipped, a host record is 0xf0 bytes", () => {
    // §5.3: "Device ring entry size = 0x100 = 256 B (pool_stdio_get_entry_size @0x300a00 is literally mov
    // $0x100,%eax; ret)"; §5.5: "+0x10 SKIPS the 16-B entry header"; "the host record is 0xf0 bytes per 0x100-byte
    // device entry".
    expect([POOL_STDIO_ENTRY_BYTES, POOL_STDIO_ENTRY_HEADER_BYTES, POOL_STDIO_RECORD_BYTES]).toEqual([
      0x100,
      0x10,
      0xf0,
    ]);
  });

  test("a ring allocation is capped at 0x40000 bytes", () => {
    // §5.3: "Allocate entries*0x100 + 4 (capped 0x40000)".
    expect(POOL_STDIO_MAX_QUEUE_ALLOC).toBe(0x40000);
  });

  test("the on-device descriptor head: u16 MAGIC 0x201 @+0, u8 0 @+2, capacity @+0xc, data PA @+0x10, head/write @+0x18/+0x20", () => {
    // §5.3: "On-device descriptor head: u16 MAGIC=0x201 @+0; u8 0 @+2; u32 capacity @+0xc; u64 data PA @+0x10;
    // head/write VAs @+0x18/+0x20".
    expect(POOL_STDIO_MAGIC).toBe(0x201);
    expect({ ...PoolStdioDescriptor }).toEqual({
      MAGIC: 0x00,
      ZERO: 0x02,
      CAPACITY: 0x0c,
      DATA_PA: 0x10,
      READ_IDX_PA: 0x18,
      WRITE_IDX_PA: 0x20,
    });
  });

  test("stream tags: 3 for stdout, 1 for stderr", () => {
    // §5.5: "esi = stream_tag (3 = stdout, 1 = stderr)"; §5.6: "consume_all_entries(&sb->stdout_queues[i],
    // /*stream_tag=*/3) … (&sb->stderr_queues[i], /*stream_tag=*/1)".
    expect({ ...PoolStdioStreamTag }).toEqual({ STDOUT: 3, STDERR: 1 });
  });
});

// ---- Behaviour through a runtime on the simulated device --------------------------------------------------------

/** A tracing portal that also keeps the bytes of every memory write and the allocations still live. */
class CapturePortal extends TracingPortal {
  /** Every memory write: the allocation, the offset and a copy of the bytes. */
  readonly writes: Array<{ memory: DeviceMemory; offset: number; data: Uint8Array }> = [];
  /** Allocations not yet freed, by id. */
  readonly live = new Map<number, DeviceMemory>();
  /** Ids freed, in order. */
  readonly freed: number[] = [];

  constructor(inner: Portal) {
    super(inner);
  }

  override async memAlloc(request: Parameters<Portal["memAlloc"]>[0]): Promise<DeviceMemory> {
    const m = await super.memAlloc(request);
    this.live.set(m.id, m);
    return m;
  }

  override memFree(memory: DeviceMemory): Promise<void> {
    this.live.delete(memory.id);
    this.freed.push(memory.id);
    return super.memFree(memory);
  }

  override memWrite(memory: DeviceMemory, offset: number, data: Uint8Array): Promise<void> {
    this.writes.push({ memory, offset, data: data.slice() });
    return super.memWrite(memory, offset, data);
  }

  /** The bytes last written at device address `pa`, found through the allocation holding it. */
  bytesAt(pa: number): Uint8Array | undefined {
    for (let i = this.writes.length - 1; i >= 0; i--) {
      const w = this.writes[i];
      if (w.memory.pa + w.offset === pa) return w.data;
    }
    return undefined;
  }
}

const sims: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const s of sims.splice(0)) await s.close().catch(() => {});
});

async function runtime(): Promise<{ rt: Runtime; cap: CapturePortal }> {
  const sim = new DeviceSimPortal();
  sims.push(sim);
  const cap = new CapturePortal(sim);
  const rt = await Runtime.init({
    portal: cap,
    archPacks: [cayman],
    ownsPortal: false,
    visibleCores: [0, 1],
    virtualCoreSize: 1,
    logger: new MemoryLogger(),
  });
  return { rt, cap };
}

/** The instruction stream the host wrote at load: the one written buffer of whole slots that holds LOAD_POOL_ARGUMENT. */
function loweredStreams(cap: CapturePortal, from: number): Array<{ pa: number; program: Instruction[] }> {
  const out: Array<{ pa: number; program: Instruction[] }> = [];
  for (const w of cap.writes.slice(from)) {
    if (w.data.length === 0 || w.data.length % 64 !== 0) continue;
    const program: Instruction[] = [];
    for (let at = 0; at < w.data.length; at += 64) {
      const ins = decodeInstruction(w.data, at);
      if (ins === undefined) break;
      program.push(ins);
    }
    if (program.length * 64 === w.data.length && program.some((i) => i.op === Opcode.LOAD_POOL_ARGUMENT)) {
      out.push({ pa: w.memory.pa + w.offset, program });
    }
  }
  return out;
}

/** The header words of a program, `0x10 << 8 | opcode` each. */
const words = (p: readonly Instruction[]): number[] => p.map((i) => 0x1000 | i.op);

describe("the lowered per-op program the host builds (seed runtime-synthesis §3.2; spmd-teardown §4.3)", () => {
  test("the NEFF's own Pool stream is one EXTENDED_INST (0x10F0) per call", () => {
    // runtime-synthesis §3.3: "EXTENDED_INST 0xF0 … hands the op to the Q7 cluster"; the compiler's per-engine .bin
    // is not the loaded image (§2.2 NOTE).
    const neff = buildCustomOpNeff({
      name: "two",
      target: "cayman",
      inputs: [f32("a", 64), f32("b", 64)],
      outputs: [f32("r", 64), f32("o", 64)],
      libraries: [
        { name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] },
        {
          name: "vector_add",
          wasm: kernel("vector_add"),
          totalCpus: 8,
          functions: [{ opcode: 2, name: "vector_add" }],
        },
      ],
      calls: [{ opcode: 1, inputs: ["a"], outputs: ["r"] }, { opcode: 2, inputs: ["r", "b"], outputs: ["o"] }],
    });
    const bin = readNeff(neff).members.get("sg00/Pool.bin")!;
    expect(bin.length).toBe(128);
    expect([bin[0] | (bin[1] << 8), bin[64] | (bin[65] << 8)]).toEqual([0x10f0, 0x10f0]);
    expect([decodeInstruction(bin, 0), decodeInstruction(bin, 64)]).toEqual([
      { op: 0xf0, opcode: 1, call: 0 },
      { op: 0xf0, opcode: 2, call: 1 },
    ]);
  });

  test(
    "one call lowers to dma_config ×2, dma_config_size, LOAD_POOL_ARGUMENT, EXTENDED_INST, 0x10A1, DRAIN, EVENT_SEMAPHORE",
    async () => {
      // runtime-synthesis §3.2: "[dma_config x2][dma_config_size][LOAD_POOL_ARGUMENT 0x107A][DRAIN 0x10A2]
      // [EVENT_SEMAPHORE update_mode=0x13]"; spmd-teardown §4.3: "[DRAIN 0x10A2] ; add_drain @0x273e40 (also emits a
      // paired 0x10A1)"; runtime-synthesis §3.3: the POOL stream carries "EXTENDED_INST 0xF0 that hands the op to the Q7
      // cluster". Ours: EXTENDED_INST sits between LOAD_POOL_ARGUMENT and the drain, 0x10A1 right before 0x10A2, and
      // the words of dma_config_size (0x1049) and EVENT_SEMAPHORE (0x107C).
      const { rt, cap } = await runtime();
      try {
        const from = cap.writes.length;
        const n = 1024;
        const model = await rt.load(oneOpNeff("vector_add", "vector_add", [f32("a", n), f32("b", n)], [f32("out", n)]));
        const streams = loweredStreams(cap, from);
        expect(streams.length).toBe(1);
        const p = streams[0].program;
        const first = p.findIndex((i) => i.op === Opcode.DMA_CONFIG);
        expect(first).toBeGreaterThanOrEqual(0);
        const op = p.slice(first, first + 8);
        expect(words(op)).toEqual([0x1079, 0x1079, 0x1049, 0x107a, 0x10f0, 0x10a1, 0x10a2, 0x107c]);
        // No other per-op instruction anywhere else in the stream: one call, one lowering.
        expect(
          p.filter((i) => i.op === Opcode.LOAD_POOL_ARGUMENT || i.op === Opcode.EXTENDED_INST || i.op === Opcode.DRAIN)
            .length,
        ).toBe(3);
        // Field by field: M2S then S2M over the 8 custom-op queues; 2 × 4096 bytes in, 4096 out; the call's opcode;
        // an increment-on-done of 1.
        expect(op[0]).toMatchObject({ direction: 1, queues: 8 });
        expect(op[1]).toMatchObject({ direction: 0, queues: 8 });
        expect(op[2]).toEqual({ op: 0x49, m2sBytes: 8192, s2mBytes: 4096 });
        expect(op[4]).toEqual({ op: 0xf0, opcode: 1, call: 0 });
        expect(op[7]).toMatchObject({ updateMode: 0x13, value: 1 });
        await model.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("two calls lower to two copies of the per-op program, in call order", async () => {
    const { rt, cap } = await runtime();
    try {
      const from = cap.writes.length;
      const neff = buildCustomOpNeff({
        name: "chain",
        target: "cayman",
        inputs: [f32("a", 256), f32("b", 256)],
        outputs: [f32("r", 256), f32("o", 256)],
        libraries: [
          { name: "relu", wasm: kernel("relu"), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] },
          {
            name: "vector_add",
            wasm: kernel("vector_add"),
            totalCpus: 8,
            functions: [{ opcode: 2, name: "vector_add" }],
          },
        ],
        calls: [{ opcode: 1, inputs: ["a"], outputs: ["r"] }, { opcode: 2, inputs: ["r", "b"], outputs: ["o"] }],
      });
      const model = await rt.load(neff);
      const p = loweredStreams(cap, from)[0].program;
      const first = p.findIndex((i) => i.op === Opcode.DMA_CONFIG);
      const per = [0x1079, 0x1079, 0x1049, 0x107a, 0x10f0, 0x10a1, 0x10a2, 0x107c];
      expect(words(p.slice(first, first + 16))).toEqual([...per, ...per]);
      expect([p[first + 4], p[first + 12]]).toEqual([{ op: 0xf0, opcode: 1, call: 0 }, {
        op: 0xf0,
        opcode: 2,
        call: 1,
      }]);
      // relu reads 1024 bytes and writes 1024; vector_add reads 2048 and writes 1024.
      expect([p[first + 2], p[first + 10]]).toEqual([{ op: 0x49, m2sBytes: 1024, s2mBytes: 1024 }, {
        op: 0x49,
        m2sBytes: 2048,
        s2mBytes: 1024,
      }]);
      await model.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "LOAD_POOL_ARGUMENT carries the argument table, the core's SBUF base, an event CSR and the completion semaphore's increment CSR",
    async () => {
      // runtime-synthesis §3.2: "embedding_table_base_addr (lo/hi); sbuf_base_addr; one_value_read_addr =
      // tdrv_arch_get_evt_accel_addr; completion_write_addr = tdrv_arch_get_sem_inc_addr; /* a NeuronCore
      // semaphore-INCREMENT CSR */"; spmd-teardown §4.3: "EVENT_SEMAPHORE posts completion_write_addr".
      const { rt, cap } = await runtime();
      try {
        const from = cap.writes.length;
        const n = 512;
        const model = await rt.load(
          oneOpNeff("vector_add", "vector_add", [f32("a", n), f32("b", n)], [f32("out", n)]),
          1,
        );
        const p = loweredStreams(cap, from)[0].program;
        const lpa = p.find((i) => i.op === Opcode.LOAD_POOL_ARGUMENT)!;
        const sem = p.find((i) => i.op === Opcode.EVENT_SEMAPHORE)!;
        if (lpa.op !== Opcode.LOAD_POOL_ARGUMENT || sem.op !== Opcode.EVENT_SEMAPHORE) throw new Error("unreachable");
        const nc = 1, csr = CAYMAN_SPEC.csr, block = csr.ncBlockBase + nc * csr.ncBlockStride;
        // The completion write lands on the semaphore-increment CSR of the very semaphore EVENT_SEMAPHORE bumps.
        expect(lpa.completionWriteAddr).toBe(block + csr.semaphoreIncrement + 4 * sem.semaphore);
        // The one-value read is an event CSR of the same NeuronCore.
        expect(lpa.oneValueReadAddr - block - csr.event).toBeGreaterThanOrEqual(0);
        expect((lpa.oneValueReadAddr - block - csr.event) % 4).toBe(0);
        expect((lpa.oneValueReadAddr - block - csr.event) / 4).toBeLessThan(CAYMAN_SPEC.eventsPerCore);
        // The SBUF base is NeuronCore 1's carveout.
        expect(lpa.sbufBase).toBe(CAYMAN_SPEC.addressMap.sbufBase + CAYMAN_SPEC.addressMap.sbufStride);
        // The embedding-table base points at the call's argument table: 2 inputs, 1 output, 2048 bytes each.
        const table = cap.bytesAt(lpa.embeddingTableBase);
        expect(table).toBeDefined();
        const args = decodeArgTable(table!);
        expect([args.inputs.length, args.outputs.length]).toEqual([2, 1]);
        expect([...args.inputs, ...args.outputs].map((d) => d.bytes)).toEqual([2048, 2048, 2048]);
        await model.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test(
    "the opcode table the host bakes at load: one entry per function with total_cpus, cpu_id flag, opcode, name, and 8 queue pairs",
    async () => {
      // spmd-teardown §2.1: "bake ONE opcode->lib table {opcode, cpu_id, total_cpus, addr, name}[<=97]"; "exactly 8
      // M2S/S2M doorbell offset pairs".
      const { rt, cap } = await runtime();
      try {
        const from = cap.writes.length;
        const model = await rt.load(oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)], 1));
        const tables = cap.writes.slice(from).filter((w) =>
          w.data.length >= 0x100 && w.data[0] === 0x51 && w.data[1] === 0x37 && w.data[2] === 0x4f && w.data[3] === 0x54
        );
        expect(tables.length).toBe(1);
        const t = decodeOpcodeTable(tables[0].data);
        // Three functions: the base ext-ISA library's two (library 0 of every NEFF), then relu's.
        expect(tables[0].data.length).toBe(0x100 + 3 * 0x118);
        expect(t.entries).toEqual([
          expect.objectContaining({ opcode: 0xff00, totalCpus: 8, cpuIdFlag: false, name: "ext_copy" }),
          expect.objectContaining({ opcode: 0xff01, totalCpus: 8, cpuIdFlag: false, name: "ext_fill" }),
          expect.objectContaining({ opcode: 1, totalCpus: 1, cpuIdFlag: false, name: "relu" }),
        ]);
        expect(t.entries[0].libAddr).toBeGreaterThan(0);
        expect(t.entries[1].libAddr).toBe(t.entries[0].libAddr);
        expect(t.entries[2].libAddr).not.toBe(t.entries[0].libAddr);
        expect(t.m2s.length).toBe(8);
        expect(t.s2m.length).toBe(8);
        expect(new Set([...t.m2s, ...t.s2m]).size).toBe(16);
        await model.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
});

/** LEB128 (unsigned) and SLEB128 bytes of `x`. */
function leb(x: number, signed = false): number[] {
  const out: number[] = [];
  for (;;) {
    const b = x & 0x7f;
    x = signed ? x >> 7 : x >>> 7;
    const done = signed ? (x === 0 && (b & 0x40) === 0) || (x === -1 && (b & 0x40) !== 0) : x === 0;
    out.push(done ? b : b | 0x80);
    if (done) return out;
  }
}

/**
 * A hand-assembled Q7 kernel `soc_map`: each core stores `dram_addr_to_soc_addr(0x81234)` at element `cpu` of its
 * int32 output and `get_cpu_count()` at element `8 + cpu`, so the test reads back what the simulated device answered
 * on every core.
 */
function socMapKernel(): Uint8Array {
  const str = (t: string) => [...leb(t.length), ...new TextEncoder().encode(t)];
  const section = (id: number, body: number[]) => [id, ...leb(body.length), ...body];
  const types = [3, 0x60, 0, 1, 0x7f, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f]; // ()→i32, ()→(), (i32)→i32
  const fn = (name: string, type: number) => [...str("env"), ...str(name), 0x00, type];
  const imports = [
    6,
    ...fn("get_cpu_id", 0),
    ...fn("customop_return_tensor", 0),
    ...fn("dram_addr_to_soc_addr", 2),
    ...fn("customop_cleanup", 1),
    ...fn("get_cpu_count", 0),
    ...str("env"),
    ...str("memory"),
    0x02,
    0x03,
    0x00,
    ...leb(0x10000), // shared memory, as the kernels import it
  ];
  const body = [
    1,
    2,
    0x7f, // two i32 locals: y, cpu
    0x10,
    1,
    0x21,
    0, // y = customop_return_tensor()
    0x10,
    0,
    0x21,
    1, // cpu = get_cpu_id()
    0x20,
    0,
    0x28,
    2,
    0, // load y->addr
    0x20,
    1,
    0x41,
    2,
    0x74,
    0x6a, // + cpu << 2
    0x41,
    ...leb(0x81234, true),
    0x10,
    2, // dram_addr_to_soc_addr(0x81234)
    0x36,
    2,
    0, // i32.store
    0x20,
    0,
    0x28,
    2,
    0,
    0x20,
    1,
    0x41,
    2,
    0x74,
    0x6a, // the same element address
    0x10,
    4, // get_cpu_count()
    0x36,
    2,
    32, // i32.store offset 32: element 8 + cpu
    0x10,
    3, // customop_cleanup()
    0x0b,
  ];
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    1,
    0,
    0,
    0,
    ...section(1, types),
    ...section(2, imports),
    ...section(3, [1, 1]),
    ...section(7, [1, ...str("soc_map"), 0x00, 5]),
    ...section(10, [1, ...leb(body.length), ...body]),
  ]);
}

describe("dram_addr_to_soc_addr on the simulated device (seed spmd-teardown §3)", () => {
  test("each of the 8 Q7 cores rebases local DRAM 0x81234 into its own slice: (9 + 2·cpu) << 16 | 0x1234", async () => {
    // §3: "uint32 index = 9 + 2*cpu; // 0->9 1->11 ... 7->23"; "return base + ((uint64)index << 16) + (dram_addr &
    // 0xFFFF)" (the simulated SoC base is 0). §1: "get_cpu_id() is the SPMD rank ∈ {0..7} and get_cpu_count() is the
    // fixed cluster width 8" ("movi.n a2, 8 ; the COMPILE-TIME constant 8").
    const { rt } = await runtime();
    try {
      const neff = buildCustomOpNeff({
        name: "soc_map",
        target: "cayman",
        inputs: [f32("x", 16)],
        outputs: [{ name: "y", dtype: "int32", shape: [16] }],
        libraries: [{
          name: "soc_map",
          wasm: socMapKernel(),
          totalCpus: 8,
          functions: [{ opcode: 1, name: "soc_map" }],
        }],
        calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
      });
      const model = await rt.load(neff);
      const ins = new TensorSet(), outs = new TensorSet();
      ins.add("x", await rt.allocateTensor({ location: "host", size: 64, name: "x" }));
      outs.add("y", await rt.allocateTensor({ location: "host", size: 64, name: "y" }));
      expect((await rt.run(model, ins, outs)).status).toBe(0);
      const y = new Int32Array((await outs.get("y").read()).slice().buffer);
      expect(Array.from(y.subarray(0, 8))).toEqual([
        0x91234,
        0xb1234,
        0xd1234,
        0xf1234,
        0x111234,
        0x131234,
        0x151234,
        0x171234,
      ]);
      expect(Array.from(y.subarray(8, 16))).toEqual([8, 8, 8, 8, 8, 8, 8, 8]);
      await model.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("the load order header → vNC → parse (seed lifecycle-error-model §2.2, §2.7)", () => {
  // §2.2: "2. neff_get_header_from_buffer — NEFF magic/header. 3. nrt_vnc_usage_inc — reserve a virtual NeuronCore
  // slot. … 6. kmgr_load_nn_nc" (which runs neff_parse, §2.3); §2.7: "vNC reserved (nrt_vnc_usage_inc) ──fail──►
  // NRT_LOAD_NOT_ENOUGH_NC(9), release vNC └ neff_parse ──fail──► NRT_UNSUPPORTED_NEFF_VERSION(10) / NRT_INVALID(2)".
  const status = async (p: Promise<unknown>): Promise<number> => {
    const e = await p.then(() => undefined, (x: unknown) => x);
    if (!(e instanceof NrtError)) throw new Error(`expected an NrtError, got ${String(e)}`);
    return e.status;
  };
  const good = () => oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)]);

  test(
    "a bad header fails before the vNC is looked at: NRT_INVALID (2) even on a logical core that does not exist",
    async () => {
      const { rt } = await runtime();
      try {
        const truncated = good().slice(0, 512);
        expect(await status(rt.load(truncated, 7))).toBe(2);
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test(
    "a good header with a corrupt payload fails at the vNC first (9), and at the parse (2) on a real core",
    async () => {
      const { rt } = await runtime();
      try {
        const corrupt = good();
        corrupt.fill(0xff, 1024 + 16, 1024 + 64); // inside the gzip member; the header and data_size stay valid
        expect(await status(rt.load(corrupt, 7))).toBe(9);
        expect(await status(rt.load(corrupt, 0))).toBe(2);
        // The failed parse released the reservation it took: the core has no model, and a good load then succeeds.
        expect(rt.cores().find((c) => c.vnc === 0)?.models.length ?? 0).toBe(0);
        const m = await rt.load(good(), 0);
        await m.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
  test(
    "an unsupported NEFF version fails in the parse, after the vNC: 9 on a logical core that does not exist, 10 on a real one",
    async () => {
      // §2.3: neff_parse — "A NEFF whose version is outside the supported window is rejected with
      // NRT_UNSUPPORTED_NEFF_VERSION (10)"; §2.7: the vNC reservation (9) comes before neff_parse.
      const { rt } = await runtime();
      try {
        const future = good();
        new DataView(future.buffer).setUint32(0x18, 99, true); // neff_version_major
        expect(await status(rt.load(future, 7))).toBe(9);
        expect(await status(rt.load(future, 0))).toBe(10);
        expect(rt.cores().find((c) => c.vnc === 0)?.models.length ?? 0).toBe(0);
        const m = await rt.load(good(), { vnc: "auto" });
        expect(m.vnc).toBe(0);
        await m.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test('a failed load releases the vNC it reserved: vnc "auto" then picks that core again', async () => {
    // §2.2: "On any failure the loader releases the reserved vNC (nrt_vnc_usage_dec @0xc1820)". "auto" places a load
    // on the logical core with the fewest reservations (lowest index on a tie), so a leaked reservation on core 0
    // would send the next load to core 1.
    const { rt } = await runtime();
    try {
      const corrupt = good();
      corrupt.fill(0xff, 1024 + 16, 1024 + 64);
      for (let k = 0; k < 3; k++) expect(await status(rt.load(corrupt, 0))).toBe(2);
      const m = await rt.load(good(), { vnc: "auto" });
      expect(m.vnc).toBe(0);
      await m.unload();
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("SBUF is a carveout, not a heap (seed runtime-synthesis §4.3)", () => {
  test(
    "a call that needs more SBUF than the core has is refused at load; one that fits books no SBUF-sized memory",
    async () => {
      // §4.3 NOTE: "SBUF is not in this heap. The on-chip SBUF is a static NEFF carveout …, validated (not allocated) at
      // model-add. A reimplementer must not try to dmem_alloc SBUF." Cayman's core has 28 MiB of SBUF.
      const { rt } = await runtime();
      try {
        const MiB = 1024 * 1024;
        const big = oneOpNeff("relu", "relu", [f32("x", 8 * MiB)], [f32("y", 8 * MiB)]); // 32 + 32 MiB of SBUF
        const e = await rt.load(big).then(() => undefined, (x: unknown) => x);
        expect(e).toBeInstanceOf(NrtError);
        expect((e as NrtError).status).toBe(2);
        expect((e as NrtError).message).toContain("SBUF");
        const before = rt.memory().hbmUsed;
        const fits = await rt.load(
          oneOpNeff("vector_add", "vector_add", [f32("a", 2 * MiB), f32("b", 2 * MiB)], [f32("out", 2 * MiB)]),
        ); // 24 MiB of SBUF
        expect(rt.memory().hbmUsed - before).toBeLessThan(MiB);
        await fits.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
});

describe("ucode_free_lib_set (seed spmd-teardown §6.2, §6.5; runtime-synthesis §4.4)", () => {
  test("a staged library set outlives the model that staged it and is freed at close", async () => {
    // runtime-synthesis §4.4: "==1 → the single EXT-ISA library: … stage it once into the GLOBAL allocator and cache
    // it — shared by every model on that core"; spmd-teardown §6.5: "ucode_free_lib_set … dmem_free ; set->lib_dmem"
    // at tdrv_destroy. (Its scratch_space / ucode_table / extram frees have no counterpart here: the opcode table is
    // per model, in the MODEL allocator; ledger "differs".)
    const { rt, cap } = await runtime();
    let closed = false;
    try {
      const before = new Set(cap.live.keys());
      // One library, the base ext-ISA one (num_libs == 1): the shared, cached case.
      const model = await rt.load(buildCustomOpNeff({
        name: "copy",
        target: "cayman",
        inputs: [f32("a", 64)],
        outputs: [f32("out", 64)],
        libraries: [],
        calls: [{ opcode: 0xff00, inputs: ["a"], outputs: ["out"] }],
      }));
      await model.unload();
      const survivors = [...cap.live.keys()].filter((id) => !before.has(id));
      expect(survivors.length).toBeGreaterThan(0);
      // Each survivor holds a library image (WebAssembly magic "\0asm" at byte 0).
      for (const id of survivors) {
        const w = cap.writes.find((x) => x.memory.id === id && x.offset === 0);
        expect(w === undefined ? [] : Array.from(w.data.subarray(0, 4))).toEqual([0x00, 0x61, 0x73, 0x6d]);
      }
      const freedBefore = cap.freed.length;
      await rt.close();
      closed = true;
      const freedAtClose = new Set(cap.freed.slice(freedBefore));
      expect(survivors.filter((id) => !freedAtClose.has(id))).toEqual([]);
      expect(cap.live.size).toBe(0);
    } finally {
      if (!closed) await rt.close();
    }
  }, 30_000);
});

describe("the runtime state guard (seed lifecycle-error-model §1.1, §0)", () => {
  test("after nrt_close a load returns NRT_CLOSED (14)", async () => {
    // §1.1: "NRT_STATE_CLOSED = 3, // nrt_close() done; nrt_* API → NRT_CLOSED(14)"; §0: "nrt_close ─►
    // NRT_STATE_CLOSED (further API → NRT_CLOSED 14)".
    const { rt } = await runtime();
    await rt.close();
    const e = await rt.load(oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)])).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(14);
  }, 30_000);

  test(
    "a model that loaded is RUNNING-executable: one execute returns the sum, with no NRT_STATUS other than 0",
    async () => {
      // §0: "DMSTATE_RUNNING … (re-executable)"; §2.7: "DMSTATE_STARTING → DMSTATE_RUNNING → NRT_SUCCESS(0)".
      const { rt } = await runtime();
      try {
        const n = 64;
        const model = await rt.load(oneOpNeff("vector_add", "vector_add", [f32("a", n), f32("b", n)], [f32("out", n)]));
        const ins = new TensorSet(), outs = new TensorSet();
        for (const name of ["a", "b"]) {
          const t = await rt.allocateTensor({ location: "host", size: 4 * n, name });
          await t.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i).buffer));
          ins.add(name, t);
        }
        outs.add("out", await rt.allocateTensor({ location: "host", size: 4 * n, name: "out" }));
        for (let k = 0; k < 2; k++) {
          const r = await rt.run(model, ins, outs);
          expect(r.status).toBe(0);
        }
        const out = new Float32Array((await outs.get("out").read()).slice().buffer);
        expect(Array.from(out.subarray(0, 4))).toEqual([0, 2, 4, 6]);
        await model.unload();
      } finally {
        await rt.close();
      }
    },
    30_000,
  );
});
