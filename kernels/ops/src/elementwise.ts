// Binary elementwise ops with numpy broadcasting, and Cast. The lowering passes the output shape and each
// input's strides (0 along a broadcast dimension) after merging dimensions; each core takes a contiguous,
// 16-element-aligned share of the output. float32 inner runs use 128-bit SIMD when both inputs are contiguous
// or broadcast along the innermost dimension.
import { alignedChunk, customop_cleanup, customop_total_cpus, get_cpu_id, localScratch, nextInput, nextInt, nextOutput } from "./_abi";
import { pow64 } from "./_math";
import { walkAdvance, walkCount, walkInnerLeft, walkOff, walkRead, walkSeek, walkStride } from "./_walk";

// Binary op codes (lowering.ts BinaryOp).
const ADD: i32 = 0;
const SUB: i32 = 1;
const MUL: i32 = 2;
const DIV: i32 = 3;
const MAX: i32 = 4;
const MIN: i32 = 5;
const POW: i32 = 6;
const PRELU: i32 = 7;
const MOD: i32 = 8; // integer Mod (fmod = 0): the sign of the divisor
const FMOD: i32 = 9; // fmod = 1: the sign of the dividend

@inline function opF32(op: i32, a: f32, b: f32): f32 {
  if (op == ADD) return a + b;
  if (op == SUB) return a - b;
  if (op == MUL) return a * b;
  if (op == DIV) return a / b;
  if (op == MAX) return max<f32>(a, b);
  if (op == MIN) return min<f32>(a, b);
  if (op == POW) return <f32>pow64(<f64>a, <f64>b);
  if (op == PRELU) return a < 0 ? a * b : a;
  // FMOD: a - trunc(a / b) · b, computed exactly in float64 for float32 operands.
  const fa = <f64>a, fb = <f64>b;
  return <f32>(fa - trunc<f64>(fa / fb) * fb);
}

@inline function opV(op: i32, a: v128, b: v128): v128 {
  if (op == ADD) return f32x4.add(a, b);
  if (op == SUB) return f32x4.sub(a, b);
  if (op == MUL) return f32x4.mul(a, b);
  if (op == DIV) return f32x4.div(a, b);
  if (op == MAX) return f32x4.max(a, b);
  if (op == MIN) return f32x4.min(a, b);
  // PRELU: select a · b where a < 0.
  return v128.bitselect(f32x4.mul(a, b), a, f32x4.lt(a, f32x4.splat(0)));
}

/** True for the ops with a SIMD form. */
@inline function hasSimd(op: i32): bool {
  return op != POW && op != FMOD;
}

/** One run of `n` outputs: a at pa (stride sa elements), b at pb (stride sb), y contiguous at py. */
@inline function runF32(op: i32, pa: i32, sa: i32, pb: i32, sb: i32, py: i32, n: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD && hasSimd(op)) {
    if (sa == 1 && sb == 1) {
      for (; i + 4 <= n; i += 4) {
        v128.store(py + (i << 2), opV(op, v128.load(pa + (i << 2)), v128.load(pb + (i << 2))));
      }
    } else if (sa == 1 && sb == 0) {
      const vb = v128.load32_splat(pb);
      for (; i + 4 <= n; i += 4) v128.store(py + (i << 2), opV(op, v128.load(pa + (i << 2)), vb));
    } else if (sa == 0 && sb == 1) {
      const va = v128.load32_splat(pa);
      for (; i + 4 <= n; i += 4) v128.store(py + (i << 2), opV(op, va, v128.load(pb + (i << 2))));
    }
  }
  for (; i < n; i++) {
    store<f32>(py + (i << 2), opF32(op, load<f32>(pa + ((i * sa) << 2)), load<f32>(pb + ((i * sb) << 2))));
  }
}

