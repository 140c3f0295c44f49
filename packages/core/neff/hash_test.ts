import { describe, expect, test } from "bun:test";
import { md5, neffHashField, toHex, verifyNeffHash } from "./hash.ts";
import { buildNeff } from "./neff_builder.ts";
import { readFixture, tinyMembers } from "./_testing.ts";

describe("verifyNeffHash()", () => {
  test("verifyNeffHash() accepts the MD5 of matmul_small.neff", async () => {
    const r = verifyNeffHash(await readFixture("matmul_small.neff"), 2);
    expect(r).toEqual({
      algorithm: "md5",
      stored: "efe9b3bc98163077b94c8bcdacf51f47",
      computed: "efe9b3bc98163077b94c8bcdacf51f47",
      valid: true,
    });
  });

  test("verifyNeffHash() accepts the MD5 of matmul_large.neff", async () => {
    const r = verifyNeffHash(await readFixture("matmul_large.neff"), 2);
    expect(r.valid).toBe(true);
    expect(r.computed).toBe("6f8416e1b776ddc322872bfb1a15709a");
  });

  test("verifyNeffHash() rejects a non-zero second half of the field", async () => {
    const file = (await readFixture("matmul_small.neff")).slice();
    file[0xac + 20] = 1;
    const r = verifyNeffHash(file, 2);
    expect(r.stored).toBe(r.computed);
    expect(r.valid).toBe(false);
  });

  test("verifyNeffHash() reports algorithm none for a zero field under another pkg_version", () => {
    const file = buildNeff({ name: "t", members: tinyMembers(), pkgVersion: 1 });
    expect(verifyNeffHash(file, 1)).toEqual({ algorithm: "none", stored: "0".repeat(64), computed: "", valid: false });
    const marked = file.slice();
    marked[0xac] = 7;
    expect(verifyNeffHash(marked, 1).algorithm).toBe("unknown");
  });
});

describe("neffHashField()", () => {
  test("neffHashField() stores each 32-bit word of the digest byte-reversed, then 16 zeros", () => {
    const payload = new TextEncoder().encode("abc");
    // RFC 1321 A.5: MD5("abc") = 900150983cd24fb0d6963f7d28e17f72.
    const d = Uint8Array.from("900150983cd24fb0d6963f7d28e17f72".match(/../g)!, (x) => parseInt(x, 16));
    expect(toHex(md5(payload))).toBe("900150983cd24fb0d6963f7d28e17f72");
    const f = neffHashField(payload);
    expect(toHex(f.subarray(0, 4))).toBe(toHex(d.subarray(0, 4).reverse()));
    expect(toHex(f.subarray(12, 16))).toBe(toHex(d.subarray(12, 16).reverse()));
    expect(f.subarray(16).every((b) => b === 0)).toBe(true);
  });

  test("neffHashField() reproduces the stored field of matmul_small.neff", async () => {
    const file = await readFixture("matmul_small.neff");
    expect(toHex(neffHashField(file.subarray(1024)))).toBe(toHex(file.subarray(0xac, 0xac + 32)));
  });
});
