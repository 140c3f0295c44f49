import { describe, expect, test } from "bun:test";
import type { SiliconSpec } from "@nrt/core/hal";
import { encodeOpcodeTable, libraryTag, NotificationKind, Opcode, Q7Map } from "@nrt/core/isa";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import type { Q7ClusterPort, Q7CoreResult, Q7DispatchOp } from "./q7_complex.ts";
import { TpbFaultMask } from "./sequencer.ts";
import { TestHost } from "./_testing.ts";

const SBUF = 1 << 20;
const SMALL: SiliconSpec = { ...CAYMAN_SPEC, sbufBytesPerCore: SBUF };
const SUNDA_LIKE: SiliconSpec = { ...SMALL, runStallRelease: "evt-sem", csr: { ...CAYMAN_SPEC.csr, runStall: null } };

/** A cluster without Workers: reports `outcome` for every core and records what it was asked. */
function fakeFactory(outcome: (cpu: number) => Q7CoreResult["status"]) {
  const log = { created: 0, boots: [] as Uint8Array[], prepared: [] as string[], dispatched: [] as Q7DispatchOp[] };
  const factory = (o: { sbufBytes: number }): Promise<Q7ClusterPort> => {
    log.created++;
    const pages = (Q7Map.SBUF_BASE + o.sbufBytes) / 65536;
    return Promise.resolve({
      memory: new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true }),
      boot: (fw) => Promise.resolve(void log.boots.push(fw.iram)),
      prepare: (key) => Promise.resolve(void log.prepared.push(key)),
      dispatch: (op) => {
        log.dispatched.push(op);
        const cores = Array.from(
          { length: 8 },
          (_, cpu) => ({
            cpu,
            ran: cpu < op.totalCpus,
            status: cpu < op.totalCpus ? outcome(cpu) : "ok" as const,
            committed: true,
          }),
        );
        return Promise.resolve({ cores });
      },
      drainStdio: () => [{ cpu: 0, stream: 1, text: "hi" }],
      terminate: () => {},
    });
  };
  return { factory, log };
}

