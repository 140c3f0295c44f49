// @ts-self-types="./q7_cores.d.ts"
/**
 * The simulated Q7 cores of one thread: the kernel ABI imports (docs/kernel-abi.md), one instance of each library
 * per core, and running the op the mailbox describes on each participating core in turn, reporting into each
 * core's status record. A Q7 Worker (q7_worker.js) hosts one such set for its cores; the device agent hosts one for
 * all 8 cores when it runs small ops itself (`Q7ClusterOptions.localOpBytes`, ours). Both read the same mailbox and
 * write the same records, so what a kernel or the host observes does not depend on the thread that ran it.
 *
 * Plain JavaScript without imports on purpose: `deno test` type-checks every TypeScript module a Worker loads,
 * once per Worker (5.6 s for 8 Workers instead of 0.16 s). The constants come as `layout` (`WORKER_LAYOUT` in
 * _abi.ts).
 *
 * Seed: spmd-teardown §1 (all 8 cores run the same image SPMD; the rank is the PRID), §3 (the local DRAM aperture),
 * §4.2–4.3 (the commit fence and the DRAIN join), §5.3–5.5 (the stdio ring).
 *
 * @module
 */

/** Thrown by dram_addr_to_soc_addr for an address outside the local DRAM window; reported as "oob". */
class DramWindowFault extends Error {
  name = "DramWindowFault";
}

/**
 * Creates the cores `cores` (ascending) over `memory`, whose control area is laid out as `layout` says.
 *
 * @param {{ layout: any, memory: WebAssembly.Memory, cores: number[] }} options
 */
