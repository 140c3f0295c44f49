/**
 * The loop guard: rewrites a wasm binary so that a kernel spinning in a loop traps once the kill flag in shared
 * memory is set. Neither Bun nor Deno can `terminate()` a Worker spinning in wasm (measured: the Worker keeps
 * running and the process never exits), so this is how the simulator stops a hung Q7 core.
 *
 * Ours: polling the flag at every loop iteration made a 1 MiB vector_add 4.5–6.7× slower on Bun (JavaScriptCore
 * compiles `i32.atomic.load` to a locked read-modify-write) and 1.4–1.6× on Deno. So each function with a loop
 * gets one more i32 local, a countdown set at entry, and every loop is wrapped so that its header only decrements
 * the countdown and leaves the loop when it is zero; the poll sits outside the loop, then re-enters it:
 *
 * ```text
 * block $exit bt                          ;; bt = the loop's own block type
 *   loop $retry bt
 *     block $poll
 *       loop $l bt
 *         (br_if $poll (i32.eqz (local.get $c)))
 *         (local.set $c (i32.sub (local.get $c) (i32.const 1)))
 *         …the original body…             ;; branch depths past $l grow by 3
 *       end
 *       br $exit
 *     end
 *     (if (i32.atomic.load offset=FLAG (i32.const 0)) (then unreachable))
 *     (local.set $c (i32.const INTERVAL))
 *     br $retry
 *   end
 * end
 * ```
 *
 * Keeping the poll out of the loop's body keeps the body small and free of atomics: V8 still unrolls it and
 * JavaScriptCore still rotates it, which an in-loop `if` prevents (`bench/guard.ts` measures the cost). A loop
 * whose block type has parameters keeps the countdown test inline (`if` at the header); the loops of a function
 * with no room for one more local poll at every header.
 *
 * The poll is an atomic load. Polled once per interval, a plain load would cost the same, but nothing makes a
 * compiler reload it: a non-atomic load of an address the loop never stores to is loop-invariant, and
 * JavaScriptCore hoists it (measured: with a plain load at every header, `spin` never stopped on Bun; V8 happened
 * to reload it). A countdown only bounds each activation: a loop calling a function whose own loops run fewer
 * than `interval` iterations per call polls once per `interval` of its own iterations.
 *
 * If the module has loops but no memory, an `env.memory` import is added so the poll has a memory to read.
 *
 * @module
 */

/** Loop iterations between two polls of the kill flag, per function activation. Ours. */
export const GUARD_INTERVAL: number = 4096;

/** Options of {@linkcode guardLoops}. */
export interface GuardOptions {
  /**
   * Loop iterations between two polls of the kill flag (default {@linkcode GUARD_INTERVAL}). 1 polls at every
   * loop header with no countdown, which is the code the guard emitted before the countdown existed.
   */
  interval?: number;
}

const SECTION_TYPE = 1;
const SECTION_IMPORT = 2;
const SECTION_FUNCTION = 3;
const SECTION_MEMORY = 5;
const SECTION_CODE = 10;
/** Locals per function that V8 and JavaScriptCore accept, parameters included. */
const MAX_LOCALS = 50000;
/** `block`/`loop` with no parameters and no results. */
const EMPTY = 0x40;
const OP = {
  unreachable: 0x00,
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  try: 0x06,
  rethrow: 0x09,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  brTable: 0x0e,
  delegate: 0x18,
  tryTable: 0x1f,
  localGet: 0x20,
  localSet: 0x21,
  i32Const: 0x41,
  i32Eqz: 0x45,
  i32Sub: 0x6b,
  brOnNull: 0xd5,
  brOnNonNull: 0xd6,
} as const;

class Reader {
  pos: number;
  constructor(readonly bytes: Uint8Array, pos = 0) {
    this.pos = pos;
  }
  byte(): number {
    if (this.pos >= this.bytes.length) throw new RangeError("Cannot guard wasm module: unexpected end of input");
    return this.bytes[this.pos++];
  }
  /** An unsigned LEB128 (u32 or u64; the value only needs to be exact below 2^53). */
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
    }
  }
  /** A signed LEB128 (s33, s32 or s64); only its value's sign and small magnitudes matter here. */
  signed(): number {
    let result = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    return b & 0x40 ? result - 2 ** shift : result;
  }
  skip(n: number): void {
    this.pos += n;
  }
}

