import { describe, expect, test } from "bun:test";
import { decodeSlotHeader, instructionSlot, instructionSlots } from "./instruction_stream.ts";
import { buildNeff } from "./neff_builder.ts";
import { readNeff } from "./neff_file.ts";
import { json, readFixture, tinyMembers } from "./_testing.ts";
import { invalidMessage } from "../_testing.ts";

function withMember(name: string, bytes: Uint8Array | undefined): Uint8Array {
  const m = tinyMembers();
  if (bytes === undefined) m.delete(name);
  else m.set(name, bytes);
  return buildNeff({ name: "t.neff", members: m });
}

describe("readNeff() on the real NEFFs", () => {
  test("readNeff() reads every acceptance fact of matmul_small.neff", async () => {
    const n = readNeff(await readFixture("matmul_small.neff"), { validateHash: true });
    expect(n.header).toMatchObject({
      pkgVersion: 2,
      headerSize: 1024,
      dataSize: 61440,
      neffVersionMajor: 2,
      neffVersionMinor: 0,
      name: "file.neff",
      lncSize: 2,
    });
    expect(n.hash).toMatchObject({ algorithm: "md5", valid: true });
    expect(n.payload).toBe("gzip");
    expect(n.payloadBytes).toBe(53_601);
    expect(n.target).toBe("cayman");
    expect(n.kelfVersion).toBe("0.5");
    expect(n.graphs.map((g) => [g.name, g.definition])).toEqual([["sg00", "sg00/def.json"], ["sg01", "sg01/def.json"]]);
    expect(n.members.size).toBe(72);
    expect(n.inputs).toEqual([
      { name: "x", dtype: "float16", shape: [128, 256], size: 65536 },
      { name: "y", dtype: "float16", shape: [256, 128], size: 65536 },
    ]);
    expect(n.outputs).toEqual([{ name: "output0", dtype: "float16", shape: [128, 128], size: 32768 }]);
  });

  test("readNeff() reads the subgraph definitions and instruction streams of matmul_small.neff", async () => {
    const n = readNeff(await readFixture("matmul_small.neff"));
    const def = n.graphs[0].def;
    expect(def.version).toBe("0.6");
    expect(def.engines.map((e) => [e.engine, e.instructions.member, e.instructions.slotCount])).toEqual([
      ["pe", "sg00/PE.bin", 12],
      ["act", "sg00/Activation.bin", 5],
      ["pool", "sg00/Pool.bin", 7],
      ["dve", "sg00/DVE.bin", 2],
      ["sp", "sg00/SP.bin", 3],
    ]);
    expect(def.engines[0].config).toBe("sg00/PE.json");
    expect(def.vars.map((v) => [v.varId, v.name, v.type])).toEqual([
      [0, "SB", "state-buffer"],
      [1, "x", "input"],
      [2, "y", "input"],
      [3, "output0", "output"],
      [4, "identity_82_sg0000", "file"],
      [5, "DGETable0", "dge-table"],
    ]);
    expect(def.vars[4].fileName).toBe("value_sg0000_identity_82_CRSM.npy");
    expect(def.dmaQueues.map((q) => [q.name, q.owner, q.numQueues])).toEqual([["qPoolDynamic", "pool", 16], [
      "qSPDynamicHW",
      "sp",
      16,
    ]]);
    expect((def.raw.neff_features as string[])[0]).toBe("neff_feature_vnc");
    const pe = def.engines[0].instructions;
    expect(decodeSlotHeader(instructionSlot(pe, 0))).toEqual({ wordLen: 0x10, opcode: 0xb1 });
    for (const g of n.graphs) {
      for (const e of g.def.engines) {
        for (const slot of instructionSlots(e.instructions)) expect(decodeSlotHeader(slot).wordLen).toBe(0x10);
      }
    }
  });

  test("readNeff() reads matmul_large.neff", async () => {
    const n = readNeff(await readFixture("matmul_large.neff"), { validateHash: true });
    expect(n.header.dataSize).toBe(1_515_520);
    expect(n.hash.valid).toBe(true);
    expect(n.payloadBytes).toBe(1_514_364);
    expect(n.members.size).toBe(72);
    expect(n.members.get("sg00/PE.bin")?.length).toBe(1_361_216);
    expect(n.target).toBe("cayman");
    expect(n.graphs.map((g) => g.name)).toEqual(["sg00", "sg01"]);
    expect(n.graphs[0].def.engines.map((e) => e.instructions.slotCount)).toEqual([21269, 103, 6873, 1101, 449]);
    expect(n.graphs[0].def.vars.length).toBe(22);
    expect(n.inputs).toEqual([
      { name: "x", dtype: "float16", shape: [128, 32768], size: 8_388_608 },
      { name: "y", dtype: "float16", shape: [32768, 65536], size: 4_294_967_296 },
    ]);
    expect(n.outputs).toEqual([{ name: "output0", dtype: "float16", shape: [128, 65536], size: 16_777_216 }]);
  }, 20_000);
});

