import { describe, expect, test } from "bun:test";
import { runNrt as capture } from "./_cli.ts";

const COMMANDS = ["serve", "demo", "inspect", "run", "pack", "devices", "bench", "device-sim"];

describe("the nrt command", () => {
  for (const cmd of COMMANDS) {
    test(`nrt ${cmd} --help prints its usage and exits 0`, async () => {
      const r = await capture([cmd, "--help"]);
      expect(r.code).toBe(0);
      expect(r.out).toContain(`nrt ${cmd}`);
    });
  }

  test("every command's --help lists its options, nrt serve's and nrt compile's too", async () => {
    const options: Record<string, string[]> = {
      serve: [
        "--models DIR",
        "--model-name NAME",
        "--arch A",
        "--device ADDRESS",
        "--host H",
        "--port P",
        "--grpc-port P",
        "--max-body BYTES",
        "--body-timeout S",
        "--compile-timeout S",
        "--drain-timeout S",
        "--demo",
        "--admin",
        "--admin-token-file FILE",
        "--model-control MODE",
        "--allowed-host NAME",
      ],
      compile: ["-o, --out MODEL.neff", "--target T", "--input-shape NAME=DIMS"],
    };
    for (const cmd of [...COMMANDS, "compile", "ls", "monitor", "profile"]) {
      for (const args of [[cmd, "--help"], ["help", cmd]]) {
        const r = await capture(args);
        expect(r.code).toBe(0);
        const [, listing] = r.out.split("\nOptions:\n");
        expect(listing).toContain("-h, --help");
        for (const o of options[cmd] ?? []) {
          expect(listing).toMatch(new RegExp(`^ +${o.replaceAll(/[.-]/g, "\\$&")} `, "m"));
        }
      }
    }
  });

  test("nrt with no command prints the command list on stderr and exits 2; an unknown one too", async () => {
    const none = await capture([]);
    expect(none.code).toBe(2);
    for (const cmd of COMMANDS) expect(none.err).toContain(`nrt ${cmd}`);
    const bad = await capture(["frobnicate"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('unknown command "frobnicate"');
    expect((await capture(["help", "pack"])).out).toContain("Usage: nrt pack");
  });

  test("nrt devices --json lists the simulated generation chosen by --arch", async () => {
    const cayman = JSON.parse((await capture(["devices", "--json"])).out).devices[0];
    expect(cayman).toMatchObject({
      arch: "cayman",
      generation: "NC-v3",
      neuronCores: 8,
      hbmBytes: 96 * 2 ** 30,
      q7CoresPerNc: 8,
    });
    const sunda = JSON.parse((await capture(["devices", "--arch", "sunda", "--json"])).out).devices[0];
    expect(sunda).toMatchObject({ arch: "sunda", neuronCores: 2, virtualCoreSize: 1 });
    const text = await capture(["devices", "--arch", "mariana"]);
    expect(text.code).toBe(0);
    // Mariana has no instance family: the generation alone, no empty one after a comma.
    expect(text.out.startsWith("nd0  mariana (NC-v4)  8 NeuronCores × 8 Q7  ")).toBe(true);
    expect((await capture(["devices", "--arch", "sunda"])).out.startsWith("nd0  sunda (NC-v2, trn1/inf2)  ")).toBe(
      true,
    );
    expect((await capture(["devices"])).out.startsWith("nd0  cayman (NC-v3, trn2)  ")).toBe(true);
  });

  test("a failing command exits 1 with its message on stderr; a usage error exits 2", async () => {
    const missing = await capture(["inspect", "/nonexistent.neff"]);
    expect(missing.code).toBe(1);
    expect(missing.err.length).toBeGreaterThan(0);
    expect((await capture(["inspect"])).code).toBe(2);
    expect((await capture(["bench", "nosuch"])).code).toBe(2);
  });
});
