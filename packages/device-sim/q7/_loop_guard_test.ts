import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { DESC, DESC_BYTES, Dtype, KILL_FLAG_ADDR, SBUF_BASE } from "./_abi.ts";
import { GUARD_INTERVAL, guardLoops } from "./_loop_guard.ts";

const KERNELS = new URL("../../../kernels/wasm/", import.meta.url);
/** Pages of the test memory: the control area (kill flag) and 512 KiB of SBUF. */
const PAGES = (SBUF_BASE + 0x80000) / 0x10000;
/** Intervals every equivalence test runs: the default, a small one that polls often, and per-header polls. */
const INTERVALS = [GUARD_INTERVAL, 3, 1];

function kernel(name: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(readFileSync(new URL(name, KERNELS)));
}

function sharedMemory(): WebAssembly.Memory {
  return new WebAssembly.Memory({ initial: PAGES, maximum: PAGES, shared: true });
}

function guard(wasm: Uint8Array, interval: number): Uint8Array<ArrayBuffer> {
  return guardLoops(wasm, KILL_FLAG_ADDR, { interval }) as Uint8Array<ArrayBuffer>;
}

// ---- A minimal wasm encoder for hand-made modules -----------------------------------------------------------

const I32 = 0x7f, I64 = 0x7e, F64 = 0x7c, EMPTY = 0x40;

function u(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function s(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) return [...out, b];
    out.push(b | 0x80);
  }
}

const vec = (items: number[][]): number[] => [...u(items.length), ...items.flat()];
const name = (x: string): number[] => [x.length, ...Array.from(x, (c) => c.charCodeAt(0))];
const valueTypes = (ts: number[]): number[] => vec(ts.map((t) => [t]));
const funcType = (params: number[], results: number[]): number[] => [
  0x60,
  ...valueTypes(params),
  ...valueTypes(results),
];

// Instructions. Structured ones take their block type (EMPTY, a value type, or ["type", index]) and a body.
type BlockType = number | ["type", number];
const bt = (t: BlockType): number[] => (typeof t === "number" ? [t] : s(t[1]));
const block = (t: BlockType, ...body: number[][]): number[] => [0x02, ...bt(t), ...body.flat(), 0x0b];
const loop = (t: BlockType, ...body: number[][]): number[] => [0x03, ...bt(t), ...body.flat(), 0x0b];
const ifThen = (t: BlockType, ...body: number[][]): number[] => [0x04, ...bt(t), ...body.flat(), 0x0b];
const br = (d: number): number[] => [0x0c, ...u(d)];
const brIf = (d: number): number[] => [0x0d, ...u(d)];
const brTable = (ds: number[], d: number): number[] => [0x0e, ...vec(ds.map(u)), ...u(d)];
const get = (i: number): number[] => [0x20, ...u(i)];
const set = (i: number): number[] => [0x21, ...u(i)];
const tee = (i: number): number[] => [0x22, ...u(i)];
const i32 = (v: number): number[] => [0x41, ...s(v)];
const add = [0x6a], sub = [0x6b], mul = [0x6c], eqz = [0x45], ltS = [0x48], geS = [0x4e], eq = [0x46];
/** `local[i] += by`. */
const inc = (i: number, by = 1): number[] => [...get(i), ...i32(by), ...add, ...set(i)];

interface Fn {
  type: number;
  locals?: [number, number][];
  /** Instructions; nested arrays are flattened. */
  body: (number | number[])[];
  export: string;
}

/** An encoded import; functions count for the function index space. */
interface Import {
  bytes: number[];
  fn: boolean;
}

const memoryImport = (): Import => ({
  bytes: [...name("env"), ...name("memory"), 0x02, 0x03, 0, ...u(65536)],
  fn: false,
});
const fnImport = (field: string, type: number): Import => ({
  bytes: [...name("env"), ...name(field), 0x00, ...u(type)],
  fn: true,
});

