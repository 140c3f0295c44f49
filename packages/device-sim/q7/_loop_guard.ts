/**
 * The loop guard: rewrites a wasm binary so that every `loop` body starts by polling a kill flag in shared memory
 * and traps once it is set. Neither Bun nor Deno can `terminate()` a Worker spinning in wasm (measured: the
 * Worker keeps running and the process never exits), so this is how the simulator stops a hung Q7 core.
 *
 * The inserted code is `(if (i32.atomic.load offset=FLAG (i32.const 0)) (then unreachable))`. If the module
 * has loops but no memory, an `env.memory` import is added so the poll has a memory to read.
 *
 * @module
 */

const SECTION_IMPORT = 2;
const SECTION_MEMORY = 5;
const SECTION_CODE = 10;

class Reader {
  pos: number;
  constructor(readonly bytes: Uint8Array, pos = 0) {
    this.pos = pos;
  }
  byte(): number {
    if (this.pos >= this.bytes.length) throw new RangeError("Cannot guard wasm module: unexpected end of input");
    return this.bytes[this.pos++];
  }
  /** An unsigned LEB128 of up to 32 bits. */
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

/** Skips a value type; reference types with a heap type (0x63, 0x64) carry one more s33. */
function skipValueType(r: Reader): void {
  const t = r.signed();
  if (t === -29 || t === -28) r.signed();
}

/** Skips a block type: empty (0x40), a value type, or an s33 type index. */
function skipBlockType(r: Reader): void {
  const t = r.signed();
  if (t === -29 || t === -28) r.signed();
}

function skipMemarg(r: Reader): void {
  const align = r.u32();
  if (align & 0x40) r.u32(); // multi-memory: an explicit memory index follows
  r.u32();
}

/** Copies one function body, inserting `guard` after every loop's block type. */
function guardBody(body: Uint8Array, guard: number[]): { bytes: number[]; loops: number } {
  const r = new Reader(body);
  const out: number[] = [];
  const copyTo = (from: number) => {
    for (let i = from; i < r.pos; i++) out.push(body[i]);
  };
  const groups = r.u32();
  for (let i = 0; i < groups; i++) {
    r.u32();
    skipValueType(r);
  }
  copyTo(0);
  let loops = 0;
  while (r.pos < body.length) {
    const start = r.pos;
    const op = r.byte();
    if (op === 0x03) {
      skipBlockType(r);
      copyTo(start);
      out.push(...guard);
      loops++;
      continue;
    }
    skipImmediates(r, op);
    copyTo(start);
  }
  return { bytes: out, loops };
}

function skipImmediates(r: Reader, op: number): void {
  if ((op >= 0x45 && op <= 0xc4) || op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0a || op === 0x0f) return;
  if (op === 0x1a || op === 0x1b || op === 0x19 || op === 0xd1 || op === 0xd3 || op === 0xd4) return;
  if (op === 0x02 || op === 0x04 || op === 0x06) return skipBlockType(r);
  if (op === 0x1f) { // try_table
    skipBlockType(r);
    const n = r.u32();
    for (let i = 0; i < n; i++) {
      const kind = r.byte();
      if (kind <= 1) r.u32();
      r.u32();
    }
    return;
  }
  if ([0x07, 0x08, 0x09, 0x0c, 0x0d, 0x10, 0x12, 0x14, 0x15, 0x18, 0xd2, 0xd5, 0xd6].includes(op)) {
    r.u32();
    return;
  }
  if (op >= 0x20 && op <= 0x26) return void r.u32();
  if (op === 0x0e) {
    const n = r.u32();
    for (let i = 0; i <= n; i++) r.u32();
    return;
  }
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

interface Section {
  id: number;
  payload: Uint8Array;
}

/** Appends `src` to `dst` (no spread: bodies can be larger than the engine's argument limit). */
function append(dst: number[], src: ArrayLike<number>): void {
  for (let i = 0; i < src.length; i++) dst.push(src[i]);
}

function section(id: number, payload: ArrayLike<number>): number[] {
  const out = [id, ...leb(payload.length)];
  append(out, payload);
  return out;
}

/** The `env.memory` import added to modules that have loops but no memory: shared, 0 to 65536 pages. */
function memoryImport(): number[] {
  const name = (s: string) => [s.length, ...Array.from(s, (c) => c.charCodeAt(0))];
  return [...name("env"), ...name("memory"), 0x02, 0x03, 0x00, ...leb(65536)];
}

/**
 * Returns `wasm` with every loop guarded by the kill flag at Q7 address `flagAddr`; a module without loops is
 * returned unchanged.
 *
 * @param wasm the module binary
 * @param flagAddr Q7 address of the i32 kill flag (4-byte aligned)
 * @returns the guarded binary
 */
export function guardLoops(wasm: Uint8Array, flagAddr: number): Uint8Array {
  const r = new Reader(wasm, 8);
  const sections: Section[] = [];
  while (r.pos < wasm.length) {
    const id = r.byte();
    const size = r.u32();
    sections.push({ id, payload: wasm.subarray(r.pos, r.pos + size) });
    r.skip(size);
  }
  let memories = 0;
  for (const s of sections) {
    const sr = new Reader(s.payload);
    if (s.id === SECTION_MEMORY) memories += sr.u32();
    if (s.id !== SECTION_IMPORT) continue;
    const n = sr.u32();
    for (let i = 0; i < n; i++) {
      sr.skip(sr.u32());
      sr.skip(sr.u32());
      const kind = sr.byte();
      if (kind === 0x00 || kind === 0x04) {
        if (kind === 0x04) sr.byte();
        sr.u32();
      } else if (kind === 0x01 || kind === 0x02) {
        if (kind === 0x01) skipValueType(sr);
        const flags = sr.byte();
        sr.u32();
        if (flags & 1) sr.u32();
        if (kind === 0x02) memories++;
      } else if (kind === 0x03) {
        skipValueType(sr);
        sr.byte();
      } else {
        throw new RangeError(`Cannot guard wasm module: unknown import kind ${kind}`);
      }
    }
  }
  // (if (i32.atomic.load align=4 offset=flagAddr (i32.const 0)) (then unreachable))
  const guard = [0x41, 0x00, 0xfe, 0x10, 0x02, ...leb(flagAddr), 0x04, 0x40, 0x00, 0x0b];
  let loops = 0;
  const out: number[] = Array.from(wasm.subarray(0, 8));
  const rebuilt = sections.map((s): number[] => {
    if (s.id !== SECTION_CODE) return section(s.id, s.payload);
    const cr = new Reader(s.payload);
    const count = cr.u32();
    const code: number[] = leb(count);
    for (let i = 0; i < count; i++) {
      const size = cr.u32();
      const guarded = guardBody(s.payload.subarray(cr.pos, cr.pos + size), guard);
      cr.skip(size);
      loops += guarded.loops;
      append(code, leb(guarded.bytes.length));
      append(code, guarded.bytes);
    }
    return section(SECTION_CODE, code);
  });
  if (loops === 0) return wasm;
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
  for (const s of rebuilt) append(out, s);
  return new Uint8Array(out);
}
