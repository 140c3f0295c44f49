import { describe, expect, test } from "bun:test";
import type { SiliconSpec } from "@nrt/core/hal";
import {
  encodeOpcodeTable,
  type Instruction,
  libraryKey,
  libraryTag,
  NotificationKind,
  Opcode,
  Q7Map,
} from "@nrt/core/isa";
import { readFileSync } from "node:fs";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import type { Q7ClusterFactory, Q7ClusterPort, Q7CoreResult, Q7DispatchOp } from "./q7_complex.ts";
import { Q7Cluster } from "./q7/q7_cluster.ts";
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

  test("Q7Complex: a cluster stopped while it boots neither takes the SBUF nor reports itself started", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { factory, log } = fakeFactory(() => "ok");
    // The first cluster's boot waits at the gate; a Q7 reset arrives meanwhile.
    const slow: Q7ClusterFactory = async (o) => {
      const c = await factory(o);
      return { ...c, boot: async (fw) => (await gate, await c.boot(fw)) };
    };
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: slow });
    try {
      await h.attachNq(8);
      await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
      const staging = stageOp(h, 8); // installing the stream boots the cluster
      for (let i = 0; i < 1000 && log.created === 0; i++) await new Promise((r) => setTimeout(r, 1));
      expect(log.created).toBe(1);
      await h.portal.resetQ7(0, 0);
      open();
      await staging;
      await h.portal.whenIdle(0, 0);
      const kinds = () => h.portal.q7Events().map((e) => e.kind);
      expect(kinds()).toEqual(["released", "cluster-terminated"]);
      expect(h.portal.q7Started(0, 0)).toBe(false);
      // The next op boots a fresh cluster, and that one starts and runs.
      await h.fire(1);
      expect(kinds()).toEqual(["released", "cluster-terminated", "cluster-started"]);
      expect(h.portal.q7Started(0, 0)).toBe(true);
      expect(log.created).toBe(2);
      expect((await h.read()).records.map((r) => r.kind)).toContain(NotificationKind.EXEC_DONE);
    } finally {
      await h.portal.close();
    }
  });

  test("Q7Complex boots every cluster of its NeuronCore on one memory slot, so a Q7 reset keeps its memory (ours)", async () => {
    const { factory, log } = fakeFactory(() => "ok");
    const slots: Array<{ memory?: WebAssembly.Memory } | undefined> = [];
    // As Q7Cluster.create does with a slot: the memory the slot holds, else its own, which the slot then holds.
    const onSlot: Q7ClusterFactory = async (o) => {
      slots.push(o.memorySlot);
      const c = await factory(o);
      const memory = o.memorySlot === undefined ? c.memory : (o.memorySlot.memory ??= c.memory);
      return { ...c, memory };
    };
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: onSlot });
    try {
      await h.attachNq(8);
      await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
      await stageOp(h, 8);
      await h.portal.resetQ7(0, 0);
      await h.fire(1);
      await h.portal.resetQ7(0, 0);
      await h.fire(1);
      expect(log.created).toBe(3);
      expect(slots[0]).toBeDefined();
      expect(slots.every((s) => s === slots[0])).toBe(true);
      expect((await h.read()).records.map((r) => r.kind)).toEqual([
        NotificationKind.EXEC_DONE,
        NotificationKind.EXEC_DONE,
      ]);
    } finally {
      await h.portal.close();
    }
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

function kernel(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(`../../kernels/wasm/${name}.wasm`, import.meta.url)));
}

/** The no-op kernel with a custom section holding `n` appended: the same code, distinct bytes (a distinct library). */
function noopLibrary(n: number): Uint8Array {
  return new Uint8Array([...kernel("noop"), 0, 3, 1, 0x76, n]);
}

/**
 * Real clusters (2 Workers, at most `maxLibraries` libraries) whose prepares, evictions and dispatches are logged
 * with the libraries' labels (`name`: key → label).
 */
function boundedFactory(maxLibraries: number, name: Map<string, string>) {
  const log: string[] = [];
  const counts: number[] = [];
  const label = (key: string) => key === "" ? "fw" : name.get(key) ?? key;
  const factory: Q7ClusterFactory = async (o) => {
    const c = await Q7Cluster.create({ sbufBytes: o.sbufBytes, workers: 2, maxLibraries });
    return {
      memory: c.memory,
      boot: (fw) => c.boot(fw),
      prepare: async (key, wasm) => {
        const evicted = await c.prepare(key, wasm);
        log.push(`prepare ${label(key)}${evicted.length > 0 ? ` evicting ${evicted.map(label).join(" ")}` : ""}`);
        counts.push(c.libraryCount);
        return evicted;
      },
      touch: (key) => c.touch(key),
      dispatch: (op, signal) => {
        log.push(`dispatch ${label(op.key)}`);
        return c.dispatch(op, signal);
      },
      drainStdio: () => c.drainStdio(),
      terminate: () => c.terminate(),
    };
  };
  return { factory, log, counts };
}

