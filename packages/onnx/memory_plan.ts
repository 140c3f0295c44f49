/**
 * Memory planning: intermediate values become device buffers the model allocates at load. Values whose lifetimes
 * (first write to last read, in call order) do not overlap share a buffer. Greedy by size with best fit: values
 * in decreasing size each take the smallest buffer whose occupants are all dead or not yet born during its
 * lifetime (the lowest-numbered of equal sizes), else a new buffer. Ours.
 *
 * Each value costs O(log² n) steps, not a look at every occupant of every buffer (which took 13–28 s for a
 * chain of 99,000 values). Values arrive in decreasing size, so buffers are numbered in decreasing size too, and
 * the best fit is the lowest-numbered free buffer among those as small as the highest-numbered free one. A buffer
 * is free for a value when one of its gaps (before its first occupant, between two, or after its last) starts
 * before the value's first call and ends after its last. Aligned blocks of 1, 2, 4, … buffers each keep their
 * buffers' gaps in a treap ordered by where the gap starts, each subtree knowing its latest gap end, so whether a
 * block has a free buffer is one walk down its treap, and which buffer it is, a walk down the blocks.
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
 * Treaps of gaps, all in one pool of typed arrays; node 0 is the empty tree. A gap's key orders it by where it
 * starts (unique across the plan); `end` is the time rank of the occupant after it (or one past every rank), and
 * `maxEnd` the latest end in the node's subtree.
 */
class GapTreaps {
  key = new Int32Array(1024);
  end = new Int32Array(1024);
  maxEnd = new Int32Array(1024).fill(-1, 0, 1);
  left = new Int32Array(1024);
  right = new Int32Array(1024);
  prio = new Int32Array(1024);
  size = 1;
  #seed = 0x2545f491;
  #splitLeft = 0;
  #splitRight = 0;
  #path: number[] = [];

  /** A new one-node treap. */
  node(key: number, end: number): number {
    if (this.size === this.key.length) this.#grow();
    const x = this.size++;
    this.#seed ^= this.#seed << 13;
    this.#seed ^= this.#seed >>> 17;
    this.#seed ^= this.#seed << 5;
    this.key[x] = key;
    this.end[x] = end;
    this.maxEnd[x] = end;
    this.prio[x] = this.#seed;
    return x;
  }

  /** Adds node `x` (from {@linkcode node}) to treap `t`; returns the new root. */
  insert(t: number, x: number): number {
    if (t === 0) return x;
    if (this.prio[x] > this.prio[t]) {
      this.#split(t, this.key[x]);
      this.left[x] = this.#splitLeft;
      this.right[x] = this.#splitRight;
      this.#pull(x);
      return x;
    }
    if (this.key[x] < this.key[t]) this.left[t] = this.insert(this.left[t], x);
    else this.right[t] = this.insert(this.right[t], x);
    this.#pull(t);
    return t;
  }

  /** A new treap holding copies of the gaps of treaps `a` and `b` (no key in both), in time linear in their sizes. */
  union(a: number, b: number): number {
    const xs = this.#inOrder(a), ys = this.#inOrder(b);
    const stack: number[] = [];
    for (let i = 0, j = 0; i < xs.length || j < ys.length;) {
      const from = j === ys.length || (i < xs.length && this.key[xs[i]] < this.key[ys[j]]) ? xs[i++] : ys[j++];
      const x = this.node(this.key[from], this.end[from]);
      this.prio[x] = this.prio[from];
      // The Cartesian tree of the keys so far: x takes the lower-priority right spine as its left subtree.
      let under = 0;
      while (stack.length > 0 && this.prio[stack[stack.length - 1]] < this.prio[x]) {
        under = stack.pop()!;
        this.#pull(under);
      }
      this.left[x] = under;
      if (stack.length > 0) this.right[stack[stack.length - 1]] = x;
      stack.push(x);
    }
    for (let i = stack.length - 1; i >= 0; i--) this.#pull(stack[i]);
    return stack.length > 0 ? stack[0] : 0;
  }