@inline function dispatchF32(op: i32, pa: i32, sa: i32, pb: i32, sb: i32, py: i32, n: i32): void {
  switch (op) {
    case ADD: runF32(ADD, pa, sa, pb, sb, py, n); break;
    case SUB: runF32(SUB, pa, sa, pb, sb, py, n); break;
    case MUL: runF32(MUL, pa, sa, pb, sb, py, n); break;
    case DIV: runF32(DIV, pa, sa, pb, sb, py, n); break;
    case MAX: runF32(MAX, pa, sa, pb, sb, py, n); break;
    case MIN: runF32(MIN, pa, sa, pb, sb, py, n); break;
    case POW: runF32(POW, pa, sa, pb, sb, py, n); break;
    case PRELU: runF32(PRELU, pa, sa, pb, sb, py, n); break;
    default: runF32(FMOD, pa, sa, pb, sb, py, n);
  }
}

@inline function opInt<T>(op: i32, a: T, b: T): T {
  if (op == ADD) return a + b;
  if (op == SUB) return a - b;
  if (op == MUL) return a * b;
  // Integer division truncates toward zero; a zero divisor traps (the call faults rather than lie).
  if (op == DIV) return a / b;
  if (op == MAX) return a > b ? a : b;
  if (op == MIN) return a < b ? a : b;
  if (op == FMOD) return a % b;
  // MOD: the result takes the divisor's sign (Python's %).
  const r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

@inline function runInt<T>(op: i32, pa: i32, sa: i32, pb: i32, sb: i32, py: i32, n: i32): void {
  const s = <i32>sizeof<T>();
  for (let i = 0; i < n; i++) store<T>(py + i * s, opInt<T>(op, load<T>(pa + i * sa * s), load<T>(pb + i * sb * s)));
}

@inline function dispatchInt<T>(op: i32, pa: i32, sa: i32, pb: i32, sb: i32, py: i32, n: i32): void {
  switch (op) {
    case ADD: runInt<T>(ADD, pa, sa, pb, sb, py, n); break;
    case SUB: runInt<T>(SUB, pa, sa, pb, sb, py, n); break;
    case MUL: runInt<T>(MUL, pa, sa, pb, sb, py, n); break;
    case DIV: runInt<T>(DIV, pa, sa, pb, sb, py, n); break;
    case MAX: runInt<T>(MAX, pa, sa, pb, sb, py, n); break;
    case MIN: runInt<T>(MIN, pa, sa, pb, sb, py, n); break;
    case FMOD: runInt<T>(FMOD, pa, sa, pb, sb, py, n); break;
    default: runInt<T>(MOD, pa, sa, pb, sb, py, n);
  }
}

/** Shared body of the binary kernels: reads [op, rank, dims, strides of A, strides of B], walks this core's share. */
@inline function binary<T>(): void {
  const pa = nextInput(), pb = nextInput(), py = nextOutput();
  const op = nextInt(), rank = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const w = localScratch();
    walkRead(w, rank, 2);
    const count = walkCount(w, rank);
    const chunk = alignedChunk(count, total, 16);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    const s = <i32>sizeof<T>();
    const sa = walkStride(w, 0, rank - 1), sb = walkStride(w, 1, rank - 1);
    if (pos < end) walkSeek(w, rank, 2, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(w, rank), end - pos);
      const a = pa + walkOff(w, 0) * s, b = pb + walkOff(w, 1) * s, y = py + pos * s;
      if (isFloat<T>()) dispatchF32(op, a, sa, b, sb, y, run);
      else dispatchInt<T>(op, a, sa, b, sb, y, run);
      pos += run;
      walkAdvance(w, rank, 2, run);
    }
  }
  customop_cleanup();
}

/**
 * float32 Y = op(A, B) with broadcasting. ints: op (0 Add, 1 Sub, 2 Mul, 3 Div, 4 Max, 5 Min, 6 Pow, 7 PRelu,
 * 9 Mod with fmod = 1), rank r (1..8), the r output dims, A's r strides, B's r strides (elements).
 */
export function binary_f32(): void {
  binary<f32>();
}

/** int32 Y = op(A, B): as binary_f32, with ops 0 Add, 1 Sub, 2 Mul, 3 Div (truncating), 4 Max, 5 Min, 8 Mod, 9 Fmod. */
export function binary_i32(): void {
  binary<i32>();
}

/** int64 Y = op(A, B): as binary_i32. */
export function binary_i64(): void {
  binary<i64>();
}