/** A module of `types`, `imports`, optional own memories (encoded limits) and tags (type indices), and `fns`. */
function wasmModule(
  o: { types: number[][]; imports?: Import[]; memories?: number[][]; tags?: number[]; fns: Fn[] },
): Uint8Array<ArrayBuffer> {
  const sec = (id: number, body: number[]) => [id, ...u(body.length), ...body];
  const imported = (o.imports ?? []).filter((i) => i.fn).length;
  const code = o.fns.map((f) => {
    const body = [...vec((f.locals ?? []).map(([n, t]) => [...u(n), t])), ...f.body.flat(), 0x0b];
    return [...u(body.length), ...body];
  });
  return new Uint8Array([
    [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0],
    sec(1, vec(o.types)),
    o.imports ? sec(2, vec(o.imports.map((i) => i.bytes))) : [],
    sec(3, vec(o.fns.map((f) => u(f.type)))),
    o.memories ? sec(5, vec(o.memories)) : [],
    o.tags ? sec(13, vec(o.tags.map((t) => [0, ...u(t)]))) : [],
    sec(7, vec(o.fns.map((f, i) => [...name(f.export), 0, ...u(i + imported)]))),
    sec(10, vec(code)),
  ].flat());
}

/** Instantiates `wasm` over `memory` (when it imports one) and returns its exports. */
function exportsOf(wasm: Uint8Array<ArrayBuffer>, memory: WebAssembly.Memory): Record<string, CallableFunction> {
  const module = new WebAssembly.Module(wasm);
  const needsMemory = WebAssembly.Module.imports(module).some((i) => i.kind === "memory");
  const instance = new WebAssembly.Instance(module, needsMemory ? { env: { memory } } : {});
  return instance.exports as Record<string, CallableFunction>;
}

/** Calls `fn(...args)` on the raw module and on its guarded versions: every result must be the raw one. */
function expectSameResults(wasm: Uint8Array<ArrayBuffer>, calls: [string, ...unknown[]][]): void {
  expect(WebAssembly.validate(wasm)).toBe(true);
  const run = (bytes: Uint8Array<ArrayBuffer>) => {
    const memory = sharedMemory();
    const exports = exportsOf(bytes, memory);
    return calls.map(([fn, ...args]) => exports[fn](...args));
  };
  const raw = run(wasm);
  for (const interval of INTERVALS) {
    const guarded = guard(wasm, interval);
    expect({ interval, valid: WebAssembly.validate(guarded) }).toEqual({ interval, valid: true });
    expect({ interval, results: run(guarded) }).toEqual({ interval, results: raw });
  }
}

// ---- The committed kernels on a one-thread stand-in for the Q7 ABI ------------------------------------------

interface KernelCase {
  file: string;
  fn: string;
  inputs: number[][];
  outputs: number[][];
  ints?: bigint[];
}

/** Runs `c` as `total` cores one after the other over one memory; returns the outputs and the stdio text. */
function runKernel(wasm: Uint8Array<ArrayBuffer>, c: KernelCase, total: number): { outputs: number[][]; text: string } {
  const memory = sharedMemory();
  const view = new DataView(memory.buffer);
  const descs = SBUF_BASE + 0x70000;
  let next = SBUF_BASE;
  const tensors = [...c.inputs, ...c.outputs].map((dims, k) => {
    const n = dims.reduce((a, b) => a * b, 1);
    const at = descs + k * DESC_BYTES;
    view.setUint32(at + DESC.addr, next, true);
    view.setUint32(at + DESC.bytes, n * 4, true);
    view.setUint32(at + DESC.dtype, Dtype.float32, true);
    view.setUint32(at + DESC.rank, dims.length, true);
    dims.forEach((d, i) => view.setUint32(at + DESC.dims + 4 * i, d, true));
    const data = new Float32Array(memory.buffer, next, n);
    if (k < c.inputs.length) data.forEach((_, i) => (data[i] = Math.sin(i * 0.7 + k) * 5));
    else data.fill(Number.NaN);
    next += n * 4;
    return data;
  });
  let cpu = 0, inputs = 0, outputs = 0, ints = 0, text = "";
  const env = {
    memory,
    get_cpu_id: () => cpu,
    get_cpu_count: () => 8,
    customop_total_cpus: () => total,
    customop_next_tensor: () => (inputs < c.inputs.length ? descs + DESC_BYTES * inputs++ : 0),
    customop_return_tensor: () => (outputs < c.outputs.length ? descs + DESC_BYTES * (c.inputs.length + outputs++) : 0),
    customop_next_int: () => c.ints?.[ints++] ?? 0n,
    customop_cleanup: () => {},
    dram_addr_to_soc_addr: (addr: number) => ((9 + 2 * cpu) << 16) + (addr & 0xffff),
    q7_write: (_stream: number, ptr: number, len: number) => {
      text += new TextDecoder().decode(new Uint8Array(memory.buffer).slice(ptr, ptr + len));
    },
  };
  const instance = new WebAssembly.Instance(new WebAssembly.Module(wasm), { env });
  for (cpu = 0; cpu < total; cpu++) {
    inputs = outputs = ints = 0;
    (instance.exports[c.fn] as () => void)();
  }
  return { outputs: tensors.slice(c.inputs.length).map((t) => Array.from(t)), text };
}