  /** Sets the end of the gap keyed `key` (present in `t`). */
  setEnd(t: number, key: number, end: number): void {
    const path = this.#path;
    path.length = 0;
    while (this.key[t] !== key) {
      path.push(t);
      t = key < this.key[t] ? this.left[t] : this.right[t];
    }
    this.end[t] = end;
    this.#pull(t);
    for (let i = path.length - 1; i >= 0; i--) this.#pull(path[i]);
  }

  /** Whether treap `t` has a gap keyed below `key` that ends after time rank `last`. */
  holds(t: number, key: number, last: number): boolean {
    while (t !== 0 && this.maxEnd[t] > last) {
      if (this.key[t] < key) {
        if (this.end[t] > last || this.maxEnd[this.left[t]] > last) return true;
        t = this.right[t];
      } else t = this.left[t];
    }
    return false;
  }

  /** The node of treap `t` with the greatest key below `key` (0 if none). */
  before(t: number, key: number): number {
    let best = 0;
    while (t !== 0) {
      if (this.key[t] < key) {
        best = t;
        t = this.right[t];
      } else t = this.left[t];
    }
    return best;
  }

  /** The nodes of treap `t` in key order. */
  #inOrder(t: number): number[] {
    const out: number[] = [], stack: number[] = [];
    while (t !== 0 || stack.length > 0) {
      for (; t !== 0; t = this.left[t]) stack.push(t);
      t = stack.pop()!;
      out.push(t);
      t = this.right[t];
    }
    return out;
  }

  #pull(t: number): void {
    const l = this.maxEnd[this.left[t]], r = this.maxEnd[this.right[t]], e = this.end[t];
    this.maxEnd[t] = e > l ? (e > r ? e : r) : (l > r ? l : r);
  }

  /** Splits `t` into keys below `key` (`#splitLeft`) and above it (`#splitRight`); `key` is not in `t`. */
  #split(t: number, key: number): void {
    if (t === 0) {
      this.#splitLeft = this.#splitRight = 0;
    } else if (this.key[t] < key) {
      this.#split(this.right[t], key);
      this.right[t] = this.#splitLeft;
      this.#pull(t);
      this.#splitLeft = t;
    } else {
      this.#split(this.left[t], key);
      this.left[t] = this.#splitRight;
      this.#pull(t);
      this.#splitRight = t;
    }
  }

  #grow(): void {
    const n = this.key.length * 2;
    for (const f of ["key", "end", "maxEnd", "left", "right", "prio"] as const) {
      const a = new Int32Array(n);
      a.set(this[f]);
      this[f] = a;
    }
  }
}

/**
 * Plans buffers for values.
 *
 * @param values Values with sizes and lifetimes; names must be unique.
 * @returns Buffers, each value's buffer, and the naive and planned totals.
 * @throws {RangeError} for a duplicate name, a size or lifetime bound that is not a number (or is NaN), or a
 * lifetime that ends before it starts.
 */
