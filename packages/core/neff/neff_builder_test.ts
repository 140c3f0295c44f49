import { describe, expect, test } from "bun:test";
import { verifyNeffHash } from "./hash.ts";
import { buildNeff, NEFF_PAYLOAD_ALIGNMENT } from "./neff_builder.ts";
import { readNeff } from "./neff_file.ts";
import { readFixture, tinyMembers } from "./_testing.ts";

describe("buildNeff()", () => {
  for (const compress of [true, "stored", false] as const) {
    test(`buildNeff() round-trips members and header fields (compress ${compress})`, () => {
      const members = tinyMembers();
      const uuid = new Uint8Array(16).fill(0xab);
      const file = buildNeff({
        name: "tiny.neff",
        members,
        compress,
        neffVersionMajor: 1,
        neffVersionMinor: 3,
        buildVersion: "nrt 0.1",
        numTpb: 2,
        requestedTpbCount: 2,
        lncSize: 2,
        uuid,
        featureBits: 1n << 63n,
      });
      expect((file.length - 1024) % NEFF_PAYLOAD_ALIGNMENT).toBe(0);
      const n = readNeff(file, { validateHash: true });
      expect(n.payload).toBe(compress === false ? "tar" : "gzip");
      expect(n.header).toMatchObject({
        pkgVersion: 2,
        headerSize: 1024,
        dataSize: file.length - 1024,
        neffVersionMajor: 1,
        neffVersionMinor: 3,
        buildVersion: "nrt 0.1",
        numTpb: 2,
        requestedTpbCount: 2,
        lncSize: 2,
        name: "tiny.neff",
        featureBits: 1n << 63n,
      });
      expect(n.header.uuid).toEqual(uuid);
      expect(n.hash.valid).toBe(true);
      expect([...n.members.keys()].sort()).toEqual([...members.keys()].sort());
      for (const [k, v] of members) expect(n.members.get(k)).toEqual(v);
      expect(n.target).toBe("cayman");
      expect(n.inputs).toEqual([{ name: "a", dtype: "float32", shape: [4, 8], size: 128 }]);
      expect(n.outputs).toEqual([{ name: "b", dtype: "float32", shape: [4, 8], size: 128 }]);
    });
  }

  test("buildNeff() is deterministic and derives a version-3 uuid from the payload", () => {
    const a = buildNeff({ name: "t", members: tinyMembers() });
    const b = buildNeff({ name: "t", members: tinyMembers() });
    expect(a).toEqual(b);
    const n = readNeff(a);
    expect(n.header.uuid[6] >> 4).toBe(3);
    expect(n.header.uuid[8] >> 6).toBe(2);
    expect(n.header.tpbPerNode[0]).toBe(1);
    expect(n.header.lncSize).toBe(1);
  });

  test("buildNeff() hash breaks when any sampled payload byte flips", () => {
    const file = buildNeff({ name: "t", members: tinyMembers() });
    const last = file.length - 1;
    const positions = [1024, 1025, 1030, 1100, 2000, 5000, 9000, last - 100, last];
    for (const p of positions) {
      const m = file.slice();
      m[p] ^= 0x01;
      expect(verifyNeffHash(m, 2).valid).toBe(false);
      // Under validateHash the load is refused, whatever the flip did to the payload.
      expect(() => readNeff(m, { validateHash: true })).toThrow(/^Cannot load NEFF: hash mismatch/);
    }
  });

  test("buildNeff() round-trips the members of matmul_small.neff", async () => {
    const real = readNeff(await readFixture("matmul_small.neff"));
    const file = buildNeff({
      name: real.header.name,
      members: real.members,
      lncSize: real.header.lncSize,
      featureBits: real.header.featureBits,
    });
    const n = readNeff(file, { validateHash: true });
    expect(n.members.size).toBe(72);
    for (const [k, v] of real.members) expect(n.members.get(k)).toEqual(v);
    expect(n.inputs).toEqual(real.inputs);
    expect(n.outputs).toEqual(real.outputs);
    expect(file.length).toBeLessThanOrEqual(1024 + 61440);
  });
});