const KERNEL_CASES: KernelCase[] = [
  { file: "vector_add.wasm", fn: "vector_add", inputs: [[1000], [1000]], outputs: [[1000]] },
  { file: "relu.wasm", fn: "relu", inputs: [[999]], outputs: [[999]] },
  { file: "reduce_sum.wasm", fn: "sum_all", inputs: [[5000]], outputs: [[1]] },
  { file: "matmul.wasm", fn: "matmul", inputs: [[7, 9], [9, 5]], outputs: [[7, 5]] },
  { file: "softmax.wasm", fn: "softmax_rows", inputs: [[6, 33]], outputs: [[6, 33]] },
  { file: "cpu_map.wasm", fn: "cpu_map", inputs: [[4, 50]], outputs: [[200]] },
  { file: "faults.wasm", fn: "printf", inputs: [], outputs: [], ints: [25n] },
];

describe("guardLoops() on the committed kernels", () => {
  test("guardLoops() keeps every committed kernel valid and leaves loop-free ones unchanged", () => {
    const files = readdirSync(KERNELS).filter((f) => f.endsWith(".wasm")).sort();
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const wasm = kernel(file);
      for (const interval of INTERVALS) {
        const guarded = guard(wasm, interval);
        expect({ file, interval, valid: WebAssembly.validate(guarded) }).toEqual({ file, interval, valid: true });
        const imports = (b: Uint8Array<ArrayBuffer>) => WebAssembly.Module.imports(new WebAssembly.Module(b));
        expect(imports(guarded)).toEqual(imports(wasm));
        if (file === "noop.wasm" || file === "stock_pool.wasm" || file === "ext_isa.wasm") expect(guarded).toBe(wasm);
        else expect(guarded.length).toBeGreaterThan(wasm.length);
      }
    }
  });

  for (const c of KERNEL_CASES) {
    test(`guardLoops() keeps the results of ${c.fn} (${c.file}) on 1 and 8 cores`, () => {
      const wasm = kernel(c.file);
      for (const total of [1, 8]) {
        const raw = runKernel(wasm, c, total);
        // The raw run wrote every output element (a kernel that ran nothing would compare equal to itself).
        expect(raw.outputs.flat().some((v) => Number.isNaN(v))).toBe(false);
        if (c.ints) expect(raw.text.split("\n").length).toBe(Number(c.ints[0]) * total + 1);
        for (const interval of INTERVALS) {
          expect({ interval, total, ...runKernel(guard(wasm, interval), c, total) })
            .toEqual({ interval, total, ...raw });
        }
      }
    });
  }
});

// ---- Hand-made modules --------------------------------------------------------------------------------------

