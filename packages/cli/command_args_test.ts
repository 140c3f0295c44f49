import { describe, expect, test } from "bun:test";
import {
  type CommandSpec,
  formatHelp,
  helpRequested,
  parseCommandArgs,
  parseIntegerOption,
  UsageError,
} from "./command_args.ts";

const SPEC = {
  name: "demo-cmd",
  usage: "nrt demo-cmd FILE [-o OUT] [--tag T ...] [--json]",
  summary: "A command for the tests.",
  options: {
    out: { type: "string", short: "o", value: "OUT", description: "where it goes" },
    tag: { type: "string", multiple: true, value: "T", description: "a tag" },
    json: { type: "boolean", description: "print JSON" },
  },
  positionals: { min: 1, max: 2, name: "FILE" },
} as const satisfies CommandSpec;

/** The message of the UsageError `f` throws. */
function usageMessage(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as UsageError).message;
  }
  throw new Error("expected a UsageError");
}

describe("parseCommandArgs()", () => {
  test("parseCommandArgs() reads values after the option, joined with =, short and repeated", () => {
    const a = parseCommandArgs(SPEC, ["in.neff", "-o", "x.neff", "--tag=a", "--tag", "b", "--json"]);
    expect(a).toEqual({
      help: false,
      values: { out: "x.neff", tag: ["a", "b"], json: true },
      positionals: ["in.neff"],
    });
    expect(parseCommandArgs(SPEC, ["-ox.neff", "a", "b"]).values.out).toBe("x.neff");
    expect(parseCommandArgs(SPEC, ["--", "--not-an-option"]).positionals).toEqual(["--not-an-option"]);
    // A value may start with one dash (a negative number is for the command to judge).
    expect(parseCommandArgs(SPEC, ["f", "-o", "-1"]).values.out).toBe("-1");
  });

  test("parseCommandArgs() reports --help and -h before anything else is checked", () => {
    expect(parseCommandArgs(SPEC, ["--help"]).help).toBe(true);
    expect(parseCommandArgs(SPEC, ["--frob", "-h"]).help).toBe(true);
    expect(parseCommandArgs(SPEC, ["f"]).help).toBe(false);
  });

  test("parseCommandArgs() refuses a missing value, naming the option as typed", () => {
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "--out"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: --out needs a value",
    );
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "-o"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: -o needs a value",
    );
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "--out", "--json"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: --out needs a value",
    );
  });

  test("parseCommandArgs() refuses an unknown option and a value given to a flag", () => {
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "--frob"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: unknown option --frob",
    );
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "-x"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: unknown option -x",
    );
    expect(usageMessage(() => parseCommandArgs(SPEC, ["f", "--json=yes"]))).toBe(
      "Cannot parse nrt demo-cmd arguments: --json takes no value",
    );
  });

  test("parseCommandArgs() counts the positional arguments", () => {
    expect(usageMessage(() => parseCommandArgs(SPEC, []))).toBe("Cannot parse nrt demo-cmd arguments: FILE is missing");
    expect(usageMessage(() => parseCommandArgs(SPEC, ["a", "b", "c"]))).toBe(
      'Cannot parse nrt demo-cmd arguments: unexpected argument "c"',
    );
    const none = { ...SPEC, positionals: { min: 0, max: 0, name: "arguments" } };
    expect(usageMessage(() => parseCommandArgs(none, ["a"]))).toBe(
      'Cannot parse nrt demo-cmd arguments: unexpected argument "a" (nrt demo-cmd takes no arguments)',
    );
  });
});

describe("parseIntegerOption()", () => {
  test("parseIntegerOption() reads a decimal integer within its range", () => {
    expect(parseIntegerOption(SPEC, "--port", "0", 0, 65535)).toBe(0);
    expect(parseIntegerOption(SPEC, "--port", "65535", 0, 65535)).toBe(65535);
  });

  test("parseIntegerOption() refuses signs, fractions, exponents, hex and out-of-range values", () => {
    for (const bad of ["-1", "1.5", "1e3", "0x10", "", " 1", "65536", "99999999999999999"]) {
      expect(usageMessage(() => parseIntegerOption(SPEC, "--port", bad, 0, 65535))).toBe(
        `Cannot parse nrt demo-cmd arguments: --port ${bad} is not an integer from 0 to 65535`,
      );
    }
  });
});

describe("formatHelp()", () => {
  test("formatHelp() prints the usage, the summary and one aligned line per option, --help last", () => {
    expect(formatHelp(SPEC)).toBe(
      [
        "Usage: nrt demo-cmd FILE [-o OUT] [--tag T ...] [--json]",
        "",
        "A command for the tests.",
        "",
        "Options:",
        "  -o, --out OUT  where it goes",
        "      --tag T    a tag (repeatable)",
        "      --json     print JSON",
        "  -h, --help     print this help",
      ].join("\n"),
    );
  });
});

describe("helpRequested()", () => {
  test("helpRequested() finds -h or --help among unknown options, but not after --", () => {
    expect(helpRequested(["--models", "d", "--help"])).toBe(true);
    expect(helpRequested(["-h"])).toBe(true);
    expect(helpRequested(["--models", "d"])).toBe(false);
    expect(helpRequested(["--", "--help"])).toBe(false);
  });
});