/** Unsigned LEB128. */
function leb(value: number): number[] {
  const out: number[] = [];
  do {
    let b = value % 128;
    value = Math.floor(value / 128);
    if (value !== 0) b |= 0x80;
    out.push(b);
  } while (value !== 0);
  return out;
}

/** Signed LEB128 of a non-negative i32. */
function sleb(value: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = value & 0x7f;
    value >>>= 7;
    if (value === 0 && (b & 0x40) === 0) return [...out, b];
    out.push(b | 0x80);
  }
}

/**
 * Skips a value type, or a block type (empty, a value type or an s33 type index, returned). Reference types with
 * a heap type (0x63, 0x64) carry one more s33.
 */
function skipValueType(r: Reader): number {
  const t = r.signed();
  if (t === -29 || t === -28) r.signed();
  return t;
}

function skipMemarg(r: Reader): void {
  const align = r.u32();
  if (align & 0x40) r.u32(); // multi-memory: an explicit memory index follows
  r.u32();
}

/** Skips the immediates of every opcode except the structured and branch ones, which guardBody rewrites. */
function skipImmediates(r: Reader, op: number): void {
  if ((op >= 0x45 && op <= 0xc4) || op <= 0x01 || op === 0x05 || op === 0x0a || op === 0x0f) return;
  if (op === 0x1a || op === 0x1b || op === 0x19 || op === 0xd1 || op === 0xd3 || op === 0xd4) return;
  if ([0x07, 0x08, 0x10, 0x12, 0x14, 0x15, 0xd2].includes(op)) return void r.u32();
  if (op >= 0x20 && op <= 0x26) return void r.u32();
  if (op === 0x11 || op === 0x13) {
    r.u32();
    r.u32();
    return;
  }
  if (op === 0x1c) {
    const n = r.u32();
    for (let i = 0; i < n; i++) skipValueType(r);
    return;
  }
  if (op >= 0x28 && op <= 0x3e) return skipMemarg(r);
  if (op === 0x3f || op === 0x40) return void r.u32();
  if (op === 0x41 || op === 0x42 || op === 0xd0) return void r.signed();
  if (op === 0x43) return r.skip(4);
  if (op === 0x44) return r.skip(8);
  if (op === 0xfc) return skipPrefixFc(r, r.u32());
  if (op === 0xfd) return skipPrefixFd(r, r.u32());
  if (op === 0xfe) {
    const sub = r.u32();
    if (sub === 0x03) return r.skip(1); // atomic.fence
    return skipMemarg(r);
  }
  throw new RangeError(`Cannot guard wasm module: unsupported opcode 0x${op.toString(16)}`);
}

function skipPrefixFc(r: Reader, sub: number): void {
  if (sub <= 7) return;
  const counts: Record<number, number> = { 8: 2, 9: 1, 10: 2, 11: 1, 12: 2, 13: 1, 14: 2, 15: 1, 16: 1, 17: 1 };
  const n = counts[sub];
  if (n === undefined) throw new RangeError(`Cannot guard wasm module: unsupported opcode 0xfc ${sub}`);
  for (let i = 0; i < n; i++) r.u32();
}

function skipPrefixFd(r: Reader, sub: number): void {
  if (sub <= 11 || sub === 92 || sub === 93) return skipMemarg(r);
  if (sub === 12 || sub === 13) return r.skip(16);
  if (sub >= 21 && sub <= 34) return r.skip(1);
  if (sub >= 84 && sub <= 91) {
    skipMemarg(r);
    return r.skip(1);
  }
}

/** Appends `src` to `dst` (no spread: bodies can be larger than the engine's argument limit). */
function append(dst: number[], src: ArrayLike<number>): void {
  for (let i = 0; i < src.length; i++) dst.push(src[i]);
}

/** What guardBody needs to know about the module. */
interface ModuleFacts {
  /** Parameter count of each type index (0 for struct and array types). */
  typeParams: number[];
  /** `(if (i32.atomic.load offset=FLAG (i32.const 0)) (then unreachable))`. */
  poll: number[];
  interval: number;
}