describe("guardLoops() on hand-made modules", () => {
  test("guardLoops() puts the countdown after the parameters and every group of declared locals", () => {
    // (func (param i32 i64) (result i64)) with locals [2 × i32][1 × f64][3 × i64]: locals 2..7 are all live.
    const body = [
      ...loop(
        EMPTY,
        inc(2),
        inc(3, 3),
        [...get(4), 0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0xa0, ...set(4)], // local4 += 1.0
        [...get(7), ...get(1), 0x7c, ...set(7)], // local7 += param1
        [...get(2), ...get(0), ...ltS, ...brIf(0)],
      ),
      [...get(7), ...get(2), 0xad, 0x7c, ...get(3), 0xad, 0x7c, ...get(4), 0xb0, 0x7c], // + i64(l2) + i64(l3) + i64(l4)
    ];
    const wasm = wasmModule({
      types: [funcType([I32, I64], [I64])],
      fns: [{ type: 0, locals: [[2, I32], [1, F64], [3, I64]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f", 10, 7n], ["f", 9000, -3n], ["f", 1, 0n]]);
    // The countdown's group is appended: 4 groups, the last one `1 × i32`.
    expect(`,${Array.from(wasm).join(",")},`).toContain(",3,2,127,1,124,3,126,");
    expect(`,${Array.from(guard(wasm, 3)).join(",")},`).toContain(",4,2,127,1,124,3,126,1,127,");
  });

  test("guardLoops() polls at every header of a function with no room for the countdown local", () => {
    // 1 parameter + 49999 locals is the engines' limit of 50000: no countdown, the loop polls at its header.
    const body = [...loop(EMPTY, inc(49999), [...get(49999), ...get(0), ...ltS, ...brIf(0)]), ...get(49999)];
    const wasm = wasmModule({
      types: [funcType([I32], [I32])],
      fns: [{ type: 0, locals: [[49999, I32]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f", 10]]);
    const memory = sharedMemory();
    const f = exportsOf(guard(wasm, GUARD_INTERVAL), memory).f as (n: number) => number;
    Atomics.store(new Int32Array(memory.buffer), KILL_FLAG_ADDR / 4, 1);
    expect(() => f(10)).toThrow(WebAssembly.RuntimeError);
  });

  test("guardLoops() keeps the targets of branches out of nested loops, br_table included", () => {
    // for i in 1..: for j in 1..: acc += i·j, then br_table on j < i (next j), j == i (next i), i·j == 10000
    // (leave both). Locals: 0 n, 1 i, 2 j, 3 acc, 4 fuel; a run out of fuel returns -1 (`return` has no label, so
    // a wrong branch target fails the test instead of looping forever).
    const select = [
      ...get(1),
      ...get(2),
      ...mul,
      ...i32(10000),
      ...eq,
      0x04,
      I32,
      ...i32(2),
      0x05,
      ...i32(0),
      ...i32(1),
      ...get(2),
      ...get(1),
      ...ltS,
      0x1b,
      0x0b,
    ];
    const body = [
      ...block(
        EMPTY, // $B
        loop(
          EMPTY, // $O
          inc(1),
          [...i32(0), ...set(2)],
          loop(
            EMPTY, // $I
            inc(2),
            inc(4),
            [...get(3), ...get(1), ...get(2), ...mul, ...add, ...set(3)],
            [...get(4), ...i32(100000), ...geS],
            ifThen(EMPTY, [...i32(-1), 0x0f]),
            block(
              EMPTY, // $b1
              block(EMPTY, select, brTable([0, 1], 4)), // $b0: 0 → next j, 1 → next i, else leave $B
              br(1), // next j: $I
            ),
            [...get(1), ...get(0), ...ltS, ...brIf(1), ...br(2)], // next i ($O), or leave $B
          ),
          [...get(1), ...get(0), ...ltS, ...brIf(0)],
        ),
      ),
      [...get(3), ...get(4), ...i32(1000000), ...mul, ...add],
    ];
    const wasm = wasmModule({
      types: [funcType([I32], [I32])],
      fns: [{ type: 0, locals: [[4, I32]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f", 1], ["f", 7], ["f", 300]]);
  });

  test("guardLoops() handles loops with a result, with parameters, and with a type-index block type", () => {
    const types = [funcType([I32], [I32]), funcType([I32, I32], [I32]), funcType([], [I32, I32])];
    // (loop (result i32)): count local 1 up to param 0, leave its value.
    const valueResult = loop(I32, inc(1), [...get(1), ...get(0), ...ltS, ...brIf(0)], get(1));
    // (loop (type 1) (param i32 i32) (result i32)): carry (k, acc) as loop parameters while k > 0.
    const withParams = [
      ...get(0),
      ...i32(0),
      ...loop(
        ["type", 1],
        [...set(2), ...set(1)], // acc, k
        [...get(1), ...eqz],
        ifThen(EMPTY, [...get(2), ...br(2)]), // k == 0: return acc
        [...get(1), ...i32(1), ...sub, ...get(2), ...get(1), ...add, ...br(0)],
      ),
    ];
    // (loop (type 2) (result i32 i32)): two results, no parameters; the function returns i² + i.
    const twoResults = [
      ...loop(["type", 2], inc(1), [...get(1), ...get(0), ...ltS, ...brIf(0)], [
        ...get(1),
        ...get(1),
        ...mul,
        ...get(1),
      ]),
      ...add,
    ];
    const wasm = wasmModule({
      types,
      fns: [
        { type: 0, locals: [[1, I32]], body: valueResult, export: "value" },
        { type: 0, locals: [[2, I32]], body: withParams, export: "params" },
        { type: 0, locals: [[1, I32]], body: twoResults, export: "results" },
      ],
    });
    expectSameResults(wasm, [["value", 5], ["value", 20000], ["params", 10], ["params", 9999], ["results", 77]]);
  });

  test("guardLoops() copies SIMD and atomic instructions in loop bodies", () => {
    // f(n): n times, v = v + const; store v; lane-load into it; shuffle; atomic rmw add, notify and fence.
    const v128Const = [0xfd, 0x0c, ...Array.from({ length: 16 }, (_, i) => i)];
    const body = [
      ...loop(
        EMPTY,
        [...i32(SBUF_BASE), ...i32(SBUF_BASE), 0xfd, 0x00, 4, 0, ...v128Const, 0xfd, 0xae, 0x01, 0xfd, 0x0b, 4, 0],
        // v = load32_lane(SBUF_BASE + 16, v, lane 1); store shuffle(v, const) at SBUF_BASE + 16
        [...i32(SBUF_BASE), ...i32(SBUF_BASE + 16), ...i32(SBUF_BASE), 0xfd, 0x00, 4, 0, 0xfd, 0x56, 2, 0, 1],
        [
          ...v128Const,
          0xfd,
          0x0d,
          ...Array.from({ length: 16 }, (_, i) => 31 - 2 * i),
          0xfd,
          0x0b,
          4,
          16,
        ],
        [...i32(SBUF_BASE + 32), ...i32(3), 0xfe, 0x1e, 2, 0, 0x1a], // i32.atomic.rmw.add, result dropped
        [...i32(SBUF_BASE + 36), ...i32(0), 0xfe, 0x00, 2, 0, 0x1a], // memory.atomic.notify
        [0xfe, 0x03, 0x00], // atomic.fence
        inc(1),
        [...get(1), ...get(0), ...ltS, ...brIf(0)],
      ),
      [...i32(SBUF_BASE), 0xfd, 0x00, 4, 0, 0xfd, 0x1b, 3], // i32x4.extract_lane 3
      [...i32(SBUF_BASE + 16), 0xfd, 0x00, 4, 0, 0xfd, 0x1b, 1, ...add],
      [...i32(SBUF_BASE + 32), 0xfe, 0x10, 2, 0, ...add],
    ];
    const wasm = wasmModule({
      types: [funcType([I32], [I32])],
      imports: [memoryImport()],
      fns: [{ type: 0, locals: [[1, I32]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f", 3], ["f", 5000]]);
  });

  test("guardLoops() adds a memory import to a module with loops and none, and to one with other imports", () => {
    // f(n) = n! mod 2^32 through a loop, in a module with no memory; then the same with an imported function.
    const body = [
      ...i32(1),
      ...set(1),
      ...loop(EMPTY, [...get(1), ...get(0), ...mul, ...set(1)], [...get(0), ...i32(1), ...sub, ...tee(0), ...brIf(0)]),
      ...get(1),
    ];
    const bare = wasmModule({
      types: [funcType([I32], [I32])],
      fns: [{ type: 0, locals: [[1, I32]], body, export: "f" }],
    });
    expectSameResults(bare, [["f", 5], ["f", 12345]]);
    const withImport = wasmModule({
      types: [funcType([I32], [I32])],
      imports: [fnImport("id", 0)],
      fns: [{ type: 0, locals: [[1, I32]], body: [...get(0), 0x10, 0, ...set(0), ...body], export: "f" }],
    });
    const imports = (b: Uint8Array<ArrayBuffer>) => WebAssembly.Module.imports(new WebAssembly.Module(b));
    for (const wasm of [bare, withImport]) {
      const guarded = guard(wasm, GUARD_INTERVAL);
      expect(imports(guarded)).toEqual([...imports(wasm), { module: "env", name: "memory", kind: "memory" }]);
    }
    const f = new WebAssembly.Instance(new WebAssembly.Module(guard(withImport, 3)), {
      env: { id: (x: number) => x, memory: sharedMemory() },
    }).exports.f as (n: number) => number;
    expect(f(10)).toBe(3628800);
  });

  test("guardLoops() keeps try_table catch labels and multi-memory memargs right inside loops", () => {
    // f(n): a loop whose body throws once i reaches n; try_table's catch_all leaves to a block outside the loop.
    const tryTable = (catches: number[][], ...body: number[][]) => [0x1f, EMPTY, ...vec(catches), ...body.flat(), 0x0b];
    const body = [
      ...block(
        EMPTY,
        loop(
          EMPTY,
          [...get(1), ...i32(1000000), ...geS],
          ifThen(EMPTY, [...i32(-1), 0x0f]), // fuel, as above
          tryTable([[2, ...u(1)]], inc(1), [...get(1), ...get(0), ...geS], ifThen(EMPTY, [0x08, 0])),
          br(0),
        ),
      ),
      // Memory 1 counts the iterations through a load and store with an explicit memory index.
      ...i32(0),
      ...i32(0),
      0x28,
      0x42,
      1,
      0,
      ...get(1),
      ...add,
      0x36,
      0x42,
      1,
      0,
      ...i32(0),
      0x28,
      0x42,
      1,
      0,
    ];
    const wasm = wasmModule({
      types: [funcType([I32], [I32]), funcType([], [])],
      memories: [[0, ...u(PAGES)], [0, 1]], // memory 0 holds the kill flag
      tags: [1],
      fns: [{ type: 0, locals: [[1, I32]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f", 4], ["f", 9000]]);
  });

  test("guardLoops() keeps the label of a legacy try's delegate inside a loop", () => {
    // Loop: try (do (try (do throw) (delegate 1))) catch_all; the delegate skips the loop to the outer try.
    const body = [
      0x06,
      I32, // try (result i32)
      ...loop(
        EMPTY,
        inc(0),
        [0x06, EMPTY, 0x06, EMPTY, ...get(0), ...i32(50), ...geS],
        ifThen(EMPTY, [0x08, 0]),
        [0x18, 2],
        [0x0b],
        [...get(0), ...i32(1000000), ...ltS, ...brIf(0)],
      ),
      ...i32(-1),
      0x19,
      ...get(0), // catch_all: the count
      0x0b,
    ];
    const wasm = wasmModule({
      types: [funcType([], [I32]), funcType([], [])],
      tags: [1],
      fns: [{ type: 0, locals: [[1, I32]], body, export: "f" }],
    });
    expectSameResults(wasm, [["f"]]);
  });

  test("guardLoops() rewrites a large body with many loops", () => {
    // 3000 loops in a row, each adding its index k to local 1 three times: a body of about 70 KiB.
    const loops = Array.from(
      { length: 3000 },
      (
        _,
        k,
      ) => [
        ...i32(0),
        ...set(2),
        ...loop(EMPTY, [...get(1), ...i32(k), ...add, ...set(1)], inc(2), [...get(2), ...i32(3), ...ltS, ...brIf(0)]),
      ],
    );
    const wasm = wasmModule({
      types: [funcType([I32], [I32])],
      fns: [{ type: 0, locals: [[2, I32]], body: [...loops.flat(), ...get(1), ...get(0), ...add], export: "f" }],
    });
    expect(wasm.length).toBeGreaterThan(65536);
    expectSameResults(wasm, [["f", 1]]);
  });

  test("guardLoops() rejects an interval or a flag address it cannot encode", () => {
    const wasm = kernel("vector_add.wasm");
    for (const interval of [0, 1.5, 2 ** 31]) {
      expect(() => guardLoops(wasm, KILL_FLAG_ADDR, { interval })).toThrow(`interval ${interval}`);
    }
    expect(() => guardLoops(wasm, KILL_FLAG_ADDR + 2)).toThrow("4-byte aligned");
  });
});

// ---- Stopping ------------------------------------------------------------------------------------------------

describe("guardLoops() stops loops", () => {
  test("guardLoops() makes a loop trap within `interval` iterations once the flag is set", () => {
    // f(n): counts to n in a loop, storing the count at SBUF_BASE every iteration.
    const body = [
      ...loop(EMPTY, inc(1), [...i32(SBUF_BASE), ...get(1), 0x36, 2, 0], [...get(1), ...get(0), ...ltS, ...brIf(0)]),
      ...get(1),
    ];
    const wasm = wasmModule({
      types: [funcType([I32], [I32])],
      imports: [memoryImport()],
      fns: [{ type: 0, locals: [[1, I32]], body, export: "f" }],
    });
    for (const interval of [GUARD_INTERVAL, 3, 1]) {
      const memory = sharedMemory();
      const f = exportsOf(guard(wasm, interval), memory).f as (n: number) => number;
      const words = new Int32Array(memory.buffer);
      expect(f(100000)).toBe(100000);
      expect(words[SBUF_BASE / 4]).toBe(100000);
      words[SBUF_BASE / 4] = 0;
      Atomics.store(words, KILL_FLAG_ADDR / 4, 1);
      expect(() => f(1_000_000_000)).toThrow(WebAssembly.RuntimeError);
      const count = words[SBUF_BASE / 4];
      expect({ interval, stoppedWithin: count < interval }).toEqual({ interval, stoppedWithin: true });
    }
  });

  test("guardLoops() stops faults.wasm spin in a Worker once the flag is set", async () => {
    // The Worker instantiates the guarded module over the shared memory, reports, then spins in `spin`.
    const script = `self.onmessage = (e) => {
      const { module, memory } = e.data;
      const env = { memory };
      for (const i of WebAssembly.Module.imports(module)) if (i.kind === "function") env[i.name] = () => 0;
      const spin = new WebAssembly.Instance(module, { env }).exports.spin;
      self.postMessage({ type: "spinning" });
      try {
        spin();
        self.postMessage({ type: "returned" });
      } catch (err) {
        const flag = Atomics.load(new Int32Array(memory.buffer), ${KILL_FLAG_ADDR / 4});
        self.postMessage({ type: "trapped", error: err.constructor.name, flag });
      }
    };`;
    const url = URL.createObjectURL(new Blob([script], { type: "application/javascript" }));
    const worker = new Worker(url, { type: "module" });
    const messages: { type: string }[] = [];
    let notify = () => {};
    worker.onmessage = (e: MessageEvent) => {
      messages.push(e.data);
      notify();
    };
    /** Resolves once `count` messages arrived; rejects after `ms` (a bound, not a sleep: it ends on arrival). */
    const messagesArrived = (count: number, ms: number) =>
      new Promise<void>((resolve, reject) => {
        const fail = () => reject(new Error(`no message ${count} within ${ms} ms: ${JSON.stringify(messages)}`));
        const timer = setTimeout(fail, ms);
        notify = () => {
          if (messages.length < count) return;
          clearTimeout(timer);
          resolve();
        };
        notify();
      });
    const memory = sharedMemory();
    try {
      worker.postMessage({ module: new WebAssembly.Module(guard(kernel("faults.wasm"), GUARD_INTERVAL)), memory });
      await messagesArrived(1, 10_000);
      expect(messages).toEqual([{ type: "spinning" }]);
      Atomics.store(new Int32Array(memory.buffer), KILL_FLAG_ADDR / 4, 1);
      await messagesArrived(2, 10_000);
      expect(messages[1]).toEqual({ type: "trapped", error: "RuntimeError", flag: 1 });
    } finally {
      worker.terminate();
      URL.revokeObjectURL(url);
    }
  }, 30_000);
});