/** `preamble`: what the stream's PREAMBLE holds — the ULIB_LOAD of the table's one library (default), none, or a bad one. */
async function stageOp(
  h: TestHost,
  totalCpus: number,
  preamble: "ulib" | "none" | "wrong-count" | "bad-tag" = "ulib",
): Promise<void> {
  const image = new Uint8Array([0, 0x61, 0x73, 0x6d]);
  const lib = await h.put(image);
  const table = await h.put(encodeOpcodeTable({
    m2s: [],
    s2m: [],
    entries: [
      {
        opcode: 7,
        cpuIdFlag: false,
        totalCpus,
        libAddr: lib.pa,
        libBytes: lib.bytes,
        libTag: preamble === "bad-tag" ? libraryTag(image) ^ 1 : libraryTag(image),
        name: "k",
      },
      { opcode: 8, cpuIdFlag: false, totalCpus: 1, libAddr: 0, libBytes: 0, name: "noop" },
    ],
  }));
  await h.installStream([
    ...(preamble === "none" ? [] : [
      {
        op: Opcode.ULIB_LOAD,
        lib: preamble === "wrong-count" ? 1 : 0,
        libs: preamble === "wrong-count" ? 2 : 1,
        opcodeTable: table.pa,
      } as const,
    ]),
    { op: Opcode.MODEL_SWITCH, model: 9, opcodeTable: table.pa },
    { op: Opcode.EXTENDED_INST, opcode: 7, call: 0 },
    { op: Opcode.DRAIN },
    { op: Opcode.EXTENDED_INST, opcode: 8, call: 0 },
    { op: Opcode.DRAIN },
    { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
  ], 1);
}

describe("Q7Complex", () => {
  test("Q7Complex boots the cluster when the stream is installed (load, not first execute) and keeps it and its libraries", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8);
    // The boot is part of the load path ("on_ucode_booted() boots the core",
    // runtime-synthesis §2), so an execute never pays for it.
    expect(log.created).toBe(1);
    await h.fire(1);
    await h.fire(1);
    expect(log.created).toBe(1);
    expect([...log.boots[0]]).toEqual([1]);
    expect(log.prepared).toHaveLength(1);
    expect(log.dispatched.map((d) => [d.key === "" ? "fw" : "lib", d.fn, d.totalCpus])).toEqual([
      ["lib", "k", 8],
      ["fw", "noop", 1],
      ["lib", "k", 8],
      ["fw", "noop", 1],
    ]);
    const { records } = await h.read();
    expect(records.map((r) => [r.model, r.value])).toEqual([[9, 1], [9, 2]]);
    expect(await h.portal.stdioEntries(0, 0)).toEqual([{ cpu: 0, stream: 1, text: "hi" }]);
    await h.portal.close();
  });

  test("ULIB_LOAD: an op whose library no PREAMBLE ULIB_LOAD loaded faults OPCODE; a firmware op needs none", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8, "none");
    await h.fire(1);
    const { records } = await h.read();
    expect(records.map((r) => [r.kind, r.mask])).toEqual([[NotificationKind.TPB_ERROR, TpbFaultMask.OPCODE]]);
    expect(h.portal.sequencerFaults(0, 0).at(-1)?.message).toMatch(
      /was not loaded by a ULIB_LOAD of the stream's PREAMBLE/,
    );
    expect(log.dispatched).toEqual([]);
    await h.portal.close();
  });

  test("ULIB_LOAD of an image whose bytes do not hash to the table's tag faults OPCODE and prepares nothing", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8, "bad-tag");
    await h.fire(1);
    const { records } = await h.read();
    expect(records.map((r) => [r.kind, r.mask])).toEqual([[NotificationKind.TPB_ERROR, TpbFaultMask.OPCODE]]);
    expect(h.portal.sequencerFaults(0, 0).at(-1)?.message).toMatch(/does not match its tag/);
    expect(log.prepared).toEqual([]);
    expect(log.dispatched).toEqual([]);
    await h.portal.close();
  });

  test("ULIB_LOAD naming more libraries than the opcode table holds faults OPCODE before anything runs", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8, "wrong-count");
    await h.fire(1);
    const { records } = await h.read();
    expect(records.map((r) => [r.kind, r.mask, r.value])).toEqual([[
      NotificationKind.TPB_ERROR,
      TpbFaultMask.OPCODE,
      0,
    ]]);
    expect(h.portal.sequencerFaults(0, 0).at(-1)?.message).toMatch(/ULIB_LOAD 1\/2: .* names 1 libraries/);
    expect(log.dispatched).toEqual([]);
    await h.portal.close();
  });

  test("Q7Complex maps each failing core's status to its TPB_ERROR subtype bit", async () => {
    const statuses = ["ok", "oob", "ok", "missing-function", "abort", "ok", "trap", "ok"] as const;
    const { factory } = fakeFactory((cpu) => statuses[cpu]);
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8);
    await h.fire(1);
    const { records } = await h.read();
    expect(records.map((r) => [r.q7, r.mask, r.value])).toEqual([
      [1, TpbFaultMask.Q7_OOB, 3],
      [3, TpbFaultMask.Q7_MISSING_FUNCTION, 3],
      [4, TpbFaultMask.Q7_ABORT, 3],
      [6, TpbFaultMask.Q7_TRAP, 3],
    ]);
    await h.portal.close();
  });

  test("Q7Complex on an evt-sem generation comes online when the sequencer first runs a stream", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SUNDA_LIKE, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await h.bootQ7({ iram: new Uint8Array([5]), dram: new Uint8Array([6]) }); // no CSR write on this generation
    expect(h.portal.q7Events()).toEqual([]);
    await stageOp(h, 1);
    await h.fire(1);
    expect(h.portal.q7Events().map((e) => [e.kind, e.via])).toEqual([["released", "evt-sem"], [
      "cluster-started",
      undefined,
    ]]);
    expect(log.dispatched).toHaveLength(2);
    expect((await h.read()).records.map((r) => r.kind)).toEqual([NotificationKind.EXEC_DONE]);
    await h.portal.close();
  });

  test("Q7Complex refuses EXTENDED_INST while the cores are held in run-stall", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(8);
    await stageOp(h, 8);
    await h.fire(1);
    expect((await h.read()).records.map((r) => r.mask)).toEqual([TpbFaultMask.Q7_BOOT]);
    expect(log.created).toBe(0);
    await h.portal.close();
  });
});
