import { describe, expect, test } from "bun:test";
import {
  DmaDirection,
  encodeArgTable,
  encodeOpcodeTable,
  type Instruction,
  libraryTag,
  NotificationKind,
  Opcode,
  type OpcodeTableEntry,
  Q7Map,
  TpbErrorId,
} from "@nrt/core/isa";
import type { DeviceMemory } from "@nrt/core/portal";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { NrtError, NrtStatus } from "@nrt/core";
import process from "node:process";
import { TpbFaultMask } from "./sequencer.ts";
import { bytesF32, f32Bytes, readBytes, TestHost } from "./_testing.ts";
import { DeviceSimPortal } from "./device_sim_portal.ts";

const KERNELS = new URL("../../kernels/wasm/", import.meta.url);
const N = 1024, BYTES = N * 4, CORES = 8, SHARE = BYTES / CORES;
const A = 0x0000, B = 0x1000, C = 0x2000; // SBUF offsets
const DONE = 20;
const VECTOR_ADD = 0x101, SPIN = 0x102, TRAP = 0x103;

interface Staged {
  h: TestHost;
  out: DeviceMemory;
  a: number[];
  b: number[];
}

/** Boots the stock firmware, stages vector_add + faults, the opcode table, rings and the argument table. */
async function stage(): Promise<
  Staged & { stream(opcode: number, doorbell: number, slot: number, marker?: boolean): Promise<void> }
