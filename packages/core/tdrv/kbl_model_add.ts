/**
 * `kbl_model_add`: the per-NeuronCore device install of a loaded model, and its inverse
 * (`kmgr_unstage_kelf_model`).
 *
 * Seed: lifecycle-error-model §2.6 (call order, which `kblModelAdd` follows step for step and
 * `tests/kbl_model_add_order_test.ts` pins: `dma_queue_bundle_instance_lut_init` → data-refill rings / I-O queues →
 * `hw_exec_queue_count_descs` → `sequencer_setup_instr` → `dma_ring_setup_queue_bundles` → `add_model` →
 * `ucode_stage_libs`; then `ucode_switch_libs` (runtime-synthesis §7); RAII unwind on failure), runtime-synthesis §2.2 (the image is synthesized:
 * `[PREAMBLE][MODEL_SWITCH][MAIN][POSTAMBLE][FUNCTION*]`, the ucode-library load sequence inserted into the Pool
 * PREAMBLE), §3.1 (`ucode_model_has_custom_ops == (num_libs > 1)`: the base ext-ISA library plus custom ones;
 * `dma_is_custom_op_dma_v2` walks the queue-bundle table's 16-byte tuples; `ucode_stage_libs` collects exactly 8
 * M2S/S2M pairs and bakes one opcode → library table; one `aws_hal_q7_swap_table` broadcasts it), §3.2 (the custom-op lowering `[dma_config ×2][dma_config_size]
 * [LOAD_POOL_ARGUMENT 0x107A][DRAIN 0x10A2][EVENT_SEMAPHORE update_mode 0x13]`), §4.3 (SBUF is validated, not
 * allocated), §4.4 (> 9 libraries: "Exceeded max number of GPSIMD libs"; 1 library: staged once per core and shared;
 * 2..9: staged per model). Ours: the PREAMBLE's ULIB_LOAD encoding (`docs/isa.md`); FUNCTION* is empty (no NEFF
 * construct the runtime reads defines a function block); the per-core shared library is keyed by the image's MD5, so
 * two different single-library images on one core are two cached sets (the seed keeps one
 * `ulib_set_info_extisa_only` per core and reuses it whatever the image); a multi-op model's intermediate buffers (`virtual` vars) are allocated here, in the
 * MODEL allocator, and a call's operand may be a view into an I/O tensor or a buffer (docs/onnx.md, "What the NEFF
 * holds"); the core's notification queue grows, before `add_model`, when one clean run of the model pushes more
 * records than it holds with room to spare, and shrinks back at the unstage (`nq_ring.ts`).
 *
 * @module
 */
import type { Logger } from "../log.ts";
import { md5 } from "../neff/hash.ts";
import { DmaMemUsageType, type Dmem, type DmemLedger, ModelAllocator } from "../dmem/dmem.ts";
import { NrtError } from "../error.ts";
import {
  DMA_DESCRIPTOR_BYTES,
  DmaDirection,
  encodeArgTable,
  encodeInstruction,
  encodeOpcodeTable,
  encodeRingTableEntry,
  EVENT_UPDATE_MODE_INCREMENT,
  type Instruction,
  KernelDtype,
  libraryTag,
  NotificationKind,
  Opcode,
  type OpcodeTableEntry,
  Q7Map,
  RING_TABLE_ENTRY_BYTES,
  SLOT_BYTES,
} from "../isa.ts";
import type { KelfModel } from "../kelf/kelf_load.ts";
import type { HalTarget, Khal } from "../khal.ts";
import { KBIN_DMA_RING_TYPE_CUSTOM_OP } from "../silicon_spec.ts";
import { collectCustomOpQueues as collectQueues } from "./dma_queue_bundle.ts";
import { NrtStatus } from "../status.ts";
import { nqRelease, nqReserve, runRecords } from "./nq_ring.ts";
import { type EventSink, type StagedLibrary, takeId, type Tpb } from "./tpb.ts";

/** Maximum GPSIMD libraries per model (seed: runtime-synthesis §4.4). */
export const MAX_GPSIMD_LIBS = 9;

/** NEFF dtype → kernel ABI dtype code (`docs/kernel-abi.md`). */
export const KERNEL_DTYPE: Readonly<Record<string, number>> = KernelDtype;

