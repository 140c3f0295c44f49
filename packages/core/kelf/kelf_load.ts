/**
 * `kelf_load`: turns a parsed NEFF into the runtime's model IR — the custom-op libraries, the ordered calls of the
 * Pool stream and the I/O signature — and refuses what the simulator cannot run.
 *
 * Seed: lifecycle-error-model §2.4 (`dlr_kelf_load → kelf_load` parses kbin sections; a parse failure is
 * `NRT_INVALID`), spmd-teardown §1.1 (`parse_one_ucode_lib`: `cpu_id` must be 0; `total_cpus` must be 1 or 8, else
 * "UCode Library %s has invalid number of total cpus %u"), ARCHITECTURE §5 (compiler instruction streams use opcodes
 * we do not model: refused with engine, slot and opcode, never mis-executed), runtime-synthesis §2.3 (the metaneff
 * binding). Ours: the multi-op extension (`virtual` vars as intermediate buffers, the Pool.json `tensors` views, and
 * a metaneff with its checkpoint carried inside the NEFF, where the seed's rides beside it; docs/onnx.md, "What the
 * NEFF holds").
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { decodeInstruction, decodeSlotHeaderWord, Opcode, opcodeName, SLOT_BYTES, SLOT_WORD_LEN } from "../isa.ts";
import type { NeffFile } from "../neff/neff_file.ts";
import { DTYPE_BYTES, type NeffTensor } from "../neff/neff_signature.ts";
import { NrtStatus } from "../status.ts";
import { describeValue } from "../tensor.ts";
import { CHECKPOINT_DIR } from "./custom_op_neff.ts";
import type { MetaNeff } from "./metaneff.ts";

/** A Q7 library of the model (`kbin_ucode_lib`). */
export interface KelfLibrary {
  /** Library name. */
  readonly name: string;
  /** The image (WebAssembly). */
  readonly image: Uint8Array;
  /** `cpu_id` (always 0 once validated). */
  readonly cpuId: number;
  /** `total_cpus`: 1 or 8. */
  readonly totalCpus: 1 | 8;
  /** Functions and their opcodes. */
  readonly functions: ReadonlyArray<{ readonly opcode: number; readonly name: string }>;
}

/** An intermediate device buffer (a `virtual` var), allocated by the model at load. */
export interface KelfBuffer {
  /** Var name. */
  readonly name: string;
  /** Size in bytes. */
  readonly size: number;
}

/** A tensor over a byte range of an I/O tensor or a buffer (Pool.json `tensors`). */
export interface KelfView {
  /** View name. */
  readonly name: string;
  /** What it lies in: index i < io.length is {@linkcode KelfModel.io}[i], else buffers[i - io.length]. */
  readonly base: number;
  /** Byte offset in the base. */
  readonly offset: number;
  /** NEFF dtype name. */
  readonly dtype: string;
  /** Shape. */
  readonly shape: readonly number[];
  /** Byte size. */
  readonly size: number;
}

/** One custom-op call in Pool-stream order. */
export interface KelfCall {
  /** EXTENDED_INST opcode. */
  readonly opcode: number;
  /** The inputs: index i < io.length is {@linkcode KelfModel.io}[i], else views[i - io.length]. */
  readonly inputs: readonly number[];
  /** The outputs, indexed as the inputs are. */
  readonly outputs: readonly number[];
  /** Scalar arguments. */
  readonly ints: readonly bigint[];
  /** The library that implements the opcode. */
  readonly library: KelfLibrary;
  /** Function name in the library. */
  readonly fn: string;
}