/** A control frame of the body being copied: `outlined` loops add 3 labels around their own. */
interface Frame {
  outlined: boolean;
  /** Outlined frames from the function frame up to this one, this one included. */
  outlinedDepth: number;
}

/**
 * Copies one function body with its loops guarded. `params` is the function's parameter count. Returns the new
 * body, or null when it has no loop (the body is kept as is).
 */
function guardBody(body: Uint8Array, params: number, facts: ModuleFacts): number[] | null {
  const r = new Reader(body);
  const groups = r.u32();
  const groupsStart = r.pos;
  let locals = params;
  for (let i = 0; i < groups; i++) {
    locals += r.u32();
    skipValueType(r);
  }
  const localsEnd = r.pos;
  // The countdown is the local after the parameters and every declared local.
  const counter = leb(locals);
  const countdown = facts.interval > 1 && locals < MAX_LOCALS;
  const reset = [OP.i32Const, ...sleb(facts.interval), OP.localSet, ...counter];
  const decrement = [OP.localGet, ...counter, OP.i32Const, 1, OP.i32Sub, OP.localSet, ...counter];
  const out: number[] = [];
  const frames: Frame[] = [{ outlined: false, outlinedDepth: 0 }];
  const push = (outlined: boolean) =>
    frames.push({ outlined, outlinedDepth: frames[frames.length - 1].outlinedDepth + (outlined ? 1 : 0) });
  /** A branch depth of the original body → the same target in the rewritten one. */
  const depth = (d: number): number[] => {
    const target = frames.length - 1 - d;
    if (target < 0) throw new RangeError(`Cannot guard wasm module: branch depth ${d} is out of range`);
    return leb(d + 3 * (frames[frames.length - 1].outlinedDepth - frames[target].outlinedDepth));
  };
  let loops = 0;
  while (r.pos < body.length) {
    const start = r.pos;
    const op = r.byte();
    if (op === OP.loop) {
      const type = skipValueType(r);
      const bt = body.subarray(start + 1, r.pos);
      loops++;
      if (!countdown) {
        append(out, body.subarray(start, r.pos));
        append(out, facts.poll);
        push(false);
      } else if (type >= 0 && facts.typeParams[type] > 0) {
        // The parameters are on the stack at the header: test inline rather than branch out with them.
        append(out, body.subarray(start, r.pos));
        append(out, [OP.localGet, ...counter, OP.i32Eqz, OP.if, EMPTY, ...facts.poll, ...reset, OP.end]);
        append(out, decrement);
        push(false);
      } else {
        append(out, [OP.block, ...bt, OP.loop, ...bt, OP.block, EMPTY, OP.loop, ...bt]);
        append(out, [OP.localGet, ...counter, OP.i32Eqz, OP.brIf, 1, ...decrement]);
        push(true);
      }
    } else if (op === OP.end) {
      const frame = frames.pop();
      out.push(OP.end);
      if (frame?.outlined) {
        append(out, [OP.br, 2, OP.end, ...facts.poll, ...reset, OP.br, 0, OP.end, OP.end]);
      }
    } else if (op === OP.block || op === OP.if || op === OP.try) {
      skipValueType(r);
      append(out, body.subarray(start, r.pos));
      push(false);
    } else if (op === OP.tryTable) {
      // Catch labels are relative to the frames outside the try_table.
      skipValueType(r);
      append(out, body.subarray(start, r.pos));
      const n = r.u32();
      append(out, leb(n));
      for (let i = 0; i < n; i++) {
        const kind = r.byte();
        out.push(kind);
        if (kind <= 1) append(out, leb(r.u32())); // catch and catch_ref name a tag
        append(out, depth(r.u32()));
      }
      push(false);
    } else if (op === OP.delegate) {
      frames.pop(); // delegate ends its try; the label is relative to the frames outside it
      out.push(op);
      append(out, depth(r.u32()));
    } else if (op === OP.br || op === OP.brIf || op === OP.rethrow || op === OP.brOnNull || op === OP.brOnNonNull) {
      out.push(op);
      append(out, depth(r.u32()));
    } else if (op === OP.brTable) {
      const n = r.u32();
      append(out, [op, ...leb(n)]);
      for (let i = 0; i <= n; i++) append(out, depth(r.u32()));
    } else {
      skipImmediates(r, op);
      append(out, body.subarray(start, r.pos));
    }
  }
  if (loops === 0) return null;
  const guarded: number[] = countdown ? leb(groups + 1) : [];
  append(guarded, body.subarray(countdown ? groupsStart : 0, localsEnd));
  if (!countdown) {
    append(guarded, out);
    return guarded;
  }
  append(guarded, [1, 0x7f]); // one more i32 local: the countdown
  // The first poll comes after `interval` iterations: count down from interval - 1.
  append(guarded, [OP.i32Const, ...sleb(facts.interval - 1), OP.localSet, ...counter]);
  append(guarded, out);
  return guarded;
}

