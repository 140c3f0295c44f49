/**
 * Memory planning: intermediate values become device buffers the model allocates at load. Values whose lifetimes
 * (first write to last read, in call order) do not overlap share a buffer. Greedy by size with best fit: values
 * in decreasing size each take the smallest buffer whose occupants are all dead or not yet born during its
 * lifetime, else a new buffer. Ours.
 *
 * @module
 */

/** One value to place: its size and lifetime in call indices (inclusive). */
export interface PlanValue {
  /** Value name. */
  readonly name: string;
  /** Size in bytes. */
  readonly bytes: number;
  /** Index of the first call that touches it. */
  readonly first: number;
  /** Index of the last call that touches it. */
  readonly last: number;
}

/** A device buffer of the plan. */
export interface PlannedBuffer {
  /** Buffer id, 0-based. */
  readonly id: number;
  /** Size in bytes (a multiple of {@linkcode BUFFER_ALIGN}). */
  readonly bytes: number;
}

/** The plan. */
export interface MemoryPlan {
  /** The buffers. */
  readonly buffers: readonly PlannedBuffer[];
  /** Where each value lives: its buffer and byte offset in it. */
  readonly assignment: ReadonlyMap<string, { readonly buffer: number; readonly offset: number }>;
  /** One buffer per value: the sum of the values' aligned sizes. */
  readonly naiveBytes: number;
  /** The sum of the buffers' sizes. */
  readonly plannedBytes: number;
}

/** Alignment of every buffer size (the kernels' SBUF placement aligns tensors to 64 bytes). Ours. */
export const BUFFER_ALIGN = 64;

const align = (n: number) => Math.max(BUFFER_ALIGN, Math.ceil(n / BUFFER_ALIGN) * BUFFER_ALIGN);

/**
 * Plans buffers for values.
 *
 * @param values Values with sizes and lifetimes; names must be unique.
 * @returns Buffers, each value's buffer, and the naive and planned totals.
 * @throws {RangeError} for a duplicate name or a lifetime that ends before it starts.
 */
export function planMemory(values: readonly PlanValue[]): MemoryPlan {
  const seen = new Set<string>();
  for (const v of values) {
    if (seen.has(v.name)) throw new RangeError(`Cannot plan memory: value "${v.name}" appears twice`);
    if (v.last < v.first) throw new RangeError(`Cannot plan memory: value "${v.name}" dies before it is born`);
    seen.add(v.name);
  }
  const order = [...values].sort((a, b) => b.bytes - a.bytes || a.first - b.first || (a.name < b.name ? -1 : 1));
  const buffers: { bytes: number; lives: { first: number; last: number }[] }[] = [];
  const assignment = new Map<string, { buffer: number; offset: number }>();
  for (const v of order) {
    const size = align(v.bytes);
    let best = -1;
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i];
      if (b.bytes < size) continue; // sizes only decrease along `order`, so this happens only for equal-rounding ties
      if (b.lives.some((l) => l.first <= v.last && v.first <= l.last)) continue;
      if (best < 0 || b.bytes < buffers[best].bytes) best = i;
    }
    if (best < 0) {
      best = buffers.length;
      buffers.push({ bytes: size, lives: [] });
    }
    buffers[best].lives.push({ first: v.first, last: v.last });
    assignment.set(v.name, { buffer: best, offset: 0 });
  }
  const planned = buffers.map((b, id) => ({ id, bytes: b.bytes }));
  return {
    buffers: planned,
    assignment,
    naiveBytes: values.reduce((a, v) => a + align(v.bytes), 0),
    plannedBytes: planned.reduce((a, b) => a + b.bytes, 0),
  };
}