export function planMemory(values: readonly PlanValue[]): MemoryPlan {
  const seen = new Set<string>();
  const isNumber = (x: unknown) => typeof x === "number" && !Number.isNaN(x);
  for (const v of values) {
    if (seen.has(v.name)) throw new RangeError(`Cannot plan memory: value "${v.name}" appears twice`);
    if (!isNumber(v.bytes) || !isNumber(v.first) || !isNumber(v.last)) {
      throw new RangeError(`Cannot plan memory: value "${v.name}" has a size or lifetime that is not a number`);
    }
    if (v.last < v.first) throw new RangeError(`Cannot plan memory: value "${v.name}" dies before it is born`);
    seen.add(v.name);
  }
  // Aligned sizes never grow along `order` (`align` is monotonic), so neither do the sizes of new buffers.
  const order = [...values].sort((a, b) => b.bytes - a.bytes || a.first - b.first || (a.name < b.name ? -1 : 1));
  const n = order.length;

  // Lifetimes as ranks among all distinct bounds; `endless` is past every rank.
  const sorted = new Float64Array(2 * n);
  order.forEach((v, i) => {
    sorted[2 * i] = v.first;
    sorted[2 * i + 1] = v.last;
  });
  sorted.sort();
  let endless = 0;
  for (let i = 0; i < sorted.length; i++) {
    if (i === 0 || sorted[i] !== sorted[endless - 1]) sorted[endless++] = sorted[i];
  }
  const rank = (t: number) => {
    let lo = 0, hi = endless - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const first = Int32Array.from(order, (v) => rank(v.first));
  const last = Int32Array.from(order, (v) => rank(v.last));

  // Gap keys: the gap before buffer b's first occupant is keyed b; the gap after value i is keyed
  // n + (i's place among values by last rank). `below[r]` counts values whose last rank is under r, so the gaps
  // starting before rank r are exactly those keyed under n + below[r].
  const below = new Int32Array(endless + 1);
  for (let i = 0; i < n; i++) below[last[i] + 1]++;
  for (let r = 1; r <= endless; r++) below[r] += below[r - 1];
  const gapAfter = new Int32Array(n), next = below.slice();
  for (let i = 0; i < n; i++) gapAfter[i] = n + next[last[i]]++;

  // blocks[j][k]: the treap of buffers k·2^j … (k+1)·2^j − 1, once all of them exist.
  const treaps = new GapTreaps();
  const blocks: number[][] = [[]];
  const sizes: number[] = [], groupStart: number[] = [];
  const holds = (j: number, k: number, key: number, last: number) => treaps.holds(blocks[j][k], key, last);
  /** The buffer of block (j, k) that holds the lifetime, the lowest-numbered if `low` else the highest. */
  const descend = (j: number, k: number, key: number, last: number, low: boolean): number => {
    for (; j > 0; j--) {
      k = low
        ? (holds(j - 1, 2 * k, key, last) ? 2 * k : 2 * k + 1)
        : (holds(j - 1, 2 * k + 1, key, last) ? 2 * k + 1 : 2 * k);
    }
    return k;
  };

  const assignment = new Map<string, { buffer: number; offset: number }>();
  for (let i = 0; i < n; i++) {
    const size = align(order[i].bytes), key = n + below[first[i]], lastRank = last[i];
    let best = -1;
    // The highest-numbered free buffer: blocks of [0, count), right to left.
    const count = sizes.length;
    for (let j = 0; count >> j > 0; j++) {
      if (((count >> j) & 1) === 0 || !holds(j, (count >> j) - 1, key, lastRank)) continue;
      best = descend(j, (count >> j) - 1, key, lastRank, false);
      break;
    }
    if (best >= 0 && groupStart[best] < best) {
      // The lowest-numbered free buffer of its size: blocks of [groupStart, best], left to right (best is one).
      for (let at = groupStart[best]; at < best;) {
        let j = 0;
        while (at % (2 << j) === 0 && at + (2 << j) - 1 <= best) j++;
        if (holds(j, at >> j, key, lastRank)) {
          best = descend(j, at >> j, key, lastRank, true);
          break;
        }
        at += 1 << j;
      }
    } else if (best < 0) {
      best = count;
      groupStart.push(count > 0 && sizes[count - 1] === size ? groupStart[count - 1] : count);
      sizes.push(size);
      blocks[0].push(treaps.node(best, endless));
      for (let j = 1; (best + 1) % (1 << j) === 0; j++) {
        const k = best >> j;
        (blocks[j] ??= []).push(treaps.union(blocks[j - 1][2 * k], blocks[j - 1][2 * k + 1]));
      }
    }
    // The gap holding the value ends at its first call; a new gap starts after its last.
    const gap = treaps.before(blocks[0][best], key), gapKey = treaps.key[gap], gapEnd = treaps.end[gap];
    for (let j = 0; best >> j < sizes.length >> j; j++) {
      const k = best >> j;
      treaps.setEnd(blocks[j][k], gapKey, first[i]);
      blocks[j][k] = treaps.insert(blocks[j][k], treaps.node(gapAfter[i], gapEnd));
    }
    assignment.set(order[i].name, { buffer: best, offset: 0 });
  }
  const planned = sizes.map((bytes, id) => ({ id, bytes }));
  return {
    buffers: planned,
    assignment,
    naiveBytes: values.reduce((a, v) => a + align(v.bytes), 0),
    plannedBytes: planned.reduce((a, b) => a + b.bytes, 0),
  };
}
