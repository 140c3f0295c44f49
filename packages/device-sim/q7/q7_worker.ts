/**
 * The Worker script of one Q7 core. It instantiates the firmware and the custom-op libraries with the kernel ABI
 * imports (docs/kernel-abi.md), then parks on its doorbell word with `Atomics.wait`; each ring runs one op from
 * the mailbox and reports into the core's status record, with no `postMessage` on the fast path.
 *
 * Messages from the cluster (each followed by a CMD_YIELD ring so a parked core returns to its event loop):
 * `{ type: "init", memory, cpu }`, `{ type: "load", slot, module }`. Replies: `{ type: "ready" }`,
 * `{ type: "loaded", slot, error?, info? }`.
 *
 * @module
 */
import {
  ARG_INPUTS, ARG_INTS, ARG_OUTPUTS, ARGS, CMD_EXIT, CMD_RUN, CMD_YIELD, CORE_STATUS, CORE_STATUS_BYTES, CS,
  CS_MESSAGE_MAX, DESC_BYTES, FN_NAME, LOCAL_DRAM_BASE, MAILBOX, MB_CMD, MB_COMPLETE, MB_DONE, MB_DOORBELL, MB_FENCE, MB_FN,
  MB_FN_NAME_LEN, MB_KILL, MB_LIB, MB_SEQ, MB_STDIO_WRITE, MB_TOTAL_CPUS, Q7_CORES, socAddress, Status,
  STDIO_ENTRIES, STDIO_ENTRY_BYTES, STDIO_HEADER, STDIO_HEADER_BYTES, STDIO_RING, STDIO_TEXT_MAX,
} from "./_abi.ts";

interface WorkerScope {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
}
const scope = globalThis as unknown as WorkerScope;

/** Thrown by dram_addr_to_soc_addr for an address outside the local DRAM window; reported as "oob". */
class DramWindowFault extends Error {
  override name = "DramWindowFault";
}

type KernelFn = () => void;

let cpu = 0;
let memory: WebAssembly.Memory;
let i32: Int32Array; // the mailbox, as Int32 words
let u8: Uint8Array;
let view: DataView;
let lastBell = 0;
const libraries: Array<WebAssembly.Instance | undefined> = [];
const functions = new Map<number, KernelFn | null>();
const decoder = new TextDecoder();

// Per-dispatch ABI state: the argument cursors are per core and reset at every dispatch.
let totalCpus = 1;
let nInputs = 0, nOutputs = 0, nInts = 0;
let inCursor = 0, outCursor = 0, intCursor = 0;
let committed = 0;

const env = {
  get_cpu_id: (): number => cpu,
  get_cpu_count: (): number => Q7_CORES,
  customop_total_cpus: (): number => totalCpus,
  customop_next_tensor: (): number => (inCursor < nInputs ? ARG_INPUTS + DESC_BYTES * inCursor++ : 0),
  customop_return_tensor: (): number => (outCursor < nOutputs ? ARG_OUTPUTS + DESC_BYTES * outCursor++ : 0),
  customop_next_int: (): bigint => (intCursor < nInts ? view.getBigInt64(ARG_INTS + 8 * intCursor++, true) : 0n),
  customop_cleanup: (): void => {
    // seed: spmd-teardown §4.2 — memw: the read-modify-write is a full fence for this core's stores.
    Atomics.add(i32, MB_FENCE, 0);
    committed = 1;
  },
  dram_addr_to_soc_addr: (addr: number): number => {
    // seed: spmd-teardown §3 — the aperture guard (dram_addr & 0xFFFF0000) == 0x80000, else _Assert.
    if ((addr & 0xffff0000) !== LOCAL_DRAM_BASE) {
      throw new DramWindowFault(
        `dram_addr_to_soc_addr(0x${(addr >>> 0).toString(16)}): address outside the local DRAM window`,
      );
    }
    return socAddress(cpu, addr);
  },
  q7_write: (stream: number, ptr: number, len: number): void => {
    if (len <= 0) return;
    if (ptr < 0 || ptr + len > u8.length) throw new RangeError("q7_write: memory access out of bounds");
    for (let off = 0; off < len; off += STDIO_TEXT_MAX) {
      const n = Math.min(STDIO_TEXT_MAX, len - off);
      const index = Atomics.add(i32, MB_STDIO_WRITE, 1);
      const entry = STDIO_RING + (index % STDIO_ENTRIES) * STDIO_ENTRY_BYTES;
      u8[entry + STDIO_HEADER.stream] = stream;
      u8[entry + STDIO_HEADER.cpu] = cpu;
      view.setUint16(entry + STDIO_HEADER.length, n, true);
      u8.copyWithin(entry + STDIO_HEADER_BYTES, ptr + off, ptr + off + n);
      // The sequence is stored last: a reader that sees it sees the text.
      Atomics.store(i32, (entry - MAILBOX) >> 2, index + 1);
    }
  },
};