/** Parameter count of every type index; a rec group's subtypes each take one index. */
function typeParams(payload: Uint8Array): number[] {
  const r = new Reader(payload);
  const out: number[] = [];
  const subtype = (form: number) => {
    if (form === 0x50 || form === 0x4f) { // sub / sub final: supertypes, then the composite type
      const n = r.u32();
      for (let i = 0; i < n; i++) r.u32();
      form = r.byte();
    }
    if (form === 0x60) {
      const params = r.u32();
      for (let i = 0; i < params; i++) skipValueType(r);
      const results = r.u32();
      for (let i = 0; i < results; i++) skipValueType(r);
      out.push(params);
    } else if (form === 0x5f || form === 0x5e) {
      const fields = form === 0x5f ? r.u32() : 1;
      for (let i = 0; i < fields; i++) {
        skipValueType(r); // packed i8 and i16 read as one byte too
        r.byte(); // mutability
      }
      out.push(0);
    } else {
      throw new RangeError(`Cannot guard wasm module: unknown type form 0x${form.toString(16)}`);
    }
  };
  const n = r.u32();
  for (let i = 0; i < n; i++) {
    const form = r.byte();
    if (form !== 0x4e) subtype(form);
    else for (let k = r.u32(); k > 0; k--) subtype(r.byte());
  }
  return out;
}

interface Section {
  id: number;
  payload: Uint8Array;
}

function section(id: number, payload: ArrayLike<number>): number[] {
  const out = [id, ...leb(payload.length)];
  append(out, payload);
  return out;
}

/** Imported functions and memories: function indices start after the imported functions. */
function countImports(payload: Uint8Array): { functions: number; memories: number } {
  const r = new Reader(payload);
  let functions = 0;
  let memories = 0;
  const n = r.u32();
  for (let i = 0; i < n; i++) {
    r.skip(r.u32());
    r.skip(r.u32());
    const kind = r.byte();
    if (kind === 0x00 || kind === 0x04) {
      if (kind === 0x04) r.byte();
      r.u32();
      if (kind === 0x00) functions++;
    } else if (kind === 0x01 || kind === 0x02) {
      if (kind === 0x01) skipValueType(r);
      const flags = r.byte();
      r.u32();
      if (flags & 1) r.u32();
      if (kind === 0x02) memories++;
    } else if (kind === 0x03) {
      skipValueType(r);
      r.byte();
    } else {
      throw new RangeError(`Cannot guard wasm module: unknown import kind ${kind}`);
    }
  }
  return { functions, memories };
}

/** The `env.memory` import added to modules that have loops but no memory: shared, 0 to 65536 pages. */
function memoryImport(): number[] {
  const name = (s: string) => [s.length, ...Array.from(s, (c) => c.charCodeAt(0))];
  return [...name("env"), ...name("memory"), 0x02, 0x03, 0x00, ...leb(65536)];
}

/**
 * Returns `wasm` with every loop guarded by the kill flag at Q7 address `flagAddr`: once the flag is non-zero,
 * a running loop traps (`unreachable`) within `interval` iterations. A module without loops is returned
 * unchanged.
 *
 * @example Guard a kernel before compiling it
 * ```ts
 * import { KILL_FLAG_ADDR } from "./_abi.ts";
 * const wasm = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]); // an empty module: nothing to guard
 * const guarded = guardLoops(wasm, KILL_FLAG_ADDR);
 * ```
 *
 * @param wasm the module binary
 * @param flagAddr Q7 address of the i32 kill flag (4-byte aligned), in memory 0
 * @param options the poll interval
 * @returns the guarded binary
 */
