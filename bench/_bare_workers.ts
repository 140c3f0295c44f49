/**
 * The limit the execute benchmarks compare with, built from nothing of ours: a kernel's raw `.wasm` (no loop guard)
 * run as 8 cores on N bare Workers over one shared `WebAssembly.Memory`, Worker k running cores k, k + N, … in turn
 * (one instance per core; N = 8 is one core per Worker). The Workers park on one word; a dispatch stores the
 * fan-out and a sequence number and notifies that word once; each Worker runs the export for its participating
 * cores, and the last core to finish stores the sequence number in the join word and notifies it. The imports are
 * the minimum the reference kernels call (docs/kernel-abi.md), answered from fixed descriptor addresses. Ours
 * (benchmark only).
 *
 * @module
 */

/** Word indexes in the control block (Int32 words from `CONTROL`). */
const W = { BELL: 0, SEQ: 1, TOTAL: 2, DONE: 3, JOIN: 4, READY: 5, EXIT: 6, NIN: 7, NOUT: 8 } as const;
/** Byte address of the control block and of the descriptors, below the data window. */
const CONTROL = 0x180000;
const DESCRIPTORS = 0x1c0000;
/** Byte address where tensor data starts. */
export const DATA_BASE = 0x200000;

const workerSource = `
const W = ${JSON.stringify(W)};
const CONTROL = ${CONTROL}, DESCRIPTORS = ${DESCRIPTORS};
self.onmessage = (e) => {
  const { memory, module, cores, fn } = e.data;
  const c = new Int32Array(memory.buffer, CONTROL, 64);
  let cpu = cores[0], total = 1, inCur = 0, outCur = 0;
  const env = {
    memory,
    get_cpu_id: () => cpu,
    get_cpu_count: () => 8,
    customop_total_cpus: () => total,
    customop_next_tensor: () => (inCur < c[W.NIN] ? DESCRIPTORS + 32 * inCur++ : 0),
    customop_return_tensor: () => (outCur < c[W.NOUT] ? DESCRIPTORS + 32 * (8 + outCur++) : 0),
    customop_next_int: () => 0n,
    customop_cleanup: () => {},
    dram_addr_to_soc_addr: (a) => a,
    q7_write: () => {},
  };
  const runs = cores.map(() => new WebAssembly.Instance(module, { env }).exports[fn]);
  let seen = Atomics.load(c, W.BELL); // before READY: a ring right after READY must not be missed
  Atomics.add(c, W.READY, 1);
  Atomics.notify(c, W.READY);
  for (;;) {
    Atomics.wait(c, W.BELL, seen);
    seen = Atomics.load(c, W.BELL);
    if (Atomics.load(c, W.EXIT) !== 0) return;
    total = Atomics.load(c, W.TOTAL);
    const seq = Atomics.load(c, W.SEQ);
    for (let k = 0; k < cores.length && cores[k] < total; k++) {
      cpu = cores[k]; inCur = 0; outCur = 0;
      runs[k]();
      if (Atomics.add(c, W.DONE, 1) + 1 === total) { Atomics.store(c, W.JOIN, seq); Atomics.notify(c, W.JOIN); }
    }
  }
};`;

/** One tensor the kernel sees: where its data sits in the shared memory and its byte size. */
export interface BareTensor {
  readonly addr: number;
  readonly bytes: number;
}

/** 8 cores on N bare Workers running one kernel export. */
export class BareWorkers {
  readonly memory: WebAssembly.Memory;
  readonly #c: Int32Array;
  readonly #workers: Worker[];
  #seq = 0;

  private constructor(memory: WebAssembly.Memory, workers: Worker[]) {
    this.memory = memory;
    this.#c = new Int32Array(memory.buffer, CONTROL, 64);
    this.#workers = workers;
  }

  /**
   * Starts `workers` Workers (1 to 8) running 8 cores of `fn` of `wasm` over a shared memory of `dataBytes` after
   * DATA_BASE.
   */
  static async start(wasm: Uint8Array, fn: string, dataBytes: number, workers = 8): Promise<BareWorkers> {
    const pages = Math.ceil((DATA_BASE + dataBytes) / 65536);
    const memory = new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true });
    const module = await WebAssembly.compile(wasm as Uint8Array<ArrayBuffer>);
    const url = URL.createObjectURL(new Blob([workerSource], { type: "application/javascript" }));
    const list = Array.from({ length: workers }, (_, k) => {
      const w = new Worker(url, { type: "module" });
      const cores = Array.from({ length: 8 }, (_, cpu) => cpu).filter((cpu) => cpu % workers === k);
      w.postMessage({ memory, module, cores, fn });
      return w;
    });
    const b = new BareWorkers(memory, list);
    for (;;) {
      const ready = Atomics.load(b.#c, W.READY);
      if (ready >= workers) break;
      const r = Atomics.waitAsync(b.#c, W.READY, ready, 5_000);
      if (r.async && await r.value === "timed-out") throw new Error("bare Workers did not start");
    }
    return b;
  }

  /** Writes the 32-byte descriptors of the inputs and outputs (float32, rank 1). */
  describe(inputs: readonly BareTensor[], outputs: readonly BareTensor[]): void {
    const v = new DataView(this.memory.buffer);
    const put = (slot: number, t: BareTensor) => {
      const at = DESCRIPTORS + 32 * slot;
      v.setUint32(at, t.addr, true);
      v.setUint32(at + 4, t.bytes, true);
      v.setUint32(at + 8, 0, true); // float32
      v.setUint32(at + 12, 1, true); // rank 1
      v.setUint32(at + 16, t.bytes / 4, true);
    };
    inputs.forEach((t, i) => put(i, t));
    outputs.forEach((t, i) => put(8 + i, t));
    Atomics.store(this.#c, W.NIN, inputs.length);
    Atomics.store(this.#c, W.NOUT, outputs.length);
  }

  /** Runs the kernel on the first `total` cores and resolves when the last of them is done. */
  async dispatch(total: number): Promise<void> {
    const c = this.#c;
    const seq = ++this.#seq;
    Atomics.store(c, W.DONE, 0);
    Atomics.store(c, W.TOTAL, total);
    Atomics.store(c, W.SEQ, seq);
    Atomics.add(c, W.BELL, 1);
    Atomics.notify(c, W.BELL);
    for (;;) {
      const j = Atomics.load(c, W.JOIN);
      if (j === seq) return;
      const r = Atomics.waitAsync(c, W.JOIN, j);
      if (r.async) await r.value;
    }
  }

  /** Stops the Workers. */
  stop(): void {
    Atomics.store(this.#c, W.EXIT, 1);
    Atomics.add(this.#c, W.BELL, 1);
    Atomics.notify(this.#c, W.BELL);
    for (const w of this.#workers) w.terminate();
  }
}