export function createQ7Cores({ layout, memory, cores }) {
  const L = layout;
  /** The simulated core running now: what get_cpu_id() and the other per-core imports answer for. */
  let cpu = cores[0];
  const i32 = new Int32Array(memory.buffer, L.MAILBOX, (memory.buffer.byteLength - L.MAILBOX) >> 2);
  const u8 = new Uint8Array(memory.buffer);
  const view = new DataView(memory.buffer);
  /** @type {Array<Array<WebAssembly.Instance> | undefined>} slot → one instance per core of `cores` */
  const libraries = [];
  /** @type {Map<number, { slot: number, fns: Array<() => void> | null }>} function id → its slot and the export
   * of each core's instance */
  const functions = new Map();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();

  // Per-dispatch ABI state of the running core: the argument cursors are per core and reset before each core runs.
  let totalCpus = 1;
  let nInputs = 0, nOutputs = 0, nInts = 0;
  let inCursor = 0, outCursor = 0, intCursor = 0;
  let committed = 0;

  const env = {
    /** @returns {number} */
    get_cpu_id: () => cpu,
    /** @returns {number} */
    get_cpu_count: () => L.Q7_CORES,
    /** @returns {number} */
    customop_total_cpus: () => totalCpus,
    /** @returns {number} */
    customop_next_tensor: () => (inCursor < nInputs ? L.ARG_INPUTS + L.DESC_BYTES * inCursor++ : 0),
    /** @returns {number} */
    customop_return_tensor: () => (outCursor < nOutputs ? L.ARG_OUTPUTS + L.DESC_BYTES * outCursor++ : 0),
    /** @returns {bigint} */
    customop_next_int: () => (intCursor < nInts ? view.getBigInt64(L.ARG_INTS + 8 * intCursor++, true) : 0n),
    customop_cleanup: () => {
      // seed: spmd-teardown §4.2 — memw: the read-modify-write is a full fence for this core's stores.
      Atomics.add(i32, L.MB_FENCE, 0);
      committed = 1;
    },
    /** @param {number} addr @returns {number} */
    dram_addr_to_soc_addr: (addr) => {
      // seed: spmd-teardown §3 — the aperture guard (dram_addr & 0xFFFF0000) == 0x80000, else _Assert.
      if ((addr & 0xffff0000) !== L.LOCAL_DRAM_BASE) {
        throw new DramWindowFault(
          `dram_addr_to_soc_addr(0x${(addr >>> 0).toString(16)}): address outside the local DRAM window`,
        );
      }
      return ((L.SOC_SLICE_FIRST_INDEX + 2 * cpu) << 16) + (addr & 0xffff);
    },
    /** @param {number} stream @param {number} ptr @param {number} len */
    q7_write: (stream, ptr, len) => {
      if (len <= 0) return;
      ptr >>>= 0;
      if (ptr + len > u8.length) throw new RangeError("q7_write: memory access out of bounds");
      for (let off = 0; off < len; off += L.STDIO_TEXT_MAX) {
        const n = Math.min(L.STDIO_TEXT_MAX, len - off);
        const index = Atomics.add(i32, L.MB_STDIO_WRITE, 1);
        const entry = L.STDIO_RING + (index % L.STDIO_ENTRIES) * L.STDIO_ENTRY_BYTES;
        u8[entry + L.STDIO_HEADER.stream] = stream;
        u8[entry + L.STDIO_HEADER.cpu] = cpu;
        view.setUint16(entry + L.STDIO_HEADER.length, n, true);
        u8.copyWithin(entry + L.STDIO_HEADER_BYTES, ptr + off, ptr + off + n);
        // The sequence is stored last: a reader that sees it sees the text.
        Atomics.store(i32, (entry - L.MAILBOX) >> 2, index + 1);
      }
    },
  };

  /**
   * The op's export in each core's instance, or null when the library does not export it (the instances of one slot
   * share one module, so either every core has it or none).
   *
   * @param {number} slot @param {number} fnId @returns {Array<() => void> | null}
   */
  function resolve(slot, fnId) {
    const cached = functions.get(fnId);
    if (cached !== undefined) return cached.fns;
    const name = decoder.decode(u8.slice(L.FN_NAME, L.FN_NAME + Atomics.load(i32, L.MB_FN_NAME_LEN)));
    const instances = libraries[slot];
    /** @type {Array<() => void> | null} */
    let found = null;
    if (instances !== undefined && typeof instances[0]?.exports[name] === "function") {
      found = instances.map((instance) => /** @type {() => void} */ (instance.exports[name]));
    }
    functions.set(fnId, { slot, fns: found });
    return found;
  }

  /** @param {unknown} e @returns {number} */
  function classify(e) {
    if (e instanceof DramWindowFault) return L.Status.oob;
    if (Atomics.load(i32, L.MB_KILL) !== 0) return L.Status.abort;
    const message = e instanceof Error ? e.message : String(e);
    if (/out of bounds/i.test(message)) return L.Status.oob;
    if (e instanceof WebAssembly.RuntimeError || e instanceof RangeError) return L.Status.trap;
    return L.Status.abort;
  }

  /** @param {number} status @param {number} startMs @param {number} elapsedNs @param {string} message */
  function report(status, startMs, elapsedNs, message) {
    const rec = L.CORE_STATUS + cpu * L.CORE_STATUS_BYTES;
    view.setInt32(rec + L.CS.status, status, true);
    view.setInt32(rec + L.CS.committed, committed, true);
    view.setFloat64(rec + L.CS.elapsedNs, elapsedNs, true);
    view.setFloat64(rec + L.CS.startMs, startMs, true);
    if (message === "") {
      view.setInt32(rec + L.CS.messageLength, 0, true);
      return;
    }
    const bytes = encoder.encode(message).subarray(0, L.CS_MESSAGE_MAX);
    view.setInt32(rec + L.CS.messageLength, bytes.length, true);
    u8.set(bytes, rec + L.CS.message);
  }

  /**
   * Runs the op of the mailbox as core `cores[k]` and reports it; `fns` is the op's export per core. Returns 1 when the
   * kernel threw (a trap, an out-of-bounds access, a DRAM-window fault, a kill), else 0.
   *
   * @returns {number}
   */
  function runCore(/** @type {number} */ k, /** @type {Array<() => void> | null} */ fns, /** @type {number} */ seq) {
    const t0 = performance.now();
    cpu = cores[k];
    inCursor = outCursor = intCursor = 0;
    committed = 0;
    let status = L.Status.ok;
    let message = "";
    let threw = 0;
    if (fns === null) {
      status = L.Status.missingFunction;
      message = "no such function in the library";
    } else {
      try {
        fns[k]();
      } catch (e) {
        threw = 1;
        status = classify(e);
        message = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      }
    }
    report(status, performance.timeOrigin + t0, (performance.now() - t0) * 1e6, message);
    // The last participant to report completes the op (seed: spmd-teardown §4.3 — the DRAIN join).
    if (Atomics.add(i32, L.MB_DONE, 1) + 1 === totalCpus) {
      Atomics.store(i32, L.MB_COMPLETE, seq);
      Atomics.notify(i32, L.MB_COMPLETE);
    }
    return threw;
  }

  return {
    /**
     * Runs the op of the mailbox on each participating core of this set, in turn. The mailbox stays as it is until
     * the op joins, and it cannot join before this set's last core reported. Once the cluster is being terminated
     * the cores not started yet are left: the dispatch is rejected anyway. Returns how many of this set's cores the
     * kernel threw on (what a parked Worker counts to collect their errors, q7_worker.js).
     *
     * @param {number} seq
     * @returns {number}
     */
    runOp(seq) {
      totalCpus = i32[L.MB_TOTAL_CPUS];
      nInputs = view.getInt32(L.ARGS, true);
      nOutputs = view.getInt32(L.ARGS + 4, true);
      nInts = view.getInt32(L.ARGS + 8, true);
      const fns = resolve(i32[L.MB_LIB], i32[L.MB_FN]);
      let threw = 0;
      for (let k = 0; k < cores.length && cores[k] < totalCpus; k++) {
        if (k > 0 && Atomics.load(i32, L.MB_KILL) !== 0) break;
        threw += runCore(k, fns, seq);
      }
      return threw;
    },

    /**
     * Drops the instances of `slot` and the exports cached from them.
     *
     * @param {number} slot
     */
    unload(slot) {
      libraries[slot] = undefined;
      for (const [id, entry] of functions) if (entry.slot === slot) functions.delete(id);
    },

    /**
     * Instantiates `module` as `slot` once per core (each core has its own globals); throws what instantiation
     * throws. Returns what the firmware reports through `ucode_api_level` / `ucode_arch` for slot 0 on core 0.
     *
     * @param {number} slot @param {WebAssembly.Module} module
     * @returns {{ apiLevel?: number; arch?: number } | undefined}
     */
    load(slot, module) {
      this.unload(slot);
      /** @type {WebAssembly.Instance[]} */
      const instances = [];
      for (const core of cores) {
        cpu = core; // imports called by a start function answer for this core
        instances.push(new WebAssembly.Instance(module, { env: { memory, ...env } }));
      }
      libraries[slot] = instances;
      if (slot !== 0 || cores[0] !== 0) return undefined;
      cpu = 0;
      const { ucode_api_level, ucode_arch } = instances[0].exports;
      /** @type {{ apiLevel?: number; arch?: number }} */
      const info = {};
      if (typeof ucode_api_level === "function") info.apiLevel = ucode_api_level();
      if (typeof ucode_arch === "function") info.arch = ucode_arch() >>> 0;
      return info;
    },
  };
}
