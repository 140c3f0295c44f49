import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { crc32 } from "./crc32.ts";
import { deflateRaw, gzipMember } from "./deflate.ts";
import { gunzipMember, inflateRaw } from "./inflate.ts";
import { readFixture } from "./_testing.ts";

async function nativeGzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([new Uint8Array(data)]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function nativeGunzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([new Uint8Array(data)]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** BTYPE of the first block of a member with a plain 10-byte header. */
function firstBlockType(member: Uint8Array): number {
  return (member[10] >> 1) & 3;
}

function text(n: number): Uint8Array {
  const words = ["neuron", "core", "tensor", "engine", "queue", "slot", "graph"];
  let s = "";
  for (let i = 0; s.length < n; i++) s += words[(i * 7 + (i >> 3)) % words.length] + (i % 5 === 0 ? "\n" : " ");
  return new TextEncoder().encode(s.slice(0, n));
}

function expectInvalid(fn: () => unknown, message: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(NrtError);
  expect((caught as NrtError).status).toBe(NrtStatus.NRT_INVALID);
  expect((caught as NrtError).message).toMatch(message);
}

describe("gunzipMember()", () => {
  test("gunzipMember() decodes stored blocks, including several of 65,535 bytes", () => {
    const data = text(150_000);
    const member = gzipMember(data, "stored");
    expect(firstBlockType(member)).toBe(0);
    const r = gunzipMember(member);
    expect(r.data).toEqual(data);
    expect(r.consumed).toBe(member.length);
  });

  test("gunzipMember() decodes fixed-Huffman blocks", () => {
    const data = text(5000);
    const member = gzipMember(data, "fixed");
    expect(firstBlockType(member)).toBe(1);
    expect(member.length).toBeLessThan(data.length / 2);
    expect(gunzipMember(member).data).toEqual(data);
  });

  test("gunzipMember() decodes dynamic-Huffman blocks written by CompressionStream", async () => {
    const data = text(100_000);
    const member = await nativeGzip(data);
    expect(firstBlockType(member)).toBe(2);
    const r = gunzipMember(member);
    expect(r.data).toEqual(data);
    expect(r.consumed).toBe(member.length);
  });

  test("gunzipMember() decodes the real payload of matmul_small.neff and stops before the padding", async () => {
    const file = await readFixture("matmul_small.neff");
    const r = gunzipMember(file.subarray(1024));
    expect(r.data.length).toBe(356_864);
    expect(r.consumed).toBe(53_601);
    expect(file.subarray(1024 + r.consumed).every((b) => b === 0)).toBe(true);
  });

  test("gunzipMember() ignores trailing zeros and a second member", () => {
    const data = text(3000);
    const member = gzipMember(data);
    const padded = new Uint8Array(member.length + 10_000);
    padded.set(member);
    expect(gunzipMember(padded).data).toEqual(data);
    const two = new Uint8Array(member.length * 2);
    two.set(member);
    two.set(member, member.length);
    expect(gunzipMember(two).consumed).toBe(member.length);
  });

  test("gunzipMember() honours FEXTRA, FNAME, FCOMMENT and FHCRC", () => {
    const data = text(1000);
    const plain = gzipMember(data);
    const head = [0x1f, 0x8b, 8, 2 | 4 | 8 | 16, 0x10, 0, 0, 0, 0, 3, 3, 0, 1, 2, 3, 0x61, 0x2e, 0x74, 0, 0x63, 0];
    const hcrc = crc32(new Uint8Array(head)) & 0xffff;
    const member = new Uint8Array([...head, hcrc & 0xff, hcrc >> 8, ...plain.subarray(10)]);
    const r = gunzipMember(member);
    expect(r.data).toEqual(data);
    expect(r.fileName).toBe("a.t");
    expect(r.mtime).toBe(16);
    const badHcrc = member.slice();
    badHcrc[head.length] ^= 1;
    expectInvalid(() => gunzipMember(badHcrc), /bad header CRC/);
  });

  test("gunzipMember() rejects a bad CRC-32 and a bad ISIZE", () => {
    const member = gzipMember(text(2000));
    const badCrc = member.slice();
    badCrc[member.length - 8] ^= 0x40;
    expectInvalid(() => gunzipMember(badCrc), /CRC-32/);
    const badSize = member.slice();
    badSize[member.length - 4] ^= 1;
    expectInvalid(() => gunzipMember(badSize), /ISIZE/);
  });

  test("gunzipMember() rejects a member whose output passes the cap while decoding", () => {
    const bomb = gzipMember(new Uint8Array(10_000_000));
    expect(bomb.length).toBeLessThan(100_000);
    expectInvalid(() => gunzipMember(bomb, { maxOutputBytes: 1_000_000 }), /more than the 1000000-byte cap/);
    expect(gunzipMember(bomb, { maxOutputBytes: 10_000_000 }).data.length).toBe(10_000_000);
  });

  test("gunzipMember() rejects a wrong magic, a wrong method, reserved flags and a truncated member", () => {
    const member = gzipMember(text(500));
    expectInvalid(() => gunzipMember(new Uint8Array(40)), /gzip magic/);
    const method = member.slice();
    method[2] = 7;
    expectInvalid(() => gunzipMember(method), /compression method 7/);
    const flags = member.slice();
    flags[3] = 0x20;
    expectInvalid(() => gunzipMember(flags), /reserved header flags/);
    expectInvalid(() => gunzipMember(member.subarray(0, member.length - 3)), /truncated/);
    expectInvalid(() => gunzipMember(member.subarray(0, 30)), /truncated/);
  });

  test("gunzipMember() rejects the reserved block type and a stored block with a bad NLEN", () => {
    const reserved = new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0b111, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expectInvalid(() => gunzipMember(reserved), /reserved block type 3/);
    const stored = gzipMember(text(10), "stored");
    stored[13] ^= 0xff;
    expectInvalid(() => gunzipMember(stored), /LEN and NLEN disagree/);
  });
});

describe("gzipMember()", () => {
  test("gzipMember() output is decoded by DecompressionStream in both modes", async () => {
    const data = text(70_000);
    expect(await nativeGunzip(gzipMember(data, "fixed"))).toEqual(data);
    expect(await nativeGunzip(gzipMember(data, "stored"))).toEqual(data);
    expect(await nativeGunzip(gzipMember(new Uint8Array(0)))).toEqual(new Uint8Array(0));
  });

  test("deflateRaw() round-trips edge sizes through inflateRaw()", () => {
    for (const n of [0, 1, 2, 3, 4, 257, 258, 259, 32_768, 32_769, 65_535, 65_536]) {
      const data = new Uint8Array(n).map((_, i) => (i * 31 + (i >> 7)) % 251);
      for (const mode of ["fixed", "stored"] as const) {
        const raw = deflateRaw(data, mode);
        const r = inflateRaw(raw, 0, 1 << 20);
        expect(r.data).toEqual(data);
        expect(r.end).toBe(raw.length);
      }
    }
  });
});