function resolve(slot: number, fnId: number): KernelFn | null {
  const cached = functions.get(fnId);
  if (cached !== undefined) return cached;
  const name = decoder.decode(u8.slice(FN_NAME, FN_NAME + Atomics.load(i32, MB_FN_NAME_LEN)));
  const fn = libraries[slot]?.exports[name];
  const found = typeof fn === "function" ? (fn as KernelFn) : null;
  functions.set(fnId, found);
  return found;
}

function classify(e: unknown): number {
  if (e instanceof DramWindowFault) return Status.oob;
  if (Atomics.load(i32, MB_KILL) !== 0) return Status.abort;
  const message = e instanceof Error ? e.message : String(e);
  if (/out of bounds/i.test(message)) return Status.oob;
  if (e instanceof WebAssembly.RuntimeError || e instanceof RangeError) return Status.trap;
  return Status.abort;
}

function report(status: number, elapsedNs: number, message: string): void {
  const rec = CORE_STATUS + cpu * CORE_STATUS_BYTES;
  view.setInt32(rec + CS.status, status, true);
  view.setInt32(rec + CS.committed, committed, true);
  view.setFloat64(rec + CS.elapsedNs, elapsedNs, true);
  const bytes = new TextEncoder().encode(message).subarray(0, CS_MESSAGE_MAX);
  view.setInt32(rec + CS.messageLength, bytes.length, true);
  u8.set(bytes, rec + CS.message);
}

function runOp(): void {
  const t0 = performance.now();
  totalCpus = i32[MB_TOTAL_CPUS];
  nInputs = view.getInt32(ARGS, true);
  nOutputs = view.getInt32(ARGS + 4, true);
  nInts = view.getInt32(ARGS + 8, true);
  inCursor = outCursor = intCursor = 0;
  committed = 0;
  let status: number = Status.ok;
  let message = "";
  const fn = resolve(i32[MB_LIB], i32[MB_FN]);
  if (fn === null) {
    status = Status.missingFunction;
    message = "no such function in the library";
  } else {
    try {
      fn();
    } catch (e) {
      status = classify(e);
      message = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    }
  }
  if (status === Status.ok) report(status, (performance.now() - t0) * 1e6, "");
  else report(status, (performance.now() - t0) * 1e6, message);
  const seq = i32[MB_SEQ];
  // The last participant to report completes the op (seed: spmd-teardown §4.3 — the DRAIN join).
  if (Atomics.add(i32, MB_DONE, 1) + 1 === totalCpus) {
    Atomics.store(i32, MB_COMPLETE, seq);
    Atomics.notify(i32, MB_COMPLETE);
  }
}

/** Parks on this core's doorbell until a command other than RUN arrives. */
function park(): void {
  const bell = MB_DOORBELL + cpu;
  for (;;) {
    Atomics.wait(i32, bell, lastBell);
    lastBell = Atomics.load(i32, bell);
    const cmd = Atomics.load(i32, MB_CMD);
    if (cmd === CMD_RUN) {
      runOp();
    } else if (cmd === CMD_YIELD) {
      return; // the cluster posted a message: let this task end so it is delivered
    } else if (cmd === CMD_EXIT) {
      scope.close();
      return;
    }
  }
}

/** Bun gotcha (ARCHITECTURE §10): a reply posted in the task that then blocks is never delivered. */
function replyThenPark(message: unknown): void {
  scope.postMessage(message);
  setTimeout(park, 0);
}

function load(slot: number, module: WebAssembly.Module): void {
  try {
    const instance = new WebAssembly.Instance(module, { env: { memory, ...env } });
    libraries[slot] = instance;
    let info: { apiLevel?: number; arch?: number } | undefined;
    if (slot === 0 && cpu === 0) {
      const { ucode_api_level, ucode_arch } = instance.exports as Record<string, unknown>;
      info = {};
      if (typeof ucode_api_level === "function") info.apiLevel = ucode_api_level() as number;
      if (typeof ucode_arch === "function") info.arch = (ucode_arch() as number) >>> 0;
    }
    replyThenPark({ type: "loaded", slot, info });
  } catch (e) {
    replyThenPark({ type: "loaded", slot, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
  }
}

scope.onmessage = (e: MessageEvent) => {
  const msg = e.data;
  if (msg.type === "init") {
    cpu = msg.cpu;
    memory = msg.memory;
    i32 = new Int32Array(memory.buffer, MAILBOX, (memory.buffer.byteLength - MAILBOX) >> 2);
    u8 = new Uint8Array(memory.buffer);
    view = new DataView(memory.buffer);
    lastBell = Atomics.load(i32, MB_DOORBELL + cpu);
    replyThenPark({ type: "ready" });
  } else if (msg.type === "load") {
    load(msg.slot, msg.module);
  }
};