// Descriptor dtype codes (docs/kernel-abi.md).
const T_F32: i32 = 0;
const T_I8: i32 = 3;
const T_U8: i32 = 4;
const T_I16: i32 = 5;
const T_U16: i32 = 6;
const T_I32: i32 = 7;
const T_U32: i32 = 8;
// deno-lint-ignore no-unused-vars -- listed for the whole code table; int64 and uint64 are the default case
const T_I64: i32 = 9;
const T_U64: i32 = 10;
const T_F64: i32 = 11;
const T_BOOL: i32 = 12;

@inline function isFloatCode(t: i32): bool {
  return t == T_F32 || t == T_F64;
}

@inline function sizeOfCode(t: i32): i32 {
  if (t == T_I8 || t == T_U8 || t == T_BOOL) return 1;
  if (t == T_I16 || t == T_U16) return 2;
  if (t == T_F32 || t == T_I32 || t == T_U32) return 4;
  return 8;
}

@inline function readFloat(t: i32, p: i32): f64 {
  return t == T_F32 ? <f64>load<f32>(p) : load<f64>(p);
}

@inline function readInt(t: i32, p: i32): i64 {
  switch (t) {
    case T_I8: return <i64>load<i8>(p);
    case T_U8: return <i64>load<u8>(p);
    case T_BOOL: return load<u8>(p) != 0 ? 1 : 0;
    case T_I16: return <i64>load<i16>(p);
    case T_U16: return <i64>load<u16>(p);
    case T_I32: return <i64>load<i32>(p);
    case T_U32: return <i64>load<u32>(p);
    default: return load<i64>(p);
  }
}

@inline function writeInt(t: i32, p: i32, v: i64): void {
  switch (t) {
    case T_I8: case T_U8: store<u8>(p, <u8>v); break;
    case T_BOOL: store<u8>(p, v != 0 ? 1 : 0); break;
    case T_I16: case T_U16: store<u16>(p, <u16>v); break;
    case T_I32: case T_U32: store<u32>(p, <u32>v); break;
    default: store<i64>(p, v);
  }
}

/**
 * Y = cast(X) between float32, float64, bool and the 8- to 64-bit integers, with C++ static_cast semantics:
 * floats truncate toward zero into integers (saturating where C++ leaves it undefined), integers wrap, anything
 * non-zero becomes true. ints: n, source dtype code, destination dtype code.
 */
export function cast(): void {
  const px = nextInput(), py = nextOutput();
  const n = nextInt(), from = nextInt(), to = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const chunk = alignedChunk(n, total, 64);
    const end = min(n, (cpu + 1) * chunk);
    const sx = sizeOfCode(from), sy = sizeOfCode(to);
    for (let i = min(n, cpu * chunk); i < end; i++) {
      const x = px + i * sx, y = py + i * sy;
      if (isFloatCode(from)) {
        const v = readFloat(from, x);
        if (to == T_F32) store<f32>(y, <f32>v);
        else if (to == T_F64) store<f64>(y, v);
        else if (to == T_BOOL) store<u8>(y, v != 0 ? 1 : 0);
        else if (to == T_U64) store<u64>(y, <u64>v);
        else writeInt(to, y, <i64>v);
      } else {
        const v = readInt(from, x);
        // Straight to float32 from the integer, so a 64-bit value is rounded once.
        if (to == T_F32) store<f32>(y, from == T_U64 ? <f32><u64>v : <f32>v);
        else if (to == T_F64) store<f64>(y, from == T_U64 ? <f64><u64>v : <f64>v);
        else writeInt(to, y, v);
      }
    }
  }
  customop_cleanup();
}

// Comparison and logic op codes (lowering.ts CompareOp).
const EQUAL: i32 = 0;
const LESS: i32 = 1;
const LESS_OR_EQUAL: i32 = 2;
const GREATER: i32 = 3;
const GREATER_OR_EQUAL: i32 = 4;
const AND: i32 = 5;
const OR: i32 = 6;
const XOR: i32 = 7;
// deno-lint-ignore no-unused-vars -- listed for the whole code table; Not is the default case
const NOT: i32 = 8; // of A; B is ignored