/** The loaded model IR. */
export interface KelfModel {
  /** NEFF header name. */
  readonly name: string;
  /** `kelf-0.json` target. */
  readonly target: string;
  /** Inputs then outputs: index i == var_id i == tensor-set ordinal i (seed: runtime-synthesis §2.3). */
  readonly io: readonly NeffTensor[];
  /** Number of inputs at the front of {@linkcode KelfModel.io}. */
  readonly inputCount: number;
  /** Libraries, in NEFF order. */
  readonly libraries: readonly KelfLibrary[];
  /** Calls, in Pool-stream order. */
  readonly calls: readonly KelfCall[];
  /** Intermediate buffers (`virtual` vars). */
  readonly buffers: readonly KelfBuffer[];
  /** Views the calls name (Pool.json `tensors`). */
  readonly views: readonly KelfView[];
  /** The NEFF's own metaneff (`metaneff.json`), used when the caller passes none. */
  readonly metaneff?: MetaNeff;
  /** The data its `INPUT_WEIGHT` / `INPUT_STATE` tensors name, by checkpoint key (`checkpoint/<key>` members). */
  readonly checkpoint: ReadonlyMap<string, Uint8Array>;
}

type Json = Record<string, unknown>;

function invalid(name: string, why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot load NEFF "${name}": ${why}`);
}

function parse(neff: NeffFile, member: string): Json {
  const bytes = neff.members.get(member);
  if (bytes === undefined) throw invalid(neff.header.name, `member ${member} is missing`);
  try {
    const v = JSON.parse(new TextDecoder().decode(bytes));
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new TypeError("not an object");
    return v as Json;
  } catch (e) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot load NEFF "${neff.header.name}": ${member} is not a JSON object`,
      { cause: e },
    );
  }
}

const hex = (n: number): string => `0x${n.toString(16).padStart(2, "0")}`;

/**
 * `kelf_load`: validates every engine stream and the custom-op extension and returns the model IR.
 *
 * @throws {NrtError} `NRT_INVALID` for anything the simulator cannot run or the seed's parser rejects.
 */