/** The key the device prepares a library image under. */
function keyOf(image: Uint8Array): string {
  return libraryKey(libraryTag(image), image.length);
}

/**
 * Installs a model whose PREAMBLE loads `libs` (ULIB_LOAD each) and whose body runs each library's `noop` on 8 cores
 * in turn.
 */
async function stageModel(
  h: TestHost,
  libs: Uint8Array[],
  at: { doorbell: number; slot: number; model: number },
): Promise<void> {
  const placed = [];
  for (const image of libs) placed.push({ image, mem: await h.put(image) });
  const table = await h.put(encodeOpcodeTable({
    m2s: [],
    s2m: [],
    entries: placed.map(({ image, mem }, i) => ({
      opcode: 0x10 + i,
      cpuIdFlag: false,
      totalCpus: 8,
      libAddr: mem.pa,
      libBytes: mem.bytes,
      libTag: libraryTag(image),
      name: "noop",
    })),
  }));
  const program: Instruction[] = [
    ...libs.map((_, lib) => ({ op: Opcode.ULIB_LOAD, lib, libs: libs.length, opcodeTable: table.pa } as const)),
    { op: Opcode.MODEL_SWITCH, model: at.model, opcodeTable: table.pa },
    ...libs.flatMap((
      _,
      i,
    ) => [{ op: Opcode.EXTENDED_INST, opcode: 0x10 + i, call: 0 } as const, { op: Opcode.DRAIN } as const]),
    { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
  ];
  await h.installStream(program, at.doorbell, at.slot, at.model);
}

describe("Q7Complex libraries", () => {
  const FIRMWARE = { iram: kernel("stock_pool"), dram: new Uint8Array(4) };

  test("Q7Complex: a library the cluster evicted is prepared again by the next ULIB_LOAD, never between a run's ULIB_LOAD and its EXTENDED_INST", async () => {
    const name = new Map<string, string>();
    const { factory, log, counts } = boundedFactory(2, name);
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(16);
    await h.bootQ7(FIRMWARE);
    const libs = [0, 1, 2, 3].map(noopLibrary);
    ["a0", "a1", "b0", "b1"].forEach((label, i) => name.set(keyOf(libs[i]), label));
    await stageModel(h, libs.slice(0, 2), { doorbell: 1, slot: 0, model: 1 });
    await stageModel(h, libs.slice(2), { doorbell: 2, slot: 1, model: 2 });
    // The installs staged each model's libraries; B's evicted A's (the cap is 2).
    expect(log.splice(0)).toEqual(["prepare a0", "prepare a1", "prepare b0 evicting a0", "prepare b1 evicting a1"]);
    for (let round = 0; round < 2; round++) {
      await h.fire(1);
      // ULIB_LOAD prepares A's libraries again; the EXTENDED_INSTs find them (no prepare between load and op).
      expect(log.splice(0)).toEqual([
        "prepare a0 evicting b0",
        "prepare a1 evicting b1",
        "dispatch a0",
        "dispatch a1",
      ]);
      await h.fire(2);
      expect(log.splice(0)).toEqual([
        "prepare b0 evicting a0",
        "prepare b1 evicting a1",
        "dispatch b0",
        "dispatch b1",
      ]);
      // A second run of B finds its libraries prepared: its ULIB_LOADs mark them used and prepare nothing.
      await h.fire(2);
      expect(log.splice(0)).toEqual(["dispatch b0", "dispatch b1"]);
    }
    expect(Math.max(...counts)).toBe(2);
    expect((await h.read()).records.map((r) => [r.kind, r.model])).toEqual(
      [1, 2, 2, 1, 2, 2].map((model) => [NotificationKind.EXEC_DONE, model]),
    );
    expect(h.portal.sequencerFaults(0, 0)).toEqual([]);
    await h.portal.close();
  });

  test("Q7Complex: a ULIB_LOAD marks its library used, so the other model's library is the one evicted", async () => {
    const name = new Map<string, string>();
    const { factory, log } = boundedFactory(2, name);
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(16);
    await h.bootQ7(FIRMWARE);
    const [shared, other, third] = [0, 1, 2].map(noopLibrary);
    name.set(keyOf(shared), "s").set(keyOf(other), "b").set(keyOf(third), "c");
    await stageModel(h, [shared], { doorbell: 1, slot: 0, model: 1 });
    await stageModel(h, [other], { doorbell: 2, slot: 1, model: 2 });
    await stageModel(h, [shared, third], { doorbell: 3, slot: 2, model: 3 });
    // Staging C found s prepared (and marked it used), so c evicted b.
    expect(log.splice(0)).toEqual(["prepare s", "prepare b", "prepare c evicting b"]);
    await h.fire(1); // s: a hit
    await h.fire(2); // b again, evicting c; s is now the least recently used
    await h.fire(3); // C's ULIB_LOAD of s is a hit that marks s used, so c evicts b, not s
    expect(log.splice(0)).toEqual([
      "dispatch s",
      "prepare b evicting c",
      "dispatch b",
      "prepare c evicting b",
      "dispatch s",
      "dispatch c",
    ]);
    expect((await h.read()).records.map((r) => r.model)).toEqual([1, 2, 3]);
    await h.portal.close();
  });

  test("Q7Complex: a run loading more libraries than the cap still runs — each EXTENDED_INST prepares its library again", async () => {
    const name = new Map<string, string>();
    const { factory, log, counts } = boundedFactory(2, name);
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(16);
    await h.bootQ7(FIRMWARE);
    const libs = [0, 1, 2].map(noopLibrary);
    libs.forEach((image, i) => name.set(keyOf(image), `c${i}`));
    await stageModel(h, libs, { doorbell: 1, slot: 0, model: 1 });
    expect(log.splice(0)).toEqual(["prepare c0", "prepare c1", "prepare c2 evicting c0"]);
    await h.fire(1);
    expect(log.splice(0)).toEqual([
      "prepare c0 evicting c1",
      "prepare c1 evicting c2",
      "prepare c2 evicting c0",
      "prepare c0 evicting c1",
      "dispatch c0",
      "prepare c1 evicting c2",
      "dispatch c1",
      "prepare c2 evicting c0",
      "dispatch c2",
    ]);
    expect(Math.max(...counts)).toBe(2);
    expect((await h.read()).records.map((r) => [r.kind, r.model])).toEqual([[NotificationKind.EXEC_DONE, 1]]);
    await h.portal.close();
  });
});

describe("Q7Complex: a run dropped while its library is being prepared", () => {
  test("terminates the cluster, so the next run boots a fresh one instead of finding it busy with the gone run's request", async () => {
    // A cluster that, like Q7Cluster, refuses a second request while one is in flight; its prepares can be held.
    let hold: Promise<void> | undefined;
    const clusters: Array<{ terminated: boolean; prepares: string[] }> = [];
    const factory: Q7ClusterFactory = (o) => {
      const me = { terminated: false, prepares: [] as string[] };
      clusters.push(me);
      let busy = false;
      const request = async <T>(what: string, work: () => Promise<T>): Promise<T> => {
        if (busy) throw new Error(`Cannot ${what}: the Q7 cluster is busy with another request`);
        busy = true;
        try {
          return await work();
        } finally {
          busy = false;
        }
      };
      const pages = (Q7Map.SBUF_BASE + o.sbufBytes) / 65536;
      return Promise.resolve({
        memory: new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true }),
        boot: () => Promise.resolve(),
        prepare: (key) =>
          request("prepare", async () => {
            me.prepares.push(key);
            if (hold !== undefined) await hold;
            return [];
          }),
        dispatch: (op) =>
          request("dispatch", () =>
            Promise.resolve({
              cores: Array.from({ length: 8 }, (_, cpu) => ({
                cpu,
                ran: cpu < op.totalCpus,
                status: "ok" as const,
                committed: true,
              })),
            })),
        drainStdio: () => [],
        terminate: () => void (me.terminated = true),
      });
    };
    const h = new TestHost({ spec: SMALL, hbmBytes: 1 << 24, q7Factory: factory });
    await h.attachNq(16);
    await h.bootQ7({ iram: new Uint8Array([1]), dram: new Uint8Array([2]) });
    await stageOp(h, 8);
    expect(clusters.map((c) => c.prepares.length)).toEqual([1]); // prepared at install
    // A Q7 reset: the next run boots a fresh cluster and its ULIB_LOAD prepares the library there — held this time.
    await h.portal.resetQ7(0, 0);
    let release!: () => void;
    hold = new Promise<void>((r) => (release = r));
    await h.portal.semaphoreIncrement(0, 0, 1, 1);
    for (let i = 0; i < 1000 && clusters[1]?.prepares.length !== 1; i++) await new Promise((r) => setTimeout(r, 1));
    expect(clusters[1].prepares.length).toBe(1);
    // The device's watchdog drops the run mid-prepare: the cluster still busy with it is terminated.
    expect(h.portal.q7Busy(0, 0)).toBe(true); // the cores are busy preparing for the run
    await h.portal.elapse(0, 30_000);
    expect(clusters[1].terminated).toBe(true);
    expect(h.portal.q7Busy(0, 0)).toBe(false); // and not any more once the run is dropped and its cluster gone
    hold = undefined;
    // The next run completes on a fresh cluster; the held prepare finishing late changes nothing.
    await h.fire(1);
    release();
    expect(clusters.length).toBe(3);
    expect(clusters[2].prepares.length).toBe(1);
    const { records } = await h.read();
    // The dropped run left no record; the next one completed.
    expect(records.map((r) => [r.kind, r.model])).toEqual([[NotificationKind.EXEC_DONE, 9]]);
    expect(h.portal.sequencerFaults(0, 0).map((f) => f.message).filter((m) => !m.includes("watchdog"))).toEqual([]);
    await h.portal.close();
  });
});
