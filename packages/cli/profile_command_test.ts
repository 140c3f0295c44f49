import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "./main.ts";
import { neffFileCap } from "./inspect.ts";
import { oneOpNeff } from "../../tests/_kernels.ts";

/** Exit code, stdout and stderr of `nrt ...args`, run in-process. */
async function nrt(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [], err: string[] = [];
  const log = console.log, error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(" "));
  console.error = (...a: unknown[]) => void err.push(a.join(" "));
  try {
    return { code: await main(args), out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

describe("nrt profile: its files", () => {
  test("-o naming the NEFF or an input file is refused with exit 2 and one line, the input kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-profile-"));
    const f32 = (name: string) => ({ name, dtype: "float32", shape: [4] });
    const neff = join(dir, "relu.neff");
    const bytes = oneOpNeff("relu", "relu", [f32("x")], [f32("y")]);
    writeFileSync(neff, bytes);
    const x = join(dir, "x.json");
    writeFileSync(x, "[1, -2, 3, -4]");
    symlinkSync(neff, join(dir, "link.neff"));
    const cases: Array<[string, string]> = [
      [neff, `nrt profile: -o ${neff} is the NEFF being profiled: refusing to overwrite an input`],
      [
        join(dir, "link.neff"),
        `nrt profile: -o ${
          join(dir, "link.neff")
        } is the NEFF being profiled (${neff}): refusing to overwrite an input`,
      ],
      [x, `nrt profile: -o ${x} is the file of input "x": refusing to overwrite an input`],
    ];
    for (const [out, why] of cases) {
      const r = await nrt(["profile", neff, "--input", `x=${x}`, "-o", out]);
      expect([r.code, r.err]).toEqual([2, why]);
    }
    expect(new Uint8Array(readFileSync(neff))).toEqual(bytes);
    expect(readFileSync(x, "utf8")).toBe("[1, -2, 3, -4]");
    // Another existing file is replaced without asking.
    writeFileSync(join(dir, "trace.json"), "old");
    expect((await nrt(["profile", neff, "--input", `x=${x}`, "-o", join(dir, "trace.json")])).code).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, "trace.json"), "utf8")).traceEvents.length).toBeGreaterThan(0);
  }, 60_000);

  test("a NEFF over the cap is refused by its size, unread; a device by its kind", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nrt-profile-"));
    const big = join(dir, "big.neff");
    writeFileSync(big, new Uint8Array(0));
    const cap = neffFileCap();
    truncateSync(big, cap + 1); // sparse: nothing written
    const r = await nrt(["profile", big]);
    expect([r.code, r.err]).toEqual([
      1,
      `nrt profile: Cannot profile ${big}: it is ${cap + 1} bytes, over the ${cap}-byte cap for a NEFF file ` +
      "(NRT_NEFF_MAX_BYTES raises it)",
    ]);
    const zero = await nrt(["profile", "/dev/zero"]);
    expect([zero.code, zero.err]).toEqual([
      1,
      "nrt profile: Cannot profile /dev/zero: it is a character device, not a file",
    ]);
  });
});