/** One slice a core's queue moves: var `io` (an I/O ordinal, or io.length + a buffer index), bytes `[offset, offset + bytes)`. */
interface Slice {
  readonly io: number;
  readonly offset: number;
  readonly bytes: number;
  /** SBUF device address of the slice. */
  readonly sbuf: number;
}

/** Per call: which descriptors each of the 8 queues carries, and where they sit in the ring buffer. */
interface CallPlan {
  readonly m2s: Slice[][];
  readonly s2m: Slice[][];
  /** Offset of queue c's M2S ring in the ring buffer (S2M follows it). */
  readonly ringOffset: number[];
}

/** A model installed on one NeuronCore. */
export interface InstalledModel {
  /** The core. */
  readonly tpb: Tpb;
  /** Device-side model id (stream model field). */
  readonly deviceModel: number;
  /** MODEL allocator: freed in one call at unload. */
  readonly allocator: ModelAllocator;
  /** Doorbell semaphore. */
  readonly doorbell: number;
  /** Completion semaphore (EVENT_SEMAPHORE target). */
  readonly completion: number;
  /** Sequencer stream slot. */
  readonly streamSlot: number;
  /** Descriptor rings of every call, re-materialised per execution when the I/O addresses change. */
  readonly rings: Dmem;
  /** Plans per call. */
  readonly plans: readonly CallPlan[];
  /** I/O device addresses the rings currently encode. */
  boundPa: number[];
  /** Device addresses of the model's intermediate buffers (var io.length + i), allocated at load. */
  readonly bufferPa: readonly number[];
  /** Shared library set used (single-library models), for the ref count. */
  readonly sharedLib?: string;
  /** `ucode_model_has_custom_ops`: the model bundles more than the base library. */
  readonly hasCustomOps: boolean;
  /** The stream's sections. */
  readonly layout: StreamLayout;
  /** Stream runs so far (the EXEC_DONE value to expect next is runs + 1). */
  runs: number;
}

/** Services the install needs. */
export interface InstallServices {
  /** HAL. */
  readonly khal: Khal;
  /** Portal target. */
  readonly target: HalTarget;
  /** Ledger. */
  readonly ledger: DmemLedger;
  /** Event sink. */
  readonly event: EventSink;
  /** Where a failing cleanup is reported. */
  readonly log?: Logger;
}

