import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { NEFF_HEADER_SIZE, NeffHeaderOffset, readNeffHeader, writeNeffHeader } from "./header.ts";
import { buildNeff } from "./neff_builder.ts";
import { readFixture, tinyMembers } from "./_testing.ts";

function statusOf(fn: () => unknown): number | string {
  try {
    fn();
    return "no error";
  } catch (e) {
    return e instanceof NrtError ? e.status : String(e);
  }
}

function setU64(b: Uint8Array, off: number, v: bigint): Uint8Array {
  const c = b.slice();
  new DataView(c.buffer).setBigUint64(off, v, true);
  return c;
}

describe("readNeffHeader()", () => {
  test("readNeffHeader() reads every field of matmul_small.neff", async () => {
    const h = readNeffHeader(await readFixture("matmul_small.neff"));
    expect(h.pkgVersion).toBe(2);
    expect(h.headerSize).toBe(1024);
    expect(h.dataSize).toBe(61440);
    expect([h.neffVersionMajor, h.neffVersionMinor]).toEqual([2, 0]);
    expect(h.name).toBe("file.neff");
    expect(h.buildVersion).toBe("");
    expect(h.numTpb).toBe(1);
    expect(h.requestedTpbCount).toBe(1);
    expect(h.lncSize).toBe(2);
    expect(h.featureBits).toBe(2137088n);
    expect(h.tpbPerNode[0]).toBe(1);
    expect(h.tpbPerNode.slice(1).every((b) => b === 0)).toBe(true);
    expect([...h.uuid].map((b) => b.toString(16).padStart(2, "0")).join("")).toBe("00a04c535fd94f07bffdd5eacdefc852");
  });

  test("readNeffHeader() reads every field of matmul_large.neff", async () => {
    const h = readNeffHeader(await readFixture("matmul_large.neff"));
    expect(h.pkgVersion).toBe(2);
    expect(h.dataSize).toBe(1515520);
    expect([h.neffVersionMajor, h.neffVersionMinor]).toEqual([2, 0]);
    expect(h.name).toBe("file.neff");
    expect(h.lncSize).toBe(2);
    expect(h.featureBits).toBe(2104320n);
    expect([...h.uuid].map((b) => b.toString(16).padStart(2, "0")).join("")).toBe("25e09fd2caca464a9ec358c85854fd38");
  });

  test("readNeffHeader() rejects a file shorter than the header", () => {
    expect(() => readNeffHeader(new Uint8Array(1023))).toThrow(/shorter than the 1024-byte header/);
    expect(statusOf(() => readNeffHeader(new Uint8Array(0)))).toBe(NrtStatus.NRT_INVALID);
  });

  test("readNeffHeader() rejects a header_size other than 1024", () => {
    const file = buildNeff({ name: "t", members: tinyMembers() });
    const bad = setU64(file, NeffHeaderOffset.HEADER_SIZE, 512n);
    expect(statusOf(() => readNeffHeader(bad))).toBe(NrtStatus.NRT_INVALID);
    expect(() => readNeffHeader(bad)).toThrow("Cannot read NEFF: header_size is 512, expected 1024");
  });

  test("readNeffHeader() rejects a truncated and an oversized file by data_size", () => {
    const file = buildNeff({ name: "t", members: tinyMembers() });
    expect(() => readNeffHeader(file.subarray(0, file.length - 1))).toThrow(/truncated/);
    const longer = new Uint8Array(file.length + 1);
    longer.set(file);
    expect(() => readNeffHeader(longer)).toThrow(/oversized/);
    expect(statusOf(() => readNeffHeader(longer))).toBe(NrtStatus.NRT_INVALID);
  });

  test("readNeffHeader() rejects u64 fields above 2^53 - 1", () => {
    const file = buildNeff({ name: "t", members: tinyMembers() });
    const bad = setU64(file, NeffHeaderOffset.DATA_SIZE, 1n << 60n);
    expect(() => readNeffHeader(bad)).toThrow(/data_size is 1152921504606846976, above 2\^53 - 1/);
  });

  test("readNeffHeader() gates the NEFF version with NRT_UNSUPPORTED_NEFF_VERSION (10)", () => {
    const file = buildNeff({ name: "t", members: tinyMembers() });
    for (const major of [0n, 3n, 99n]) {
      const bad = setU64(file, NeffHeaderOffset.NEFF_VERSION_MAJOR, major);
      expect(statusOf(() => readNeffHeader(bad))).toBe(10);
      expect(() => readNeffHeader(bad)).toThrow(`version ${major}.0 is not supported, expected major version 1 to 2`);
    }
    const v1 = setU64(file, NeffHeaderOffset.NEFF_VERSION_MAJOR, 1n);
    expect(readNeffHeader(v1).neffVersionMajor).toBe(1);
  });
});

describe("writeNeffHeader()", () => {
  test("writeNeffHeader() round-trips every field", () => {
    const uuid = new Uint8Array(16).map((_, i) => i + 1);
    const hash = new Uint8Array(32).map((_, i) => 255 - i);
    const tpb = new Uint8Array(64).map((_, i) => i);
    const bytes = writeNeffHeader({
      pkgVersion: 2,
      dataSize: 0,
      neffVersionMajor: 1,
      neffVersionMinor: 7,
      buildVersion: "2.23.6484.0",
      numTpb: 3,
      hash,
      uuid,
      name: "é.neff",
      requestedTpbCount: 4,
      tpbPerNode: tpb,
      featureBits: 0xffff_ffff_ffff_fffen,
      lncSize: 2,
    });
    expect(bytes.length).toBe(NEFF_HEADER_SIZE);
    const h = readNeffHeader(bytes);
    expect(h).toEqual({
      pkgVersion: 2,
      headerSize: 1024,
      dataSize: 0,
      neffVersionMajor: 1,
      neffVersionMinor: 7,
      buildVersion: "2.23.6484.0",
      numTpb: 3,
      hash,
      uuid,
      name: "é.neff",
      requestedTpbCount: 4,
      tpbPerNode: tpb,
      featureBits: 0xffff_ffff_ffff_fffen,
      lncSize: 2,
    });
    expect(bytes.subarray(0x22c).every((b) => b === 0)).toBe(true);
  });

  test("writeNeffHeader() refuses a name that leaves no room for the NUL", () => {
    const base = {
      pkgVersion: 2,
      dataSize: 0,
      neffVersionMajor: 2,
      neffVersionMinor: 0,
      buildVersion: "",
      numTpb: 1,
      hash: new Uint8Array(32),
      uuid: new Uint8Array(16),
      requestedTpbCount: 1,
      tpbPerNode: new Uint8Array(64),
      featureBits: 0n,
      lncSize: 1,
    };
    expect(() => writeNeffHeader({ ...base, name: "x".repeat(256) })).toThrow(RangeError);
    expect(writeNeffHeader({ ...base, name: "x".repeat(255) })[0xdc + 254]).toBe(0x78);
  });
});