export function guardLoops(wasm: Uint8Array, flagAddr: number, options: GuardOptions = {}): Uint8Array {
  const interval = options.interval ?? GUARD_INTERVAL;
  if (!Number.isInteger(interval) || interval < 1 || interval > 0x7fffffff) {
    throw new RangeError(`Cannot guard wasm module: interval ${interval} is not an integer in [1, 2^31)`);
  }
  if (!Number.isInteger(flagAddr) || flagAddr < 0 || flagAddr > 0xfffffffc || flagAddr % 4 !== 0) {
    throw new RangeError(`Cannot guard wasm module: flag address ${flagAddr} is not a 4-byte aligned u32`);
  }
  const r = new Reader(wasm, 8);
  const sections: Section[] = [];
  while (r.pos < wasm.length) {
    const id = r.byte();
    const size = r.u32();
    sections.push({ id, payload: wasm.subarray(r.pos, r.pos + size) });
    r.skip(size);
  }
  const payload = (id: number) => sections.find((s) => s.id === id)?.payload;
  const imports = payload(SECTION_IMPORT);
  const imported = imports ? countImports(imports) : { functions: 0, memories: 0 };
  const memorySection = payload(SECTION_MEMORY);
  const memories = imported.memories + (memorySection ? new Reader(memorySection).u32() : 0);
  const types = payload(SECTION_TYPE);
  const facts: ModuleFacts = {
    typeParams: types ? typeParams(types) : [],
    // (if (i32.atomic.load align=4 offset=flagAddr (i32.const 0)) (then unreachable))
    poll: [OP.i32Const, 0x00, 0xfe, 0x10, 0x02, ...leb(flagAddr), OP.if, EMPTY, OP.unreachable, OP.end],
    interval,
  };
  const functionTypes: number[] = [];
  const functions = payload(SECTION_FUNCTION);
  if (functions) {
    const fr = new Reader(functions);
    for (let n = fr.u32(); n > 0; n--) functionTypes.push(fr.u32());
  }
  let guardedBodies = 0;
  const rebuilt = sections.map((s): number[] => {
    if (s.id !== SECTION_CODE) return section(s.id, s.payload);
    const cr = new Reader(s.payload);
    const count = cr.u32();
    const code: number[] = leb(count);
    for (let i = 0; i < count; i++) {
      const size = cr.u32();
      const body = s.payload.subarray(cr.pos, cr.pos + size);
      cr.skip(size);
      const params = facts.typeParams[functionTypes[i]];
      if (params === undefined) {
        throw new RangeError(`Cannot guard wasm module: function ${imported.functions + i} has no function type`);
      }
      const guarded = guardBody(body, params, facts);
      if (guarded) guardedBodies++;
      append(code, leb(guarded ? guarded.length : body.length));
      append(code, guarded ?? body);
    }
    return section(SECTION_CODE, code);
  });
  if (guardedBodies === 0) return wasm;
  if (memories === 0) {
    const at = sections.findIndex((s) => s.id === SECTION_IMPORT);
    if (at >= 0) {
      const ir = new Reader(sections[at].payload);
      const n = ir.u32();
      const payload = leb(n + 1);
      append(payload, sections[at].payload.subarray(ir.pos));
      append(payload, memoryImport());
      rebuilt[at] = section(SECTION_IMPORT, payload);
    } else {
      // The import section goes after the type section (id 1) and any custom sections before it.
      let insert = 0;
      while (insert < sections.length && (sections[insert].id === 0 || sections[insert].id === 1)) insert++;
      rebuilt.splice(insert, 0, section(SECTION_IMPORT, [1, ...memoryImport()]));
    }
  }
  const out: number[] = Array.from(wasm.subarray(0, 8));
  for (const s of rebuilt) append(out, s);
  return new Uint8Array(out);
}