describe("readNeff() hash handling", () => {
  test("readNeff() reports a hash mismatch without validateHash and refuses it with validateHash", async () => {
    const file = (await readFixture("matmul_small.neff")).slice();
    file[0xac] ^= 0xff; // the stored digest: the payload still parses
    const n = readNeff(file, { validateHash: false });
    expect(n.hash.valid).toBe(false);
    expect(n.hash.computed).not.toBe(n.hash.stored);
    expect(invalidMessage(() => readNeff(file, { validateHash: true }))).toMatch(/^Cannot load NEFF: hash mismatch/);
  });

  test("readNeff() with validateHash false still reports a valid hash", async () => {
    const n = readNeff(await readFixture("matmul_small.neff"), { validateHash: false });
    expect(n.hash).toEqual({
      algorithm: "md5",
      stored: "efe9b3bc98163077b94c8bcdacf51f47",
      computed: "efe9b3bc98163077b94c8bcdacf51f47",
      valid: true,
    });
  });
});

describe("readNeff() rejections", () => {
  test("readNeff() rejects a decompression bomb over the cap", () => {
    const m = tinyMembers();
    m.set("zeros.bin", new Uint8Array(4_000_000));
    const file = buildNeff({ name: "bomb", members: m });
    expect(file.length).toBeLessThan(100_000);
    expect(invalidMessage(() => readNeff(file, { maxDecompressedBytes: 1_000_000 }))).toContain("1000000-byte cap");
    expect(readNeff(file).members.get("zeros.bin")?.length).toBe(4_000_000);
  });

  test("readNeff() rejects a plain tar over the member cap", () => {
    const file = buildNeff({ name: "t", members: tinyMembers(), compress: false });
    expect(invalidMessage(() => readNeff(file, { maxMembers: 3 }))).toContain("more than 3 members");
  });

  test("readNeff() rejects malformed JSON naming the member", () => {
    const bad = new TextEncoder().encode("{ nope");
    expect(invalidMessage(() => readNeff(withMember("kelf-0.json", bad)))).toMatch(
      /member kelf-0.json is not valid JSON/,
    );
    expect(invalidMessage(() => readNeff(withMember("neff.json", bad)))).toMatch(/member neff.json is not valid JSON/);
    expect(invalidMessage(() => readNeff(withMember("sg00/def.json", bad)))).toMatch(
      /member sg00\/def.json is not valid JSON/,
    );
    expect(invalidMessage(() => readNeff(withMember("sg00/tensor_map.json", bad)))).toMatch(
      /sg00\/tensor_map.json is not valid JSON/,
    );
  });

  test("readNeff() rejects missing members and streams that are not whole slots", () => {
    expect(invalidMessage(() => readNeff(withMember("kelf-0.json", undefined)))).toContain(
      "member kelf-0.json is missing",
    );
    expect(invalidMessage(() => readNeff(withMember("sg00/PE.bin", undefined)))).toContain(
      "member sg00/PE.bin is missing",
    );
    expect(invalidMessage(() => readNeff(withMember("sg00/PE.bin", new Uint8Array(65))))).toContain(
      "not a multiple of the 64-byte slot",
    );
  });

  test("readNeff() rejects a signature that disagrees with def.json or tensor_map.json", () => {
    const def = JSON.parse(new TextDecoder().decode(tinyMembers().get("sg00/def.json")));
    def.var.a.size = 64;
    expect(invalidMessage(() => readNeff(withMember("sg00/def.json", json(def))))).toContain(
      'input "a" is 128 bytes in neff.json but 64 bytes in sg00/def.json',
    );
    def.var.a.size = 128;
    def.var.c = { type: "output", var_id: 3 };
    expect(invalidMessage(() => readNeff(withMember("sg00/def.json", json(def))))).toContain(
      'output var "c" of sg00/def.json is not in the neff.json signature',
    );
    const map = { a: { dtype: "float16", kind: "input", tf_shape: [4, 8] } };
    expect(invalidMessage(() => readNeff(withMember("sg00/tensor_map.json", json(map))))).toContain(
      "float16 in sg00/tensor_map.json",
    );
  });

  test("readNeff() rejects a payload that is neither gzip nor ustar, and junk in the padding", () => {
    const file = buildNeff({ name: "t", members: tinyMembers(), pkgVersion: 1 });
    const junk = file.slice();
    junk[1024] = 0x42;
    expect(invalidMessage(() => readNeff(junk))).toContain("neither a gzip member nor a ustar archive");
    const padded = file.slice();
    padded[padded.length - 1] = 9;
    expect(invalidMessage(() => readNeff(padded))).toContain("non-zero byte");
  });
});