> {
  const h = new TestHost({ hbmBytes: 1 << 26 });
  await h.attachNq(64);
  await h.bootQ7({ iram: await readBytes(new URL("stock_pool.wasm", KERNELS)), dram: new Uint8Array([3, 0, 0, 0]) });
  const vectorAddWasm = await readBytes(new URL("vector_add.wasm", KERNELS));
  const faultsWasm = await readBytes(new URL("faults.wasm", KERNELS));
  const vectorAdd = await h.put(vectorAddWasm);
  const faults = await h.put(faultsWasm);
  const tags = new Map([[vectorAdd, libraryTag(vectorAddWasm)], [faults, libraryTag(faultsWasm)]]);
  const entry = (opcode: number, lib: DeviceMemory, name: string): OpcodeTableEntry => ({
    opcode,
    cpuIdFlag: false,
    totalCpus: 8,
    libAddr: lib.pa,
    libBytes: lib.bytes,
    libTag: tags.get(lib),
    name,
  });
  const table = await h.put(encodeOpcodeTable({
    m2s: [],
    s2m: [],
    entries: [entry(VECTOR_ADD, vectorAdd, "vector_add"), entry(SPIN, faults, "spin"), entry(TRAP, faults, "trap")],
  }));
  await h.khal.q7SwapTable(h.target, 0, table.pa);

  const a = Array.from({ length: N }, (_, i) => i * 0.5);
  const b = Array.from({ length: N }, (_, i) => 1000 - i);
  const inA = await h.put(f32Bytes(a)), inB = await h.put(f32Bytes(b));
  const out = await h.put(BYTES);
  const m2s = await h.stageRings(Array.from({ length: CORES }, (_, c) => [
    { src: inA.pa + c * SHARE, dst: h.sbufPa(A + c * SHARE), bytes: SHARE },
    { src: inB.pa + c * SHARE, dst: h.sbufPa(B + c * SHARE), bytes: SHARE },
  ]));
  const s2m = await h.stageRings(
    Array.from({ length: CORES }, (_, c) => [{ src: h.sbufPa(C + c * SHARE), dst: out.pa + c * SHARE, bytes: SHARE }]),
  );
  const t = (off: number) => ({ addr: Q7Map.SBUF_BASE + off, bytes: BYTES, dtype: 0, dims: [N] });
  const args = await h.put(encodeArgTable({ inputs: [t(A), t(B)], outputs: [t(C)], ints: [] }));

  const stream = async (opcode: number, doorbell: number, slot: number, marker = false): Promise<void> => {
    const program: Instruction[] = [
      // The PREAMBLE's ucode-library load sequence: both libraries of the table (vector_add, faults).
      { op: Opcode.ULIB_LOAD, lib: 0, libs: 2, opcodeTable: table.pa },
      { op: Opcode.ULIB_LOAD, lib: 1, libs: 2, opcodeTable: table.pa },
      { op: Opcode.DMA_CONFIG, direction: DmaDirection.M2S, queues: CORES, ringTable: m2s.pa },
      { op: Opcode.DMA_CONFIG, direction: DmaDirection.S2M, queues: CORES, ringTable: s2m.pa },
      { op: Opcode.DMA_CONFIG_SIZE, m2sBytes: 2 * BYTES, s2mBytes: BYTES },
      {
        op: Opcode.LOAD_POOL_ARGUMENT,
        embeddingTableBase: args.pa,
        sbufBase: h.sbufPa(0),
        oneValueReadAddr: h.khal.evtAccelAddr(0, 0),
        completionWriteAddr: h.khal.semIncAddr(0, DONE),
      },
      { op: Opcode.EXTENDED_INST, opcode, call: 0 },
      ...(marker ? [{ op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0xabc } as const] : []),
      { op: Opcode.DRAIN_ARM },
      { op: Opcode.DRAIN },
      { op: Opcode.EVENT_SEMAPHORE, updateMode: 0x13, semaphore: DONE, value: 0 },
      { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
    ];
    await h.installStream(program, doorbell, slot, 4);
  };
  return { h, out, a, b, stream };
}

describe("DeviceSimPortal with the Q7 cluster", () => {
  test("DeviceSimPortal runs a hand-built vector_add custom op on 8 Q7 cores end to end", async () => {
    const { h, out, a, b, stream } = await stage();
    try {
      await stream(VECTOR_ADD, 1, 0);
      // Installing the stream boots the cluster (the load path), before any execute.
      expect(h.portal.q7Events().map((e) => e.kind)).toEqual(["released", "cluster-started"]);
      await h.fire(1);
      const { records } = await h.read();
      expect(records.map((r) => [r.kind, r.value])).toEqual([[NotificationKind.EVENT_SEMAPHORE, 1], [
        NotificationKind.EXEC_DONE,
        1,
      ]]);
      const c = bytesF32(await h.portal.memRead(out, 0, BYTES));
      expect(c).toEqual(a.map((x, i) => x + b[i]));
      expect(h.portal.queueBytes(0, 0)).toEqual({
        m2s: new Array(CORES).fill(2 * SHARE),
        s2m: new Array(CORES).fill(SHARE),
      });
      // A second execution reuses the cluster and the prepared library.
      await h.portal.memWrite(out, 0, new Uint8Array(BYTES));
      await h.fire(1);
      expect((await h.read()).records.map((r) => r.value)).toEqual([2, 2]);
      expect(bytesF32(await h.portal.memRead(out, 0, 8))).toEqual([1000, 999.5]);
      expect(h.portal.q7Events().map((e) => e.kind)).toEqual(["released", "cluster-started"]);
      expect(await h.portal.stdioEntries(0, 0)).toEqual([]);
    } finally {
      await h.portal.close();
    }
    expect(h.portal.q7Events().at(-1)?.kind).toBe("cluster-terminated");
  }, 30_000);

  test(
    "DeviceSimPortal reports a trapping kernel as one fatal TPB_ERROR per core and posts no completion",
    async () => {
      const { h, stream } = await stage();
      try {
        await stream(TRAP, 1, 0);
        await h.fire(1);
        const { records } = await h.read();
        expect(records).toHaveLength(CORES);
        expect(records.map((r) => r.q7)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        for (const r of records) {
          expect(r).toMatchObject({
            kind: NotificationKind.TPB_ERROR,
            code: TpbErrorId.FATAL,
            mask: TpbFaultMask.Q7_TRAP,
            engine: 2,
            aux: 0,
          });
        }
        expect((await h.khal.readEngineIps(h.target, 0))[2]).not.toBe(0);
        expect(await h.portal.semaphoreRead(0, 0, DONE)).toBe(0);
      } finally {
        await h.portal.close();
      }
    },
    30_000,
  );

  test(
    "the watchdog counts a run's budget from its doorbell and, after a hung kernel, boots a fresh cluster itself",
    async () => {
      // Both ours: the device's budget counts from the doorbell, as the host's wait does, so a run rung behind a hang
      // and moved past the budget while it waited is dropped as it starts; the hang's drop boots fresh Q7 cores at
      // once.
      const { h, out, a, b, stream } = await stage();
      try {
        await stream(SPIN, 1, 0, true);
        await stream(VECTOR_ADD, 2, 1);
        await h.portal.semaphoreIncrement(0, 0, 1, 1);
        await h.portal.notificationWait(0, 0, 0); // the marker: the spin kernel is dispatched
        await h.portal.semaphoreIncrement(0, 0, 2, 1); // queued behind the spin
        await h.portal.elapse(0, 30_000);
        await h.portal.whenIdle(0, 0);
        expect((await h.read()).records.map((r) => r.value)).toEqual([0xabc]); // no completion for either run
        expect(h.portal.sequencerFaults(0, 0).map((f) => f.message)).toEqual([
          expect.stringMatching(/^watchdog: run 1 of stream slot 0 exceeded 30000 ms; dropped$/),
          expect.stringMatching(/^watchdog: run 1 of stream slot 1 exceeded 30000 ms; dropped$/),
        ]);
        expect(h.portal.q7Events().map((e) => [e.kind, e.detail])).toEqual([
          ["released", undefined],
          ["cluster-started", undefined],
          ["cluster-terminated", "watchdog"],
          ["cluster-started", undefined],
        ]);
        expect(h.portal.q7Started(0, 0)).toBe(true);
        expect(h.portal.q7Busy(0, 0)).toBe(false);
        // A doorbell rung now has its whole budget, and runs on the cores the device booted.
        await h.fire(2);
        expect((await h.read()).records.map((r) => r.kind)).toEqual([
          NotificationKind.EVENT_SEMAPHORE,
          NotificationKind.EXEC_DONE,
        ]);
        expect(bytesF32(await h.portal.memRead(out, 0, BYTES))).toEqual(a.map((x, i) => x + b[i]));
        expect(h.portal.q7Events()).toHaveLength(4);
      } finally {
        await h.portal.close();
      }
    },
    30_000,
  );

  test("DeviceSimPortal.resetQ7() drops a hung stream and a later op boots a fresh cluster", async () => {
    const { h, out, a, b, stream } = await stage();
    try {
      await stream(SPIN, 1, 0, true);
      await stream(VECTOR_ADD, 2, 1);
      await h.portal.semaphoreIncrement(0, 0, 1, 1);
      // The marker NOTIFY after EXTENDED_INST says the spin kernel is dispatched; the stream then blocks in DRAIN.
      await h.portal.notificationWait(0, 0, 0);
      await h.portal.resetQ7(0, 0);
      await h.portal.whenIdle(0, 0);
      expect((await h.read()).records.map((r) => r.value)).toEqual([0xabc]);
      await h.fire(2);
      expect((await h.read()).records.map((r) => r.kind)).toEqual([
        NotificationKind.EVENT_SEMAPHORE,
        NotificationKind.EXEC_DONE,
      ]);
      expect(bytesF32(await h.portal.memRead(out, 0, BYTES))).toEqual(a.map((x, i) => x + b[i]));
      expect(h.portal.q7Events().map((e) => e.kind)).toEqual([
        "released",
        "cluster-started",
        "cluster-terminated",
        "cluster-started",
      ]);
    } finally {
      await h.portal.close();
    }
  }, 30_000);
});

describe("DeviceSimPortal Q7 boot", () => {
  test("DeviceSimPortal refuses to boot Q7 cores whose images differ and faults the EXTENDED_INST", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    await h.khal.q7HoldRunStall(h.target, 0);
    await h.khal.q7UcodeEngInit(h.target, 0, { iram: new Uint8Array([1, 2, 3]), dram: new Uint8Array([4]) });
    await h.portal.barWrite(0, 0, CAYMAN_SPEC.csr.q7Iram + 5 * CAYMAN_SPEC.csr.q7IramStride, new Uint8Array([9, 9, 9]));
    await h.khal.q7ReleaseRunStall(h.target, 0);
    expect(h.portal.q7Events()[0]).toMatchObject({ kind: "boot-failed", via: "host-csr" });
    await h.installStream([{ op: Opcode.EXTENDED_INST, opcode: 1, call: 0 }], 1);
    await h.fire(1);
    const { records } = await h.read();
    expect(records.map((r) => [r.kind, r.code, r.mask])).toEqual([
      [NotificationKind.TPB_ERROR, TpbErrorId.FATAL, TpbFaultMask.Q7_BOOT],
      [NotificationKind.TPB_ERROR, TpbErrorId.FATAL, TpbFaultMask.Q7_BOOT],
    ]);
    expect(h.portal.sequencerFaults(0, 0)[0].message).toContain("failed");
    await h.portal.close();
  });
});

describe("DeviceSimPortal small ops on the device agent's thread", () => {
  const PRINTF = 0x104, DONE_SEM = 21;

  /** Two streams of faults.printf on 8 cores: slot 0 prints 1 line per core (doorbell 1), slot 1 2^50 (doorbell 2). */
  async function printfStreams(): Promise<TestHost> {
    const h = new TestHost({ hbmBytes: 1 << 24, watchdogMs: 10_000 });
    await h.attachNq(64);
    await h.bootQ7({ iram: await readBytes(new URL("stock_pool.wasm", KERNELS)), dram: new Uint8Array([3, 0, 0, 0]) });
    const faultsWasm = await readBytes(new URL("faults.wasm", KERNELS));
    const faults = await h.put(faultsWasm);
    const table = await h.put(encodeOpcodeTable({
      m2s: [],
      s2m: [],
      entries: [{
        opcode: PRINTF,
        cpuIdFlag: false,
        totalCpus: 8,
        libAddr: faults.pa,
        libBytes: faults.bytes,
        libTag: libraryTag(faultsWasm),
        name: "printf",
      }],
    }));
    await h.khal.q7SwapTable(h.target, 0, table.pa);
    for (const [slot, lines] of [[0, 1n], [1, 1n << 50n]] as const) {
      const args = await h.put(encodeArgTable({ inputs: [], outputs: [], ints: [lines] }));
      await h.installStream(
        [
          { op: Opcode.ULIB_LOAD, lib: 0, libs: 1, opcodeTable: table.pa },
          {
            op: Opcode.LOAD_POOL_ARGUMENT,
            embeddingTableBase: args.pa,
            sbufBase: h.sbufPa(0),
            oneValueReadAddr: h.khal.evtAccelAddr(0, 0),
            completionWriteAddr: h.khal.semIncAddr(0, DONE_SEM),
          },
          { op: Opcode.EXTENDED_INST, opcode: PRINTF, call: 0 },
          { op: Opcode.NOTIFY, kind: NotificationKind.HW_ERROR, value: 0xabc + slot },
          { op: Opcode.DRAIN_ARM },
          { op: Opcode.DRAIN },
          { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: slot },
        ],
        slot + 1,
        slot,
        4,
      );
    }
    return h;
  }

  test(
    "a quick op that turns endless on the agent's thread is dropped by the device's watchdog at its budget, and the next run boots a fresh cluster",
    async () => {
      const h = await printfStreams();
      try {
        // Quick three times: on the Workers, then (learned quick, and once the watchdog's Worker is up) on the agent's
        // own thread. Same records either way.
        for (let i = 0; i < 3; i++) {
          await h.fire(1);
          const { records } = await h.read();
          expect(records.map((r) => r.kind)).toEqual([NotificationKind.HW_ERROR, NotificationKind.EXEC_DONE]);
          expect(records[0].value).toBe(0xabc);
        }
        // The same function with 2^50 lines: it runs on the agent's thread and never returns. The marker NOTIFY between
        // the EXTENDED_INST and the DRAIN is published before the op runs, as the cores run beside the sequencer.
        await h.portal.semaphoreIncrement(0, 0, 2, 1);
        let marker: number[] = [];
        for (let i = 0; i < 5000 && marker.length === 0; i++) {
          marker = (await h.read()).records.map((r) => r.value);
          if (marker.length === 0) await new Promise((r) => setTimeout(r, 1));
        }
        expect(marker).toEqual([0xabd]);
        // The host moves the device clock past the budget while the agent is blocked in the op: its watchdog Worker
        // stops it, and the run is dropped without a completion record.
        await h.portal.elapse(0, 10_000);
        await h.portal.whenIdle(0, 0);
        expect((await h.read()).records).toEqual([]);
        expect(h.portal.sequencerFaults(0, 0).map((f) => f.message)).toEqual([
          expect.stringContaining("watchdog: run"),
        ]);
        expect(h.portal.q7Events().filter((e) => e.kind === "cluster-terminated").map((e) => e.detail)).toEqual([
          "watchdog",
        ]);
        expect(h.portal.q7Busy(0, 0)).toBe(false);
        // The device booted a fresh cluster after the drop (ours); the next quick run completes on it.
        await h.fire(1);
        expect((await h.read()).records.map((r) => r.kind)).toEqual([
          NotificationKind.HW_ERROR,
          NotificationKind.EXEC_DONE,
        ]);
        expect(h.portal.q7Events().filter((e) => e.kind === "cluster-started").length).toBe(2);
      } finally {
        await h.portal.close();
      }
    },
    30_000,
  );
});

describe("DeviceSimPortal.agentHeapCells (ours, a diagnostic)", () => {
  test("counts the live JS cells of the device agent's thread on Bun, and nothing on V8 or for an inline device", async () => {
    const portal = new DeviceSimPortal();
    try {
      const collected = await portal.agentHeapCells(0, 0, true);
      if ((globalThis as { Bun?: unknown }).Bun !== undefined) {
        // The agent's thread holds its sequencers, memory map and Q7 bookkeeping: thousands of cells.
        expect(collected).toBeGreaterThan(1000);
        expect(await portal.agentHeapCells(0, 0)).toBeGreaterThan(1000);
      } else {
        expect(collected).toBeUndefined();
      }
      await expect(portal.agentHeapCells(3, 0)).rejects.toThrow("device 3 does not exist");
    } finally {
      await portal.close();
    }
    const inline = new DeviceSimPortal({ agents: "inline" });
    try {
      expect(await inline.agentHeapCells(0, 0, true)).toBeUndefined();
    } finally {
      await inline.close();
    }
  });
});

describe("DeviceSimPortal and the simulator's variables (docs/configuration.md)", () => {
  /** `new DeviceSimPortal(options)` with `name` set to `value` in the process environment, restored at once. */
  function construct(name: string, value: string, options?: ConstructorParameters<typeof DeviceSimPortal>[0]): unknown {
    const before = process.env[name];
    process.env[name] = value;
    try {
      return new DeviceSimPortal(options);
    } catch (e) {
      return e;
    } finally {
      if (before === undefined) delete process.env[name];
      else process.env[name] = before;
    }
  }

  test("a bad NRT_SIM_Q7_WORKERS or NRT_SIM_LOCAL_OP_BYTES refuses the portal, NRT_INVALID naming the variable", async () => {
    const cases: Array<[string, string, string]> = [
      ["NRT_SIM_Q7_WORKERS", "9", 'NRT_SIM_Q7_WORKERS is "9", expected an integer from 1 to 8'],
      ["NRT_SIM_Q7_WORKERS", "0", 'NRT_SIM_Q7_WORKERS is "0", expected an integer from 1 to 8'],
      ["NRT_SIM_LOCAL_OP_BYTES", "x", 'NRT_SIM_LOCAL_OP_BYTES is "x", expected an integer ≥ 0'],
      ["NRT_SIM_LOCAL_OP_BYTES", "-1", 'NRT_SIM_LOCAL_OP_BYTES is "-1", expected an integer ≥ 0'],
    ];
    for (const [name, value, why] of cases) {
      for (const agents of ["device", "core", "inline"] as const) {
        const e = construct(name, value, { agents });
        if (e instanceof DeviceSimPortal) await e.close();
        expect(e).toBeInstanceOf(NrtError);
        expect((e as NrtError).status).toBe(NrtStatus.NRT_INVALID);
        expect((e as NrtError).message).toBe(`Cannot start the simulated device: ${why}`);
      }
    }
    // Good values start the device as before.
    const good = construct("NRT_SIM_Q7_WORKERS", "2");
    expect(good).toBeInstanceOf(DeviceSimPortal);
    await (good as DeviceSimPortal).close();
  });
});
