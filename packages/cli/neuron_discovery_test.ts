import { describe, expect, test } from "bun:test";
import { commandLineOf } from "./neuron_discovery.ts";

describe("commandLineOf (the command an announcement records, nrt ls's COMMAND)", () => {
  const script = "/work/main/packages/cli/main.ts";

  test("the program as typed and the script from the working folder, not the runtime's executable path", () => {
    const bun = "/work/main/node_modules/bun/bin/bun.exe";
    expect(commandLineOf({ argv0: "bun", argv: [bun, script, "serve", "--demo"], cwd: "/work/main" }))
      .toBe("bun packages/cli/main.ts serve --demo");
    expect(commandLineOf({ argv0: "deno", argv: ["/usr/bin/deno", script, "ls"], cwd: "/work/main/" }))
      .toBe("deno packages/cli/main.ts ls");
    // A script outside the working folder keeps its path; a program typed with its path keeps it.
    expect(commandLineOf({ argv0: "bun", argv: [bun, script, "serve"], cwd: "/tmp" }))
      .toBe("bun /work/main/packages/cli/main.ts serve");
    expect(commandLineOf({ argv0: "/usr/local/bin/bun", argv: [bun, script, "serve"], cwd: "/work/main/packages" }))
      .toBe("/usr/local/bin/bun cli/main.ts serve");
    // Without argv0, the executable's name.
    expect(commandLineOf({ argv: [bun, script, "serve"], cwd: "/work/main" })).toBe(
      "bun.exe packages/cli/main.ts serve",
    );
  });

  test("through the npm bin shim (argv0 nrt) it is the nrt command", () => {
    expect(commandLineOf({ argv0: "nrt", argv: ["/x/bun", script, "serve", "--demo"], cwd: "/elsewhere" }))
      .toBe("nrt serve --demo");
  });
});