export function kelfLoad(neff: NeffFile): KelfModel {
  const name = neff.header.name;
  if (neff.graphs.length === 0) throw invalid(name, "kelf-0.json lists no graphs");
  // Every engine stream of every subgraph: refuse opcodes the simulator does not model, naming engine/slot/opcode.
  for (const g of neff.graphs) {
    for (const e of g.def.engines) {
      const bytes = e.instructions.bytes;
      for (let slot = 0; slot * SLOT_BYTES < bytes.byteLength; slot++) {
        const { wordLen, opcode } = decodeSlotHeaderWord(bytes, slot * SLOT_BYTES);
        const ok = e.engine === "pool" && wordLen === SLOT_WORD_LEN && opcode === Opcode.EXTENDED_INST;
        if (!ok) {
          const known = opcodeName(opcode);
          throw invalid(
            name,
            `graph ${g.name} engine ${e.engine} slot ${slot} has opcode ${hex(opcode)}` +
              (wordLen !== SLOT_WORD_LEN ? ` with word_len ${hex(wordLen)}` : "") +
              (known
                ? ` (${known} is runtime-synthesized, not a NEFF instruction)`
                : ", which the simulator does not model"),
          );
        }
      }
    }
  }
  if (neff.graphs.length !== 1) throw invalid(name, `${neff.graphs.length} subgraphs; custom-op NEFFs carry one`);
  const g = neff.graphs[0];
  const pool = g.def.engines.find((e) => e.engine === "pool");
  const io = [...neff.inputs, ...neff.outputs];
  const inputCount = neff.inputs.length;
  const own = ownBinding(neff);
  if (pool === undefined || pool.config === undefined) {
    return { name, target: neff.target, io, inputCount, libraries: [], calls: [], buffers: [], views: [], ...own };
  }
  const cfg = parse(neff, pool.config);
  const dir = pool.config.slice(0, pool.config.lastIndexOf("/") + 1);
  const libs: KelfLibrary[] = [];
  const rawLibs = cfg.ucode_libs ?? [];
  if (!Array.isArray(rawLibs)) throw invalid(name, `${pool.config} ucode_libs is not an array`);
  for (const [i, raw] of rawLibs.entries()) {
    if (typeof raw !== "object" || raw === null) {
      throw invalid(name, `${pool.config} ucode_libs[${i}] is not an object`);
    }
    const l = raw as Json;
    const libName = typeof l.name === "string" ? l.name : `lib${i}`;
    const cpuId = l.cpu_id ?? 0, total = l.total_cpus;
    // seed: spmd-teardown §1.1 — assert "cpu_id == 0"; total_cpus must be 1 or 8.
    if (cpuId !== 0) {
      throw invalid(name, `UCode Library ${libName} has invalid cpu_id ${describeValue(cpuId)} (must be 0)`);
    }
    if (total !== 1 && total !== 8) {
      throw invalid(name, `UCode Library ${libName} has invalid number of total cpus ${describeValue(total)}`);
    }
    if (typeof l.file !== "string") throw invalid(name, `UCode Library ${libName} names no image file`);
    const image = neff.members.get(dir + l.file);
    if (image === undefined) throw invalid(name, `UCode Library ${libName} image ${dir + l.file} is missing`);
    const fns = Array.isArray(l.functions) ? l.functions : [];
    const functions = fns.map((f, k) => {
      const o = f as Json;
      if (
        !Number.isInteger(o?.opcode) || (o.opcode as number) < 0 || (o.opcode as number) > 0xffff ||
        typeof o.name !== "string"
      ) {
        throw invalid(name, `UCode Library ${libName} function ${k} needs an opcode 0..65535 and a name`);
      }
      return { opcode: o.opcode as number, name: o.name };
    });
    libs.push({ name: libName, image, cpuId: 0, totalCpus: total, functions });
  }
  const byOpcode = new Map<number, { library: KelfLibrary; fn: string }>();
  for (const l of libs) {
    for (const f of l.functions) {
      if (byOpcode.has(f.opcode)) throw invalid(name, `opcode ${f.opcode} is bound twice`);
      byOpcode.set(f.opcode, { library: l, fn: f.name });
    }
  }
  const rawCalls = Array.isArray(cfg.calls) ? cfg.calls : [];
  const ioNames = new Set(io.map((t) => t.name));
  const buffers: KelfBuffer[] = g.def.vars.filter((v) => v.type === "virtual").map((v) => {
    if (v.size === undefined || v.size <= 0) throw invalid(name, `virtual var "${v.name}" needs a positive size`);
    if (ioNames.has(v.name)) throw invalid(name, `virtual var "${v.name}" has the name of an input or output`);
    return { name: v.name, size: v.size };
  });
  const views = readViews(name, cfg.tensors, pool.config, io, buffers);
  // Operand names → index (io first, then views); maps, so a NEFF with many views and calls loads in linear time.
  const operands = new Map<unknown, number>();
  views.forEach((v, i) => operands.set(v.name, io.length + i));
  for (let i = io.length - 1; i >= 0; i--) operands.set(io[i].name, i); // the first of a repeated name wins
  const index = (n: unknown, where: string): number => {
    const k = operands.get(n);
    if (k === undefined) throw invalid(name, `${where} names unknown tensor ${JSON.stringify(n)}`);
    return k;
  };
  /** The var an operand lies in: an io index, or io.length + a buffer index. */
  const baseOf = (k: number): number => (k < io.length ? k : views[k - io.length].base);
  const calls: KelfCall[] = [];
  const bytes = pool.instructions.bytes;
  for (let slot = 0; slot * SLOT_BYTES < bytes.byteLength; slot++) {
    const ins = decodeInstruction(bytes, slot * SLOT_BYTES);
    if (ins?.op !== Opcode.EXTENDED_INST) throw invalid(name, `pool slot ${slot} is not EXTENDED_INST`);
    const raw = rawCalls[ins.call] as Json | undefined;
    if (raw === undefined || raw.opcode !== ins.opcode) {
      throw invalid(name, `pool slot ${slot} refers to call ${ins.call} which does not match`);
    }
    const bound = byOpcode.get(ins.opcode);
    if (bound === undefined) {
      throw invalid(name, `pool slot ${slot} calls opcode ${ins.opcode} which no UCode Library provides`);
    }
    const ins2 = Array.isArray(raw.inputs) ? raw.inputs : [], outs = Array.isArray(raw.outputs) ? raw.outputs : [];
    const ints = Array.isArray(raw.ints) ? raw.ints : [];
    calls.push({
      opcode: ins.opcode,
      inputs: ins2.map((n) => index(n, `call ${ins.call}`)),
      outputs: outs.map((n) => {
        const k = index(n, `call ${ins.call}`);
        if (baseOf(k) < inputCount) throw invalid(name, `call ${ins.call} writes input ${JSON.stringify(n)}`);
        return k;
      }),
      ints: ints.map((x) => scalar(name, x, ins.call)),
      library: bound.library,
      fn: bound.fn,
    });
  }
  return { name, target: neff.target, io, inputCount, libraries: libs, calls, buffers, views, ...own };
}