function hexDigest(b: Uint8Array): string {
  return Array.from(md5(b), (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * `ucode_stage_libs_table` (A) over the HAL's generation: the 8 custom-op queues `dma_is_custom_op_dma_v2` finds in
 * the queue-bundle table (`dma_queue_bundle.ts`).
 */
export function collectCustomOpQueues(khal: Khal): Array<{ engine: number; queue: number }> {
  return collectQueues(khal.spec);
}

/** `ucode_model_has_custom_ops` (seed: runtime-synthesis §3.1): more than one library, the base plus a custom one. */
export function ucodeModelHasCustomOps(model: Pick<KelfModel, "libraries">): boolean {
  return model.libraries.length > 1;
}

/** The sections of an installed stream, in slots (`sequencer_setup_instr`, runtime-synthesis §2.2). */
export interface StreamLayout {
  /** PREAMBLE: the ucode-library load sequence, one ULIB_LOAD per library. */
  readonly preamble: number;
  /** MODEL_SWITCH: one slot. */
  readonly modelSwitch: number;
  /** MAIN: the lowering of every call. */
  readonly main: number;
  /** POSTAMBLE: the end-of-execution NOTIFY. */
  readonly postamble: number;
  /** FUNCTION blocks: none (ours: no NEFF construct the runtime reads defines one). */
  readonly functions: number;
}

/** Splits `bytes` into 8 per-core shares aligned to 64 bytes. */
function shares(bytes: number): Array<[number, number]> {
  const chunk = Math.ceil(bytes / 8 / 64) * 64;
  const out: Array<[number, number]> = [];
  for (let c = 0; c < 8; c++) {
    const lo = Math.min(bytes, c * chunk), hi = Math.min(bytes, (c + 1) * chunk);
    out.push([lo, hi - lo]);
  }
  return out;
}

/** A call operand: the var it lies in (io index, or io.length + buffer index), where, and how it is described. */
interface Operand {
  readonly base: number;
  readonly offset: number;
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly size: number;
}

/** Operand `k` of a call: `io[k]` whole, or view `k - io.length`. */
function operand(model: KelfModel, k: number): Operand {
  if (k < model.io.length) return { base: k, offset: 0, ...model.io[k] };
  return model.views[k - model.io.length];
}

/** Device model ids per core: the 15-bit field of the stream-table entry (`@nrt/core/isa`'s `encodeStreamEntry`). */
const DEVICE_MODEL_IDS = 0x8000;

/**
 * `kbl_model_add`: installs `model` on `tpb`. Every resource it takes is released again if any step fails.
 */
export async function kblModelAdd(s: InstallServices, tpb: Tpb, model: KelfModel): Promise<InstalledModel> {
  const { khal, target } = s;
  const spec = khal.spec;
  const nc = tpb.nc;
  const allocator = new ModelAllocator(s.ledger, tpb.device, nc);
  // RAII unwind (seed: lifecycle-error-model §2.6: model_free / buf_free / dmem_list_free …): every step pushes its
  // undo; a failed install runs them in reverse, and a failing undo is logged, never swallowed.
  await using undo = new AsyncDisposableStack();
  undo.defer(() => allocator.destroy());
  // The id the model's records carry: a free one of this core (the field has 15 bits; handles never wrap into it).
  const installing = `Cannot load NEFF "${model.name}" on NeuronCore ${nc}`;
  const deviceModel = takeId(tpb.modelIds, DEVICE_MODEL_IDS, "device model id", installing);
  undo.defer(() => void tpb.modelIds.delete(deviceModel));
  let sharedKey: string | undefined;
  try {
    // (1) dma_queue_bundle_instance_lut_init: the 8 custom-op queues (one per Q7 core).
    const queues = collectCustomOpQueues(khal);
    // (2) drs_create_data_refill_rings / io_create_queues: the per-call descriptor plans and rings. The SBUF
    // carveout is validated, never allocated (seed: runtime-synthesis §4.3 NOTE).
    const sbufPa = spec.addressMap.sbufBase + nc * spec.addressMap.sbufStride;
    const plans: CallPlan[] = [];
    const argTables: Uint8Array[] = [];
    let ringBytes = 0;
    for (const [ci, call] of model.calls.entries()) {
      let at = 0;
      const place = (k: number) => {
        const t = operand(model, k);
        const off = at;
        at += Math.ceil(t.size / 64) * 64;
        return off;
      };
      const inOff = call.inputs.map(place), outOff = call.outputs.map(place);
      if (at > spec.sbufBytesPerCore) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot load NEFF "${model.name}": call ${ci} needs ${at} bytes of SBUF, the ${spec.name} core has ${spec.sbufBytesPerCore}`,
        );
      }
      const desc = (k: number, off: number) => {
        const t = operand(model, k);
        if (t.shape.length > 4) {
          throw new NrtError(
            NrtStatus.NRT_INVALID,
            `Cannot load NEFF "${model.name}": tensor "${t.name}" has rank ${t.shape.length} > 4`,
          );
        }
        const dtype = KERNEL_DTYPE[t.dtype];
        if (dtype === undefined) {
          throw new NrtError(
            NrtStatus.NRT_INVALID,
            `Cannot load NEFF "${model.name}": dtype ${t.dtype} of "${t.name}" has no kernel ABI code`,
          );
        }
        return { addr: Q7Map.SBUF_BASE + off, bytes: t.size, dtype, dims: t.shape };
      };
      argTables.push(encodeArgTable({
        inputs: call.inputs.map((io, k) => desc(io, inOff[k])),
        outputs: call.outputs.map((io, k) => desc(io, outOff[k])),
        ints: call.ints,
      }));
      const m2s: Slice[][] = [], s2m: Slice[][] = [], ringOffset: number[] = [];
      for (let c = 0; c < 8; c++) {
        m2s.push(call.inputs.flatMap((op, k) => {
          const t = operand(model, op);
          const [o, b] = shares(t.size)[c];
          return b > 0 ? [{ io: t.base, offset: t.offset + o, bytes: b, sbuf: sbufPa + inOff[k] + o }] : [];
        }));
        s2m.push(call.outputs.flatMap((op, k) => {
          const t = operand(model, op);
          const [o, b] = shares(t.size)[c];
          return b > 0 ? [{ io: t.base, offset: t.offset + o, bytes: b, sbuf: sbufPa + outOff[k] + o }] : [];
        }));
        ringOffset.push(ringBytes);
        ringBytes += (m2s[c].length + s2m[c].length) * DMA_DESCRIPTOR_BYTES;
      }
      plans.push({ m2s, s2m, ringOffset });
    }
    const rings = await allocator.alloc(Math.max(ringBytes, 64), DmaMemUsageType.DMA_DESCRIPTORS);
    // Intermediate buffers: device memory of the model, booked as scratchpad, freed with the allocator at unload.
    const bufferPa: number[] = [];
    for (const b of model.buffers) bufferPa.push((await allocator.alloc(b.size, DmaMemUsageType.SCRATCHPAD)).memory.pa);

    // (3) hw_exec_queue_count_descs: the doorbell and completion semaphores, and the memory the stream will name —
    // the argument and ring tables, and the opcode table (its size depends only on the function count; its library
    // addresses are filled by ucode_stage_libs below).
    const doorbell = takeId(tpb.semaphores, spec.semaphoresPerCore, "semaphore", installing);
    undo.defer(() => void tpb.semaphores.delete(doorbell));
    const completion = takeId(tpb.semaphores, spec.semaphoresPerCore, "semaphore", installing);
    undo.defer(() => void tpb.semaphores.delete(completion));
    const argBytes = argTables.reduce((a, t) => a + Math.ceil(t.byteLength / 64) * 64, 0);
    const ringTableBytes = model.calls.length * 2 * 8 * RING_TABLE_ENTRY_BYTES;
    const meta = await allocator.alloc(Math.max(64, argBytes + ringTableBytes), DmaMemUsageType.ARG_TABLES);
    const metaBytes = new Uint8Array(Math.max(64, argBytes + ringTableBytes));
    const argPa: number[] = [], ringTablePa: number[] = [];
    let at = 0;
    for (const t of argTables) {
      metaBytes.set(t, at);
      argPa.push(meta.memory.pa + at);
      at += Math.ceil(t.byteLength / 64) * 64;
    }
    for (const plan of plans) {
      for (const dir of [DmaDirection.M2S, DmaDirection.S2M]) {
        ringTablePa.push(meta.memory.pa + at);
        for (let c = 0; c < 8; c++) {
          const m = plan.m2s[c].length, n = dir === DmaDirection.M2S ? m : plan.s2m[c].length;
          encodeRingTableEntry(
            {
              engine: queues[c].engine,
              queue: queues[c].queue,
              ringType: KBIN_DMA_RING_TYPE_CUSTOM_OP,
              count: n,
              ringPa: rings.memory.pa + plan.ringOffset[c] + (dir === DmaDirection.M2S ? 0 : m * DMA_DESCRIPTOR_BYTES),
            },
            metaBytes,
            at,
          );
          at += RING_TABLE_ENTRY_BYTES;
        }
      }
    }
    const libs = model.libraries;
    const tableOf = (libAddr: ReadonlyMap<string, { pa: number; bytes: number; tag: number }>): Uint8Array => {
      const entries: OpcodeTableEntry[] = libs.flatMap((l) =>
        l.functions.map((f) => ({
          opcode: f.opcode,
          cpuIdFlag: l.cpuId === 1,
          totalCpus: l.totalCpus,
          libAddr: libAddr.get(l.name)?.pa ?? 0,
          libBytes: libAddr.get(l.name)?.bytes ?? 0,
          libTag: libAddr.get(l.name)?.tag ?? 0,
          name: f.name,
        }))
      );
      return encodeOpcodeTable({
        m2s: queues.map((q) => khal.dmaQueueOffset(nc, q.engine, q.queue, 1)),
        s2m: queues.map((q) => khal.dmaQueueOffset(nc, q.engine, q.queue, 0)),
        entries,
      });
    };
    const tableMem = await allocator.alloc(tableOf(new Map()).byteLength, DmaMemUsageType.UCODE_TABLE);

    // (4) sequencer_setup_instr: [PREAMBLE][MODEL_SWITCH][MAIN][POSTAMBLE][FUNCTION*] (runtime-synthesis §2.2).
    // PREAMBLE: the ucode-library load sequence, inserted into the Pool preamble: one ULIB_LOAD per library that
    // binds a function, each naming the opcode table the staging below fills (ours: its encoding, and that it names
    // the table rather than an image address, which is not known before ucode_stage_libs).
    const loaded = libs.filter((l) => l.functions.length > 0).length;
    const program: Instruction[] = [];
    for (let lib = 0; lib < loaded; lib++) {
      program.push({ op: Opcode.ULIB_LOAD, lib, libs: loaded, opcodeTable: tableMem.memory.pa });
    }
    const preamble = program.length;
    program.push({ op: Opcode.MODEL_SWITCH, model: deviceModel, opcodeTable: tableMem.memory.pa });
    for (const [ci, call] of model.calls.entries()) {
      const inBytes = call.inputs.reduce((a, k) => a + operand(model, k).size, 0);
      const outBytes = call.outputs.reduce((a, k) => a + operand(model, k).size, 0);
      program.push(
        { op: Opcode.DMA_CONFIG, direction: DmaDirection.M2S, queues: 8, ringTable: ringTablePa[2 * ci] },
        { op: Opcode.DMA_CONFIG, direction: DmaDirection.S2M, queues: 8, ringTable: ringTablePa[2 * ci + 1] },
        { op: Opcode.DMA_CONFIG_SIZE, m2sBytes: inBytes, s2mBytes: outBytes },
        {
          op: Opcode.LOAD_POOL_ARGUMENT,
          embeddingTableBase: argPa[ci],
          sbufBase: sbufPa,
          oneValueReadAddr: khal.evtAccelAddr(nc, 0),
          completionWriteAddr: khal.semIncAddr(nc, completion),
        },
        { op: Opcode.EXTENDED_INST, opcode: call.opcode, call: ci },
        { op: Opcode.DRAIN_ARM },
        { op: Opcode.DRAIN },
        { op: Opcode.EVENT_SEMAPHORE, updateMode: EVENT_UPDATE_MODE_INCREMENT, semaphore: completion, value: 1 },
      );
    }
    const main = program.length - preamble - 1;
    program.push({ op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 });
    const layout: StreamLayout = { preamble, modelSwitch: 1, main, postamble: 1, functions: 0 };
    const stream = new Uint8Array(program.length * SLOT_BYTES);
    program.forEach((ins, i) => stream.set(encodeInstruction(ins), i * SLOT_BYTES));
    const streamMem = await allocator.alloc(stream.byteLength, DmaMemUsageType.INSTRUCTIONS);
    await target.portal.memWrite(streamMem.memory, 0, stream);
    s.event(`sequencer_setup_instr nc=${nc} model=${deviceModel}`);

    // (5) dma_ring_setup_queue_bundles: the argument tables and the custom-op ring tables of the 8 queues.
    await target.portal.memWrite(meta.memory, 0, metaBytes);
    s.event(`dma_ring_setup_queue_bundles nc=${nc} model=${deviceModel}`);

    // The notification queue holds every record one clean run pushes (ours, `nq_ring.ts`): a long stream grows the
    // core's ring, in the core's turn, before it is registered; the unwind gives the room back.
    await nqReserve(s, tpb, deviceModel, runRecords(program), model.name);
    undo.defer(() => nqRelease(s, tpb, deviceModel));

    // (6) add_model: the stream is registered with the core's sequencer. It cannot run before the load returns
    // (nothing rings its doorbell), so the libraries staged next are in place before its first run.
    const slot = takeId(tpb.streamSlots, spec.csr.streamSlots, "stream slot", installing);
    undo.defer(() => void tpb.streamSlots.delete(slot));
    await khal.streamInstall(target, nc, slot, {
      pa: streamMem.memory.pa,
      slots: program.length,
      doorbell,
      model: deviceModel,
    });
    undo.defer(() => khal.streamRemove(target, nc, slot));
    s.event(`add_model nc=${nc} model=${deviceModel}`);

    // (7) ucode_stage_libs (seed: runtime-synthesis §4.4).
    if (libs.length > MAX_GPSIMD_LIBS) {
      throw new NrtError(
        NrtStatus.NRT_RESOURCE,
        `Cannot load NEFF "${model.name}": Exceeded max number of GPSIMD libs (${libs.length} > ${MAX_GPSIMD_LIBS})`,
      );
    }
    const libAddr = new Map<string, { pa: number; bytes: number; tag: number }>();
    if (libs.length === 1) {
      // The single ext-ISA library: staged once per core under the staging lock and shared by every model.
      const key = hexDigest(libs[0].image);
      const set = await stageSharedLibrary(s, tpb, key, libs[0].name, libs[0].image, allocator);
      set.users++;
      sharedKey = key;
      undo.defer(async () => {
        releaseShared(tpb, key);
        // A library this failed load staged and nobody else uses is part of "everything it built": free it, so a
        // failed load leaves the ledger where it found it. A library other models staged stays cached (§4.4).
        if (set.users === 0 && set.stagedBy === allocator && tpb.extIsaLibs.get(key) === set) {
          tpb.extIsaLibs.delete(key);
          await s.ledger.free(set.dmem);
        }
      });
      libAddr.set(libs[0].name, {
        pa: set.dmem.memory.pa,
        bytes: libs[0].image.byteLength,
        tag: libraryTag(libs[0].image),
      });
    } else {
      for (const l of libs) {
        const d = await allocator.alloc(l.image.byteLength, DmaMemUsageType.UCODE_LIBS);
        await target.portal.memWrite(d.memory, 0, l.image);
        libAddr.set(l.name, { pa: d.memory.pa, bytes: l.image.byteLength, tag: libraryTag(l.image) });
        s.event(`ucode_stage_libs nc=${nc} model ${l.name}`);
      }
    }
    // ucode_stage_libs_table (B): ONE opcode → library table per NeuronCore, plus the 8 queue doorbell offsets.
    await target.portal.memWrite(tableMem.memory, 0, tableOf(libAddr));

    // (8) ucode_switch_libs: ONE swap-table call points all 8 Q7 cores at the table (seed: spmd-teardown §2.2).
    // It takes its turn in the core's exec FIFO: a swap landing between another model's MODEL_SWITCH and its
    // EXTENDED_INST would make that run resolve its opcode in this model's table.
    await inExecQueue(tpb, () => khal.q7SwapTable(target, nc, tableMem.memory.pa));
    s.event(`ucode_switch_libs nc=${nc} model=${deviceModel}`);

    const installed: InstalledModel = {
      tpb,
      deviceModel,
      allocator,
      doorbell,
      completion,
      streamSlot: slot,
      rings,
      plans,
      boundPa: [],
      bufferPa,
      sharedLib: sharedKey,
      hasCustomOps: ucodeModelHasCustomOps(model),
      layout,
      runs: 0,
    };
    undo.move(); // installed: nothing to undo
    return installed;
  } catch (e) {
    try {
      await undo.disposeAsync();
    } catch (cleanup) {
      s.log?.warn(
        `[ND ${tpb.device}][NC ${nc}] Cleanup after a failed load of "${model.name}" failed too: ${describe(cleanup)}`,
      );
    }
    throw e;
  }
}

/** A cleanup failure in one line (a SuppressedError lists every one). */
function describe(e: unknown): string {
  const parts: string[] = [];
  for (let x: unknown = e; x !== undefined;) {
    if (x instanceof SuppressedError) {
      parts.push(String(x.error instanceof Error ? x.error.message : x.error));
      x = x.suppressed;
    } else {
      parts.push(x instanceof Error ? x.message : String(x));
      x = undefined;
    }
  }
  return parts.join("; ");
}

/**
 * `ucode_stage_libs` (num_libs == 1): returns the core's cached `ulib_set_info_extisa_only` for this image, or stages
 * it once into the GLOBAL allocator. Concurrent loads of the same library on one core wait for the one staging in
 * flight instead of staging it twice (seed: runtime-synthesis §4.4, "under ulib_staging_lock").
 */
async function stageSharedLibrary(
  s: InstallServices,
  tpb: Tpb,
  key: string,
  name: string,
  image: Uint8Array,
  owner: unknown,
): Promise<StagedLibrary> {
  const cached = tpb.extIsaLibs.get(key);
  if (cached !== undefined) return cached;
  const inFlight = tpb.stagingInFlight;
  const pending = inFlight.get(key);
  if (pending !== undefined) return await pending;
  const p = (async () => {
    const dmem = await s.ledger.alloc(tpb.device, tpb.nc, image.byteLength, DmaMemUsageType.UCODE_LIBS);
    try {
      await s.target.portal.memWrite(dmem.memory, 0, image);
    } catch (e) {
      await s.ledger.free(dmem);
      throw e;
    }
    const set: StagedLibrary = { dmem, users: 0, stagedBy: owner };
    tpb.extIsaLibs.set(key, set);
    s.event(`ucode_stage_libs nc=${tpb.nc} shared ${name}`);
    return set;
  })();
  inFlight.set(key, p);
  try {
    return await p;
  } finally {
    inFlight.delete(key);
  }
}

/** Runs `f` as one entry of the core's FIFO (`h_running_model` serialisation), after every execution queued before. */
async function inExecQueue<T>(tpb: Tpb, f: () => Promise<T>): Promise<T> {
  using turn = tpb.queue.acquire();
  await turn.ready;
  return await f();
}

function releaseShared(tpb: Tpb, key: string): void {
  const set = tpb.extIsaLibs.get(key);
  if (set !== undefined) set.users--;
}

/** `kmgr_unstage_kelf_model`: removes the stream, frees the model allocator in one call, returns its ids. */
export async function kmgrUnstage(s: InstallServices, m: InstalledModel): Promise<void> {
  const tpb = m.tpb;
  try {
    await s.khal.streamRemove(s.target, tpb.nc, m.streamSlot);
  } finally {
    tpb.streamSlots.delete(m.streamSlot);
    tpb.semaphores.delete(m.doorbell);
    tpb.semaphores.delete(m.completion);
    // The ring's registration goes with the id (synchronously: a load may take the id again at once).
    const ring = nqRelease(s, tpb, m.deviceModel);
    tpb.modelIds.delete(m.deviceModel);
    if (m.sharedLib !== undefined) releaseShared(tpb, m.sharedLib);
    try {
      await m.allocator.destroy();
    } finally {
      await ring;
    }
  }
}

/**
 * Whether {@linkcode kblComputeSetup} has anything to write: the I/O addresses differ from those the rings were last
 * written for. Synchronous, so that an execute whose addresses did not move makes no call at all (ours).
 */
export function kblComputeSetupNeeded(m: InstalledModel, io: readonly number[]): boolean {
  const bound = m.boundPa;
  if (bound.length !== io.length) return true;
  for (let i = 0; i < io.length; i++) if (bound[i] !== io[i]) return true;
  return false;
}

/**
 * `kbl_compute_setup`: re-materialises the template DMA rings for this execution's I/O device addresses (the
 * model's buffers follow them). Seed: runtime-synthesis §3.3 (on every execute, `dlr_add_to_hw_exec_queue →
 * kbl_compute_setup`). Skipped when the addresses are the ones the rings already encode (ours: the rings would be
 * rewritten with the same bytes).
 */
export async function kblComputeSetup(s: InstallServices, m: InstalledModel, io: readonly number[]): Promise<void> {
  if (!kblComputeSetupNeeded(m, io)) return;
  const ioPa = [...io, ...m.bufferPa];
  const bytes = new Uint8Array(m.rings.memory.bytes);
  const v = new DataView(bytes.buffer);
  const put = (at: number, src: number, dst: number, n: number) => {
    v.setUint32(at, src >>> 0, true);
    v.setUint32(at + 4, Math.floor(src / 0x1_0000_0000), true);
    v.setUint32(at + 8, dst >>> 0, true);
    v.setUint32(at + 12, Math.floor(dst / 0x1_0000_0000), true);
    v.setUint32(at + 16, n, true);
  };
  for (const plan of m.plans) {
    for (let c = 0; c < 8; c++) {
      let at = plan.ringOffset[c];
      for (const sl of plan.m2s[c]) {
        put(at, ioPa[sl.io] + sl.offset, sl.sbuf, sl.bytes);
        at += DMA_DESCRIPTOR_BYTES;
      }
      for (const sl of plan.s2m[c]) {
        put(at, sl.sbuf, ioPa[sl.io] + sl.offset, sl.bytes);
        at += DMA_DESCRIPTOR_BYTES;
      }
    }
  }
  await s.target.portal.memWrite(m.rings.memory, 0, bytes);
  m.boundPa = [...io];
}
