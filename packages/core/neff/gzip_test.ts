import { describe, expect, test } from "bun:test";
import zlib from "node:zlib";
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";
import { DEFAULT_MAX_DECOMPRESSED_BYTES, gunzipMember, gunzipMemberAsync, gzipMember } from "./gzip.ts";
import { readFixture } from "./_testing.ts";

async function nativeGunzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([new Uint8Array(data)]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function text(n: number): Uint8Array<ArrayBuffer> {
  const words = ["neuron", "core", "tensor", "engine", "queue", "slot", "graph"];
  let s = "";
  for (let i = 0; s.length < n; i++) s += words[(i * 7 + (i >> 3)) % words.length] + (i % 5 === 0 ? "\n" : " ");
  return new TextEncoder().encode(s.slice(0, n));
}

async function expectInvalid(fn: () => unknown, message: RegExp): Promise<void> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(NrtError);
  expect((caught as NrtError).status).toBe(NrtStatus.NRT_INVALID);
  expect((caught as NrtError).message).toMatch(message);
}

/** Both decoders on one input. */
const decoders = [
  ["gunzipMember", (b: Uint8Array, cap?: number) => gunzipMember(b, { maxOutputBytes: cap })],
  ["gunzipMemberAsync", (b: Uint8Array, cap?: number) => gunzipMemberAsync(b, { maxOutputBytes: cap })],
] as const;

describe("gunzipMember() and gunzipMemberAsync()", () => {
  for (const [name, decode] of decoders) {
    test(`${name}() decodes stored and compressed members written by gzipMember() and by CompressionStream`, async () => {
      const data = text(150_000);
      for (const member of [gzipMember(data, "stored"), gzipMember(data)]) {
        const r = await decode(member);
        expect(r.data).toEqual(data);
        expect(r.consumed).toBe(member.length);
      }
      expect(gzipMember(data).length).toBeLessThan(data.length / 4);
      const stream = new Blob([data]).stream().pipeThrough(new CompressionStream("gzip"));
      const native = new Uint8Array(await new Response(stream).arrayBuffer());
      expect((await decode(native)).data).toEqual(data);
    });

    test(`${name}() decodes the real payload of matmul_small.neff and stops before the padding`, async () => {
      const file = await readFixture("matmul_small.neff");
      const payload = file.subarray(1024);
      const r = await decode(payload);
      // The member ends well before the zero padding, which is never read as a trailer or a second member.
      expect(r.consumed).toBeLessThan(payload.length);
      expect(payload.subarray(r.consumed).every((b) => b === 0)).toBe(true);
      expect(new TextDecoder().decode(r.data.subarray(257, 262))).toBe("ustar");
    });

    test(`${name}() ignores trailing zeros and a second member`, async () => {
      const data = text(3000);
      const member = gzipMember(data);
      const padded = new Uint8Array(member.length + 4096);
      padded.set(member);
      expect((await decode(padded)).data).toEqual(data);
      const two = new Uint8Array([...member, ...gzipMember(text(10))]);
      const r = await decode(two);
      expect(r.data).toEqual(data);
      expect(r.consumed).toBe(member.length);
    });

    test(`${name}() honours FEXTRA, FNAME, FCOMMENT and FHCRC`, async () => {
      const data = text(300);
      const plain = gzipMember(data);
      const extra = [2, 0, 0xaa, 0xbb],
        fname = [...new TextEncoder().encode("model.tar"), 0],
        comment = [0x68, 0x69, 0];
      const head = [0x1f, 0x8b, 8, 4 | 8 | 16 | 2, 1, 0, 0, 0, 0, 0xff, ...extra, ...fname, ...comment];
      const hcrc = zlib.crc32(new Uint8Array(head)) & 0xffff;
      const member = new Uint8Array([...head, hcrc & 0xff, hcrc >> 8, ...plain.subarray(10)]);
      const r = await decode(member);
      expect(r.data).toEqual(data);
      expect(r.fileName).toBe("model.tar");
      expect(r.mtime).toBe(1);
      const badHcrc = member.slice();
      badHcrc[head.length] ^= 1;
      await expectInvalid(() => decode(badHcrc), /bad header CRC/);
    });

    test(`${name}() rejects a bad CRC-32 and a bad ISIZE`, async () => {
      const member = gzipMember(text(2000));
      const badCrc = member.slice();
      badCrc[member.length - 8] ^= 1;
      await expectInvalid(() => decode(badCrc), /CRC-32/);
      const badSize = member.slice();
      badSize[member.length - 4] ^= 1;
      await expectInvalid(() => decode(badSize), /ISIZE/);
    });

    test(`${name}() stops a decompression bomb at the cap without decoding it whole`, async () => {
      const bomb = gzipMember(new Uint8Array(64 << 20));
      expect(bomb.length).toBeLessThan(100_000);
      await expectInvalid(() => decode(bomb, 1_000_000), /more than the 1000000-byte cap/);
      // The default cap stops it too.
      await expectInvalid(() => decode(bomb), new RegExp(`more than the ${DEFAULT_MAX_DECOMPRESSED_BYTES}-byte cap`));
      expect((await decode(gzipMember(new Uint8Array(1_000_000)), 1_000_000)).data.length).toBe(1_000_000);
    });

    test(`${name}() rejects a wrong magic, a wrong method, reserved flags and truncation`, async () => {
      const member = gzipMember(text(500));
      await expectInvalid(() => decode(new Uint8Array(40)), /gzip magic/);
      const method = member.slice();
      method[2] = 7;
      await expectInvalid(() => decode(method), /compression method 7/);
      const flags = member.slice();
      flags[3] = 0x20;
      await expectInvalid(() => decode(flags), /reserved header flags/);
      await expectInvalid(() => decode(member.subarray(0, member.length - 3)), /truncated/);
      await expectInvalid(() => decode(member.subarray(0, 30)), /truncated|DEFLATE/);
    });

    test(`${name}() rejects a corrupt DEFLATE stream (reserved block type 3)`, async () => {
      const reserved = new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0b111, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
      await expectInvalid(() => decode(reserved), /DEFLATE/);
    });
  }
});

describe("gzipMember()", () => {
  test("gzipMember() output is decoded by DecompressionStream in both modes, the empty input included", async () => {
    const data = text(70_000);
    expect(await nativeGunzip(gzipMember(data))).toEqual(data);
    expect(await nativeGunzip(gzipMember(data, "stored"))).toEqual(data);
    expect(await nativeGunzip(gzipMember(new Uint8Array(0)))).toEqual(new Uint8Array(0));
  });

  test("gzipMember() writes the 10-byte header of RFC 1952 with no flags and OS 255", () => {
    expect([...gzipMember(new Uint8Array(3)).subarray(0, 10)]).toEqual([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  });
});
