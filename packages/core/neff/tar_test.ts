import { describe, expect, test } from "bun:test";
import { readTar, writeTar } from "./tar.ts";
import { invalidMessage } from "../_testing.ts";

const enc = new TextEncoder();

/** Rewrites a header field and fixes the checksum, as a hostile writer would. */
function patch(tar: Uint8Array, block: number, offset: number, bytes: string | number[], fixSum = true): Uint8Array {
  const t = tar.slice();
  const h = t.subarray(block * 512, block * 512 + 512);
  const b = typeof bytes === "string" ? enc.encode(bytes) : new Uint8Array(bytes);
  h.set(b, offset);
  if (fixSum) {
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const x of h) sum += x;
    h.set(enc.encode(sum.toString(8).padStart(6, "0") + "\0 "), 148);
  }
  return t;
}

function setName(tar: Uint8Array, name: string): Uint8Array {
  const field = new Uint8Array(100);
  field.set(enc.encode(name));
  return patch(tar, 0, 0, [...field]);
}

const one = (): Uint8Array => writeTar({ "sg00/a.bin": new Uint8Array([1, 2, 3]) });

describe("writeTar() and readTar()", () => {
  test("writeTar() output is sorted, deterministic and read back by readTar()", () => {
    const files = { "z.json": enc.encode("{}"), "a/b.bin": new Uint8Array(513).fill(7), "m": new Uint8Array(0) };
    const a = writeTar(files, { mtime: 1_700_000_000 });
    const b = writeTar(new Map(Object.entries(files).reverse()), { mtime: 1_700_000_000 });
    expect(a).toEqual(b);
    const entries = readTar(a);
    expect(entries.map((e) => e.name)).toEqual(["a/b.bin", "m", "z.json"]);
    expect(entries[0].data).toEqual(files["a/b.bin"]);
    expect(entries.every((e) => e.mtime === 1_700_000_000 && e.type === "file" && e.mode === 0o644)).toBe(true);
    expect(new TextDecoder().decode(a.subarray(257, 265))).toBe("ustar\x0000");
  });

  test("writeTar() splits a long path into the ustar prefix and readTar() joins it", () => {
    const long = `${"d".repeat(120)}/${"f".repeat(90)}`;
    const entries = readTar(writeTar({ [long]: new Uint8Array([9]) }));
    expect(entries[0].name).toBe(long);
  });

  test("writeTar() refuses unsafe paths", () => {
    expect(() => writeTar({ "../x": new Uint8Array(0) })).toThrow(RangeError);
    expect(() => writeTar({ "/abs": new Uint8Array(0) })).toThrow(RangeError);
  });

  test("readTar() accepts a directory entry and the GNU magic", () => {
    const dir = patch(writeTar({ sg00: new Uint8Array(0) }), 0, 156, "5");
    expect(readTar(dir)[0]).toMatchObject({ name: "sg00", type: "directory" });
    const sized = patch(one(), 0, 156, "5");
    expect(invalidMessage(() => readTar(sized))).toContain('directory "sg00/a.bin" has a size of 3');
    const gnu = patch(one(), 0, 257, "ustar  \0");
    expect(readTar(gnu)[0].name).toBe("sg00/a.bin");
  });
});

describe("readTar() hygiene", () => {
  const kinds: [string, string][] = [
    ["1", "hard link"],
    ["2", "symbolic link"],
    ["3", "character device"],
    ["4", "block device"],
    ["6", "FIFO"],
    ["x", "pax extended header"],
    ["L", "GNU long-name header"],
  ];
  for (const [flag, what] of kinds) {
    test(`readTar() rejects a ${what} and names the member`, () => {
      const msg = invalidMessage(() => readTar(patch(one(), 0, 156, flag)));
      expect(msg).toContain(`"sg00/a.bin" is a ${what}`);
    });
  }

  test("readTar() rejects a .. segment, an absolute path and a NUL inside the name", () => {
    expect(invalidMessage(() => readTar(setName(one(), "../x")))).toContain('"../x" escapes the archive');
    expect(invalidMessage(() => readTar(setName(one(), "a/../../x")))).toContain("escapes the archive");
    expect(invalidMessage(() => readTar(setName(one(), "/abs")))).toContain('"/abs" is an absolute path');
    expect(invalidMessage(() => readTar(setName(one(), "ok\0evil")))).toContain("has a NUL inside its name");
  });

  test("readTar() rejects a bad header checksum", () => {
    const t = patch(one(), 0, 0, "X", false);
    expect(invalidMessage(() => readTar(t))).toContain("bad header checksum");
  });

  test("readTar() rejects non-octal and base-256 size fields", () => {
    expect(invalidMessage(() => readTar(patch(one(), 0, 124, "0000000008a\0")))).toContain("malformed size");
    expect(invalidMessage(() => readTar(patch(one(), 0, 124, [0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3])))).toContain(
      "malformed size",
    );
  });

  test("readTar() rejects a member size past the end of the archive", () => {
    const t = patch(one(), 0, 124, "77777777777\0");
    expect(invalidMessage(() => readTar(t))).toContain("only 1536 remain");
  });

  test("readTar() rejects more members than the cap", () => {
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 11; i++) files[`f${i}`] = new Uint8Array(1);
    expect(readTar(writeTar(files), { maxMembers: 11 }).length).toBe(11);
    expect(invalidMessage(() => readTar(writeTar(files), { maxMembers: 10 }))).toContain("more than 10 members");
  });

  test("readTar() rejects members whose total size passes the cap", () => {
    const t = writeTar({ a: new Uint8Array(600), b: new Uint8Array(600) });
    expect(invalidMessage(() => readTar(t, { maxTotalBytes: 1000 }))).toContain("1000-byte cap");
  });

  test("readTar() rejects a missing end marker, a missing magic and duplicate names", () => {
    const t = one();
    expect(invalidMessage(() => readTar(t.subarray(0, 1024)))).toContain("end-of-archive marker");
    expect(invalidMessage(() => readTar(t.subarray(0, 1536)))).toContain("not followed by a second");
    expect(invalidMessage(() => readTar(patch(t, 0, 257, "xxxxx")))).toContain("no ustar magic");
    const dup = new Uint8Array(t.length + 1024);
    dup.set(t.subarray(0, 1024));
    dup.set(t.subarray(0, 1024), 1024);
    expect(invalidMessage(() => readTar(dup))).toContain("appears more than once");
  });
});