@inline function compareOp<T>(op: i32, a: T, b: T): bool {
  switch (op) {
    case EQUAL: return a == b;
    case LESS: return a < b;
    case LESS_OR_EQUAL: return a <= b;
    case GREATER: return a > b;
    case GREATER_OR_EQUAL: return a >= b;
    case AND: return a != 0 && b != 0;
    case OR: return a != 0 || b != 0;
    case XOR: return (a != 0) != (b != 0);
    default: return a == 0;
  }
}

/** Shared body of the comparison kernels: as binary<T>, writing bool (one byte per element). */
@inline function compare<T>(): void {
  const pa = nextInput(), pb = nextInput(), py = nextOutput();
  const op = nextInt(), rank = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const w = localScratch();
    walkRead(w, rank, 2);
    const count = walkCount(w, rank);
    const chunk = alignedChunk(count, total, 64);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    const s = <i32>sizeof<T>();
    const sa = walkStride(w, 0, rank - 1) * s, sb = walkStride(w, 1, rank - 1) * s;
    if (pos < end) walkSeek(w, rank, 2, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(w, rank), end - pos);
      const a = pa + walkOff(w, 0) * s, b = pb + walkOff(w, 1) * s;
      for (let i = 0; i < run; i++) store<u8>(py + pos + i, compareOp<T>(op, load<T>(a + i * sa), load<T>(b + i * sb)));
      pos += run;
      walkAdvance(w, rank, 2, run);
    }
  }
  customop_cleanup();
}

/**
 * bool Y = op(A, B) for float32 A, B with broadcasting. ints: op (0 Equal, 1 Less, 2 LessOrEqual, 3 Greater,
 * 4 GreaterOrEqual), rank r, r dims, A's r strides, B's r strides.
 */
export function compare_f32(): void {
  compare<f32>();
}

/** As compare_f32 for int32 operands. */
export function compare_i32(): void {
  compare<i32>();
}

/** As compare_f32 for int64 operands. */
export function compare_i64(): void {
  compare<i64>();
}

/** bool Y = op(A, B) for bool operands: ops 0 Equal, 5 And, 6 Or, 7 Xor, 8 Not (of A; pass A twice). */
export function logic(): void {
  compare<u8>();
}

/** Copies one element of `size` bytes. */
@inline function copyElement(dst: i32, src: i32, size: i32): void {
  if (size == 4) store<u32>(dst, load<u32>(src));
  else if (size == 8) store<u64>(dst, load<u64>(src));
  else if (size == 2) store<u16>(dst, load<u16>(src));
  else store<u8>(dst, load<u8>(src));
}

/**
 * Y = cond ? X : Y' with broadcasting over the three inputs, for any element size. ints: element size, rank r,
 * r dims, cond's r strides, X's r strides, Y''s r strides. Inputs cond (bool), X, Y'; output Y.
 */
export function where(): void {
  const pc = nextInput(), px = nextInput(), pz = nextInput(), py = nextOutput();
  const size = nextInt(), rank = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const w = localScratch();
    walkRead(w, rank, 3);
    const count = walkCount(w, rank);
    const chunk = alignedChunk(count, total, 64);
    const end = min(count, (cpu + 1) * chunk);
    let pos = min(count, cpu * chunk);
    const sc = walkStride(w, 0, rank - 1), sx = walkStride(w, 1, rank - 1) * size;
    const sz = walkStride(w, 2, rank - 1) * size;
    if (pos < end) walkSeek(w, rank, 3, pos);
    while (pos < end) {
      const run = min(walkInnerLeft(w, rank), end - pos);
      const c = pc + walkOff(w, 0), x = px + walkOff(w, 1) * size, z = pz + walkOff(w, 2) * size;
      for (let i = 0; i < run; i++) {
        copyElement(py + (pos + i) * size, load<u8>(c + i * sc) != 0 ? x + i * sx : z + i * sz, size);
      }
      pos += run;
      walkAdvance(w, rank, 3, run);
    }
  }
  customop_cleanup();
}