const I64_MIN = -(2n ** 63n), I64_MAX = 2n ** 63n - 1n;

/** A call's scalar: a safe integer, or an i64 written as a decimal string (docs/onnx.md). */
function scalar(model: string, x: unknown, call: number): bigint {
  if (Number.isSafeInteger(x)) return BigInt(x as number);
  if (typeof x === "string" && /^-?[0-9]{1,20}$/.test(x)) {
    const v = BigInt(x);
    if (v >= I64_MIN && v <= I64_MAX) return v;
  }
  throw invalid(model, `call ${call} has a scalar that is not a 64-bit integer`);
}

/** The NEFF's own metaneff and checkpoint members, when it carries them. */
function ownBinding(neff: NeffFile): { metaneff?: MetaNeff; checkpoint: ReadonlyMap<string, Uint8Array> } {
  const checkpoint = new Map<string, Uint8Array>();
  for (const [path, bytes] of neff.members) {
    if (path.startsWith(CHECKPOINT_DIR)) checkpoint.set(path.slice(CHECKPOINT_DIR.length), bytes);
  }
  // bindMetaneff validates the content at load; here it only has to be an object.
  return neff.members.has("metaneff.json")
    ? { metaneff: parse(neff, "metaneff.json") as unknown as MetaNeff, checkpoint }
    : { checkpoint };
}

/** Pool.json `tensors`: each view's base, byte range, dtype and shape, checked against its base. */
function readViews(
  model: string,
  raw: unknown,
  where: string,
  io: readonly NeffTensor[],
  buffers: readonly KelfBuffer[],
): KelfView[] {
  if (raw === undefined) return [];
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw invalid(model, `${where} tensors is not an object`);
  }
  const bases = [...io.map((t) => ({ name: t.name, size: t.size })), ...buffers];
  const baseIndex = new Map<unknown, number>();
  for (let i = bases.length - 1; i >= 0; i--) baseIndex.set(bases[i].name, i); // the first of a repeated name wins
  return Object.entries(raw as Json).map(([vname, e]) => {
    const bad = (why: string) => invalid(model, `${where} tensor ${JSON.stringify(vname)} ${why}`);
    if (typeof e !== "object" || e === null) throw bad("is not an object");
    const v = e as Json;
    if (baseIndex.has(vname)) throw bad("has the name of a var");
    const base = baseIndex.get(v.var);
    if (base === undefined) throw bad(`lies in unknown var ${JSON.stringify(v.var)}`);
    const elem = typeof v.dtype === "string" && Object.hasOwn(DTYPE_BYTES, v.dtype) ? DTYPE_BYTES[v.dtype] : undefined;
    if (elem === undefined) throw bad(`has unknown dtype ${JSON.stringify(v.dtype)}`);
    const shape = v.shape;
    if (
      !Array.isArray(shape) || shape.length > 8 || !shape.every((d) => Number.isSafeInteger(d) && (d as number) > 0)
    ) {
      throw bad("needs a shape of at most 8 positive integers");
    }
    const size = (shape as number[]).reduce((a, d) => a * d, elem);
    const offset = v.offset;
    if (
      !Number.isSafeInteger(offset) || (offset as number) < 0 || !Number.isSafeInteger(size) ||
      (offset as number) + size > bases[base].size
    ) {
      throw bad(`does not fit in ${JSON.stringify(v.var)} (${bases[base].size} bytes)`);
    }
    return { name: vname, base, offset: offset as number, dtype: v.dtype as string, shape: shape as number[], size };
  });
}
